"""Pieces: a translated work-shared loop runs its iterations in pieces that the compiler vectorises, cut
where the schedule of a listed core count starts another core's block (translate/README.md, "Pieces")."""
from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from common.toolchain import toolchain
from instrument import build_instrumented, open_trace, piece_cores_of, run_trace, unlisted_piece_cores
from translate import runtime_sources, translate_file

LOOPS = r"""
#include <stdio.h>
#define N 10
#define M 40
static double a[M], b[M];
int main(void)
{
  int i;
  for (i = 0; i < M; i++) b[i] = i;
#pragma omp parallel private(i)
  {
#pragma omp for
    for (i = 0; i < N; i++) a[i] = 2 * b[i];
#pragma omp for schedule(guided)
    for (i = 0; i < M; i++) a[i] += b[i];
#pragma omp for schedule(dynamic, 3)
    for (i = 0; i < N; i++) a[i] -= b[i];
#pragma omp for schedule(static, 4)
    for (i = 0; i < N; i++) a[i] *= b[i];
  }
  printf("%f\n", a[N - 1]);
  return 0;
}
"""

# Hand-computed piece starts of each loop (trip 10; the guided one 40) for core counts {2, 4}:
# static blocks, the first trip % p cores one longer: p=2 [0,5) [5,10); p=4 [0,3) [3,6) [6,8) [8,10)
# guided (libomp, chunk 1): floor(rest / 2p) while rest >= 2p(1 + 1), then 1:
#   p=2 0,10,17,22,26,29,31,33, then 34..39; p=4 0,5,9,12,15,18,20,22,24,26, then 27..39
# dynamic 3 and static 4: their chunks, whatever the core count
EXPECTED = [[0, 3, 5, 6, 8], [0, 5, 9, 10, 12, 15, 17, 18, 20, 22, 24, 26, *range(27, 40)], [0, 3, 6, 9], [0, 4, 8]]


@pytest.fixture(scope="module")
def loops_binary(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("pieces")
    (work / "loops.c").write_text(LOOPS)
    translate_file(work / "loops.c", work / "loops.xomp.c")
    return build_instrumented(work / "loops.xomp.c", work / "loops.inst").binary


def _piece_starts(trace: Path) -> list[list[int]]:
    """Per loop instance, the iterations that carry accesses (each piece reports only its first; -1 marks the
    accesses before the first piece, which every core makes)."""
    reader = open_trace(trace)
    loops, its = [], []
    for ch in reader.chunks():
        loops.append(ch.loop)
        its.append(ch.iteration)
    loop, it = np.concatenate(loops), np.concatenate(its)
    return [sorted(set(it[(loop == k) & (it >= 0)].tolist())) for k in sorted(set(loop.tolist())) if k >= 0]


def test_pieces_start_where_a_listed_core_count_starts_a_block(loops_binary, tmp_path):
    run_trace(loops_binary, [], tmp_path / "t.trace", piece_cores=(4, 2))
    assert _piece_starts(tmp_path / "t.trace") == EXPECTED
    assert open_trace(tmp_path / "t.trace").info.extra["piece_cores"] == [2, 4]


def test_one_core_count_per_iteration_cuts_every_iteration(loops_binary, tmp_path):
    """With every core count from 1 to 10 the static blocks start at every iteration; the guided loop is cut at
    every chunk start the model deals for each of them (the runtime's C rule against handouts.guided_starts)."""
    from analysis.profiles.handouts import guided_starts

    run_trace(loops_binary, [], tmp_path / "t.trace", piece_cores=range(1, 11))
    static, guided = _piece_starts(tmp_path / "t.trace")[:2]
    assert static == list(range(10))
    assert set(guided) == set().union(*(guided_starts(40, p, 0).tolist() for p in range(1, 11)))


def test_bad_piece_core_counts_are_refused(loops_binary, tmp_path):
    from common.errors import InputError

    with pytest.raises(InputError, match="piece core counts"):
        run_trace(loops_binary, [], tmp_path / "t.trace", piece_cores=(0, 2))
    assert not (tmp_path / "t.trace").exists()


def test_a_translated_one_dimensional_loop_vectorises(tmp_path):
    """The piece loop holds no call, so clang -O2 vectorises it as it does the native build's loop."""
    (tmp_path / "loops.c").write_text(LOOPS)
    translate_file(tmp_path / "loops.c", tmp_path / "loops.xomp.c")
    tc = toolchain()
    proc = subprocess.run([str(tc.clang), "-O2", *tc.openmp_compile_flags(), f"-I{runtime_sources()[1]}", "-c",
                           str(tmp_path / "loops.xomp.c"), "-o", str(tmp_path / "x.o"), "-Rpass=loop-vectorize"],
                          capture_output=True, text=True, check=True)
    assert proc.stderr.count("vectorized loop") >= 2  # the static and guided loops at least


def test_core_counts_the_pieces_were_not_cut_for_are_named(loops_binary, tmp_path, capsys):
    from pptmc.commands.args import check_pieces

    run_trace(loops_binary, [], tmp_path / "t.trace", piece_cores=(2, 4))
    listed = piece_cores_of(tmp_path / "t.trace")
    assert unlisted_piece_cores(listed, [2, 4]) is None
    assert "at 3,8 cores" in unlisted_piece_cores(listed, [2, 3, 8])
    check_pieces(tmp_path / "t.trace", [2, 3])
    err = capsys.readouterr().err
    assert "warning" in err and "at 3 cores" in err and "--cores 2,3,4" in err

