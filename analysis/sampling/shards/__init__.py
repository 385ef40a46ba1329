"""SHARDS samples of source sampling: the LRU stacks, their kernels, the waiting queues and their spill, the per-set-class
and per-instance stacks, and the replay of periodic stretches (analysis/SAMPLING.md section 3)."""
