"""Probe kits: detect's microbenchmarks and the suite's native programs, prebuilt with libomp and a runner that
needs only Python 3, for machines where pptmc cannot compile (issue #31); and reading their results back.

`build_kit` writes KIT (bin/: microbenchmarks, bench/: native programs as `pptmc measure` builds them, lib/:
the libomp they link, probeplan.py: machines/probeplan.py, run.py: pptmc/probekit_runner.py, kit.json: the
kit version and every file's sha256). `load_results` checks a results folder that run.py wrote (its kit
version against this pptmc's, every file against the sha256 its kit.json records) and gives its host facts,
raw microbenchmark output and native times; `results_machine` turns the first two into a machine file with
detect's own code, `results_measured` the times into measure's table.
"""
from __future__ import annotations

import hashlib
import json
import platform
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import pandas as pd

from machines import probeplan
from machines.detect import build_program, llvm_processor, machine_from_raw, ops_flags
from common.errors import InputError, ToolError
from common.io import write_text
from common.version import VERSION

Progress = Callable[[str], None]
KIT_FORMAT = 1
RESULTS_FORMAT = 1  # pptmc/probekit_runner.py's RESULTS_FORMAT
RESULT_FILES = ("facts.json", "probes.json", "native.json")
PROGRAMS = ("ops", "chase", "lines", "stream", "strided", "overhead", "coldstart", "libm", "window", "stores",
            "tlb", "transfer", "cores", "cpuid", "walks", "updates")


def _root() -> Path:
    """The folder holding the project's packages."""
    return Path(__file__).resolve().parents[1]


def protocol_files() -> list[Path]:
    """The files whose contents decide what a kit's results mean: the plan and runner, the microbenchmark and
    benchmark sources and harness. A change to any of them changes the kit version."""
    root = _root()
    return sorted([Path(probeplan.__file__).resolve(), Path(__file__).resolve().with_name("probekit_runner.py"),
                   *(root / "machines" / "microbench").glob("*.c"),
                   *(root / "benchmarks" / "polybench").glob("*.[ch]")])


def kit_version() -> str:
    """This pptmc's kit version: its version and a hash of the protocol files."""
    digest = hashlib.sha256()
    for path in protocol_files():
        digest.update(path.relative_to(_root()).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return f"{VERSION}+{digest.hexdigest()[:16]}"


def sha256(path: Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def find_libomp(binary: Path) -> tuple[str, Path]:
    """(the name `binary` asks for, the file it resolves to) of the libomp it loads, from ldd."""
    res = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False)
    found = re.search(r"^\s*(libomp[^\s]*)\s*=>\s*(\S+)", res.stdout, re.M)
    if not found or not Path(found.group(2)).is_file():
        raise ToolError(f"{binary}: ldd names no libomp it loads ({res.stdout.strip()[:300]}); run `pptmc doctor`")
    return found.group(1), Path(found.group(2)).resolve()


def glibc_required(paths: list[Path]) -> str:
    """The newest GLIBC_x.y symbol version the kit's binaries need ('' when none)."""
    versions = {tuple(int(p) for p in m.split(b".")) for path in paths
                for m in re.findall(rb"GLIBC_(\d+\.\d+)(?![\d.])", path.read_bytes())}
    return ".".join(map(str, max(versions))) if versions else ""


def _build_binaries(kit: Path, benches, size: str, say: Progress) -> list[Path]:
    """Microbenchmarks (ops.c also as ops-base, for x86-64 CPUs without x86-64-v3) and native programs."""
    (kit / "bin").mkdir()
    portable = platform.machine() == "x86_64"
    say(f"building {len(PROGRAMS)} microbenchmarks")
    built = [build_program(p, kit / "bin" / p, ops_flags("x86-64-v3" if portable else None)) for p in PROGRAMS]
    if portable:
        built.append(build_program("ops", kit / "bin" / "ops-base", ops_flags(None)))
    from pptmc.measure import native_binary

    for bench in benches:
        say(f"building {bench.name} at {size}")
        built.append(native_binary(bench, size, kit / "bench"))
    return built


def build_kit(out: Path, benches, size: str, progress: Progress | None = None) -> dict:
    """Write the probe kit folder `out` (whole or not at all: built beside it, then renamed); its kit.json."""
    say = progress or (lambda _msg: None)
    out = Path(out)
    if out.exists() and not (out / "kit.json").is_file():
        raise InputError(f"{out}: exists and is no probe kit; remove it or give another -o")
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        built = _build_binaries(work, benches, size, say)
        soname, libomp = find_libomp(work / "bin" / "stream")
        (work / "lib").mkdir()
        shutil.copyfile(libomp, work / "lib" / soname)
        shutil.copyfile(probeplan.__file__, work / "probeplan.py")
        shutil.copyfile(Path(__file__).with_name("probekit_runner.py"), work / "run.py")
        (work / "run.py").chmod(0o755)
        files = sorted(p for p in work.rglob("*") if p.is_file())
        manifest = {"format": KIT_FORMAT, "kit_version": kit_version(), "pptmc_version": VERSION,
                    "benchmarks": [b.name for b in benches], "size": size, "arch": platform.machine(),
                    "glibc_required": glibc_required([*built, work / "lib" / soname]), "libomp": soname,
                    "built": time.strftime("%Y-%m-%d %H:%M:%S"),
                    "files": {p.relative_to(work).as_posix(): sha256(p) for p in files}}
        write_text(work / "kit.json", json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        work.chmod(0o755)  # mkdtemp made it private
        if out.exists():
            shutil.rmtree(out)
        work.rename(out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return manifest


@dataclass(frozen=True)
class ProbeResults:
    """A checked results folder: its kit.json record, host facts, raw microbenchmark runs and native times."""

    path: Path
    record: dict
    facts: dict
    raw: dict
    native: dict


def _json(path: Path, what: str) -> dict:
    """A results file's JSON object; InputError naming it otherwise."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise InputError(f"{path}: missing; {what}") from exc
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not valid JSON, truncated or damaged ({exc}); {what}") from exc
    if not isinstance(data, dict):
        raise InputError(f"{path}: not a JSON object; {what}")
    return data


def load_results(path: Path) -> ProbeResults:
    """Read and check a probe kit's results folder; InputError naming the file and field otherwise."""
    path = Path(path)
    rerun = "run the kit again: python3 KIT/run.py -o RESULTS"
    record = _json(path / "kit.json", f"is {path} a results folder of run.py? {rerun}")
    if record.get("format") != RESULTS_FORMAT:
        raise InputError(f"{path / 'kit.json'}: format is {record.get('format')!r}, this pptmc reads "
                         f"{RESULTS_FORMAT}; build a kit with this pptmc (pptmc machines probe-kit) and {rerun}")
    if record.get("kit_version") != kit_version():
        raise InputError(f"{path / 'kit.json'}: kit_version is {record.get('kit_version')!r}, this pptmc's is "
                         f"{kit_version()!r} (its microbenchmarks, benchmarks or runner differ); build a new kit "
                         f"with `pptmc machines probe-kit -o KIT` and {rerun}")
    if record.get("complete") is not True:
        raise InputError(f"{path / 'kit.json'}: complete is {record.get('complete')!r}: run.py did not finish "
                         f"({(record.get('steps') or [{}])[-1]}); {rerun}")
    files = record.get("files") or {}
    for name in RESULT_FILES:
        if name not in files:
            raise InputError(f"{path / 'kit.json'}: files.{name} missing; {rerun}")
        if not (path / name).is_file() or sha256(path / name) != files[name]:
            raise InputError(f"{path / name}: missing, truncated or changed (its sha256 differs from "
                             f"kit.json files.{name}); {rerun}")
    facts, raw, native = (_json(path / name, rerun) for name in RESULT_FILES)
    if record.get("effort") not in probeplan.EFFORTS:
        raise InputError(f"{path / 'kit.json'}: effort is {record.get('effort')!r}, not one of "
                         f"{', '.join(probeplan.EFFORTS)}; {rerun}")
    try:
        problems = probeplan.raw_problems(probeplan.plan(facts, probeplan.EFFORTS[record["effort"]]), raw)
    except (KeyError, TypeError, ValueError, probeplan.ProbeError) as exc:
        raise InputError(f"{path / 'facts.json'}: not the host facts run.py writes ({type(exc).__name__}: "
                         f"{exc}); {rerun}") from exc
    if problems:
        raise InputError(f"{path / 'probes.json'}: {'; '.join(problems)}; {rerun}")
    return ProbeResults(path=path, record=record, facts=facts, raw=raw, native=native)


def results_machine(res: ProbeResults, name: str | None = None) -> dict:
    """The machine file (a validated dict) of the probed host, by detect's own formulas."""
    flags = set(res.facts["flags"])
    data = machine_from_raw(res.facts, res.raw, res.record["effort"],
                            llvm_processor(lambda _msg: None, flags, ask_clang=False),
                            measured_by="the pptmc probe kit (run.py)", date=res.record.get("finished", "")[:10])
    if name:
        data["name"] = name
    return data


def results_measured(res: ProbeResults) -> pd.DataFrame:
    """The kit's native times as measure's table (median, min, max per benchmark and thread count)."""
    from pptmc.measure import sample_table

    samples = res.native.get("samples") or {}
    return sample_table({(bench, int(t)): times for bench, per in samples.items() for t, times in per.items()})


def ingested_runs(res: ProbeResults, select: Callable[[str], Sequence], benchmarks: str | None = None,
                  threads: Sequence[int] | None = None) -> tuple[list, tuple[int, ...], pd.DataFrame]:
    """(benchmarks, thread counts, measured table) of a probe kit's checked results:
    those named (comma-separated, picked by `select`; default all it measured) on the thread counts asked
    (default all it measured), its times on them only; InputError naming what the results lack."""
    measured = results_measured(res)
    names = sorted(set(measured["benchmark"]))
    benches = list(select(benchmarks or ",".join(names)))
    unmeasured = [b.name for b in benches if b.name not in names]
    if unmeasured:
        raise InputError(f"--benchmarks {','.join(unmeasured)}: {res.path / 'native.json'} has no times for them; "
                         f"it has {','.join(names)}")
    threads = tuple(threads) if threads else tuple(sorted(set(measured["cores"])))
    missing = sorted(set(threads) - set(measured["cores"]))
    if missing:
        raise InputError(f"--threads {','.join(map(str, missing))}: {res.path / 'native.json'} has times on "
                         f"{','.join(map(str, sorted(set(measured['cores']))))} threads only")
    return benches, threads, measured[measured["cores"].isin(threads)]
