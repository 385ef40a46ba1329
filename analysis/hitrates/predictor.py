"""One HitRatePredictor interface, with interchangeable analytic and simulated implementations.

Every implementation turns what one sequential trace gives (its reuse profiles, and the trace
itself for the simulators) into the same table (analysis/hitrates/rates.py: COLUMNS): one row per
(cores, level) with cumulative, local and level hit rates. Commands choose one by name
(`--hit-rates NAME`); analysis/predict.py is the only caller.

- `set-aware` (the default): SDCM on the per-set-class profiles, which sees the set conflicts of
  virtually indexed levels exactly and models the page frame's bits of physically indexed ones as
  random (analysis/hitrates/rates.py); hashed levels read the plain profiles, as SDCM does.
- `sdcm`: the paper's Stack Distance Cache Model on the PRD/CRD profiles (random set placement).
- `simulated`: the set-associative LRU simulator on the same mimicked private/shared traces,
  hierarchical, with write-invalidate coherence when the profiles model it; a shared level has one
  instance per group of cores, the threads placed by the options' placement (cachesim.simulate_like).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Sequence

import pandas as pd

from analysis.hitrates.rates import predict_hit_rates
from analysis.profiles.profileset import ProfileSet
from analysis.options import HIT_RATE_MODELS
from common.errors import InputError
from machines.model import Machine


@dataclass(frozen=True)
class HitRateInputs:
    """What a predictor may read: the trace, its profiles (and the folder they are saved in)."""

    trace: Path
    profiles: ProfileSet
    placement: str = "close"  # threads on cores (machines.model.thread_cores)


class HitRatePredictor(Protocol):
    """Hit rates of one machine's cache levels for the profiles' core counts."""

    name: str

    def predict(self, inputs: HitRateInputs, machine: Machine, cores: Sequence[int]) -> pd.DataFrame:
        """One row per (cores, level) in `cores`, columns rates.COLUMNS."""


class SetAwarePredictor:
    """SDCM per set class: the levels' set index bits the addresses fix are honoured."""

    name = "set-aware"

    def predict(self, inputs: HitRateInputs, machine: Machine, cores: Sequence[int]) -> pd.DataFrame:
        table = predict_hit_rates(inputs.profiles, machine, set_aware=True, placement=inputs.placement)
        return table[table["cores"].isin(list(cores))].reset_index(drop=True)


class SdcmPredictor:
    """SDCM (Brehob and Enbody; the paper's Eq. 1-3) on private and concurrent reuse profiles."""

    name = "sdcm"

    def predict(self, inputs: HitRateInputs, machine: Machine, cores: Sequence[int]) -> pd.DataFrame:
        table = predict_hit_rates(inputs.profiles, machine, placement=inputs.placement)
        return table[table["cores"].isin(list(cores))].reset_index(drop=True)


class SimulatedPredictor:
    """The LRU simulator on the private/shared traces the profiles were made from, one instance of a shared
    level per group of cores with the threads placed by inputs.placement (as the ground truth)."""

    name = "simulated"

    def predict(self, inputs: HitRateInputs, machine: Machine, cores: Sequence[int]) -> pd.DataFrame:
        from analysis.hitrates.cachesim import simulate_like  # numba kernels: only when chosen

        ps = inputs.profiles
        return simulate_like(inputs.trace, machine, ps, list(cores), hierarchical=True, coherent=ps.coherence,
                             placement=inputs.placement)


_PREDICTORS: dict[str, type] = {p.name: p for p in (SetAwarePredictor, SdcmPredictor, SimulatedPredictor)}


def hit_rate_predictor(name: str) -> HitRatePredictor:
    """The implementation called `name`; an InputError naming the choices otherwise."""
    if name not in _PREDICTORS:
        raise InputError(f"--hit-rates {name!r}: use one of {', '.join(HIT_RATE_MODELS)}")
    return _PREDICTORS[name]()
