"""Types declared inside the enclosing function that a parallel region uses (issue #3, item 1).

The outlined function is placed before the enclosing function, so a struct, union, enum or
typedef declared locally there is not in scope. The translator re-emits the declarations the
region needs, in source order, inside the outlined function: tag and typedef declarations
generate no code, so they shadow file-scope names exactly as in the original function. A
typedef whose type depends on local values (`typedef double row_t[m];`) is emitted after the
shared scalars are unpacked, like the bounds of a VLA parameter.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import clang.cindex as ci

from common.errors import InputError
from translate.loops import stmt_end
from translate.source import safe_kind

TYPE_DECL_KINDS = (ci.CursorKind.STRUCT_DECL, ci.CursorKind.UNION_DECL, ci.CursorKind.ENUM_DECL,
                   ci.CursorKind.TYPEDEF_DECL)
_ARRAY_KINDS = (ci.TypeKind.CONSTANTARRAY, ci.TypeKind.VARIABLEARRAY, ci.TypeKind.INCOMPLETEARRAY)
_VAR_KINDS = (ci.CursorKind.VAR_DECL, ci.CursorKind.PARM_DECL)


@dataclass
class LocalTypes:
    """Declarations to re-emit: plain ones first, ones that read local variables after unpacking."""

    plain: list[str] = field(default_factory=list)
    dependent: list[str] = field(default_factory=list)
    bound_vars: list[tuple[str, int]] = field(default_factory=list)  # variables the dependent ones read


def variably_modified(t: ci.Type) -> bool:
    """Whether a type has a runtime array bound somewhere inside."""
    t = t.get_canonical()
    for _ in range(8):
        if t.kind == ci.TypeKind.VARIABLEARRAY:
            return True
        if t.kind in _ARRAY_KINDS:
            t = t.element_type
        elif t.kind == ci.TypeKind.POINTER:
            t = t.get_pointee()
        else:
            return False
    return False


def _key(cur: ci.Cursor) -> tuple[str, int]:
    loc = cur.location
    return (loc.file.name if loc.file else "", loc.offset)


def _is_local_type(cur: ci.Cursor | None) -> bool:
    """A tag or typedef declared inside a function body."""
    if cur is None or safe_kind(cur) not in TYPE_DECL_KINDS:
        return False
    parent = cur.semantic_parent
    while parent is not None and safe_kind(parent) in TYPE_DECL_KINDS:
        parent = parent.semantic_parent  # a tag nested in a local struct is local too
    return parent is not None and parent.kind == ci.CursorKind.FUNCTION_DECL


def _referenced_types(root: ci.Cursor) -> tuple[list[ci.Cursor], list[ci.Cursor]]:
    """Local type declarations and variables that the subtree of `root` refers to."""
    types, variables = [], []
    for cur in root.walk_preorder():
        kind = safe_kind(cur)
        if kind == ci.CursorKind.TYPE_REF:
            ref = cur.referenced
            if ref is not None:
                types.append(ref.get_definition() or ref)
        elif kind == ci.CursorKind.DECL_REF_EXPR and cur.referenced is not None:
            ref = cur.referenced
            if ref.kind == ci.CursorKind.ENUM_CONSTANT_DECL:
                types.append(ref.semantic_parent)
            elif ref.kind in _VAR_KINDS:
                variables.append(ref)
        elif kind in TYPE_DECL_KINDS and cur is not root:
            types.append(cur)
    return [t for t in types if _is_local_type(t)], variables


def _used(roots: list[ci.Cursor]) -> dict[tuple[str, int], tuple[ci.Cursor, list[ci.Cursor]]]:
    """Every local type reachable from the roots, with the variables its declaration reads."""
    todo: list[ci.Cursor] = []
    for root in roots:
        todo += _referenced_types(root)[0]
    found: dict[tuple[str, int], tuple[ci.Cursor, list[ci.Cursor]]] = {}
    while todo:
        cur = todo.pop()
        if _key(cur) in found:
            continue
        types, variables = _referenced_types(cur)
        found[_key(cur)] = (cur, variables)
        todo += types
    return found


class LocalTypeIndex:
    """Where each local type declaration of the main file sits, to copy its text."""

    def __init__(self, src, decl_stmts: list[ci.Cursor]):
        self.src = src
        self.stmt_of: dict[int, ci.Cursor] = {}
        for stmt in decl_stmts:
            for child in stmt.get_children():
                if safe_kind(child) in TYPE_DECL_KINDS:
                    self.stmt_of[child.location.offset] = stmt

    def _text(self, cur: ci.Cursor) -> tuple[int, str] | None:
        """(offset, declaration text) for one type declaration, or None if not in the main file."""
        while cur is not None and cur.location.offset not in self.stmt_of:
            cur = cur.semantic_parent if safe_kind(cur.semantic_parent) in TYPE_DECL_KINDS else None
        if cur is None or cur.location.file is None or cur.location.file.name != str(self.src.path):
            return None
        stmt = self.stmt_of[cur.location.offset]
        if all(safe_kind(k) in TYPE_DECL_KINDS for k in stmt.get_children()):
            start = stmt.extent.start.offset
            return start, self.src.slice(start, stmt_end(self.src, stmt))
        # a tag defined together with variables (`struct s {...} v;`): the tag definition alone
        start = cur.extent.start.offset
        return start, self.src.slice(start, cur.extent.end.offset) + ";"

    def for_region(self, roots: list[ci.Cursor], region_start: int, region_end: int) -> LocalTypes:
        """The local type declarations outside [region_start, region_end) that the roots use."""
        out = LocalTypes()
        texts: dict[int, tuple[str, bool]] = {}
        for cur, variables in _used(roots).values():
            found = self._text(cur)
            if found is None or region_start <= found[0] < region_end:
                continue  # declared inside the region: already part of the outlined body
            dependent = cur.kind == ci.CursorKind.TYPEDEF_DECL and variably_modified(cur.underlying_typedef_type)
            prev = texts.get(found[0])
            texts[found[0]] = (found[1], dependent or bool(prev and prev[1]))
            if dependent:
                out.bound_vars += [_key(v) for v in variables]
        for _, (text, dependent) in sorted(texts.items()):
            (out.dependent if dependent else out.plain).append(text)
        return out


def check_named(type_text: str, name: str, where: str) -> None:
    """A shared variable of an unnamed struct type cannot be re-declared in the outlined function."""
    if "(unnamed" in type_text or "(anonymous" in type_text:
        raise InputError(f"{where}: the shared variable '{name}' has an unnamed struct/union/enum type; "
                         f"give the type a tag or a typedef name so the outlined function can name it")
