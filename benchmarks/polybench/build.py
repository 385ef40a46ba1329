"""Build and run a benchmark as a plain OpenMP program, and read back what its harness prints."""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from benchmarks.polybench.catalog import Benchmark, size_define
from common.errors import InputError, RunError, ToolError
from common.io import atomic_path
from common.toolchain import toolchain

_CHECKSUM = re.compile(r"^PBENCH_CHECKSUM (\S+) n=(\d+) sum=(\S+) wsum=(\S+)$")
_DUMP = re.compile(r"^PBENCH_DUMP (\S+) (\d+)$")
_SECONDS = re.compile(r"^PBENCH_REGION_SECONDS (\S+)$")


@dataclass(frozen=True)
class NativeBuild:
    """A built benchmark binary and whatever clang warned while building it."""

    exe: Path
    warnings: str


@dataclass
class NativeRun:
    """What one run of a benchmark binary reported."""

    checksums: dict[str, str]
    region_seconds: float
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    stdout: str = ""


def compile_command(bench: Benchmark, size: str, output: Path, opt: str = "-O2",
                    extra_flags: Sequence[str] = ()) -> list[str]:
    """The clang command line that builds `bench` at `size` into `output`."""
    tc = toolchain()
    sources = [str(bench.source)] + [str(p) for p in bench.harness_sources]
    return ([str(tc.clang), opt, *tc.openmp_compile_flags(), f"-I{bench.include_dir}", size_define(size),
             *extra_flags, *sources, *tc.openmp_link_flags(), "-lm", "-o", str(output)])


def build_native(bench: Benchmark, size: str, output: Path, opt: str = "-O2",
                 extra_flags: Sequence[str] = ()) -> NativeBuild:
    """Compile `bench` into `output` atomically; raise ToolError carrying clang's message on failure."""
    output = Path(output)
    with atomic_path(output) as tmp:
        cmd = compile_command(bench, size, tmp, opt, extra_flags)
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise ToolError(f"{bench.source}: compilation failed ({' '.join(cmd)}):\n{proc.stderr.strip()}")
        tmp.chmod(0o755)
    return NativeBuild(exe=output, warnings=proc.stderr.strip())


def run_native(exe: Path, threads: int, cold: bool = False, dump: bool = False,
               env: Mapping[str, str] | None = None, timeout: float = 600.0) -> NativeRun:
    """Run a built benchmark with `threads` OpenMP threads and parse its harness output."""
    run_env = dict(os.environ if env is None else env)
    run_env["OMP_NUM_THREADS"] = str(threads)
    run_env["PBENCH_COLD"] = "1" if cold else "0"
    run_env["PBENCH_DUMP"] = "1" if dump else "0"
    try:
        proc = subprocess.run([str(exe)], capture_output=True, text=True, env=run_env, timeout=timeout, check=False)
    except FileNotFoundError as exc:
        raise InputError(f"{exe}: no such program; build it with build_native first") from exc
    except subprocess.TimeoutExpired as exc:
        raise RunError(f"{exe}: still running after {timeout:.0f} s; use a smaller dataset size") from exc
    if proc.returncode != 0:
        raise RunError(f"{exe}: exited with status {proc.returncode}; stderr: {proc.stderr.strip()[-500:]}")
    return parse_output(proc.stdout, proc.stderr, source=str(exe))


def parse_output(stdout: str, stderr: str, source: str = "<output>") -> NativeRun:
    """Read checksum lines, optional array dumps (stdout) and the region time (stderr)."""
    checksums: dict[str, str] = {}
    arrays: dict[str, np.ndarray] = {}
    lines = stdout.splitlines()
    pos = 0
    while pos < len(lines):
        line = lines[pos]
        pos += 1
        if m := _CHECKSUM.match(line):
            checksums[m.group(1)] = line
        elif m := _DUMP.match(line):
            count = int(m.group(2))
            values = lines[pos:pos + count]
            if len(values) != count:
                raise InputError(f"{source}: dump of {m.group(1)} truncated ({len(values)} of {count} values)")
            arrays[m.group(1)] = np.array([float(v) for v in values])
            pos += count
    seconds = [float(m.group(1)) for line in stderr.splitlines() if (m := _SECONDS.match(line.strip()))]
    if not seconds:
        raise InputError(f"{source}: no PBENCH_REGION_SECONDS line on stderr; was it built with pbench.c?")
    return NativeRun(checksums=checksums, region_seconds=sum(seconds), arrays=arrays, stdout=stdout)
