"""`#pragma omp atomic` as hardware atomics (issue #3, item 3).

Recognised statements on a scalar integer or float/double lvalue `x`:
  update: `x op= e`, `x++`, `++x`, `x--`, `--x`, `x = x op e`, `x = e op x`
          (op in + - * / % & | ^ << >>)
  read:   `v = x`          write: `x = e`
Integer `+ - & | ^` with an integer `e` become `__atomic_fetch_<op>`; every other update is a
compare-exchange loop that evaluates `e` once (its first read of `x` may be stale: the exchange
then fails and returns the current value). Updates are relaxed, OpenMP's default order (clang's
`monotonic`), or sequentially consistent with the `seq_cst` clause. `read` and `write` are volatile accesses of the scalar:
OpenMP's default order for them is relaxed, and a relaxed atomic load or store of a naturally
aligned scalar of at most 8 bytes is the same single instruction as a volatile one on x86-64 and
AArch64 (volatile stops the compiler from tearing, merging or dropping it); they also stay plain
loads and stores for the tracer's IR pass, which reads `load atomic` operands wrongly (reported). Anything else keeps the global XOMP lock (a
statement under the lock is not atomic against a hardware atomic on the same variable, so the
README tells users to keep one form per variable).
"""
from __future__ import annotations

import clang.cindex as ci

from translate.decls import Key
from translate.loops import stmt_end
from translate.model import RegionInfo
from translate.services import Renderer

_FETCH = {"+": "add", "-": "sub", "&": "and", "|": "or", "^": "xor"}
# Binding strength of C's binary operators (larger binds tighter); `x = x op e` is an update
# only when no operator at depth 0 of `e` binds as loosely as `op` or looser.
_PREC = {"*": 10, "/": 10, "%": 10, "+": 9, "-": 9, "<<": 8, ">>": 8, "<": 7, ">": 7, "<=": 7, ">=": 7,
         "==": 6, "!=": 6, "&": 5, "^": 4, "|": 3, "&&": 2, "||": 1, "?": 0, ":": 0, "=": -1, ",": -2}
_UPDATE_OPS = ("+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>")
_INT_KINDS = {ci.TypeKind.INT, ci.TypeKind.UINT, ci.TypeKind.LONG, ci.TypeKind.ULONG, ci.TypeKind.LONGLONG,
              ci.TypeKind.ULONGLONG, ci.TypeKind.SHORT, ci.TypeKind.USHORT, ci.TypeKind.CHAR_S,
              ci.TypeKind.CHAR_U, ci.TypeKind.SCHAR, ci.TypeKind.UCHAR}
_FLOAT_KINDS = {ci.TypeKind.FLOAT, ci.TypeKind.DOUBLE}
_SEQ = "__ATOMIC_SEQ_CST"
_RELAXED = "__ATOMIC_RELAXED"  # OpenMP's default order for atomic constructs: clang emits `monotonic`


def _scalar_kind(t: ci.Type) -> str | None:
    """'int' or 'float' for types with lock-free atomics; None for the rest."""
    kind = t.get_canonical().kind
    return "int" if kind in _INT_KINDS else "float" if kind in _FLOAT_KINDS else None


def _operand_end(text: str) -> bool:
    """Whether a token ends an operand, so an operator after it is binary."""
    return text[0].isalnum() or text[0] in "_)]'\"" or text in ("++", "--")


def _loosest(toks) -> int:
    """The loosest binding strength among the depth-0 binary operators of a token list."""
    depth, prev, low = 0, None, 99
    for t in toks:
        if t.text in "([{":
            depth += 1
        elif t.text in ")]}":
            depth -= 1
        elif depth == 0 and t.text in _PREC and prev is not None and _operand_end(prev):
            low = min(low, _PREC[t.text])
        elif depth == 0 and t.text.endswith("=") and t.text not in ("==", "!=", "<=", ">="):
            low = min(low, -1)
        prev = t.text
    return low


def _split(toks):
    """(lhs tokens, assignment operator, rhs tokens) at the first depth-0 assignment."""
    depth = 0
    for k, t in enumerate(toks):
        depth += (t.text in "([{") - (t.text in ")]}")
        if depth == 0 and t.text.endswith("=") and t.text not in ("==", "!=", "<=", ">="):
            return toks[:k], t.text, toks[k + 1:]
    return None


class AtomicWriter:
    """Rewrites one atomic statement; returns None to keep the lock."""

    def __init__(self, tr: Renderer, stmt: ci.Cursor, ctx: dict[Key, str], region: RegionInfo | None,
                 seq_cst: bool = False):
        self.tr, self.stmt, self.ctx, self.region = tr, stmt, ctx, region
        self.order = _SEQ if seq_cst else _RELAXED  # an update's memory order, as clang gives it
        src = tr.src
        end = stmt_end(src, stmt)
        toks = src.tokens[src.token_index(stmt.extent.start.offset):src.token_index(end)]
        self.toks = toks[:-1] if toks and toks[-1].text == ";" else toks

    def text(self, toks) -> str:
        """Rendered source of a token range (shared variables rewritten for the context)."""
        return self.tr.render(toks[0].start, toks[-1].end, self.ctx, self.region)

    def code(self, kind: str) -> str | None:
        """C for the statement, or None when its form or type needs the lock."""
        kids = list(self.stmt.get_children())
        if not self.toks or not kids or any(t.start < self.stmt.extent.start.offset for t in self.toks):
            return None
        lhs = kids[0]
        if kind == "read":
            return self._read(kids)
        if _scalar_kind(lhs.type) is None:
            return None
        if kind == "write":
            return self._write()
        return self._update(lhs)

    def _read(self, kids) -> str | None:
        parts = _split(self.toks)
        if parts is None or parts[1] != "=" or len(kids) != 2 or _scalar_kind(kids[1].type) is None:
            return None
        v, x = self.text(parts[0]), self.text(parts[2])
        return f"{v} = *(volatile __typeof__({x}) *)&({x});"

    def _write(self) -> str | None:
        parts = _split(self.toks)
        if parts is None or parts[1] != "=":
            return None
        x, e = self.text(parts[0]), self.text(parts[2])
        return f"*(volatile __typeof__({x}) *)&({x}) = ({e});"

    def _update(self, lhs: ci.Cursor) -> str | None:
        texts = [t.text for t in self.toks]
        if texts[0] in ("++", "--") or texts[-1] in ("++", "--"):
            op = "+" if "++" in (texts[0], texts[-1]) else "-"
            x = self.text(self.toks[1:] if texts[0] in ("++", "--") else self.toks[:-1])
            return self._emit(lhs, x, op, "1", int_rhs=True)
        parts = _split(self.toks)
        if parts is None:
            return None
        xt, aop, et = parts
        if aop != "=":
            op = aop[:-1]
            if op not in _UPDATE_OPS or not et:
                return None
            return self._emit(lhs, self.text(xt), op, self.text(et), int_rhs=self._int_rhs())
        n = len(xt)
        inner = list(list(self.stmt.get_children())[1].get_children())
        if len(et) <= n + 1 or len(inner) != 2:
            return None
        if [t.text for t in et[:n]] == [t.text for t in xt]:  # x = x op e
            op, rest = et[n].text, et[n + 1:]
            if op not in _UPDATE_OPS or _loosest(rest) <= _PREC[op]:
                return None
            int_rhs = _scalar_kind(inner[1].type) == "int"
            return self._emit(lhs, self.text(xt), op, self.text(rest), int_rhs=int_rhs)
        if [t.text for t in et[-n:]] == [t.text for t in xt]:  # x = e op x
            op, rest = et[-n - 1].text, et[:-n - 1]
            if op not in _UPDATE_OPS or not rest or _loosest(rest) <= _PREC[op]:
                return None
            commutes = op in ("+", "*", "&", "|", "^")
            int_rhs = commutes and _scalar_kind(inner[0].type) == "int"
            return self._emit(lhs, self.text(xt), op, self.text(rest), int_rhs=int_rhs, reverse=True)
        return None

    def _int_rhs(self) -> bool:
        kids = list(self.stmt.get_children())
        return len(kids) == 2 and _scalar_kind(kids[1].type) == "int"

    def _emit(self, lhs: ci.Cursor, x: str, op: str, e: str, int_rhs: bool, reverse: bool = False) -> str:
        """fetch-op for integer add/sub/and/or/xor, else a compare-exchange loop (`reverse`: x = e op x), with
        the statement's memory order (a seq_cst update is a fence to the compiler: loads of escaped memory after
        it, such as a loop's bound, are made again, which a relaxed one, clang's default, does not force)."""
        order = self.order
        if _scalar_kind(lhs.type) == "int" and int_rhs and op in _FETCH and not (reverse and op == "-"):
            return f"__atomic_fetch_{_FETCH[op]}(&({x}), ({e}), {order});"
        update = f"__ar {op} __ao" if reverse else f"__ao {op} __ar"
        return (f"{{ __typeof__({x}) *__ap = &({x}); __typeof__({e}) __ar = ({e}); __typeof__({x}) __ao, __an;\n"
                f"    __ao = *(volatile __typeof__({x}) *)__ap;\n"
                f"    do __an = {update};\n"
                f"    while (!__atomic_compare_exchange(__ap, &__ao, &__an, 0, {order}, __ATOMIC_RELAXED)); }}")
