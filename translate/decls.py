"""The declarations and constructs the translator and its region analysis share (translate/regions.py
reads them; translate/translator.py makes them)."""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path

import clang.cindex as ci

from translate.pragmas import Directive

_ARRAY_KINDS = (ci.TypeKind.CONSTANTARRAY, ci.TypeKind.VARIABLEARRAY, ci.TypeKind.INCOMPLETEARRAY)
Key = tuple[str, int]


@dataclass
class DeclInfo:
    """A variable or parameter declaration and the facts the rewriting needs."""

    key: Key
    name: str
    cursor: ci.Cursor
    offset: int          # offset in the main file, -1 elsewhere
    func: tuple[int, int] | None  # extent of the enclosing function for locals
    is_global: bool
    bounds: list[Key] = field(default_factory=list)  # variables in variably-modified type bounds

    @property
    def type(self) -> ci.Type:
        return self.cursor.type

    @property
    def is_array(self) -> bool:
        return self.type.kind in _ARRAY_KINDS

    @property
    def is_pointer(self) -> bool:
        return self.type.kind == ci.TypeKind.POINTER or (self.is_array and self.cursor.kind == ci.CursorKind.PARM_DECL)


@dataclass(frozen=True)
class SizeGuard:
    """A type written with clang's spelling (macros expanded), checked against the build's own."""

    info: DeclInfo
    text: str
    pointer: bool  # text is a pointer type: compare the pointed-to sizes


@dataclass
class Construct:
    """A pragma with its associated statement (None for a standalone directive)."""

    d: Directive
    stmt: ci.Cursor | None
    start: int
    end: int
    loop_id: int | None = None


def simple_type(type_text: str) -> bool:
    """Whether `T name` declares a variable of type T (no declarator punctuation needed)."""
    if type_text.startswith("__typeof__(") and type_text.endswith(")"):
        return True  # one __typeof__(...) (an inner `)(` would not parse as a type anyway)
    return "(" not in type_text and "[" not in type_text


def declare(type_text: str, name: str) -> str:
    """A declaration of `name` with a type given by its clang spelling."""
    return f"{type_text} {name}" if simple_type(type_text) else f"__typeof__({type_text}) {name}"


def pointer_to(type_text: str) -> str:
    """The spelling of `T *` for a clang type spelling T."""
    return f"{type_text} *" if simple_type(type_text) else f"__typeof__({type_text}) *"


def decl_type_text(info: DeclInfo) -> str:
    """The variable's own type; array parameters are spelled as the pointer they really are."""
    t = info.type
    if info.is_array and info.cursor.kind == ci.CursorKind.PARM_DECL:
        return pointer_to(t.element_type.spelling).strip()
    if "typeof" in t.spelling:  # `typeof (a)` names a variable the outlined code may not see
        return t.get_canonical().spelling
    return t.spelling


def region_id(path: Path, line: int) -> int:
    """A stable 4-digit id from the file name and line (ROSE-like OUT__<n>__<id>__ names)."""
    return zlib.crc32(f"{path.name}:{line}".encode()) % 10000
