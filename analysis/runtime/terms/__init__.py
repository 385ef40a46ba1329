"""The terms of the runtime model, one module each with its formula and the machine fields it reads.

analysis/runtime/model.py gathers the region's facts, evaluates these terms for the busiest core, sums
them and applies DRAM contention (analysis/RUNTIME_MODEL.md is the specification).
"""
