"""Held-out check of the column-update term (analysis/runtime/l1_walks.py, terms/column_walks.update_extra_ns):
two small OpenMP kernels outside the suite that update a matrix down its columns, each at a power-of-two row
length and padded by a line, timed natively on this host and predicted by `pptmc run` with the host's machine
file, with and without its caches[0].column_update_ns.

    python -m benchmarks.column_updates --machine host.toml [--threads 1,2] [-o table.csv]

The machine file must come from `pptmc machines detect` on this host (it needs column_update_ns). Each native
time is the median of 15 runs of the region, each after a 64 MiB flush, threads pinned.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import pandas as pd

from common.errors import InputError
from common.toolchain import toolchain
from machines import load_machine
from machines.loader import dumps_toml, machine_to_dict

HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>
#ifdef TIMED   /* native timing: the region after a 64 MiB flush, 15 times, the median on stderr */
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }
static char flush_buf[64 << 20];
#define RUN(k) do { double t[15]; for (int r = 0; r < 15; r++) { \
  for (size_t q = 0; q < sizeof flush_buf; q += 64) flush_buf[q]++; \
  double t0 = omp_get_wtime(); k(); t[r] = omp_get_wtime() - t0; } \
  qsort(t, 15, sizeof *t, cmp); fprintf(stderr, "region_s %.9f\n", t[7]); } while (0)
#else
#define RUN(k) k()
#endif
"""
KERNELS = {
    # B[j][i] += A[i][j]: B walked down its columns and updated in place (rows N doubles apart)
    "transposed-accumulate": ("""
static double A[N][N], B[N][N];
static void kernel(void) {
#pragma omp parallel for
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++)
      B[j][i] += A[i][j];
}
int main(void) {
  for (int i = 0; i < N; i++) for (int j = 0; j < N; j++) { A[i][j] = (i * 7 + j) % 13; B[i][j] = (i + j) % 5; }
  RUN(kernel);
  double s = 0; for (int i = 0; i < N; i++) for (int j = 0; j < N; j++) s += B[i][j];
  printf("%f\\n", s);
  return 0;
}
""", (512, 520)),
    # A[i][j] += 0.5 A[i-1][j]: a running sum down each column, in place (rows N doubles apart, 512 rows)
    "column-running-sum": ("""
static double A[512][N];
static void kernel(void) {
#pragma omp parallel for
  for (int j = 0; j < N; j++)
    for (int i = 1; i < 512; i++)
      A[i][j] += 0.5 * A[i - 1][j];
}
int main(void) {
  for (int i = 0; i < 512; i++) for (int j = 0; j < N; j++) A[i][j] = (i * 3 + j) % 7;
  RUN(kernel);
  double s = 0; for (int i = 0; i < 512; i++) for (int j = 0; j < N; j++) s += A[i][j];
  printf("%f\\n", s);
  return 0;
}
""", (256, 264)),
}


def native_seconds(source: Path, n: int, threads: int, work: Path) -> float:
    """The region's median time over 15 flushed runs of the native -O2 build, `threads` threads pinned."""
    tc = toolchain()
    binary = work / f"{source.stem}-{n}"
    if not binary.exists():
        subprocess.run([str(tc.clang), "-O2", "-w", *tc.openmp_compile_flags(), "-DTIMED", f"-DN={n}", str(source),
                        "-o", str(binary), *tc.openmp_link_flags()], check=True)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OMP_PROC_BIND": "close", "OMP_PLACES": "cores"}
    out = subprocess.run([str(binary)], env=env, capture_output=True, text=True, check=True).stderr
    return statistics.median(float(line.split()[1]) for line in out.splitlines() if line.startswith("region_s"))


def predicted_seconds(source: Path, n: int, machines: list[Path], threads: list[int], work: Path) -> pd.DataFrame:
    """`pptmc run` on the kernel for each machine file: (machine, cores, runtime_s)."""
    from pptmc.cli import run as pptmc

    out = work / f"run-{source.stem}-{n}"
    pptmc(["run", str(source), "-D", f"N={n}", "--machines", ",".join(map(str, machines)),
           "--cores", ",".join(map(str, threads)), "-o", str(out)])
    return pd.read_csv(out / "runtimes.csv")[["machine", "cores", "runtime_s"]]


def run(machine_file: Path, threads: list[int], work: Path) -> pd.DataFrame:
    """One row per kernel, row length and thread count: native and predicted ms, with and without the term."""
    machine = load_machine(machine_file)
    if not machine.caches[0].column_update_ns:
        raise InputError(f"{machine_file}: no caches[0].column_update_ns; write one with pptmc machines detect -o FILE")
    without = work / "without.toml"
    without.write_text(dumps_toml(machine_to_dict(replace(
        machine, name=f"{machine.name}-without",
        caches=(replace(machine.caches[0], column_update_ns=()), *machine.caches[1:])))))
    rows = []
    for name, (body, sizes) in KERNELS.items():
        source = work / f"{name}.c"
        source.write_text(HARNESS + body)
        for n in sizes:
            pred = predicted_seconds(source, n, [machine_file, without], threads, work)
            for t in threads:
                got = pred[pred.cores == t].set_index("machine")["runtime_s"]
                measured = native_seconds(source, n, t, work)
                rows.append({"kernel": name, "row_doubles": n, "threads": t, "measured_ms": measured * 1e3,
                             "predicted_ms": got[machine.name] * 1e3,
                             "without_term_ms": got[f"{machine.name}-without"] * 1e3})
    table = pd.DataFrame(rows)
    table["error"] = table.predicted_ms / table.measured_ms - 1
    table["error_without_term"] = table.without_term_ms / table.measured_ms - 1
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machine", type=Path, required=True, help="this host's detected machine file")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pptmc-column-updates-") as tmp:
        try:
            table = run(args.machine, [int(t) for t in args.threads.split(",")], Path(tmp))
        except InputError as exc:
            sys.exit(f"column_updates: {exc}")
    print(table.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    if args.output:
        table.to_csv(args.output, index=False)


if __name__ == "__main__":
    main()
