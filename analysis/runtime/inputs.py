"""What the runtime model is fed: operation counts, executed blocks and per-level hit probabilities.

Eq. 6-7 of the paper take *local* (conditional) hit probabilities: level i serves h_i * prod_{j<i}(1 - h_j)
of all accesses. Cumulative rates (the paper's Table 6, hits at or above level i) are converted first
(analysis/RUNTIME_MODEL.md, "Hit rates").
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Iterable, Mapping, Sequence

from common.errors import InputError

# Operation classes that cost CPU time; loads and stores are priced by T_mem instead.
CPU_CLASSES = ("int_add", "int_mul", "int_div", "fp_add", "fp_mul", "fp_div", "fp_fma")
FP_CLASSES = ("fp_add", "fp_mul", "fp_div", "fp_fma")
INT_CLASSES = ("int_add", "int_mul", "int_div")
# Block-table keys folded into each class (subtraction runs on the adder).
_BLOCK_KEYS = {"int_add": ("int_add", "int_sub"), "int_mul": ("int_mul",), "int_div": ("int_div",),
               "fp_add": ("fp_add", "fp_sub"), "fp_mul": ("fp_mul",), "fp_div": ("fp_div",),
               "fp_fma": ("fp_fma",), "load": ("load",), "store": ("store",),
               "load_bytes": ("load_bytes",), "store_bytes": ("store_bytes",)}
_NOT_OPS = ("load_bytes", "store_bytes", "vector_width")


@dataclass(frozen=True)
class OpCounts:
    """Dynamic operation counts of a parallel region (all cores together)."""

    int_add: float = 0.0
    int_mul: float = 0.0
    int_div: float = 0.0
    fp_add: float = 0.0
    fp_mul: float = 0.0
    fp_div: float = 0.0
    fp_fma: float = 0.0
    load: float = 0.0
    store: float = 0.0
    load_bytes: float = 0.0
    store_bytes: float = 0.0

    def scaled(self, factor: float) -> "OpCounts":
        """The counts one core executes when it does `factor` of the work."""
        return OpCounts(**{f.name: getattr(self, f.name) * factor for f in fields(self)})

    @property
    def operations(self) -> float:
        """Every counted operation (arithmetic, loads, stores): the model's stand-in for instructions."""
        return sum(getattr(self, f.name) for f in fields(self) if not f.name.endswith("_bytes"))

    @property
    def store_fraction(self) -> float:
        """Stores among memory operations; 0 when there are none."""
        total = self.load + self.store
        return self.store / total if total else 0.0


@dataclass(frozen=True)
class BlockWork:
    """An executed block: its executions, static mix per execution and the operations on its
    loop-carried dependence chain (passes/chains.py; empty if none), for the critical-path CPU form."""

    count: float
    ops: Mapping[str, float]
    chain: Mapping[str, int]
    calls: Mapping[str, int] = field(default_factory=dict)  # direct calls per execution, by callee
    trip: float = 0.0  # mean executions per entry into the (self-looping) block; 0 = unknown
    # operations executed per entry into the (self-looping) block by its innermost enclosing loop,
    # the block's own trip x ops included (block_work, from the CFG); 0 = unknown, take trip x ops
    span_ops: float = 0.0
    # stores per execution that write another cache line than the store before them in program order
    # (store_lines.py); they cannot pair with it when the L1 commits stores; 0 = unknown, all pair
    new_line_stores: float = 0.0
    # L1 refills per execution along a row, not a line's first touch (l1_walks.py); 0 = unknown, none
    streamed_fills: float = 0.0
    block_id: int = -1  # the trace's block id (matches analysis.runtime.incore.LoopBound.blocks); -1 = unknown

    @property
    def op_total(self) -> float:
        """Counted operations of one execution (sizes and the vector width are not operations)."""
        return sum(v for k, v in self.ops.items() if k not in _NOT_OPS)

    def mix(self) -> OpCounts:
        """One execution's operations, folded into the model's classes."""
        return op_counts_from_blocks({0: self.ops}, {0: 1})


@dataclass(frozen=True)
class HitRates:
    """Per-level local (conditional) hit probabilities, L1 first."""

    levels: tuple[str, ...]
    local: tuple[float, ...]

    @staticmethod
    def from_local(local: Mapping[str, float], levels: Sequence[str]) -> "HitRates":
        """Order a level -> local rate mapping by the machine's levels; every level is required."""
        missing = [name for name in levels if name not in local]
        if missing:
            raise InputError(f"hit rates: no rate for cache level(s) {', '.join(missing)}; "
                             f"give one per level of the machine ({', '.join(levels)})")
        rates = tuple(float(local[name]) for name in levels)
        for name, rate in zip(levels, rates):
            if not 0.0 <= rate <= 1.0:
                raise InputError(f"hit rates: {name} = {rate} is not a probability in [0, 1]")
        return HitRates(tuple(levels), rates)

    @staticmethod
    def from_cumulative(cumulative: Mapping[str, float], levels: Sequence[str]) -> "HitRates":
        """Convert cumulative rates (hit at or above level i) to local ones."""
        cum = [float(cumulative[name]) for name in levels]
        return HitRates.from_local(dict(zip(levels, local_from_cumulative(cum))), levels)

    def served(self) -> list[float]:
        """Fraction of all accesses each level serves, then RAM as the last entry."""
        return served_fractions(self.local)

    def cumulative(self) -> list[float]:
        """Fraction of all accesses that hit at or above each level."""
        return list(_running_sum(self.served()[:-1]))


def _running_sum(values: Iterable[float]) -> Iterable[float]:
    """Prefix sums, accumulated left to right."""
    total = 0.0
    for v in values:
        total += v
        yield total


def served_fractions(local: Sequence[float]) -> list[float]:
    """Level i serves h_i * prod_{j<i}(1 - h_j) of all accesses; the rest (last entry) go to RAM."""
    out, reach = [], 1.0
    for h in local:
        out.append(reach * h)
        reach *= 1.0 - h
    return out + [reach]


def local_from_cumulative(cumulative: Sequence[float]) -> list[float]:
    """h_i = (C_i - C_{i-1}) / (1 - C_{i-1}); a level nothing reaches gets local rate 1."""
    out, prev = [], 0.0
    for c in cumulative:
        if c < prev - 1e-12:
            raise InputError(f"hit rates: cumulative rate {c} is below the previous level's {prev}; "
                             "cumulative rates cannot decrease with depth (are these local rates?)")
        reach = 1.0 - prev
        out.append(min(1.0, max(0.0, (c - prev) / reach)) if reach > 0 else 1.0)
        prev = max(prev, c)
    return out


def op_counts_from_blocks(block_table_ops: Mapping[int, Mapping[str, float]],
                          block_counts: Mapping[int, int]) -> OpCounts:
    """Static per-block mix times block executions; blocks without an entry contribute nothing."""
    totals = dict.fromkeys(_BLOCK_KEYS, 0.0)
    for block, count in block_counts.items():
        mix = block_table_ops.get(block)
        if not mix or not count:
            continue
        for name, keys in _BLOCK_KEYS.items():
            totals[name] += count * sum(float(mix.get(k, 0)) for k in keys)
    return OpCounts(**totals)
