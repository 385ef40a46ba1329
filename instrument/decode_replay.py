"""Replay of periodic stretches in the sampling decode (DecodeReplay): copies of the events that repeat the
recorded one are not decoded; the kernel applies the recorded copy's end state and its rows come as a batch.

replay_at_loop is the kernel's entry at every loop begin; rep_return stores the recording when the kernel
returns. The replay's counters are one int64 vector (ReplayArrays.ri, indexed by the R_* constants).
"""
from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from instrument.decode_base import MAX_DEPTH, DecodeState, LoopEvent, Tally, Where
from instrument.decode_sink import SampledBatch, SinkArrays

# DecodeReplay.ri: the replay's counters (per-row entries: one per byte buffer row 0-2)
(R_ON, R_N, R_MIN, R_G, R_CUR, R_G0, R_B0, R_NL, R_PREV, R_REF, R_CUR_ROW, R_PREV_ROW, R_REF_ROW, R_REC_K0,
 R_REC_NS0, R_REC_NR0, R_REC_N, R_REC_NS, R_REC_NR, R_REF_N, R_REF_NS, R_REF_NR, R_DELTA, R_SKIPS, R_LP1, R_IT1,
 R_D, R_REG, R_TOP, R_LP, R_IT) = range(31)
R_NB, R_NLR, R_ROWS = 31, 34, 37  # + row: a copy's bytes, loop begins, rows
R_SPAN, R_NCOP, R_TILED = 40, 41, 42  # the recorded copy's loop instances; copies last skipped; copies laid out
R_SIZED, R_REF_SIZED, R_CARRY = 43, 44, 45  # sized events in the recording, in the recorded copy; next chunk goes on
R_RECORDED = 46  # copies recorded so far (the recorded copy's number is this minus 1)
R_SIZE = 48


class ReplayArrays(NamedTuple):
    """A DecodeReplay's arrays, as the kernels take them (DecodeReplay.arrays())."""

    ri: np.ndarray          # int64 counters (R_*)
    copy_bytes: np.ndarray  # uint8 (3, n): the bytes of the current, previous and recorded copy
    copy_loops: np.ndarray  # int64 (3, LOOPS, 8): their loop begins (varint first, end, instance; the 5 fields)
    start: np.ndarray       # int64 (3, width): their start states (_rep_snap)
    end: np.ndarray         # int64 width: the recorded copy's end state
    now: np.ndarray         # int64 width: the state at this loop begin
    counts0: np.ndarray     # int64 per block: block counts when the recording began ...
    delta: np.ndarray       # ... and what the recorded copy added
    words: np.ndarray       # uint64: the recorded copy's words ...
    sel: np.ndarray         # int64: ... kept rows (laid out per copy) ...
    runs: np.ndarray        # int64 (n, 3): ... and runs (laid out per copy)
    high: np.ndarray        # uint64 [highest address of the recording, of the recorded copy]


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

    def arrays(self) -> ReplayArrays:
        """The kernel's replay bundle."""
        return ReplayArrays(self.ri, self.bytes, self.loops, self.start, self.end, self.now, self.counts0,
                            self.delta, self.words, self.sel, self.runs, self.high)

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


def no_replay() -> ReplayArrays:
    """The replay argument of a decode without replay (the kernel reads only its switch, off)."""
    return DecodeReplay(0, 1, 1, 1, 1).arrays()


@numba.njit(cache=True)
def _rep_snap(v: np.ndarray, state: DecodeState, w: Where) -> None:
    """The decoder state a copy's rows depend on, as one vector (frames above the depth, never read before they
    are set again, as zeros; the loop keys aside: a copy starts with a loop begin, which sets them)."""
    fb, fc, d = state.fb, state.fc, w.d
    n, m = state.pred_last.shape[0], fb.shape[0]
    v[0:n] = state.pred_last
    v[n:2 * n] = state.pred_stride
    v[2 * n:3 * n] = state.enc_last
    j = 3 * n
    v[j:j + 2 * m] = 0
    v[j:j + d + 1] = fb[:d + 1]
    v[j + m:j + m + d + 1] = fc[:d + 1]
    j += 2 * m
    v[j], v[j + 1], v[j + 2], v[j + 3], v[j + 4] = d, w.reg, w.top, w.stack_lo, w.stack_hi


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
def _rep_flush(rep: ReplayArrays, sink: SinkArrays, t: Tally) -> None:
    """The current batch's rows of the copy being recorded (from row ri[R_REC_K0] to k) appended to the
    recording: words, kept rows, runs (a run the batch boundary split joined again). Too many rows: the copy
    is not recorded."""
    ri, rw, rsel, rruns, rh = rep.ri, rep.words, rep.sel, rep.runs, rep.high
    if ri[R_CUR] != 1:
        return
    k, ns, nr = t.k, t.ns, t.nr
    k0, base = ri[R_REC_K0], ri[R_REC_N]
    n = k - k0
    if base + n > rw.shape[0]:
        ri[R_CUR] = 0
        return
    words, sel, runs = sink.words, sink.sel, sink.runs
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
    rh[0] = max(rh[0], t.both)


@numba.njit(cache=True)
def rep_return(rep: ReplayArrays, sink: SinkArrays, t: Tally, chunk_end: bool) -> None:
    """Before the kernel returns t.k rows: the recording takes them; at a chunk's end the current copy is
    dropped (a copy is only recorded or matched within one chunk's bytes)."""
    ri = rep.ri
    if not ri[R_ON]:
        return
    _rep_flush(rep, sink, t)
    if chunk_end and ri[R_CUR] >= 0:
        ri[R_CUR] = -1
    ri[R_G] += t.k


@numba.njit(cache=True)
def _rep_close(rep: ReplayArrays, sink: SinkArrays, buf: np.ndarray, t: Tally, e: LoopEvent,
               counts: np.ndarray) -> None:
    """The current copy ends at byte e.ev (row t.k): it becomes the previous copy, and the recorded one when it
    was being recorded (its end state is rep.now, taken by the caller)."""
    ri, rb, rs1, now, rcnt0, rdelta, rh = rep.ri, rep.copy_bytes, rep.end, rep.now, rep.counts0, rep.delta, rep.high
    ev, k = e.ev, t.k
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
        _rep_flush(rep, sink, t)
        if ri[R_CUR] == 1:
            rs1[:] = now
            rdelta[:] = counts - rcnt0
            ri[R_LP1], ri[R_IT1] = e.lp0, e.it0
            ri[R_REF_N], ri[R_REF_NS], ri[R_REF_NR] = ri[R_REC_N], ri[R_REC_NS], ri[R_REC_NR]
            rh[1] = rh[0]
            ri[R_REF], ri[R_REF_ROW], ri[R_TILED], ri[R_REF_SIZED] = 1, row, 1, ri[R_SIZED]
            ri[R_RECORDED] += 1
            ri[R_SPAN] = e.inst - rep.copy_loops[row, 0, 2]
        ri[R_CUR] = -1


@numba.njit(cache=True)
def _rep_start(rep: ReplayArrays, buf: np.ndarray, ev: int, t: Tally, counts: np.ndarray, runs: np.ndarray) -> None:
    """A copy begins at byte ev (row k): its start state and bytes are kept; it is recorded (its rows kept for
    the copies that repeat it) when it starts as the previous copy did and holds the same bytes."""
    ri, rb, rl, rs0, now, rcnt0, rh = rep.ri, rep.copy_bytes, rep.copy_loops, rep.start, rep.now, rep.counts0, rep.high
    k, ns, nr = t.k, t.ns, t.nr
    row = 0
    while (ri[R_PREV] and row == ri[R_PREV_ROW]) or (ri[R_REF] and row == ri[R_REF_ROW]):
        row += 1
    ri[R_CUR], ri[R_CUR_ROW], ri[R_B0], ri[R_G0], ri[R_NL] = 0, row, ev, ri[R_G] + k, 0
    rs0[row, :] = now
    prev = ri[R_PREV_ROW]
    if ri[R_PREV] and ri[R_ROWS + prev] <= rep.words.shape[0] and runs[nr - 1, 0] == k and \
            _rep_same(now, rs0[prev]) and \
            _rep_match(buf, ev, rb[prev], ri[R_NB + prev], rl[prev], ri[R_NLR + prev])[1] >= 0:
        ri[R_CUR], ri[R_REF], ri[R_SIZED] = 1, 0, 0
        ri[R_REC_N], ri[R_REC_NS], ri[R_REC_NR] = 0, 0, 0
        ri[R_REC_K0], ri[R_REC_NS0], ri[R_REC_NR0] = k, ns, nr - 1
        rcnt0[:] = counts
        rh[0] = 0


@numba.njit(cache=True)
def _rep_loop(rep: ReplayArrays, sink: SinkArrays, buf: np.ndarray, state: DecodeState, w: Where, t: Tally,
              e: LoopEvent) -> int:
    """A loop begin at byte e.ev (its instance's varint at bytes e.i0..e.i1, its loops_out row e.n_loops - 1),
    after the kernel applied it. At an instance that is a multiple of the period, once the current copy has min
    rows: the copy ends, and the next ones either repeat the recorded copy (returns their byte length: the
    caller skips them; as many as the recording's rows hold, ri[R_NCOP]) or one begins. Returns -1 when the
    chunk ends inside what may be a repeat and the next chunk goes on (ri[R_CARRY]): the caller decodes this
    chunk's bytes from e.ev again in front of the next one's (so a copy that spans two chunks can be skipped
    too). Only when the recorded copy has no sized events: the bytes carried, a prefix of it, have none
    either, so they decode alike before the next chunk's bytes, where enc_last starts again from zeros; and
    only when enc_last is zeros here, else the copy could not start as the recorded one did there. Returns 0
    otherwise."""
    ri, rs0 = rep.ri, rep.start
    if e.inst % ri[R_N] == 0 and (ri[R_CUR] == -2 or ri[R_G] + t.k - ri[R_G0] >= ri[R_MIN]):
        _rep_snap(rep.now, state, w)
        _rep_close(rep, sink, buf, t, e, state.counts)
        ref = ri[R_REF_ROW]
        if ri[R_REF] and e.n_loops - 1 + ri[R_NLR + ref] <= state.loops_out.shape[0] and _rep_same(rep.now, rs0[ref]):
            skip = _rep_repeats(rep, buf, state, e)
            if skip != 0:
                return skip
        _rep_start(rep, buf, e.ev, t, state.counts, sink.runs)
    if ri[R_CUR] >= 0:
        _rep_note_loop(rep, state.loops_out, e)
    return 0


@numba.njit(cache=True)
def _rep_repeats(rep: ReplayArrays, buf: np.ndarray, state: DecodeState, e: LoopEvent) -> int:
    """Whether the bytes from e.ev repeat the recorded copy (the state is its start state): the byte length of
    the repeats (ri[R_DELTA], ri[R_NCOP] set), -1 when the next chunk may go on with them, 0 when not."""
    ri, rb, rl = rep.ri, rep.copy_bytes, rep.copy_loops
    ref = ri[R_REF_ROW]
    nb, nl = ri[R_NB + ref], ri[R_NLR + ref]
    ev, n_loops, n_sites = e.ev, e.n_loops, state.pred_last.shape[0]
    delta, size = _rep_match(buf, ev, rb[ref], nb, rl[ref], nl)
    carry = ri[R_CARRY] and not ri[R_REF_SIZED] and not rep.now[2 * n_sites:3 * n_sites].any()
    if delta >= 0 and size < 0:
        if carry:
            return -1
        delta = -1
    if delta < 0:
        return 0
    # the copies right after it repeat it too when it ends in the state it starts in
    most = rep.sel.shape[0] // max(ri[R_REF_N], 1)
    n, q = 1, ev + size
    if most > 1 and _rep_same(rep.end, rep.start[ref]):
        while n < most and n_loops - 1 + (n + 1) * nl <= state.loops_out.shape[0]:
            shift, size = _rep_match(buf, q, rb[ref], nb, rl[ref], nl)
            if shift != delta + n * ri[R_SPAN] or size < 0:
                if shift == delta + n * ri[R_SPAN] and carry:
                    return -1  # the chunk ends in a repeat: all of them in one batch with the next chunk
                break
            n, q = n + 1, q + size
    ri[R_DELTA], ri[R_NCOP] = delta, n
    return q - ev


@numba.njit(cache=True)
def _rep_note_loop(rep: ReplayArrays, loops_out: np.ndarray, e: LoopEvent) -> None:
    """The current copy's loop begins: where its instance varint lies in the copy's bytes, and its fields."""
    ri, rl = rep.ri, rep.copy_loops
    m, row = ri[R_NL], ri[R_CUR_ROW]
    if m >= rl.shape[1]:
        ri[R_CUR] = -1
        return
    b0 = ri[R_B0]
    rl[row, m, 0], rl[row, m, 1], rl[row, m, 2] = e.i0 - b0, e.i1 - b0, e.inst
    rl[row, m, 3:8] = loops_out[e.n_loops - 1]
    ri[R_NL] = m + 1


@numba.njit(cache=True)
def _rep_tile(rep: ReplayArrays, copies: int) -> None:
    """The recorded copy's kept rows and runs laid out `copies` times one after the other (rows shifted; the loop
    instances are shifted by DecodeReplay.batch; the words are not: a batch of repeats gives one copy's)."""
    ri, rsel, rruns = rep.ri, rep.sel, rep.runs
    n, ns, nr = ri[R_REF_N], ri[R_REF_NS], ri[R_REF_NR]
    for t in range(ri[R_TILED], copies):
        rsel[t * ns:(t + 1) * ns] = rsel[:ns] + t * n
        rruns[t * nr:(t + 1) * nr] = rruns[:nr]
        rruns[t * nr:(t + 1) * nr, 0] += t * n
    ri[R_TILED] = max(ri[R_TILED], copies)


@numba.njit(cache=True)
def _rep_skip(rep: ReplayArrays, state: DecodeState, n_loops: int) -> int:
    """Apply ri[R_NCOP] repeats of the recorded copy without decoding them: their loop begins (instances shifted;
    the first one's the kernel applied), their block counts, their end state (returned in ri[R_D..R_IT]), and
    the recording laid out that many times. Returns the loop begins now in loops_out."""
    ri, rl, rs1, rdelta = rep.ri, rep.copy_loops, rep.end, rep.delta
    loops_out, counts, fb, fc = state.loops_out, state.counts, state.fb, state.fc
    ref, delta, copies, span = ri[R_REF_ROW], ri[R_DELTA], ri[R_NCOP], ri[R_SPAN]
    for j in range(copies):
        for m in range(1 if j == 0 else 0, ri[R_NLR + ref]):
            loops_out[n_loops, :] = rl[ref, m, 3:8]
            loops_out[n_loops, 0] += delta + j * span
            n_loops += 1
    _rep_tile(rep, copies)
    n, w = state.pred_last.shape[0], fb.shape[0]
    state.pred_last[:] = rs1[0:n]
    state.pred_stride[:] = rs1[n:2 * n]
    state.enc_last[:] = rs1[2 * n:3 * n]
    j = 3 * n + 2 * w
    d = rs1[j]
    fb[:d + 1] = rs1[3 * n:3 * n + d + 1]
    fc[:d + 1] = rs1[3 * n + w:3 * n + w + d + 1]
    for b in range(counts.shape[0]):
        if rdelta[b] > 0:
            counts[b] += copies * rdelta[b]
            state.last_inst[b] = counts[b] - 1
    lp = ri[R_LP1]
    lp = lp + delta + (copies - 1) * span if lp >= 0 else lp
    ri[R_D], ri[R_REG], ri[R_TOP], ri[R_LP], ri[R_IT] = d, rs1[j + 1], rs1[j + 2], lp, ri[R_IT1]
    ri[R_G] += copies * ri[R_REF_N]
    ri[R_CUR] = -2
    ri[R_SKIPS] += copies
    return n_loops


@numba.njit(cache=True)
def replay_at_loop(rep: ReplayArrays, sink: SinkArrays, buf: np.ndarray, state: DecodeState, w: Where, t: Tally,
                   e: LoopEvent) -> tuple:
    """Let the replay (DecodeReplay) act at the loop begin just applied: it may end the current copy and skip
    the copies that repeat the recorded one, or ask for this loop begin again in front of the next chunk.

    Returns (status, bytes skipped, loop begins, state): status 0 = go on, 2 = copies skipped (their end
    state returned), 3 = the loop begin undone, the next chunk goes on."""
    skip = _rep_loop(rep, sink, buf, state, w, t, e)
    if skip < 0:  # a repeat may go on in the next chunk: this loop begin again there
        return 3, 0, e.n_loops - 1, Where(w.d, w.reg, e.lp0, e.it0, w.top, w.stack_lo, w.stack_hi)
    if skip > 0:  # repeats of the recorded copy: their state at the end, not their rows
        n_loops = _rep_skip(rep, state, e.n_loops)
        ri = rep.ri
        return 2, skip, n_loops, Where(ri[R_D], ri[R_REG], ri[R_LP], ri[R_IT], ri[R_TOP], w.stack_lo, w.stack_hi)
    return 0, 0, e.n_loops, w
