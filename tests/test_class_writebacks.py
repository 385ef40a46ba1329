"""Write-back profiles within set classes (writebacks.ClassWritebacks, dram.py): exact for a virtually
indexed last level whose set bits are all known, and on a physically indexed one at power-of-two rows,
where distances over all lines miss the set conflicts, against the set-associative simulator."""
import dataclasses

import numpy as np
import pytest

from analysis.hitrates.dram import dram_traffic
from analysis.hitrates.rates import predict_hit_rates, profile_needs, writeback_class_bits
from analysis.hitrates.turnover import expected_hits_with_turnover
from analysis.hitrates.writeback_sim import WritebackSim
from analysis.profiles.profileset import ProfileSet, ReuseProfile, sum_profiles
from analysis.profiles.set_classes import MAX_CLASS_BITS
from analysis.profiles.writebacks import InstanceWritebacks
from common.errors import InputError
from machines import load_machine
from test_turnover import rows_then_columns


def level(indexing, ways, sets):
    return dataclasses.replace(load_machine("zen2-epyc-7702p").caches[-1], size_bytes=sets * ways * 64,
                               associativity=ways, indexing=indexing, shared=True, cores_per_instance=0)


def predicted(lines, inst, bits, ways, n_lines):
    """Write-backs of four instances' class profiles, read with one class's share of the lines."""
    prof = InstanceWritebacks(4, True, bits)
    prof.feed(lines, inst)
    per_class = n_lines >> bits
    return sum(expected_hits_with_turnover(s, ways, per_class) - expected_hits_with_turnover(e, ways, per_class)
               for s, e in prof.profiles())


def simulated(lines, inst, llc):
    sims = []
    for seed in range(4):
        sim = WritebackSim(llc, seed=seed, instances=4)
        sim.feed(lines, inst)
        sims.append(sim.writebacks)
    return float(np.mean(sims))


def test_every_set_bit_known_is_exact():
    """Virtually indexed, 64 sets: a class is one set, a fully associative cache of its ways."""
    lines, inst = rows_then_columns(128, 16, 4)
    llc = level("virtual", 4, 64)
    want = simulated(lines, inst, llc)
    assert want > 0
    assert predicted(lines, inst, 6, 4, llc.n_lines) == pytest.approx(want, abs=1e-6)
    assert abs(predicted(lines, inst, 0, 4, llc.n_lines) - want) > 0.03 * want  # plain SDCM misses the sets


@pytest.mark.parametrize("n,sets", [(256, 128), (512, 512)])
def test_power_of_two_rows_on_a_physical_level(n, sets):
    """Rows of whole pages put each column into one in-page set class: the plain profiles read 94 % low,
    the class profiles within 5 % of the simulator (mean of 4 frame maps)."""
    lines, inst = rows_then_columns(n, 16, 4)
    llc = level("physical", 16, sets)
    want = simulated(lines, inst, llc)
    assert predicted(lines, inst, 6, 16, llc.n_lines) == pytest.approx(want, rel=0.05)
    assert predicted(lines, inst, 0, 16, llc.n_lines) < 0.2 * want


def test_sum_of_profiles_adds_bins_by_distance():
    a = ReuseProfile(np.array([1, 8]), np.array([2, 12]), np.array([2, 3]), np.array([2, 27]), 1, 6, 0,
                     np.array([0, 5]))
    b = ReuseProfile(np.array([8, 40]), np.array([12, 48]), np.array([1, 4]), np.array([9, 170]), 2, 7, 1)
    s = sum_profiles([a, b])
    assert (s.lower.tolist(), s.upper.tolist(), s.count.tolist(), s.dist_sum.tolist()) == \
        ([1, 8, 40], [2, 12, 48], [2, 4, 4], [2, 36, 170])
    assert (s.cold, s.total, s.coherence, s.turnover_sum.tolist()) == (3, 13, 1, [0, 5, 0])


def test_the_width_is_what_every_last_level_takes_from_the_address():
    zen2, haswell = load_machine("zen2-epyc-7702p"), load_machine("broadwell-2s-e5-2699v4")
    assert writeback_class_bits([zen2]) == zen2.caches[-1].known_set_bits(zen2.page_bytes)
    assert writeback_class_bits([zen2, haswell]) == min(m.caches[-1].known_set_bits(m.page_bytes)
                                                        for m in (zen2, haswell))
    assert profile_needs([zen2], [1, 4]).writeback_bits == writeback_class_bits([zen2])
    virtual = dataclasses.replace(zen2, caches=zen2.caches[:-1] + (level("virtual", 16, 16384),))
    assert writeback_class_bits([virtual]) == MAX_CLASS_BITS < 14  # a tracker per class: capped, as class profiles


def test_profiles_of_more_bits_than_the_level_knows_are_refused(tmp_path):
    ps = ProfileSet(64, "iteration", "rr", 0, 1, "t.trace", writeback_bits=6)
    ps.crd[1] = ReuseProfile.from_distances(np.array([-1, 0]))
    ps.prd[(1, 0)] = ps.crd[1]
    ps.writebacks[1] = (ReuseProfile.from_distances(np.array([0])), ReuseProfile.from_distances(np.array([3])))
    hashed = dataclasses.replace(load_machine("zen2-epyc-7702p"), caches=load_machine("zen2-epyc-7702p").caches[:-1]
                                 + (level("hashed", 16, 1024),))
    with pytest.raises(InputError, match="6-bit set classes"):
        dram_traffic(ps, predict_hit_rates(ps, hashed, set_aware=False), hashed)
    back = ProfileSet.load(ps.save(tmp_path / "p"))
    assert back.writeback_bits == 6
