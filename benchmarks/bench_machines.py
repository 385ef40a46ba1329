"""`make bench` rows for `pptmc machines detect`: the host's measured figures and how long detection takes."""
from __future__ import annotations

import time

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
    return rows
