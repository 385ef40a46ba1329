"""The trace's distinct-line sketch (footer member `distinct_lines`, instrument/FORMAT.md): a HyperLogLog of
every access's 64-byte line that the runtime keeps, and the estimate of the number of distinct lines it gives.

Why a sketch: the profiling sweep's engines hold a few dozen bytes per distinct line, and `pptmc profile` checks
that they fit in memory before reading the trace (analysis/profiles/limits.py); the footer's counts give only
the number of accesses, which overstates the lines by orders of magnitude. The estimator is Ertl's improved
raw estimator ("New cardinality estimation algorithms for HyperLogLog sketches", 2017): unbiased from one line
to billions without bias tables. Hand-written (a few lines) because the runtime side runs inside the tracer's
inlined hot path, where no library fits; this side must agree with it bit for bit.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from common.errors import InputError

SKETCH_NAME = "hll-splitmix64"
SKETCH_BITS = 12                      # 2^12 one-byte registers (pptmc_rt.c SKETCH_BITS)
LINE_BYTES = 64                       # the sketch's line (pptmc_rt.c SKETCH_LINE_SHIFT)
RELATIVE_ERROR = 1.04 / math.sqrt(1 << SKETCH_BITS)  # standard error of the estimate: 1.6 %

_M1, _M2, _GOLDEN = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB), np.uint64(0x9E3779B97F4A7C15)


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser of each value (uint64, wrapping): the runtime's hash of a line number."""
    with np.errstate(over="ignore"):
        z = x.astype(np.uint64) + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def sketch_registers(addresses: np.ndarray, registers: np.ndarray | None = None) -> np.ndarray:
    """The runtime's sketch of these byte addresses' lines, added into `registers` (new when None)."""
    regs = np.zeros(1 << SKETCH_BITS, np.uint8) if registers is None else registers
    h = mix64(np.asarray(addresses, np.uint64) >> np.uint64(LINE_BYTES.bit_length() - 1))
    index = (h >> np.uint64(64 - SKETCH_BITS)).astype(np.intp)
    rest = (h << np.uint64(SKETCH_BITS)) | np.uint64(1 << (SKETCH_BITS - 1))
    rank = (64 - _bit_length(rest) + 1).astype(np.uint8)
    np.maximum.at(regs, index, rank)
    return regs


def _bit_length(v: np.ndarray) -> np.ndarray:
    """Bits needed for each non-zero uint64 (exact, unlike a float log2 near powers of two)."""
    out = np.zeros(v.shape, np.int64)
    for shift in (32, 16, 8, 4, 2, 1):
        big = v >= (np.uint64(1) << np.uint64(shift))
        out[big] += shift
        v = np.where(big, v >> np.uint64(shift), v)
    return out + (v > 0)


def estimate(registers: np.ndarray) -> int:
    """Distinct lines from the registers (Ertl 2017, improved raw estimator; 0 for an empty sketch)."""
    m = len(registers)
    q = 64 - (m.bit_length() - 1)
    counts = np.bincount(np.asarray(registers, np.int64), minlength=q + 2).astype(float)
    if counts[0] == m:
        return 0
    z = m * _tau(1.0 - counts[q + 1] / m)
    for k in range(q, 0, -1):
        z = 0.5 * (z + counts[k])
    z += m * _sigma(counts[0] / m)
    return int(round(m * m / (2.0 * math.log(2.0)) / z))


def _sigma(x: float) -> float:
    """Ertl's sigma series (the registers still at zero)."""
    if x == 1.0:
        return math.inf
    y, z = 1.0, x
    while True:
        x *= x
        z_old, z = z, z + x * y
        y += y
        if z == z_old:
            return z


def _tau(x: float) -> float:
    """Ertl's tau series (the registers at their largest value)."""
    if x in (0.0, 1.0):
        return 0.0
    y, z = 1.0, 1.0 - x
    while True:
        x = math.sqrt(x)
        z_old = z
        y *= 0.5
        z -= (1.0 - x) ** 2 * y
        if z == z_old:
            return z / 3.0


def footer_estimate(footer: dict, path: Path) -> int | None:
    """The footer's distinct-line estimate, None for traces recorded without the sketch."""
    member = footer.get("distinct_lines")
    if member is None:
        return None
    where = f"{path}: footer member distinct_lines"
    if not isinstance(member, dict) or member.get("sketch") != SKETCH_NAME or member.get("bits") != SKETCH_BITS \
            or member.get("line_bytes") != LINE_BYTES or not isinstance(member.get("registers"), str):
        raise InputError(f"{where} is not a {SKETCH_NAME} sketch of {1 << SKETCH_BITS} registers over "
                         f"{LINE_BYTES}-byte lines; re-record the trace with this pptmc")
    try:
        regs = np.frombuffer(bytes.fromhex(member["registers"]), np.uint8)
    except ValueError as exc:
        raise InputError(f"{where}: registers are not hex ({exc}); re-record the trace") from exc
    if len(regs) != 1 << SKETCH_BITS or regs.max(initial=0) > 64 - SKETCH_BITS + 1:
        raise InputError(f"{where}: {len(regs)} registers up to {regs.max(initial=0)}, expected "
                         f"{1 << SKETCH_BITS} up to {64 - SKETCH_BITS + 1}; re-record the trace")
    return estimate(regs)
