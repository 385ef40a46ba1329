"""The fake_trace_files fixture (conftest.py) for the source sampler, which opens traces itself."""
from __future__ import annotations

import pytest


@pytest.fixture
def fake_source_traces(fake_trace_files, monkeypatch):
    """fake_trace_files, also routing analysis.sampling.source.source_trace to the in-memory traces (with
    every column, whichever the source pass asks for)."""
    from analysis.profiles import sweep as profiles
    from analysis.sampling import source as source_sampling

    def in_memory(path):
        info, factory = profiles.open_chunks(path)
        return info, lambda max_rows, columns: factory(), None  # no sampling decode: the rows' pass

    monkeypatch.setattr(source_sampling, "source_trace", in_memory)
    return fake_trace_files
