"""OpenMP C to ROSE-style outlined threaded C (stage 1 of pptmc); see translate/README.md."""
from __future__ import annotations

from pathlib import Path

from common.io import write_text
from translate.buildinfo import RUNTIME_DIR, BuildInputs, build_inputs_of
from translate.model import LoopInfo, RegionInfo, TranslationResult

__all__ = ["BuildInputs", "LoopInfo", "RegionInfo", "TranslationResult", "build_inputs_of", "runtime_sources",
           "translate_file"]


def runtime_sources() -> list[Path]:
    """The XOMP runtime: [xomp.c, include dir holding xomp.h]; compile xomp.c with -fopenmp."""
    return [RUNTIME_DIR / "xomp.c", RUNTIME_DIR]


def translate_file(src: Path, out: Path, include_dirs=(), defines=()) -> TranslationResult:
    """Translate one OpenMP C file into outlined threaded C written atomically to `out`."""
    from translate.source import load
    from translate.translator import translate_source
    # a C compiler searches the including file's folder for "..." includes: so does the parse
    source, _ = load(Path(src), include_dirs, defines, quote_dirs=[Path(src).resolve().parent])
    text, regions, orphans = translate_source(source)
    write_text(Path(out), text)
    return TranslationResult(source=Path(src), output=Path(out), regions=regions, orphan_loops=orphans)
