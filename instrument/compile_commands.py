"""A program's C files and their flags from a compilation database (compile_commands.json, as CMake,
Bear or Meson write it), so `pptmc run --compile-commands` builds what the user's build builds.

Only what the instrumented build needs is taken: the C files, `-I`/`-iquote` folders and `-D` macros.
pptmc compiles every file with the same flags, so files whose macros disagree are refused (naming both);
include folders are merged, in order.
"""
from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

from common.errors import InputError

C_SUFFIXES = (".c",)


@dataclass(frozen=True)
class ProgramSources:
    """The program's C files (the one with `main` need not be first) and the flags they share."""

    sources: tuple[Path, ...]
    include_dirs: tuple[Path, ...]
    defines: tuple[str, ...]


def _arguments(entry: dict, where: str) -> list[str]:
    """An entry's compiler arguments, from `arguments` or a shell-quoted `command`."""
    if isinstance(entry.get("arguments"), list):
        return [str(a) for a in entry["arguments"]]
    if isinstance(entry.get("command"), str):
        return shlex.split(entry["command"])
    raise InputError(f"{where}: neither 'arguments' (a list) nor 'command' (a string); regenerate the database")


def _flags(args: list[str], folder: Path) -> tuple[list[Path], list[str]]:
    """The -I/-iquote folders (resolved against the entry's folder) and -D macros of one command line."""
    dirs, defines, i = [], [], 0
    while i < len(args):
        arg = args[i]
        for flag in ("-iquote", "-I", "-D"):
            if arg == flag and i + 1 < len(args):
                value, i = args[i + 1], i + 1
            elif arg.startswith(flag) and len(arg) > len(flag):
                value = arg[len(flag):]
            else:
                continue
            if flag == "-D":
                defines.append(value)
            else:
                dirs.append((folder / value).resolve())
            break
        i += 1
    return dirs, defines


def read_compile_commands(path: Path) -> ProgramSources:
    """The C files of a compilation database and the flags they share; clear errors for anything else."""
    path = Path(path)
    try:
        entries = json.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from exc
    except ValueError as exc:
        raise InputError(f"{path}: not valid JSON ({exc}); give the compile_commands.json your build wrote") from exc
    if not isinstance(entries, list) or not entries:
        raise InputError(f"{path}: expected a non-empty JSON list of compile commands")
    sources, dirs, first = [], [], None
    for k, entry in enumerate(entries):
        where = f"{path}: entry {k}"
        if not isinstance(entry, dict) or "file" not in entry or "directory" not in entry:
            raise InputError(f"{where}: needs 'directory' and 'file'")
        folder = Path(entry["directory"])
        source = (folder / entry["file"]).resolve()
        if source.suffix not in C_SUFFIXES:
            continue
        entry_dirs, entry_defines = _flags(_arguments(entry, where), folder)
        if first is None:
            first = (source, sorted(entry_defines))
        elif sorted(entry_defines) != first[1]:
            raise InputError(f"{where} ({source.name}): its -D macros {sorted(entry_defines)} differ from "
                             f"{first[0].name}'s {first[1]}; pptmc builds every file with the same macros")
        sources.append(source)
        dirs += [d for d in entry_dirs if d not in dirs]
    if not sources:
        raise InputError(f"{path}: no C file in the database")
    return ProgramSources(tuple(dict.fromkeys(sources)), tuple(dirs), tuple(first[1]))
