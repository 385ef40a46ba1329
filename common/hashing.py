"""The two hash functions pptmc uses, each written once: the SHARDS line filter (sampling, in the trace
decoder and in analysis/sampling) and Fibonacci hashing (the homes of open-addressing tables in the
reuse engines, coherence, the simulator and the samplers).

* SHARDS (Waldspurger et al., FAST'15) keeps a line when its salted 32-bit hash is below a threshold
  (rate * 2^32): x = (line ^ line >> 32 ^ salt) mod 2^32, kept when x * 0x9E3779B1 mod 2^32 < threshold.
  The product is 32 bits because AVX2 multiplies 32-bit lanes natively, not 64-bit ones.
* Fibonacci hashing (Knuth, TAOCP 6.4) multiplies by 2^64 / golden ratio, 0x9E3779B97F4A7C15; a
  table takes some high bits of the product as a line's home slot.
Ground level because the trace decoder (instrument/) and the analyses above it both need them.
"""
from __future__ import annotations

import numba
import numpy as np

SHARDS_MUL = 0x9E3779B1          # the SHARDS hash's 32-bit multiplier
FIB_MUL = 0x9E3779B97F4A7C15     # 2^64 / golden ratio
LOW32 = 0xFFFFFFFF


@numba.njit(cache=True, nogil=True, inline="always")
def shards_keep(line, salt, threshold):
    """Whether SHARDS keeps a line (uint64 line, salt and threshold); branch-free."""
    m32 = np.uint64(LOW32)
    x = (line ^ (line >> np.uint64(32)) ^ salt) & m32
    return ((x * np.uint64(SHARDS_MUL)) & m32) < threshold


@numba.njit(cache=True, nogil=True, inline="always")
def shards_keep32(low, high, salt, threshold):
    """shards_keep on a line's two 32-bit halves, in 32-bit lanes (uint32 salt, threshold below 2^32)."""
    return np.uint32((low ^ high ^ salt) * np.uint32(SHARDS_MUL)) < threshold


@numba.njit(cache=True, nogil=True, inline="always")
def fib_product(x):
    """x * 0x9E3779B97F4A7C15 mod 2^64 (uint64): its high bits are a table slot."""
    return np.uint64(x) * np.uint64(FIB_MUL)
