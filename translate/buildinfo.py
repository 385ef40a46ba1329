"""The build-inputs marker: what a translated file needs to compile, read back by later stages.

`pptmc translate` writes, as the first line of its output,

    /* pptmc-build-inputs: {"source_dir": "...", "xomp_include_dir": "...", "xomp_source": "..."} */

(absolute paths, JSON with `/` escaped where a path holds `*/`). `build_inputs_of` reads it back,
so `pptmc instrument out.c` can find the original folder's `#include "..."` files, xomp.h and xomp.c.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from common.errors import InputError

MARKER = "pptmc-build-inputs:"
RUNTIME_DIR = Path(__file__).parent / "runtime"
_ESCAPED_END = "*\\/"  # `*/` inside a JSON string, written so it cannot end the comment
_HEAD_BYTES = 8192  # the marker is the first line; a longer first line is not one


class BuildInputs(NamedTuple):
    """Compiler inputs of a translated file: `-I` dirs, `-iquote` dirs and extra sources to link."""

    include_dirs: list[Path]
    quote_dirs: list[Path]
    extra_sources: list[Path]


def marker_line(source: Path) -> str:
    """The marker comment for a file translated from `source` (no newline)."""
    fields = {"source_dir": str(Path(source).resolve().parent), "xomp_include_dir": str(RUNTIME_DIR.resolve()),
              "xomp_source": str((RUNTIME_DIR / "xomp.c").resolve())}
    text = json.dumps(fields).replace("*/", _ESCAPED_END)
    return f"/* {MARKER} {text} */"


def build_inputs_of(translated: Path) -> BuildInputs:
    """What compiling `translated` needs; empty lists for a file pptmc translate did not write."""
    with open(translated, "rb") as f:
        first = f.read(_HEAD_BYTES).split(b"\n", 1)[0].decode("utf-8", errors="replace").strip()
    prefix = f"/* {MARKER} "
    if not (first.startswith(prefix) and first.endswith(" */")):
        return BuildInputs([], [], [])
    try:
        fields = json.loads(first[len(prefix):-3])
        return BuildInputs([Path(fields["xomp_include_dir"])], [Path(fields["source_dir"])],
                           [Path(fields["xomp_source"])])
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{translated}:1: malformed '{MARKER}' comment ({exc}); translate the "
                         f"source again with pptmc translate") from exc
