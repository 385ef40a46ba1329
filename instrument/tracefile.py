"""Read pptmc trace files (layout in instrument/FORMAT.md) as a stream of TraceChunk batches.

The reader never holds more than one decompressed chunk: each disk chunk is checked (header
CRC, payload CRC, zstd frame checksum), decompressed and decoded by a numba kernel, then
sliced into batches of at most `max_rows` accesses.
"""
from __future__ import annotations

import json
import os
import signal
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import numba
import numpy as np
import zstandard

from instrument.trace_types import CHUNK_DTYPES, BlockInfo, LoopInstance, TraceChunk, TraceInfo
from common.errors import InputError

FORMAT_VERSION = 1
FILE_MAGIC = b"PPTMCTR\0"
CHUNK_MAGIC = b"PCHK"
FOOTER_MAGIC = b"PFTR"
END_MAGIC = b"PPTMCEND"
CHUNK_HEADER = struct.Struct("<4sIQQQqqqQQQII")   # 88 bytes, see FORMAT.md
TRAILER = struct.Struct("<Q8s")

TAG_MEM, TAG_BLOCK, TAG_MEMN, TAG_CTRL = 0, 1, 2, 3
C_REGION_BEGIN, C_REGION_END, C_LOOP_BEGIN, C_ITER, C_LOOP_END = 0, 1, 2, 3, 4


@dataclass(frozen=True)
class ChunkHeader:
    """The fixed header in front of every compressed chunk."""

    offset: int
    thread: int
    comp_len: int
    raw_len: int
    n_events: int           # miss and sized events in the chunk
    region: int
    loop: int
    iteration: int
    stack_lo: int
    stack_hi: int
    region_top: int
    payload_crc: int


@dataclass
class _Tables:
    """Per-site and per-block arrays the decoder indexes."""

    site_block: np.ndarray
    site_size: np.ndarray
    site_store: np.ndarray
    site_explicit: np.ndarray  # memcpy/memset/masked-lane sites: never predicted, one row per event
    bs_off: np.ndarray       # sites of real block b (program order): bs[bs_off[b]:bs_off[b+1]]
    bs: np.ndarray
    virt_of: np.ndarray      # real block -> its shared-var pseudo-block, or -1
    n_blocks: int

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


@numba.njit(cache=True)
def _varint(buf, pos):
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
def _unzig(v):
    return np.int64(v >> np.uint64(1)) ^ -np.int64(v & np.uint64(1))


# sites the runtime records explicitly, with their length (masked lanes: only when active)
SIZED_KINDS = ("memcpy", "memmove", "memset", "masked.")
MAX_DEPTH = 256  # nesting of instrumented calls the decoder follows


@numba.njit(cache=True)
def _emit(out, k, s, a, sz, site_block, site_store, last_inst, reg, lp, it, top, stack_lo, stack_hi, sink, ns, both):
    """Write output row k: an access of site s at address a, of sz bytes, in the current state.

    A column the caller does not want comes as a 2-D placeholder: ndim is part of an array's numba type,
    so its store is compiled away (writing all nine columns is about half of the decoding time). With a
    sampling sink (1-D `sink[0]`, ChunkDecoder.sampled) the row goes there instead; returns the sink's
    (kept rows, highest address)."""
    out_addr, out_size, out_store, out_block, out_inst, out_region, out_loop, out_iter, out_stack = out
    blk = site_block[s]
    if out_addr.ndim == 1:
        out_addr[k] = np.uint64(a)
    if out_size.ndim == 1:
        out_size[k] = sz
    if out_store.ndim == 1:
        out_store[k] = site_store[s]
    if out_block.ndim == 1:
        out_block[k] = blk
    if out_inst.ndim == 1:
        out_inst[k] = last_inst[blk]
    if out_region.ndim == 1:
        out_region[k] = reg
    if out_loop.ndim == 1:
        out_loop[k] = lp
    if out_iter.ndim == 1:
        out_iter[k] = it
    if out_stack.ndim == 1 or sink[0].ndim == 1:
        hi = top if reg >= 0 and top > 0 else stack_hi  # inside a region, the stack below its frame top
        stack = a >= stack_lo and a < hi
        if out_stack.ndim == 1:
            out_stack[k] = stack
        if sink[0].ndim == 1:
            ns, both = _sink_row(sink, k, np.uint64(a), stack, site_store[s], ns, both)
    return ns, both


@numba.njit(cache=True)
def _sink_row(sink, k, a, stack, store, ns, both):
    """Row k into a sampling sink: its word (line | stack flag | store flag), and its index appended to the
    kept rows when its line's salted 32-bit hash is below the threshold (the SHARDS filter of
    analysis.sampling.source; branch-free: write, then advance by the flag). `both` is the highest address."""
    words, sel, params = sink[0], sink[1], sink[3]
    line = a >> params[0]
    words[k] = line | (np.uint64(stack) << np.uint64(63)) | (np.uint64(store) << np.uint64(62))
    m32 = np.uint64(0xFFFFFFFF)
    x = (line ^ (line >> np.uint64(32)) ^ params[1]) & m32
    sel[ns] = k
    ns += ((x * np.uint64(0x9E3779B1)) & m32) < params[2]
    return ns, max(both, a)


@numba.njit(cache=True)
def _sink_cut(sink, nr, k, lp, it):
    """A sampling sink's runs of rows with one (loop, iteration): called when the state changes before row k.
    A run with no row yet takes the new keys (or is dropped when they are the previous run's again), so runs
    are cut exactly where two consecutive rows differ. Returns the number of runs."""
    runs = sink[2]
    if sink[0].ndim != 1:
        return nr
    if runs[nr - 1, 0] == k:
        if nr > 1 and runs[nr - 2, 1] == lp and runs[nr - 2, 2] == it:
            return nr - 1
        runs[nr - 1, 1] = lp
        runs[nr - 1, 2] = it
        return nr
    if runs[nr - 1, 1] == lp and runs[nr - 1, 2] == it:
        return nr
    runs[nr, 0] = k
    runs[nr, 1] = lp
    runs[nr, 2] = it
    return nr + 1


@numba.njit(cache=True)
def _sink_save(sink, ns, nr, both, k):
    """Store a sampling sink's counters when the kernel returns: [kept rows, runs (an empty last one
    dropped), highest address]."""
    if sink[0].ndim == 1:
        if nr > 1 and sink[2][nr - 1, 0] == k:
            nr -= 1
        sink[4][0] = np.uint64(ns)
        sink[4][1] = np.uint64(nr)
        sink[4][2] = both


@numba.njit(cache=True)
def _emit_predicted(out, k, s, pred_last, pred_stride, site_size, site_block, site_store, last_inst, reg, lp, it,
                    top, stack_lo, stack_hi, sink, ns, both):
    """Row k: site s at its predictor's address (last + stride), which becomes its last address."""
    a = pred_last[s] + pred_stride[s]
    pred_last[s] = a
    return _emit(out, k, s, a, site_size[s], site_block, site_store, last_inst, reg, lp, it, top, stack_lo, stack_hi,
                 sink, ns, both)


@numba.njit(cache=True)
def _block_repeats(buf, ev, pos, bs, bs_off, site_explicit, b, room):
    """How many whole instances of block b the events from byte ev emit at once: the event [ev, pos) (an entry
    of b while b's current instance has run none of its sites) and its identical repeats right after it, as
    many as fit in `room` rows. 0 when b has explicit (sized) sites, which take one event per row."""
    o = bs_off[b]
    n = bs_off[b + 1] - o
    for x in range(o, o + n):
        if site_explicit[bs[x]]:
            return 0
    most = room // n if n > 0 else buf.shape[0]
    width = pos - ev
    r = 0
    q = ev
    end = buf.shape[0]
    while r < most and q + width <= end:
        for y in range(width):
            if buf[q + y] != buf[ev + y]:
                return r
        r += 1
        q += width
    return r


@numba.njit(cache=True)
def _sink_block_run(sink, k, r, sites, pred_last, pred_stride, site_store, stack_lo, stack_hi, ns, high):
    """Rows k.. of r whole instances of a block whose sites (all predicted) are `sites`: row k + e * n + j is
    site j's access in instance e, at last + (e + 1) * stride of site j. Written site by site: a site's words
    in a loop without branches (its stack flag is the same for the whole run unless the run crosses a stack
    bound), and its lines hashed once per line its addresses cross (_kept_rows), not per row; the kept rows
    are then put back in row order. Returns the sink's (kept rows, highest address)."""
    words, sel = sink[0], sink[1]
    shift, salt, thr = sink[3][0], sink[3][1], sink[3][2]
    n = sites.shape[0]
    ns0 = ns
    contributing = 0
    for j in range(n):
        s = sites[j]
        st = pred_stride[s]
        a = pred_last[s]
        first, last = a + st, a + r * st
        lo, hi = min(first, last), max(first, last)
        flag = np.uint64(site_store[s]) << np.uint64(62)
        if lo >= 0 and (hi < stack_lo or lo >= stack_hi or (lo >= stack_lo and hi < stack_hi)):
            flag |= np.uint64(lo >= stack_lo and hi < stack_hi) << np.uint64(63)
            for e in range(j, j + r * n, n):
                a += st
                words[k + e] = (np.uint64(a) >> shift) | flag
            high = max(high, np.uint64(hi))
        else:  # the run crosses a stack bound, or its addresses wrap (a corrupt trace): per row
            for e in range(j, j + r * n, n):
                a += st
                stack = np.uint64(a >= stack_lo and a < stack_hi) << np.uint64(63)
                words[k + e] = (np.uint64(a) >> shift) | stack | flag
                high = max(high, np.uint64(a))
        pred_last[s] = a
        if not _none_kept(first - st, st, r, shift, salt, thr):
            before = ns
            ns = _kept_rows(sink, first - st, st, r, k + j, n, ns)
            contributing += ns > before
    if contributing > 1:
        _sort_rows(sel, ns0, ns)
    return ns, high


@numba.njit(cache=True)
def _sort_rows(sel, a, b):
    """Sort sel[a:b] in place: a few sites' increasing rows one after the other (insertion sort, no allocation;
    np.sort beyond 64 rows)."""
    if b - a > 64:
        sel[a:b] = np.sort(sel[a:b])
        return
    for i in range(a + 1, b):
        x = sel[i]
        j = i - 1
        while j >= a and sel[j] > x:
            sel[j + 1] = sel[j]
            j -= 1
        sel[j + 1] = x


@numba.njit(cache=True, inline="always")
def _line_kept(line, salt, threshold):
    """The SHARDS filter: the line's salted 32-bit hash below the threshold (see _sink_row)."""
    m32 = np.uint64(0xFFFFFFFF)
    x = (line ^ (line >> np.uint64(32)) ^ salt) & m32
    return ((x * np.uint64(0x9E3779B1)) & m32) < threshold


@numba.njit(cache=True, inline="always")
def _none_kept(a0, st, r, shift, salt, threshold):
    """Whether surely none of one site's accesses a0 + (e + 1) * st, e < r, has a line that passes the filter:
    for strides shorter than a line (and 0), no line they cross passes (scalars only: a cheap test before
    _kept_rows, whose array arguments cost reference counting per call; most sites' lines in a run are not
    kept). False when it cannot tell (other strides, addresses that wrap)."""
    size = np.int64(1) << np.int64(shift)
    last = a0 + r * st
    if not (-size < st < size) or a0 < 0 or last < 0 or a0 + st < 0:
        return False
    lo = np.uint64(min(a0 + st, last)) >> shift
    hi = np.uint64(max(a0 + st, last)) >> shift
    line = lo
    while line <= hi:
        if _line_kept(line, salt, threshold):
            return False
        line += np.uint64(1)
    return True


@numba.njit(cache=True)
def _kept_rows(sink, a0, st, r, row, n, ns):
    """Append to the sink's kept rows those of one site's accesses a0 + (e + 1) * st, e < r (rows row + e * n)
    whose line passes the filter. A stride shorter than a line (addresses that do not wrap) visits each line
    once, finding a kept line's rows by division; other strides are hashed per row."""
    sel, params = sink[1], sink[3]
    shift, salt, thr = params[0], params[1], params[2]
    size = np.int64(1) << np.int64(shift)
    last = a0 + r * st
    if st == 0:
        if _line_kept(np.uint64(a0) >> shift, salt, thr):
            for e in range(r):
                sel[ns] = row + e * n
                ns += 1
        return ns
    if 0 < st < size and a0 >= 0 and last >= 0:  # e + 1 in [ceil((lo_a - a0) / st), ceil((hi_a - a0) / st))
        line, end = np.uint64(a0 + st) >> shift, np.uint64(last) >> shift
        while line <= end:
            if _line_kept(line, salt, thr):
                lo_a = np.int64(line << shift)
                e_lo, e_hi = -((a0 - lo_a) // st) - 1, -((a0 - lo_a - size) // st) - 1
                for e in range(max(e_lo, 0), min(e_hi, r)):
                    sel[ns] = row + e * n
                    ns += 1
            line += np.uint64(1)
        return ns
    if -size < st < 0 and a0 >= 0 and last >= 0:  # e + 1 in (floor((a0 - hi_a) / -st), floor((a0 - lo_a) / -st)]
        line, end = np.uint64(a0 + st) >> shift, np.uint64(last) >> shift
        while line >= end:
            if _line_kept(line, salt, thr):
                lo_a = np.int64(line << shift)
                e_lo, e_hi = (a0 - lo_a - size) // -st, (a0 - lo_a) // -st
                for e in range(max(e_lo, 0), min(e_hi, r)):
                    sel[ns] = row + e * n
                    ns += 1
            if line == 0:
                break
            line -= np.uint64(1)
        return ns
    for e in range(r):
        if _line_kept(np.uint64(a0 + (e + 1) * st) >> shift, salt, thr):
            sel[ns] = row + e * n
            ns += 1
    return ns


# DecodeReplay.ri: the replay's counters (per-row entries: one per byte buffer row 0-2)
(R_ON, R_N, R_MIN, R_G, R_CUR, R_G0, R_B0, R_NL, R_PREV, R_REF, R_CUR_ROW, R_PREV_ROW, R_REF_ROW, R_REC_K0,
 R_REC_NS0, R_REC_NR0, R_REC_N, R_REC_NS, R_REC_NR, R_REF_N, R_REF_NS, R_REF_NR, R_DELTA, R_SKIPS, R_LP1, R_IT1,
 R_D, R_REG, R_TOP, R_LP, R_IT) = range(31)
R_NB, R_NLR, R_ROWS = 31, 34, 37  # + row: a copy's bytes, loop begins, rows
R_SPAN, R_NCOP, R_TILED = 40, 41, 42  # the recorded copy's loop instances; copies last skipped; copies laid out
R_SIZED, R_REF_SIZED, R_CARRY = 43, 44, 45  # sized events in the recording, in the recorded copy; next chunk goes on
R_RECORDED = 46  # copies recorded so far (the recorded copy's number is this minus 1)
R_SIZE = 48


@numba.njit(cache=True)
def _rep_snap(v, pred_last, pred_stride, enc_last, fb, fc, d, reg, top, stack_lo, stack_hi):
    """The decoder state a copy's rows depend on, as one vector (frames above the depth, never read before they
    are set again, as zeros; the loop keys aside: a copy starts with a loop begin, which sets them)."""
    n, m = pred_last.shape[0], fb.shape[0]
    v[0:n] = pred_last
    v[n:2 * n] = pred_stride
    v[2 * n:3 * n] = enc_last
    j = 3 * n
    v[j:j + 2 * m] = 0
    v[j:j + d + 1] = fb[:d + 1]
    v[j + m:j + m + d + 1] = fc[:d + 1]
    j += 2 * m
    v[j], v[j + 1], v[j + 2], v[j + 3], v[j + 4] = d, reg, top, stack_lo, stack_hi


@numba.njit(cache=True)
def _rep_same(a, b):
    """Element-wise equal vectors."""
    for i in range(a.shape[0]):
        if a[i] != b[i]:
            return False
    return True


@numba.njit(cache=True)
def _same_bytes(buf, i, ref, j, n):
    """Whether buf[i:i + n] equals ref[j:j + n]: 64 bytes at a time without an exit inside, on slices with
    unsigned indices (no wraparound test: LLVM vectorises it; a byte loop with an exit per byte and signed
    indices took 1.2 ns a byte, this 0.06)."""
    a, b = buf[i:i + n], ref[j:j + n]
    x, m, w = np.uint64(0), np.uint64(n), np.uint64(64)
    while x + w <= m:
        acc = np.uint8(0)
        for y in range(w):
            acc |= a[x + y] ^ b[x + y]
        if acc:
            return False
        x += w
    for y in range(x, m):
        if a[y] != b[y]:
            return False
    return True


@numba.njit(cache=True)
def _rep_match(buf, ev, ref, nb, loops, nl):
    """Whether buf from byte ev holds the nb bytes of a recorded copy (ref) but for the instance numbers of its
    nl loop begins (loops[m] = [first, end byte of the instance's varint, instance]), all shifted alike; their
    varints may be longer or shorter (instance 128 takes a byte more than 127). Returns (shift, the copy's bytes
    in buf): shift -1 when they differ; bytes -1 when buf ends first but holds a matching start of it (the
    caller decides whether that will do)."""
    end = buf.shape[0] - ev
    q, p, delta = np.int64(0), np.int64(0), np.int64(0)  # offsets in ref and in buf
    for m in range(nl):
        a, b = loops[m, 0], loops[m, 1]
        n = min(a - q, end - p)
        if not _same_bytes(buf, ev + p, ref, q, n):
            return -1, 0
        p += n
        if n < a - q or p >= end:
            return (delta, -1) if m > 0 else (-1, 0)
        v, shift = np.int64(0), np.int64(0)
        while True:  # the instance's varint, as long as it is
            if p >= end or shift > 56:
                return (delta, -1) if m > 0 and p >= end else (-1, 0)
            byte = np.int64(buf[ev + p])
            p += 1
            v |= (byte & 127) << shift
            shift += 7
            if byte < 128:
                break
        if m == 0:
            delta = v - loops[m, 2]
            if delta < 0:
                return -1, 0
        elif v - loops[m, 2] != delta:
            return -1, 0
        q = b
    n = min(nb - q, end - p)
    if nl == 0 or not _same_bytes(buf, ev + p, ref, q, n):
        return -1, 0
    return (delta, p + n) if n == nb - q else (delta, -1)


@numba.njit(cache=True)
def _rep_flush(rep, sink, k, ns, nr, both):
    """The current batch's rows of the copy being recorded (from row ri[R_REC_K0] to k) appended to the
    recording: words, kept rows, runs (a run the batch boundary split joined again). Too many rows: the copy
    is not recorded."""
    ri, rw, rsel, rruns, rh = rep[0], rep[8], rep[9], rep[10], rep[11]
    if ri[R_CUR] != 1:
        return
    k0, base = ri[R_REC_K0], ri[R_REC_N]
    n = k - k0
    if base + n > rw.shape[0]:
        ri[R_CUR] = 0
        return
    words, sel, runs = sink[0], sink[1], sink[2]
    rw[base:base + n] = words[k0:k]
    j = ri[R_REC_NS]
    for i in range(ri[R_REC_NS0], ns):
        rsel[j] = sel[i] - k0 + base
        j += 1
    m = ri[R_REC_NR]
    for r in range(ri[R_REC_NR0], nr):
        if runs[r, 0] >= k:
            break
        if m > 0 and rruns[m - 1, 1] == runs[r, 1] and rruns[m - 1, 2] == runs[r, 2]:
            continue
        rruns[m, 0], rruns[m, 1], rruns[m, 2] = runs[r, 0] - k0 + base, runs[r, 1], runs[r, 2]
        m += 1
    ri[R_REC_NS], ri[R_REC_NR], ri[R_REC_N] = j, m, base + n
    ri[R_REC_K0], ri[R_REC_NS0], ri[R_REC_NR0] = 0, 0, 0  # the next batch's rows count from 0
    rh[0] = max(rh[0], both)


@numba.njit(cache=True)
def _rep_return(rep, sink, k, ns, nr, both, chunk_end):
    """Before the kernel returns k rows: the recording takes them; at a chunk's end the current copy is dropped
    (a copy is only recorded or matched within one chunk's bytes)."""
    ri = rep[0]
    if not ri[R_ON]:
        return
    _rep_flush(rep, sink, k, ns, nr, both)
    if chunk_end and ri[R_CUR] >= 0:
        ri[R_CUR] = -1
    ri[R_G] += k


@numba.njit(cache=True)
def _rep_close(rep, sink, buf, ev, k, ns, nr, both, lp0, it0, inst, counts):
    """The current copy ends at byte ev (row k): it becomes the previous copy, and the recorded one when it was
    being recorded (its end state is rep[5], taken by the caller)."""
    ri, rb, rs1, now, rcnt0, rdelta, rh = rep[0], rep[1], rep[4], rep[5], rep[6], rep[7], rep[11]
    cur = ri[R_CUR]
    if cur < 0:
        return
    ri[R_CUR] = -1
    row, b0 = ri[R_CUR_ROW], ri[R_B0]
    nb = ev - b0
    if nb > rb.shape[1]:
        return
    rb[row, :nb] = buf[b0:ev]
    ri[R_NB + row], ri[R_NLR + row], ri[R_ROWS + row] = nb, ri[R_NL], ri[R_G] + k - ri[R_G0]
    ri[R_PREV], ri[R_PREV_ROW] = 1, row
    if cur == 1:
        ri[R_CUR] = 1
        _rep_flush(rep, sink, k, ns, nr, both)
        if ri[R_CUR] == 1:
            rs1[:] = now
            rdelta[:] = counts - rcnt0
            ri[R_LP1], ri[R_IT1] = lp0, it0
            ri[R_REF_N], ri[R_REF_NS], ri[R_REF_NR] = ri[R_REC_N], ri[R_REC_NS], ri[R_REC_NR]
            rh[1] = rh[0]
            ri[R_REF], ri[R_REF_ROW], ri[R_TILED], ri[R_REF_SIZED] = 1, row, 1, ri[R_SIZED]
            ri[R_RECORDED] += 1
            ri[R_SPAN] = inst - rep[2][row, 0, 2]
        ri[R_CUR] = -1


@numba.njit(cache=True)
def _rep_start(rep, buf, ev, k, ns, nr, counts, runs):
    """A copy begins at byte ev (row k): its start state and bytes are kept; it is recorded (its rows kept for
    the copies that repeat it) when it starts as the previous copy did and holds the same bytes."""
    ri, rb, rl, rs0, now, rcnt0, rh = rep[0], rep[1], rep[2], rep[3], rep[5], rep[6], rep[11]
    row = 0
    while (ri[R_PREV] and row == ri[R_PREV_ROW]) or (ri[R_REF] and row == ri[R_REF_ROW]):
        row += 1
    ri[R_CUR], ri[R_CUR_ROW], ri[R_B0], ri[R_G0], ri[R_NL] = 0, row, ev, ri[R_G] + k, 0
    rs0[row, :] = now
    prev = ri[R_PREV_ROW]
    if ri[R_PREV] and ri[R_ROWS + prev] <= rep[8].shape[0] and runs[nr - 1, 0] == k and \
            _rep_same(now, rs0[prev]) and \
            _rep_match(buf, ev, rb[prev], ri[R_NB + prev], rl[prev], ri[R_NLR + prev])[1] >= 0:
        ri[R_CUR], ri[R_REF], ri[R_SIZED] = 1, 0, 0
        ri[R_REC_N], ri[R_REC_NS], ri[R_REC_NR] = 0, 0, 0
        ri[R_REC_K0], ri[R_REC_NS0], ri[R_REC_NR0] = k, ns, nr - 1
        rcnt0[:] = counts
        rh[0] = 0


@numba.njit(cache=True)
def _rep_loop(rep, sink, buf, ev, i0, i1, inst, loops_out, n_loops, k, ns, nr, both, lp0, it0, pred_last,
              pred_stride, enc_last, fb, fc, d, reg, top, stack_lo, stack_hi, counts):
    """A loop begin at byte ev (its instance's varint at bytes i0..i1, its loops_out row n_loops - 1), after
    the kernel applied it. At an instance that is a multiple of the period, once the current copy has min rows:
    the copy ends, and the next ones either repeat the recorded copy (returns their byte length: the caller
    skips them; as many as the recording's rows hold, ri[R_NCOP]) or one begins. Returns -1 when the chunk ends
    inside what may be a repeat and the next chunk goes on (ri[R_CARRY]): the caller decodes this chunk's
    bytes from ev again in front of the next one's (so a copy that spans two chunks can be skipped too). Only
    when the recorded copy has no sized events: the bytes carried, a prefix of it, have none either, so they
    decode alike before the next chunk's bytes, where enc_last starts again from zeros; and only when enc_last
    is zeros here, else the copy could not start as the recorded one did there. Returns 0 otherwise."""
    ri, rb, rl, rs0, now = rep[0], rep[1], rep[2], rep[3], rep[5]
    if inst % ri[R_N] == 0 and (ri[R_CUR] == -2 or ri[R_G] + k - ri[R_G0] >= ri[R_MIN]):
        _rep_snap(now, pred_last, pred_stride, enc_last, fb, fc, d, reg, top, stack_lo, stack_hi)
        _rep_close(rep, sink, buf, ev, k, ns, nr, both, lp0, it0, inst, counts)
        ref = ri[R_REF_ROW]
        nb, nl = ri[R_NB + ref], ri[R_NLR + ref]
        if ri[R_REF] and n_loops - 1 + nl <= loops_out.shape[0] and _rep_same(now, rs0[ref]):
            delta, size = _rep_match(buf, ev, rb[ref], nb, rl[ref], nl)
            carry = ri[R_CARRY] and not ri[R_REF_SIZED] and not now[2 * pred_last.shape[0]:3 * pred_last.shape[0]].any()
            if delta >= 0 and size < 0:
                if carry:
                    return -1
                delta = -1
            if delta >= 0:
                # the copies right after it repeat it too when it ends in the state it starts in
                most = rep[9].shape[0] // max(ri[R_REF_N], 1)
                n, q = 1, ev + size
                if most > 1 and _rep_same(rep[4], rs0[ref]):
                    while n < most and n_loops - 1 + (n + 1) * nl <= loops_out.shape[0]:
                        shift, size = _rep_match(buf, q, rb[ref], nb, rl[ref], nl)
                        if shift != delta + n * ri[R_SPAN] or size < 0:
                            if shift == delta + n * ri[R_SPAN] and carry:
                                return -1  # the chunk ends in a repeat: all of them in one batch with the next chunk
                            break
                        n, q = n + 1, q + size
                ri[R_DELTA], ri[R_NCOP] = delta, n
                return q - ev
        _rep_start(rep, buf, ev, k, ns, nr, counts, sink[2])
    if ri[R_CUR] >= 0:
        m, row = ri[R_NL], ri[R_CUR_ROW]
        if m >= rl.shape[1]:
            ri[R_CUR] = -1
            return 0
        b0 = ri[R_B0]
        rl[row, m, 0], rl[row, m, 1], rl[row, m, 2] = i0 - b0, i1 - b0, inst
        rl[row, m, 3:8] = loops_out[n_loops - 1]
        ri[R_NL] = m + 1
    return 0


@numba.njit(cache=True)
def _rep_tile(rep, copies):
    """The recorded copy's kept rows and runs laid out `copies` times one after the other (rows shifted; the loop
    instances are shifted by DecodeReplay.batch; the words are not: a batch of repeats gives one copy's)."""
    ri, rsel, rruns = rep[0], rep[9], rep[10]
    n, ns, nr = ri[R_REF_N], ri[R_REF_NS], ri[R_REF_NR]
    for t in range(ri[R_TILED], copies):
        rsel[t * ns:(t + 1) * ns] = rsel[:ns] + t * n
        rruns[t * nr:(t + 1) * nr] = rruns[:nr]
        rruns[t * nr:(t + 1) * nr, 0] += t * n
    ri[R_TILED] = max(ri[R_TILED], copies)


@numba.njit(cache=True)
def _rep_skip(rep, pred_last, pred_stride, enc_last, fb, fc, counts, last_inst, loops_out, n_loops):
    """Apply ri[R_NCOP] repeats of the recorded copy without decoding them: their loop begins (instances shifted;
    the first one's the kernel applied), their block counts, their end state (returned in ri[R_D..R_IT]), and
    the recording laid out that many times. Returns the loop begins now in loops_out."""
    ri, rl, rs1, rdelta = rep[0], rep[2], rep[4], rep[7]
    ref, delta, copies, span = ri[R_REF_ROW], ri[R_DELTA], ri[R_NCOP], ri[R_SPAN]
    for j in range(copies):
        for m in range(1 if j == 0 else 0, ri[R_NLR + ref]):
            loops_out[n_loops, :] = rl[ref, m, 3:8]
            loops_out[n_loops, 0] += delta + j * span
            n_loops += 1
    _rep_tile(rep, copies)
    n, w = pred_last.shape[0], fb.shape[0]
    pred_last[:] = rs1[0:n]
    pred_stride[:] = rs1[n:2 * n]
    enc_last[:] = rs1[2 * n:3 * n]
    j = 3 * n + 2 * w
    d = rs1[j]
    fb[:d + 1] = rs1[3 * n:3 * n + d + 1]
    fc[:d + 1] = rs1[3 * n + w:3 * n + w + d + 1]
    for b in range(counts.shape[0]):
        if rdelta[b] > 0:
            counts[b] += copies * rdelta[b]
            last_inst[b] = counts[b] - 1
    lp = ri[R_LP1]
    lp = lp + delta + (copies - 1) * span if lp >= 0 else lp
    ri[R_D], ri[R_REG], ri[R_TOP], ri[R_LP], ri[R_IT] = d, rs1[j + 1], rs1[j + 2], lp, ri[R_IT1]
    ri[R_G] += copies * ri[R_REF_N]
    ri[R_CUR] = -2
    ri[R_SKIPS] += copies
    return n_loops


# _decode's helpers. Those with array arguments are compiled without numba's reference counting (_nrt=False: they
# allocate nothing): an array argument otherwise costs an incref and a decref per call, and per call site when
# inlined; with a dozen arrays per event, that made the exact decode of jacobi-2d MEDIUM 4.4 times slower (0.36 s to
# 1.59 s). Only scalar helpers are inlined (inline="always"): the one every event takes (_event_kind) as a call
# made the sampling decode 6% slower. The block runs of the sampling decode stay in _decode, and so does the
# replay's switch: a helper around them cost 11%, and an unconditional call (a few hundred loop begins) 4%.


@numba.njit(cache=True, inline="always")
def _event_kind(h: int, n_sites: int, n_blocks: int) -> tuple:
    """Split an event's first varint into its tag and value, and say what it ends of the current block, so the
    main loop only dispatches (scalars only: inlined without reference counting).

    Returns (tag, value, site it stops at or -1, whether it ends the block, whether its id is in range)."""
    tag = np.int64(h & np.uint64(3))
    val = np.int64(h >> np.uint64(2))
    stop_site, finish, ok = -1, False, True
    if tag == 0 or tag == 2:
        ok = val < n_sites
        stop_site = val
    elif tag == 1:
        ok = val < n_blocks
        finish = True
    elif val == 1 or val == 7:
        finish = True
    return tag, val, stop_site, finish, ok


@numba.njit(cache=True, _nrt=False)
def _add_instances(b: int, r: int, counts: np.ndarray, last_inst: np.ndarray, virt_of: np.ndarray) -> None:
    """Count r instances of block b (and of its shared-var pseudo-block) entered at once by a block run, as r
    entries would (_enter_block), the last one current."""
    counts[b] += r
    last_inst[b] = counts[b] - 1
    v = virt_of[b]
    if v >= 0:
        counts[v] += r
        last_inst[v] = counts[v] - 1


@numba.njit(cache=True, _nrt=False)
def _block_rest(b, c, stop_site, stop_k, k, cap, bs, bs_off, site_explicit, out, pred_last, pred_stride, site_size,
                site_block, site_store, last_inst, reg, lp, it, top, stack_lo, stack_hi, sink, ns, both) -> tuple:
    """Emit the predicted rows of block b's sites from cursor c up to the event's stop (the block's end, site
    `stop_site`, or cursor `stop_k`): the runtime wrote nothing for them, so they are implied here.

    Returns (status, rows written, new cursor, kept rows, highest address); status 1 = the output is full
    (the cursor is where to resume), -1 = the stop site is not among the block's remaining sites."""
    o = bs_off[b]
    n = bs_off[b + 1] - o
    if stop_site < 0 and stop_k < 0 and k + n - c <= cap:
        # the common case, the rest of a finished block with room for it, in a loop without the
        # checks below (10-15% of the decoding time)
        for x in range(o + c, o + n):
            if not site_explicit[bs[x]]:
                ns, both = _emit_predicted(out, k, bs[x], pred_last, pred_stride, site_size, site_block, site_store,
                                           last_inst, reg, lp, it, top, stack_lo, stack_hi, sink, ns, both)
                k += 1
        c = n
    while c < n:
        s = bs[o + c]
        if s == stop_site or (stop_k >= 0 and c >= stop_k):
            break
        if not site_explicit[s]:
            if k >= cap:
                return 1, k, c, ns, both
            ns, both = _emit_predicted(out, k, s, pred_last, pred_stride, site_size, site_block, site_store,
                                       last_inst, reg, lp, it, top, stack_lo, stack_hi, sink, ns, both)
            k += 1
        c += 1
    if stop_site >= 0 and c >= n:
        return -1, k, c, ns, both
    return 0, k, c, ns, both


@numba.njit(cache=True, _nrt=False)
def _enter_block(val: int, d: int, fb: np.ndarray, fc: np.ndarray, counts: np.ndarray, last_inst: np.ndarray,
                 virt_of: np.ndarray) -> None:
    """A block entry: the frame's block and cursor, and the instance counts of the block and of its shared-var
    pseudo-block, whose rows carry those instance numbers."""
    fb[d] = val
    fc[d] = 0
    last_inst[val] = counts[val]
    counts[val] += 1
    v = virt_of[val]
    if v >= 0:
        last_inst[v] = counts[v]
        counts[v] += 1


@numba.njit(cache=True, _nrt=False)
def _access(buf: np.ndarray, pos: int, tag: int, s: int, site_size: np.ndarray, pred_last: np.ndarray,
            pred_stride: np.ndarray, enc_last: np.ndarray, rep: tuple) -> tuple:
    """The address and size of an explicit access of site s, whose event carries them relative to what the
    runtime predicted (tag 0, a miss: last + stride) or to the site's last sized access (tag 2, sized).

    Returns (address, size, next byte)."""
    dv, pos = _varint(buf, pos)
    sz = site_size[s]
    if tag == 0:
        a = pred_last[s] + pred_stride[s] + _unzig(dv)
        pred_stride[s] = a - pred_last[s]
        pred_last[s] = a
    else:
        a = enc_last[s] + _unzig(dv)
        enc_last[s] = a
        if rep[0][R_CUR] == 1:  # a recording with sized events cannot go on in the next chunk (see _rep_loop)
            rep[0][R_SIZED] = 1
        nb, pos = _varint(buf, pos)
        sz = np.uint32(nb)
    return a, sz, pos


@numba.njit(cache=True, _nrt=False)
def _loop_begin(buf: np.ndarray, pos: int, loops_out: np.ndarray, n_loops: int) -> tuple:
    """Read a loop begin's fields into row n_loops of loops_out (the loop instances the caller labels rows with).

    Returns (instance, the instance varint's first byte and end, next byte)."""
    lid, pos = _varint(buf, pos)
    i0 = pos
    inst, pos = _varint(buf, pos)
    i1 = pos
    trip, pos = _varint(buf, pos)
    sched, pos = _varint(buf, pos)
    chunk, pos = _varint(buf, pos)
    loops_out[n_loops, 0] = np.int64(inst)
    loops_out[n_loops, 1] = np.int64(lid)
    loops_out[n_loops, 2] = _unzig(trip)
    loops_out[n_loops, 3] = np.int64(sched)
    loops_out[n_loops, 4] = _unzig(chunk)
    return np.int64(inst), i0, i1, pos


@numba.njit(cache=True)
def _replay_at_loop(rep, sink, buf, ev, i0, i1, loops_out, n_loops, k, ns, nr, both, lp0, it0, pred_last,
                    pred_stride, enc_last, fb, fc, d, reg, lp, it, top, stack_lo, stack_hi, counts, last_inst) -> tuple:
    """Let the replay (DecodeReplay) act at the loop begin just applied: it may end the current copy and skip
    the copies that repeat the recorded one, or ask for this loop begin again in front of the next chunk.

    Returns (status, bytes skipped, loop begins, depth, region, loop, iteration, region top): status 0 = go
    on, 2 = copies skipped (their end state returned), 3 = the loop begin undone, the next chunk goes on."""
    skip = _rep_loop(rep, sink, buf, ev, i0, i1, lp, loops_out, n_loops, k, ns, nr, both, lp0, it0, pred_last,
                     pred_stride, enc_last, fb, fc, d, reg, top, stack_lo, stack_hi, counts)
    if skip < 0:  # a repeat may go on in the next chunk: this loop begin again there
        return 3, 0, n_loops - 1, d, reg, lp0, it0, top
    if skip > 0:  # repeats of the recorded copy: their state at the end, not their rows
        n_loops = _rep_skip(rep, pred_last, pred_stride, enc_last, fb, fc, counts, last_inst, loops_out, n_loops)
        ri = rep[0]
        return 2, skip, n_loops, ri[R_D], ri[R_REG], ri[R_LP], ri[R_IT], ri[R_TOP]
    return 0, 0, n_loops, d, reg, lp, it, top


@numba.njit(cache=True, _nrt=False)
def _control(buf: np.ndarray, pos: int, val: int, d: int, reg: int, lp: int, it: int, top: int, fb: np.ndarray,
             fc: np.ndarray, sink: tuple, nr: int, k: int) -> tuple:
    """Apply a control event other than a loop begin: region begin/end, iteration, loop end, call enter/leave
    (5, a block's sync, only stopped the block's rows). The state is passed and returned as scalars so the
    main loop keeps it in registers.

    Returns (valid, next byte, depth, region, loop, iteration, region top, runs)."""
    if val == 0:
        fn, pos = _varint(buf, pos)
        r, pos = _varint(buf, pos)
        t, pos = _varint(buf, pos)
        reg = np.int64(r)
        top = np.int64(t)
        fb[d] = -1
    elif val == 1:
        fn, pos = _varint(buf, pos)
        fb[d] = -1
        reg = -1
        top = 0
    elif val == 3:
        dv, pos = _varint(buf, pos)
        it = it + 1 + _unzig(dv)
        nr = _sink_cut(sink, nr, k, lp, it)
    elif val == 4:
        lid, pos = _varint(buf, pos)
        lp = -1
        it = -1
        nr = _sink_cut(sink, nr, k, lp, it)
    elif val == 6:
        fn, pos = _varint(buf, pos)
        if d + 1 >= fb.shape[0]:
            return False, pos, d, reg, lp, it, top, nr
        d += 1
        fb[d] = -1
        fc[d] = 0
    elif val == 7:
        fn, pos = _varint(buf, pos)
        if d == 0:
            return False, pos, d, reg, lp, it, top, nr
        d -= 1
    elif val != 5:
        return False, pos, d, reg, lp, it, top, nr
    return True, pos, d, reg, lp, it, top, nr


@numba.njit(cache=True)
def _store_state(st: np.ndarray, d: int, reg: int, lp: int, it: int, top: int, sink: tuple, ns: int, nr: int, both,
                 k: int, rep: tuple, chunk_end: bool) -> None:
    """Store the thread's state, the sink's counters and the replay's recording before the kernel returns, so
    the next call (or chunk) goes on from there."""
    st[0], st[1], st[2], st[3], st[4] = d, reg, lp, it, top
    _sink_save(sink, ns, nr, both, k)
    _rep_return(rep, sink, k, ns, nr, both, chunk_end)


@numba.njit(cache=True)
def _decode(buf, start, site_block, site_size, site_store, site_explicit, bs_off, bs, virt_of, counts,
            last_inst, enc_last, pred_last, pred_stride, fb, fc, st, loops_out, stack_lo, stack_hi, out, sink, rep):
    """Replay a chunk's events from byte `start`; returns (status, rows, loop begins, next byte).

    status 0 = chunk done, 1 = paused, the output (or loops_out) full, 2 = copies of the one `rep` recorded were
    skipped (DecodeReplay, sampling decode only; their rows follow): both call again from the returned byte, 3 = the
    bytes from the returned one on go in front of the next chunk's, -1 = invalid events. `st` = [depth, region,
    loop, iteration, region_top] and the frames fb (block) / fc (site cursor) carry the thread's state; a block
    entry implies its sites' rows (_block_rest). `sink`: the sampling sink (ChunkDecoder.sampled) or 2-D
    placeholders; `out` is then all placeholders."""
    cap = out[0].shape[0] if sink[0].ndim != 1 else sink[0].shape[0]
    d, reg, lp, it, top = st[0], st[1], st[2], st[3], st[4]
    pos, k, n_loops = start, 0, 0
    ns, nr, both = 0, 1, np.uint64(0)
    if sink[0].ndim == 1:  # the batch's first run
        sink[2][0, 0], sink[2][0, 1], sink[2][0, 2] = 0, lp, it
    end = buf.shape[0]
    while pos < end:
        ev = pos
        h, pos = _varint(buf, pos)
        tag, val, stop_site, finish, ok = _event_kind(h, site_block.shape[0], counts.shape[0])
        if not ok:
            return -1, k, n_loops, ev
        stop_k = -1
        if tag == 3 and val == 5:  # a block's sync: its rows up to a site cursor
            arg, pos = _varint(buf, pos)
            stop_k = np.int64(arg)
        b = fb[d]
        if sink[0].ndim == 1 and tag == 1 and val == b and fc[d] == 0:
            # the same block entered again with none of its sites run yet: every repeat of this event that
            # follows is one more whole instance of predicted accesses, emitted site by site
            r = _block_repeats(buf, ev, pos, bs, bs_off, site_explicit, b, cap - k)
            if r > 0:
                o, n = bs_off[b], bs_off[b + 1] - bs_off[b]
                ns, both = _sink_block_run(sink, k, r, bs[o:o + n], pred_last, pred_stride, site_store, stack_lo,
                                           top if reg >= 0 and top > 0 else stack_hi, ns, both)
                k, pos = k + r * n, ev + r * (pos - ev)
                _add_instances(b, r, counts, last_inst, virt_of)
                continue
        if b >= 0 and (finish or stop_site >= 0 or stop_k >= 0):
            status, k, c, ns, both = _block_rest(b, fc[d], stop_site, stop_k, k, cap, bs, bs_off, site_explicit,
                                                 out, pred_last, pred_stride, site_size, site_block, site_store,
                                                 last_inst, reg, lp, it, top, stack_lo, stack_hi, sink, ns, both)
            fc[d] = c
            if status == 1:
                _store_state(st, d, reg, lp, it, top, sink, ns, nr, both, k, rep, False)
            if status != 0:
                return status, k, n_loops, ev
        elif stop_site >= 0:
            return -1, k, n_loops, ev
        if tag == 1:
            _enter_block(val, d, fb, fc, counts, last_inst, virt_of)
        elif tag == 0 or tag == 2:
            if k >= cap:
                _store_state(st, d, reg, lp, it, top, sink, ns, nr, both, k, rep, False)
                return 1, k, n_loops, ev
            a, sz, pos = _access(buf, pos, tag, stop_site, site_size, pred_last, pred_stride, enc_last, rep)
            ns, both = _emit(out, k, stop_site, a, sz, site_block, site_store, last_inst, reg, lp, it, top, stack_lo,
                             stack_hi, sink, ns, both)
            k += 1
            fc[d] += 1
        elif val == 2:
            if n_loops >= loops_out.shape[0]:
                _store_state(st, d, reg, lp, it, top, sink, ns, nr, both, k, rep, False)
                return 1, k, n_loops, ev
            lp0, it0 = lp, it
            lp, i0, i1, pos = _loop_begin(buf, pos, loops_out, n_loops)
            n_loops += 1
            it = -1
            nr = _sink_cut(sink, nr, k, lp, it)
            if rep[0][R_ON]:
                status, skip, n_loops, d, reg, lp, it, top = _replay_at_loop(
                    rep, sink, buf, ev, i0, i1, loops_out, n_loops, k, ns, nr, both, lp0, it0, pred_last,
                    pred_stride, enc_last, fb, fc, d, reg, lp, it, top, stack_lo, stack_hi, counts, last_inst)
                if status:
                    _store_state(st, d, reg, lp, it, top, sink, ns, nr, both, k, rep, False)
                    return status, k, n_loops, ev + skip
        else:
            ok, pos, d, reg, lp, it, top, nr = _control(buf, pos, val, d, reg, lp, it, top, fb, fc, sink, nr, k)
            if not ok:
                return -1, k, n_loops, ev
    if pos != end:
        return -1, k, n_loops, pos
    _store_state(st, d, reg, lp, it, top, sink, ns, nr, both, k, rep, True)
    return 0, k, n_loops, pos


def _tables(header: dict, path: Path) -> _Tables:
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
    return _Tables(np.array([s["block"] for s in sites], np.int32),
                   np.array([s["size"] for s in sites], np.uint32),
                   np.array([s["is_store"] for s in sites], np.bool_),
                   np.array([s["kind"].startswith(SIZED_KINDS) for s in sites], np.bool_), off, flat, virt,
                   n_blocks)


def read_header(f, path: Path) -> tuple[dict, int]:
    """Parse the file header; returns (header JSON, offset of the first chunk)."""
    head = f.read(16)
    if len(head) < 16 or head[:8] != FILE_MAGIC:
        raise InputError(f"{path}: not a pptmc trace (bad magic); produce one with pptmc trace")
    version, hlen = struct.unpack("<II", head[8:])
    if version != FORMAT_VERSION:
        raise InputError(f"{path}: trace format version {version}, this pptmc reads {FORMAT_VERSION}; "
                         f"re-record the trace")
    body = f.read(hlen)
    raw_hl = f.read(4)
    if len(body) < hlen or len(raw_hl) < 4:
        raise InputError(f"{path}: truncated inside the header; re-record the trace")
    (hl,) = struct.unpack("<I", raw_hl)
    binary_hash = f.read(hl).decode()
    try:
        header = json.loads(body)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: header JSON is corrupt ({exc}); re-record the trace") from exc
    if header.get("block_table_hash") != binary_hash:
        raise InputError(f"{path}: block table hash {header.get('block_table_hash')} does not match the "
                         f"binary's {binary_hash}: the side files are from another build; rebuild and re-trace")
    return header, 16 + hlen + 4 + hl


def read_footer(f, path: Path, size: int) -> tuple[dict, int]:
    """Parse the footer; a missing trailer means the file was cut short."""
    if size < TRAILER.size:
        raise InputError(f"{path}: truncated (no footer); the trace was cut short, re-record it")
    f.seek(size - TRAILER.size)
    start, magic = TRAILER.unpack(f.read(TRAILER.size))
    if magic != END_MAGIC or start > size - TRAILER.size - 8:
        raise InputError(f"{path}: truncated (the footer is missing); the trace was cut short or the "
                         f"recording process was killed; re-record it")
    f.seek(start)
    fmagic, flen = struct.unpack("<4sI", f.read(8))
    body = f.read(flen)
    if fmagic != FOOTER_MAGIC or start + 8 + flen != size - TRAILER.size:
        raise InputError(f"{path}: corrupt footer at byte {start}; re-record the trace")
    try:
        return json.loads(body), start
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: corrupt footer JSON at byte {start}; re-record the trace") from exc


def iter_chunk_headers(f, path: Path, start: int, stop: int) -> Iterator[tuple[ChunkHeader, bytes]]:
    """Yield (header, compressed payload) of every chunk in [start, stop), checking both CRCs."""
    pos = start
    index = 0
    while pos < stop:
        f.seek(pos)
        raw = f.read(CHUNK_HEADER.size)
        if len(raw) < CHUNK_HEADER.size:
            raise InputError(f"{path}: chunk {index} at byte {pos} is truncated; re-record the trace")
        fields = CHUNK_HEADER.unpack(raw)
        if fields[0] != CHUNK_MAGIC or zlib.crc32(raw[:84]) != fields[12]:
            raise InputError(f"{path}: chunk {index} at byte {pos} has a corrupt header; re-record the trace")
        hdr = ChunkHeader(pos, *fields[1:12])
        payload = f.read(hdr.comp_len)
        if len(payload) < hdr.comp_len or pos + CHUNK_HEADER.size + hdr.comp_len > stop:
            raise InputError(f"{path}: chunk {index} at byte {pos} is truncated; re-record the trace")
        if zlib.crc32(payload) != hdr.payload_crc:
            raise InputError(f"{path}: chunk {index} at byte {pos} is corrupt (payload checksum mismatch); "
                             f"re-record the trace")
        yield hdr, payload
        pos += CHUNK_HEADER.size + hdr.comp_len
        index += 1


def _header_bytes(f, hdr: ChunkHeader) -> bytes:
    """The raw 80 header bytes of a chunk (for the whole-file checksum)."""
    here = f.tell()
    f.seek(hdr.offset)
    raw = f.read(CHUNK_HEADER.size)
    f.seek(here)
    return raw


class TraceReader:
    """An open trace: `.info` from header and footer, `.chunks()` streams accesses from the start."""

    def __init__(self, path: Path):
        self.path = Path(path)
        if not self.path.is_file():
            raise InputError(f"{self.path}: trace file not found")
        size = self.path.stat().st_size
        with open(self.path, "rb") as f:
            self.header, self.data_start = read_header(f, self.path)
            self.footer, self.data_stop = read_footer(f, self.path, size)
        self.tables = _tables(self.header, self.path)
        self.info = self._info()

    def _info(self) -> TraceInfo:
        """TraceInfo from the embedded tables and the footer's totals."""
        blocks = {b["id"]: BlockInfo(b["id"], b["function"], b["label"], b["is_shared_var_block"])
                  for b in self.header["blocks"]}
        counts = {i: int(c) for i, c in enumerate(self.footer.get("block_counts", []))}
        # complete traces: every entered block ran each of its sites once; incomplete ones
        # carry the number of accesses actually decoded
        n_acc = (int(self.footer["n_accesses"]) if "n_accesses" in self.footer
                 else self.tables.n_accesses(counts, self.footer.get("n_sized")))
        for b in self.header["blocks"]:
            if b["is_shared_var_block"]:
                counts[b["id"]] = counts.get(b["host_block"], 0)
        edges = {(int(a), int(b)): int(n) for a, b, n in self.footer.get("edge_counts", [])}
        loops = [LoopInstance(i, int(l[0]), int(l[1]), int(l[2]), int(l[3]))
                 for i, l in enumerate(self.footer.get("loops", []))]
        extra = {k: self.footer[k] for k in ("n_chunks", "reason", "exit_status", "signal", "lost_threads",
                                          "elapsed_s") if k in self.footer}
        extra.update({k: self.header[k] for k in ("threads_requested", "block_table_hash") if k in self.header})
        return TraceInfo(path=str(self.path), format_version=FORMAT_VERSION,
                         program=self.header.get("program", ""), args=list(self.header.get("args", [])),
                         complete=bool(self.footer.get("complete")), n_accesses=n_acc,
                         blocks=blocks, block_counts=counts, edge_counts=edges, loops=loops,
                         n_threads=int(self.footer.get("n_threads", 1)), extra=extra)

    def disk_chunks(self) -> Iterator[tuple[ChunkHeader, bytes]]:
        """Compressed chunks in file order, each verified."""
        crc = 0
        with open(self.path, "rb") as f:
            for hdr, payload in iter_chunk_headers(f, self.path, self.data_start, self.data_stop):
                crc = zlib.crc32(payload, zlib.crc32(_header_bytes(f, hdr), crc))
                yield hdr, payload
        expected = self.footer.get("crc32")
        if expected is not None and crc != int(expected):
            raise InputError(f"{self.path}: whole-file checksum mismatch (footer {expected}, data {crc}); "
                             f"the trace is corrupt, re-record it")

    def chunks(self, max_rows: int = 1 << 20, columns: Iterable[str] | None = None) -> Iterator[TraceChunk]:
        """Stream every access from the start, in batches of at most `max_rows`.

        columns: the TraceChunk fields the caller reads (None: all; `addr` always). The others are not
        written by the decoder and read as zeros."""
        if max_rows < 1:
            raise InputError(f"max_rows={max_rows}: must be at least 1")
        decoder = ChunkDecoder(self.tables, self.path, columns)
        for hdr, payload in self.disk_chunks():
            yield from decoder.decode(hdr, payload, max_rows)

    def sampled_batches(self, max_rows: int, shift: int, salt: int, threshold: int, period: int = 0,
                        min_rows: int = 1) -> Iterator[SampledBatch]:
        """Stream every access from the start as SampledBatch views (see SampleSink; each batch is valid until
        the next is read): the batches `chunks(max_rows)` would give, without their columns. period > 0: loop
        instances i and i + period repeat (analysis.profiles.sweep.loop_period); copies of the events that repeat
        the previous one are not decoded (DecodeReplay, copies of at least min_rows rows): their rows come as
        batches of their own, so the rows are the same but the batches are cut differently."""
        sink = SampleSink(max_rows, shift, salt, threshold)
        decoder = ChunkDecoder(self.tables, self.path, ())
        replays: dict[int, DecodeReplay] = {}
        chunks = self.disk_chunks()
        nxt = next(chunks, None)
        while nxt is not None:
            (hdr, payload), nxt = nxt, next(chunks, None)
            replay = None
            if period > 0:
                replay = replays.get(hdr.thread) or replays.setdefault(hdr.thread, DecodeReplay(
                    period, min_rows, max_rows, len(self.tables.site_block), self.tables.n_blocks, REPLAY_BATCHES))
            carry = nxt is not None and (nxt[0].thread, nxt[0].stack_lo, nxt[0].stack_hi) == \
                (hdr.thread, hdr.stack_lo, hdr.stack_hi)
            yield from decoder.sampled(hdr, payload, sink, replay, carry)


class _ThreadState:
    """Decoder state of one recording thread, carried from chunk to chunk."""

    def __init__(self, n_sites: int, hdr: "ChunkHeader"):
        self.pred_last = np.zeros(n_sites, np.int64)
        self.pred_stride = np.zeros(n_sites, np.int64)
        self.fb = np.full(MAX_DEPTH, -1, np.int64)
        self.fc = np.zeros(MAX_DEPTH, np.int64)
        self.st = np.array([0, hdr.region, hdr.loop, hdr.iteration, hdr.region_top], np.int64)


# SampledBatch.words: the line (address >> shift) with two flags above it
WORD_STACK = np.uint64(1) << np.uint64(63)
WORD_STORE = np.uint64(1) << np.uint64(62)
WORD_LINE = WORD_STORE - np.uint64(1)


@dataclass
class SampledBatch:
    """A batch of the sampling decode: each row reduced to one word, the rows whose line is kept, and the
    runs of rows with one (loop, iteration). Views into the sink's arrays: valid until the next batch."""

    words: np.ndarray      # uint64 per row: line | WORD_STACK (is_stack) | WORD_STORE (is_store); with copies,
    #                        one copy's: row i's word is words[i % len(words)]
    sel: np.ndarray        # int64 rows whose line's salted hash is below the threshold, increasing
    starts: np.ndarray     # int64 first row of each run (a change of loop or iteration), then len(words)
    loop: np.ndarray       # int64 loop instance of each run (-1: none)
    iteration: np.ndarray  # int64 iteration of each run (-1: none)
    addr_max: int          # the highest address of any row, as uint64 (range checks)
    copies: int = 0        # > 0: the batch is that many repeats of one recorded copy (DecodeReplay.batch), ...
    recording: int = -1    # ... recording number `recording` of its reader (words, flags and kept rows alike)

    def __len__(self) -> int:
        return int(self.starts[-1])


class SampleSink:
    """Where the sampling decode (TraceReader.sampled_batches) puts its batches of at most `max_rows` rows.

    A row is kept when its line's salted 32-bit hash, ((x ^ x >> 32 ^ salt) mod 2^32) * 0x9E3779B1 mod 2^32
    with x = address >> shift, is below `threshold` (SHARDS, as analysis.sampling.source computes it), so
    the sampler never reads the rows back to pick them."""

    def __init__(self, max_rows: int, shift: int, salt: int, threshold: int) -> None:
        if max_rows < 1:
            raise InputError(f"max_rows={max_rows}: must be at least 1")
        self.words = np.empty(max_rows, np.uint64)
        self.sel = np.empty(max_rows, np.int64)
        self.runs = np.empty((max_rows + 2, 3), np.int64)
        self.params = np.array([shift, salt, threshold], np.uint64)
        self.state = np.zeros(3, np.uint64)

    def arrays(self) -> tuple:
        """The kernel's sink tuple."""
        return self.words, self.sel, self.runs, self.params, self.state

    def batch(self, k: int) -> SampledBatch:
        """The k rows the last kernel call produced."""
        ns, nr = int(self.state[0]), int(self.state[1])
        starts = np.empty(nr + 1, np.int64)
        starts[:nr] = self.runs[:nr, 0]
        starts[nr] = k
        return SampledBatch(self.words[:k], self.sel[:ns], starts, self.runs[:nr, 1], self.runs[:nr, 2],
                            int(self.state[2]))


# The rows a batch of skipped copies may hold, in batches of the sampling decode (more repeats per batch: fewer
# batches for the sampler to take; only their kept rows and runs are laid out, so this costs little memory):
# jacobi-2d MEDIUM's 370K-row copies, 11 per batch of 2^22 rows: whole 1% profile 0.088 s, 0.091 s with 4
# batches' worth, 0.087-0.089 with 16
REPLAY_BATCHES = 8


class DecodeReplay:
    """Replay of periodic stretches in the sampling decode (TraceReader.sampled_batches with a period n > 0).

    The events are cut into copies at the loop begins whose instance is a multiple of n, once a copy holds
    `min_rows` rows. A copy's rows depend only on its bytes and on the decoder's state at its start (each
    site's last address and stride, the frames, the region's stack bounds); the loop begins' instance numbers
    only label the runs. So when a copy starts in the state the previous one started in and holds the same
    bytes (instance numbers aside), its rows are kept (words, kept rows, runs: at most `max_rows`), with its
    end state; every later copy that starts in that state with those bytes is not decoded: the kernel applies
    the end state and the batch of its rows is the kept one, instances shifted (`batch`). A copy is only kept
    or matched within one chunk's bytes (one thread's replay; chunks of other threads have their own)."""

    ROWS, LOOPS = 3, 1024  # byte buffers (current, previous, recorded copy), loop begins a copy may hold

    def __init__(self, period: int, min_rows: int, max_rows: int, n_sites: int, n_blocks: int,
                 batches: int = 1) -> None:
        """max_rows: the rows a recording holds; a batch of repeats holds up to `batches` times as many."""
        width = 3 * n_sites + 2 * MAX_DEPTH + 5
        self.ri = np.zeros(R_SIZE, np.int64)
        self.ri[R_ON], self.ri[R_N], self.ri[R_MIN], self.ri[R_CUR] = int(period > 0), max(period, 1), min_rows, -1
        self.bytes = np.empty((self.ROWS, max(4 * max_rows, 1 << 16)), np.uint8)
        self.loops = np.zeros((self.ROWS, self.LOOPS, 8), np.int64)
        self.start = np.zeros((self.ROWS, width), np.int64)
        self.end, self.now = np.zeros(width, np.int64), np.zeros(width, np.int64)
        self.counts0, self.delta = np.zeros(n_blocks, np.int64), np.zeros(n_blocks, np.int64)
        self.words, self.sel = np.empty(max_rows, np.uint64), np.empty(batches * max_rows, np.int64)
        self.runs = np.empty((batches * max_rows + 2, 3), np.int64)
        self.high = np.zeros(2, np.uint64)

    def arrays(self) -> tuple:
        """The kernel's replay tuple."""
        return (self.ri, self.bytes, self.loops, self.start, self.end, self.now, self.counts0, self.delta,
                self.words, self.sel, self.runs, self.high)

    @property
    def skipped(self) -> int:
        """Copies not decoded."""
        return int(self.ri[R_SKIPS])

    def batch(self) -> SampledBatch:
        """The rows of the copies the kernel just skipped: the recorded copy's kept rows and runs, laid out once
        per copy, loop instances shifted, and its words once (views, valid until the next batch). addr_max is the
        highest address of the batches the copy was recorded in."""
        ri = self.ri
        copies, one = int(ri[R_NCOP]), int(ri[R_REF_N])
        ns, nr = (copies * int(ri[x]) for x in (R_REF_NS, R_REF_NR))
        runs = self.runs[:nr]
        starts = np.append(runs[:, 0], copies * one)
        shift = ri[R_DELTA] + np.arange(nr, dtype=np.int64) // int(ri[R_REF_NR]) * ri[R_SPAN]
        loop = np.where(runs[:, 1] >= 0, runs[:, 1] + shift, runs[:, 1])
        return SampledBatch(self.words[:one], self.sel[:ns], starts, loop, runs[:, 2], int(self.high[1]), copies,
                            int(ri[R_RECORDED]) - 1)


def _no_replay() -> tuple:
    """The replay argument of a decode without replay (the kernel reads only its switch, off)."""
    return DecodeReplay(0, 1, 1, 1, 1).arrays()


# the sink argument of a plain decode: placeholders (only the first one's ndim is looked at)
_NO_SINK = (np.empty((1, 1), np.uint64), np.empty(1, np.int64), np.empty((1, 3), np.int64),
            np.zeros(3, np.uint64), np.zeros(3, np.uint64))
_NO_REPLAY = _no_replay()


# the columns _decode writes, in the order of its `out` tuple (`thread` is set per batch)
_DECODED = ("addr", "size", "is_store", "block", "block_instance", "region", "loop", "iteration", "is_stack")


class ChunkDecoder:
    """Decodes verified chunks in file order, carrying per-thread and block-instance state.

    columns: the fields to decode (None: all; `addr` always); the others are zeros."""

    def __init__(self, tables: _Tables, path: Path, columns: Iterable[str] | None = None):
        self.t, self.path = tables, path
        self.wanted = set(CHUNK_DTYPES) if columns is None else set(columns) | {"addr"}
        if self.wanted - set(CHUNK_DTYPES):
            raise ValueError(f"unknown trace columns {sorted(self.wanted - set(CHUNK_DTYPES))}; "
                             f"expected some of {list(CHUNK_DTYPES)}")
        self.counts = np.zeros(tables.n_blocks, np.int64)
        self.last_inst = np.zeros(tables.n_blocks, np.int64)
        self.threads: dict[int, _ThreadState] = {}
        self.dctx = zstandard.ZstdDecompressor()
        self.loops: list[tuple[int, int, int, int, int]] = []
        self.carry: dict[int, np.ndarray] = {}
        self.index = 0

    def decode(self, hdr: ChunkHeader, payload: bytes, max_rows: int = 1 << 20) -> Iterator[TraceChunk]:
        """The accesses one disk chunk completes, in batches of at most `max_rows`.

        Predicted accesses expand without bound relative to the chunk's bytes, so the kernel
        pauses whenever its output is full instead of materialising the whole chunk.
        """
        def fresh():
            return TraceChunk(*(np.empty(max_rows if c in self.wanted else (1, 1), dtype=dt)
                                for c, dt in CHUNK_DTYPES.items()))

        for out, k, _ in self._calls(hdr, payload, fresh, _NO_SINK, _NO_REPLAY):
            yield self._rows(out, k, hdr.thread)

    def sampled(self, hdr: ChunkHeader, payload: bytes, sink: "SampleSink", replay: DecodeReplay | None = None,
                carry: bool = False) -> Iterator["SampledBatch"]:
        """The accesses one disk chunk completes as SampledBatch views into `sink` (each valid until the next);
        with `replay` (this chunk's thread's), repeated copies come as replay.batch(), not decoded. carry: the
        thread's next chunk follows with the same stack bounds, so a copy that goes on in it may be decoded
        there (this chunk's last bytes in front of it)."""
        out = TraceChunk(*(np.empty((1, 1), dtype=dt) for dt in CHUNK_DTYPES.values()))
        arrays = sink.arrays()
        rep = _NO_REPLAY if replay is None else replay.arrays()
        if replay is not None:
            replay.ri[R_CARRY] = int(carry)
        for _, k, status in self._calls(hdr, payload, lambda: out, arrays, rep):
            if k:
                yield sink.batch(k)
            if status == 2 and replay.ri[R_REF_N]:
                yield replay.batch()

    def _calls(self, hdr: ChunkHeader, payload: bytes, fresh, sink: tuple,
               rep: tuple) -> Iterator[tuple[TraceChunk, int, int]]:
        """Run the kernel over one disk chunk: (output, rows, status) of every call that produced rows or
        skipped a repeated copy (status 2)."""
        buf = np.frombuffer(self._decompress(hdr, payload), np.uint8)
        carried = self.carry.pop(hdr.thread, None)  # the previous chunk's last bytes (status 3)
        if carried is not None:
            buf = np.concatenate([carried, buf])
        th = self.threads.setdefault(hdr.thread, _ThreadState(len(self.t.site_block), hdr))
        enc_last = np.zeros(len(self.t.site_block), np.int64)
        loops_out = np.zeros((4096, 5), np.int64)
        pos, status = 0, 1
        while status == 1 or status == 2:
            out = fresh()
            status, k, n_loops, pos = _decode(
                buf, pos, self.t.site_block, self.t.site_size, self.t.site_store, self.t.site_explicit,
                self.t.bs_off, self.t.bs, self.t.virt_of, self.counts, self.last_inst, enc_last, th.pred_last,
                th.pred_stride, th.fb, th.fc, th.st, loops_out, np.int64(hdr.stack_lo), np.int64(hdr.stack_hi),
                tuple(getattr(out, c) for c in _DECODED), sink, rep)
            if status < 0:
                at = pos - (0 if carried is None else carried.shape[0])
                raise InputError(f"{self.path}: chunk {self.index} at byte {hdr.offset} holds invalid events "
                                 f"(an id out of range or an access outside its block, event at byte {at} of "
                                 f"the decompressed payload); the trace is corrupt, re-record it")
            self.loops.extend(tuple(int(x) for x in row) for row in loops_out[:n_loops])
            if k or status == 2:
                yield out, k, status
        if status == 3:  # the bytes from pos on are decoded in front of the thread's next chunk
            self.carry[hdr.thread] = buf[pos:].copy()
        self.index += 1

    def _rows(self, out: TraceChunk, k: int, thread: int) -> TraceChunk:
        """The first k decoded rows (views), zeros (read-only) for the columns not wanted."""
        cols = {c: getattr(out, c)[:k] if c in self.wanted else np.broadcast_to(np.zeros(1, dt), (k,))
                for c, dt in CHUNK_DTYPES.items()}
        if "thread" in self.wanted:
            cols["thread"][:] = thread
        return TraceChunk(**cols)

    def _decompress(self, hdr: ChunkHeader, payload: bytes) -> bytes:
        try:
            raw = self.dctx.decompress(payload, max_output_size=hdr.raw_len)
        except zstandard.ZstdError as exc:
            raise InputError(f"{self.path}: chunk {self.index} at byte {hdr.offset} does not decompress "
                             f"({exc}); re-record the trace") from exc
        if len(raw) != hdr.raw_len:
            raise InputError(f"{self.path}: chunk {self.index} at byte {hdr.offset}: decompressed size "
                             f"{len(raw)} != {hdr.raw_len}; re-record the trace")
        return raw


def open_trace(path: Path) -> TraceReader:
    """Open a trace file; truncation or a foreign file is an InputError naming the file."""
    return TraceReader(Path(path))


def mark_incomplete(path: Path, reason: str, exit_status: int | None) -> str:
    """Cut a trace after its last intact chunk and give it a footer with `complete: false`.

    Returns the reason written into the footer. When the runtime wrote its own footer (the
    program exited non-zero, called `_exit`, or died of a signal the runtime catches) its counts,
    loops and note are kept; otherwise (SIGKILL, a failed flush) counts and loops are rebuilt by
    decoding the intact chunks and there are no edge counts. Either way `n_accesses` is the
    number of accesses the intact chunks decode to.
    """
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as f:
        header, start = read_header(f, path)
        try:
            old, data_stop = read_footer(f, path, size)
        except InputError:
            old, data_stop = None, size
        intact = _decode_intact(f, path, header, start, data_stop)
    loops = [list(l[1:]) for l in sorted(intact.decoder.loops)]
    if old is not None and intact.stop == data_stop:
        note = old.get("reason")
        full = f"{reason}; {note}" if note else reason
        footer = {"loops": loops,  # unless the runtime could list them
                  **old, "complete": False, "reason": full, "exit_status": exit_status, "n_accesses": intact.n_rows}
    else:
        why = "SIGKILL cannot be caught, so " if exit_status == -signal.SIGKILL else ""
        if old is None:
            full = (f"{reason}; {why}the runtime wrote no footer: events after the last flushed chunk (up to two "
                    f"buffers per thread) and the edge counts are lost")
        else:
            full = (f"{reason}; the chunk at byte {intact.stop} is damaged: it, every later chunk and the edge "
                    f"counts are lost")
        footer = {"complete": False, "reason": full, "exit_status": exit_status, "n_chunks": intact.n_chunks,
                  "n_accesses": intact.n_rows, "n_threads": max(len(intact.threads), 1),
                  "block_counts": [int(c) for c in intact.decoder.counts[:_n_real(header)]],
                  "edge_counts": [], "loops": loops}
    _rewrite_footer(path, intact.stop, footer)
    return full


@dataclass
class _Intact:
    """What the verified prefix of a damaged or unfinished trace decodes to."""

    decoder: ChunkDecoder
    stop: int = 0            # byte after the last intact chunk
    n_rows: int = 0
    n_chunks: int = 0
    threads: set = field(default_factory=set)


def _decode_intact(f, path: Path, header: dict, start: int, stop: int) -> _Intact:
    """Decode chunks from `start` until `stop` or the first one that does not verify."""
    out = _Intact(ChunkDecoder(_tables(header, path), path), start)
    try:
        for hdr, payload in iter_chunk_headers(f, path, start, stop):
            out.n_rows += sum(len(c) for c in out.decoder.decode(hdr, payload))
            out.stop = hdr.offset + CHUNK_HEADER.size + hdr.comp_len
            out.n_chunks += 1
            out.threads.add(hdr.thread)
    except InputError:
        pass  # everything after the last intact chunk is dropped
    return out


def _rewrite_footer(path: Path, stop: int, footer: dict) -> None:
    """Replace everything from byte `stop` with `footer` and the trailer."""
    body = json.dumps(footer).encode()
    with open(path, "r+b") as f:
        f.truncate(stop)
        f.seek(stop)
        f.write(struct.pack("<4sI", FOOTER_MAGIC, len(body)) + body + TRAILER.pack(stop, END_MAGIC))
        f.flush()
        os.fsync(f.fileno())


def _n_real(header: dict) -> int:
    """Number of block ids the runtime counts (all ids; pseudo-blocks stay 0 there)."""
    return max([b["id"] for b in header["blocks"]], default=-1) + 1
