"""translate/: the gaps of issue #3 (local types, macro bounds, atomics, if/runtime, nesting, triangular collapse).

Round trips of the new programs in tests/translate_cases/ run in test_translate.py; these tests
check what a round trip cannot see (the emitted shape, build-time checks, marker values, errors).
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import test_translate as tt
from common.toolchain import toolchain
from translate import runtime_sources, translate_file

CASES = tt.CASES
BENCH = tt.BENCH


@pytest.fixture(scope="module")
def xomp(tmp_path_factory) -> Path:
    """The XOMP runtime compiled once for this module."""
    tc = toolchain()
    xomp_c, inc = runtime_sources()
    obj = tmp_path_factory.mktemp("xomp_gaps") / "xomp.o"
    subprocess.run([str(tc.clang), "-O1", "-c", *tc.openmp_compile_flags(), f"-I{inc}", str(xomp_c),
                    "-o", str(obj)], check=True)
    return obj


def _build(sources: list[Path], exe: Path, flags: list[str]) -> subprocess.CompletedProcess:
    """Compile without asserting, so build failures can be checked."""
    tc = toolchain()
    cmd = [str(tc.clang), "-O1", "-w", *tc.openmp_compile_flags(), *flags, *map(str, sources), "-o", str(exe),
           *tc.openmp_link_flags(), "-lm"]
    return subprocess.run(cmd, capture_output=True, text=True)


def _translate_text(src: Path, tmp: Path, defines=()) -> str:
    out = tmp / f"{src.stem}.out.c"
    translate_file(src, out, defines=defines)
    return out.read_text()


def _outlined(text: str, n: int) -> str:
    """The body of outlined function number n."""
    start = text.index("static void OUT__%d__" % n)
    return text[start:text.index("#pragma clang diagnostic pop", start)]


# ---- 1. local types ------------------------------------------------------------------------------
def test_local_types_are_declared_in_the_outlined_function(tmp_path):
    fn = _outlined(_translate_text(CASES / "local_types.c", tmp_path), 1)
    label = fn.index("shared_var_trace1:")
    for decl in ("struct point { double x, y; };", "typedef struct point point_t;",
                 "enum color { RED = 1, GREEN = 2, BLUE = 4 };", "struct acc { double sum; enum color last; };"):
        assert 0 <= fn.index(decl) < label
    # the VLA typedef reads m, so it comes after m is unpacked and before arrays of row_t are
    grid = fn.index("row_t[8]) *)__out_argv)[0]) *grid = ")
    assert fn.index("int *m = ") < fn.index("typedef double row_t[m];") < grid
    assert "struct local_only" in fn[fn.index("other_trace1:"):]  # declared inside the region: left alone


def test_vla_typedef_bound_is_passed_even_when_the_region_never_names_it(tmp_path):
    result = translate_file(CASES / "local_types.c", tmp_path / "o.c")
    assert set(result.regions[1].shared) == {"m", "grid"}


def test_shared_variable_of_unnamed_struct_is_a_clear_error(translate_rejects):
    translate_rejects("anon.c", "int main(void)\n{\n  struct { int a; } s = { 0 };\n#pragma omp parallel\n  s.a = 1;\n"
                      "  return s.a;\n}\n",
                      r"anon\.c:3:\d+: .*'s' has an unnamed struct.*tag or a typedef")


# ---- 2. macros in emitted types ------------------------------------------------------------------
def test_benchmark_translated_for_one_dataset_builds_for_another(tmp_path, xomp):
    src = BENCH / "2mm.c"
    text = _translate_text(src, tmp_path, defines=("MINI_DATASET",))
    assert "POLYBENCH_2D(,NI,NK,ni,nk)" in text  # the bound macros survive into the outlined code
    flags = [f"-I{BENCH}", "-DSMALL_DATASET", f"-I{runtime_sources()[1]}"]
    assert _build([src, BENCH / "pbench.c"], tmp_path / "orig", flags).returncode == 0
    res = _build([tmp_path / "2mm.out.c", BENCH / "pbench.c", xomp], tmp_path / "trans", flags)
    assert res.returncode == 0, res.stderr
    want = tt._run(tmp_path / "orig", 1)
    for threads in (1, 4):
        assert tt._same_output(tt._run(tmp_path / "trans", threads), want)


MULTI = """#include <stdio.h>
#ifndef LEN
#define LEN 10
#endif
int main(void)
{
#define ROWS LEN
  double a[LEN], b[ROWS][LEN];
  int i;
#pragma omp parallel for private(b)
  for (i = 0; i < LEN; i++) { b[0][i] = i; a[i] = b[0][i] * 2; }
  printf("%g\\n", a[LEN - 1]);
  return 0;
}
"""


def test_clang_spelled_array_type_gets_a_build_time_guard(tmp_path, xomp):
    # ROWS is defined inside main, so not visible at the outlined function: clang spells b's type
    src = tmp_path / "multi.c"
    src.write_text(MULTI)
    out = tmp_path / "multi.out.c"
    translate_file(src, out)
    assert "_Static_assert(sizeof(b) == sizeof(double[10][10])" in out.read_text()
    flags = [f"-I{runtime_sources()[1]}"]
    ok = _build([out, xomp], tmp_path / "same", flags)
    assert ok.returncode == 0, ok.stderr
    assert tt._run(tmp_path / "same", 2).strip() == "18"
    bad = _build([out, xomp], tmp_path / "other", flags + ["-DLEN=20"])
    assert bad.returncode != 0 and "array bounds of 'b' differ from translate time" in bad.stderr


def test_later_declarator_keeps_its_macros(tmp_path, xomp):
    src = tmp_path / "multi2.c"
    src.write_text(MULTI.replace("#define ROWS LEN\n", "").replace("b[ROWS][LEN]", "b[LEN][LEN]"))
    out = tmp_path / "multi2.out.c"
    translate_file(src, out)  # LEN = 10 at translate time
    text = out.read_text()
    assert "_Static_assert" not in text and "__typeof__(double b[LEN][LEN])" not in text
    assert "__typeof__(double[LEN][LEN]) b;" in text  # the private copy, spelled with the macro
    res = _build([out, xomp], tmp_path / "big", [f"-I{runtime_sources()[1]}", "-DLEN=20"])
    assert res.returncode == 0, res.stderr
    assert tt._run(tmp_path / "big", 4).strip() == "38"


# ---- 3. atomics ----------------------------------------------------------------------------------
def test_atomic_forms_become_hardware_atomics(tmp_path):
    text = _translate_text(CASES / "atomics.c", tmp_path)
    assert "XOMP_atomic_start" not in text
    # relaxed, OpenMP's default order (clang's `monotonic`): a seq_cst one made loops reload their bounds
    assert "__atomic_fetch_add(&((*ci)), (2), __ATOMIC_RELAXED);" in text
    assert "__atomic_fetch_sub(&((*ceq)), (2 * i), __ATOMIC_RELAXED);" in text  # ceq = ceq - 2 * i
    # d, deq, dinc, f, dm, drev (floating point), cmul *= 3 (no fetch-multiply) and flip = 7 - flip
    # loop on compare-exchange
    assert text.count("__atomic_compare_exchange(") == 8
    assert "do __an = __ar - __ao;" in text  # flip = 7 - flip keeps its operand order
    assert "__atomic_fetch_add(&((*rev)), (2 * (i % 5)), __ATOMIC_RELAXED);" in text
    assert "*(volatile __typeof__((*flag)) *)&((*flag)) = (7);" in text  # atomic write
    assert "(*snap) = *(volatile __typeof__((*d)) *)&((*d));" in text  # atomic read


def test_a_seq_cst_clause_keeps_the_sequentially_consistent_order(tmp_path):
    src = tmp_path / "order.c"
    src.write_text("int n;\nint main(void)\n{\n#pragma omp parallel\n  {\n#pragma omp atomic seq_cst\n    n += 2;\n"
                   "#pragma omp atomic update seq_cst\n    n++;\n#pragma omp atomic\n    n += 3;\n  }\n  return n;\n}\n")
    text = _translate_text(src, tmp_path)
    assert text.count("__ATOMIC_SEQ_CST);") == 2 and text.count("__ATOMIC_RELAXED);") == 1


@pytest.mark.parametrize("stmt", ["p += 1;", "ld += 1.0L;", "ld = ld * y;"])
def test_pointer_and_long_double_atomics_keep_the_lock(tmp_path, stmt):
    src = tmp_path / "lock.c"
    src.write_text("int main(void)\n{\n  int x = 0, y = 3; int q[4]; int *p = q; long double ld = 0;\n"
                   "#pragma omp parallel\n"
                   f"  {{\n#pragma omp atomic\n    {stmt}\n  }}\n  return x + (int)(p - q) + (int)ld;\n}}\n")
    text = _translate_text(src, tmp_path)
    assert "XOMP_atomic_start();" in text and "__atomic_" not in text


def test_atomic_capture_is_an_error(translate_rejects):
    translate_rejects("cap.c", "int main(void)\n{\n  int x = 0, v = 0;\n#pragma omp parallel\n  {\n"
                      "#pragma omp atomic capture\n"
                      "    v = x++;\n  }\n  return v;\n}\n",
                      r"cap\.c:6:\d+: .*atomic capture' is not supported")


# ---- 4. if(), schedule(runtime|auto) -----------------------------------------------------------
def _begins(src: Path, tmp_path: Path, xomp: Path, env: dict[str, str]) -> list[tuple[int, ...]]:
    """The loop-begin markers (id, trip, schedule, chunk) of a run with one thread."""
    out_c = tmp_path / "m.c"
    translate_file(src, out_c)
    printer = tmp_path / "markers.c"
    printer.write_text(tt.MARKER_PRINTER)
    exe = tmp_path / "m"
    res = _build([out_c, printer, xomp], exe, [f"-I{src.parent}", f"-I{runtime_sources()[1]}"])
    assert res.returncode == 0, res.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "OMP_NUM_THREADS": "1", **env})
    assert run.returncode == 0, run.stderr
    return [tuple(int(x) for x in ln.split()[1:]) for ln in run.stderr.splitlines() if ln.startswith("B ")]


@pytest.mark.parametrize("omp_schedule, sched, chunk", [("dynamic,3", 1, 3), ("guided,4", 2, 4),
                                                         ("static,5", 0, 5), ("auto", 0, 0)])
def test_runtime_schedule_marker_reports_the_schedule_used(tmp_path, xomp, omp_schedule, sched, chunk):
    begins = _begins(CASES / "if_runtime.c", tmp_path, xomp, {"OMP_SCHEDULE": omp_schedule})
    by_id = {b[0]: b for b in begins}
    assert by_id[2][1:] == (1000, sched, chunk)  # schedule(runtime) loop
    assert by_id[3][1:] == (1000, 0, 0)  # schedule(auto) runs static


def test_if_clause_picks_a_team_of_one(tmp_path):
    text = _translate_text(CASES / "if_runtime.c", tmp_path)
    assert "(small > 100) ? 0 : 1)" in text and "(n > small) ? (int)(3) : 1)" in text


# ---- 6. triangular collapse ----------------------------------------------------------------------
def test_triangular_collapse_markers_use_the_flattened_index(tmp_path, xomp):
    out_c = tmp_path / "t.c"
    translate_file(CASES / "collapse_triangular.c", out_c)
    printer = tmp_path / "markers.c"
    printer.write_text(tt.MARKER_PRINTER)
    exe = tmp_path / "t"
    assert _build([out_c, printer, xomp], exe, [f"-I{runtime_sources()[1]}"]).returncode == 0
    events = [ln.split() for ln in tt._run(exe, 1, stderr=True).splitlines()]
    n = 37
    trips = {int(e[1]): int(e[2]) for e in events if e[0] == "B"}
    assert trips == {0: n * (n - 1) // 2, 1: sum(i + 1 for i in range(n - 1, -1, -2)),
                     2: sum(max(0, 20 - i) for i in range(n))}
    for loop_id, trip in trips.items():
        assert [int(e[2]) for e in events if e[:2] == ["I", str(loop_id)]] == list(range(trip))


@pytest.mark.parametrize("nest, message", [
    ("for (i = 0; i < 8; i++) for (j = 0; j < 8; j += i + 1)",
     r"collapse\(2\) .*the step of loop 2 \('j'\) uses the outer variable 'i'"),
    ("for (i = 0; i < 8; i++) for (j = 0; j < 8; j++) for (k = i; k < 8; k++)",
     r"collapse\(3\) .*lower bound of loop 3 \('k'\) uses the outer variable 'i'"),
])
def test_unsupported_non_rectangular_collapse_is_a_precise_error(translate_rejects, nest, message):
    depth = nest.count("for (")
    translate_rejects("nr.c", f"int main(void)\n{{\n  int i, j, k, s = 0;\n#pragma omp parallel for collapse({depth}) "
                      f"reduction(+:s)\n  {nest} s++;\n  return s;\n}}\n",
                      r"nr\.c:4:1: " + message)


def test_a_loop_longer_than_its_variables_type_counts_stops_with_its_line(tmp_path, xomp):
    """A one-level loop counts its iterations in its variable's type (as clang's `int` index does); 4e9
    iterations of an `int` loop do not fit, and the program stops before its first with a message naming the
    loop's line rather than running a wrapped count."""
    src = tmp_path / "wide.c"
    src.write_text("#include <stdio.h>\nint main(void)\n{\n  long s = 0;\n"
                   "#pragma omp parallel for reduction(+:s)\n"
                   "  for (int i = -2000000000; i < 2000000000; i++) s += i & 1;\n"
                   "  printf(\"%ld\\n\", s);\n  return 0;\n}\n")
    translate_file(src, tmp_path / "wide.out.c")
    res = _build([tmp_path / "wide.out.c", xomp], tmp_path / "wide", [f"-I{runtime_sources()[1]}"])
    assert res.returncode == 0, res.stderr
    run = subprocess.run([str(tmp_path / "wide")], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "OMP_NUM_THREADS": "2"})
    assert run.returncode == 70
    assert "loop at line 5 runs 4000000000 iterations" in run.stderr  # the line of its pragma
