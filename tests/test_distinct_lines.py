"""The trace's distinct-line sketch (footer member `distinct_lines`, instrument/FORMAT.md) and the memory check
made from it before a sweep (analysis/profiles/limits.py). Oracle: the exact number of distinct 64-byte lines
of the decoded trace (numpy unique over every access), and hand-counted engines and bytes."""
from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from analysis.profiles import limits
from common.errors import InputError
from instrument import build_instrumented, open_trace, run_trace
from instrument.distinct_lines import RELATIVE_ERROR, estimate, sketch_registers
from instrument.trace_format import FOOTER_MAGIC, END_MAGIC, TRAILER, read_footer
from pptmc import cli

ROOT = Path(__file__).resolve().parents[1]
POLY = ROOT / "benchmarks" / "polybench"
XOMP = ROOT / "translate" / "runtime"
CASES = Path(__file__).parent / "instrument_cases"

# Three kinds of access for the runtime: a stride-8 sweep (predicted, eight accesses per line), a 4160-byte
# stride (predicted, a new line each time, wrapping around the array), stores to lines an LCG picks
# (mispredicted), and a memset (a sized row: the analysis takes its first byte's line).
SYNTHETIC = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define BIG (1L << 23)
double *A;
static void OUT__1__1__(void *arg) {
  long n = *(long *)arg;
  double s = 0;
  for (long i = 0; i < 8 * n; i++) s += A[i];
  for (long i = 0; i < n; i++) s += A[(i * 520) % BIG];
  unsigned long x = 12345;
  for (long i = 0; i < n; i++) { x = x * 6364136223846793005ul + 1442695040888963407ul; A[(x >> 20) % BIG] += 1; }
  memset(A + BIG / 2, 0, (size_t)n * 64);
  A[0] = s;
}
void (*volatile fn)(void *) = OUT__1__1__;
int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000;
  A = calloc(BIG, sizeof *A);
  if (!A || n < 1 || 8 * n > BIG) return 2;
  fn(&n);
  printf("%f\n", A[0]);
  return 0;
}
"""


def _exact_lines(path: Path) -> tuple[int, np.ndarray]:
    """Distinct 64-byte lines of every decoded access (brute force), and the sketch numpy makes of them."""
    parts, regs = [], np.zeros(1 << 12, np.uint8)
    for chunk in open_trace(path).chunks(columns=("addr",)):
        parts.append(np.unique(chunk.addr >> np.uint64(6)))
        sketch_registers(chunk.addr, regs)
    return len(np.unique(np.concatenate(parts))), regs


def _footer_registers(path: Path) -> np.ndarray:
    """The registers the runtime wrote into the footer."""
    with open(path, "rb") as f:
        footer = read_footer(f, path, path.stat().st_size)[0]
    return np.frombuffer(bytes.fromhex(footer["distinct_lines"]["registers"]), np.uint8)


def _needs_clang() -> None:
    """Skip where the tracer's toolchain is missing."""
    if shutil.which("clang-19") is None:
        pytest.skip("clang-19 not installed")


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> dict[str, Path]:
    """Traces of the synthetic program, an OpenMP program on two threads, and PolyBench lu (SMALL)."""
    _needs_clang()
    work = tmp_path_factory.mktemp("distinct")
    (work / "synthetic.c").write_text(SYNTHETIC)
    out = {}
    binary = build_instrumented(work / "synthetic.c", work / "synthetic").binary
    out["synthetic"] = work / "synthetic.trace"
    run_trace(binary, ["60000"], out["synthetic"])
    binary = build_instrumented(CASES / "omp_static.c", work / "omp", functions=r"\.omp_outlined").binary
    out["omp"] = work / "omp.trace"
    run_trace(binary, ["100000"], out["omp"], threads=2)
    subprocess.run([sys.executable, "-m", "pptmc.cli", "translate", str(POLY / "lu.c"), "-o", str(work / "lu.c"),
                    "-I", str(POLY), "-D", "SMALL_DATASET"], check=True, cwd=ROOT, capture_output=True)
    binary = build_instrumented(work / "lu.c", work / "lu", include_dirs=[POLY, XOMP], defines=["SMALL_DATASET"],
                                extra_sources=[XOMP / "xomp.c", POLY / "pbench.c"]).binary
    out["lu"] = work / "lu.trace"
    run_trace(binary, [], out["lu"])
    return out


@pytest.mark.parametrize("name", ["synthetic", "omp", "lu"])
def test_estimate_is_within_five_percent_of_the_exact_count(traces, name):
    """The footer's estimate against the brute-force count; the runtime's registers are the ones numpy makes
    from the decoded accesses, so it saw every access, the predicted ones too (and merged the threads)."""
    path = traces[name]
    exact, regs = _exact_lines(path)
    got = open_trace(path).info.distinct_lines_estimate
    assert got is not None and abs(got - exact) <= 0.05 * exact, (name, got, exact)
    assert np.array_equal(_footer_registers(path), regs)
    if name == "synthetic":  # the sketch's regime, not linear counting: about 200 k lines
        assert exact > 150_000
    if name == "omp":
        assert open_trace(path).info.n_threads == 2


@pytest.mark.parametrize("n", [1, 37, 3000, 40_000, 700_000])
def test_estimate_of_random_line_sets(n):
    """numpy's sketch of n distinct random lines (each touched at two addresses) estimates n within 5 %."""
    rng = np.random.default_rng(n)
    lines = rng.choice(1 << 40, size=n, replace=False).astype(np.uint64)
    addr = np.concatenate([lines << np.uint64(6), (lines << np.uint64(6)) + np.uint64(63)])
    assert abs(estimate(sketch_registers(addr)) - n) <= 0.05 * n
    assert estimate(np.zeros(1 << 12, np.uint8)) == 0


def _without_sketch(src: Path, dst: Path) -> None:
    """A copy of a trace whose footer lacks distinct_lines, as pptmc wrote them before the sketch."""
    data = src.read_bytes()
    (start,) = struct.unpack("<Q", data[-TRAILER.size:-8])
    with open(src, "rb") as f:
        footer = read_footer(f, src, len(data))[0]
    del footer["distinct_lines"]
    body = json.dumps(footer).encode()
    dst.write_bytes(data[:start] + struct.pack("<4sI", FOOTER_MAGIC, len(body)) + body
                    + struct.pack("<I", zlib.crc32(body)) + TRAILER.pack(start, END_MAGIC))


def test_a_trace_without_the_sketch_still_loads(traces, tmp_path, monkeypatch, capsys):
    """No estimate (None, null in trace-info), the same accesses, and the memory check as before."""
    old = tmp_path / "old.trace"
    _without_sketch(traces["lu"], old)
    reader = open_trace(old)
    assert reader.info.distinct_lines_estimate is None and reader.distinct_lines_estimate is None
    assert reader.info.n_accesses == open_trace(traces["lu"]).info.n_accesses
    assert _exact_lines(old)[0] == _exact_lines(traces["lu"])[0]
    assert cli.run(["trace-info", str(old), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["distinct_lines_estimate"] is None
    monkeypatch.setattr(limits, "available_bytes", lambda: 1 << 20)  # 1 MiB: above 1 core's buffers only
    limits.check_memory([1], str(old))
    with pytest.raises(InputError, match=r"per-core buffers") as err:
        limits.check_memory([1, 2, 4], str(old))
    assert "distinct" not in str(err.value)


def test_trace_info_prints_the_estimate(traces, capsys):
    """trace-info shows the footer's estimate, in text and in --json."""
    assert cli.run(["trace-info", str(traces["lu"])]) == 0
    text = capsys.readouterr().out
    assert cli.run(["trace-info", str(traces["lu"]), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["distinct_lines_estimate"]
    assert got == open_trace(traces["lu"]).info.distinct_lines_estimate and f"distinct_lines_estimate: {got}" in text


def test_engine_count_by_hand():
    """Private engines (one per core), a CRD engine per count > 1, the one-core lead, the line numbering."""
    assert limits.engine_count([1]) == 1
    assert limits.engine_count([1, 2, 4]) == 7 + 2 + 0 + 1
    assert limits.engine_count([2, 4, 8]) == 14 + 3 + 1 + 1
    assert limits.engine_count([4, 4]) == 4 + 1 + 0 + 1


def test_engine_count_with_set_classes_and_groupings_by_hand():
    """Per set-class width, a class engine per core of each count and one shared-role engine per count > 1;
    per grouping, one CRD engine per instance; none given: the plain count."""
    assert limits.engine_count([1, 2, 4], (), ()) == 10
    assert limits.engine_count([1, 2, 4], (6,)) == 10 + (7 + 2)
    assert limits.engine_count([1, 2, 4], (6, 9)) == 10 + 2 * (7 + 2)
    assert limits.engine_count([1], (6,)) == 1 + 1
    assert limits.engine_count([1, 2, 4], groupings=((0, 0, 1, 1),)) == 10 + 2
    assert limits.engine_count([1, 2, 4], (6,), ((0, 1), (0, 0, 1, 1), (0, 1, 2, 3))) == 10 + 9 + 2 + 2 + 4
    assert limits.engine_count([2, 4, 8], (6,), ((0, 0, 0, 0, 1, 1, 1, 1),)) == 19 + (14 + 3) + 2


def test_check_memory_refuses_what_the_estimate_does_not_fit(traces, monkeypatch):
    """Below the need computed by hand from the estimate: refused, naming the estimate and the free memory;
    at the need: accepted."""
    trace = str(traces["synthetic"])
    est = open_trace(trace).info.distinct_lines_estimate
    lines = -(-est * (1 + 3 * RELATIVE_ERROR) // 1)
    need = 7 * (256 << 10) + int(lines) * 48 * 10  # cores 1,2,4: 7 cores' buffers, 10 engines of 48 B a line
    monkeypatch.setattr(limits, "available_bytes", lambda: need)
    limits.check_memory([1, 2, 4], trace)
    monkeypatch.setattr(limits, "available_bytes", lambda: need - 1)
    with pytest.raises(InputError) as err:
        limits.check_memory([1, 2, 4], trace)
    msg = str(err.value)
    assert f"about {est:,} distinct 64-byte lines" in msg and f"{(need - 1) / 2**30:.1f} GiB is free" in msg
    assert "10 reuse engines" in msg and "--sample-rate" in msg and "fewer or smaller core counts" in msg
    # a 32-byte line may split every sketched line in two
    assert limits.lines_bound(est, 32) == 2 * limits.lines_bound(est)


def test_profile_refuses_before_any_work_without_a_traceback(traces, tmp_path, monkeypatch, capsys):
    """`pptmc profile` exits non-zero with the estimate's message and no traceback; the sweep never starts."""
    import analysis.profiles.sweep

    def no_sweep(*args: object, **kwargs: object) -> None:
        """Stands in for the sweep, which must not start."""
        raise AssertionError("the sweep started")

    monkeypatch.setattr(analysis.profiles.sweep, "compute_profiles", no_sweep)
    monkeypatch.setattr(limits, "available_bytes", lambda: 64 << 20)  # 64 MiB: above the buffers
    with pytest.raises(SystemExit) as code:
        cli.main(["profile", str(traces["synthetic"]), "--cores", "1,2,4,8", "-o", str(tmp_path / "p")])
    err = capsys.readouterr().err
    assert code.value.code != 0 and "Traceback" not in err
    assert err.startswith("pptmc: error: ") and "distinct 64-byte lines" in err and "0.1 GiB is free" in err
    assert not (tmp_path / "p").exists()


def test_profile_counts_its_line_size_set_classes_and_groupings(traces, tmp_path, monkeypatch, capsys):
    """`pptmc profile --line-size 32 --set-bits 6 --machines zen2-epyc-7702p --placement spread` checks 32-byte
    lines (twice the sketch's bound) and 17 engines: cores 1,4 give 5 private + 1 CRD + the line numbering, the
    width 6 another 5 + 1, and spread's grouping of 4 threads (four CCXs) 4 instance CRDs."""
    import analysis.profiles.sweep

    def no_sweep(*args: object, **kwargs: object) -> None:
        """Stands in for the sweep, which must not start."""
        raise AssertionError("the sweep started")

    monkeypatch.setattr(analysis.profiles.sweep, "compute_profiles", no_sweep)
    monkeypatch.setattr(limits, "available_bytes", lambda: 1 << 20)
    est = open_trace(traces["synthetic"]).info.distinct_lines_estimate
    lines = 2 * int(-(-est * (1 + 3 * RELATIVE_ERROR) // 1))
    with pytest.raises(SystemExit):
        cli.main(["profile", str(traces["synthetic"]), "--cores", "1,4", "--line-size", "32", "--set-bits", "6",
                  "--machines", "zen2-epyc-7702p", "--placement", "spread", "-o", str(tmp_path / "p")])
    err = capsys.readouterr().err
    assert f"up to {lines:,} counted" in err and "17 reuse engines" in err


def test_pipeline_profile_step_passes_its_line_size_set_classes_and_groupings(traces, tmp_path, monkeypatch):
    """The pipeline's profile step checks memory for its line size, the set-class width zen2's L1 needs (its
    64 sets: 6 bits) and the grouping spread gives 4 threads on zen2's 4-core CCXs (one each)."""
    from analysis.options import ModelOptions
    from pptmc.pipeline import PipelineConfig, profile_step

    seen = []

    def record(*args: object) -> None:
        """Stands in for the check: keeps its arguments and stops the step."""
        seen.append(args)
        raise InputError("stop")

    monkeypatch.setattr(limits, "check_memory", record)
    cfg = PipelineConfig(tmp_path / "prog.c", tmp_path / "work", machines=("zen2-epyc-7702p",), cores=(1, 4),
                         options=ModelOptions(placement="spread"), line_size=32)
    with pytest.raises(InputError, match="stop"):
        profile_step(cfg, traces["synthetic"], lambda _: None)
    assert seen == [([1, 4], str(traces["synthetic"]), 32, (6,), ((0, 1, 2, 3),))]


def test_suite_memory_lines_read_the_footer_or_count(traces, tmp_path):
    """The suite's memory sizing: the footer's estimate to three standard errors (at least the exact count,
    brute force) where the trace has it, and the exact count of a trace without it; accesses either way."""
    from pptmc.suite_tasks import memory_lines

    trace = traces["lu"]
    exact = _exact_lines(trace)[0]
    est = open_trace(trace).info.distinct_lines_estimate
    n = sum(len(ch.addr) for ch in open_trace(trace).chunks(columns=("addr",)))
    assert memory_lines(trace) == (int(-(-est * (1 + 3 * RELATIVE_ERROR) // 1)), n)
    assert memory_lines(trace)[0] >= exact
    old = tmp_path / "old.trace"
    _without_sketch(trace, old)
    assert memory_lines(old) == (exact, n)
