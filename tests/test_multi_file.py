"""Programs in several files: every file's parallel regions are translated and traced (one instrumented
module, llvm-linked), files without OpenMP are compiled as they are, and a compilation database can name
them all. The oracle is the native build's own output."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from instrument.trace_types import SCHED_BARRIER
from common.errors import InputError
from instrument.compile_commands import read_compile_commands
from pptmc import cli

HERE = Path(__file__).parent
PLAIN_MAIN = HERE / "outside_multi"     # region in kernel.c; main.c and util.c have no OpenMP
TWO_REGIONS = HERE / "outside_multi2"   # one region in main.c, one in sum.c
needs_clang = pytest.mark.skipif(shutil.which("clang-19") is None, reason="clang-19 not installed")


def _native_output(files: list[Path], tmp: Path) -> str:
    """What the program prints when clang builds it natively."""
    exe = tmp / "native"
    subprocess.run(["clang-19", "-fopenmp", "-O2", *map(str, files), "-o", str(exe)], check=True)
    return subprocess.run([str(exe)], capture_output=True, text=True, check=True,
                          env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}).stdout


def _run(argv: list[str], out: Path) -> pd.DataFrame:
    assert cli.run(["run", *argv, "--machines", "haswell-i7-5960x", "--cores", "1,2", "-o", str(out)]) == 0
    return pd.read_csv(out / "hit_rates.csv")


@needs_clang
@pytest.mark.parametrize("folder,files,loops", [(PLAIN_MAIN, ["main.c", "kernel.c", "util.c"], 1),
                                                (TWO_REGIONS, ["main.c", "sum.c"], 2)])
def test_every_files_regions_are_traced(tmp_path, folder, files, loops):
    """pptmc run a.c b.c ...: the traced run prints what the native program prints, and the trace holds the
    work-shared loop instances of every file."""
    import instrument

    paths = [folder / f for f in files]
    hits = _run([str(p) for p in paths], tmp_path / "out")
    assert sorted(set(hits["cores"])) == [1, 2]
    assert (tmp_path / "out" / "trace" / "program.out").read_text() == _native_output(paths, tmp_path)
    info = instrument.open_trace(next((tmp_path / "out" / "trace").glob("*.pptrace"))).info
    assert len([lp for lp in info.loops if lp.schedule != SCHED_BARRIER]) == loops  # each work-shared loop runs once
    regions = pd.read_csv(tmp_path / "out" / "regions.csv")
    assert len(regions) == loops and all(":" in w and w.split(":")[0] in files for w in regions["where"])


@needs_clang
def test_a_compilation_database_names_the_files(tmp_path):
    """--compile-commands takes the files and -I of compile_commands.json: the same predictions as naming
    the files."""
    db = tmp_path / "compile_commands.json"
    db.write_text(json.dumps([{"directory": str(PLAIN_MAIN), "file": f, "arguments": ["cc", "-I.", "-c", f]}
                              for f in ("main.c", "kernel.c", "util.c")]))
    by_db = _run(["--compile-commands", str(db)], tmp_path / "db")
    by_name = _run([str(PLAIN_MAIN / f) for f in ("main.c", "kernel.c", "util.c")], tmp_path / "names")
    pd.testing.assert_frame_equal(by_db, by_name)


def test_bad_compilation_databases_are_refused_by_name(tmp_path):
    """Not JSON, no C file, or files whose macros disagree: an InputError saying which."""
    bad = tmp_path / "cc.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        read_compile_commands(bad)
    bad.write_text(json.dumps([{"directory": str(tmp_path), "file": "x.cpp", "command": "c++ -c x.cpp"}]))
    with pytest.raises(InputError, match="no C file"):
        read_compile_commands(bad)
    bad.write_text(json.dumps([{"directory": str(tmp_path), "file": "a.c", "command": "cc -DN=1 -c a.c"},
                               {"directory": str(tmp_path), "file": "b.c", "command": "cc -DN=2 -c b.c"}]))
    with pytest.raises(InputError, match=r"b\.c.*differ from a\.c"):
        read_compile_commands(bad)
