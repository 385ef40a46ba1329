"""Set placement of the cache simulators (virtual, physical behind random page frames, hashed) against a
pure-Python LRU set-associative oracle that applies the same placement rule to explicit frame maps."""
from __future__ import annotations

import numpy as np
import pytest

from analysis.hitrates.cachesim import LevelSim, simulate_coherent, simulate_stream
from analysis.hitrates.set_index import placement, set_of
from common.errors import InputError
from machines.model import CacheLevel

LINE = 64
M64 = (1 << 64) - 1


def level(sets, ways, indexing, shared=False, name="L"):
    return CacheLevel(name, sets * ways * LINE, LINE, ways, 4.0, 1.0, shared, indexing=indexing)


def mix64(x: int) -> int:
    """splitmix64's finaliser of x + 2^64/phi, written out (the documented frame and set hash)."""
    z = (x + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def frame_map(lines, page_bits: int, seed: int) -> dict[int, int]:
    """Explicit virtual page -> frame table of every page the stream touches (48-bit frames)."""
    word = mix64(seed)
    return {p: mix64(p ^ word) >> 16 for p in {x >> page_bits for x in lines}}


def oracle_set(x: int, indexing: str, sets: int, page_bits: int, frames: dict[int, int]) -> int:
    """The set of virtual line x: from x, from its physical line, or from a hash of the physical line."""
    if indexing == "virtual":
        return x % sets
    phys = frames[x >> page_bits] << page_bits | (x & ((1 << page_bits) - 1))
    return phys % sets if indexing == "physical" else ((mix64(phys) >> 32) * sets) >> 32


class Oracle:
    """LRU set-associative cache: per set a list of virtual lines, most recent last."""

    def __init__(self, sets, ways, indexing, page_bytes=4096, seed=0, lines=()):
        self.sets, self.ways, self.indexing = sets, ways, indexing
        self.bits = (page_bytes // LINE).bit_length() - 1
        self.frames = frame_map(lines, self.bits, seed)
        self.content: dict[int, list[int]] = {}

    def set(self, x):
        return oracle_set(x, self.indexing, self.sets, self.bits, self.frames)

    def access(self, x) -> bool:
        lst = self.content.setdefault(self.set(x), [])
        hit = x in lst
        if hit:
            lst.remove(x)
        elif len(lst) == self.ways:
            lst.pop(0)
        lst.append(x)
        return hit


def oracle_hits(lines, sets, ways, indexing, page_bytes=4096, seed=0):
    cache = Oracle(sets, ways, indexing, page_bytes, seed, lines)
    return [cache.access(x) for x in lines]


def fully_assoc_hits(lines, capacity):
    return oracle_hits(lines, 1, capacity, "virtual")


def sim_hits(lines, sets, ways, indexing, page_bytes=4096, seed=0):
    sim = LevelSim(level(sets, ways, indexing), 1, page_bytes, seed)
    lines = np.asarray(lines, dtype=np.uint64)
    return sim.access(lines, np.zeros(len(lines), dtype=np.int64)).tolist()


def streams():
    rng = np.random.default_rng(7)
    rand = rng.integers(0, 1 << 16, 6000)
    strided = np.tile(np.arange(0, 300 * 96, 96), 6)  # 96-line (6 KiB) stride
    column = np.tile(np.arange(0, 200 * 64, 64), 5)  # one line per 4 KiB page
    mixed = np.where(rng.random(8000) < 0.3, rng.integers(0, 1 << 20, 8000), np.arange(8000) // 4)
    return {"random": rand.tolist(), "strided": strided.tolist(), "column": column.tolist(), "mixed": mixed.tolist()}


STREAMS = streams()


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_virtual_placement_is_line_mod_sets(name):
    """The old behaviour: set = line mod sets, whatever the page size."""
    lines = STREAMS[name]
    for page in (4096, 2 << 20):
        assert sim_hits(lines, 64, 4, "virtual", page) == oracle_hits(lines, 64, 4, "virtual")


@pytest.mark.parametrize("name", sorted(STREAMS))
@pytest.mark.parametrize("indexing,sets,ways,page,seed", [("physical", 512, 8, 4096, 0), ("physical", 256, 4, 4096, 3),
                                                          ("physical", 1024, 2, 16384, 1), ("hashed", 512, 8, 4096, 0),
                                                          ("hashed", 96, 4, 4096, 5)])
def test_level_sim_matches_oracle(name, indexing, sets, ways, page, seed):
    lines = STREAMS[name]
    assert sim_hits(lines, sets, ways, indexing, page, seed) == oracle_hits(lines, sets, ways, indexing, page, seed)


def test_kernel_sets_equal_oracle_sets():
    """The placement helper itself, line by line, for every mode (mode codes from placement())."""
    lines = STREAMS["mixed"] + STREAMS["column"]
    for indexing, sets, page, seed in [("physical", 512, 4096, 9), ("physical", 4096, 2 << 20, 2),
                                       ("hashed", 1536, 4096, 9), ("virtual", 64, 4096, 9)]:
        pl = placement((level(sets, 1, indexing),), (sets,), page, seed)
        bits = int(pl.page_bits[0])
        frames = frame_map(lines, bits, seed)
        got = [int(set_of(pl.mode[0], pl.page_bits[0], pl.seed[0], np.uint64(x), np.int64(sets))) for x in lines]
        assert got == [oracle_set(x, indexing, sets, bits, frames) for x in lines]


@pytest.mark.parametrize("name", sorted(STREAMS))
@pytest.mark.parametrize("sets,ways", [(64, 8), (512, 4)])
def test_physical_equals_virtual_when_set_bits_lie_inside_the_page(name, sets, ways):
    """page_bytes = sets * line * ways (or just sets * line): the frame supplies no set bit."""
    lines = STREAMS[name]
    want = oracle_hits(lines, sets, ways, "virtual")
    for page in (sets * LINE * ways, sets * LINE):
        assert oracle_hits(lines, sets, ways, "physical", page, 4) == want  # the rule itself
        assert sim_hits(lines, sets, ways, "physical", page, 4) == want


def test_physical_differs_from_virtual_when_the_frame_supplies_set_bits():
    lines = STREAMS["random"]
    assert sim_hits(lines, 512, 2, "physical", 4096, 0) != oracle_hits(lines, 512, 2, "virtual")


def test_column_walk_over_l1_set_and_physical_l2():
    """A 4 KiB-stride column walk: under virtual placement every line is in one L1 set. A physically
    indexed 512-set L2 with 4 KiB pages takes 6 of its 9 set bits from the page offset (fixed by the
    walk), so the walk can use at most 8 sets, chosen by the frames; a hashed L2 spreads it over many
    sets and hits like a fully associative LRU cache of the same capacity."""
    rows = 256
    lines = np.tile(np.arange(rows) * 64, 4).tolist()
    assert {x % 64 for x in lines} == {0}  # one L1 set
    assert sum(sim_hits(lines, 64, 8, "virtual")) == 0  # 256 lines through 8 ways: LRU keeps none
    phys = Oracle(512, 8, "physical", 4096, 0, lines)
    assert {phys.set(x) for x in lines} <= set(range(0, 512, 64))
    hashed = Oracle(512, 8, "hashed", 4096, 0, lines)
    assert len({hashed.set(x) for x in lines}) > 180  # 256 lines into 512 sets at random: ~201 sets
    fa = sum(fully_assoc_hits(lines, 512 * 8))
    assert fa == 3 * rows
    got = sum(sim_hits(lines, 512, 8, "hashed", 4096, 0))
    assert got == sum(oracle_hits(lines, 512, 8, "hashed", 4096, 0)) and got >= 0.98 * fa


def test_way_sized_stride_spreads_over_the_frame_chosen_sets():
    """Stride = sets * line (32 KiB, eight 4 KiB pages): all in set 0 of a virtually indexed 512-set L2,
    spread over the 8 frame-chosen sets when physically indexed, so many more hits."""
    lines = np.tile(np.arange(48) * 512, 6).tolist()
    virt = sim_hits(lines, 512, 8, "virtual")
    phys = sim_hits(lines, 512, 8, "physical", 4096, 0)
    assert sum(virt) == 0
    assert phys == oracle_hits(lines, 512, 8, "physical", 4096, 0)
    assert len({Oracle(512, 8, "physical", 4096, 0, lines).set(x) for x in lines}) == 8
    assert sum(phys) > len(lines) // 4


def test_hashed_placement_takes_a_non_power_of_two_set_count():
    rng = np.random.default_rng(1)
    lines = rng.integers(0, 1 << 18, 20000).tolist()
    cache = Oracle(1536, 12, "hashed", 4096, 2, lines)
    used = {cache.set(x) for x in lines}
    assert max(used) < 1536 and len(used) > 1500
    assert sim_hits(lines, 1536, 12, "hashed", 4096, 2) == oracle_hits(lines, 1536, 12, "hashed", 4096, 2)


def test_deterministic_per_seed_and_different_across_seeds():
    lines = STREAMS["mixed"]
    for indexing in ("physical", "hashed"):
        a, b, c = (sim_hits(lines, 512, 2, indexing, 4096, s) for s in (11, 11, 12))
        assert a == b and a != c


def hierarchy_oracle(lines, cores, spec, page_bytes, seed):
    """Loads only: hits per level of private (per core) and shared levels, each seeing the misses above."""
    caches = [[Oracle(s, w, ix, page_bytes, seed, lines) for _ in range(1 if sh else max(cores) + 1)]
              for s, w, ix, sh in spec]
    hits = [0] * len(spec)
    for x, c in zip(lines, cores):
        for lv, (_, _, _, sh) in enumerate(spec):
            if caches[lv][0 if sh else c].access(x):
                hits[lv] += 1
                break
    return hits


@pytest.mark.parametrize("page,seed", [(4096, 0), (4096, 8), (2 << 20, 3)])
def test_coherent_and_stream_hierarchies_place_like_the_oracle(page, seed):
    """Virtual L1, physical L2, hashed shared L3 with a non-power-of-two set count, two cores, loads only:
    the ground-truth simulator and the hierarchical stream simulator both equal the oracle."""
    rng = np.random.default_rng(seed)
    n = 12000
    lines = np.where(rng.random(n) < 0.4, rng.integers(0, 1 << 15, n), np.tile(np.arange(0, 64 * 150, 64), 80)[:n])
    cores = rng.integers(0, 2, n)
    spec = [(16, 4, "virtual", False), (128, 4, "physical", False), (96, 8, "hashed", True)]
    caches = tuple(level(s, w, ix, sh, f"L{i + 1}") for i, (s, w, ix, sh) in enumerate(spec))
    want = hierarchy_oracle(lines.tolist(), cores.tolist(), spec, page, seed)
    u = lines.astype(np.uint64)
    got = simulate_coherent([(u, cores, np.zeros(n, bool))], caches, 2, page_bytes=page, placement_seed=seed)
    assert got.hits.tolist() == want
    counts, _ = simulate_stream([(u, cores)], caches, 2, hierarchical=True, page_bytes=page, placement_seed=seed)
    assert [c.hits for c in counts] == want


def test_bad_page_size():
    with pytest.raises(InputError, match="page_bytes"):
        LevelSim(level(512, 8, "physical"), 1, page_bytes=3000)
    with pytest.raises(InputError, match="page_bytes"):
        LevelSim(level(512, 8, "physical"), 1, page_bytes=32)
