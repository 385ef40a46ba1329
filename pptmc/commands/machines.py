"""`pptmc machines list|show|detect|validate|probe-kit|ingest`: inspect, check and create machine files."""
from __future__ import annotations

import argparse
import json
import sys

from machines.curves import curve_note
from machines.loader import dumps_toml, list_machines, load_machine, machine_to_dict, validate_machine_dict
from machines.warnings import machine_warnings
from machines.model import Machine
from common.io import write_text


def _summary(m: Machine) -> str:
    """Human-readable description of a machine."""
    sockets = f" on {m.sockets} sockets ({m.cores_per_socket} each)" if m.sockets > 1 else ""
    lines = [f"{m.name}: {m.description}", f"  cores {m.cores}{sockets}, {m.frequency_ghz} GHz, SIMD "
             f"{m.simd_width_bits} bit, bus {m.bus_width_bytes} B"]
    for c in m.caches:
        scope = "shared" if c.shared else "private"
        lines.append(f"  {c.name}: {c.size_bytes // 1024} KiB, {c.line_bytes} B lines, {str(c.associativity) + '-way' if c.associativity else 'fully associative'}, "
                     f"{scope}, latency {c.latency_cycles} cyc, recip. throughput {c.recip_throughput_cycles} cyc")
    lines.append(f"  RAM: {m.ram.latency_ns} ns, {m.ram.bandwidth_one_core_gbs} GB/s one core, "
                 f"{m.ram.bandwidth_all_cores_gbs} GB/s all cores"
                 + (f", {m.ram.remote_latency_ns} ns from another socket" if m.ram.remote_latency_ns else "")
                 + (f", {m.ram.bandwidth_socket_gbs} GB/s one socket" if m.ram.bandwidth_socket_gbs else ""))
    for op, cost in m.ops.items():
        lines.append(f"  {op:8s} latency {cost.latency:6g}  recip. throughput {cost.recip_throughput:6g}")
    return "\n".join(lines + _optional_lines(m))


def _optional_lines(m: Machine) -> list[str]:
    """The optional tables a machine file has (machines/SCHEMA.md), one line each."""
    lines = [f"  {t.name}: {t.entries} entries of {t.page_bytes // 1024} KiB pages, "
             f"{t.associativity or 'fully associative'}{'-way' if t.associativity else ''}, "
             f"miss +{t.miss_cycles:g} cyc" for t in m.tlbs]
    if m.parallel.fork_join_ns or m.parallel.barrier_ns:
        lines.append(f"  parallel: fork/join {m.parallel.fork_join_ns:g} ns, barrier {m.parallel.barrier_ns:g} ns"
                     + (f", cold start {m.parallel.cold_start_one_ns:g} ns on 1 thread, {m.parallel.cold_start_ns:g} ns"
                        f" on all" if m.parallel.cold_start_ns or m.parallel.cold_start_one_ns else ""))
    if m.reorder_window_ops or m.store_new_line_cycles:
        lines.append(f"  core: reorder window {m.reorder_window_ops:g} ops, long-chain lookahead "
                     f"{m.chain_lookahead_ops:g} ops, store to a new line "
                     f"{m.store_new_line_cycles or m.ops['store'].recip_throughput:g} cyc")
    if m.llvm_mcpu:
        lines.append(f"  in-core loop bound: llvm-mca -mcpu={m.llvm_mcpu}")
    if m.transfer_cycles:
        lines.append(f"  coherence: line from another core's cache {m.transfer_cycles:g} cyc"
                     + (f", store to a line another core holds {m.upgrade_cycles:g} cyc" if m.upgrade_cycles else ""))
    if m.calls:
        lines.append(f"  calls priced: {', '.join(sorted(m.calls))}")
    lines.append(f"  {curve_note(m.curves)}" if m.curves else "  no curves over active cores: the runtime model "
                 "scales the one-core and all-core figures (fallback)")
    return lines


def run_list(args: argparse.Namespace) -> int:
    """Print the shipped machine names with their descriptions."""
    for name in list_machines():
        print(f"{name:24s} {load_machine(name).description}")
    return 0


def run_show(args: argparse.Namespace) -> int:
    """Print one machine, as text or JSON."""
    m = load_machine(args.name)
    print(json.dumps(machine_to_dict(m), indent=2) if args.json else _summary(m))
    return 0


def run_validate(args: argparse.Namespace) -> int:
    """Load a machine file; InputError (non-zero exit) lists every bad field."""
    m = load_machine(args.file)
    for warning in machine_warnings(m):
        print(f"{args.file}: warning: {warning}", file=sys.stderr)
    print(f"{args.file}: valid machine file ({m.name}, {len(m.caches)} cache levels)")
    return 0


def run_detect(args: argparse.Namespace) -> int:
    """Measure this host and write a machine file."""
    from machines.detect import detect_host  # numpy and the microbenchmarks: only when detecting

    data = detect_host(quick=args.quick, progress=lambda msg: print(f"detect: {msg}", file=sys.stderr, flush=True))
    if args.name:
        data["name"] = args.name
    validate_machine_dict(data, str(args.output))
    write_text(args.output, "# Written by `pptmc machines detect`; schema: machines/SCHEMA.md\n" + dumps_toml(data))
    print(f"wrote {args.output}")
    return 0


def run_probe_kit(args: argparse.Namespace) -> int:
    """Write a probe kit: detect's microbenchmarks and the suite's native programs, prebuilt, with a runner."""
    from pptmc.commands.measure import check_size, select
    from pptmc.probekit import build_kit

    benches = select(args.benchmarks)
    size = check_size(args.size, benches)
    manifest = build_kit(args.output, benches, size,
                         progress=lambda msg: print(f"probe-kit: {msg}", file=sys.stderr, flush=True))
    print(f"wrote {args.output} (kit {manifest['kit_version']}, {len(benches)} benchmarks at {size}); on the "
          f"target: python3 {args.output}/run.py -o RESULTS [--threads 1,2,4,...]")
    return 0


def run_ingest(args: argparse.Namespace) -> int:
    """Write the machine file of a probe kit's results, by detect's own formulas."""
    from pptmc.probekit import load_results, results_machine

    res = load_results(args.results)
    data = results_machine(res, args.name)
    validate_machine_dict(data, str(args.output))
    write_text(args.output, f"# Written by `pptmc machines ingest` from {res.path} (probe kit "
               f"{res.record['kit_version']}); schema: machines/SCHEMA.md\n" + dumps_toml(data))
    print(f"wrote {args.output}")
    return 0


def register(subparsers) -> None:
    """Add `pptmc machines ...`."""
    from benchmarks.polybench.catalog import MEASURE_SIZE

    p = subparsers.add_parser("machines", help="list, show, validate, detect or ingest machine descriptions")
    sub = p.add_subparsers(dest="machines_command", metavar="ACTION", required=True)
    sub.add_parser("list", help="shipped machine files").set_defaults(run=run_list)
    show = sub.add_parser("show", help="print one machine")
    show.add_argument("name", help="shipped name or path of a .toml file")
    show.add_argument("--json", action="store_true", help="print the machine as JSON")
    show.set_defaults(run=run_show)
    val = sub.add_parser("validate", help="check a machine file against the schema")
    val.add_argument("file", help="path of a .toml machine file")
    val.set_defaults(run=run_validate)
    det = sub.add_parser("detect", help="measure this host with microbenchmarks and write a machine file")
    det.add_argument("-o", "--output", required=True, help="machine file to write (.toml)")
    det.add_argument("--name", help="machine name to record (default host-<hostname>)")
    det.add_argument("--quick", action="store_true", help="a few seconds of measuring; rougher figures")
    det.set_defaults(run=run_detect)
    kit = sub.add_parser("probe-kit", help="write a self-contained kit that measures a machine without a compiler")
    kit.add_argument("-o", "--output", required=True, help="kit folder to write (replaced if it is a kit)")
    kit.add_argument("--benchmarks", help="comma-separated catalog names to include (default: all 14)")
    kit.add_argument("--size", default=MEASURE_SIZE,
                     help=f"dataset size of the native programs (default {MEASURE_SIZE})")
    kit.set_defaults(run=run_probe_kit)
    ing = sub.add_parser("ingest", help="write a machine file from a probe kit's results folder")
    ing.add_argument("results", help="the folder `python3 KIT/run.py -o RESULTS` wrote")
    ing.add_argument("-o", "--output", required=True, help="machine file to write (.toml)")
    ing.add_argument("--name", help="machine name to record (default host-<the probed host's name>)")
    ing.set_defaults(run=run_ingest)
