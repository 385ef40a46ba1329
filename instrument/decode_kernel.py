"""The chunk-decoding kernel: a chunk's events (FORMAT.md) replayed into rows of accesses.

`decode` walks the events; a block entry implies the rows of its sites that the runtime predicted (it
wrote nothing for them), an explicit event carries one access. Rows go to the output columns (a plain
decode) or to a sampling sink (instrument/decode_sink.py); the sampling decode may also skip the copies of
a periodic stretch (instrument/decode_replay.py).

decode's helpers. Those with array arguments are compiled without numba's reference counting (_nrt=False: they
allocate nothing): an array argument otherwise costs an incref and a decref per call, and per call site when
inlined; with a dozen arrays per event, that made the exact decode of jacobi-2d MEDIUM 4.4 times slower (0.36 s to
1.59 s). Only scalar helpers are inlined (inline="always"): the one every event takes (_event_kind) as a call
made the sampling decode 6% slower. The block runs of the sampling decode stay in decode, and so does the
replay's switch: a helper around them cost 11%, and an unconditional call (a few hundred loop begins) 4%.
"""
from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from instrument.decode_base import DecodeState, LoopEvent, SiteTables, Tally, Where, stack_top, unzig, varint
from instrument.decode_replay import R_CUR, R_ON, R_SIZED, ReplayArrays, rep_return, replay_at_loop
from instrument.decode_sink import SinkArrays, sink_block_run, sink_cut, sink_row, sink_save


class Columns(NamedTuple):
    """The columns decode writes (TraceChunk's, but `thread`, which is set per batch); a column the caller does
    not want is a 2-D placeholder: ndim is part of an array's numba type, so its store is compiled away."""

    addr: np.ndarray
    size: np.ndarray
    is_store: np.ndarray
    block: np.ndarray
    block_instance: np.ndarray
    region: np.ndarray
    loop: np.ndarray
    iteration: np.ndarray
    is_stack: np.ndarray


class Output(NamedTuple):
    """Where decode's rows go: the columns (plain decode) or the sampling sink (placeholders otherwise)."""

    cols: Columns
    sink: SinkArrays


@numba.njit(cache=True, _nrt=False)
def _emit(out: Output, tabs: SiteTables, last_inst: np.ndarray, w: Where, t: Tally, s: int, a: int,
          sz: int) -> Tally:
    """Write output row t.k: an access of site s at address a, of sz bytes, in the current state.

    Only the wanted columns are written (writing all nine is about half of the decoding time). With a sampling
    sink (1-D words, ChunkDecoder.sampled) the row goes there instead. Returns the tally after the row."""
    cols, sink, k = out.cols, out.sink, t.k
    blk = tabs.site_block[s]
    if cols.addr.ndim == 1:
        cols.addr[k] = np.uint64(a)
    if cols.size.ndim == 1:
        cols.size[k] = sz
    if cols.is_store.ndim == 1:
        cols.is_store[k] = tabs.site_store[s]
    if cols.block.ndim == 1:
        cols.block[k] = blk
    if cols.block_instance.ndim == 1:
        cols.block_instance[k] = last_inst[blk]
    if cols.region.ndim == 1:
        cols.region[k] = w.reg
    if cols.loop.ndim == 1:
        cols.loop[k] = w.lp
    if cols.iteration.ndim == 1:
        cols.iteration[k] = w.it
    ns, both = t.ns, t.both
    if cols.is_stack.ndim == 1 or sink.words.ndim == 1:
        stack = a >= w.stack_lo and a < stack_top(w)
        if cols.is_stack.ndim == 1:
            cols.is_stack[k] = stack
        if sink.words.ndim == 1:
            ns, both = sink_row(sink, k, np.uint64(a), stack, tabs.site_store[s], ns, both)
    return Tally(k + 1, ns, t.nr, both)


@numba.njit(cache=True, _nrt=False)
def _emit_predicted(out: Output, tabs: SiteTables, state: DecodeState, w: Where, t: Tally, s: int) -> Tally:
    """Row t.k: site s at its predictor's address (last + stride), which becomes its last address."""
    a = state.pred_last[s] + state.pred_stride[s]
    state.pred_last[s] = a
    return _emit(out, tabs, state.last_inst, w, t, s, a, tabs.site_size[s])


@numba.njit(cache=True, _nrt=False)
def _block_repeats(buf: np.ndarray, ev: int, pos: int, tabs: SiteTables, b: int, room: int) -> int:
    """How many whole instances of block b the events from byte ev emit at once: the event [ev, pos) (an entry
    of b while b's current instance has run none of its sites) and its identical repeats right after it, as
    many as fit in `room` rows. 0 when b has explicit (sized) sites, which take one event per row."""
    o = tabs.bs_off[b]
    n = tabs.bs_off[b + 1] - o
    for x in range(o, o + n):
        if tabs.site_explicit[tabs.bs[x]]:
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
def _add_instances(b: int, r: int, state: DecodeState, virt_of: np.ndarray) -> None:
    """Count r instances of block b (and of its shared-var pseudo-block) entered at once by a block run, as r
    entries would (_enter_block), the last one current."""
    counts, last_inst = state.counts, state.last_inst
    counts[b] += r
    last_inst[b] = counts[b] - 1
    v = virt_of[b]
    if v >= 0:
        counts[v] += r
        last_inst[v] = counts[v] - 1


@numba.njit(cache=True, _nrt=False)
def _block_rest(out: Output, tabs: SiteTables, state: DecodeState, w: Where, t: Tally, stop_site: int,
                stop_k: int, cap: int) -> tuple:
    """Emit the predicted rows of the current block's sites from its cursor up to the event's stop (the block's
    end, site `stop_site`, or cursor `stop_k`): the runtime wrote nothing for them, so they are implied here.
    The frame's cursor moves on to where the rows stop.

    Returns (status, tally); status 1 = the output is full (the cursor is where to resume), -1 = the stop site
    is not among the block's remaining sites."""
    b, c, bs = state.fb[w.d], state.fc[w.d], tabs.bs
    o = tabs.bs_off[b]
    n = tabs.bs_off[b + 1] - o
    if stop_site < 0 and stop_k < 0 and t.k + n - c <= cap:
        # the common case, the rest of a finished block with room for it, in a loop without the
        # checks below (10-15% of the decoding time)
        for x in range(o + c, o + n):
            if not tabs.site_explicit[bs[x]]:
                t = _emit_predicted(out, tabs, state, w, t, bs[x])
        c = n
    status = 0
    while c < n:
        s = bs[o + c]
        if s == stop_site or (stop_k >= 0 and c >= stop_k):
            break
        if not tabs.site_explicit[s]:
            if t.k >= cap:
                status = 1
                break
            t = _emit_predicted(out, tabs, state, w, t, s)
        c += 1
    if status == 0 and stop_site >= 0 and c >= n:
        status = -1
    state.fc[w.d] = c
    return status, t


@numba.njit(cache=True, _nrt=False)
def _enter_block(val: int, d: int, state: DecodeState, virt_of: np.ndarray) -> None:
    """A block entry: the frame's block and cursor, and the instance counts of the block and of its shared-var
    pseudo-block, whose rows carry those instance numbers."""
    counts, last_inst = state.counts, state.last_inst
    state.fb[d] = val
    state.fc[d] = 0
    last_inst[val] = counts[val]
    counts[val] += 1
    v = virt_of[val]
    if v >= 0:
        last_inst[v] = counts[v]
        counts[v] += 1


@numba.njit(cache=True, _nrt=False)
def _access(buf: np.ndarray, pos: int, tag: int, s: int, site_size: np.ndarray, state: DecodeState,
            ri: np.ndarray) -> tuple:
    """The address and size of an explicit access of site s, whose event carries them relative to what the
    runtime predicted (tag 0, a miss: last + stride) or to the site's last sized access (tag 2, sized).

    Returns (address, size, next byte)."""
    dv, pos = varint(buf, pos)
    sz = site_size[s]
    pred_last, pred_stride, enc_last = state.pred_last, state.pred_stride, state.enc_last
    if tag == 0:
        a = pred_last[s] + pred_stride[s] + unzig(dv)
        pred_stride[s] = a - pred_last[s]
        pred_last[s] = a
    else:
        a = enc_last[s] + unzig(dv)
        enc_last[s] = a
        if ri[R_CUR] == 1:  # a recording with sized events cannot go on in the next chunk (see decode_replay)
            ri[R_SIZED] = 1
        nb, pos = varint(buf, pos)
        sz = np.uint32(nb)
    return a, sz, pos


@numba.njit(cache=True, _nrt=False)
def _loop_begin(buf: np.ndarray, pos: int, loops_out: np.ndarray, n_loops: int) -> tuple:
    """Read a loop begin's fields into row n_loops of loops_out (the loop instances the caller labels rows with).

    Returns (instance, the instance varint's first byte and end, next byte)."""
    lid, pos = varint(buf, pos)
    i0 = pos
    inst, pos = varint(buf, pos)
    i1 = pos
    trip, pos = varint(buf, pos)
    sched, pos = varint(buf, pos)
    chunk, pos = varint(buf, pos)
    loops_out[n_loops, 0] = np.int64(inst)
    loops_out[n_loops, 1] = np.int64(lid)
    loops_out[n_loops, 2] = unzig(trip)
    loops_out[n_loops, 3] = np.int64(sched)
    loops_out[n_loops, 4] = unzig(chunk)
    return np.int64(inst), i0, i1, pos


@numba.njit(cache=True, _nrt=False)
def _control(buf: np.ndarray, pos: int, val: int, w: Where, state: DecodeState, sink: SinkArrays,
             t: Tally) -> tuple:
    """Apply a control event other than a loop begin: region begin/end, iteration, loop end, call enter/leave
    (5, a block's sync, only stopped the block's rows). The state is passed and returned as scalars so the
    main loop keeps it in registers.

    Returns (valid, next byte, state, tally)."""
    fb, fc = state.fb, state.fc
    d, reg, lp, it, top = w.d, w.reg, w.lp, w.it, w.top
    if val == 0:
        fn, pos = varint(buf, pos)
        r, pos = varint(buf, pos)
        tp, pos = varint(buf, pos)
        reg = np.int64(r)
        top = np.int64(tp)
        fb[d] = -1
    elif val == 1:
        fn, pos = varint(buf, pos)
        fb[d] = -1
        reg = np.int64(-1)
        top = np.int64(0)
    elif val == 3 or val == 4:
        dv, pos = varint(buf, pos)  # an iteration's step, or a loop end's loop id
        lp = lp if val == 3 else np.int64(-1)
        it = it + 1 + unzig(dv) if val == 3 else np.int64(-1)
        t = sink_cut(sink, t, Where(d, reg, lp, it, top, w.stack_lo, w.stack_hi))
    elif val == 6:
        fn, pos = varint(buf, pos)
        if d + 1 >= fb.shape[0]:
            return False, pos, w, t
        d += 1
        fb[d] = -1
        fc[d] = 0
    elif val == 7:
        fn, pos = varint(buf, pos)
        if d == 0:
            return False, pos, w, t
        d -= 1
    elif val != 5:
        return False, pos, w, t
    return True, pos, Where(d, reg, lp, it, top, w.stack_lo, w.stack_hi), t


@numba.njit(cache=True)
def _store_state(state: DecodeState, sink: SinkArrays, rep: ReplayArrays, w: Where, t: Tally,
                 chunk_end: bool) -> None:
    """Store the thread's state, the sink's counters and the replay's recording before the kernel returns, so
    the next call (or chunk) goes on from there."""
    st = state.st
    st[0], st[1], st[2], st[3], st[4] = w.d, w.reg, w.lp, w.it, w.top
    sink_save(sink, t)
    rep_return(rep, sink, t, chunk_end)


@numba.njit(cache=True)
def decode(buf: np.ndarray, start: int, tabs: SiteTables, state: DecodeState, out: Output, rep: ReplayArrays,
           stack_lo: int, stack_hi: int) -> tuple:
    """Replay a chunk's events from byte `start`; returns (status, rows, loop begins, next byte).

    status 0 = chunk done, 1 = paused, the output (or loops_out) full, 2 = copies of the one `rep` recorded were
    skipped (DecodeReplay, sampling decode only; their rows follow): both call again from the returned byte, 3 = the
    bytes from the returned one on go in front of the next chunk's, -1 = invalid events. state.st = [depth, region,
    loop, iteration, region_top] and the frames fb (block) / fc (site cursor) carry the thread's state; a block
    entry implies its sites' rows (_block_rest). out.sink: the sampling sink (ChunkDecoder.sampled) or 2-D
    placeholders; out.cols are then all placeholders."""
    sink, st, fb, fc = out.sink, state.st, state.fb, state.fc
    cap = out.cols.addr.shape[0] if sink.words.ndim != 1 else sink.words.shape[0]
    w = Where(st[0], st[1], st[2], st[3], st[4], np.int64(stack_lo), np.int64(stack_hi))
    pos, n_loops, t = start, 0, Tally(np.int64(0), np.int64(0), np.int64(1), np.uint64(0))
    if sink.words.ndim == 1:  # the batch's first run
        sink.runs[0, 0], sink.runs[0, 1], sink.runs[0, 2] = 0, w.lp, w.it
    end = buf.shape[0]
    while pos < end:
        ev = pos
        h, pos = varint(buf, pos)
        tag, val, stop_site, finish, ok = _event_kind(h, tabs.site_block.shape[0], state.counts.shape[0])
        if not ok:
            return -1, t.k, n_loops, ev
        stop_k = -1
        if tag == 3 and val == 5:  # a block's sync: its rows up to a site cursor
            arg, pos = varint(buf, pos)
            stop_k = np.int64(arg)
        b = fb[w.d]
        if sink.words.ndim == 1 and tag == 1 and val == b and fc[w.d] == 0:
            # the same block entered again with none of its sites run yet: every repeat of this event that
            # follows is one more whole instance of predicted accesses, emitted site by site
            r = _block_repeats(buf, ev, pos, tabs, b, cap - t.k)
            if r > 0:
                t = sink_block_run(sink, tabs, state, w, t, b, r)
                pos = ev + r * (pos - ev)
                _add_instances(b, r, state, tabs.virt_of)
                continue
        if b >= 0 and (finish or stop_site >= 0 or stop_k >= 0):
            status, t = _block_rest(out, tabs, state, w, t, stop_site, stop_k, cap)
            if status == 1:
                _store_state(state, sink, rep, w, t, False)
            if status != 0:
                return status, t.k, n_loops, ev
        elif stop_site >= 0:
            return -1, t.k, n_loops, ev
        if tag == 1:
            _enter_block(val, w.d, state, tabs.virt_of)
        elif tag == 0 or tag == 2:
            if t.k >= cap:
                _store_state(state, sink, rep, w, t, False)
                return 1, t.k, n_loops, ev
            a, sz, pos = _access(buf, pos, tag, stop_site, tabs.site_size, state, rep.ri)
            t = _emit(out, tabs, state.last_inst, w, t, stop_site, a, sz)
            fc[w.d] += 1
        elif val == 2:
            if n_loops >= state.loops_out.shape[0]:
                _store_state(state, sink, rep, w, t, False)
                return 1, t.k, n_loops, ev
            e_lp0, e_it0 = w.lp, w.it
            lp, i0, i1, pos = _loop_begin(buf, pos, state.loops_out, n_loops)
            n_loops += 1
            w = Where(w.d, w.reg, lp, np.int64(-1), w.top, w.stack_lo, w.stack_hi)
            t = sink_cut(sink, t, w)
            if rep.ri[R_ON]:
                status, skip, n_loops, w = replay_at_loop(rep, sink, buf, state, w, t,
                                                          LoopEvent(ev, i0, i1, lp, n_loops, e_lp0, e_it0))
                if status:
                    _store_state(state, sink, rep, w, t, False)
                    return status, t.k, n_loops, ev + skip
        else:
            ok, pos, w, t = _control(buf, pos, val, w, state, sink, t)
            if not ok:
                return -1, t.k, n_loops, ev
    if pos != end:
        return -1, t.k, n_loops, pos
    _store_state(state, sink, rep, w, t, True)
    return 0, t.k, n_loops, pos
