"""Which form of each term a prediction uses: the memory layout, the CPU form, the contention model, and where
the threads and the data's pages sit."""
from __future__ import annotations

from dataclasses import dataclass

from common.errors import InputError
from machines.model import PLACEMENTS

LAYOUTS = ("contiguous", "noncontiguous", "pipelined")   # T_mem forms (terms/memory.py)
CPU_FORMS = ("throughput", "latency", "critical-path")   # T_CPU forms (terms/cpu.py)
PAPER_CPU_FORMS = CPU_FORMS[:2]                           # the paper's, priced from operation counts alone
CONTENTIONS = ("roofline", "queuing")                     # DRAM contention models (terms/contention.py)
# where the data's pages live (terms/numa.py): all on the first socket (a serial initialisation touched them),
# spread evenly over the sockets (numactl --interleave=all), or each thread's on its own socket (parallel first touch)
NUMA_PAGES = ("master", "interleave", "local")


@dataclass(frozen=True)
class ModelChoice:
    """The forms one prediction combines; every form of T_mem and T_CPU is still reported."""

    layout: str = "contiguous"
    cpu_form: str = "throughput"
    contention: str = "roofline"
    placement: str = "close"        # threads on cores (machines/model.py: thread_cores)
    numa_pages: str = "master"      # where the data's pages live (NUMA_PAGES)

    def check(self) -> None:
        """Reject a form the model does not know, naming the argument."""
        if self.layout not in LAYOUTS:
            raise InputError(f"layout {self.layout!r}: use one of {', '.join(LAYOUTS)}")
        if self.cpu_form not in CPU_FORMS:
            raise InputError(f"cpu form {self.cpu_form!r}: use one of {', '.join(CPU_FORMS)}")
        if self.contention not in CONTENTIONS:
            raise InputError(f"contention {self.contention!r}: use one of {', '.join(CONTENTIONS)}")
        if self.placement not in PLACEMENTS:
            raise InputError(f"placement {self.placement!r}: use one of {', '.join(PLACEMENTS)}")
        if self.numa_pages not in NUMA_PAGES:
            raise InputError(f"numa pages {self.numa_pages!r}: use one of {', '.join(NUMA_PAGES)}")
