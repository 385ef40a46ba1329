"""The coherence-transfer term of the runtime model and the coherence-miss fractions it uses."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from analysis.runtime import model as rm
from analysis.runtime.terms.coherence import transfer_extra_cycles
from analysis.runtime.terms.memory import ram_costs_cycles
from analysis.hitrates.rates import coherence_miss_rates
from analysis.profiles.profileset import ProfileSet, ReuseProfile
from tests.test_runtime_model import HALF, OPS, toy_machine


def test_coherence_miss_fractions_weight_cores_by_accesses():
    ps = ProfileSet(64, "iteration", "rr", 0, 1, "t")
    one = ReuseProfile.from_distances(np.array([-1, 0, 1, 0]))
    a, b = ReuseProfile.from_distances(np.array([-1] * 3 + [0] * 7)), ReuseProfile.from_distances(np.array([-1] * 30))
    ps.prd.update({(1, 0): one, (2, 0): dataclasses.replace(a, coherence=2), (2, 1): dataclasses.replace(b, coherence=10)})
    ps.crd.update({1: one, 2: one})
    assert coherence_miss_rates(ps) == {1: 0.0, 2: pytest.approx(12 / 40)}


def test_transfer_cost_replaces_the_shared_level_price():
    m = dataclasses.replace(toy_machine(bw_one=1e6, bw_all=1e6), transfer_cycles=10.0)
    assert transfer_extra_cycles(m) == pytest.approx(10.0 - 4.0)  # toy L3 (shared) recip throughput 4
    assert transfer_extra_cycles(toy_machine()) == 0.0  # no figure: no correction
    base = rm.predict_runtime(m, 2, HALF, OPS, 1000, 8000, work_share=0.5)
    with_coh = rm.predict_runtime(m, 2, HALF, OPS, 1000, 8000, work_share=0.5, coherence_miss_rate=0.1)
    want_s = 500 * 0.1 * 6.0 / (m.frequency_ghz * 1e9)
    assert base.t_coherence_s == 0.0 and with_coh.t_coherence_s == pytest.approx(want_s)
    assert with_coh.runtime_s - base.runtime_s == pytest.approx(want_s)
    no_shared = dataclasses.replace(m, caches=tuple(dataclasses.replace(c, shared=False) for c in m.caches))
    ram_line = ram_costs_cycles(no_shared)[1]
    assert transfer_extra_cycles(no_shared) == pytest.approx(10.0 - ram_line)


def test_upgrades_cost_the_measured_upgrade_cycles_each():
    """T_coh's upgrade part, hand-computed: the busiest core's 300 upgrades at 20 cycles, added to the transfers'
    part; none without the machine's figure; busiest_upgrades takes the core with the most."""
    from analysis.hitrates.rates import busiest_upgrades

    m = dataclasses.replace(toy_machine(bw_one=1e6, bw_all=1e6), transfer_cycles=10.0, upgrade_cycles=20.0)
    base = rm.predict_runtime(m, 2, HALF, OPS, 1000, 8000, work_share=0.5, coherence_miss_rate=0.1)
    more = rm.predict_runtime(m, 2, HALF, OPS, 1000, 8000, work_share=0.5, coherence_miss_rate=0.1, upgrades=300)
    want_s = 300 * 20.0 / (m.frequency_ghz * 1e9)
    assert more.t_coherence_s - base.t_coherence_s == pytest.approx(want_s)
    assert more.runtime_s - base.runtime_s == pytest.approx(want_s)
    no_figure = dataclasses.replace(m, upgrade_cycles=0.0)
    assert rm.predict_runtime(no_figure, 2, HALF, OPS, 1000, 8000, work_share=0.5, coherence_miss_rate=0.1,
                              upgrades=300).runtime_s == pytest.approx(base.runtime_s)
    ps = ProfileSet(64, "iteration", "rr", 0, 1, "t", upgrades={2: [120, 300], 4: [5, 0, 9, 2]})
    assert busiest_upgrades(ps) == {2: 300, 4: 9}
    assert busiest_upgrades(ProfileSet(64, "iteration", "rr", 0, 1, "t")) == {}
