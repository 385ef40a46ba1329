"""The [curves] table of a detected machine: figures per active-core count from the curve steps' raw runs.

machines/probeplan.py plans the steps (curve_steps: cores.c, stream.c, overhead.c and transfer.c on p = 1, 2,
4, .. and all cores, threads pinned) and repeats each until its last runs agree (is_stable); this module turns
their output into the table machines/curves.py validates: each figure the median of the step's last
STABLE_WINDOW runs, and its spread, (max - min) / median over those runs.
"""
from __future__ import annotations

import statistics
from typing import Callable, Mapping

from machines.probeplan import (KIB, MIB, STABLE_SPREAD, STABLE_WINDOW, Effort, SysCache, curve_cores,
                                llc_total_bytes, ram_set_bytes, relative_spread, shared_slice_bytes, stable_window)

PerRun = Callable[[dict], float]


def _significant(value: float) -> float:
    """Four significant digits: a figure is no more precise than its repeats, and a small one never rounds to 0."""
    return float(f"{value:.4g}")


def cold_extra_ns(run: Mapping[str, float], p: int) -> float:
    """coldstart.c's first region after the flush less a warm one, on p threads (0 where the warm one was slower)."""
    return max(0.0, run[f"cold_ns_{p}"] - run[f"warm_ns_{p}"])


def curve_of(runs: list[dict], per_run: Mapping[int, PerRun]) -> tuple[list[float], list[float]]:
    """(figure, spread) per core count of `per_run` (p -> the figure of one run), over the stable window's runs."""
    window = stable_window(runs)
    values = {p: [get(run) for run in window] for p, get in per_run.items()}
    return ([_significant(statistics.median(v)) for v in values.values()],
            [round(relative_spread(v), 4) for v in values.values()])


def _runs_note(raw: Mapping[str, list[dict]], keys: list[str]) -> str:
    """How many runs each curve step took, e.g. 'cores.c 3 runs'."""
    return ", ".join(f"{key.split('.')[1]}.c {len(raw[key])} runs" for key in keys)


def curve_figures(raw: Mapping[str, list[dict]], caches: list[SysCache], cores: int, ghz: float,
                  effort: Effort) -> dict:
    """The TOML-ready [curves] table from the curve steps' runs (transfer_cycles only on 2 cores or more;
    shared_line_ns only where a cache level is shared)."""
    points = curve_cores(cores)
    pairs = [p for p in points if p >= 2]
    table: dict = {"cores": points}
    spread: dict = {}

    def put(name: str, runs: list[dict], per_run: Mapping[int, PerRun]) -> None:
        """Store one figure's curve and its spread."""
        table[name], spread[name] = curve_of(runs, per_run)

    ops = raw["curves.cores"]
    put("op_throughput_scale", ops, {p: (lambda run, p=p: run["ops_ns_1"] / run[f"ops_ns_{p}"]) for p in points})
    if all("clock_ns_1" in run for run in ops):
        put("clock_scale", ops, {p: (lambda run, p=p: run["clock_ns_1"] / run[f"clock_ns_{p}"]) for p in points})
    cold = raw.get("coldstart") or []
    if cold and all(f"cold_ns_{p}" in run for run in cold for p in points):
        put("cold_start_ns", cold,
            {p: (lambda run, p=p: cold_extra_ns(run, p)) for p in points})
    put("bandwidth_gbs", raw["curves.stream"], {p: (lambda run, p=p: run[f"gbs_{p}"]) for p in points})
    shared = any(c.shared for c in caches)
    if shared:
        put("shared_line_ns", ops, {p: (lambda run, p=p: run[f"shared_ns_{p}"]) for p in points})
    overhead = raw["curves.overhead"]
    put("fork_join_ns", overhead, {p: (lambda run, p=p: run[f"fork_join_ns_{p}"]) for p in points})
    put("barrier_ns", overhead, {p: (lambda run, p=p: run[f"barrier_ns_{p}"]) for p in points})
    keys = ["curves.cores", "curves.stream", "curves.overhead"]
    if pairs:
        put("transfer_cycles", raw["curves.transfer"],
            {p: (lambda run, p=p: run[f"other_ns_{p}"] * ghz) for p in pairs})
        keys.append("curves.transfer")
    table["source"] = _curve_source(raw, keys, caches, cores, effort, shared)
    table["spread"] = spread
    return table


def _curve_source(raw: Mapping[str, list[dict]], keys: list[str], caches: list[SysCache], cores: int,
                  effort: Effort, shared: bool) -> str:
    """What each curve measured, how often its step ran and how its figure and spread are taken."""
    slice_bytes, ram = shared_slice_bytes(caches, effort), ram_set_bytes(caches, effort)
    llc = llc_total_bytes(caches, cores)
    ram_note = "" if ram >= 2 * llc else " (set not above the last-level cache: may be optimistic)"
    parts = ["threads pinned (OMP_PROC_BIND=close, OMP_PLACES=cores)",
             ("op_throughput_scale: cores.c, the slowest thread's ns per operation of 8 independent integer and "
              "floating-point add chains on 1 thread over that on p; clock_scale: the same of one dependent chain "
              "of integer adds"),
             "cold_start_ns: coldstart.c on p threads (first region after the flush less a warm one)",
             f"bandwidth_gbs: stream.c read bandwidth over {ram // MIB} MiB on p threads{ram_note}",
             "fork_join_ns, barrier_ns: overhead.c on p threads (empty region; one-iteration-per-thread omp for)"]
    if shared:
        parts.append(f"shared_line_ns: cores.c, the slowest thread's ns per line reading its own {slice_bytes // KIB} "
                     f"KiB slice, one word per line (p slices above the shared cache's size read partly from RAM)")
    if "curves.transfer" in keys:
        parts.append("transfer_cycles: transfer.c on p threads, rows of one page that pass to the next thread every "
                     "phase (a line p cores write in turn), ns per line per core x frequency")
    parts.append(f"each step run until its last {STABLE_WINDOW} runs agree within {STABLE_SPREAD:.0%} on every "
                 f"figure, at most {max(STABLE_WINDOW, effort.curve_runs)} runs ({_runs_note(raw, keys)}); figure = "
                 f"median of the last {STABLE_WINDOW} runs, spread = their (max - min) / median")
    return "; ".join(parts)
