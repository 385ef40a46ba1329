"""Reuse profiles: private traces, interleaving, the reuse engines, coherence, line numbering."""
