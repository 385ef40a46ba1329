"""The trace file's frame (layout in instrument/FORMAT.md): file header, chunk headers and their checks, footer.

instrument/tracefile.py reads traces through these; instrument/run.py writes footers with them.
"""
from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from common.errors import InputError

FORMAT_VERSION = 2
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
    raw_hash, raw_check = f.read(hl), f.read(4)
    if len(raw_hash) < hl or len(raw_check) < 4:
        raise InputError(f"{path}: truncated inside the header; re-record the trace")
    if zlib.crc32(head + body + raw_hl + raw_hash) != struct.unpack("<I", raw_check)[0]:
        raise InputError(f"{path}: corrupt header (checksum mismatch); re-record the trace")
    binary_hash = raw_hash.decode()
    try:
        header = json.loads(body)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: header JSON is corrupt ({exc}); re-record the trace") from exc
    if header.get("block_table_hash") != binary_hash:
        raise InputError(f"{path}: block table hash {header.get('block_table_hash')} does not match the "
                         f"binary's {binary_hash}: the side files are from another build; rebuild and re-trace")
    return header, 16 + hlen + 4 + hl + 4


def read_footer(f, path: Path, size: int) -> tuple[dict, int]:
    """Parse the footer; a missing trailer means the file was cut short."""
    if size < TRAILER.size:
        raise InputError(f"{path}: truncated (no footer); the trace was cut short, re-record it")
    f.seek(size - TRAILER.size)
    start, magic = TRAILER.unpack(f.read(TRAILER.size))
    if magic != END_MAGIC or start > size - TRAILER.size - 12:
        raise InputError(f"{path}: truncated (the footer is missing); the trace was cut short or the "
                         f"recording process was killed; re-record it")
    f.seek(start)
    fmagic, flen = struct.unpack("<4sI", f.read(8))
    body, raw_check = f.read(flen), f.read(4)
    if fmagic != FOOTER_MAGIC or start + 8 + flen + 4 != size - TRAILER.size:
        raise InputError(f"{path}: corrupt footer at byte {start}; re-record the trace")
    if zlib.crc32(body) != struct.unpack("<I", raw_check)[0]:
        raise InputError(f"{path}: corrupt footer at byte {start} (checksum mismatch); re-record the trace")
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


def chunk_header_bytes(f, hdr: ChunkHeader) -> bytes:
    """The raw 80 header bytes of a chunk (for the whole-file checksum)."""
    here = f.tell()
    f.seek(hdr.offset)
    raw = f.read(CHUNK_HEADER.size)
    f.seek(here)
    return raw
