"""translate/: issue #29 (other people's programs): what a region sees, all errors, build inputs.

Round trips of tests/translate_cases/visibility.c and block_decls.c run in test_translate.py; these
tests check the emitted shape, the error messages and the build-inputs marker.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import test_translate as tt
from common.errors import InputError
from common.toolchain import toolchain
from pptmc import cli
from translate import BuildInputs, build_inputs_of, translate_file

CASES = tt.CASES

ISSUE_PROGRAM = r"""#include <stdio.h>
#include <math.h>
#include "kernel.h"
int main(void)
{
  double x[N], y[N];
  int j;
  for (j = 0; j < N; j++) x[j] = j;
#define sqrt_of_array_cell(x,j) sqrt(x[j])
#pragma omp parallel for
  for (j = 0; j < N; j++)
    y[j] = sqrt_of_array_cell(x, j) * SCALE;
  printf("%.6f %.6f\n", y[N - 1], y[2]);
  return 0;
}
"""


def _program(folder: Path) -> Path:
    """The issue's program, with a local header, in its own folder."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.h").write_text("#define N 100\n#define SCALE 3\n")
    src = folder / "issue.c"
    src.write_text(ISSUE_PROGRAM)
    return src


def _run(exe: Path, threads: int) -> str:
    """The program's stdout with OMP_NUM_THREADS=threads."""
    res = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
    assert res.returncode == 0, res.stderr
    return res.stdout


def _build_and_run(sources: list[Path], exe: Path, flags: list[str]) -> str:
    """Compile with clang-19 -fopenmp and return the program's stdout (1 and 4 threads must agree)."""
    tc = toolchain()
    res = subprocess.run([str(tc.clang), "-O1", *tc.openmp_compile_flags(), *flags, *map(str, sources),
                          "-o", str(exe), *tc.openmp_link_flags(), "-lm"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    outs = {_run(exe, t) for t in (1, 4)}
    assert len(outs) == 1
    return outs.pop()


def test_macro_defined_in_the_function_is_replayed_around_the_outlined_function(tmp_path):
    src = _program(tmp_path / "prog")
    out = tmp_path / "issue.x.c"
    translate_file(src, out)
    text = out.read_text()
    fn = text.index("static void OUT__1__")
    push = text.index('#pragma push_macro("sqrt_of_array_cell")')
    assert push < text.index("#define sqrt_of_array_cell(x,j) sqrt(x[j])", push) < fn
    assert fn < text.index('#pragma pop_macro("sqrt_of_array_cell")') < text.index("int main(void)")


def test_stage_outputs_compose_through_the_build_inputs_marker(tmp_path):
    """A translated copy in another folder builds from its marker alone (local header, xomp.h, xomp.c)."""
    src = _program(tmp_path / "prog")
    want = _build_and_run([src], tmp_path / "orig", [])
    out = tmp_path / "elsewhere" / "issue.x.c"
    out.parent.mkdir()
    translate_file(src, out)
    inputs = build_inputs_of(out)
    assert isinstance(inputs, BuildInputs)
    assert inputs.quote_dirs == [src.parent.resolve()]
    assert (inputs.include_dirs[0] / "xomp.h").is_file() and inputs.extra_sources[0].name == "xomp.c"
    flags = [f"-I{d}" for d in inputs.include_dirs] + [f"-iquote{d}" for d in inputs.quote_dirs]
    got = _build_and_run([out, *inputs.extra_sources], tmp_path / "trans", flags)
    assert got == want


def test_marker_is_the_first_line_and_json(tmp_path):
    out = tmp_path / "o.c"
    translate_file(CASES / "fig2.c", out)
    first = out.read_text().splitlines()[0]
    assert first.startswith("/* pptmc-build-inputs: {") and first.endswith("} */")
    fields = json.loads(first[len("/* pptmc-build-inputs: "):-3])
    assert set(fields) == {"source_dir", "xomp_include_dir", "xomp_source"}
    assert fields["source_dir"] == str(CASES.resolve())


def test_build_inputs_of_other_files(tmp_path):
    plain = tmp_path / "plain.c"
    plain.write_text("int main(void) { return 0; }\n")
    assert build_inputs_of(plain) == BuildInputs([], [], [])
    bad = tmp_path / "bad.c"
    bad.write_text("/* pptmc-build-inputs: {not json} */\nint x;\n")
    with pytest.raises(InputError, match=r"bad\.c:1: malformed"):
        build_inputs_of(bad)


def test_block_scope_prototypes_are_redeclared_in_the_outlined_function(tmp_path):
    out = tmp_path / "o.c"
    translate_file(CASES / "block_decls.c", out)
    body = out.read_text()
    first = body[body.index("static void OUT__1__"):body.index("shared_var_trace1:")]
    assert "double helper(double);" in first and "extern int counter;" in first


def test_no_replay_without_function_local_macros(tmp_path):
    out = tmp_path / "o.c"
    translate_file(CASES / "reductions.c", out)
    assert "push_macro" not in out.read_text()


THREE_ERRORS = """int main(void)
{
  int i, j, s = 0;
#pragma omp parallel for
  for (i = 0; i < 4; i++) {
#pragma omp for
    for (j = 0; j < 4; j++) s += j;
  }
  undeclared_a = 1;
  return s + undeclared_b;
}
"""


def test_every_error_is_listed_with_relative_paths_and_a_nesting_hint(tmp_path, monkeypatch):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "three.c").write_text(THREE_ERRORS)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as err:
        translate_file(Path("src/three.c"), tmp_path / "out.c")
    text = str(err.value)
    assert text.startswith("3 problems in src/three.c:")
    assert "src/three.c:6:1: region cannot be closely nested" in text and "collapse(2)" in text
    assert "src/three.c:9:3: use of undeclared identifier 'undeclared_a'" in text
    assert "src/three.c:10:14: use of undeclared identifier 'undeclared_b'" in text
    assert str(tmp_path) not in text


def test_at_most_ten_errors_are_listed(translate_rejects):
    body = "".join(f"  bad{k} = 1;\n" for k in range(13))
    translate_rejects("many.c", "int main(void)\n{\n" + body + "#pragma omp parallel\n  ;\n}\n",
                      r"13 problems(.|\n)*bad9'\n\.\.\. and 3 more\n")


def test_file_without_a_parallel_region_is_an_error(translate_rejects):
    translate_rejects("none.c", "int main(void) { return 0; }\n", r"none\.c: no '#pragma omp parallel' region;")
    translate_rejects("orph.c", "void f(int *a)\n{\n  int i;\n#pragma omp for\n  for (i = 0; i < 4; i++) a[i] = i;\n}\n",
                      r"orph\.c: no '#pragma omp parallel' region \(only orphaned 'for'\)")


def test_cli_exits_non_zero_without_traceback(tmp_path, monkeypatch, capsys):
    (tmp_path / "none.c").write_text("int main(void) { return 0; }\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as ex:
        cli.main(["translate", "none.c", "-o", "out.c"])
    assert ex.value.code != 0
    err = capsys.readouterr().err
    assert err.startswith("pptmc: error: none.c: no '#pragma omp parallel'") and "Traceback" not in err
