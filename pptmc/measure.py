"""Measured ground truth for runtimes: native parallel-region time of each benchmark on this host,
joined with the runtime model's prediction for the same size and machine (issue #7).

Native times are the original OpenMP program (not the translated one) with a cold-cache start and
the region boundaries the harness uses for the trace (pbench_region_begin/end). Measurements run
one after another, never in parallel, so they do not disturb each other, in rounds over the benchmarks
(`measure_suite`) so that the host's drift spreads over all of them.
"""
from __future__ import annotations

import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

import pandas as pd

from analysis.options import DEFAULT_OPTIONS, ModelOptions
from benchmarks.polybench.catalog import MEASURE_SIZE
from machines import probeplan
from machines.loader import dumps_toml, machine_to_dict
from machines.model import Machine
from common.errors import InputError
from common.io import atomic_path, write_text

Progress = Callable[[str], None]

DEFAULT_SIZE = MEASURE_SIZE
MODEL_COLUMNS = ("t_mem_s", "t_cpu_s", "t_incore_s", "t_fill_overlap_s", "t_tlb_s", "t_coherence_s", "t_strided_s",
                 "t_overhead_s", "contention_s", "t_dram_s", "dram_bytes")
SPEEDUP_COLUMNS = ("measured_speedup", "predicted_speedup", "speedup_error")
COLUMNS = ("benchmark", "cores", "measured_s", "measured_min_s", "measured_max_s", "repeats", "measured_noise",
           "predicted_s", *MODEL_COLUMNS, "rel_error", "rel_error_min", *SPEEDUP_COLUMNS)


@dataclass(frozen=True)
class MeasureConfig:
    """How to measure: size, thread counts, repeats, cold start."""

    workdir: Path
    size: str = DEFAULT_SIZE
    threads: tuple[int, ...] = (1, 2)
    repeats: int = 5
    cold: bool = True
    pin: bool = True  # one thread per core, no migration (pinned_environment)


def pinned_environment(base: Mapping[str, str]) -> dict[str, str]:
    """`base` with OMP_PROC_BIND=close and OMP_PLACES=cores unless it sets them: on this 2-core VM an
    unpinned 2-thread run of lu took 27 ms in 4 of 15 runs instead of 7 (a thread migrated or shared a
    core); pinned, the slowest of 15 was 7.4 ms."""
    return probeplan.pinned_environment(base)


def measure_benchmark(bench, cfg: MeasureConfig) -> list[dict]:
    """Rows (benchmark, threads, median/min/max region seconds) for one benchmark."""
    return measure_suite([bench], cfg).to_dict("records")


def measure_suite(benches, cfg: MeasureConfig, progress: Progress | None = None) -> pd.DataFrame:
    """Median/min/max region seconds per (benchmark, threads), measured in interleaved rounds.

    Each round runs every benchmark once per thread count, one run at a time (never in parallel). On a
    shared host the speed of memory and of the SMT sibling drifts over seconds to minutes (a serial atax
    varied 0.30-0.55 ms between two minutes); back-to-back repeats of one benchmark would all land in
    one such state, rounds spread every benchmark's samples over the whole measurement.
    """
    from benchmarks.polybench import build

    if cfg.repeats < 1:
        raise InputError(f"repeats {cfg.repeats}: give at least 1")
    say = progress or (lambda _msg: None)
    exes = {bench.name: native_binary(bench, cfg.size, cfg.workdir / "native") for bench in benches}
    env = pinned_environment(os.environ) if cfg.pin else dict(os.environ)
    if cfg.cold:
        env.update(cold_flush_environment(say))
    samples: dict[tuple[str, int], list[float]] = {(name, t): [] for name in exes for t in cfg.threads}
    for round_no in range(cfg.repeats):
        say(f"round {round_no + 1} of {cfg.repeats}: {len(exes)} benchmarks on {','.join(map(str, cfg.threads))} threads")
        for (name, threads), times in samples.items():
            times.append(build.run_native(exes[name], threads, cold=cfg.cold, env=env).region_seconds)
    return sample_table(samples)


def cold_flush_environment(say: Callable[[str], None]) -> dict[str, str]:
    """The harness's flush for cold runs, as detect's cold figures (probeplan.cold_flush_bytes: beyond the
    host's last-level cache); the harness's 64 MiB where the host describes no caches, which `say` reports."""
    try:
        return probeplan.harness_flush_environment(probeplan.host_facts())
    except probeplan.ProbeError as exc:
        say(f"cold runs flush the harness's default 64 MiB: {exc}")
        return {}


def sample_table(samples: Mapping[tuple[str, int], Sequence[float]]) -> pd.DataFrame:
    """Median/min/max seconds, run count and measured_noise (median_noise) per (benchmark, threads): the measured
    side of every comparison, from this host's runs or a probe kit's (times in the order of their rounds)."""
    return pd.DataFrame([{"benchmark": name, "cores": threads, "measured_s": statistics.median(times),
                          "measured_min_s": min(times), "measured_max_s": max(times), "repeats": len(times),
                          "measured_noise": median_noise(times)}
                         for (name, threads), times in samples.items()])


def median_noise(times: Sequence[float]) -> float:
    """How far the median moves between the runs of odd and of even rounds, over the median of all; NaN with
    fewer than 4 runs.

    Both halves span the whole measurement (rounds alternate), so they are two repeats of it under the same drift
    of the host: an error below this cannot be told from the measurement's own scatter. It is the scatter of a
    median of half the runs, so it errs high for the median of all of them."""
    if len(times) < 4:
        return float("nan")
    odd, even = statistics.median(times[0::2]), statistics.median(times[1::2])
    return abs(odd - even) / statistics.median(times)


def native_binary(bench, size: str, folder: Path) -> Path:
    """Build the original OpenMP program of `bench` at `size` into folder/<name>-<size> (measure's build)."""
    from benchmarks.polybench import build

    exe = Path(folder) / f"{bench.name}-{size}"
    exe.parent.mkdir(parents=True, exist_ok=True)
    build.build_native(bench, size, exe)
    return exe


def runtime_errors(predicted: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """Join predictions (runtime_s) with measurements; rel_error = |pred - median| / median.

    rel_error_min compares with the fastest run instead, the better estimate on a busy host.
    """
    joined = predicted.merge(measured, on=["benchmark", "cores"], how="inner")
    if "predicted_s" not in joined:
        joined["predicted_s"] = joined["runtime_s"]
    joined["rel_error"] = (joined["predicted_s"] - joined["measured_s"]).abs() / joined["measured_s"]
    if "measured_min_s" in joined:
        joined["rel_error_min"] = ((joined["predicted_s"] - joined["measured_min_s"]).abs()
                                   / joined["measured_min_s"])
    return joined


HOST_FILE = "host-machine.toml"


def cached_host_machine(outdir: Path, machine: str | None = None, detect: bool = False,
                        say: Progress | None = None) -> Machine:
    """`machine` if given; else this host's machine file cached in outdir, detected once (again with
    `detect`), so repeated measurements compare against the same description."""
    from machines import load_machine
    from machines.detect import detect_host
    from machines.loader import validate_machine_dict

    if machine:
        return load_machine(machine)
    path = Path(outdir) / HOST_FILE
    if detect or not path.is_file():
        (say or (lambda _msg: None))(f"detecting this host's machine file into {path}")
        data = detect_host(progress=say)
        validate_machine_dict(data, str(path))
        write_text(path, "# Written by `pptmc measure` (machines detect); schema: machines/SCHEMA.md\n"
                   + dumps_toml(data))
    return load_machine(path)


def machine_file(machine: Machine, workdir: Path) -> Path:
    """Write `machine` as a machine file in workdir, so the cached pipeline can name it by path."""
    path = Path(workdir) / "machine" / f"{machine.name}.toml"
    text = "# Written by pptmc measure; schema: machines/SCHEMA.md\n" + dumps_toml(machine_to_dict(machine))
    if not path.is_file() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, text)
    return path


def predict_benchmark(bench, size: str, threads: Sequence[int], workdir: Path, machine: Machine,
                      options: ModelOptions = DEFAULT_OPTIONS, progress: Progress | None = None) -> pd.DataFrame:
    """The pipeline's runtime prediction of one benchmark on `machine` with the model `options` (its steps
    cached under workdir/measure/work/<name>, apart from a suite run's, which keys other cores and machines)."""
    from pptmc.pipeline import benchmark_config, run_pipeline

    path = machine_file(machine, workdir)
    cfg = benchmark_config(bench, size, Path(workdir) / "measure", machines=(str(path),), cores=tuple(threads),
                           options=options)
    result = run_pipeline(cfg, progress or (lambda _msg: None))
    runtimes = result.runtimes[result.runtimes["machine"] == machine.name]
    return runtimes.drop(columns="machine").reset_index(drop=True).assign(benchmark=bench.name)


def check_threads(threads: Sequence[int], machine: Machine) -> None:
    """Refuse thread counts above the machine's cores, naming them."""
    too_many = [t for t in threads if t > machine.cores]
    if too_many:
        raise InputError(f"threads {','.join(map(str, too_many))}: machine {machine.name} has only "
                         f"{machine.cores} cores; measure at most that many")


def validate_runtimes(benches, size: str, threads: tuple[int, ...], workdir: Path, machine: Machine,
                      repeats: int = 5, progress: Progress | None = None,
                      options: ModelOptions = DEFAULT_OPTIONS, pin: bool = True) -> pd.DataFrame:
    """Measure and predict every benchmark on `machine` (the host), one table row per (benchmark, cores)."""
    say = progress or (lambda _msg: None)
    check_threads(threads, machine)
    cfg = MeasureConfig(workdir=Path(workdir), size=size, threads=tuple(threads), repeats=repeats, pin=pin)
    say(f"measuring {len(benches)} benchmarks at {size} on {','.join(map(str, threads))} threads, "
        f"{repeats} interleaved rounds")
    measured_all = measure_suite(benches, cfg, progress=say)
    return compare_runtimes(benches, measured_all, size, threads, workdir, machine, options, say)


def compare_runtimes(benches, measured_all: pd.DataFrame, size: str, threads: Sequence[int], workdir: Path,
                     machine: Machine, options: ModelOptions = DEFAULT_OPTIONS,
                     progress: Progress | None = None) -> pd.DataFrame:
    """Predict every benchmark on `machine` and join with its measured rows (sample_table's, from this host or
    a probe kit), with the 1 -> p speedups. A benchmark whose prediction fails keeps its measurement, with
    the cause in the `error` column."""
    say = progress or (lambda _msg: None)
    check_threads(threads, machine)
    frames = []
    for bench in benches:
        measured = measured_all[measured_all.benchmark == bench.name].reset_index(drop=True)
        say(f"{bench.name}: predicting")
        try:
            predicted = predict_benchmark(bench, size, threads, Path(workdir), machine, options)
        except Exception as exc:  # one broken pipeline must not discard the other measurements
            say(f"{bench.name}: prediction failed: {type(exc).__name__}: {exc}")
            frames.append(measured.assign(error=f"{type(exc).__name__}: {exc}"))
            continue
        frames.append(runtime_errors(predicted, measured).assign(error=""))
    df = pd.concat(frames, ignore_index=True)
    for col in ("measured_noise", "predicted_s", *MODEL_COLUMNS, "rel_error", "rel_error_min"):
        if col not in df:
            df[col] = float("nan")
    return add_speedups(df)[[*COLUMNS, "error"]]


def add_speedups(df: pd.DataFrame) -> pd.DataFrame:
    """measured_speedup = measured_s on 1 thread / on p, predicted_speedup likewise, speedup_error =
    predicted / measured - 1 (NaN where the benchmark has no 1-thread row)."""
    one = df[df["cores"] == 1].set_index("benchmark")
    base_measured = df["benchmark"].map(one["measured_s"])
    base_predicted = df["benchmark"].map(one["predicted_s"])
    out = df.assign(measured_speedup=base_measured / df["measured_s"],
                    predicted_speedup=base_predicted / df["predicted_s"])
    return out.assign(speedup_error=out["predicted_speedup"] / out["measured_speedup"] - 1.0)


def runtime_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Mean/median/max relative error per thread count, then over all rows (cores = 'all'), beside the mean
    measured_noise: the error the measurements themselves cannot resolve."""
    def stats(part: pd.DataFrame, cores) -> dict:
        row = {"cores": str(cores), "benchmarks": int(part["benchmark"].nunique()),
               "mean_abs_error": float(part["rel_error"].mean()),
               "median_abs_error": float(part["rel_error"].median()),
               "max_abs_error": float(part["rel_error"].max())}
        if "rel_error_min" in part:
            row["mean_abs_error_vs_min"] = float(part["rel_error_min"].mean())
        if "measured_noise" in part:  # the mean over the rows with 4 runs or more (NaN without any)
            row["mean_measured_noise"] = float(part["measured_noise"].mean())
        if "speedup_error" in part:  # 1 -> p for p > 1 (on one thread both speedups are 1 by definition)
            row["mean_abs_speedup_error"] = float(part.loc[part["cores"] != 1, "speedup_error"].abs().mean())
        return row

    ok = df[df["rel_error"].notna()]
    rows = [stats(part, cores) for cores, part in ok.groupby("cores", sort=True)]
    return pd.DataFrame(rows + [stats(ok, "all")])


def _pyplot():
    """Matplotlib with a file-only backend (no display where the suite runs)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _saved(fig, path: Path) -> Path:
    """Lay the figure out, write it atomically in the format its suffix names, close it."""
    fig.tight_layout()
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=path.suffix.lstrip(".") or "png", dpi=110)
    _pyplot().close(fig)
    return path


def write_runtime_figure(df: pd.DataFrame, path: Path) -> Path:
    """Predicted vs measured region time per benchmark, one panel per thread count (log scale)."""
    plt = _pyplot()
    import numpy as np

    cores = sorted(df["cores"].unique())
    fig, axes = plt.subplots(len(cores), 1, figsize=(11, 3.2 * len(cores)), squeeze=False)
    for ax, c in zip(axes[:, 0], cores):
        part = df[(df["cores"] == c) & df["predicted_s"].notna()].sort_values("benchmark")
        x = np.arange(len(part))
        err = [part["measured_s"] - part["measured_min_s"], part["measured_max_s"] - part["measured_s"]]
        ax.bar(x - 0.2, part["measured_s"], 0.4, yerr=err, capsize=2, label="measured (median, min-max)")
        ax.bar(x + 0.2, part["predicted_s"], 0.4, label="predicted")
        ax.set_xticks(x, part["benchmark"], rotation=30, ha="right")
        ax.set_yscale("log")
        ax.set_ylabel("region time [s]")
        noise = part["measured_noise"].mean() if "measured_noise" in part else float("nan")
        repeat_note = "" if np.isnan(noise) else f"; the medians' own noise {noise:.1%}"
        ax.set_title(f"{c} thread(s): mean abs error {part['rel_error'].mean():.1%}{repeat_note}")
        ax.legend(fontsize=8)
    return _saved(fig, path)


def write_speedup_figure(df: pd.DataFrame, path: Path) -> Path:
    """Measured and predicted 1 -> p speedup against the thread count, one panel per benchmark."""
    plt = _pyplot()

    names = sorted(df.loc[df["measured_speedup"].notna(), "benchmark"].unique())
    cols = min(4, max(1, len(names)))
    rows = max(1, -(-len(names) // cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 2.8 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        part = df[df["benchmark"] == name].sort_values("cores")
        ax.plot(part["cores"], part["cores"], ":", color="grey", label="linear")
        ax.plot(part["cores"], part["measured_speedup"], "o-", label="measured")
        ax.plot(part["cores"], part["predicted_speedup"], "s--", label="predicted")
        ax.set_xscale("log", base=2)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("threads")
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    axes[0, 0].set_ylabel("speedup over 1 thread")
    axes[0, 0].legend(fontsize=7)
    return _saved(fig, path)
