"""The samplers' methods and window defaults, in a light module the CLI builds its parsers from (the
samplers themselves load numba)."""
from __future__ import annotations

METHODS = ("instance", "spatial", "hybrid", "exact")   # per-block samplers (blocks.py)
DEFAULT_WINDOW = 1 << 12                                # per-block samplers' lookback

STREAM_METHODS = ("window", "spatial", "exact")         # stream samplers (streams.py)
# Window defaults chosen on benchmarks/bench_sampling.py's trace at 1% over 5 seeds: lookback 512
# with 512-access windows, max error 0.15-0.31 pp at 2 engine passes per measured access (lookback
# 1024: 0.18-0.34 pp at 3 passes; 1024/256: 0.07-0.18 pp at 5 passes; 4096/4096: up to 2.2 pp, too
# few windows). Source sampling uses 1024 (SOURCE_WINDOW, for heavy lines).
STREAM_WINDOW = 1 << 9
DEFAULT_WINDOW_LENGTH = 1 << 9

# Lookback of source sampling's windows (source.py). 1024 rather than the stream sampler's 512: a scalar
# reloaded every row of a loop nest is reused 700-1500 accesses apart, and only reuses within the lookback
# are measured in windows; the others come from the SHARDS far pool, which a seed that draws such a heavy
# line floods. jacobi-2d MEDIUM, 1%, seeds 1-8, worst of L1/L2/L3 x cores 1-16: 0.05-0.38 pp with 1024,
# 0.19-3.74 pp with 512 (seeds 3 and 5 draw a heavy line), at about 5% more CPU time; the bench's
# synthetic trace: 1.01 pp either way.
SOURCE_WINDOW = 1 << 10
