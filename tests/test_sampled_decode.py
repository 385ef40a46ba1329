"""The trace reader's sampling decode (TraceReader.sampled_batches, ChunkDecoder.sampled) against the plain
decode of the same events: every row's word, the kept rows (the hash recomputed in numpy) and the runs of one
(loop, iteration) found from the decoded columns."""
from __future__ import annotations

import zlib

import numpy as np
import pytest
import zstandard

from instrument import tracefile as TF
from instrument.trace_types import TraceChunk

STACK_LO, STACK_HI = 1 << 20, 1 << 21


def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _zig(x: int) -> int:
    return (x << 1) ^ (x >> 63)


def _event(tag: int, val: int, *args: int) -> bytes:
    return _varint(val << 2 | tag) + b"".join(_varint(a) for a in args)


def _tables() -> TF._Tables:
    """Block 0: sites 0-2 (site 1 a store), block 1: sites 3-4 (site 4 a store), all predicted, 8 bytes."""
    return TF._Tables(np.array([0, 0, 0, 1, 1], np.int32), np.full(5, 8, np.uint32),
                      np.array([False, True, False, False, True]), np.zeros(5, bool),
                      np.array([0, 3, 5], np.int64), np.arange(5, dtype=np.int64), np.full(2, -1, np.int64), 2)


def random_payload(seed: int, n: int) -> bytes:
    """n random events of one thread: block entries, misses at the current block's later sites (stack, heap
    and far addresses), regions, loops and iterations, often several state changes without a row between."""
    rng = np.random.default_rng(seed)
    bs = {0: [0, 1, 2], 1: [3, 4]}
    out, block, cursor, inst = [], -1, 0, 0
    for _ in range(n):
        x = rng.random()
        if x < 0.45:
            block, cursor = int(rng.integers(0, 2)), 0
            out.append(_event(1, block))
        elif x < 0.6 and block >= 0 and cursor < len(bs[block]):
            i = int(rng.integers(cursor, len(bs[block])))
            cursor = i + 1
            base = int(rng.choice([STACK_LO + 4096, 1 << 30, 1 << 46]))
            out.append(_event(0, bs[block][i], _zig(base + int(rng.integers(-512, 512)) * 8 - (1 << 29))))
        elif x < 0.75:
            out.append(_event(3, 3, _zig(int(rng.choice([0, 0, 0, 2, -1])))))  # iteration (-1: the same again)
        elif x < 0.8:
            out.append(_event(3, 2, 0, inst, _zig(10), 0, _zig(0)))  # loop begin
            inst += 1
        elif x < 0.85:
            out.append(_event(3, 4, 0))  # loop end
        elif x < 0.9:
            block = -1
            out.append(_event(3, 0, 0, int(rng.integers(0, 3)), STACK_LO + 8192 * int(rng.integers(0, 2))))
        elif x < 0.93:
            block = -1
            out.append(_event(3, 1, 0))
    return b"".join(out)


def _chunks(payloads: list[bytes]) -> list[tuple[TF.ChunkHeader, bytes]]:
    """(header, compressed payload) of each payload, as one thread's consecutive chunks."""
    cctx = zstandard.ZstdCompressor()
    out = []
    for raw in payloads:
        comp = cctx.compress(raw)
        out.append((TF.ChunkHeader(0, 0, len(comp), len(raw), 0, -1, -1, -1, STACK_LO, STACK_HI, 0,
                                   zlib.crc32(comp)), comp))
    return out


def oracle(ch: TraceChunk, shift: int, salt: int, threshold: int) -> TF.SampledBatch:
    """The sampling decode's batch computed from a plain decode's columns."""
    line = ch.addr >> np.uint64(shift)
    words = line | (ch.is_stack.astype(np.uint64) << np.uint64(63)) | (ch.is_store.astype(np.uint64) << np.uint64(62))
    m32 = np.uint64(0xFFFFFFFF)
    x = (line ^ (line >> np.uint64(32)) ^ np.uint64(salt)) & m32
    sel = np.flatnonzero(((x * np.uint64(0x9E3779B1)) & m32) < np.uint64(threshold))
    lp, it = ch.loop.astype(np.int64), ch.iteration
    cut = np.flatnonzero((lp[1:] != lp[:-1]) | (it[1:] != it[:-1])) + 1
    starts = np.concatenate([[0], cut, [len(ch)]]).astype(np.int64)
    return TF.SampledBatch(words, sel, starts, lp[starts[:-1]], it[starts[:-1]],
                           int(np.bitwise_or.reduce(ch.addr)))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("max_rows", [1, 7, 300, 1 << 16])
def test_sampled_batches_equal_the_plain_decode(seed, max_rows):
    """Same batches as chunks(max_rows); each batch's words, kept rows, runs and address OR as computed from
    the plain decode's columns (pauses inside blocks, iterations repeated or empty, chunks carried over)."""
    chunks = _chunks([random_payload(seed * 10 + j, 400) for j in range(3)])
    shift, salt, threshold = 6, 0x5EED + seed, 1 << 31
    plain = TF.ChunkDecoder(_tables(), "mem.trace")
    want = [oracle(c, shift, salt, threshold) for h, p in chunks for c in plain.decode(h, p, max_rows)]
    sink = TF.SampleSink(max_rows, shift, salt, threshold)
    sampled = TF.ChunkDecoder(_tables(), "mem.trace", ())
    got = [(b.words.copy(), b.sel.copy(), b.starts.copy(), b.loop.copy(), b.iteration.copy(), b.addr_or)
           for h, p in chunks for b in sampled.sampled(h, p, sink)]
    assert len(got) == len(want) and sum(len(w) for w in want) > 500
    for g, w in zip(got, want):
        assert np.array_equal(g[0], w.words)
        assert np.array_equal(g[1], w.sel)
        assert np.array_equal(g[2], w.starts) and np.array_equal(g[3], w.loop) and np.array_equal(g[4], w.iteration)
        assert g[5] == w.addr_or
    assert sampled.loops == plain.loops
    assert np.array_equal(sampled.counts, plain.counts)


def test_sampled_decode_keeps_about_the_rate_and_refuses_bad_sizes():
    """A threshold of rate * 2^32 keeps about that share of the lines; zero keeps none, 2^32 all."""
    chunks = _chunks([random_payload(99, 3000)])
    for threshold, lo, hi in ((0, 0.0, 0.0), (1 << 30, 0.1, 0.4), (1 << 32, 1.0, 1.0)):
        d = TF.ChunkDecoder(_tables(), "mem.trace", ())
        batches = [(len(b), len(b.sel)) for h, p in chunks for b in d.sampled(h, p, TF.SampleSink(64, 6, 1, threshold))]
        share = sum(s for _, s in batches) / sum(n for n, _ in batches)
        assert lo <= share <= hi
    with pytest.raises(Exception, match="max_rows"):
        TF.SampleSink(0, 6, 1, 1)
