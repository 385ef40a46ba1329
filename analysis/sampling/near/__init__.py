"""Near reuses measured exactly in time windows: private and shared (analysis/SAMPLING.md section 3)."""
