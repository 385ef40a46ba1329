"""One HitRatePredictor interface, with interchangeable analytic and simulated implementations.

Every implementation turns what one sequential trace gives (its reuse profiles, and the trace
itself for the simulators) into the same table (analysis/hitrates/rates.py: COLUMNS): one row per
(cores, level) with cumulative, local and level hit rates. Commands choose one by name
(`--hit-rates NAME`); analysis/predict.py is the only caller.

- `sdcm`: the paper's Stack Distance Cache Model on the PRD/CRD profiles (random set placement).
- `simulated`: the set-associative LRU simulator on the same mimicked private/shared traces,
  hierarchical, with write-invalidate coherence when the profiles model it.
- `hybrid`: SDCM, with the first level's rate taken from the simulator (the L1 is virtually
  indexed, so the trace's addresses decide its sets; see rates.with_first_level).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol, Sequence

import pandas as pd

from analysis.hitrates.rates import predict_hit_rates, with_first_level
from analysis.profiles.profileset import ProfileSet
from analysis.options import HIT_RATE_MODELS
from common.errors import InputError
from machines.model import Machine


@dataclass(frozen=True)
class HitRateInputs:
    """What a predictor may read: the trace, its profiles (and the folder they are saved in)."""

    trace: Path
    profiles: ProfileSet


class HitRatePredictor(Protocol):
    """Hit rates of one machine's cache levels for the profiles' core counts."""

    name: str

    def predict(self, inputs: HitRateInputs, machine: Machine, cores: Sequence[int]) -> pd.DataFrame:
        """One row per (cores, level) in `cores`, columns rates.COLUMNS."""


class SdcmPredictor:
    """SDCM (Brehob and Enbody; the paper's Eq. 1-3) on private and concurrent reuse profiles."""

    name = "sdcm"

    def predict(self, inputs: HitRateInputs, machine: Machine, cores: Sequence[int]) -> pd.DataFrame:
        table = predict_hit_rates(inputs.profiles, machine)
        return table[table["cores"].isin(list(cores))].reset_index(drop=True)


class SimulatedPredictor:
    """The LRU simulator on the private/shared traces the profiles were made from."""

    name = "simulated"

    def predict(self, inputs: HitRateInputs, machine: Machine, cores: Sequence[int]) -> pd.DataFrame:
        from analysis.hitrates.cachesim import simulate_like  # numba kernels: only when chosen

        ps = inputs.profiles
        return simulate_like(inputs.trace, machine, ps, list(cores), hierarchical=True, coherent=ps.coherence)


class HybridPredictor:
    """SDCM with the first (virtually indexed) level simulated."""

    name = "hybrid"

    def predict(self, inputs: HitRateInputs, machine: Machine, cores: Sequence[int]) -> pd.DataFrame:
        sdcm = SdcmPredictor().predict(inputs, machine, cores)
        first_only = replace(machine, caches=machine.caches[:1])
        first = SimulatedPredictor().predict(inputs, first_only, cores)
        first = first[first["level"] == machine.caches[0].name]
        rates = {int(c): float(r) for c, r in zip(first["cores"], first["cumulative_hit_rate"])}
        return with_first_level(sdcm, rates)


_PREDICTORS: dict[str, type] = {p.name: p for p in (SdcmPredictor, HybridPredictor, SimulatedPredictor)}


def hit_rate_predictor(name: str) -> HitRatePredictor:
    """The implementation called `name`; an InputError naming the choices otherwise."""
    if name not in _PREDICTORS:
        raise InputError(f"--hit-rates {name!r}: use one of {', '.join(HIT_RATE_MODELS)}")
    return _PREDICTORS[name]()
