"""The single `pptmc` command line; each command module registers its own subcommands.

Every module listed in COMMAND_MODULES (pptmc/commands/) exposes `register(subparsers)`, which adds
subcommands whose parsers set `run=<callable(args) -> int>`. `run(args)` is testable
without `main()`: library code raises PptmcError, and only `main()` prints and exits.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Sequence

from pptmc import __version__, doctor
from common.allocator import keep_freed_memory
from common.errors import InputError, PptmcError

COMMAND_MODULES = (
    "pptmc.commands.translate",
    "pptmc.commands.instrument",
    "pptmc.commands.profile",
    "pptmc.commands.counts",
    "pptmc.commands.predict",
    "pptmc.commands.machines",
    "pptmc.commands.pipeline",
    "pptmc.commands.validate",
    "pptmc.commands.measure",
)


def run_doctor(args: argparse.Namespace) -> int:
    """Print tool versions; non-zero when anything required is missing."""
    checks = doctor.collect()
    if args.json:
        print(json.dumps([{"name": c.name, "version": c.version, "ok": c.ok, "required": c.required,
                           "fix": c.fix} for c in checks], indent=2))
    else:
        print(doctor.report(checks))
    return 0 if all(c.ok for c in checks if c.required) else 1


class CommandParser(argparse.ArgumentParser):
    """argparse, but a bad command line is an InputError (one message, exit code 2, no usage dump)."""

    def error(self, message: str):
        raise InputError(f"{self.prog}: {message}; see {self.prog} --help")


def split_program_args(argv: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """pptmc's own arguments, and the program's after the first `--` (None when there is no `--`)."""
    argv = list(argv)
    if "--" not in argv:
        return argv, None
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1:]


def build_parser() -> argparse.ArgumentParser:
    """The full parser, with every command."""
    parser = CommandParser(
        prog="pptmc",
        description="Predict OpenMP parallel-region cache hit rates and runtimes for any core count "
                    "from one sequential memory trace.")
    parser.add_argument("--version", action="version", version=f"pptmc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    doc = sub.add_parser("doctor", help="check clang-19, libomp, llvmlite, numba and Python")
    doc.add_argument("--json", action="store_true", help="machine-readable output")
    doc.set_defaults(run=run_doctor)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def run(argv: Sequence[str] | None = None) -> int:
    """Parse and dispatch; raises PptmcError for user-facing failures."""
    parser = build_parser()
    own, program = split_program_args(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(own)
    if not hasattr(args, "run"):
        parser.print_help()
        return 2
    if program is not None:
        if not hasattr(args, "program_args"):
            raise InputError(f"pptmc {args.command}: takes no program arguments (after --)")
        args.program_args = [*args.program_args, *program]
        args.after_dashes = len(program)  # how many of them followed `--` (never taken as pptmc's)
    return int(args.run(args) or 0)


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point: the only place that prints errors and exits (and that sets the
    process-wide allocator settings, see common/allocator.py)."""
    keep_freed_memory()
    try:
        code = run(argv)
    except PptmcError as exc:
        print(f"pptmc: error: {exc}", file=sys.stderr)
        code = exc.exit_code
    except KeyboardInterrupt:
        print("pptmc: interrupted", file=sys.stderr)
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    main()
