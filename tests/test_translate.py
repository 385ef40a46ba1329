"""translate/: the outlined program behaves like the OpenMP original and has the Fig. 3 structure."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from common.errors import InputError, PptmcError
from common.toolchain import toolchain
from pptmc import cli
from translate import runtime_sources, translate_file

REPO = Path(__file__).resolve().parents[1]
CASES = REPO / "tests" / "translate_cases"
BENCH = REPO / "benchmarks" / "polybench"
THREADS = (1, 2, 4, 8)
CASE_FILES = sorted(CASES.glob("*.c"))
BENCH_FILES = sorted(p for p in BENCH.glob("*.c") if p.name != "pbench.c")

# A strong definition of the loop markers that prints every event (overrides xomp.c's weak no-ops).
MARKER_PRINTER = r"""
#include <stdio.h>
extern int xomp_trace_enabled;
__attribute__((constructor)) static void on(void) { xomp_trace_enabled = 1; }
void XOMP_trace_loop_begin(int id, long trip, int sched, long chunk)
{ fprintf(stderr, "B %d %ld %d %ld\n", id, trip, sched, chunk); }
void XOMP_trace_iteration(int id, long it) { fprintf(stderr, "I %d %ld\n", id, it); }
long XOMP_trace_piece(int id, long k, long hi) { (void)hi; XOMP_trace_iteration(id, k); return k + 1; }
void XOMP_trace_loop_end(int id) { fprintf(stderr, "E %d\n", id); }
"""


@pytest.fixture(scope="session")
def xomp_obj(tmp_path_factory) -> Path:
    """The XOMP runtime compiled once."""
    tc = toolchain()
    xomp_c, inc = runtime_sources()
    obj = tmp_path_factory.mktemp("xomp") / "xomp.o"
    subprocess.run([str(tc.clang), "-O1", "-c", *tc.openmp_compile_flags(), f"-I{inc}", str(xomp_c),
                    "-o", str(obj)], check=True)
    return obj


def _compile(sources: list[Path], exe: Path, flags: list[str]) -> None:
    """Build an OpenMP program with clang-19."""
    tc = toolchain()
    cmd = [str(tc.clang), "-O1", "-w", *tc.openmp_compile_flags(), *flags, *map(str, sources),
           "-o", str(exe), *tc.openmp_link_flags(), "-lm"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def _run(exe: Path, threads: int, stderr: bool = False) -> str:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    res = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stderr if stderr else res.stdout


def _same_output(got: str, want: str, rel: float = 1e-9) -> bool:
    """Token-wise equality; numbers may differ by a relative `rel` (floating-point reductions)."""
    a, b = got.split(), want.split()
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x == y:
            continue
        try:
            fx, fy = float(x.split("=")[-1]), float(y.split("=")[-1])
        except ValueError:
            return False
        if abs(fx - fy) > rel * max(abs(fx), abs(fy), 1e-300):
            return False
    return True


def _round_trip(src: Path, tmp: Path, xomp_obj: Path, defines=(), extra=()) -> None:
    """Original and translated program print the same for every thread count."""
    flags = [f"-I{src.parent}", *(f"-D{d}" for d in defines)]
    orig = tmp / "orig"
    _compile([src, *extra], orig, flags)
    out_c = tmp / f"{src.stem}.out.c"
    result = translate_file(src, out_c, defines=defines)
    assert result.regions, "every test program has a parallel region"
    text = out_c.read_text()
    for r in result.regions:
        fn = text.index(f"static void {r.name}(void *__out_argv)")
        assert fn < text.index(f"shared_var_trace{r.n}: {{}}", fn) < text.index(f"other_trace{r.n}: {{}}", fn)
        assert f"XOMP_parallel_start({r.name}, " in text or f"XOMP_parallel_start_num_threads({r.name}, " in text
    assert "#pragma omp" not in text.replace("#pragma omp task", "")  # #if 0 text may keep one
    trans = tmp / "trans"
    _compile([out_c, xomp_obj, *extra], trans, flags + [f"-I{runtime_sources()[1]}"])
    want = _run(orig, 1)
    assert want.strip()
    for t in THREADS:
        got = _run(trans, t)
        assert _same_output(got, want), f"OMP_NUM_THREADS={t}:\n{got}\nexpected:\n{want}"


@pytest.mark.parametrize("src", CASE_FILES, ids=[p.stem for p in CASE_FILES])
def test_construct_program_round_trips(src, tmp_path, xomp_obj):
    _round_trip(src, tmp_path, xomp_obj)


@pytest.mark.parametrize("src", BENCH_FILES or [None], ids=[p.stem for p in BENCH_FILES] or ["none"])
def test_benchmark_round_trips(src, tmp_path, xomp_obj):
    if src is None:
        pytest.skip("no benchmarks/polybench/*.c yet (another engineer is writing them)")
    _round_trip(src, tmp_path, xomp_obj, defines=("MINI_DATASET",), extra=(BENCH / "pbench.c",))


def test_fig2_comes_out_with_fig3_structure(tmp_path):
    out = tmp_path / "fig2.out.c"
    result = translate_file(CASES / "fig2.c", out)
    text = out.read_text()
    (region,) = result.regions
    name = region.name
    assert re.fullmatch(r"OUT__1__\d{1,4}__", name)
    # struct of pointers to the shared variables
    struct = re.search(r"struct (\w+) \{\s*void \*n_p;\s*void \*sum_p;\s*\};", text)
    assert struct
    # call site: fill the struct, start and end the region
    call = re.search(rf"struct {struct.group(1)} (\w+);.*XOMP_parallel_start\({name}, &\1\);\s*"
                     r"XOMP_parallel_end\(\);", text, re.S)
    assert call and "((void *)(&n))" in call.group(0) and "((void *)(&sum))" in call.group(0)
    # outlined function: label, unpacking, label, body, in that order
    fn = text[text.index(f"static void {name}(void *__out_argv)"):]
    pos = [fn.index(s) for s in ("shared_var_trace1: {}", f"int *n = (int *)(((struct {struct.group(1)} *)",
                                 "other_trace1: {}", "XOMP_loop_start", "sum = sum + i;",
                                 "*__sh_sum = *__sh_sum + sum;", "XOMP_loop_end")]
    assert pos == sorted(pos)
    shared_block = fn[pos[0]:pos[2]]
    assert shared_block.count("__out_argv)->") == 2  # n_p and sum_p, nothing else
    assert "XOMP_atomic_start(); *__sh_sum" in fn  # reduction combined atomically (Fig. 3 l. 31-33)
    # the original pragma is gone and the call happens inside main
    assert "#pragma omp" not in text
    assert "XOMP_init(0, 0);" in text[text.index("int main()"):]
    assert text.index(f"static void {name}") < text.index("int main()") < text.index(f"XOMP_parallel_start({name}")


def test_region_names_are_stable_across_runs(tmp_path):
    a = translate_file(CASES / "sync.c", tmp_path / "a.c")
    b = translate_file(CASES / "sync.c", tmp_path / "b.c")
    assert [r.name for r in a.regions] == [r.name for r in b.regions]
    assert (tmp_path / "a.c").read_text() == (tmp_path / "b.c").read_text()


def _regions(name: str, tmp_path: Path, defines=()):
    return translate_file(CASES / name, tmp_path / "out.c", defines=defines).regions


def test_sharing_matches_hand_classification(tmp_path):
    (fig2,) = _regions("fig2.c", tmp_path)
    assert (set(fig2.shared), set(fig2.private), fig2.reductions) == ({"n", "sum"}, {"i"}, [("+", "sum")])

    (inside,) = _regions("parallel_for_inside.c", tmp_path)
    # i is shared by OpenMP's rules but only used inside `for` loops that privatise it: not passed
    assert set(inside.shared) == {"n", "x", "y", "scale"} and inside.private == ["j"]

    first, second = _regions("private_clauses.c", tmp_path)
    assert set(first.shared) == {"n", "a", "last"}
    assert set(first.private) == {"t", "i"}
    assert (first.firstprivate, first.lastprivate) == (["base"], ["last"])
    assert set(second.shared) == {"n", "b", "k", "i", "last"} and second.firstprivate == ["base"]

    (mac,) = _regions("macros.c", tmp_path)
    assert set(mac.shared) == {"n", "m", "alpha", "acc", "A", "B"} and mac.private == ["j"]
    assert [(lp.schedule, lp.nowait) for lp in mac.loops] == [("static", False), ("single", True),
                                                             ("static", False)]

    (dflt_none, dflt_shared) = _regions("default_shared.c", tmp_path)
    assert set(dflt_none.shared) == {"a", "n", "m"} and dflt_none.private == ["i"]
    assert "g_total" not in dflt_shared.shared  # globals stay globals


def test_loop_info_records_schedules_and_ids(tmp_path):
    first, second = _regions("schedules.c", tmp_path)
    assert [(lp.loop_id, lp.schedule, lp.chunk) for lp in first.loops] == [
        (0, "static", ""), (1, "static", "7"), (2, "dynamic", ""), (3, "dynamic", "chunk"),
        (4, "guided", ""), (5, "guided", "5")]
    assert [(lp.loop_id, lp.schedule, lp.chunk) for lp in second.loops] == [(6, "dynamic", "4")]
    (_, nested, chunked) = _regions("collapse.c", tmp_path)
    assert nested.loops[0].collapse == 3
    assert [(lp.schedule, lp.chunk, lp.collapse) for lp in chunked.loops] == [("static", "3", 2)]


def _marker_events(src: Path, tmp_path: Path, xomp_obj: Path) -> list[tuple]:
    out_c = tmp_path / "t.c"
    translate_file(src, out_c)
    printer = tmp_path / "markers.c"
    printer.write_text(MARKER_PRINTER)
    exe = tmp_path / "t"
    _compile([out_c, printer, xomp_obj], exe, [f"-I{src.parent}", f"-I{runtime_sources()[1]}"])
    return [tuple(int(x) if x.lstrip("-").isdigit() else x for x in ln.split())
            for ln in _run(exe, 1, stderr=True).splitlines()]


def test_loop_markers_report_normalised_iterations(tmp_path, xomp_obj):
    events = _marker_events(CASES / "fig2.c", tmp_path, xomp_obj)
    assert events == [("B", 0, 500, 0, 0), *[("I", 0, k) for k in range(500)], ("E", 0)]


def test_loop_markers_flatten_collapsed_loops(tmp_path, xomp_obj):
    events = _marker_events(CASES / "collapse.c", tmp_path, xomp_obj)
    assert events[0] == ("B", 0, 13 * 17, 0, 0)
    assert [e[2] for e in events if e[:2] == ("I", 0)] == list(range(13 * 17))
    assert events[13 * 17 + 2] == ("B", 1, 4 * 5 * 6, 1, 2)  # collapse(3) schedule(dynamic, 2)


def test_master_and_single_are_one_iteration_constructs(tmp_path, xomp_obj):
    events = _marker_events(CASES / "sync.c", tmp_path, xomp_obj)
    begins = [e for e in events if e[0] == "B"]
    # per time step: for, master, for, single; 4 time steps
    assert [(b[1], b[3]) for b in begins[:4]] == [(0, 0), (1, 3), (2, 0), (3, 4)]
    assert len(begins) == 16
    assert [b[2] for b in begins if b[1] in (1, 3)] == [1] * 8
    assert ("I", 1, 0) in events and ("I", 3, 0) in events


@pytest.mark.parametrize("construct", ["task", "sections", "simd", "target", "taskloop", "parallel sections",
                                       "for simd", "teams"])
def test_unsupported_construct_is_an_error_with_location(tmp_path, construct):
    src = tmp_path / "bad.c"
    body = "{\n#pragma omp section\n a[0] = 1;\n}" if "sections" in construct else \
        "for (i = 0; i < 10; i++) a[i] = i;"
    src.write_text(f"int main(void)\n{{\n  int i, a[10];\n#pragma omp {construct}\n  {body}\n  return a[3];\n}}\n")
    with pytest.raises(InputError, match=r"bad\.c:4:1: .*not supported"):
        translate_file(src, tmp_path / "out.c")
    assert not (tmp_path / "out.c").exists()


@pytest.mark.parametrize("pragma, message", [
    ("parallel for privte(i)", r"bad\.c:4:\d+: extra tokens"),
    ("parallel for schedule(dynamik)", r"bad\.c:4:\d+: expected 'static'"),
    ("parallel for schedule(monotonic: dynamic)", r"schedule\(monotonic : dynamic\) is not supported"),
    ("parallel for proc_bind(close)", r"bad\.c:4:\d+: clause 'proc_bind' .* not supported"),
    ("parallel for reduction(/:i)", r"not supported|expected"),
])
def test_misspelt_or_unsupported_clause_is_an_error(translate_rejects, pragma, message):
    translate_rejects("bad.c", f"int main(void)\n{{\n  int i, a[10];\n#pragma omp {pragma}\n"
                      f"  for (i = 0; i < 10; i++) a[i] = i;\n  return a[3];\n}}\n",
                      message)


def test_nested_parallel_is_outlined_and_started_from_the_outer_region(tmp_path):
    outer, inner, inner_for = _regions("nested.c", tmp_path)
    text = (tmp_path / "out.c").read_text()
    inner_fn = text.index(f"static void {inner.name}(void *__out_argv)")
    outer_fn = text.index(f"static void {outer.name}(void *__out_argv)")
    call = text.index(f"XOMP_parallel_start({inner.name}, ")
    assert inner_fn < outer_fn < call < text.index("int main(void)")  # started from the outer function
    assert set(inner.shared) == {"n", "a", "inner_threads", "inner_ids", "regions"}
    assert inner.firstprivate == ["me"] and inner.reductions == [("+", "local")]
    assert set(inner_for.shared) == {"n", "count"} and inner_for.reductions == [("+", "count")]
    assert [(lp.schedule, lp.chunk) for lp in inner_for.loops] == [("dynamic", "7")]


def test_sizeof_of_shared_array_is_rejected(translate_rejects):
    translate_rejects("sz.c", "int main(void)\n{\n  double a[10];\n#pragma omp parallel\n  a[0] = sizeof(a);\n"
                      "  return (int)a[0];\n}\n",
                      r"sz\.c:5:\d+: .*shared array 'a'.*not supported")


def test_modified_pointer_and_static_local_are_passed_by_address(tmp_path):
    (region,) = _regions("misc.c", tmp_path)
    assert set(region.shared) == {"p", "counter", "pr"}  # g is a global, i only a loop variable
    text = (tmp_path / "out.c").read_text()
    assert "double * *p = " in text and "(*p)[i]" in text and "(*pr).b" in text


def test_syntax_error_names_file_and_line(translate_rejects):
    translate_rejects("syn.c", "int main(void)\n{\n  return 0\n}\n",
                      r"syn\.c:3:\d+: expected ';'")


def test_default_none_violation_is_reported(translate_rejects):
    translate_rejects("dn.c", "int main(void)\n{\n  int x = 0;\n#pragma omp parallel default(none)\n"
                      "  x = 1;\n  return x;\n}\n",
                      r"dn\.c:5:\d+: .*'x'")


def test_empty_and_missing_files_are_errors(tmp_path):
    empty = tmp_path / "empty.c"
    empty.write_text("")
    with pytest.raises(InputError, match="empty"):
        translate_file(empty, tmp_path / "out.c")
    with pytest.raises(InputError, match="no such file"):
        translate_file(tmp_path / "missing.c", tmp_path / "out.c")


def test_non_canonical_loop_is_an_error(translate_rejects):
    translate_rejects("nc.c", "int main(void)\n{\n  int i, a[10];\n#pragma omp parallel for\n"
                      "  for (i = 0; i != 10; i++) a[i] = i;\n  return a[3];\n}\n",
                      r"nc\.c:4:1: .*canonical form")


def test_cli_prints_one_line_per_region(tmp_path, capsys):
    out = tmp_path / "o.c"
    assert cli.run(["translate", str(CASES / "private_clauses.c"), "-o", str(out)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("line 7: OUT__1__") and "private=t,i,base" in lines[0]
    assert "schedule=static master" in lines[1]
    assert out.is_file()


def test_cli_json_and_defines(tmp_path, capsys):
    out = tmp_path / "o.c"
    assert cli.run(["translate", str(CASES / "reductions.c"), "-o", str(out), "--json", "-D", "UNUSED=1",
                    "-I", str(CASES)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["line"] for r in data["regions"]] == [9, 30]
    assert ["+", "sum"] in data["regions"][0]["reductions"] and ["max", "dmax"] in data["regions"][0]["reductions"]


def test_cli_errors_are_pptmc_errors(tmp_path):
    with pytest.raises(PptmcError, match="no such file"):
        cli.run(["translate", str(tmp_path / "nope.c"), "-o", str(tmp_path / "o.c")])
