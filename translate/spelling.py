"""Spell a variable's type from its own declaration text so macros stay macros (issue #3, item 2).

clang's type spelling has macros expanded (`double[200]`), which ties the output to the -D flags
given at translate time. Deleting the declared name from a declaration's tokens leaves a C type
name (an abstract declarator: `DATA_TYPE POLYBENCH_2D(, NI, NK, ni, nk)`, `double (*)[M]`), so the
outlined code can write `__typeof__(<that>)` and the build's own macro values decide the type.
The text is used only when it is plain: a single declaration in the main file, no attributes,
every macro it uses defined outside function bodies (so visible where the outlined function is
placed). Otherwise the clang spelling is kept and the region call site carries a
`_Static_assert` that fails the build when the sizes differ from translate time.
"""
from __future__ import annotations

from dataclasses import dataclass

import clang.cindex as ci

from translate.source import Source, Token

_STORAGE = {"static", "extern", "register", "auto", "_Thread_local", "__thread", "typedef"}
# `{`: a tag defined in the declaration (clang spells it `struct tag`); typeof and __auto_type
# name other variables' types, which clang's spelling resolves.
_REJECT = {"__attribute__", "__declspec", "_Alignas", "alignas", "__asm__", "asm", "__asm", "#", "{",
           "typeof", "__typeof__", "__typeof", "__auto_type"}
_OPEN, _CLOSE = "([{", ")]}"


@dataclass(frozen=True)
class DeclText:
    """A declaration's tokens split around the declared name."""

    before: list[Token]
    after: list[Token]


_ARRAY_QUALIFIERS = {"const", "volatile", "restrict", "__restrict", "__restrict__", "static"}
_QUALIFIERS = {"const", "volatile", "restrict", "__restrict", "__restrict__", "*", "("}


def _statement_start(src: Source, offset: int, stmt_starts) -> int:
    """The start of the declaration statement holding a later declarator (the nearest one before it)."""
    before = [s for s in stmt_starts if s <= offset]
    return max(before) if before else -1


def _specifiers(src: Source, stmt: ci.Cursor) -> list[Token]:
    """Tokens before the first declarator of a declaration statement (its first variable's name,
    less the pointer and parenthesis tokens in front of it); empty when a macro hides the name."""
    first = next((k for k in stmt.get_children() if k.kind == ci.CursorKind.VAR_DECL), None)
    if first is None:
        return []
    i, k = src.token_index(stmt.extent.start.offset), src.token_index(first.location.offset)
    if k >= len(src.tokens) or src.tokens[k].text != first.spelling:
        return []
    while k > i and src.tokens[k - 1].text in _QUALIFIERS:
        k -= 1
    return src.tokens[i:k]


def _declaration_end(src: Source, i: int, is_param: bool) -> int:
    """Index of the token that ends the declaration starting at token i (`,` `;` `=` or a param's `)`)."""
    toks, depth = src.tokens, 0
    while i < len(toks) and depth >= 0:
        t = toks[i].text
        if depth == 0 and (t in (",", ";") or (t == "=" and not is_param) or (t == ")" and is_param)):
            return i
        depth += (t in _OPEN) - (t in _CLOSE)
        i += 1
    return i


def _has_initializer(cur: ci.Cursor) -> bool:
    """Whether a variable has an initializer, as clang sees it (the `=` may hide in a macro).

    The Python bindings do not wrap clang_Cursor_getVarDeclInitializer, so it is called via ctypes.
    """
    fn = ci.conf.lib.clang_Cursor_getVarDeclInitializer
    fn.restype = ci.Cursor
    fn.argtypes = [ci.Cursor]
    return fn(cur) != ci.conf.lib.clang_getNullCursor()


def join_tokens(texts: list[str]) -> str:
    """Tokens as C text: a space where two words would merge and before a `*` (clang's `double *`)."""
    out = ""
    for t in texts:
        if out and (out[-1].isalnum() or out[-1] == "_") and (t[0].isalnum() or t[0] == "_" or t == "*"):
            out += " "
        out += t
    return out


def macro_definitions(tu: ci.TranslationUnit, main: str) -> dict[str, list[int]]:
    """Offsets of every #define in the main file, by macro name."""
    out: dict[str, list[int]] = {}
    for cur in tu.cursor.get_children():
        if cur.kind == ci.CursorKind.MACRO_DEFINITION and cur.location.file and cur.location.file.name == main:
            out.setdefault(cur.spelling, []).append(cur.location.offset)
    return out


def _own_tokens(src: Source, cur: ci.Cursor, stmt_starts: dict[int, ci.Cursor]) -> list[Token] | None:
    """Specifiers and declarator of one variable or parameter (no initializer), or None."""
    is_param = cur.kind == ci.CursorKind.PARM_DECL
    start = cur.extent.start.offset
    specifiers: list[Token] = []
    if not is_param and start not in stmt_starts:
        # a later declarator of `double a[N], b[N][M];`: borrow the statement's specifiers
        stmt = stmt_starts.get(_statement_start(src, start, stmt_starts))
        if stmt is None or cur not in list(stmt.get_children()):
            return None
        specifiers = _specifiers(src, stmt)
        if not specifiers:
            return None
    i = src.token_index(start)
    if specifiers:  # clang starts a later declarator's extent at its name: take `(*` in front too
        while src.tokens[i - 1].text in _QUALIFIERS:
            i -= 1
    j = _declaration_end(src, i, is_param)
    if not is_param and _has_initializer(cur) and (j >= len(src.tokens) or src.tokens[j].text != "="):
        return None  # the initializer is inside a macro expansion: the text is not a declarator
    return specifiers + src.tokens[i:j]


def declaration_text(src: Source, cur: ci.Cursor, stmt_starts: dict[int, ci.Cursor], fn_ranges,
                     macros: dict[str, list[int]]) -> DeclText | None:
    """The declaration's tokens around its name, or None when they cannot stand in for the type."""
    loc = cur.location
    if loc.file is None or loc.file.name != str(src.path):
        return None
    toks = _own_tokens(src, cur, stmt_starts)
    # the location is the macro name when the declarator comes from a macro (POLYBENCH_2D(A, ...))
    if toks is None or sum(t.text == cur.spelling for t in toks) != 1 or any(t.text in _REJECT for t in toks):
        return None
    for t in toks:  # a macro defined inside a function is not visible at the outlined function
        if any(s <= off < e for off in macros.get(t.text, ()) for s, e in fn_ranges):
            return None
    toks = [t for t in toks if t.text not in _STORAGE]
    k = next(n for n, t in enumerate(toks) if t.text == cur.spelling)
    if k == 0 or (k + 1 < len(toks) and toks[k + 1].text == "("):
        return None  # no specifiers, or a function declarator (a parameter adjusted to a pointer)
    if any(a.text == "[" and b.text in _ARRAY_QUALIFIERS for a, b in zip(toks, toks[1:])):
        return None  # `double a[restrict n]` is only valid in a parameter list, not in a type name
    return DeclText(toks[:k], toks[k + 1:])
