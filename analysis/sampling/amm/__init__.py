"""AMM per-block sampled profiles (analysis/SAMPLING.md section 1)."""
