"""Read pptmc trace files (layout in instrument/FORMAT.md) as a stream of TraceChunk batches.

The reader never holds more than one decompressed chunk: each disk chunk is checked (header
CRC, payload CRC, zstd frame checksum), decompressed and decoded by a numba kernel, then
sliced into batches of at most `max_rows` accesses. The parts: the file's frame
(instrument/trace_format.py), the chunk decoder (chunk_decoder.py) and its kernels
(decode_kernel.py, decode_sink.py for the sampling decode, decode_replay.py for its replay).
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

from common.errors import InputError
from instrument.chunk_decoder import ChunkDecoder
from instrument.decode_base import decode_tables
from instrument.decode_replay import DecodeReplay, REPLAY_BATCHES
from instrument.decode_sink import WORD_LINE, WORD_STACK, WORD_STORE, SampledBatch, SampleSink
from instrument.distinct_lines import footer_estimate
from instrument.trace_format import (CHUNK_HEADER, END_MAGIC, FOOTER_MAGIC, FORMAT_VERSION, TRAILER, ChunkHeader,
                                     chunk_header_bytes, iter_chunk_headers, read_footer, read_header)
from instrument.trace_types import BlockInfo, LoopInstance, TraceChunk, TraceInfo

# names other packages read from here: the sampling decode's words and batches
__all__ = ["FORMAT_VERSION", "WORD_LINE", "WORD_STACK", "WORD_STORE", "SampledBatch", "TraceReader", "distinct_lines_of",
           "mark_incomplete", "open_trace", "read_footer"]


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
        self.tables = decode_tables(self.header, self.path)
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
        extra.update({k: self.header[k] for k in ("threads_requested", "block_table_hash", "piece_cores") if k in self.header})
        return TraceInfo(path=str(self.path), format_version=FORMAT_VERSION,
                         program=self.header.get("program", ""), args=list(self.header.get("args", [])),
                         complete=bool(self.footer.get("complete")), n_accesses=n_acc,
                         blocks=blocks, block_counts=counts, edge_counts=edges, loops=loops,
                         n_threads=int(self.footer.get("n_threads", 1)), extra=extra,
                         distinct_lines_estimate=footer_estimate(self.footer, self.path))

    @property
    def distinct_lines_estimate(self) -> int | None:
        """Distinct 64-byte lines of the trace, from the footer's sketch (None: recorded without it)."""
        return self.info.distinct_lines_estimate

    def disk_chunks(self) -> Iterator[tuple[ChunkHeader, bytes]]:
        """Compressed chunks in file order, each verified."""
        crc = 0
        with open(self.path, "rb") as f:
            for hdr, payload in iter_chunk_headers(f, self.path, self.data_start, self.data_stop):
                crc = zlib.crc32(payload, zlib.crc32(chunk_header_bytes(f, hdr), crc))
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


def open_trace(path: Path) -> TraceReader:
    """Open a trace file; truncation or a foreign file is an InputError naming the file."""
    return TraceReader(Path(path))


def distinct_lines_of(path: Path) -> int | None:
    """The footer's distinct-line estimate, reading the footer alone (a check made before any work does not
    decode the header's tables); None when the file holds no trace footer or the trace has no sketch."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError:
        return None
    with open(path, "rb") as f:
        try:
            footer = read_footer(f, path, size)[0]
        except InputError:
            return None
    return footer_estimate(footer, path)


def piece_cores_of(path: Path) -> list[int] | None:
    """The core counts the trace's loops were cut into pieces for (translate/README.md), reading the header
    alone, as a check before any work; None when the file holds no trace header or predates pieces."""
    try:
        with open(path, "rb") as f:
            header = read_header(f, Path(path))[0]
    except (OSError, InputError):
        return None
    return header.get("piece_cores")


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
    out = _Intact(ChunkDecoder(decode_tables(header, path), path), start)
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
        f.write(struct.pack("<4sI", FOOTER_MAGIC, len(body)) + body + struct.pack("<I", zlib.crc32(body))
                + TRAILER.pack(stop, END_MAGIC))
        f.flush()
        os.fsync(f.fileno())


def _n_real(header: dict) -> int:
    """Number of block ids the runtime counts (all ids; pseudo-blocks stay 0 there)."""
    return max([b["id"] for b in header["blocks"]], default=-1) + 1
