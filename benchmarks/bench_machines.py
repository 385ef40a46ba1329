"""`make bench` rows for `pptmc machines detect` (the host's measured figures and how long detection
takes) and for `pptmc measure` on a few benchmarks (runtime model error on this host, issue #7)."""
from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from machines import validate_machine_dict
from machines.detect import detect_host


def _row(metric: str, value: float, unit: str, lo: float, hi: float) -> dict:
    return {"benchmark": "machines.detect", "metric": metric, "value": round(value, 3), "unit": unit,
            "target": f"{lo} .. {hi}", "ok": bool(lo <= value <= hi)}


def run() -> list[dict]:
    """Run the full detection once; plausibility ranges catch folded chains or broken timers."""
    start = time.perf_counter()
    m = validate_machine_dict(detect_host(quick=False), "detected host")
    seconds = time.perf_counter() - start
    rows = [{"benchmark": "machines.detect", "metric": "wall time", "value": round(seconds, 1), "unit": "s",
             "target": "<= 60", "ok": seconds <= 60},
            _row("frequency (add chain)", m.frequency_ghz, "GHz", 0.5, 6.0)]
    rows += [_row(f"{c.name} latency", c.latency_cycles, "cycles", 1.0, 400.0) for c in m.caches]
    rows += [_row(f"{c.name} recip. throughput", c.recip_throughput_cycles, "cycles", 0.05, 100.0) for c in m.caches]
    rows += [_row("RAM latency", m.ram.latency_ns, "ns", 20.0, 500.0),
             _row("RAM bandwidth, one core", m.ram.bandwidth_one_core_gbs, "GB/s", 1.0, 200.0),
             _row("RAM bandwidth, all cores", m.ram.bandwidth_all_cores_gbs, "GB/s", 1.0, 1000.0)]
    rows += [_row(f"{op} latency", cost.latency, "cycles", 0.5, 100.0) for op, cost in m.ops.items()]
    rows += [_row(f"{op} recip. throughput", cost.recip_throughput, "cycles", 0.05, 100.0)
             for op, cost in m.ops.items()]
    rows += [_row("fork/join, all cores", m.parallel.fork_join_ns, "ns", 10.0, 100_000.0),
             _row("barrier, all cores", m.parallel.barrier_ns, "ns", 10.0, 100_000.0)]
    for t in m.tlbs:  # none when tlb.c finds no step (e.g. huge pages all the way down)
        rows += [_row(f"{t.name} reach", t.entries, "pages", 8, 1 << 16),
                 _row(f"{t.name} miss cost", t.miss_cycles, "cycles", 0.0, 2000.0)]
    return rows + runtime_rows(m)


# A subset that keeps this module near two minutes: one trace + reuse profile per benchmark at MEDIUM.
MEASURE_BENCHMARKS = tuple(os.environ.get("BENCH_MEASURE_BENCHMARKS", "atax,doitgen,gramschmidt,symm").split(","))


def runtime_rows(machine) -> list[dict]:
    """Mean abs error of the runtime model against native region times (median of 5 and fastest run), and the
    medians' own noise (measured_noise), the error the measurement cannot resolve."""
    from pptmc.measure import DEFAULT_SIZE, runtime_summary, validate_runtimes
    from pptmc.suite import SuiteConfig, select_benchmarks

    benches = select_benchmarks(SuiteConfig(outdir=Path("."), benchmarks=MEASURE_BENCHMARKS))
    threads = tuple(sorted({1, min(2, machine.cores)}))
    with tempfile.TemporaryDirectory(prefix="pptmc-bench-measure-") as tmp:
        df = validate_runtimes(benches, DEFAULT_SIZE, threads, Path(tmp), machine, repeats=5)
    rows = []
    for rec in runtime_summary(df).to_dict("records"):
        for key, what in (("mean_abs_error", "median"), ("mean_abs_error_vs_min", "fastest run")):
            value = 100 * rec[key]
            rows.append({"benchmark": "measure.runtime", "unit": "%", "target": "<= 10", "ok": value <= 10,
                         "metric": f"mean abs error vs {what}, {rec['cores']} thread(s), "
                                   f"{','.join(MEASURE_BENCHMARKS)} {DEFAULT_SIZE}", "value": round(value, 1)})
        rows.append({"benchmark": "measure.runtime", "unit": "%", "target": "", "ok": True,
                     "metric": f"measured medians' noise (odd vs even rounds), {rec['cores']} thread(s)",
                     "value": round(100 * rec["mean_measured_noise"], 1)})
    return rows


if __name__ == "__main__":
    for r in run():
        print(f"{r['benchmark']:16s} {r['metric']:70s} {r['value']:>10} {r['unit']:7s} {r['target']:>16s} "
              f"{'ok' if r['ok'] else 'MISS'}")
