"""Subcommands of the tracer: instrument, trace, count, trace-export, trace-info."""
from __future__ import annotations

import json
from pathlib import Path

from common.errors import InputError
from pptmc.commands.args import add_strict, parse_cores
from common.io import write_json, write_table


def register(sub) -> None:
    """Add the tracer's subcommands to the pptmc parser."""
    p = sub.add_parser("instrument", help="build an instrumented binary of a (translated) C file")
    p.add_argument("source", type=Path)
    p.add_argument("-o", "--output", type=Path, required=True)
    p.add_argument("--functions", default=r"^OUT__", help="regex of functions to instrument (default ^OUT__)")
    p.add_argument("-O", dest="opt", default="2", help="optimisation level of the real build (default 2)")
    p.add_argument("-I", dest="include", action="append", default=[], help="include directory")
    p.add_argument("-D", dest="define", action="append", default=[], help="preprocessor definition")
    p.add_argument("--extra-source", action="append", default=[], type=Path,
                   help="C file compiled and linked uninstrumented (e.g. xomp.c, pbench.c)")
    p.add_argument("--mode", choices=("trace", "count", "native"), default="trace")
    p.set_defaults(run=_instrument)

    p = sub.add_parser("trace", help="run an instrumented binary once and write its memory trace")
    p.add_argument("binary", type=Path)
    p.add_argument("-o", "--output", type=Path)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--cores", default="1,2,4,8,16",
                   help="core counts to predict later: their schedules cut a translated loop into pieces that "
                        "run on one core each and vectorise as the native build does (default 1,2,4,8,16)")
    p.add_argument("program_args", nargs="*", help="the program's arguments (after --)")
    p.set_defaults(run=_trace)

    p = sub.add_parser("count", help="run a count-mode binary; write block and edge counts")
    p.add_argument("binary", type=Path)
    p.add_argument("-o", "--output", type=Path, help=".json (default) or .csv")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--cores", default="1,2,4,8,16", help="as for pptmc trace: the same list gives its block counts")
    p.add_argument("program_args", nargs="*", help="the program's arguments (after --)")
    p.set_defaults(run=_count)

    p = sub.add_parser("trace-export", help="write a trace in the paper's text format")
    p.add_argument("trace", type=Path)
    p.add_argument("-o", "--output", type=Path, required=True)
    add_strict(p)
    p.set_defaults(run=_export)

    p = sub.add_parser("trace-info", help="print a trace's header and footer facts")
    p.add_argument("trace", type=Path)
    p.add_argument("--verify", action="store_true",
                   help="also read every chunk and check every checksum (a corrupt trace is an error)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_info)


def _instrument(a) -> int:
    from instrument.build import build_instrumented

    r = build_instrumented(a.source, a.output, a.functions, a.opt, a.include, a.define, a.extra_source, a.mode)
    print(f"{r.binary}: {r.n_blocks} blocks, {r.n_sites} memory sites ({r.mode} mode); "
          f"side files {r.block_table.name}, {r.cfg.name}, {r.mix_csv.name}")
    return 0


def _trace(a) -> int:
    from instrument.run import run_trace

    prog = list(a.program_args)
    out = a.output or a.binary.with_name(a.binary.name + ".trace")
    info = run_trace(a.binary, prog, out, a.threads, piece_cores=parse_cores(a.cores))
    size = out.stat().st_size
    n = max(info.n_accesses, 1)
    print(f"{out}: {info.n_accesses} accesses, {sum(c for b, c in info.block_counts.items() if not info.blocks[b].is_shared_var_block)} "
          f"blocks entered, {size / n:.3f} bytes/access, {info.extra.get('elapsed_s', 0):.2f} s")
    return 0


def _count(a) -> int:
    from instrument.run import run_counts

    res = run_counts(a.binary, list(a.program_args), a.threads, piece_cores=parse_cores(a.cores))
    out = a.output or a.binary.with_name(a.binary.name + ".counts.json")
    if out.suffix == ".csv":
        rows = [{"kind": "block", "from": b, "to": b, "count": c} for b, c in sorted(res.block_counts.items())]
        rows += [{"kind": "edge", "from": f, "to": t, "count": c} for (f, t), c in sorted(res.edge_counts.items())]
        import pandas as pd

        write_table(pd.DataFrame(rows, columns=["kind", "from", "to", "count"]), out)
    elif out.suffix == ".json":
        write_json(out, {"version": 1, "block_counts": {str(b): c for b, c in sorted(res.block_counts.items())},
                         "edge_counts": [[f, t, c] for (f, t), c in sorted(res.edge_counts.items())]})
    else:
        raise InputError(f"{out}: use a .json or .csv output file")
    print(f"{out}: {len(res.block_counts)} blocks, {len(res.edge_counts)} edges")
    return 0


def _export(a) -> int:
    from instrument.export import export_text

    from instrument.tracefile import open_trace
    from pptmc.commands.args import check_complete

    check_complete(open_trace(a.trace).info.complete, str(a.trace), a)
    n = export_text(a.trace, a.output)
    print(f"{a.output}: {n} addresses")
    return 0


def _info(a) -> int:
    from instrument.tracefile import open_trace

    reader = open_trace(a.trace)
    info = reader.info
    facts = {"path": info.path, "format_version": info.format_version, "program": info.program,
             "args": info.args, "complete": info.complete, "n_accesses": info.n_accesses,
             "n_blocks": len(info.blocks), "n_threads": info.n_threads, "n_loops": len(info.loops),
             "blocks_entered": sum(c for b, c in info.block_counts.items() if not info.blocks[b].is_shared_var_block), "bytes": Path(info.path).stat().st_size,
             # the footer's sketch (instrument/distinct_lines.py); None: recorded without it
             "distinct_lines_estimate": info.distinct_lines_estimate, **info.extra}
    if a.verify:  # every chunk's checksums, its zstd frame, its events, and the footer's whole-file CRC
        facts["verified_accesses"] = sum(len(chunk) for chunk in reader.chunks(columns=("addr",)))
        facts["verified"] = True
    if a.json:
        print(json.dumps(facts, indent=2))
    else:
        for k, v in facts.items():
            print(f"{k}: {v}")
    return 0
