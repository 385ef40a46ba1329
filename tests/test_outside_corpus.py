"""Issue #29: other people's OpenMP programs, unmodified, through `pptmc run`.

Each folder of tests/outside/ is one program written the way outside code is written (local
headers, macros, several files, globals, reductions, collapse, dynamic schedules, sync
constructs). A valid program must run through the whole pipeline and print, when traced, the
same checksum as its native clang-19 build; an invalid one must be rejected with its file:line.
The folder's other .c files are passed with --extra-source (`pptmc run` takes one main source).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from common.errors import InputError, PptmcError
from pptmc import cli

CORPUS = Path(__file__).parent / "outside"
MACHINE = "haswell-i7-5960x"
CORES = (1, 2)


@dataclass(frozen=True)
class Program:
    """How one corpus program is built and run: its -D flags and its command-line arguments."""

    defines: tuple[str, ...] = ()
    args: tuple[str, ...] = ()


VALID: dict[str, Program] = {
    "argv_size": Program(args=("64",)),
    "colwalk": Program(),
    "dot": Program(),
    "globals": Program(),
    "grid3d": Program(),
    "guided": Program(),
    "helpers": Program(),
    "histogram": Program(),
    "ifdef_size": Program(defines=("SIZE=2048",)),
    "jacobi": Program(),
    "lastpriv": Program(),
    "local_macro": Program(),
    "matmul": Program(),
    "matvec_t": Program(),
    "maxred": Program(),
    "nowait_pair": Program(),
    "racy": Program(),
    "spmv": Program(),
    "structs": Program(),
    "syncs": Program(),
    "timestep": Program(),
    "triangular": Program(),
}

INVALID: dict[str, int] = {  # program -> the line clang and pptmc must name
    "bad_nested_for": 14,
    "bad_break": 17,
}

# The instrument step compiles OUT/translate/main.xomp.c without -iquote of the program's folder
# (the translated file's pptmc-build-inputs source_dir is not used there; today the folder is
# searched only when an --extra-source lives in it), so a local header is not found.
HEADER_NOT_FOUND = ("InputError: compile OUT/translate/main.xomp.c failed: fatal error: '{}' file not "
                    "found (local header of a program with no --extra-source, issue #29)")
KNOWN_FAILURES: dict[str, str] = {}  # program -> the precise error today (xfail, strict); none now

needs_clang = pytest.mark.skipif(shutil.which("clang-19") is None, reason="clang-19 not installed")


def sources_of(name: str) -> tuple[Path, list[Path]]:
    """The program's main.c and its other .c files, in a stable order."""
    folder = CORPUS / name
    return folder / "main.c", sorted(p for p in folder.glob("*.c") if p.name != "main.c")


def checksum_line(text: str) -> str:
    """The program's `checksum:` line (the run's oracle)."""
    lines = [line.strip() for line in text.splitlines() if line.startswith("checksum:")]
    if len(lines) != 1:
        raise AssertionError(f"expected one checksum line, got {lines!r} in {text!r}")
    return lines[0]


def native_build(name: str, spec: Program, workdir: Path) -> subprocess.CompletedProcess:
    """Compile the program with clang-19 -fopenmp -Wall, as its authors would."""
    main, others = sources_of(name)
    flags = [f"-D{d}" for d in spec.defines]
    command = ["clang-19", "-fopenmp", "-O2", "-Wall", *flags, str(main), *map(str, others), "-lm",
               "-o", str(workdir / f"{name}.native")]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def native_run(name: str, spec: Program, workdir: Path, threads: int) -> str:
    """The checksum line of the native build run on `threads` threads."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    run = subprocess.run([str(workdir / f"{name}.native"), *spec.args], capture_output=True, text=True,
                         env=env, check=True)
    return checksum_line(run.stdout)


def native_checksum(name: str, spec: Program, workdir: Path) -> str:
    """The checksum of the native build (warning-free), the same on 1 and 2 threads."""
    build = native_build(name, spec, workdir)
    assert build.returncode == 0 and not build.stderr, build.stderr
    checksums = {native_run(name, spec, workdir, threads) for threads in CORES}
    assert len(checksums) == 1, f"{name}: the checksum depends on the thread count: {checksums}"
    return checksums.pop()


def pptmc_argv(name: str, spec: Program, out: Path) -> list[str]:
    """`pptmc run` on the unmodified program: all its .c files, its args after --."""
    main, others = sources_of(name)
    argv = ["run", str(main), *map(str, others), "--machines", MACHINE, "--cores", ",".join(map(str, CORES)),
            "-o", str(out)]
    for define in spec.defines:
        argv += ["-D", define]
    return [*argv, "--", *spec.args]


def with_known_failures(names) -> list:
    """Parameters, with the cases that fail today for a stated reason marked xfail(strict)."""
    return [pytest.param(n, marks=pytest.mark.xfail(strict=True, raises=InputError, reason=KNOWN_FAILURES[n]))
            if n in KNOWN_FAILURES else n for n in names]


def test_corpus_is_complete():
    """Every folder is listed once, and the corpus is the size issue #29 asks for."""
    folders = {p.name for p in CORPUS.iterdir() if (p / "main.c").is_file()}
    assert folders == set(VALID) | set(INVALID)
    assert len(folders) >= 20 and len(INVALID) >= 2


@needs_clang
@pytest.mark.parametrize("name", with_known_failures(sorted(VALID)))
def test_valid_program_runs_unmodified(name: str, tmp_path: Path):
    """The whole pipeline runs, writes its tables for every core count, and the traced run
    prints the native checksum."""
    spec = VALID[name]
    expected = native_checksum(name, spec, tmp_path)
    out = tmp_path / "out"
    assert cli.run(pptmc_argv(name, spec, out)) == 0
    for table in ("hit_rates.csv", "runtimes.csv"):
        frame = pd.read_csv(out / table)
        assert set(frame["cores"]) == set(CORES), table
    assert checksum_line((out / "trace" / "program.out").read_text()) == expected


@needs_clang
@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_program_is_rejected(name: str, tmp_path: Path):
    """clang-19 rejects it, and pptmc says so naming the file and the line."""
    build = native_build(name, Program(), tmp_path)
    assert build.returncode != 0 and f"main.c:{INVALID[name]}:" in build.stderr
    with pytest.raises(PptmcError) as raised:
        cli.run(pptmc_argv(name, Program(), tmp_path / "out"))
    assert f"{name}/main.c:{INVALID[name]}:" in str(raised.value)
