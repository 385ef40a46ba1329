"""Per-instance DRAM traffic of a grouped last level (zen2's L3 per 4-core CCX): predicted from the write-back
and instance profiles (analysis/hitrates/dram.py) against the dirty-bit LRU simulator of each instance
(analysis/hitrates/writeback_sim.py) on the same shared traces, for a few small OpenMP kernels.

    python -m benchmarks.dram_instances [--machine zen2-epyc-7702p] [--cores 8,16] [--scale 1.0] [-o FILE]
    python -m benchmarks.dram_instances --polybench gramschmidt,lu --size MEDIUM --llc 1024:hashed:16 --cores 1,4

Prints one row per kernel, thread count, placement and instance (the simulator's figures are the mean over
its frame maps, wb_sim_sd_MB their spread), and a summary row per configuration.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pandas as pd

# Kernels: large arrays, few passes (zen2's 16 MB per CCX needs tens of MB per instance to evict anything).
KERNELS = {
    "scale": ("""
#include <stdio.h>
#include <stdlib.h>
int main(void) {
  long i, n = N;
  double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double));
  for (i = 0; i < n; i++) a[i] = i;
#pragma omp parallel for
  for (i = 0; i < n; i++)
    b[i] = 2.0 * a[i];
  printf("%f\\n", b[n / 2]);
  return 0;
}
""", 6_000_000),
    "transpose": ("""
#include <stdio.h>
static double A[N][N], B[N][N];
int main(void) {
  int i, j;
  for (i = 0; i < N; i++)
    for (j = 0; j < N; j++) A[i][j] = i - j;
#pragma omp parallel for private(j)
  for (i = 0; i < N; i++)
    for (j = 0; j < N; j++)
      B[j][i] = A[i][j];
  printf("%f\\n", B[3][5]);
  return 0;
}
""", 2000),
    "rows-then-columns": ("""
#include <stdio.h>
static double A[N][N];
int main(void) {
  int i, j;
#pragma omp parallel for private(j)
  for (i = 0; i < N; i++)
    for (j = 0; j < N; j++)
      A[i][j] = i + j;
#pragma omp parallel for private(i)
  for (j = 0; j < N; j++)
    for (i = 0; i < N; i++)
      A[i][j] += 1.0;
  printf("%f\\n", A[3][5]);
  return 0;
}
""", 2500),
}


def trace_kernel(name: str, size: int, workdir: Path) -> Path:
    """Translate, instrument and trace one kernel with N = size."""
    import instrument
    import translate

    source = workdir / f"{name}.c"
    source.write_text(KERNELS[name][0])
    defines = (f"N={size}",)
    translated = workdir / f"{name}.xomp.c"
    translate.translate_file(source, translated, defines=defines)
    binary = workdir / f"{name}.inst"
    instrument.build_instrumented(translated, binary, defines=defines)
    out = workdir / f"{name}.pptrace"
    instrument.run_trace(binary, [], out)
    return out


def compare(trace: Path, machine, cores: list[int]) -> pd.DataFrame:
    """Predicted and simulated per-instance DRAM traffic, close and spread, at each thread count."""
    from analysis.hitrates.dram import dram_per_instance
    from analysis.hitrates.rates import writeback_class_bits
    from analysis.hitrates.writeback_sim import simulate_dram_like
    from analysis.profiles.groups import groupings_for
    from analysis.profiles.sweep import compute_profiles

    groupings = tuple(sorted(set(groupings_for([machine], cores, "close")) | set(groupings_for([machine], cores,
                                                                                                "spread"))))
    t0 = time.perf_counter()
    ps = compute_profiles(str(trace), cores, groupings=groupings, writebacks=True,
                          writeback_bits=writeback_class_bits([machine]))
    frames = []
    for placement in ("close", "spread"):
        sim = simulate_dram_like(str(trace), machine, ps, cores, placement)
        for p in cores:
            got = dram_per_instance(ps, machine, p, placement)
            want = sim[sim["cores"] == p].reset_index(drop=True)
            frames.append(pd.DataFrame({
                "cores": p, "placement": placement, "instance": got["instance"], "accesses": got["accesses"],
                "read_pred_MB": got["dram_read_bytes"] / 1e6, "read_sim_MB": want["dram_read_bytes"] / 1e6,
                "wb_pred_MB": got["dram_writeback_bytes"] / 1e6, "wb_sim_MB": want["dram_writeback_bytes"] / 1e6,
                "wb_sim_sd_MB": want["writebacks_sd"] * machine.caches[-1].line_bytes / 1e6,
                "frame_maps": want["frame_maps"]}))
    table = pd.concat(frames, ignore_index=True)
    table.attrs["seconds"] = time.perf_counter() - t0
    return table


def trace_polybench(name: str, size: str, workdir: Path) -> Path:
    """Translate, instrument and trace one built-in benchmark at a catalog size, as the pipeline does."""
    import instrument
    from benchmarks.bench_sampling import build_benchmark

    bench, d = build_benchmark(name, size, workdir)
    instrument.run_trace(d / "trace.inst", bench.args, d / "t.trace")
    return d / "t.trace"


def with_last_level(machine, spec: str):
    """The machine with its last level replaced: spec KIB:INDEXING[:WAYS[:CORES]] (e.g. 1024:hashed:16, one
    instance for every core; 256:hashed:16:4, one per 4 cores), to test the write-back model on a level of
    another size, placement or grouping."""
    import dataclasses

    from common.errors import InputError

    parts = spec.split(":")
    if not 2 <= len(parts) <= 4 or not all(p.isdigit() for p in parts[:1] + parts[2:]):
        raise InputError(f"--llc {spec}: give KIB:INDEXING[:WAYS[:CORES]], e.g. 1024:hashed:16 or 256:hashed:16:4")
    llc = dataclasses.replace(machine.caches[-1], size_bytes=int(parts[0]) << 10, indexing=parts[1],
                              associativity=int(parts[2]) if len(parts) >= 3 else 16, shared=True,
                              cores_per_instance=int(parts[3]) if len(parts) == 4 else 0)
    return dataclasses.replace(machine, name=f"{machine.name}+llc{spec}", caches=machine.caches[:-1] + (llc,))


def traces(args, workdir: Path):
    """(label, trace, N or size) of each kernel asked for: the small kernels above, or built-in benchmarks."""
    if args.polybench:
        for name in args.polybench.split(","):
            yield name, trace_polybench(name, args.size, workdir), args.size
        return
    for name in args.kernels.split(","):
        size = max(8, int(KERNELS[name][1] * args.scale))
        yield name, trace_kernel(name, size, workdir), size


def main() -> None:
    """Trace each kernel, compare, print."""
    from machines import load_machine

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--machine", default="zen2-epyc-7702p")
    ap.add_argument("--cores", default="8,16")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply each kernel's N by this")
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--polybench", help="built-in benchmarks instead of the kernels above (e.g. lu,2mm)")
    ap.add_argument("--size", default="MEDIUM", help="their catalog size (with --polybench)")
    ap.add_argument("--llc", help="replace the last level: KIB:INDEXING[:WAYS[:CORES]] (CORES per instance; "
                    "default one instance for all)")
    ap.add_argument("-o", "--output", type=Path, help="also write the per-instance table as CSV")
    args = ap.parse_args()
    machine = load_machine(args.machine)
    if args.llc:
        machine = with_last_level(machine, args.llc)
    cores = [int(c) for c in args.cores.split(",")]
    tables = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, trace, size in traces(args, Path(tmp)):
            table = compare(trace, machine, cores).assign(kernel=name, N=size)
            tables.append(table)
            summary = table.groupby(["cores", "placement"])[["read_pred_MB", "read_sim_MB", "wb_pred_MB",
                                                               "wb_sim_MB"]].sum()
            print(f"== {name} N={size} ({table.attrs['seconds']:.0f} s)\n{summary.round(3).to_string()}", flush=True)
    full = pd.concat(tables, ignore_index=True)
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(full.round(3).to_string(index=False))
    if args.output:
        full.to_csv(args.output, index=False)


if __name__ == "__main__":
    import sys

    from common.errors import PptmcError

    try:
        main()
    except PptmcError as e:  # a bad --llc or --polybench name: the message, not a traceback
        sys.exit(f"dram_instances: {e}")
