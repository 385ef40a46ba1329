"""Which runtime terms earn their place: each term a machine file enables, switched off alone, predicted against
the native times of probe kit results (as `pptmc measure --ingest`), on every machine given.

    python -m benchmarks.term_ablation --case RESULTS=MACHINE.toml [--case RESULTS2=MACHINE2.toml ...]
                                       [--benchmarks 2mm,lu] [-o table.csv]

A term is switched off by clearing the machine fields it reads (TERMS: the same fields whose absence the
model already treats as "no such term"); a machine without them has no row for that term. For each case
(results folder and the machine file of the host that produced them) and thread count the table gives the
mean absolute error over the benchmarks with every term and with the term switched off; `gain` is the
second minus the first (positive: the term helps). The verdict counts, per term, the distinct machines (CPU
models in the results' kit.json) on which the term lowers the mean absolute error over all their cases and
thread counts (by more than NO_EFFECT_PP): the issue's rule keeps a term in the default only where that is at
least two; a term whose figure comes from its own microbenchmark may also stand on its documented mechanism.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Callable

import pandas as pd

from common.errors import InputError
from common.io import write_table
from machines import load_machine
from machines.curves import Curves
from machines.model import Machine, Parallel


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
NO_EFFECT_PP = 0.05  # a mean gain this small (percentage points) rounds to 0.0: the term changes nothing there


def mean_abs_errors(df: pd.DataFrame) -> pd.Series:
    """Mean absolute relative error over the benchmarks, per thread count."""
    return df.assign(abs_error=df["rel_error"].abs()).groupby("cores")["abs_error"].mean()


def load_case(case: str):
    """(checked results, machine) of one --case RESULTS=MACHINE; InputError naming what is wrong."""
    from pptmc.probekit import load_results

    results, sep, machine_file = case.partition("=")
    if not sep or not results or not machine_file:
        raise InputError(f"--case {case!r}: give RESULTS=MACHINE.toml")
    return load_results(Path(results)), load_machine(machine_file)


def ablate_case(res, base: Machine, workdir: Path, benchmarks: str | None,
                say: Callable[[str], None]) -> pd.DataFrame:
    """One row per term the machine enables (and one with all terms) and thread count: mean abs error."""
    from pptmc.commands.measure import select
    from pptmc.measure import compare_runtimes
    from pptmc.probekit import results_measured
    from analysis.options import DEFAULT_OPTIONS

    results = res.path
    measured = results_measured(res)
    names = sorted(set(measured["benchmark"]))
    benches = select(benchmarks or ",".join(names))
    threads = tuple(sorted(set(measured["cores"])))
    variants = {ALL: base}
    for term, switch in TERMS.items():
        off = switch(base)
        if off is not None:
            variants[term] = replace(off, name=f"{base.name}-ablate{len(variants)}")
    rows = []
    for term, machine in variants.items():
        say(f"{results}: {term}")
        errors = mean_abs_errors(compare_runtimes(benches, measured, res.native["size"], threads, workdir, machine,
                                                  DEFAULT_OPTIONS, lambda _msg: None))
        rows += [{"case": str(results), "machine": res.record["host"]["model_name"], "size": res.native["size"],
                  "term": term, "cores": int(c), "mean_abs_error": float(e)} for c, e in errors.items()]
    return pd.DataFrame(rows)


def gains(table: pd.DataFrame) -> pd.DataFrame:
    """Per case, term and thread count: the error with every term, without this one, and the gain."""
    full = table[table["term"] == ALL].set_index(["case", "cores"])["mean_abs_error"]
    off = table[table["term"] != ALL].rename(columns={"mean_abs_error": "error_without"})
    off["error_with"] = [full[(c, p)] for c, p in zip(off["case"], off["cores"])]
    off["gain"] = off["error_without"] - off["error_with"]
    return off[["term", "machine", "case", "size", "cores", "error_with", "error_without", "gain"]]


def verdict(table: pd.DataFrame) -> pd.DataFrame:
    """Per term: on how many machines it helps, hurts or changes nothing (a mean gain within NO_EFFECT_PP of 0:
    it does not move the error at the table's precision), and the rule's answer: kept in the default only where
    it helps on at least two machines."""
    per_machine = table.groupby(["term", "machine"], sort=False)["gain"].mean().reset_index()
    rows = []
    for term, part in per_machine.groupby("term", sort=False):
        pp = 100 * part["gain"]
        helped, hurt = int((pp > NO_EFFECT_PP).sum()), int((pp < -NO_EFFECT_PP).sum())
        rows.append({"term": term, "machines": len(part), "helps_on": helped, "hurts_on": hurt,
                     "no_effect_on": len(part) - helped - hurt, "mean_gain_pp": pp.mean(),
                     "two_machine_rule": "passes" if helped >= 2 else
                     ("measured on one machine" if len(part) < 2 else "fails")})
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", required=True, metavar="RESULTS=MACHINE",
                        help="a probe kit's results folder and the machine file of the host that ran it")
    parser.add_argument("--benchmarks", help="comma-separated catalog names (default: all the results have)")
    parser.add_argument("--workdir", type=Path, help="where the pipelines' steps are cached (default: a temporary "
                                                     "folder per case)")
    parser.add_argument("-o", "--output", type=Path, help="write the gains table as CSV")
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
    pd.set_option("display.width", 200)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    print()
    print(verdict(table).to_string(index=False, float_format=lambda x: f"{x:.2f}"))
    if args.output:
        write_table(table, args.output)


if __name__ == "__main__":
    main()
