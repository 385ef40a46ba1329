"""Ground helpers every stage may import: error types, atomic output, cache keys, the toolchain."""
