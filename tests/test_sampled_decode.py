"""The trace reader's sampling decode (TraceReader.sampled_batches, ChunkDecoder.sampled) against the plain
decode of the same events: every row's word, the kept rows (the hash recomputed in numpy) and the runs of one
(loop, iteration) found from the decoded columns."""
from __future__ import annotations

import zlib

import numpy as np
import pytest
import zstandard

from instrument.chunk_decoder import ChunkDecoder
from instrument.decode_base import DecodeTables
from instrument.decode_sink import SampleSink, SampledBatch
from instrument.trace_format import ChunkHeader
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


def zig(x: int) -> int:
    return (x << 1) ^ (x >> 63)


def encode_event(tag: int, val: int, *args: int) -> bytes:
    return _varint(val << 2 | tag) + b"".join(_varint(a) for a in args)


def make_tables() -> DecodeTables:
    """Block 0: sites 0-2 (site 1 a store), block 1: sites 3-4 (site 4 a store), all predicted, 8 bytes."""
    return DecodeTables(np.array([0, 0, 0, 1, 1], np.int32), np.full(5, 8, np.uint32),
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
            out.append(encode_event(1, block))
        elif x < 0.6 and block >= 0 and cursor < len(bs[block]):
            i = int(rng.integers(cursor, len(bs[block])))
            cursor = i + 1
            base = int(rng.choice([STACK_LO + 4096, 1 << 30, 1 << 46]))
            out.append(encode_event(0, bs[block][i], zig(base + int(rng.integers(-512, 512)) * 8 - (1 << 29))))
        elif x < 0.75:
            out.append(encode_event(3, 3, zig(int(rng.choice([0, 0, 0, 2, -1])))))  # iteration (-1: the same again)
        elif x < 0.8:
            out.append(encode_event(3, 2, 0, inst, zig(10), 0, zig(0)))  # loop begin
            inst += 1
        elif x < 0.85:
            out.append(encode_event(3, 4, 0))  # loop end
        elif x < 0.9:
            block = -1
            out.append(encode_event(3, 0, 0, int(rng.integers(0, 3)), STACK_LO + 8192 * int(rng.integers(0, 2))))
        elif x < 0.93:
            block = -1
            out.append(encode_event(3, 1, 0))
    return b"".join(out)


def chunks_of(payloads: list[bytes]) -> list[tuple[ChunkHeader, bytes]]:
    """(header, compressed payload) of each payload, as one thread's consecutive chunks."""
    cctx = zstandard.ZstdCompressor()
    out = []
    for raw in payloads:
        comp = cctx.compress(raw)
        out.append((ChunkHeader(0, 0, len(comp), len(raw), 0, -1, -1, -1, STACK_LO, STACK_HI, 0,
                                   zlib.crc32(comp)), comp))
    return out


def oracle(ch: TraceChunk, shift: int, salt: int, threshold: int) -> SampledBatch:
    """The sampling decode's batch computed from a plain decode's columns."""
    line = ch.addr >> np.uint64(shift)
    words = line | (ch.is_stack.astype(np.uint64) << np.uint64(63)) | (ch.is_store.astype(np.uint64) << np.uint64(62))
    m32 = np.uint64(0xFFFFFFFF)
    x = (line ^ (line >> np.uint64(32)) ^ np.uint64(salt)) & m32
    sel = np.flatnonzero(((x * np.uint64(0x9E3779B1)) & m32) < np.uint64(threshold))
    lp, it = ch.loop.astype(np.int64), ch.iteration
    cut = np.flatnonzero((lp[1:] != lp[:-1]) | (it[1:] != it[:-1])) + 1
    starts = np.concatenate([[0], cut, [len(ch)]]).astype(np.int64)
    return SampledBatch(words, sel, starts, lp[starts[:-1]], it[starts[:-1]],
                           int(ch.addr.max()))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("max_rows", [1, 7, 300, 1 << 16])
def test_sampled_batches_equal_the_plain_decode(seed, max_rows):
    """Same batches as chunks(max_rows); each batch's words, kept rows, runs and address OR as computed from
    the plain decode's columns (pauses inside blocks, iterations repeated or empty, chunks carried over)."""
    chunks = chunks_of([random_payload(seed * 10 + j, 400) for j in range(3)])
    shift, salt, threshold = 6, 0x5EED + seed, 1 << 31
    plain = ChunkDecoder(make_tables(), "mem.trace")
    want = [oracle(c, shift, salt, threshold) for h, p in chunks for c in plain.decode(h, p, max_rows)]
    sink = SampleSink(max_rows, shift, salt, threshold)
    sampled = ChunkDecoder(make_tables(), "mem.trace", ())
    got = [(b.words.copy(), b.sel.copy(), b.starts.copy(), b.loop.copy(), b.iteration.copy(), b.addr_max)
           for h, p in chunks for b in sampled.sampled(h, p, sink)]
    assert len(got) == len(want) and sum(len(w) for w in want) > 500
    for g, w in zip(got, want):
        assert np.array_equal(g[0], w.words)
        assert np.array_equal(g[1], w.sel)
        assert np.array_equal(g[2], w.starts) and np.array_equal(g[3], w.loop) and np.array_equal(g[4], w.iteration)
        assert g[5] == w.addr_max
    assert sampled.loops == plain.loops
    assert np.array_equal(sampled.counts, plain.counts)


def strided_payload(seed: int, rounds: int) -> bytes:
    """Rounds of: misses that give each site of a block an address and then a stride (sub-line, negative,
    zero, longer than a line, or across the stack's upper bound), then many repeats of the block's entry (whole
    instances of predicted accesses: the sampling decode's block runs), sometimes an iteration between."""
    rng = np.random.default_rng(seed)
    bs = {0: [0, 1, 2], 1: [3, 4]}
    last, stride = [0] * 5, [0] * 5  # the runtime's predictors: a miss carries address - (last + stride)
    out = [encode_event(3, 0, 0, 0, STACK_HI)]  # a region whose frame top is the stack's upper bound
    for _ in range(rounds):
        block = int(rng.integers(0, 2))
        steps = rng.choice([0, 8, 16, -8, -24, 40, 64, 200, -4096], len(bs[block])).tolist()
        bases = [int(rng.choice([STACK_HI - 64 * int(rng.integers(0, 40)), 1 << 30, 1 << 40]))
                 + int(rng.integers(0, 64)) for _ in bs[block]]
        for again in (0, 1):  # two instances whose sites all miss: the second sets the strides
            out.append(encode_event(1, block))
            for site, base, step in zip(bs[block], bases, steps):
                address = base + again * step
                out.append(encode_event(0, site, zig(address - last[site] - stride[site])))
                stride[site], last[site] = address - last[site], address
        entries = int(rng.integers(1, 300))
        out += [encode_event(1, block)] * entries
        for site in bs[block]:  # every entry but the last (whose sites run later) moved the predictors on
            last[site] += stride[site] * (entries - 1)
        if rng.random() < 0.3:
            out.append(encode_event(3, 3, zig(0)))
        out.append(encode_event(3, 5, len(bs[block])))  # sync: the last entry's sites all ran
        for site in bs[block]:
            last[site] += stride[site]
    return b"".join(out)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("max_rows", [5, 64, 1 << 16])
@pytest.mark.parametrize("threshold", [1 << 29, 1 << 31, 1 << 32])
def test_block_runs_equal_the_plain_decode(seed, max_rows, threshold):
    """Long runs of one block's entries, emitted site by site with each line hashed once, give the rows of
    the plain decode (words, kept rows in row order, highest address), whatever the strides and pauses."""
    chunks = chunks_of([strided_payload(seed * 10 + j, 40) for j in range(2)])
    shift, salt = 6, 0xBEEF + seed
    plain = ChunkDecoder(make_tables(), "mem.trace")
    want = [oracle(c, shift, salt, threshold) for h, p in chunks for c in plain.decode(h, p, max_rows)]
    sampled = ChunkDecoder(make_tables(), "mem.trace", ())
    sink = SampleSink(max_rows, shift, salt, threshold)
    got = [(b.words.copy(), b.sel.copy(), b.addr_max) for h, p in chunks for b in sampled.sampled(h, p, sink)]
    assert len(got) == len(want) and sum(len(w) for w in want) > 5000
    for g, w in zip(got, want):
        assert np.array_equal(g[0], w.words) and np.array_equal(g[1], w.sel) and g[2] == w.addr_max
    assert np.array_equal(sampled.counts, plain.counts)


def test_sampled_decode_keeps_about_the_rate_and_refuses_bad_sizes():
    """A threshold of rate * 2^32 keeps about that share of the lines; zero keeps none, 2^32 all."""
    chunks = chunks_of([random_payload(99, 3000)])
    for threshold, lo, hi in ((0, 0.0, 0.0), (1 << 30, 0.1, 0.4), (1 << 32, 1.0, 1.0)):
        d = ChunkDecoder(make_tables(), "mem.trace", ())
        batches = [(len(b), len(b.sel)) for h, p in chunks for b in d.sampled(h, p, SampleSink(64, 6, 1, threshold))]
        share = sum(s for _, s in batches) / sum(n for n, _ in batches)
        assert lo <= share <= hi
    with pytest.raises(Exception, match="max_rows"):
        SampleSink(0, 6, 1, 1)
