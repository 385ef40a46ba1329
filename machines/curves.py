"""Figures measured per active-core count (the machine file's optional [curves] table) and their interpolation.

`pptmc machines detect` measures, for p = 1, 2, 4, .. and all cores, how one core's operation throughput,
the DRAM bandwidth, one core's share of the shared cache's line throughput, fork/join and barrier costs and
the cost of a line that p cores write in turn change with p (machines/SCHEMA.md). The runtime model reads
them at a run's thread count through `Curves.at`, linear in p between measured points (`interpolate`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from machines.fields import Checker, finite, kind_name

# figure -> what it is, per active-core count p (units in the name; transfer_cycles only for p >= 2)
CURVE_FIGURES = {
    "op_throughput_scale": "one core's operation throughput while p cores run, relative to one core alone (1 at p = 1)",
    "clock_scale": "one core's dependent-add rate (its clock) while p cores run, relative to one core alone (1 at p = 1)",
    "cold_start_ns": "extra time of the first parallel region on p threads after a cache flush",
    "bandwidth_gbs": "total DRAM read bandwidth p cores draw",
    "shared_line_ns": "ns per line one core gets from the shared cache while p cores read it",
    "fork_join_ns": "one empty parallel region on p threads",
    "barrier_ns": "one barrier of p threads",
    "transfer_cycles": "cycles per line a core pays for a line that p cores write in turn (p >= 2)",
}
PAIR_FIGURES = frozenset({"transfer_cycles"})  # measured only where another core can write the line
NON_NEGATIVE = frozenset({"cold_start_ns"})     # may be 0 (no extra cost measured); the others are > 0
UNIT_AT_ONE = ("op_throughput_scale", "clock_scale")  # relative to one core: 1 at p = 1
_KEYS = {"cores", "source", "spread", *CURVE_FIGURES}


def interpolate(points: Sequence[float], values: Sequence[float], p: float) -> float:
    """The value at `p` of the curve through (points[i], values[i]): linear between neighbouring points,
    the end value beyond either end (points strictly increasing, at least one)."""
    if p <= points[0]:
        return float(values[0])
    for i in range(1, len(points)):
        if p <= points[i]:
            lo, hi = points[i - 1], points[i]
            return float(values[i - 1] + (values[i] - values[i - 1]) * (p - lo) / (hi - lo))
    return float(values[-1])


@dataclass(frozen=True)
class Curves:
    """The [curves] table: figures per active-core count; a figure the file leaves out is ()."""

    cores: tuple[int, ...]
    figures: dict[str, tuple[float, ...]] = field(default_factory=dict)  # figure -> one value per point
    spread: dict[str, tuple[float, ...]] = field(default_factory=dict)   # figure -> relative spread per point

    def points(self, figure: str) -> tuple[int, ...]:
        """The core counts `figure` was measured at: all of `cores`, those above 1 for transfer_cycles."""
        return tuple(p for p in self.cores if p >= 2) if figure in PAIR_FIGURES else self.cores

    def has(self, figure: str) -> bool:
        """Whether the file gives `figure`."""
        return bool(self.figures.get(figure))

    def at(self, figure: str, p: float) -> float:
        """`figure` at p active cores, interpolated (the caller checks `has` first)."""
        return interpolate(self.points(figure), self.figures[figure], p)


def _numbers(chk: Checker, raw: Any, path: str, want: int, positive: bool) -> tuple[float, ...] | None:
    """A list of `want` finite numbers (positive, or not negative), or None and an error naming the entry."""
    if want == 0:
        chk.fail(path, "no entry of curves.cores is above 1 (a line needs two cores to move): leave it out")
        return None
    if not isinstance(raw, list) or not raw:
        chk.fail(path, f"expected a non-empty array of numbers, got {kind_name(raw)}")
        return None
    if len(raw) != want:
        chk.fail(path, f"has {len(raw)} values; it needs {want}, one per entry of curves.cores"
                       + (" above 1" if path.endswith("transfer_cycles") else ""))
        return None
    for i, v in enumerate(raw):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not finite(v) or (
                not v > 0 if positive else v < 0):
            need = "a positive number" if positive else "a number >= 0"
            chk.fail(f"{path}[{i}]", f"{v!r} is not a finite number" if isinstance(v, float) and not finite(v)
                     else f"must be {need}, got {v!r}")
            return None
    return tuple(float(v) for v in raw)


def _core_points(chk: Checker, raw: Any, machine_cores: int | None) -> tuple[int, ...] | None:
    """curves.cores: integers strictly increasing from 1 up to at most the machine's cores."""
    path = "curves.cores"
    if not isinstance(raw, list) or not raw or any(isinstance(p, bool) or not isinstance(p, int) for p in raw):
        chk.fail(path, f"expected a non-empty array of integers, got {raw!r}")
        return None
    if raw[0] != 1:
        chk.fail(path, f"must start at 1 (the one-core point the figures are relative to), got {raw[0]}")
        return None
    if any(b <= a for a, b in zip(raw, raw[1:])):
        chk.fail(path, f"must be strictly increasing, got {raw}")
        return None
    if machine_cores is not None and raw[-1] > machine_cores:
        chk.fail(path, f"{raw[-1]} exceeds the machine's {machine_cores} cores")
        return None
    return tuple(raw)


def check_curves(chk: Checker, data: dict, machine_cores: int | None) -> Curves | None:
    """The optional [curves] table, every problem recorded with its field path; None when absent or bad."""
    if "curves" not in data:
        return None
    before = len(chk.errors)
    table = chk.table(data["curves"], "curves")
    if table is None:
        return None
    chk.unknown(table, _KEYS, "curves.")
    chk.get(table, "source", "curves.", "str")
    if "cores" not in table:
        chk.fail("curves.cores", "missing (the active-core counts the figures were measured at)")
        return None
    cores = _core_points(chk, table["cores"], machine_cores)
    present = [name for name in CURVE_FIGURES if name in table]
    if not present:
        chk.fail("curves", f"needs at least one of {', '.join(CURVE_FIGURES)}")
    if cores is None:
        return None
    curves = Curves(cores)
    figures = {name: _numbers(chk, table[name], f"curves.{name}", len(curves.points(name)), name not in NON_NEGATIVE)
               for name in present}
    for name in UNIT_AT_ONE:
        if figures.get(name) and figures[name][0] != 1.0:
            chk.fail(f"curves.{name}[0]", f"must be 1 (one core relative to itself), got {figures[name][0]}")
    spread = _check_spread(chk, table["spread"], figures, curves) if "spread" in table else {}
    if len(chk.errors) > before:
        return None
    return Curves(cores, figures, spread)


def _check_spread(chk: Checker, raw: Any, figures: dict, curves: Curves) -> dict[str, tuple[float, ...]] | None:
    """The optional [curves.spread] table: per given figure, the relative spread of its repeats per point."""
    table = chk.table(raw, "curves.spread")
    if table is None:
        return None
    out = {}
    for name in sorted(table):
        if name not in figures:
            chk.fail(f"curves.spread.{name}", "names no figure of this [curves] table (check the spelling against "
                                              "machines/SCHEMA.md)")
            continue
        out[name] = _numbers(chk, table[name], f"curves.spread.{name}", len(curves.points(name)), False)
    return None if None in out.values() else out


def curves_to_dict(curves: Curves, source: str) -> dict:
    """The TOML-ready [curves] table of `curves` (inverse of check_curves)."""
    out: dict[str, Any] = {"cores": list(curves.cores)}
    out.update({name: list(curves.figures[name]) for name in CURVE_FIGURES if curves.has(name)})
    out["source"] = source
    if curves.spread:
        out["spread"] = {name: list(values) for name, values in curves.spread.items()}
    return out


def curve_note(curves: Curves | None) -> str:
    """One line naming the figures a machine has curves for, for `pptmc machines show`."""
    if curves is None:
        return ""
    given = [name for name in CURVE_FIGURES if curves.has(name)]
    return f"curves over {', '.join(map(str, curves.cores))} cores: {', '.join(given)}"

