"""Which trace facts a machine gets (analysis/runtime/trace_terms.py): those its file prices, no others."""
from dataclasses import replace
from pathlib import Path

import pandas as pd

from analysis.runtime.trace_terms import TraceTerms, trace_terms
from machines import load_machine


def _asked(machine, cpu_form: str) -> tuple[TraceTerms, list[tuple[str, dict]]]:
    """trace_terms with a cache that records what it was asked for and answers with canned tables."""
    asked = []

    def cached(name, params, _what, _compute):
        asked.append((name, params))
        return pd.DataFrame({"updates": [7]}) if name == "tlb_updates" else pd.DataFrame({"asked": [name]})

    return trace_terms(Path("unused.pptrace"), machine, cpu_form, cached), asked


def test_a_machine_that_prices_nothing_gets_nothing_but_the_fills_of_the_critical_path_form():
    haswell = load_machine("haswell-i7-5960x")
    terms, asked = _asked(haswell, "throughput")
    assert terms == TraceTerms() and asked == []
    terms, asked = _asked(haswell, "critical-path")
    l1 = haswell.caches[0]
    assert asked == [("l1_walks", {"line": l1.line_bytes, "sets": l1.sets, "ways": l1.associativity})]
    assert terms.store_lines is None and terms.first_touches is None and terms.tlb_updates == 0
    assert list(terms.l1_fills["asked"]) == ["l1_walks"] and terms.column_updates is None


def test_each_priced_figure_brings_its_table():
    """Store pairing, column-walk costs and the TLB's update cost each add their pass, keyed by what
    decides the table (the line size, the L1's sets, the TLB's page and entries)."""
    from machines.model import TlbLevel

    base = load_machine("haswell-i7-5960x")
    machine = replace(base, store_new_line_cycles=1.0, ram=replace(base.ram, strided_cold_line_ns=(5.0, 6.0)),
                      tlbs=(TlbLevel(name="DTLB", entries=64, associativity=0, page_bytes=4096, miss_cycles=0.5,
                                     rmw_miss_cycles=1.4),))
    terms, asked = _asked(machine, "throughput")
    assert [name for name, _ in asked] == ["store_lines", "first_touches", "tlb_updates"]
    assert asked[2][1] == {"page": 4096, "entries": 64}
    assert terms.tlb_updates == 7 and terms.l1_fills is None


def test_column_update_figures_bring_the_l1_pass_read_for_its_dirtied_refills():
    """One L1 pass gives both streamed and dirtied refills: asked once, each read only where its term applies."""
    base = load_machine("haswell-i7-5960x")
    l1 = replace(base.caches[0], column_update_ns=(8.0, 4.0, 3.0, 1.5, 0.8, 0.8, 0.8))
    machine = replace(base, caches=(l1, *base.caches[1:]))
    terms, asked = _asked(machine, "throughput")
    assert asked == [("l1_walks", {"line": l1.line_bytes, "sets": l1.sets, "ways": l1.associativity})]
    assert list(terms.column_updates["asked"]) == ["l1_walks"] and terms.l1_fills is None
    terms, asked = _asked(machine, "critical-path")
    assert len(asked) == 1 and terms.l1_fills is terms.column_updates
    assert _asked(replace(base, caches=(l1,)), "throughput")[1] == []


def test_a_conflict_figure_brings_the_walk_pass_keyed_by_every_level():
    base = load_machine("haswell-i7-5960x")
    machine = replace(base, caches=(*base.caches[:2], replace(base.caches[2], conflict_refill_ns=5.0)))
    terms, asked = _asked(machine, "throughput")
    assert [name for name, _ in asked] == ["l1_walks"]
    assert asked[0][1]["caches"] == [[c.size_bytes, c.line_bytes, c.associativity, c.indexing] for c in machine.caches]
    assert terms.conflict_refills is not None and terms.l1_fills is None and terms.column_updates is None
