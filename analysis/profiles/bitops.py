"""Bit operations numba does not expose: the hardware population count (LLVM's ctpop intrinsic).

analysis.profiles.kernel_ops.popcount_swar is the portable SWAR version; LLVM lowers llvm.ctpop.i64 to one POPCNT
instruction on x86-64 hosts that have it (numba compiles for the host CPU) and to an equivalent
sequence elsewhere, so the result is the same everywhere.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core.extending import intrinsic


@intrinsic
def popcount(typingctx, x):
    """Set bits of a uint64, as an int64 (numba intrinsic: callable from njit code only)."""
    if x != types.uint64:
        return None

    def codegen(context, builder, signature, args):
        fn = builder.module.declare_intrinsic("llvm.ctpop", [ir.IntType(64)])
        return builder.call(fn, [args[0]])

    return types.int64(types.uint64), codegen
