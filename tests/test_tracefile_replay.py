"""The sampling decode's replay of periodic stretches (instrument.decode_replay.DecodeReplay): a copy of the events
that repeats the recorded one is not decoded, and the rows, runs, loops, block counts and decoder state are
those of decoding every event (the sampling decode without replay, itself tested against the plain decode in
tests/test_sampled_decode.py)."""
from __future__ import annotations

import numpy as np
import pytest

from instrument.chunk_decoder import ChunkDecoder
from instrument.decode_base import DecodeTables
from instrument.decode_replay import DecodeReplay, R_ON, R_RECORDED, R_REF_SIZED
from instrument.decode_sink import SampleSink, WORD_LINE, WORD_STACK, WORD_STORE
from instrument.tracefile import TraceReader
from test_sampled_decode import STACK_HI, chunks_of, encode_event, make_tables, zig

SITES = {0: [0, 1, 2], 1: [3, 4]}


class _Predictors:
    """The runtime's per-site predictors: a miss carries address - (last + stride)."""

    def __init__(self) -> None:
        self.last, self.stride = [0] * 5, [0] * 5

    def miss(self, site: int, address: int) -> bytes:
        """The miss event of `site` at `address` (the predictor moves on)."""
        ev = encode_event(0, site, zig(address - self.last[site] - self.stride[site]))
        self.stride[site], self.last[site] = address - self.last[site], address
        return ev


def _sized_tables() -> DecodeTables:
    """make_tables() and block 2: site 5, explicit (a memcpy's: one sized event per access)."""
    return DecodeTables(np.array([0, 0, 0, 1, 1, 2], np.int32), np.full(6, 8, np.uint32),
                      np.array([False, True, False, False, True, False]), np.arange(6) == 5,
                      np.array([0, 3, 5, 6], np.int64), np.arange(6, dtype=np.int64), np.full(3, -1, np.int64), 3)


def _iteration(rng, pred: _Predictors, sized: bool = False) -> list:
    """One loop iteration: a block whose sites miss twice (address, then stride), then many entries of it;
    sized: block 2's sized accesses (("sized", address): encoded per chunk by _split) around it, the last at
    address 0, so that copies start with the encoder's last address 0, as a chunk does."""
    block = int(rng.integers(0, 2))
    steps = rng.choice([0, 8, 16, -8, 40, 64, 200], len(SITES[block])).tolist()
    bases = [int(rng.choice([STACK_HI - 64 * int(rng.integers(1, 40)), 1 << 30, 1 << 40])) for _ in SITES[block]]
    out = [encode_event(3, 3, zig(0))]
    if sized:
        out += [encode_event(1, 2), ("sized", (1 << 35) + 64 * int(rng.integers(0, 64)))]
    for again in (0, 1):
        out.append(encode_event(1, block))
        out += [pred.miss(s, b + again * st) for s, b, st in zip(SITES[block], bases, steps)]
    entries = int(rng.integers(1, 200))
    out += [encode_event(1, block)] * entries
    for s in SITES[block]:  # every entry but the last moved the predictors on; the sync runs the last one's sites
        pred.last[s] += pred.stride[s] * entries
    out.append(encode_event(3, 5, len(SITES[block])))
    if sized:
        out += [encode_event(1, 2), ("sized", 0)]
    return out


def steps_events(steps: int, differ: tuple[int, ...] = (), trips: tuple[int, ...] = (5,),
                 sized: bool = False) -> list:
    """A region, a prelude, then time steps of two loops (instances 2t and 2t + 1) whose iterations draw the
    same blocks and addresses every step (step t in `differ` draws others; step t's loops have trips[t] or the
    last trip count): the same bytes from the second step on, but for the loops' instance numbers."""
    pred = _Predictors()
    rng = np.random.default_rng(99)
    out = [encode_event(3, 0, 0, 0, STACK_HI)] + _iteration(rng, pred)
    for t in range(steps):
        rng = np.random.default_rng(1000 + t if t in differ else 7)
        trip = trips[min(t, len(trips) - 1)]
        for half in (0, 1):
            out.append(encode_event(3, 2, half, 2 * t + half, zig(trip), 0, zig(0)))
            for _ in range(trip):
                out += _iteration(rng, pred, sized)
            out.append(encode_event(3, 4, half))
    return out


def _split(events: list, pieces: int) -> list[bytes]:
    """The events as `pieces` chunk payloads, cut at events (a sized access's address relative to the previous
    one in its chunk, as the runtime encodes it)."""
    cuts = np.linspace(0, len(events), pieces + 1).astype(int)
    out = []
    for a, b in zip(cuts[:-1], cuts[1:]):
        last, parts = 0, []
        for e in events[a:b]:
            if isinstance(e, tuple):
                parts.append(encode_event(2, 5, zig(e[1] - last), 8))
                last = e[1]
            else:
                parts.append(e)
        out.append(b"".join(parts))
    return out


def _decode(payloads: list[bytes], max_rows: int, period: int, min_rows: int, carry: bool = True,
            tables: DecodeTables | None = None, salt: int = 0x5EED, threshold: int = 1 << 30):
    """(batches as copies, decoder, replay) of the sampling decode of the payloads (carry: each chunk but the
    last is followed by the next, as TraceReader.sampled_batches says for one thread's chunks)."""
    chunks = chunks_of(payloads)
    tables = tables or make_tables()
    decoder = ChunkDecoder(tables, "mem.trace", ())
    sink = SampleSink(max_rows, 6, salt, threshold)
    replay = DecodeReplay(period, min_rows, max_rows, len(tables.site_block), tables.n_blocks) if period else None
    batches = [(np.tile(b.words, max(b.copies, 1)), b.sel.copy(), b.starts.copy(), b.loop.copy(), b.iteration.copy(),
                b.addr_max) for i, (h, p) in enumerate(chunks)
               for b in decoder.sampled(h, p, sink, replay, carry and i + 1 < len(chunks))]
    return batches, decoder, replay


def _joined(batches: list) -> tuple:
    """Words, kept rows and runs of all the batches as one stream (runs a batch boundary split joined)."""
    words, sel, runs, n = [], [], [], 0
    for w, s, starts, lp, it, _ in batches:
        assert starts[0] == 0 and starts[-1] == len(w) and (np.diff(starts) > 0).all()
        assert ((lp[1:] != lp[:-1]) | (it[1:] != it[:-1])).all()  # cut exactly where the keys change
        words.append(w)
        sel.append(s + n)
        for a, x, y in zip(starts[:-1].tolist(), lp.tolist(), it.tolist()):
            if not runs or runs[-1][1:] != (x, y):
                runs.append((a + n, x, y))
        n += len(w)
    return np.concatenate(words), np.concatenate(sel), runs


def _same_decode(events: list, pieces: int, max_rows: int, min_rows: int, carry: bool = True,
                 tables: DecodeTables | None = None) -> DecodeReplay:
    """Replay on (period 2) and off decode the same rows, runs, loops, counts and end state; returns the replay."""
    payloads = _split(events, pieces)
    want, plain, _ = _decode(payloads, max_rows, 0, min_rows, tables=tables)
    got, fast, replay = _decode(payloads, max_rows, 2, min_rows, carry, tables)
    w, g = _joined(want), _joined(got)
    assert np.array_equal(w[0], g[0]) and np.array_equal(w[1], g[1]) and w[2] == g[2]
    assert max(b[5] for b in want) == max(b[5] for b in got)
    assert fast.loops == plain.loops
    assert np.array_equal(fast.counts, plain.counts) and np.array_equal(fast.last_inst, plain.last_inst)
    a, b = plain.threads[0], fast.threads[0]
    assert np.array_equal(a.pred_last, b.pred_last) and np.array_equal(a.pred_stride, b.pred_stride)
    assert np.array_equal(a.st, b.st)
    return replay


@pytest.mark.parametrize("pieces", [1, 3, 7])
@pytest.mark.parametrize("max_rows", [7, 500, 1 << 16])
@pytest.mark.parametrize("min_rows", [1, 3000, 20000])
def test_replayed_decode_equals_the_full_decode(pieces, max_rows, min_rows):
    """Equal time steps: the same stream with replay as without, whatever the chunks, batch size and copy size;
    copies are skipped when a chunk holds several and a copy fits in a batch."""
    events = steps_events(40)
    replay = _same_decode(events, pieces, max_rows, min_rows)
    if max_rows == 1 << 16 and (pieces == 1 or min_rows < 20000):  # steps of 2700 rows: copies of 1, 2 or 8
        assert replay.skipped == {1: 37, 3000: 17, 20000: 2}[min_rows]  # (a copy goes on in the next chunk)
    if max_rows == 7:
        assert replay.skipped == 0  # no copy fits in 7 rows: none recorded


@pytest.mark.parametrize("pieces", [1, 5])
def test_instances_whose_varints_grow_are_replayed(pieces):
    """Loop instances 128 and on take a byte more: the copies that hold them are still repeats of the recorded
    copy (its instances' varints are matched whatever their length), the same stream."""
    replay = _same_decode(steps_events(70), pieces, 1 << 16, 1)
    assert replay.skipped == 67 and replay.ri[R_RECORDED] == 1


@pytest.mark.parametrize("pieces", [3, 7])
def test_copies_across_chunks_are_skipped_only_with_carry(pieces):
    """Without carry a copy that spans two chunks is decoded; with it, the same copies are skipped as in one
    chunk, and the rows are the same either way."""
    events = steps_events(40)
    without = _same_decode(events, pieces, 1 << 16, 3000, carry=False).skipped
    assert without < _same_decode(events, pieces, 1 << 16, 3000).skipped == 17


@pytest.mark.parametrize("pieces", [1, 3, 7])
@pytest.mark.parametrize("min_rows", [1, 3000])
def test_sized_events_are_replayed_within_chunks_only(pieces, min_rows):
    """Sized accesses are encoded relative to the previous one in their chunk: a copy with them is skipped
    within a chunk, never carried into the next (where the encoder starts again from 0); the same stream."""
    replay = _same_decode(steps_events(40, sized=True), pieces, 1 << 16, min_rows, tables=_sized_tables())
    assert replay.skipped > 0 and replay.ri[R_REF_SIZED] == 1


@pytest.mark.parametrize("differ", [(5,), (3, 20, 21), tuple(range(0, 40, 2))])
def test_steps_that_differ_are_decoded(differ):
    """Steps whose bytes differ break the repeats: they are decoded, and the replay resumes after them."""
    replay = _same_decode(steps_events(40, differ), 1, 1 << 16, 1)
    assert replay.skipped > 0 or len(differ) > 10


def test_trips_that_change_are_not_replayed_across():
    """Loops whose trip count changes halfway give other bytes: the same stream; the replay resumes on the new
    steps."""
    replay = _same_decode(steps_events(40, trips=(5,) * 20 + (6,)), 1, 1 << 16, 1)
    assert 30 <= replay.skipped <= 36


def test_replay_off_is_the_plain_sampling_decode():
    """period 0: DecodeReplay is off, nothing skipped."""
    replay = DecodeReplay(0, 1, 64, 5, 2)
    assert replay.ri[R_ON] == 0 and replay.skipped == 0


class _Reader:
    """A trace reader over in-memory chunks (TraceReader.sampled_batches reads tables, path and disk_chunks)."""

    sampled_batches = TraceReader.sampled_batches

    def __init__(self, payloads: list[bytes]) -> None:
        self.tables, self.path, self.payloads = make_tables(), "mem.trace", payloads

    def disk_chunks(self):
        return iter(chunks_of(self.payloads))


def _trace_info(payloads: list[bytes]):
    """The TraceInfo of the payloads (loops and block counts as the plain decode finds them)."""
    from instrument.trace_types import BlockInfo, LoopInstance, TraceInfo

    decoder = ChunkDecoder(make_tables(), "mem.trace")
    n = sum(len(c) for h, p in chunks_of(payloads) for c in decoder.decode(h, p))
    blocks = {b: BlockInfo(b, "OUT__1", f"b{b}", False) for b in range(2)}
    loops = [LoopInstance(*row) for row in sorted(decoder.loops)]
    return TraceInfo("mem.trace", 1, "prog", [], True, n, blocks, dict(enumerate(decoder.counts.tolist())),
                     loops=loops)


@pytest.mark.parametrize("rate,rows", [(1.0, 1 << 15), (0.3, 1 << 15), (0.3, 6000)])
def test_sampler_takes_repeats_as_decoded_rows(monkeypatch, rate, rows):
    """sampled_profile_set on batches of repeats (the sampler's columns of one copy laid out, its lines tallied
    with a weight) gives the profiles and metadata of the same rows decoded in full."""
    from analysis.sampling import source as SS
    from analysis.sampling.shards import replay as source_replay

    monkeypatch.setattr(source_replay, "MIN_COPY_ROWS", 3000)
    payloads = _split(steps_events(40), 3)
    info, reader = _trace_info(payloads), _Reader(payloads)
    seen = []

    def replayed(*args, **kwargs):
        for b in reader.sampled_batches(*args, **kwargs):
            seen.append(b.copies)
            yield b

    def full(*args, **kwargs):
        return reader.sampled_batches(*args)

    sampling = SS.SourceSampling(rate, 3, window=64, length=32)
    out = {}
    for name, fn in (("replayed", replayed), ("full", full)):
        monkeypatch.setattr(SS, "source_trace", lambda path, fn=fn: (info, None, fn))
        out[name] = SS.sampled_profile_set("mem.trace", [1, 2, 3, 4], sampling, max_rows=rows)
    (a, meta_a), (b, meta_b) = out["replayed"], out["full"]
    assert sum(seen) >= 10 and meta_a == meta_b
    assert sorted(a.prd) == sorted(b.prd) and sorted(a.crd) == sorted(b.crd)
    fields = ("lower", "upper", "count", "dist_sum")
    for x, y in [(a.prd[k], b.prd[k]) for k in b.prd] + [(a.crd[k], b.crd[k]) for k in b.crd]:
        assert all(np.array_equal(getattr(x, f), getattr(y, f)) for f in fields)
        assert (x.cold, x.total, x.coherence) == (y.cold, y.total, y.coherence)


def _copies(batches: list, min_rows: int) -> tuple[list, object]:
    """The copies (source_replay.CopyBuffer, period 2) of the decoded batches' SHARDS parts, and the buffer."""
    from types import SimpleNamespace

    from analysis.sampling.shards.replay import CopyBuffer

    buf, out = CopyBuffer(2, min_rows), []
    for words, sel, starts, lp, it, _, copies, recording in batches:
        w = words[sel]
        rows = SimpleNamespace(sel=sel, lines=w & WORD_LINE, offset=(w & WORD_STACK) > 0,
                               store=(w & WORD_STORE) > 0, starts=starts, key0=lp, key1=it, copies=copies,
                               recording=recording)
        out += buf.add(rows)
    return out + buf.finish(), buf


@pytest.mark.parametrize("min_rows", [1, 3000])
def test_copy_buffer_takes_repeats_as_the_decoded_rows(min_rows):
    """The sampler's copies of batches of repeats (made from one template per recording) hold the same rows and
    repeat flags as those of the same rows decoded in full."""
    payloads = _split(steps_events(40), 3)

    def batches(period):
        decoder, sink = ChunkDecoder(make_tables(), "mem.trace", ()), SampleSink(1 << 14, 6, 7, 1 << 30)
        replay = DecodeReplay(period, min_rows, 1 << 16, 5, 2) if period else None
        return [(np.tile(b.words, max(b.copies, 1)), b.sel.copy(), b.starts.copy(), b.loop.copy(), b.iteration.copy(),
                 b.addr_max,
                 b.copies, b.recording) for i, (h, p) in enumerate(chunks_of(payloads))
                for b in decoder.sampled(h, p, sink, replay, i < 2)]

    (want, _), (got, buf) = _copies(batches(0), min_rows), _copies(batches(2), min_rows)
    assert buf.template is not None and len(got) == len(want) > 10
    fields = ("sel", "lines", "offset", "store", "starts", "key0", "key1", "inst0", "inst1")
    for (a, same_a), (b, same_b) in zip(got, want):
        assert same_a == same_b
        assert all(np.array_equal(getattr(a, f), getattr(b, f)) for f in fields)
    assert sum(same for _, same in got) >= {1: 30, 3000: 15}[min_rows]  # copies of 1 or 2 steps
