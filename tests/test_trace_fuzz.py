"""A trace with one flipped bit anywhere (header, chunk headers, payloads, footer, trailer) is either read
exactly as the intact trace, or refused with pptmc's own error: never another exception, never different
facts. Every part carries a checksum (instrument/FORMAT.md), so in practice every flip is refused."""
from __future__ import annotations

import hashlib
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from common.errors import PptmcError
from instrument import open_trace
from instrument.trace_format import CHUNK_HEADER, TRAILER
from pptmc import cli

SOURCE = Path(__file__).parent / "outside" / "dot"


def _read_all(path: Path) -> tuple:
    """Everything a reader takes from a trace: its facts and a digest of every decoded access."""
    reader = open_trace(path)
    digest = hashlib.sha256()
    for chunk in reader.chunks():
        digest.update(np.ascontiguousarray(chunk.addr).tobytes())
        digest.update(np.ascontiguousarray(chunk.block).tobytes())
    info = reader.info
    return info.complete, info.n_accesses, sorted(info.block_counts.items()), len(info.loops), digest.hexdigest()


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> tuple[Path, tuple, dict[str, tuple[int, int]]]:
    """A real trace, what it reads as, and the byte ranges of its parts."""
    if shutil.which("clang-19") is None:
        pytest.skip("clang-19 not installed")
    work = tmp_path_factory.mktemp("fuzz")
    for f in SOURCE.iterdir():
        shutil.copy(f, work / f.name)
    assert cli.run(["translate", str(work / "main.c"), "-o", str(work / "x.c")]) == 0
    assert cli.run(["instrument", str(work / "x.c"), "-o", str(work / "x.inst")]) == 0
    assert cli.run(["trace", str(work / "x.inst"), "-o", str(work / "t.pptrace")]) == 0
    path = work / "t.pptrace"
    reader = open_trace(path)
    data = path.read_bytes()
    (footer_start,) = struct.unpack("<Q", data[-TRAILER.size:-8])
    parts = {"header": (0, reader.data_start), "chunk headers": (reader.data_start, reader.data_start + CHUNK_HEADER.size),
             "chunks": (reader.data_start + CHUNK_HEADER.size, footer_start),
             "footer": (footer_start, len(data) - TRAILER.size), "trailer": (len(data) - TRAILER.size, len(data))}
    return path, _read_all(path), parts


@pytest.mark.parametrize("part", ["header", "chunk headers", "chunks", "footer", "trailer"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.floats(min_value=0.0, max_value=1.0, exclude_max=True), bit=st.integers(0, 7))
def test_one_flipped_bit_is_refused_by_pptmc_or_harmless(trace, tmp_path, part, where, bit):
    path, intact, parts = trace
    lo, hi = parts[part]
    data = bytearray(path.read_bytes())
    offset = lo + int(where * (hi - lo))
    data[offset] ^= 1 << bit
    flipped = tmp_path / f"flip-{offset}-{bit}.pptrace"
    flipped.write_bytes(bytes(data))
    try:
        got = _read_all(flipped)
    except PptmcError:
        return  # refused, with pptmc's message (the CLI prints it without a traceback)
    assert got == intact, f"a flip at byte {offset} ({part}) changed what the trace says"
