"""Column walks' conflict refills (analysis/runtime/conflict_refills.py, in the walk pass of l1_walks.py) against a
brute force, their price
(terms/column_walks.conflict_extra_ns), and the machine field and figure behind it."""
from collections import OrderedDict
from dataclasses import replace

import pytest

from analysis.runtime import conflict_refills as cr
from analysis.runtime import l1_walks as lw
from analysis.runtime.cold_lines import STRIDED_MIN_BYTES
from analysis.runtime.terms.column_walks import conflict_extra_ns
from common.errors import InputError
from machines import load_machine
from machines.detect import conflict_figures
from machines.loader import machine_to_dict, validate_machine_dict
from machines.model import CacheLevel
from machines.probeplan import FULL, SysCache, walks_step
from tests.test_cold_lines import BruteSites, interleaved_walks, trace_chunk

LINE = 64
# L1: 4 sets x 2 ways; L2: 8 sets x 2 ways (a way spans 512 B); L3: 64 lines, fully associative
CACHES = (CacheLevel("L1", 4 * 2 * LINE, LINE, 2, 4, 0.5, False, indexing="virtual"),
          CacheLevel("L2", 8 * 2 * LINE, LINE, 2, 12, 2.0, False),
          CacheLevel("L3", 64 * LINE, LINE, 0, 40, 6.0, True))


class Lru:
    """A set-associative LRU cache of OrderedDicts (ways 0: fully associative), indexed by the line."""

    def __init__(self, lines: int, ways: int):
        self.sets = lines // ways if ways else 1
        self.ways = ways or lines
        self.table = [OrderedDict() for _ in range(self.sets)]

    def access(self, ln: int) -> bool:
        way = self.table[ln % self.sets]
        if ln in way:
            way.move_to_end(ln)
            return True
        if len(way) == self.ways:
            way.popitem(last=False)
        way[ln] = True
        return False


def _brute(addr, block, instance) -> dict[int, int]:
    """The module's definition with Python containers: a hierarchy of LRU caches, a fully associative
    LRU of L2's size beside L2, the site rule and a set of the lines seen."""
    levels = [Lru(c.n_lines, c.associativity) for c in CACHES]
    roomy = Lru(CACHES[1].n_lines, 0)
    seen, sites, counts = set(), BruteSites(), {}
    for a, b, i in zip(addr, block, instance):
        before = sites.before(a, b, i)
        ln = a // LINE
        first = ln not in seen
        seen.add(ln)
        served, fits = len(levels), False
        for k, level in enumerate(levels):
            if k == 1:
                fits = roomy.access(ln)
            if level.access(ln):
                served = k
                break
        if not first and before is not None and abs(a - before) >= STRIDED_MIN_BYTES and served > 1 and fits:
            counts[served] = counts.get(served, 0) + 1
    return counts


def _place(b: int, t: int, rng) -> int:
    """Block 0: a column of 6 rows 4 KiB apart (a power of two: its lines share L1's and L2's sets and fit L2's
    size); block 1: 6 rows 4 KiB + 3 lines apart (spread over the sets); block 2: random jumps over 64 KiB."""
    if b == 0:
        return 0x100000 + (t % 6) * 4096 + 8 * ((t // 6) % 4)
    if b == 1:
        return 0x200000 + (t % 6) * (4096 + 3 * LINE)
    return 0x300000 + int(rng.integers(0, 64 * 1024)) // 8 * 8


def _walks(seed: int, n: int = 5000):
    """The three blocks of _place in a seeded random order, each access its own block execution."""
    return interleaved_walks(seed, n, _place)


def _count(addr, block, instance, chunk: int) -> dict[int, int]:
    counter = lw.L1WalkCounter(3, CACHES, conflicts=True, initial_slots=4)
    for s in range(0, len(addr), chunk):
        counter.add(trace_chunk(addr[s:s + chunk], block[s:s + chunk], instance[s:s + chunk]))
    return lw.refills_by_level(counter.table())


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("chunk", [101, 5000])
def test_conflict_refills_match_brute_force(seed, chunk):
    """Over chunk sizes and random interleavings: the brute force's counts per serving level."""
    addr, block, instance = _walks(seed)
    assert _count(addr, block, instance, chunk) == _brute(addr, block, instance)


def test_power_of_two_column_conflicts_and_padded_one_does_not():
    """Hand case: a column of 6 rows 4 KiB apart, walked 10 times, one load per row. Its 6 lines share one L1
    set and one L2 set (2 ways each) but fit L2's 16 lines: every walk after the first refills all 6 from L3.
    Padded by 3 lines per row they spread over the sets, stay in L2, and nothing is counted."""
    rows, walks = 6, 10
    for stride, want in ((4096, {2: rows * (walks - 1)}), (4096 + 3 * LINE, {})):
        addr = [0x100000 + (t % rows) * stride for t in range(rows * walks)]
        assert _count(addr, [0] * len(addr), list(range(len(addr))), 1000) == want


def test_a_walk_larger_than_l2_misses_by_capacity_and_is_not_counted():
    """20 rows spread over the sets exceed L2's 16 lines: the fully associative L2 misses them too."""
    addr = [0x100000 + (t % 20) * (4096 + 3 * LINE) for t in range(200)]
    assert _count(addr, [0] * 200, list(range(200)), 64) == {}


def test_counter_needs_three_levels_and_reads_its_kind():
    with pytest.raises(InputError, match="three cache levels"):
        lw.L1WalkCounter(1, CACHES[:2], conflicts=True)
    assert lw.L1WalkCounter(1, CACHES[:2]).deeper is None
    import pandas as pd
    assert lw.refills_by_level(pd.DataFrame({"kind": [lw.CONFLICT, lw.DIRTIED], "key": [2, 1], "count": [5, 6]})) == {2: 5}
    assert lw.refills_by_level(None) == {}


def test_physical_levels_are_placed_as_consecutive_frames():
    assert cr.as_placed(CACHES[1]).indexing == "virtual"
    assert cr.as_placed(replace(CACHES[2], indexing="hashed")).indexing == "hashed"


def _machine(**l3):
    m = load_machine("haswell-i7-5960x")
    caches = (*m.caches[:2], replace(m.caches[2], **l3))
    return replace(m, caches=caches)


def test_conflict_extra_hand_case():
    """1000 refills from L3 at 6 ns each, where T_mem charged L3's reciprocal throughput r / f: 1000 (6 - r / f) ns;
    RAM-served ones and levels without the figure cost nothing extra; a figure below the charge is not a credit."""
    m = _machine(conflict_refill_ns=6.0)
    charged = m.caches[2].recip_throughput_cycles / m.frequency_ghz
    assert conflict_extra_ns(m, {2: 1000, 3: 50}) == pytest.approx(1000 * (6.0 - charged))
    assert conflict_extra_ns(_machine(), {2: 1000}) == 0.0
    assert conflict_extra_ns(_machine(conflict_refill_ns=charged / 2), {2: 1000}) == 0.0


def test_machine_field_round_trips_and_rejects_a_negative_figure():
    m = _machine(conflict_refill_ns=5.5)
    data = machine_to_dict(m)
    assert data["caches"][2]["conflict_refill_ns"] == 5.5
    assert validate_machine_dict(data, "t").caches[2].conflict_refill_ns == 5.5
    data["caches"][2]["conflict_refill_ns"] = -1.0
    with pytest.raises(InputError, match=r"caches\[2\]\.conflict_refill_ns"):
        validate_machine_dict(data, "t")
    data["caches"][2]["conflict_refill_ns"] = 5.5
    data["caches"][1]["conflict_refill_ns"] = 5.5
    with pytest.raises(InputError, match=r"caches\[1\]\.conflict_refill_ns.*third level"):
        validate_machine_dict(data, "t")


def test_walks_step_needs_a_third_level_and_its_figure_lands_there():
    caches = [SysCache(1, 32768, 64, 8, False), SysCache(2, 524288, 64, 8, False),
              SysCache(3, 33554432, 64, 16, True)]
    # rows one page apart, twice L2's lines per page offset: 2 x 512 KiB / 4 KiB = 256 (1024 for a 2 MiB L2)
    assert walks_step(caches, 4096, FULL).args[1:] == (4096, 256)
    assert walks_step([caches[0], SysCache(2, 2 << 20, 64, 16, False), caches[2]], 4096, FULL).args[1:] == (4096, 1024)
    assert walks_step(caches[:2], 4096, FULL) is None
    levels = [{"name": f"L{i}", "source": "s"} for i in (1, 2, 3)]
    out = conflict_figures(levels, {"column_0": 5.43}, caches, 4096)
    assert out[2]["conflict_refill_ns"] == 5.43 and "walks.c" in out[2]["source"]
    assert "conflict_refill_ns" not in out[1]
