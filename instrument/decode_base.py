"""What the chunk-decoding kernels share: the decoder's tables, the bundles their state travels in, varints.

The kernels (instrument/decode_kernel.py, decode_sink.py, decode_replay.py) take their arrays bundled in
NamedTuples, which numba passes like the arrays they hold, and their scalar state in small NamedTuples of
scalars, which stay in registers; so no kernel needs a long list of positional arguments.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numba
import numpy as np

from common.errors import InputError

# sites the runtime records explicitly, with their length (masked lanes: only when active)
SIZED_KINDS = ("memcpy", "memmove", "memset", "masked.")
MAX_DEPTH = 256  # nesting of instrumented calls the decoder follows


class SiteTables(NamedTuple):
    """The per-site and per-block arrays of DecodeTables, as the kernels take them."""

    site_block: np.ndarray
    site_size: np.ndarray
    site_store: np.ndarray
    site_explicit: np.ndarray
    bs_off: np.ndarray
    bs: np.ndarray
    virt_of: np.ndarray


@dataclass
class DecodeTables:
    """Per-site and per-block arrays the decoder indexes."""

    site_block: np.ndarray
    site_size: np.ndarray
    site_store: np.ndarray
    site_explicit: np.ndarray  # memcpy/memset/masked-lane sites: never predicted, one row per event
    bs_off: np.ndarray       # sites of real block b (program order): bs[bs_off[b]:bs_off[b+1]]
    bs: np.ndarray
    virt_of: np.ndarray      # real block -> its shared-var pseudo-block, or -1
    n_blocks: int

    def arrays(self) -> SiteTables:
        """The kernels' bundle of these arrays."""
        return SiteTables(self.site_block, self.site_size, self.site_store, self.site_explicit, self.bs_off,
                          self.bs, self.virt_of)

    def n_accesses(self, block_counts: dict[int, int], n_sized: int | None = None) -> int:
        """Accesses of a complete trace: each block entry runs each of its sites once.

        Explicit sites (memcpy/memset, masked lanes) are counted by their events when the footer
        has `n_sized`; a masked lane may not run. Older traces have no masked sites, and their
        memcpy/memset sites run once per block entry like the others.
        """
        host = np.repeat(np.arange(self.n_blocks), np.diff(self.bs_off))  # the real block of each bs entry
        if n_sized is not None:
            host = host[~self.site_explicit[self.bs]]
        per = np.bincount(host, minlength=self.n_blocks)
        implied = sum(int(c) * int(per[b]) for b, c in block_counts.items() if b < per.shape[0])
        return implied + int(n_sized or 0)


def decode_tables(header: dict, path: Path) -> DecodeTables:
    """Decoder arrays from the block and site tables embedded in the trace header."""
    sites = header["sites"]
    if any("host_block" not in s for s in sites):
        raise InputError(f"{path}: the trace's site table predates host blocks; rebuild the binary with "
                         f"pptmc instrument and re-record the trace")
    n_blocks = max([b["id"] for b in header["blocks"]], default=-1) + 1
    virt = np.full(n_blocks, -1, np.int64)
    for b in header["blocks"]:
        if b["is_shared_var_block"]:
            virt[b["host_block"]] = b["id"]
    per_host: list[list[int]] = [[] for _ in range(n_blocks)]
    for s in sites:  # site ids follow program order inside a block
        per_host[s["host_block"]].append(s["site"])
    off = np.zeros(n_blocks + 1, np.int64)
    off[1:] = np.cumsum([len(x) for x in per_host])
    flat = np.array([x for lst in per_host for x in lst], np.int64)
    return DecodeTables(np.array([s["block"] for s in sites], np.int32),
                        np.array([s["size"] for s in sites], np.uint32),
                        np.array([s["is_store"] for s in sites], np.bool_),
                        np.array([s["kind"].startswith(SIZED_KINDS) for s in sites], np.bool_), off, flat, virt,
                        n_blocks)


class DecodeState(NamedTuple):
    """The arrays that carry the decoder's state from event to event, call to call and chunk to chunk."""

    counts: np.ndarray       # int64 per block: entries so far (all threads)
    last_inst: np.ndarray    # int64 per block: the current entry's instance number
    pred_last: np.ndarray    # int64 per site: the thread's predictor, last address ...
    pred_stride: np.ndarray  # ... and stride
    fb: np.ndarray           # int64 per call depth: the frame's block (-1: none) ...
    fc: np.ndarray           # ... and its site cursor
    st: np.ndarray           # int64 [depth, region, loop, iteration, region top] between calls
    enc_last: np.ndarray     # int64 per site: the chunk's last sized address (the encoder's)
    loops_out: np.ndarray    # int64 (n, 5): the loop begins of one kernel call


class Where(NamedTuple):
    """The scalar state every row is labelled with, and the stack bounds that make a row thread-private."""

    d: np.int64         # call depth (the frame in fb/fc)
    reg: np.int64       # region, -1 outside
    lp: np.int64        # loop instance, -1 outside
    it: np.int64        # iteration, -1 outside
    top: np.int64       # the region's frame top, 0: none
    stack_lo: np.int64  # the chunk's thread stack bounds
    stack_hi: np.int64


class Tally(NamedTuple):
    """A kernel call's counters: rows written, the sink's kept rows and runs, the highest address."""

    k: np.int64
    ns: np.int64
    nr: np.int64
    both: np.uint64


class LoopEvent(NamedTuple):
    """A loop begin the kernel just applied: its bytes, its instance's varint, and the state before it."""

    ev: np.int64       # first byte of the event
    i0: np.int64       # the instance varint's first byte ...
    i1: np.int64       # ... and end
    inst: np.int64     # the loop instance
    n_loops: np.int64  # loop begins in loops_out, this one included
    lp0: np.int64      # loop and iteration before it
    it0: np.int64


@numba.njit(cache=True, inline="always")
def stack_top(w: Where) -> np.int64:
    """The upper stack bound of the current rows: inside a region, the stack below its frame top."""
    return w.top if w.reg >= 0 and w.top > 0 else w.stack_hi


@numba.njit(cache=True)
def varint(buf, pos):
    """Decode one LEB128 varint; returns (value, next position)."""
    v = np.uint64(0)
    shift = np.uint64(0)
    while True:
        b = np.uint64(buf[pos])
        pos += 1
        v |= (b & np.uint64(0x7F)) << shift
        if b < np.uint64(0x80):
            return v, pos
        shift += np.uint64(7)


@numba.njit(cache=True)
def unzig(v):
    """Undo the zigzag encoding of a signed value."""
    return np.int64(v >> np.uint64(1)) ^ -np.int64(v & np.uint64(1))
