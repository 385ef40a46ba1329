"""Statement extents and canonical `for` loop headers, read from libclang cursors and tokens.

libclang truncates an extent that ends inside a macro expansion (it stops at the macro
name), so statement ends are found from tokens: a simple statement ends at the first `;`
at bracket depth 0, a compound statement at its `}`.
"""
from __future__ import annotations

from dataclasses import dataclass

import clang.cindex as ci

from common.errors import InputError
from translate.source import Source, Token

_RECURSE_LAST = (ci.CursorKind.FOR_STMT, ci.CursorKind.WHILE_STMT, ci.CursorKind.IF_STMT,
                 ci.CursorKind.LABEL_STMT, ci.CursorKind.CASE_STMT, ci.CursorKind.DEFAULT_STMT,
                 ci.CursorKind.SWITCH_STMT)
_OPEN, _CLOSE = "([{", ")]}"
CMP_CODES = {"<": 0, "<=": 1, ">": 2, ">=": 3}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


def stmt_end(src: Source, cur: ci.Cursor) -> int:
    """Offset just past a statement, including its `;`."""
    if cur.kind == ci.CursorKind.COMPOUND_STMT:
        return cur.extent.end.offset
    if cur.kind in _RECURSE_LAST:
        children = list(cur.get_children())
        if children:
            return stmt_end(src, children[-1])
    depth = 0
    for tok in src.tokens[src.token_index(cur.extent.start.offset):]:
        if tok.text in _OPEN:
            depth += 1
        elif tok.text in _CLOSE:
            depth -= 1
        elif tok.text == ";" and depth == 0:
            return tok.end
    raise InputError(f"{src.where(cur.extent.start.offset)}: cannot find the end of this statement")


@dataclass
class LoopLevel:
    """One canonical loop `for (var = lb; var cmp ub; var += step)` as source ranges."""

    var: str
    var_decl: ci.Cursor | None  # set when the loop declares its variable
    init_at: int
    lb: tuple[int, int]
    ub: tuple[int, int]
    step: tuple[int, int] | None  # None means 1
    negate_step: bool
    cmp: int


def _header(src: Source, cur: ci.Cursor, where: str) -> list[list[Token]]:
    """The three `;`-separated token segments of a for header."""
    i = src.token_index(cur.extent.start.offset)
    toks = src.tokens
    if toks[i].text != "for" or toks[i + 1].text != "(":
        raise InputError(f"{where}: the loop header is not plain source text (macro?); not supported")
    segs: list[list[Token]] = [[]]
    depth = 0
    for tok in toks[i + 2:]:
        if tok.text in _OPEN:
            depth += 1
        elif tok.text in _CLOSE:
            if depth == 0:
                return segs
            depth -= 1
        elif tok.text == ";" and depth == 0:
            segs.append([])
            continue
        segs[-1].append(tok)
    raise InputError(f"{where}: unterminated loop header")


def _span(toks: list[Token]) -> tuple[int, int]:
    return (toks[0].start, toks[-1].end)


def _not_canonical(where: str, why: str) -> InputError:
    return InputError(f"{where}: loop is not in OpenMP canonical form ({why}); not supported")


def _level(src: Source, cur: ci.Cursor, where: str) -> LoopLevel:
    """Parse one for statement's header."""
    segs = _header(src, cur, where)
    if len(segs) != 3 or not all(segs):
        raise _not_canonical(where, "needs init; test; increment")
    init, cond, inc = segs
    eq = next((k for k, t in enumerate(init) if t.text == "="), None)
    if eq is None or eq == 0 or eq + 1 >= len(init):
        raise _not_canonical(where, "init must be `var = lb`")
    var = init[eq - 1].text
    first = next(iter(cur.get_children()))
    var_decl = None
    if first.kind == ci.CursorKind.DECL_STMT:
        var_decl = next(iter(first.get_children()))
    ops = [k for k, t in enumerate(cond) if t.text in CMP_CODES]
    if len(ops) != 1:
        raise _not_canonical(where, "test must be `var < ub`, `<=`, `>` or `>=`")
    k = ops[0]
    left, right, op = cond[:k], cond[k + 1:], cond[k].text
    if len(left) == 1 and left[0].text == var and right:
        ub = _span(right)
    elif len(right) == 1 and right[0].text == var and left:
        ub, op = _span(left), _FLIP[op]
    else:
        raise _not_canonical(where, f"test must compare `{var}` with a bound")
    step, negate = _increment(inc, var, where)
    return LoopLevel(var, var_decl, init[eq - 1].start, _span(init[eq + 1:]), ub, step, negate, CMP_CODES[op])


def _increment(inc: list[Token], var: str, where: str) -> tuple[tuple[int, int] | None, bool]:
    """The step range and whether it is subtracted."""
    texts = [t.text for t in inc]
    if texts in ([var, "++"], ["++", var]):
        return None, False
    if texts in ([var, "--"], ["--", var]):
        return None, True
    if len(texts) > 2 and texts[0] == var and texts[1] in ("+=", "-="):
        return _span(inc[2:]), texts[1] == "-="
    if len(texts) > 4 and texts[:3] == [var, "=", var] and texts[3] in ("+", "-"):
        return _span(inc[4:]), texts[3] == "-"
    raise _not_canonical(where, "increment must be ++, --, += or -=")


def _inner_for(cur: ci.Cursor) -> ci.Cursor | None:
    """The loop directly nested in a loop body (perfect nesting for collapse)."""
    if cur.kind == ci.CursorKind.FOR_STMT:
        return cur
    if cur.kind == ci.CursorKind.COMPOUND_STMT:
        kids = list(cur.get_children())
        if len(kids) == 1 and kids[0].kind == ci.CursorKind.FOR_STMT:
            return kids[0]
    return None


def parse_loop_nest(src: Source, cur: ci.Cursor, collapse: int, where: str) -> tuple[list[LoopLevel], ci.Cursor]:
    """The `collapse` perfectly nested canonical loops and the innermost body cursor."""
    levels = []
    for depth in range(collapse):
        if cur is None or cur.kind != ci.CursorKind.FOR_STMT:
            raise InputError(f"{where}: collapse({collapse}) needs {collapse} perfectly nested for loops; "
                             f"other nests are not supported")
        kids = list(cur.get_children())
        if len(kids) != 4:
            raise _not_canonical(where, "needs init; test; increment")
        levels.append(_level(src, cur, where))
        body = kids[3]
        cur = _inner_for(body) if depth + 1 < collapse else body
    return levels, cur
