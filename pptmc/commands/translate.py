"""`pptmc translate`: OpenMP C in, outlined threaded C out, one summary line per region."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from common.errors import InputError
from translate import TranslationResult, translate_file


def _define(text: str) -> str:
    """Validate one -D argument (NAME or NAME=VALUE)."""
    name = text.split("=", 1)[0]
    if not name or not (name[0].isalpha() or name[0] == "_") or not all(ch.isalnum() or ch == "_" for ch in name):
        raise argparse.ArgumentTypeError(f"-D {text!r}: expected NAME or NAME=VALUE")
    return text


def register(subparsers) -> None:
    """Add the `translate` subcommand."""
    p = subparsers.add_parser("translate", help="outline OpenMP regions into ROSE-style threaded C",
                              description="Translate an OpenMP C file into outlined threaded C that "
                                          "calls the XOMP runtime (translate/runtime/xomp.c). The "
                                          "output's first line records what building it needs (the "
                                          "source's folder, xomp.h, xomp.c); see translate/README.md.")
    p.add_argument("input", type=Path, help="OpenMP C source file")
    p.add_argument("-o", "--output", type=Path, required=True, help="translated C file to write")
    p.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR",
                   help="add an include directory (repeatable)")
    p.add_argument("-D", dest="defines", action="append", default=[], type=_define, metavar="NAME=VAL",
                   help="define a macro (repeatable); use the same -D flags as the later build")
    p.add_argument("--json", action="store_true", help="print the region summary as JSON")
    p.set_defaults(run=run)


def summary_lines(result: TranslationResult) -> list[str]:
    """One human-readable line per region."""
    lines = []
    for r in result.regions:
        red = ",".join(f"{op}:{v}" for op, v in r.reductions) or "-"
        lines.append(f"line {r.line}: {r.name} shared={','.join(r.shared) or '-'} "
                     f"private={','.join(r.private + r.firstprivate) or '-'} reduction={red} "
                     f"schedule={r.schedule_text()}")
    return lines


def run(args: argparse.Namespace) -> int:
    """Translate and print the summary."""
    if args.output.resolve() == args.input.resolve():
        raise InputError(f"{args.output}: output would overwrite the input; choose another -o path")
    result = translate_file(args.input, args.output, args.include_dirs, args.defines)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        for line in summary_lines(result):
            print(line)
    return 0
