"""benchmarks/term_ablation.py: each switch clears only its term's machine fields, and the gains and verdict
are the hand-computed ones."""
from dataclasses import replace

import pandas as pd
import pytest

from benchmarks import term_ablation as ta
from machines import load_machine
from machines.curves import Curves
from machines.loader import machine_to_dict
from machines.model import TlbLevel

# term -> the machine-file entries (flattened paths) its switch may change
FIELDS = {
    "in-core loop bound (llvm-mca)": {"core.llvm_mcpu"},
    "chain overlap (reorder window)": {"core.reorder_window_ops"},
    "chain lookahead": {"core.chain_lookahead_ops"},
    "stores to new lines": {"core.store_new_line_cycles"},
    "DTLB read-modify-write": {"tlbs"},
    "strided cold lines": {"ram.strided_cold_line_ns"},
    "conflict refills": {"caches"},
    "column updates": {"caches"},
    "coherence transfers and upgrades": {"coherence.transfer_cycles", "coherence.upgrade_cycles", "coherence.source",
                                         "curves.transfer_cycles", "curves.spread.transfer_cycles"},
    "upgrades": {"coherence.upgrade_cycles"},
    "cold start": {"parallel.cold_start_ns", "parallel.cold_start_one_ns", "curves.cold_start_ns",
                   "curves.spread.cold_start_ns"},
    "op-throughput curve": {"curves.op_throughput_scale", "curves.spread.op_throughput_scale"},
    "DRAM bandwidth curve": {"curves.bandwidth_gbs", "curves.spread.bandwidth_gbs"},
    "fork/join and barrier curves": {"curves.fork_join_ns", "curves.barrier_ns", "curves.spread.fork_join_ns",
                                     "curves.spread.barrier_ns"},
}


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and k not in ("sources",):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = repr(v)
    return out


def _everything():
    """A shipped machine with every term's fields set."""
    m = load_machine("haswell-i7-5960x")
    figures = {"op_throughput_scale": (1.0, 0.9), "bandwidth_gbs": (10.0, 18.0), "fork_join_ns": (500.0, 900.0),
               "barrier_ns": (300.0, 600.0), "transfer_cycles": (40.0,), "cold_start_ns": (1e4, 2e4)}
    caches = (replace(m.caches[0], column_update_ns=(8.0,) * 7), m.caches[1],
              *(replace(c, conflict_refill_ns=4.0) for c in m.caches[2:]))
    return replace(m, llvm_mcpu="haswell", reorder_window_ops=200.0, chain_lookahead_ops=150.0,
                   store_new_line_cycles=1.0, transfer_cycles=40.0, upgrade_cycles=20.0, caches=caches,
                   tlbs=(TlbLevel("DTLB", 64, 4, 4096, 9.0, rmw_miss_cycles=1.5),),
                   ram=replace(m.ram, strided_cold_line_ns=(20.0, 10.0)),
                   parallel=replace(m.parallel, fork_join_ns=800.0, barrier_ns=500.0, cold_start_ns=3e4, cold_start_one_ns=2e4),
                   curves=Curves(cores=(1, 2), figures=figures, spread={k: (0.01,) * len(v) for k, v in figures.items()}))


def test_every_term_has_its_fields_listed():
    assert set(ta.TERMS) == set(FIELDS)


@pytest.mark.parametrize("term", list(FIELDS))
def test_each_switch_clears_only_its_terms_fields(term):
    base = _everything()
    off = ta.TERMS[term](base)
    assert off is not None
    before, after = _flat(machine_to_dict(base)), _flat(machine_to_dict(off))
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert changed and changed <= FIELDS[term], changed


def test_a_machine_without_the_terms_has_no_rows():
    """Every field cleared by hand: no switch finds a term to switch off."""
    m = load_machine("haswell-i7-5960x")
    bare = replace(m, curves=None, llvm_mcpu="", reorder_window_ops=0.0, chain_lookahead_ops=0.0,
                   store_new_line_cycles=0.0, transfer_cycles=0.0, upgrade_cycles=0.0,
                   parallel=replace(m.parallel, cold_start_ns=0.0, cold_start_one_ns=0.0),
                   tlbs=tuple(replace(t, rmw_miss_cycles=0.0) for t in m.tlbs),
                   ram=replace(m.ram, strided_cold_line_ns=()),
                   caches=tuple(replace(c, conflict_refill_ns=0.0, column_update_ns=()) for c in m.caches))
    assert {term: ta.TERMS[term](bare) for term in FIELDS} == dict.fromkeys(FIELDS)


def _rows(spec):
    """Ablation rows (case, machine, benchmark, with all terms, without term t) as ablate_case writes them."""
    rows = []
    for case, machine, bench, with_all, without in spec:
        base = {"case": case, "machine": machine, "size": "S", "benchmark": bench, "cores": 1}
        rows += [{**base, "term": ta.ALL, "abs_error": with_all}, {**base, "term": "t", "abs_error": without}]
    return pd.DataFrame(rows)


def test_gains_hand_computed():
    table = ta.gains(_rows([("a", "X", "b1", 0.20, 0.30), ("a", "X", "b2", 0.10, 0.08), ("c", "Y", "b1", 0.15, 0.25)]))
    assert list(table["gain"].round(6)) == [0.10, -0.02, 0.10]
    s = ta.summary(table)
    assert list(s["gain"].round(6)) == [0.04, 0.10]  # case a: (0.10 - 0.02) / 2


def test_verdict_helps_hurts_or_not_told_apart():
    """Every benchmark gains on X (the interval lies above 0), every one loses on Y, and Z's gains straddle 0;
    resampling is seeded."""
    spec = [("a", "X", f"b{i}", 0.2, 0.2 + 0.01 * (i + 1)) for i in range(6)]
    spec += [("c", "Y", f"b{i}", 0.2, 0.2 - 0.01 * (i + 1)) for i in range(6)]
    spec += [("d", "Z", f"b{i}", 0.2, 0.2 + 0.05 * (-1) ** i) for i in range(6)]
    table = ta.gains(_rows(spec))
    v = ta.verdict(table).iloc[0]
    assert (v["machines"], v["helps_on"], v["hurts_on"], v["two_machine_rule"]) == (3, 1, 1, "fails")
    assert "X: +3.50" in v["per_machine"] and "Y: -3.50" in v["per_machine"] and "Z: +0.00" in v["per_machine"]
    assert ta.verdict(table).equals(ta.verdict(table))
    both = ta.verdict(table[table["machine"] != "Y"].assign(machine=lambda d: d["machine"].replace("Z", "W")))
    assert both.iloc[0]["two_machine_rule"] == "fails"
    two = ta.verdict(pd.concat([table[table["machine"] == "X"], table[table["machine"] == "X"].assign(machine="V")]))
    assert (two.iloc[0]["helps_on"], two.iloc[0]["two_machine_rule"]) == (2, "passes")
    still = ta.verdict(ta.gains(_rows([("a", "X", "b1", 0.2, 0.2), ("a", "X", "b2", 0.1, 0.1)]))).iloc[0]
    assert "X: +0.00 [+0.00, +0.00] no effect" in still["per_machine"]
    one = ta.verdict(table[table["machine"] == "X"])
    assert one.iloc[0]["two_machine_rule"] == "measured on one machine"


def test_ingested_runs_picks_and_refuses_what_the_results_lack(tmp_path):
    """The selection measure --ingest and the audit share: all measured by default, a subset on request, and
    a benchmark or thread count the kit did not time refused with native.json named."""
    from common.errors import InputError
    from pptmc.commands.measure import select
    from pptmc.probekit import ProbeResults, ingested_runs

    samples = {"atax": {"1": [1.0, 1.2, 1.1], "2": [0.6, 0.7, 0.65]}, "mvt": {"1": [2.0, 2.1, 2.2], "2": [1.1, 1.0, 1.2]}}
    res = ProbeResults(path=tmp_path, record={}, facts={}, raw={}, native={"size": "MEDIUM", "samples": samples})
    benches, threads, measured = ingested_runs(res, select)
    assert [b.name for b in benches] == ["atax", "mvt"] and threads == (1, 2) and len(measured) == 4
    benches, threads, measured = ingested_runs(res, select, "mvt", (2,))
    assert [b.name for b in benches] == ["mvt"] and threads == (2,)
    assert set(measured["cores"]) == {2} and measured[measured["benchmark"] == "mvt"]["measured_s"].iloc[0] == 1.1
    with pytest.raises(InputError, match=r"--benchmarks lu: .*native.json has no times for them; it has atax,mvt"):
        ingested_runs(res, select, "lu")
    with pytest.raises(InputError, match=r"--threads 4: .*native.json has times on 1,2 threads only"):
        ingested_runs(res, select, None, (1, 4))
