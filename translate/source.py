"""Parse a C file twice with libclang: once with -fopenmp to check the pragmas, once plain for the AST.

libclang's cursor visitor does not descend into the CapturedStmt of an OpenMP directive,
so the statements inside a region are only visible in a parse without -fopenmp. That
parse defines _OPENMP so the preprocessor takes the same branches as an OpenMP build.
"""
from __future__ import annotations

import bisect
import ctypes
import os
from dataclasses import dataclass, field
from pathlib import Path

import clang.cindex as ci

from common.errors import InputError, ToolError
from common.toolchain import toolchain

OPENMP_VERSION_MACRO = "-D_OPENMP=201511"  # 5.0+ makes omp.h use declare variant
MAX_DIAGNOSTICS = 10  # problems listed in one error
NESTING_HINT = ("OpenMP forbids a work-sharing construct (for, single, master, barrier) directly inside "
                "another work-sharing, critical or master construct of the same parallel region; for a loop "
                "nest use collapse(2) on the outer loop, otherwise remove the inner pragma or give the inner "
                "construct its own '#pragma omp parallel'")


@dataclass(frozen=True)
class Token:
    """One lexer token of the main file with its byte offsets."""

    text: str
    start: int
    end: int
    line: int
    column: int


@dataclass(frozen=True)
class VarRef:
    """A reference to a variable in the main file, keyed by its declaration."""

    start: int
    end: int
    key: tuple[str, int]  # (file, offset) of the declaration
    name: str
    direct: bool  # the source text at [start, end) is the name itself (not a macro expansion)


@dataclass
class Source:
    """Everything the translator needs about one input file."""

    path: Path
    text: str
    data: bytes
    tu: ci.TranslationUnit
    tokens: list[Token]
    refs: list[VarRef] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    skipped: list[tuple[int, int]] = field(default_factory=list)  # #if-excluded byte ranges

    def is_skipped(self, offset: int) -> bool:
        """Whether the preprocessor excluded this offset (an inactive #if branch)."""
        return any(s <= offset < e for s, e in self.skipped)

    def slice(self, start: int, end: int) -> str:
        """Original text between two byte offsets."""
        return self.data[start:end].decode("utf-8", errors="replace")

    def token_index(self, offset: int) -> int:
        """Index of the first token starting at or after `offset`."""
        return bisect.bisect_left(self.starts, offset)

    def next_code_token(self, offset: int) -> Token | None:
        """The first token at or after `offset` that is not in a preprocessor line or #if-excluded text."""
        i = self.token_index(offset)
        while i < len(self.tokens):
            tok = self.tokens[i]
            first_on_line = i == 0 or self.tokens[i - 1].line != tok.line
            if tok.text == "#" and first_on_line or self.is_skipped(tok.start):
                i = self.token_index(line_end(self.data, tok.start) + 1)
                continue
            return tok
        return None

    def where(self, offset: int) -> str:
        """`file:line:column` of a byte offset, for error messages."""
        line = self.data.count(b"\n", 0, offset) + 1
        col = offset - (self.data.rfind(b"\n", 0, offset) + 1) + 1
        return f"{shown_path(self.path)}:{line}:{col}"


def line_end(data: bytes, start: int) -> int:
    """Offset of the newline that ends the (possibly backslash-continued) line at `start`."""
    pos = start
    while True:
        nl = data.find(b"\n", pos)
        if nl < 0:
            return len(data)
        if data[nl - 1:nl] == b"\\" or data[nl - 2:nl] == b"\\\r":
            pos = nl + 1
            continue
        return nl


def clang_args(include_dirs=(), defines=(), quote_dirs=()) -> list[str]:
    """Compiler flags shared by both parses (`quote_dirs`: searched for `#include "..."` only)."""
    tc = toolchain()
    args = ["-std=gnu11", "-resource-dir", str(tc.resource_dir), f"-I{tc.omp_include}"]
    args += [f"-iquote{d}" for d in quote_dirs]
    args += [f"-I{d}" for d in include_dirs]
    args += [f"-D{d}" for d in defines]
    return args


def shown_path(path: str | Path) -> str:
    """A path as error messages show it: relative to the current folder."""
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return str(path)


def _is_openmp_warning(diag: ci.Diagnostic) -> bool:
    """Warnings that mean a pragma or clause was dropped: we turn these into errors."""
    text = diag.spelling
    return ("#pragma omp" in text or "OpenMP" in text or "OpenMP" in (diag.category_name or "")
            or "openmp" in (diag.option or "").lower())


def _diagnostic_line(diag: ci.Diagnostic, path: Path) -> str:
    """`file:line:column: message`, with a hint for OpenMP's nesting rules."""
    loc = diag.location
    line = f"{shown_path(loc.file.name if loc.file else path)}:{loc.line}:{loc.column}: {diag.spelling}"
    if "closely nested" in diag.spelling or "nested inside" in diag.spelling:
        line += f" [{NESTING_HINT}]"
    return line


def _problems(tu: ci.TranslationUnit, path: Path, openmp: bool) -> tuple[list[str], bool]:
    """Every error (and, in the OpenMP parse, every OpenMP warning); whether any was an error."""
    lines, any_error = [], False
    for diag in tu.diagnostics:
        if diag.severity >= ci.Diagnostic.Error:
            any_error = True
        elif not (openmp and diag.severity == ci.Diagnostic.Warning and _is_openmp_warning(diag)):
            continue
        lines.append(_diagnostic_line(diag, path))
    return list(dict.fromkeys(lines)), any_error


def _check_diagnostics(omp_tu: ci.TranslationUnit, tu: ci.TranslationUnit, path: Path) -> None:
    """Raise one InputError listing every problem clang reports (up to MAX_DIAGNOSTICS)."""
    lines, any_error = _problems(omp_tu, path, openmp=True)
    if not lines:
        lines, any_error = _problems(tu, path, openmp=False)
    if not lines:
        return
    advice = ("fix the C source (it must compile with clang -fopenmp)" if any_error else
              "pptmc never drops a pragma or clause silently: fix the spelling or remove it")
    if len(lines) == 1:
        raise InputError(f"{lines[0]}; {advice}")
    more = len(lines) - MAX_DIAGNOSTICS
    shown = lines[:MAX_DIAGNOSTICS] + ([f"... and {more} more"] if more > 0 else [])
    raise InputError(f"{len(lines)} problems in {shown_path(path)}:\n" + "\n".join(shown) + f"\n{advice}")


def _lex(tu: ci.TranslationUnit, path: Path, size: int) -> list[Token]:
    """All tokens of the main file (raw, before macro expansion)."""
    f = ci.File.from_name(tu, str(path))
    extent = ci.SourceRange.from_locations(ci.SourceLocation.from_offset(tu, f, 0),
                                           ci.SourceLocation.from_offset(tu, f, size))
    out = []
    for tok in tu.get_tokens(extent=extent):
        if tok.kind == ci.TokenKind.COMMENT:
            continue
        ext = tok.extent
        out.append(Token(tok.spelling, ext.start.offset, ext.end.offset, ext.start.line, ext.start.column))
    return out


def safe_kind(cur: ci.Cursor) -> ci.CursorKind | None:
    """The cursor kind, or None for a kind number these Python bindings do not know."""
    try:
        return cur.kind
    except ValueError:
        return None


def _collect_refs(src: Source) -> list[VarRef]:
    """Every DeclRefExpr to a variable or parameter that sits in the main file."""
    main = str(src.path)
    refs: dict[tuple, VarRef] = {}
    for cur in src.tu.cursor.walk_preorder():
        if safe_kind(cur) != ci.CursorKind.DECL_REF_EXPR:
            continue
        loc = cur.location
        if loc.file is None or loc.file.name != main:
            continue
        decl = cur.referenced
        if decl is None or decl.kind not in (ci.CursorKind.VAR_DECL, ci.CursorKind.PARM_DECL):
            continue
        ext = cur.extent
        start, end = ext.start.offset, ext.end.offset
        direct = src.slice(start, end) == cur.spelling
        dloc = decl.location
        key = (dloc.file.name if dloc.file else "", dloc.offset)
        refs.setdefault((start, key), VarRef(start, end, key, cur.spelling, direct))
    return sorted(refs.values(), key=lambda r: r.start)


class _RangeList(ctypes.Structure):
    _fields_ = [("count", ctypes.c_uint), ("ranges", ctypes.POINTER(ci.SourceRange))]


def _skipped_ranges(tu: ci.TranslationUnit, path: Path) -> list[tuple[int, int]]:
    """Inactive preprocessor branches of the main file.

    The Python bindings do not wrap clang_getSkippedRanges, so it is called through ctypes.
    """
    lib = ci.conf.lib
    fn = lib.clang_getSkippedRanges
    fn.restype = ctypes.POINTER(_RangeList)
    fn.argtypes = [ci.TranslationUnit, ci.File]
    lst = fn(tu, ci.File.from_name(tu, str(path)))
    if not lst:
        return []
    try:
        return [(lst.contents.ranges[i].start.offset, lst.contents.ranges[i].end.offset)
                for i in range(lst.contents.count)]
    finally:
        lib.clang_disposeSourceRangeList(lst)


def load(path: Path, include_dirs=(), defines=(), quote_dirs=()) -> tuple[Source, ci.TranslationUnit]:
    """Parse `path`; returns the plain-parse Source and the OpenMP parse (for directive kinds)."""
    if not Path(path).is_file():
        raise InputError(f"{path}: no such file; give an existing C source file")
    path = Path(path).resolve()
    data = path.read_bytes()
    if not data.strip():
        raise InputError(f"{shown_path(path)}: file is empty; give a C source file with an OpenMP region")
    try:
        index = ci.Index.create()
    except Exception as exc:  # the libclang wheel failed to load its shared library
        raise ToolError(f"libclang could not be loaded ({exc}); reinstall it: pip install libclang") from exc
    args = clang_args(include_dirs, defines, quote_dirs)
    try:
        omp_tu = index.parse(str(path), args=args + ["-fopenmp"])
        tu = index.parse(str(path), args=args + [OPENMP_VERSION_MACRO],
                         options=ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD)
    except ci.TranslationUnitLoadError as exc:
        raise InputError(f"{shown_path(path)}: libclang could not parse the file ({exc})") from exc
    _check_diagnostics(omp_tu, tu, path)
    src = Source(path=path, text=data.decode("utf-8", errors="replace"), data=data, tu=tu,
                 tokens=_lex(tu, path, len(data)))
    src.starts = [t.start for t in src.tokens]
    src.skipped = _skipped_ranges(tu, path)
    src.refs = _collect_refs(src)
    return src, omp_tu
