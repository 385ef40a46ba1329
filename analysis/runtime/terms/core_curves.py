"""Which figures a term takes from the machine's curves over active cores ([curves], machines/curves.py).

A term reads its figure at the run's p from the curve when the machine file gives that curve, and falls back
to its fixed form (the one-core and all-core figures, scaled as analysis/RUNTIME_MODEL.md says) otherwise.
`scaling_forms` names, per curve the model reads, which of the two a prediction used.
"""
from __future__ import annotations

from machines.model import Machine
from machines.probeplan import STABLE_SPREAD

# curve -> the term that reads it (analysis/RUNTIME_MODEL.md "Curves over active cores")
MODEL_CURVES = {"bandwidth_gbs": "DRAM bandwidth", "fork_join_ns": "fork/join", "barrier_ns": "barrier",
                "transfer_cycles": "coherence transfer", "op_throughput_scale": "op throughput",
                "cold_start_ns": "cold start"}


def curve_value(machine: Machine, figure: str, cores: int) -> float | None:
    """`figure` at `cores` active cores from the machine's curve, or None where it has no such curve."""
    curves = machine.curves
    if curves is None or not curves.has(figure):
        return None
    return curves.at(figure, cores)


def scaling_forms(machine: Machine) -> str:
    """"fallback" when the machine has no curve the model reads; otherwise "curves (...)" naming the terms that
    read theirs, and "; fallback (...)" the rest."""
    curves = machine.curves
    used = [label for figure, label in MODEL_CURVES.items() if curves is not None and curves.has(figure)]
    if not used:
        return "fallback"
    rest = [label for label in MODEL_CURVES.values() if label not in used]
    return f"curves ({', '.join(used)})" + (f"; fallback ({', '.join(rest)})" if rest else "")


def unsettled_curves(machine: Machine, limit: float = STABLE_SPREAD) -> list[str]:
    """The curves the model reads whose repeats did not agree within `limit` (detect's own stability bound,
    [curves.spread]), each with its largest spread and where: a prediction made from them is that uncertain."""
    curves = machine.curves
    if curves is None:
        return []
    out = []
    for figure, label in MODEL_CURVES.items():
        spread = curves.spread.get(figure) or ()
        if curves.has(figure) and spread and max(spread) > limit:
            worst = max(range(len(spread)), key=spread.__getitem__)
            out.append(f"{label} {figure} (spread {spread[worst]:.0%} at {curves.points(figure)[worst]} cores)")
    return out
