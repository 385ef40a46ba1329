"""Column walks' dirtied L1 refills (analysis/runtime/l1_walks.py) against a brute force, their price
(terms/column_walks.update_extra_ns), and the machine field and figures behind it."""
from dataclasses import replace

import numpy as np
import pytest

from analysis.runtime import l1_walks as lw
from analysis.runtime.cold_lines import STRIDED_MIN_BYTES, WALK_WINDOW
from analysis.runtime.terms.column_walks import update_extra_ns
from common.errors import InputError
from machines import load_machine
from machines.detect import update_figures
from machines.loader import machine_to_dict, validate_machine_dict
from machines.model import CacheLevel
from machines.probeplan import FULL, SysCache, update_walks, updates_step
from tests.test_cold_lines import BruteSites, interleaved_walks, trace_chunk
from tests.test_conflict_refills import Lru

LINE = 64
SETS, WAYS = 64, 2                      # a way spans 4 KiB, a page
L1 = CacheLevel("L1", SETS * WAYS * LINE, LINE, WAYS, 4, 0.5, False, indexing="virtual")


def _brute(addr, block, instance, store) -> dict[int, int]:
    """The module's definition with Python containers: an LRU L1, the site rule, a set of the lines seen, the
    resident lines a walk refilled and no store has dirtied, and the sets of the last 64 dirtied ones."""
    l1, sites, seen, pending, window, counts = Lru(SETS * WAYS, WAYS), BruteSites(), set(), set(), [], {}
    for a, b, i, s in zip(addr, block, instance, store):
        before = sites.before(a, b, i)
        ln = a // LINE
        first = ln not in seen
        seen.add(ln)
        if not l1.access(ln):
            pending.discard(ln)
            if not first and before is not None and abs(a - before) >= STRIDED_MIN_BYTES:
                pending.add(ln)
        if s and ln in pending:
            pending.remove(ln)
            window.append(ln % SETS)
            d = len(set(window[-WALK_WINDOW:]))
            counts[d] = counts.get(d, 0) + 1
    return counts


def _place(b: int, t: int, rng) -> int:
    """Block 0: a column of 5 rows a page apart (one L1 set); block 1: 6 rows half a page apart (two sets);
    block 2: random jumps over 64 KiB."""
    if b == 0:
        return 0x100000 + (t % 5) * 4096 + 8 * ((t // 5) % 8)
    if b == 1:
        return 0x200000 + (t % 6) * 2048
    return 0x300000 + int(rng.integers(0, 64 * 1024)) // 8 * 8


def _count(addr, block, instance, store, chunk: int) -> dict[int, int]:
    counter = lw.L1WalkCounter(3, (L1,), initial_slots=4)
    for s in range(0, len(addr), chunk):
        counter.add(trace_chunk(addr[s:s + chunk], block[s:s + chunk], instance[s:s + chunk], store[s:s + chunk]))
    return lw.updates_by_sets(counter.table())


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("chunk", [97, 6000])
def test_dirtied_refills_match_brute_force(seed, chunk):
    """Over chunk sizes and random interleavings, with random loads and stores: the brute force's counts."""
    addr, block, instance = interleaved_walks(seed, 6000, _place)
    store = list(np.random.default_rng(seed + 10).random(len(addr)) < 0.4)
    assert _count(addr, block, instance, store, chunk) == _brute(addr, block, instance, store)


def _column(rows: int, stride: int, walks: int, mode: str):
    """One column walked `walks` times: per row a load, a store, or a load then a store of the same double (an
    in-place update, two accesses of one block execution)."""
    addr, block, instance, store = [], [], [], []
    for t in range(rows * walks):
        a = 0x100000 + (t % rows) * stride
        kinds = {"load": [False], "store": [True], "update": [False, True]}[mode]
        for s in kinds:
            addr.append(a)
            block.append(0)
            instance.append(t)
            store.append(s)
    return addr, block, instance, store


def test_hand_counted_column_updates():
    """4 rows a page apart share one L1 set of 2 ways: after the first walk every row refills, and an update
    or a store dirties it: 4 x 9 refills reaching one set. Half a page apart, 8 rows fill two sets: 8 x 9, the
    first reaching one set (its window holds only itself). A load-only walk dirties nothing; rows padded by a
    line spread over the sets and hit."""
    assert _count(*_column(4, 4096, 10, "update"), 1000) == {1: 36}
    assert _count(*_column(4, 4096, 10, "store"), 1000) == {1: 36}
    assert _count(*_column(8, 2048, 10, "update"), 1000) == {1: 1, 2: 71}
    assert _count(*_column(4, 4096, 10, "load"), 1000) == {}
    assert _count(*_column(4, 4096 + LINE, 10, "update"), 1000) == {}


@pytest.mark.parametrize("blocks", [(0, 0), (0, 1)])
def test_an_unrolled_walk_reaches_every_rows_set(blocks):
    """8 rows half a page apart walked by two accesses, each striding two rows (a loop unrolled by two, in one
    block or split over two, as clang does): each access alone stays in one set, the walk reaches two."""
    addr, block, instance, store = [], [], [], []
    for t in range(4 * 10):
        for r, b in zip((2 * (t % 4), 2 * (t % 4) + 1), blocks):
            addr += [0x100000 + r * 2048] * 2
            block += [b, b]
            instance += [t, t]
            store += [False, True]
    assert _count(addr, block, instance, store, 1000) == {1: 1, 2: 71}


def _machine(figures=()):
    m = load_machine("haswell-i7-5960x")
    return replace(m, caches=(replace(m.caches[0], column_update_ns=figures), *m.caches[1:]))


def test_update_extra_hand_case():
    """1000 one-set refills at 8 ns, 500 two-set ones at 4 ns and 10 reaching 3 sets (log2 3 = 1.585: 4 - 0.585
    x (4 - 3) = 3.415 ns), where T_mem charged L2's reciprocal throughput r / f; a figure below the charge is no
    credit, and a machine without the figures charges nothing."""
    figures = (8.0, 4.0, 3.0, 0.1, 0.1, 0.1, 0.1)
    m = _machine(figures)
    charged = m.caches[1].recip_throughput_cycles / m.frequency_ghz
    assert charged < 3.0
    want = 1000 * (8 - charged) + 500 * (4 - charged) + 10 * (4 - np.log2(3) + 1 - charged)
    assert update_extra_ns(m, {1: 1000, 2: 500, 3: 10, 16: 70}) == pytest.approx(want)
    assert update_extra_ns(_machine(), {1: 1000}) == 0.0


def test_machine_field_round_trips_and_is_checked():
    figures = (8.0, 4.0, 3.0, 1.5, 0.8, 0.75, 0.77)
    data = machine_to_dict(_machine(figures))
    assert data["caches"][0]["column_update_ns"] == list(figures)
    assert validate_machine_dict(data, "t").caches[0].column_update_ns == figures
    for bad, match in ((figures[:3], r"caches\[0\]\.column_update_ns.*needs 7"),
                       ((8.0, -1.0, *figures[2:]), r"caches\[0\]\.column_update_ns\[1\]"),
                       ("fast", r"caches\[0\]\.column_update_ns.*list")):
        broken = machine_to_dict(_machine(figures))
        broken["caches"][0]["column_update_ns"] = list(bad) if isinstance(bad, tuple) else bad
        with pytest.raises(InputError, match=match):
            validate_machine_dict(broken, "t")
    data["caches"][1]["column_update_ns"] = list(figures)
    with pytest.raises(InputError, match=r"caches\[1\]\.column_update_ns.*caches\[0\]"):
        validate_machine_dict(data, "t")


def test_updates_step_walks_each_set_count_and_its_figures_land_on_l1():
    """A 32 KiB 8-way L1 (64 sets, a 4 KiB way span): rows 4 KiB / k apart, 2 x 8 x k of them; a 48 KiB 12-way
    one the same strides with 24 x k rows; none when the way span exceeds a page or there is no L2."""
    caches = [SysCache(1, 32768, 64, 8, False), SysCache(2, 524288, 64, 8, False)]
    walks = update_walks(caches, 4096)
    assert walks == [(4096 >> b, 16 << b) for b in range(7)]
    assert update_walks([SysCache(1, 49152, 64, 12, False), caches[1]], 4096)[:2] == [(4096, 24), (2048, 48)]
    assert update_walks([SysCache(1, 65536, 64, 8, False), caches[1]], 4096) == []
    assert updates_step(caches[:1], 4096, FULL) is None
    assert updates_step(caches, 4096, FULL).args[1:5] == (4096, 16, 2048, 32)
    levels = [{"name": "L1", "source": "s"}, {"name": "L2", "source": "s"}]
    out = update_figures(levels, {f"update_{k}": 8.0 / (k + 1) for k in range(7)}, caches, 4096)
    assert out[0]["column_update_ns"][:2] == [8.0, 4.0] and "updates.c" in out[0]["source"]
    assert "column_update_ns" not in out[1]
