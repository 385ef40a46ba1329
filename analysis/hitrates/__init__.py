"""Cache hit rates from reuse profiles (SDCM) or from a set-associative simulator."""
