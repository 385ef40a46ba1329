"""The facts that single passes over the sequential trace give one machine's runtime model, beyond the hit rates.

Each is a table (or a count) that one streaming pass computes, and each feeds one term of
analysis/RUNTIME_MODEL.md; a machine whose file does not price a term gets None (or 0) for it and
the term is 0. `trace_terms` decides which a machine needs and computes them; the pipeline passes a
`cached` function that keeps each table in its work directory, `pptmc predict` computes them afresh.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from machines.model import Machine

# cached(name, params, what, compute): the table `compute()` returns, kept under `name` for these params
Cached = Callable[[str, dict, str, Callable[[], pd.DataFrame]], pd.DataFrame]


def _fresh(_name: str, _params: dict, _what: str, compute: Callable[[], pd.DataFrame]) -> pd.DataFrame:
    return compute()


@dataclass(frozen=True)
class TraceTerms:
    """One machine's trace facts; None / 0 where its file does not price the term."""

    store_lines: Any = None    # analysis/runtime/store_lines.py: per block, stores to another line (store pairing)
    first_touches: Any = None  # analysis/runtime/cold_lines.py, the machine's L1: column walks' cold lines
    tlb_updates: int = 0       # analysis/runtime/tlb.py: in-place updates whose page missed the first TLB level
    l1_fills: Any = None       # analysis/runtime/l1_walks.py, the machine's L1: its table (streamed refills read)
    conflict_refills: Any = None  # analysis/runtime/l1_walks.py, the same table (column walks' conflict refills read)
    column_updates: Any = None    # analysis/runtime/l1_walks.py, the same table (column walks' dirtied refills read)


def trace_terms(trace: Path, machine: Machine, cpu_form: str, cached: Cached = _fresh) -> TraceTerms:
    """The trace facts `machine` prices (the streamed refills only for the critical-path CPU form; one walk pass gives
    them, the dirtied column refills and the conflict refills)."""
    from analysis.runtime.cold_lines import first_touch_table
    from analysis.runtime.l1_walks import l1_walk_table
    from analysis.runtime.store_lines import store_line_table
    from analysis.runtime.tlb import trace_update_misses

    l1 = machine.caches[0]
    stores = (cached("store_lines", {"line": machine.line_bytes}, "count stores to new lines",
                     lambda: store_line_table(trace, machine.line_bytes))
              if machine.store_new_line_cycles else None)
    touches = (cached("first_touches", {"line": l1.line_bytes, "sets": l1.sets},
                      "count first touches of cache lines (column walks)",
                      lambda: first_touch_table(trace, l1.line_bytes, l1.sets))
               if machine.ram.strided_cold_line_ns else None)
    updates = 0
    if machine.tlbs and machine.tlbs[0].rmw_miss_cycles:
        level = machine.tlbs[0]
        table = cached("tlb_updates", {"page": level.page_bytes, "entries": level.entries},
                       "count in-place updates that miss the TLB",
                       lambda: pd.DataFrame({"updates": [trace_update_misses(trace, level)]}))
        updates = int(table["updates"].iloc[0])
    streamed = cpu_form == "critical-path" and len(machine.caches) > 1
    dirtied = bool(l1.column_update_ns) and len(machine.caches) > 1
    conflicts = any(c.conflict_refill_ns for c in machine.caches)
    params = {"line": l1.line_bytes, "sets": l1.sets, "ways": l1.associativity}
    if conflicts:   # the conflict refills need the levels below L1 too
        params["caches"] = [[c.size_bytes, c.line_bytes, c.associativity, c.indexing] for c in machine.caches]
    walks = (cached("l1_walks", params, "count the refills of rows and columns",
                    lambda: l1_walk_table(trace, machine.caches, conflicts))
             if streamed or dirtied or conflicts else None)
    return TraceTerms(stores, touches, updates, *(walks if wanted else None for wanted in (streamed, conflicts, dirtied)))
