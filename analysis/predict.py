"""The one prediction path: a program's profiles and trace facts, a machine and ModelOptions in; hit
rates, TLB miss rates and runtimes out.

`pptmc run`, `suite`, `predict`, `measure` and `validate` all call `predict_machine` (the pipeline
through pptmc/pipeline.py, `predict` directly), so they apply the same model with the same
defaults (analysis/options.py). Where the facts come from is the caller's business: the pipeline
hands cached steps (RegionSources), `pptmc predict` computes them on the spot.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd

from analysis.hitrates.predictor import HitRateInputs, hit_rate_predictor
from analysis.hitrates.dram import dram_traffic
from analysis.hitrates.rates import busiest_upgrades, coherence_miss_rates, with_mpki
from analysis.options import DEFAULT_OPTIONS, ModelOptions
from analysis.profiles.profileset import ProfileSet
from analysis.runtime.facts import operation_count
from analysis.runtime.model import RegionRecord, RuntimePrediction, prediction_table, predict_runtimes
from analysis.runtime.tlb import page_sizes, tlb_miss_rates
from analysis.runtime.trace_terms import TraceTerms
from common.errors import InputError
from machines.model import Machine


@dataclass(frozen=True)
class RegionSources:
    """Where one program's facts come from (all of them derived from its one sequential trace)."""

    trace: Path
    binary: Path | None                                 # None: the program the trace names
    profiles: ProfileSet | None                         # None only with a given hit_rate_table
    terms_for: Callable[[Machine], TraceTerms]          # the trace facts a machine prices (trace_terms.py)
    page_profiles_for: Callable[[int], ProfileSet]      # private profiles with pages of N bytes as lines (TLB)
    hit_rate_table: pd.DataFrame | None = None          # given hit rates instead of a predictor's (pptmc predict)

    @cached_property
    def record(self) -> RegionRecord:
        """The trace's and its binary's facts, read once for every machine (not at all for hit rates alone)."""
        return RegionRecord.load(self.trace, self.binary)


@dataclass
class MachinePrediction:
    """One machine's predictions for the requested core counts (tables with a `machine` column)."""

    machine: Machine
    hit_rates: pd.DataFrame
    predictions: list[RuntimePrediction]               # one per core count; each explains its terms
    tlb_rates: pd.DataFrame | None
    terms: TraceTerms
    coherence: dict[int, float]                        # cores -> coherence-miss fraction the runtimes used
    dram: pd.DataFrame | None = None                   # DRAM read and write-back bytes (profiles with write-backs)

    @property
    def runtimes(self) -> pd.DataFrame:
        """The predictions as a table, one row per core count, with a machine column."""
        return prediction_table(self.predictions).assign(machine=self.machine.name)


def predict_hit_rates_for(sources: RegionSources, machine: Machine, cores: Sequence[int],
                          options: ModelOptions = DEFAULT_OPTIONS) -> pd.DataFrame:
    """The chosen HitRatePredictor's table for `machine` (or the given table), with a machine column."""
    if sources.hit_rate_table is not None:
        return _given_rates(sources.hit_rate_table, cores).assign(machine=machine.name)
    predictor = hit_rate_predictor(options.hit_rates)
    hits = predictor.predict(HitRateInputs(sources.trace, sources.profiles, options.placement), machine, cores)
    return hits.assign(machine=machine.name)


def _given_rates(table: pd.DataFrame, cores: Sequence[int]) -> pd.DataFrame:
    """A user's hit-rate table, restricted to `cores`, each of which it must cover."""
    if "cores" not in table.columns:
        raise InputError("hit-rate table: missing column cores")
    missing = sorted(set(cores) - set(int(c) for c in table["cores"]))
    if missing:
        raise InputError(f"hit rates: none for {','.join(map(str, missing))} cores; recompute them for cores "
                         f"{','.join(map(str, cores))}")
    return table[table["cores"].isin(list(cores))].reset_index(drop=True)


def tlb_rates_for(sources: RegionSources, machine: Machine) -> pd.DataFrame | None:
    """The machine's TLB miss rates per core count, or None when its file has no [[tlbs]]."""
    if not machine.tlbs:
        return None
    sets = {page: sources.page_profiles_for(page) for page in page_sizes(machine)}
    return tlb_miss_rates(sets, machine).assign(machine=machine.name)


def predict_machine(sources: RegionSources, machine: Machine, cores: Sequence[int],
                    options: ModelOptions = DEFAULT_OPTIONS) -> MachinePrediction:
    """Hit rates, TLB miss rates and runtimes of one program on one machine: the model, applied once."""
    hits = with_mpki(predict_hit_rates_for(sources, machine, cores, options), operation_count(sources.record))
    tlb = tlb_rates_for(sources, machine)
    terms = sources.terms_for(machine)
    coherence = None if sources.hit_rate_table is not None else coherence_miss_rates(sources.profiles)
    dram = None
    if sources.profiles is not None and sources.profiles.writebacks:
        dram = dram_traffic(sources.profiles, hits, machine, options.placement).assign(machine=machine.name)
    critical = sources.profiles.critical_path if sources.profiles is not None else None
    upgrades = busiest_upgrades(sources.profiles) if coherence is not None else None
    predictions = predict_runtimes(machine, hits, sources.record, tlb=tlb, coherence=coherence, terms=terms,
                                   writebacks=writeback_shares(dram), critical_path=critical, upgrades=upgrades,
                                   **options.runtime_args())
    return MachinePrediction(machine, hits, predictions, tlb, terms, coherence or {}, dram)


def writeback_shares(dram: pd.DataFrame | None) -> dict[int, float] | None:
    """Cores -> DRAM write-back bytes per access from a dram_traffic table, for the runtime model's DRAM bytes
    (None without one: the model falls back to the store-fraction estimate)."""
    if dram is None:
        return None
    return {int(r.cores): float(r.dram_writeback_bytes) / r.accesses if r.accesses else 0.0
            for r in dram.itertuples()}


def explain_table(prediction: MachinePrediction) -> pd.DataFrame:
    """Per core count, each term's seconds as the model adds them up, its share of the runtime, and which
    term binds (RuntimePrediction.contributions and bound_by): why a prediction is what it is."""
    rows = []
    for p in prediction.predictions:
        bound = p.bound_by
        for term, seconds in p.contributions().items():
            rows.append({"machine": prediction.machine.name, "cores": p.cores, "term": term, "seconds": seconds,
                         "share": seconds / p.runtime_s if p.runtime_s else 0.0, "binds": term == bound})
    return pd.DataFrame(rows, columns=["machine", "cores", "term", "seconds", "share", "binds"])
