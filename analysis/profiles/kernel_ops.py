"""The small numba helpers every reuse kernel shares: line-id tags, the histogram's bins,
Fibonacci-hashed slots, prefetch and bit counts (one copy, imported by the engines in
analysis/profiles/reuse.py, line_index.py and coherence.py, and by the SHARDS kernels)."""
from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from common.hashing import fib_product

EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)  # never a line id: line ids are addresses shifted right
STORE_TAG = np.uint64(1 << 63)  # marks a store's line id for coherence (analysis/profiles/coherence.py)

# Histogram layout: distances below EXACT_LIMIT get one bin each; above it, each power of
# two [2^j, 2^(j+1)) is split into SUB_BINS equal bins, so every m * 2^(j - SUB_BITS) is an
# edge (cache sizes such as 327680 or 901120 lines fall on edges and stay exact).
SUB_BITS = 6
SUB_BINS = 1 << SUB_BITS
EXACT_BITS = 12
EXACT_LIMIT = 1 << EXACT_BITS
N_BINS = EXACT_LIMIT + (64 - EXACT_BITS) * SUB_BINS


@intrinsic
def prefetch(typingctx, arr, idx):
    """Ask the CPU to start loading arr[idx] (llvm.prefetch; numba has no prefetch of its own)."""
    if not isinstance(arr, types.Array) or not isinstance(idx, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, sig.args[0], ary, [args[1]], wraparound=False)
        i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                                            "llvm.prefetch")
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()
    return types.none(arr, idx), codegen


@intrinsic
def floor_log2(typingctx, x):
    """floor(log2(x)) of an integer x > 0, from llvm.ctlz (a count of leading zeros, one
    instruction): numba has no public one, and a search by comparisons mispredicts its
    branches when distances vary."""
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        value = context.cast(builder, args[0], sig.args[0], types.int64)
        ctlz = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i64, [i64, ir.IntType(1)]),
                                              "llvm.ctlz.i64")
        return builder.sub(i64(63), builder.call(ctlz, [value, ir.IntType(1)(1)]))
    return types.int64(x), codegen


@numba.njit(cache=True, nogil=True, inline="always")
def bit_length(x) -> int:
    """Bits needed for an integer x >= 0 (0 for 0), like Python's int.bit_length."""
    return 0 if x == 0 else floor_log2(x) + 1


@numba.njit(cache=True, nogil=True, inline="always")
def bin_of(d: int) -> int:
    """Histogram bin of a distance (see the layout above)."""
    if d < EXACT_LIMIT:
        return d
    j = floor_log2(d)
    sub = (d >> (j - SUB_BITS)) & (SUB_BINS - 1)
    return EXACT_LIMIT + (j - EXACT_BITS) * SUB_BINS + sub


@numba.njit(cache=True, nogil=True, inline="always")
def add_to_bin(d, n, hist, hist_sum):
    """Add n accesses at distance d >= 0 to a histogram laid out as above (an exact bin's sum
    is not kept: it is count * d, filled in when the profile is read)."""
    if d < EXACT_LIMIT:
        hist[d] += n
    else:
        bi = bin_of(d)
        hist[bi] += n
        hist_sum[bi] += n * d


@numba.njit(cache=True, nogil=True, inline="always")
def popcount_swar(x):
    """Set bits of a uint64 (SWAR; numba exposes no popcount intrinsic)."""
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@numba.njit(cache=True, nogil=True, inline="always")
def home_slot(line, hash_shift, mask):
    """Home slot of a line: bits hash_shift.. of a Fibonacci product (see hash_shift)."""
    return (fib_product(line) >> hash_shift) & mask


@numba.njit(cache=True, nogil=True, inline="always")
def hash_shift_for(mask):
    """Bits 40.. of the product measured faster than the top bits on strided and random
    lines; tables above 2^24 slots take the top bits, so every slot can be a home."""
    return np.uint64(min(40, 64 - popcount_swar(mask)))


@numba.njit(cache=True, nogil=True, inline="always")
def free_slot(keys, line, dense, hash_shift, mask):
    """The slot of a line in a table whose first `dense` slots are dense (see _process): its
    own, or where its probe meets it or an empty slot."""
    if line < np.uint64(dense):
        return line
    base = np.uint64(dense)
    slot = base + home_slot(line, hash_shift, mask)
    while keys[slot] != line and keys[slot] != np.uint64(0xFFFFFFFFFFFFFFFF):
        slot = base + ((slot - base + np.uint64(1)) & mask)
    return slot


@numba.njit(cache=True, nogil=True)
def rehash_slots(keys, new_keys):
    """Put every key of an open-addressing table (no dense slots) into a larger empty one; each old
    slot's new slot (-1 where empty), so the caller moves its value arrays with one numpy assignment
    each: new_values[moved[held]] = values[held]."""
    mask = np.uint64(new_keys.shape[0] - 1)
    hs = hash_shift_for(mask)
    moved = np.full(keys.shape[0], -1, dtype=np.int64)
    for s in range(keys.shape[0]):
        if keys[s] != np.uint64(0xFFFFFFFFFFFFFFFF):
            slot = free_slot(new_keys, keys[s], 0, hs, mask)
            new_keys[slot] = keys[s]
            moved[s] = slot
    return moved


def move_values(moved, pairs) -> None:
    """Copy each (old values, new values) pair's entries to the slots rehash_slots gave their keys."""
    held = moved >= 0
    for old, new in pairs:
        new[moved[held]] = old[held]
