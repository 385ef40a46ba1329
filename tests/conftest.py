"""Shared fixtures: in-memory traces in the tracer's (TraceInfo, TraceChunk) contract."""
from __future__ import annotations

import numpy as np
import pytest

from instrument.trace_types import TraceChunk, TraceInfo


def build_chunks(addr: np.ndarray, block: np.ndarray, inst: np.ndarray, rows: int,
                 loop: np.ndarray | None = None, iteration: np.ndarray | None = None) -> list[TraceChunk]:
    """Split access arrays into TraceChunks of at most `rows` rows (other columns neutral)."""
    out = []
    for s in range(0, len(addr), rows):
        e = min(len(addr), s + rows)
        z = e - s
        lp = np.full(z, -1, np.int32) if loop is None else loop[s:e].astype(np.int32)
        it = np.full(z, -1, np.int64) if iteration is None else iteration[s:e].astype(np.int64)
        out.append(TraceChunk(addr[s:e], np.full(z, 8, np.uint32), np.zeros(z, bool), block[s:e], inst[s:e],
                              np.zeros(z, np.uint16), np.zeros(z, np.int32), lp, it, np.zeros(z, bool)))
    return out


@pytest.fixture(scope="session")
def chunks_of():
    """The chunk builder, as a fixture so test modules need not import conftest."""
    return build_chunks


@pytest.fixture()
def fake_trace_files(monkeypatch):
    """Route analysis.profiles.sweep.open_chunks to in-memory traces: fill the returned dict with
    path -> (TraceInfo, addr, block, instance) and pass the path to any command that opens a trace."""
    import analysis.profiles.sweep

    traces: dict[str, tuple[TraceInfo, np.ndarray, np.ndarray, np.ndarray]] = {}

    def open_chunks(path, max_rows=1 << 20):
        info, addr, block, inst = traces[str(path)]
        return info, lambda: iter(build_chunks(addr, block, inst, min(max_rows, 50)))

    monkeypatch.setattr(analysis.profiles.sweep, "open_chunks", open_chunks)
    return traces


@pytest.fixture
def translate_rejects(tmp_path):
    """assert that translating a C file with `text` fails with an InputError matching `match`."""
    from common.errors import InputError
    from translate import translate_file

    def check(name: str, text: str, match: str) -> None:
        src = tmp_path / name
        src.write_text(text)
        with pytest.raises(InputError, match=match):
            translate_file(src, tmp_path / "out.c")

    return check
