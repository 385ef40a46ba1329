"""Which form of each term a prediction uses: the memory layout, the CPU form and the contention model."""
from __future__ import annotations

from dataclasses import dataclass

from common.errors import InputError

LAYOUTS = ("contiguous", "noncontiguous", "pipelined")   # T_mem forms (terms/memory.py)
CPU_FORMS = ("throughput", "latency", "critical-path")   # T_CPU forms (terms/cpu.py)
PAPER_CPU_FORMS = CPU_FORMS[:2]                           # the paper's, priced from operation counts alone
CONTENTIONS = ("roofline", "queuing")                     # DRAM contention models (terms/contention.py)


@dataclass(frozen=True)
class ModelChoice:
    """The forms one prediction combines; every form of T_mem and T_CPU is still reported."""

    layout: str = "contiguous"
    cpu_form: str = "throughput"
    contention: str = "roofline"

    def check(self) -> None:
        """Reject a form the model does not know, naming the argument."""
        if self.layout not in LAYOUTS:
            raise InputError(f"layout {self.layout!r}: use one of {', '.join(LAYOUTS)}")
        if self.cpu_form not in CPU_FORMS:
            raise InputError(f"cpu form {self.cpu_form!r}: use one of {', '.join(CPU_FORMS)}")
        if self.contention not in CONTENTIONS:
            raise InputError(f"contention {self.contention!r}: use one of {', '.join(CONTENTIONS)}")
