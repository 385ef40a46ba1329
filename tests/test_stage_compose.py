"""The stage commands compose as the README lists them, with no flags a user could not guess: a translated
file names what it needs to build (the XOMP runtime, the source's folder for its local headers)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pptmc import cli

SOURCE = Path(__file__).parent / "outside" / "dot"


@pytest.mark.skipif(shutil.which("clang-19") is None, reason="clang-19 not installed")
def test_translate_instrument_trace_predict_compose(tmp_path, monkeypatch, capsys):
    """translate -> instrument -> trace -> predict on a program with a local header, in its own folder."""
    for f in SOURCE.iterdir():
        shutil.copy(f, tmp_path / f.name)
    monkeypatch.chdir(tmp_path)
    assert cli.run(["translate", "main.c", "-o", "build/main.x.c"]) == 0
    assert cli.run(["instrument", "build/main.x.c", "-o", "build/main.inst"]) == 0
    assert cli.run(["trace", "build/main.inst", "-o", "build/t.pptrace"]) == 0
    capsys.readouterr()
    assert cli.run(["predict", "build/t.pptrace", "--machine", "haswell-i7-5960x", "--cores", "1,2", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["cores"] for r in rows] == [1, 2] and all(r["runtime_s"] > 0 for r in rows)
