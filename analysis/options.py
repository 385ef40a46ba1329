"""The model's options and their defaults, in one place: every command that predicts takes them from here.

`pptmc run`, `suite`, `predict`, `measure` and `validate` build one ModelOptions from their flags
(analysis/predict.py applies it), so a prediction made by any of them is the same model; every
report prints `ModelOptions.describe()`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from analysis.runtime.choices import CONTENTIONS, CPU_FORMS, LAYOUTS, NUMA_PAGES
from common.errors import InputError

# The choices of the earlier stages, defined here (a light module: the CLI builds its parsers from it
# without loading numba); the runtime model's forms come from analysis/runtime/choices.py.
MODES = ("auto", "iteration", "paper")              # private traces (analysis/profiles/private_traces.py)
INTERLEAVES = ("rr", "random")                      # shared trace (analysis/profiles/interleave.py)
HIT_RATE_MODELS = ("set-aware", "sdcm", "simulated")  # HitRatePredictors (analysis/hitrates/predictor.py)
PLACEMENTS = ("close", "spread")                    # threads on cores (machines/model.py: thread_cores)

_CHOICES = {"mode": MODES, "interleave": INTERLEAVES, "hit_rates": HIT_RATE_MODELS, "placement": PLACEMENTS,
            "numa_pages": NUMA_PAGES, "layout": LAYOUTS,
            "cpu_form": CPU_FORMS, "contention": CONTENTIONS}


@dataclass(frozen=True)
class ModelOptions:
    """How profiles, hit rates and runtimes are modelled; the defaults are the validated model."""

    mode: str = "auto"                 # auto: per-iteration schedule when the trace has loop markers
    interleave: str = "rr"
    seed: int = 0                      # seed of the random interleaving
    coherence: bool = True             # write-invalidate coherence between private caches
    hit_rates: str = "set-aware"       # which HitRatePredictor turns profiles into hit rates
    placement: str = "close"           # OpenMP proc_bind: which cores (shared-cache instances, sockets) threads use
    numa_pages: str = "master"         # where the data's pages live: socket 0, interleaved, or each thread's own socket
    layout: str = "pipelined"
    cpu_form: str = "critical-path"
    contention: str = "roofline"
    block_bytes: float | None = None   # Eq. 5's contiguous block b (None: the mean access size)
    gap_bytes: float = 0.0             # Eq. 5's gap v between blocks (the non-contiguous layout)

    def __post_init__(self) -> None:
        for name, choices in _CHOICES.items():
            value = getattr(self, name)
            if value not in choices:
                flag = "--" + name.replace("_", "-")
                raise InputError(f"{flag} {value!r}: use one of {', '.join(choices)}")
        if self.seed < 0:
            raise InputError(f"--seed {self.seed}: give a non-negative integer")
        if self.block_bytes is not None and not 0 < self.block_bytes < float("inf"):
            raise InputError(f"--block-bytes {self.block_bytes}: give a positive number of bytes")
        if not 0 <= self.gap_bytes < float("inf"):
            raise InputError(f"--gap-bytes {self.gap_bytes}: give a non-negative number of bytes")

    def runtime_args(self) -> dict:
        """The runtime model's keyword arguments (analysis/runtime/model.py: predict_table)."""
        return {"layout": self.layout, "contention": self.contention, "cpu_form": self.cpu_form,
                "block_bytes": self.block_bytes, "gap_bytes": self.gap_bytes, "placement": self.placement,
                "numa_pages": self.numa_pages}

    def as_dict(self) -> dict:
        """Machine-readable form, written beside every result table."""
        return asdict(self)

    def describe(self) -> str:
        """One line naming every option, for reports."""
        return ", ".join(f"{k.replace('_', '-')}={v}" for k, v in self.as_dict().items())


DEFAULT_OPTIONS = ModelOptions()
