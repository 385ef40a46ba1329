"""Which runtime terms earn their place: each term a machine file enables, switched off alone, predicted against
the native times of probe kit results (as `pptmc measure --ingest`), on every machine given.

    python -m benchmarks.term_ablation --case RESULTS=MACHINE.toml [--case RESULTS2=MACHINE2.toml ...]
                                       [--benchmarks 2mm,lu] [-o table.csv]

A term is switched off by clearing the machine fields it reads (TERMS: the same fields whose absence the
model already treats as "no such term"); a machine without them has no row for that term. For each case
(results folder and the machine file of the host that produced them) and thread count it prints the mean
absolute error over the benchmarks with every term and with the term switched off; `gain` is the second minus
the first (positive: the term helps). The verdict says, per term and machine (CPU model in the results'
kit.json), whether the term helps, hurts or is not told apart: the mean gain over the benchmarks with a 95 %
interval from resampling them (would it hold on other programs?). The issue's rule keeps a term in the
default only where it helps on at least two machines; a term whose figure comes from its own microbenchmark
may also stand on its documented mechanism (RUNTIME_MODEL.md).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from common.errors import InputError
from common.io import write_table
from machines import load_machine
from machines.curves import Curves
from machines.model import Machine


def _without_curves(machine: Machine, *figures: str) -> Machine | None:
    """`machine` without the named curves (None when it has none of them)."""
    curves = machine.curves
    if curves is None or not any(curves.has(f) for f in figures):
        return None
    kept = {k: v for k, v in curves.figures.items() if k not in figures}
    spread = {k: v for k, v in curves.spread.items() if k not in figures}
    return replace(machine, curves=Curves(cores=curves.cores, figures=kept, spread=spread))


def _no_conflict_refills(m: Machine) -> Machine | None:
    if not any(c.conflict_refill_ns for c in m.caches):
        return None
    return replace(m, caches=tuple(replace(c, conflict_refill_ns=0.0) for c in m.caches))


def _no_column_updates(m: Machine) -> Machine | None:
    if not m.caches[0].column_update_ns:
        return None
    return replace(m, caches=(replace(m.caches[0], column_update_ns=()), *m.caches[1:]))


def _no_tlb_rmw(m: Machine) -> Machine | None:
    if not any(t.rmw_miss_cycles for t in m.tlbs):
        return None
    return replace(m, tlbs=tuple(replace(t, rmw_miss_cycles=0.0) for t in m.tlbs))


def _no_transfer(m: Machine) -> Machine | None:
    if not m.transfer_cycles and (m.curves is None or not m.curves.has("transfer_cycles")):
        return None
    m = replace(m, transfer_cycles=0.0, upgrade_cycles=0.0)  # a machine file has no upgrades without transfers
    return _without_curves(m, "transfer_cycles") or m


def _no_cold_start(m: Machine) -> Machine | None:
    if not (m.parallel.cold_start_ns or m.parallel.cold_start_one_ns):
        return None
    m = replace(m, parallel=replace(m.parallel, cold_start_ns=0.0, cold_start_one_ns=0.0))
    return _without_curves(m, "cold_start_ns") or m


def _field_off(name: str) -> Callable[[Machine], Machine | None]:
    """Switch off a term read from one top-level number (None when the machine has it at 0 already)."""
    return lambda m: replace(m, **{name: type(getattr(m, name))()}) if getattr(m, name) else None


# term -> the machine without it (None: the machine does not enable it). Each switch clears the fields the
# term's module names as its machine fields (analysis/runtime/terms/*.py, RUNTIME_MODEL.md).
TERMS: dict[str, Callable[[Machine], Machine | None]] = {
    "in-core loop bound (llvm-mca)": _field_off("llvm_mcpu"),
    "chain overlap (reorder window)": _field_off("reorder_window_ops"),
    "chain lookahead": _field_off("chain_lookahead_ops"),
    "stores to new lines": _field_off("store_new_line_cycles"),
    "DTLB read-modify-write": _no_tlb_rmw,
    "strided cold lines": lambda m: (replace(m, ram=replace(m.ram, strided_cold_line_ns=()))
                                     if m.ram.strided_cold_line_ns else None),
    "conflict refills": _no_conflict_refills,
    "column updates": _no_column_updates,
    "coherence transfers and upgrades": _no_transfer,
    "upgrades": _field_off("upgrade_cycles"),
    "cold start": _no_cold_start,
    "op-throughput curve": lambda m: _without_curves(m, "op_throughput_scale", "clock_scale"),
    "DRAM bandwidth curve": lambda m: _without_curves(m, "bandwidth_gbs"),
    "fork/join and barrier curves": lambda m: _without_curves(m, "fork_join_ns", "barrier_ns"),
}
ALL = "(all terms)"
RESAMPLES = 2000  # bootstrap resamples of the benchmarks behind each machine's mean gain


def load_case(case: str):
    """(checked results, machine) of one --case RESULTS=MACHINE; InputError naming what is wrong."""
    from pptmc.probekit import load_results

    results, sep, machine_file = case.partition("=")
    if not sep or not results or not machine_file:
        raise InputError(f"--case {case!r}: give RESULTS=MACHINE.toml")
    return load_results(Path(results)), load_machine(machine_file)


def ablate_case(res, base: Machine, workdir: Path, benchmarks: str | None,
                say: Callable[[str], None]) -> pd.DataFrame:
    """One row per term the machine enables (and one with all terms), benchmark and thread count: the absolute
    relative error against the median native time."""
    from pptmc.commands.measure import select
    from pptmc.measure import compare_runtimes
    from pptmc.probekit import ingested_runs
    from analysis.options import DEFAULT_OPTIONS

    results = res.path
    benches, threads, measured = ingested_runs(res, select, benchmarks)
    variants = {ALL: base}
    for term, switch in TERMS.items():
        off = switch(base)
        if off is not None:
            variants[term] = replace(off, name=f"{base.name}-ablate{len(variants)}")
    rows = []
    for term, machine in variants.items():
        say(f"{results}: {term}")
        df = compare_runtimes(benches, measured, res.native["size"], threads, workdir, machine, DEFAULT_OPTIONS,
                              lambda _msg: None)
        rows += [{"case": str(results), "machine": res.record["host"]["model_name"], "size": res.native["size"],
                  "term": term, "benchmark": b, "cores": int(c), "abs_error": float(e)}
                 for b, c, e in zip(df["benchmark"], df["cores"], df["rel_error"])]
    return pd.DataFrame(rows)


def gains(table: pd.DataFrame) -> pd.DataFrame:
    """Per case, term, benchmark and thread count: the abs error with every term, without this one, and the gain."""
    keys = ["case", "benchmark", "cores"]
    full = table[table["term"] == ALL].set_index(keys)["abs_error"].rename("error_with")
    off = table[table["term"] != ALL].rename(columns={"abs_error": "error_without"}).join(full, on=keys)
    off["gain"] = off["error_without"] - off["error_with"]
    return off[["term", "machine", "case", "size", "benchmark", "cores", "error_with", "error_without", "gain"]]


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per term, case and thread count: the mean abs errors over the benchmarks, with and without, and the gain."""
    cols = ["error_with", "error_without", "gain"]
    return table.groupby(["term", "machine", "case", "size", "cores"], sort=False)[cols].mean().reset_index()


def verdict(table: pd.DataFrame, resamples: int = RESAMPLES, seed: int = 0) -> pd.DataFrame:
    """Per term and machine: the mean gain over its benchmarks (each benchmark of each case weighs the same, its
    thread counts averaged) with a 95 % interval from resampling those benchmarks (seeded): the term helps there
    when the interval lies above 0, hurts when below, has no effect when it moves no prediction, and is not told
    apart otherwise. The rule's answer: kept in the default only where it helps on at least two machines."""
    rng = np.random.default_rng(seed)
    rows = []
    for (term, machine), part in table.groupby(["term", "machine"], sort=False):
        per_bench = 100 * part.groupby(["case", "benchmark"])["gain"].mean().to_numpy()
        means = rng.choice(per_bench, size=(resamples, len(per_bench))).mean(axis=1)
        low, high = np.percentile(means, [2.5, 97.5])
        rows.append({"term": term, "machine": machine, "gain_pp": per_bench.mean(), "low_pp": low, "high_pp": high,
                     "effect": "no effect" if not per_bench.any() else
                     "helps" if low > 0 else "hurts" if high < 0 else "not told apart"})
    per = pd.DataFrame(rows)
    out = []
    for term, part in per.groupby("term", sort=False):
        helped = int((part["effect"] == "helps").sum())
        out.append({"term": term, "machines": len(part), "helps_on": helped,
                    "hurts_on": int((part["effect"] == "hurts").sum()),
                    "per_machine": "; ".join(f"{m}: {g:+.2f} [{lo:+.2f}, {hi:+.2f}] {e}" for m, g, lo, hi, e in
                                             zip(part["machine"], part["gain_pp"], part["low_pp"], part["high_pp"],
                                                 part["effect"])),
                    "two_machine_rule": "passes" if helped >= 2 else
                    ("measured on one machine" if len(part) < 2 else "fails")})
    return pd.DataFrame(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", required=True, metavar="RESULTS=MACHINE",
                        help="a probe kit's results folder and the machine file of the host that ran it")
    parser.add_argument("--benchmarks", help="comma-separated catalog names (default: all the results have)")
    parser.add_argument("--workdir", type=Path, help="where the pipelines' steps are cached (default: a temporary "
                                                     "folder per case)")
    parser.add_argument("-o", "--output", type=Path, help="write the gains table (per benchmark) as CSV or Parquet")
    args = parser.parse_args()
    say = (lambda msg: print(f"term_ablation: {msg}", file=sys.stderr, flush=True))
    parts = []
    try:
        cases = [load_case(case) for case in args.case]  # every case checked before the long work starts
        for i, (res, machine) in enumerate(cases):
            with tempfile.TemporaryDirectory(prefix="pptmc-ablation-") as tmp:
                work = args.workdir / f"case{i}" if args.workdir else Path(tmp)
                parts.append(ablate_case(res, machine, work, args.benchmarks, say))
    except InputError as exc:
        sys.exit(f"term_ablation: {exc}")
    table = gains(pd.concat(parts, ignore_index=True))
    pd.set_option("display.width", 250)
    pd.set_option("display.max_colwidth", 200)
    print(summary(table).to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    print()
    print(verdict(table).to_string(index=False, float_format=lambda x: f"{x:.2f}"))
    if args.output:
        write_table(table, args.output)


if __name__ == "__main__":
    main()
