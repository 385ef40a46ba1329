"""Sampled vs exact reuse profiles on a synthetic ~20M-access multi-block trace (issue #6).

Target: a 1% sampled profile >= 20x faster than the exact one, within 1 percentage point of
the exact profile's SDCM hit rate at L1 32KB/8-way, L2 256KB/8-way and L3 20MB/20-way.
Both sampling methods of analysis.sampling are measured; only their own rows claim the target.

The trace (8-byte elements, 64-byte lines) has three phases with distinct blocks:
matmul ijk (n=150: body block 2 accesses, C update block 2 accesses), two sweeps over an
8 MB array (reuse ~131K lines: L2 misses, L3 hits), and 1.5M random gathers into a 2 MB
table. The timings exclude trace generation; both sides stream the same 1M-row chunks; each
time is the best of 3 runs.

Input scaling (AMM Sec. 4.2): the matmul n=25 trace, sampled at 1% (instance method, as in the
paper) and at 100%, re-weighted with the n=200 block counts, against the exact n=200 profile.
"""
from __future__ import annotations

import time

import numpy as np

from analysis.profiles import ReuseProfile
from instrument.trace_types import TraceChunk, TraceInfo

LEVELS = (("L1", 32 << 10, 8), ("L2", 256 << 10, 8), ("L3", 20 << 20, 20))
LINE = 64
CHUNK_ROWS = 1 << 20
REPEATS = 3


def _instances(block: np.ndarray, per_instance: dict[int, int]) -> np.ndarray:
    """0-based instance of every access: its rank among the block's accesses // accesses per instance."""
    inst = np.empty(block.shape[0], dtype=np.int64)
    for b, m in per_instance.items():
        idx = np.flatnonzero(block == b)
        inst[idx] = np.arange(idx.shape[0]) // m
    return inst


def synthetic_trace(n: int = 150, sweep_elems: int = 1 << 20, gathers: int = 1_500_000,
                    seed: int = 0) -> tuple[np.ndarray, np.ndarray, dict[int, int]]:
    """(addresses, block ids, accesses per instance) of the three-phase trace."""
    rng = np.random.default_rng(seed)
    a0, b0, c0, y0, t0 = (np.uint64(base << 28) for base in range(1, 6))
    i, j, k = np.meshgrid(np.arange(n), np.arange(n), np.arange(n), indexing="ij")
    body = np.stack([a0 + (i * n + k).astype(np.uint64) * 8, b0 + (k * n + j).astype(np.uint64) * 8], axis=-1)
    cij = (c0 + (np.arange(n * n, dtype=np.uint64) * 8)).reshape(n, n, 1)
    cupd = np.repeat(cij, 2, axis=-1)[:, :, None, :]
    mm_addr = np.concatenate([body.reshape(n, n, 2 * n), cupd.reshape(n, n, 2)], axis=-1).ravel()
    mm_block = np.concatenate([np.full((n, n, 2 * n), 1, np.int32), np.full((n, n, 2), 2, np.int32)],
                              axis=-1).ravel()
    sweep = y0 + np.tile(np.arange(sweep_elems, dtype=np.uint64) * 8, 2)
    gather = t0 + rng.integers(0, (2 << 20) // 8, size=gathers).astype(np.uint64) * 8
    addr = np.concatenate([mm_addr, sweep, gather])
    block = np.concatenate([mm_block, np.full(sweep.shape[0], 3, np.int32), np.full(gathers, 4, np.int32)])
    return addr, block, {1: 2, 2: 2, 3: 1, 4: 1}


def as_trace(addr: np.ndarray, block: np.ndarray, per_instance: dict[int, int],
             rows: int = CHUNK_ROWS) -> tuple[TraceInfo, list[TraceChunk]]:
    """Wrap arrays as the tracer's (TraceInfo, chunks) contract."""
    inst = _instances(block, per_instance)
    counts = {b: int((block == b).sum()) // m for b, m in per_instance.items()}
    info = TraceInfo("synthetic", 1, "synthetic", [], True, int(addr.shape[0]), {}, counts)
    return info, as_chunks(addr, block, inst, rows)


def hit_rates(profile: ReuseProfile) -> dict[str, float]:
    """SDCM hit rate of each benchmark cache level."""
    from analysis.sdcm import expected_hits

    return {name: expected_hits(profile, assoc, size // LINE) / profile.total for name, size, assoc in LEVELS}


def exact_run(chunks: list[TraceChunk]) -> tuple[float, ReuseProfile]:
    """Time the exact engine over the whole trace (what `pptmc profile` does on one core)."""
    from analysis.reuse import ReuseEngine

    start = time.perf_counter()
    engine = ReuseEngine()
    for c in chunks:
        engine.feed(c.addr >> np.uint64(6))
    return time.perf_counter() - start, engine.histogram()


def sampled_run(info: TraceInfo, chunks: list[TraceChunk], method: str, rate: float,
                window: int) -> tuple[float, ReuseProfile]:
    """Time one sampled profile, mixing per-block profiles with the trace's own counts."""
    from analysis.sampling import sample_profile

    start = time.perf_counter()
    prof = sample_profile(info, chunks, rate, window=window, seed=1, method=method).combined()
    return time.perf_counter() - start, prof


def matmul_chunks(n: int, slabs_per_chunk: int = 16) -> tuple[TraceInfo, list[TraceChunk]]:
    """ijk matmul trace (blocks 1 = body with A and B loads, 2 = C update), built a few i-rows at a time."""
    j, k = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    body_inst = (j * n + k).astype(np.int64)
    chunks = []
    for i0 in range(0, n, slabs_per_chunk):
        parts = [_matmul_slab(n, i, j, k, body_inst) for i in range(i0, min(n, i0 + slabs_per_chunk))]
        cols = [np.concatenate(c) for c in zip(*parts)]
        chunks += as_chunks(*cols)
    info = TraceInfo(f"matmul{n}", 1, "synthetic", [], True, 2 * n ** 3 + 2 * n * n, {}, {1: n ** 3, 2: n * n})
    return info, chunks


def _matmul_slab(n: int, i: int, j: np.ndarray, k: np.ndarray, body_inst: np.ndarray):
    """(addr, block, instance) of one i-row of the ijk loop nest."""
    a0, b0, c0 = np.uint64(1 << 28), np.uint64(2 << 28), np.uint64(3 << 28)
    body = np.stack([a0 + (i * n + k).astype(np.uint64) * 8, b0 + (k * n + j).astype(np.uint64) * 8], -1)
    cupd = np.repeat((c0 + (i * n + np.arange(n, dtype=np.uint64)) * 8)[:, None], 2, -1)
    addr = np.concatenate([body.reshape(n, 2 * n), cupd], -1).ravel()
    block = np.concatenate([np.full((n, 2 * n), 1, np.int32), np.full((n, 2), 2, np.int32)], -1).ravel()
    binst = np.repeat(body_inst + i * n * n, 2, -1).reshape(n, 2 * n)
    cinst = np.repeat((i * n + np.arange(n))[:, None], 2, -1)
    return addr, block, np.concatenate([binst, cinst], -1).ravel().astype(np.int64)


def as_chunks(addr: np.ndarray, block: np.ndarray, inst: np.ndarray, rows: int = CHUNK_ROWS) -> list[TraceChunk]:
    """TraceChunks of at most `rows` accesses."""
    chunks = []
    for s in range(0, addr.shape[0], rows):
        e = min(s + rows, addr.shape[0])
        z = e - s
        chunks.append(TraceChunk(addr[s:e], np.full(z, 8, np.uint32), np.zeros(z, bool), block[s:e], inst[s:e],
                                 np.zeros(z, np.uint16), np.zeros(z, np.int32), np.full(z, -1, np.int32),
                                 np.full(z, -1, np.int64), np.zeros(z, bool)))
    return chunks


def scaling_rows(small_n: int = 25, large_n: int = 200) -> list[dict]:
    """Hit-rate error of AMM input scaling, matmul small_n -> large_n."""
    from analysis.sampling import sample_profile
    from analysis.scaling import scale_profile

    s_info, s_chunks = matmul_chunks(small_n)
    l_info, l_chunks = matmul_chunks(large_n)
    _, exact = exact_run(l_chunks)
    ref = hit_rates(exact)
    rows = []
    for rate in (1.0, 0.01):
        small = sample_profile(s_info, s_chunks, rate, window=1 << 20, seed=1, method="instance")
        est = hit_rates(scale_profile(small, l_info.block_counts).profile)
        for k in ref:
            rows.append({"benchmark": "scaling", "metric": f"matmul {small_n}->{large_n} rate {rate:g} {k} "
                         f"(exact {100 * ref[k]:.2f}%)", "value": round(100 * (est[k] - ref[k]), 2),
                         "unit": "pp error", "target": "", "ok": True})
    return rows


def _warm_up() -> None:
    """Compile the numba kernels outside the timed region."""
    info, chunks = as_trace(*synthetic_trace(n=8, sweep_elems=64, gathers=64))
    exact_run(chunks)
    for method in ("instance", "spatial", "hybrid"):
        sampled_run(info, chunks, method, 0.5, 64)


def _best_of(fn, repeats: int = REPEATS):
    """Fastest of a few runs (the machine is shared); every run returns the same profile."""
    runs = [fn() for _ in range(repeats)]
    return min(t for t, _ in runs), runs[0][1]


def run() -> list[dict]:
    """Rows: speed-up and worst hit-rate error per sampling method."""
    _warm_up()
    info, chunks = as_trace(*synthetic_trace())
    t_exact, exact = _best_of(lambda: exact_run(chunks))
    ref = hit_rates(exact)
    rows = [{"benchmark": "sampling", "metric": "exact profile time (20M refs)", "value": round(t_exact, 2),
             "unit": "s", "target": "", "ok": True}]
    rows += [{"benchmark": "sampling", "metric": f"exact hit rate {k}", "value": round(100 * v, 2),
              "unit": "%", "target": "", "ok": True} for k, v in ref.items()]
    for method, window in (("spatial", 0), ("instance", 1 << 12), ("instance", 1 << 16), ("hybrid", 1 << 12)):
        t, prof = _best_of(lambda: sampled_run(info, chunks, method, 0.01, max(window, 1)))
        est = hit_rates(prof)
        err = max(abs(est[k] - ref[k]) for k in ref)
        label = method if method == "spatial" else f"{method} W={window}"
        rows.append({"benchmark": "sampling", "metric": f"1% {label} speed-up", "value": round(t_exact / t, 1),
                     "unit": "x", "target": ">= 20", "ok": t_exact / t >= 20})
        rows.append({"benchmark": "sampling", "metric": f"1% {label} max hit-rate error",
                     "value": round(100 * err, 2), "unit": "pp", "target": "<= 1", "ok": err <= 0.01})
        rows += [{"benchmark": "sampling", "metric": f"1% {label} hit rate {k}", "value": round(100 * v, 2),
                  "unit": "%", "target": "", "ok": True} for k, v in est.items()]
    return rows + scaling_rows()


if __name__ == "__main__":
    for row in run():
        print(row)
