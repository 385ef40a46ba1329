"""Sampled reuse profiles: AMM per-block sampling and SHARDS source sampling."""
