"""Command-line value parsers shared by every stage's subcommands (one implementation, one message)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from common.errors import InputError

if TYPE_CHECKING:
    from analysis.options import ModelOptions


def parse_counts(text: str, option: str = "--cores", example: str = "1,2,4,8") -> list[int]:
    """'4,1,2' -> [1, 2, 4]: sorted, without repeats; anything but positive integers is an input error."""
    try:
        counts = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        counts = []
    if not counts or counts[0] < 1:
        raise InputError(f"{option} {text!r}: give comma-separated positive integers, e.g. {example}")
    return counts


def parse_cores(text: str, option: str = "--cores") -> list[int]:
    """'4,1,2' -> [1, 2, 4]; anything but positive integers, or more cores than the profiling sweep takes
    (analysis/profiles/limits.py), is an input error. Every command's --cores goes through here."""
    from analysis.profiles.limits import check_core_counts

    cores = parse_counts(text, option)
    check_core_counts(cores, option)
    return cores


def seed(text: str) -> int:
    """A --seed value: a non-negative integer (numpy's generators take no other)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a non-negative integer")
    return value


def add_strict(parser: argparse.ArgumentParser) -> None:
    """--strict, for every command that reads a trace or what was made from one."""
    parser.add_argument("--strict", action="store_true",
                        help="an incomplete trace (the program crashed or was cut short) is an error, not a warning")


def check_complete(complete: bool, what: str, args: argparse.Namespace) -> None:
    """An incomplete trace is an error under --strict, else a warning on stderr (results say
    trace_complete = false)."""
    if complete:
        return
    message = (f"{what}: the trace is incomplete (the program crashed or was cut short while traced); "
               f"results from it say trace_complete = false")
    if getattr(args, "strict", False):
        raise InputError(message + "; rerun the program, or drop --strict to use what it recorded")
    print(f"pptmc: warning: {message}", file=sys.stderr)


def check_pieces(trace: Path, cores: list[int]) -> None:
    """A warning on stderr when the trace's loops were not cut into pieces for every core count asked for."""
    from instrument import piece_cores_of, unlisted_piece_cores

    message = unlisted_piece_cores(piece_cores_of(trace), cores)
    if message:
        print(f"pptmc: warning: {trace}: {message}", file=sys.stderr)


def add_model_options(parser: argparse.ArgumentParser, *, profiles: bool = True) -> None:
    """The model's flags, with ModelOptions' defaults (analysis/options.py), for every command that predicts;
    `profiles=False` leaves out the private-trace and interleaving flags (validate sweeps those itself)."""
    from analysis import options as opt

    d = opt.DEFAULT_OPTIONS
    if profiles:
        parser.add_argument("--mode", choices=opt.MODES, default=d.mode,
                            help=f"private-trace construction (default {d.mode}: iteration when loop markers exist)")
        parser.add_argument("--interleave", choices=opt.INTERLEAVES, default=d.interleave,
                            help=f"shared-trace interleaving (default {d.interleave})")
        parser.add_argument("--seed", type=seed, default=d.seed, help="seed of the random interleaving")
        parser.add_argument("--no-coherence", dest="coherence", action="store_false", default=d.coherence,
                            help="ignore write-invalidate coherence between private caches (the paper's model)")
    parser.add_argument("--hit-rates", choices=opt.HIT_RATE_MODELS, default=d.hit_rates,
                        help=f"hit-rate predictor (default {d.hit_rates}; see analysis/hitrates/predictor.py)")
    parser.add_argument("--placement", choices=opt.PLACEMENTS, default=d.placement,
                        help=f"threads on cores, as OpenMP's proc_bind (default {d.placement}): decides which "
                             f"instances of a cache shared by a group of cores (an L3 per CCX or socket) and which "
                             f"sockets they use")
    parser.add_argument("--numa-pages", choices=opt.NUMA_PAGES, default=d.numa_pages,
                        help=f"where the data's pages live on a machine of several sockets (default "
                             f"{d.numa_pages}: all on socket 0, as a serial initialisation leaves them; interleave: "
                             f"spread over the sockets, as numactl --interleave=all; local: each thread's on its own "
                             f"socket): sets the DRAM latency and the memory controllers the threads share")
    parser.add_argument("--layout", choices=opt.LAYOUTS, default=d.layout,
                        help=f"memory-time form (default {d.layout}; contiguous = the paper's Eq. 5)")
    parser.add_argument("--cpu-form", choices=opt.CPU_FORMS, default=d.cpu_form,
                        help=f"T_CPU form (default {d.cpu_form}; throughput/latency = the paper's sums)")
    parser.add_argument("--contention", choices=opt.CONTENTIONS, default=d.contention,
                        help=f"DRAM contention (default {d.contention}; queuing = closed queuing network)")


def model_options(args: argparse.Namespace, **overrides) -> "ModelOptions":
    """The ModelOptions a command's parsed flags name (flags a command lacks keep their defaults)."""
    from dataclasses import fields

    from analysis.options import ModelOptions

    given = {f.name: getattr(args, f.name) for f in fields(ModelOptions) if hasattr(args, f.name)}
    return ModelOptions(**{**given, **overrides})
