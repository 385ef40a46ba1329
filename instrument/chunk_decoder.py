"""ChunkDecoder: verified chunks in file order decoded into rows (TraceChunk batches, or the sampling decode's
SampledBatch views), with the per-thread and block-instance state carried from chunk to chunk."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import zstandard

from common.errors import InputError
from instrument.decode_base import MAX_DEPTH, DecodeState, DecodeTables
from instrument.decode_kernel import Columns, Output, decode
from instrument.decode_replay import R_CARRY, R_REF_N, DecodeReplay, ReplayArrays, no_replay
from instrument.decode_sink import SampledBatch, SampleSink, SinkArrays, no_sink
from instrument.trace_format import ChunkHeader
from instrument.trace_types import CHUNK_DTYPES, TraceChunk

# the sink and replay arguments of a plain decode: placeholders
_NO_SINK = no_sink()
_NO_REPLAY = no_replay()


class _ThreadState:
    """Decoder state of one recording thread, carried from chunk to chunk."""

    def __init__(self, n_sites: int, hdr: "ChunkHeader"):
        self.pred_last = np.zeros(n_sites, np.int64)
        self.pred_stride = np.zeros(n_sites, np.int64)
        self.fb = np.full(MAX_DEPTH, -1, np.int64)
        self.fc = np.zeros(MAX_DEPTH, np.int64)
        self.st = np.array([0, hdr.region, hdr.loop, hdr.iteration, hdr.region_top], np.int64)




class ChunkDecoder:
    """Decodes verified chunks in file order, carrying per-thread and block-instance state.

    columns: the fields to decode (None: all; `addr` always); the others are zeros."""

    def __init__(self, tables: DecodeTables, path: Path, columns: Iterable[str] | None = None):
        self.t, self.path, self.tabs = tables, path, tables.arrays()
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

    def _calls(self, hdr: ChunkHeader, payload: bytes, fresh, sink: SinkArrays,
               rep: ReplayArrays) -> Iterator[tuple[TraceChunk, int, int]]:
        """Run the kernel over one disk chunk: (output, rows, status) of every call that produced rows or
        skipped a repeated copy (status 2)."""
        buf = np.frombuffer(self._decompress(hdr, payload), np.uint8)
        carried = self.carry.pop(hdr.thread, None)  # the previous chunk's last bytes (status 3)
        if carried is not None:
            buf = np.concatenate([carried, buf])
        th = self.threads.setdefault(hdr.thread, _ThreadState(len(self.t.site_block), hdr))
        loops_out = np.zeros((4096, 5), np.int64)
        state = DecodeState(self.counts, self.last_inst, th.pred_last, th.pred_stride, th.fb, th.fc, th.st,
                            np.zeros(len(self.t.site_block), np.int64), loops_out)
        pos, status = 0, 1
        while status == 1 or status == 2:
            out = fresh()
            status, k, n_loops, pos = decode(buf, pos, self.tabs, state,
                                             Output(Columns(*(getattr(out, c) for c in Columns._fields)), sink), rep,
                                             np.int64(hdr.stack_lo), np.int64(hdr.stack_hi))
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
