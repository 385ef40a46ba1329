"""Measured ground truth for runtimes: native parallel-region time of each benchmark on this host.

Median of repeated cold-cache runs of the original OpenMP program (not the translated one), with
the same region boundaries the harness uses for the trace (pbench_region_begin/end).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

import pandas as pd


@dataclass(frozen=True)
class MeasureConfig:
    """How to measure: size, thread counts, repeats, cold start."""

    workdir: Path
    size: str = "MINI"
    threads: tuple[int, ...] = (1, 2)
    repeats: int = 5
    cold: bool = True


def measure_benchmark(bench, cfg: MeasureConfig) -> list[dict]:
    """Rows (benchmark, threads, median/min/max region seconds) for one benchmark."""
    from benchmarks.polybench.build import build_native, run_native

    exe = cfg.workdir / "native" / f"{bench.name}-{cfg.size}"
    build_native(bench, cfg.size, exe)
    rows = []
    for threads in cfg.threads:
        samples = [run_native(exe, threads, cold=cfg.cold).region_seconds for _ in range(cfg.repeats)]
        rows.append({"benchmark": bench.name, "cores": threads, "measured_s": statistics.median(samples),
                     "measured_min_s": min(samples), "measured_max_s": max(samples), "repeats": cfg.repeats})
    return rows


def measure_suite(benches, cfg: MeasureConfig) -> pd.DataFrame:
    """Measured region times for every benchmark, run one after another so they do not disturb each other."""
    return pd.DataFrame([row for bench in benches for row in measure_benchmark(bench, cfg)])


def runtime_errors(predicted: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """Join predictions with measurements; relative error = |pred - meas| / meas."""
    joined = predicted.merge(measured, on=["benchmark", "cores"], how="inner")
    joined["rel_error"] = (joined["runtime_s"] - joined["measured_s"]).abs() / joined["measured_s"]
    return joined
