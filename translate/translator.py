"""Rewrite an OpenMP C file into ROSE-style outlined threaded C by editing source extents.

The output is the input text with each OpenMP construct (pragma line plus its statement)
replaced by rendered templates; everything else, including macros, is copied verbatim so the
output keeps the same #includes and #defines. Variable references are rewritten through a
context that maps each declaration to how the current code reaches it:
  direct  - the name itself (locals, globals)
  private - the name itself, a private copy this thread owns
  ptr     - a shared scalar unpacked as `T *x`: references become `(*x)` (ROSE style)
  define  - like ptr, but some reference hides in a macro expansion, so `#define x (*x)`
            is in force instead (a self-referential macro is not re-expanded)
  value   - an array or unmodified pointer passed by value (decayed), used as is
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path

import clang.cindex as ci
import jinja2

from pptmc.errors import InputError
from translate.loops import LoopLevel, parse_loop_nest, stmt_end
from translate.model import LoopInfo, RegionInfo
from translate.pragmas import STANDALONE, Directive, find_directives
from translate.source import Source, Token, VarRef, safe_kind

SCHED_CODES = {"static": 0, "dynamic": 1, "guided": 2, "master": 3, "single": 4}
_ARRAY_KINDS = (ci.TypeKind.CONSTANTARRAY, ci.TypeKind.VARIABLEARRAY, ci.TypeKind.INCOMPLETEARRAY)
_IDENTITY = {"+": "0", "-": "0", "|": "0", "^": "0", "||": "0", "*": "1", "&&": "1", "&": "~0"}

Key = tuple[str, int]


def _env() -> jinja2.Environment:
    """Templates live next to this module as files."""
    return jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
                              trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                              undefined=jinja2.StrictUndefined, autoescape=False)


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


@dataclass
class Construct:
    """A pragma with its associated statement (None for a standalone directive)."""

    d: Directive
    stmt: ci.Cursor | None
    start: int
    end: int
    loop_id: int | None = None


def _simple(type_text: str) -> bool:
    """Whether `T name` declares a variable of type T (no declarator punctuation needed)."""
    return "(" not in type_text and "[" not in type_text


def declare(type_text: str, name: str) -> str:
    """A declaration of `name` with a type given by its clang spelling."""
    return f"{type_text} {name}" if _simple(type_text) else f"__typeof__({type_text}) {name}"


def pointer_to(type_text: str) -> str:
    """The spelling of `T *` for a clang type spelling T."""
    return f"{type_text} *" if _simple(type_text) else f"__typeof__({type_text}) *"


def decl_type_text(info: DeclInfo) -> str:
    """The variable's own type; array parameters are spelled as the pointer they really are."""
    t = info.type
    if info.is_array and info.cursor.kind == ci.CursorKind.PARM_DECL:
        return pointer_to(t.element_type.spelling).strip()
    return t.spelling


def _variably_modified(t: ci.Type) -> bool:
    """Whether a type has a runtime array bound somewhere inside."""
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


class Translator:
    """One translation of one file."""

    def __init__(self, src: Source):
        self.src = src
        self.env = _env()
        self.decls: dict[Key, DeclInfo] = {}
        self.stmt_at: dict[int, ci.Cursor] = {}
        self.functions: list[ci.Cursor] = []
        self._index_ast()
        self.constructs = self._constructs(find_directives(src))
        self.regions: list[RegionInfo] = []
        self.orphan_loops: list[LoopInfo] = []
        self.outlined: dict[int, list[str]] = {}  # function start offset -> outlined code
        self.locks: list[str] = []
        self.inserts: dict[int, str] = {}  # zero-width insertions at original offsets

    # ---- indexing -------------------------------------------------------------------------
    def _index_ast(self) -> None:
        """Record declarations, statement starts and function extents of the main file."""
        main = str(self.src.path)
        for cur in self.src.tu.cursor.walk_preorder():
            kind = safe_kind(cur)
            if kind is None:
                continue
            loc = cur.location
            in_main = loc.file is not None and loc.file.name == main
            if kind in (ci.CursorKind.VAR_DECL, ci.CursorKind.PARM_DECL):
                self._add_decl(cur, in_main)
            if not in_main:
                continue
            if kind == ci.CursorKind.FUNCTION_DECL and cur.is_definition():
                self.functions.append(cur)
            if kind.is_statement() or kind.is_expression():
                self.stmt_at.setdefault(cur.extent.start.offset, cur)

    def _add_decl(self, cur: ci.Cursor, in_main: bool) -> None:
        """Store one declaration."""
        loc = cur.location
        key = (loc.file.name if loc.file else "", loc.offset)
        if key in self.decls:
            return
        parent = cur.semantic_parent
        is_global = parent is None or parent.kind == ci.CursorKind.TRANSLATION_UNIT \
            or cur.storage_class == ci.StorageClass.EXTERN
        func = None
        if not is_global and parent is not None:
            func = (parent.extent.start.offset, parent.extent.end.offset)
        info = DeclInfo(key, cur.spelling, cur, loc.offset if in_main else -1, func, is_global)
        if _variably_modified(cur.type):
            info.bounds = self._bound_keys(cur)
        self.decls[key] = info

    def _bound_keys(self, cur: ci.Cursor) -> list[Key]:
        """Variables referenced by the declaration's type (its initializer is left out)."""
        children = list(cur.get_children())
        if cur.kind == ci.CursorKind.VAR_DECL and children and self._has_init(cur):
            children = children[:-1]
        keys = []
        for child in children:
            for sub in child.walk_preorder():
                if sub.kind == ci.CursorKind.DECL_REF_EXPR and sub.referenced is not None \
                        and sub.referenced.kind in (ci.CursorKind.VAR_DECL, ci.CursorKind.PARM_DECL):
                    d = sub.referenced.location
                    keys.append((d.file.name if d.file else "", d.offset))
        return keys

    def _has_init(self, cur: ci.Cursor) -> bool:
        """Whether a declarator is followed by `=` (skipping `)` and `[...]`)."""
        toks = self.src.tokens
        i = self.src.token_index(cur.location.offset) + 1
        depth = 0
        while i < len(toks):
            t = toks[i].text
            if t == "[":
                depth += 1
            elif t == "]":
                depth -= 1
            elif depth == 0 and t != ")":
                return t == "="
            i += 1
        return False

    def _constructs(self, directives: list[Directive]) -> list[Construct]:
        """Attach each directive to the statement that follows it."""
        out = []
        loop_id = 0
        for d in directives:
            if d.kind in STANDALONE:
                out.append(Construct(d, None, d.start, d.end))
                continue
            tok = self.src.next_code_token(d.end)
            stmt = self.stmt_at.get(tok.start) if tok is not None else None
            if stmt is None:
                raise InputError(f"{d.where}: '#pragma omp {d.kind}' must be followed by a statement")
            c = Construct(d, stmt, d.start, stmt_end(self.src, stmt))
            if d.kind in ("for", "parallel for", "master", "single"):
                c.loop_id = loop_id
                loop_id += 1
            out.append(c)
        return out

    # ---- lookups --------------------------------------------------------------------------
    def refs_in(self, start: int, end: int) -> list[VarRef]:
        """Variable references inside [start, end)."""
        return [r for r in self.src.refs if start <= r.start < end]

    def resolve(self, name: str, at: int, scope: tuple[int, int]) -> DeclInfo:
        """The declaration a clause's variable name refers to at offset `at`."""
        for r in self.refs_in(*scope):
            if r.name == name and r.key in self.decls:
                return self.decls[r.key]
        local = [d for d in self.decls.values() if d.name == name and d.func and d.offset >= 0
                 and d.func[0] <= at < d.func[1] and d.offset < at]
        if local:
            return max(local, key=lambda d: d.offset)
        glob = [d for d in self.decls.values() if d.name == name and d.is_global]
        if glob:
            return glob[-1]
        raise InputError(f"{self.src.where(at)}: clause names '{name}', which is not a variable in scope")

    def children_in(self, start: int, end: int) -> list[Construct]:
        """Outermost constructs inside [start, end)."""
        out: list[Construct] = []
        for c in self.constructs:
            if c.start >= start and c.end <= end and not (out and c.start < out[-1].end):
                out.append(c)
        return out

    # ---- rendering ------------------------------------------------------------------------
    def render(self, start: int, end: int, ctx: dict[Key, str], region: RegionInfo | None) -> str:
        """Text of [start, end) with constructs translated and references rewritten for `ctx`."""
        items: list[tuple[int, int, str | Construct]] = [(c.start, c.end, c) for c in self.children_in(start, end)]
        items += [(off, off, text) for off, text in self.inserts.items() if start <= off < end]
        for r in self.refs_in(start, end):
            if ctx.get(r.key) == "ptr" and r.direct:
                items.append((r.start, r.end, f"(*{r.name})"))
        items.sort(key=lambda x: x[0])
        out, pos = [], start
        for s, e, what in items:
            if s < pos:
                continue  # a reference inside a construct already rendered
            out.append(self.src.slice(pos, s))
            if isinstance(what, str):
                out.append(what)
            else:
                if what.stmt is not None:  # keep #endif etc. between the pragma and its statement
                    out.append(self.src.slice(what.d.end, what.stmt.extent.start.offset))
                out.append(self.render_construct(what, ctx, region))
            pos = e
        out.append(self.src.slice(pos, end))
        return "".join(out)

    def render_tokens(self, toks: list[Token], ctx: dict[Key, str], at: int, scope) -> str:
        """A clause expression (chunk, num_threads) with shared scalars dereferenced."""
        parts = []
        for t in toks:
            text = t.text
            if text[0].isalpha() or text[0] == "_":
                try:
                    info = self.resolve(text, at, scope)
                    if ctx.get(info.key) == "ptr":
                        text = f"(*{text})"
                except InputError:
                    pass  # a macro or function name
            parts.append(text)
        return " ".join(parts)

    def render_construct(self, c: Construct, ctx: dict[Key, str], region: RegionInfo | None) -> str:
        """Dispatch on the directive kind."""
        kind = c.d.kind
        if kind in ("parallel", "parallel for"):
            if region is not None:
                raise InputError(f"{c.d.where}: nested parallel regions are not supported")
            return self.render_region(c)
        if kind == "for":
            return self.render_loop(c, c.d, ctx, region)
        if kind == "barrier":
            return self.env.get_template("barrier.c.j2").render(line=c.d.line)
        if kind == "single":
            return self.render_single(c, ctx, region)
        body = self.render(c.stmt.extent.start.offset, c.end, ctx, region)
        if kind == "master":
            self._note_loop(region, LoopInfo(c.loop_id, c.d.line, "master", "", 1, True))
            return self.env.get_template("master.c.j2").render(line=c.d.line, id=c.loop_id, body=body,
                                                               sched=SCHED_CODES["master"])
        if kind == "critical":
            lock = f"xomp_critical_user_{c.d.critical_name}" if c.d.critical_name else "xomp_critical_default"
            if c.d.critical_name and lock not in self.locks:
                self.locks.append(lock)
            return self.env.get_template("critical.c.j2").render(line=c.d.line, body=body, lock=lock,
                                                                 user_name=c.d.critical_name)
        return self.env.get_template("atomic.c.j2").render(line=c.d.line, body=body)

    def _note_loop(self, region: RegionInfo | None, info: LoopInfo) -> None:
        """Record a work-shared construct on its region (or as orphaned)."""
        (region.loops if region is not None else self.orphan_loops).append(info)

    def address_of(self, info: DeclInfo, ctx: dict[Key, str]) -> str:
        """An expression for the address of the variable as the current code sees it."""
        mode = ctx.get(info.key, "direct")
        if mode == "ptr":
            return info.name
        if mode == "value" and info.is_array and not info.is_pointer:
            return info.name
        return f"&{info.name}"

    def privatize(self, d: Directive, ctx: dict[Key, str], scope, extra: list[DeclInfo] = ()):
        """Private copies for a worksharing construct: aliases, #undefs, decls, init and combine code."""
        at = d.start
        names = dict.fromkeys([v.name for v in extra] + d.private + d.firstprivate + d.lastprivate
                              + [v for _, v in d.reductions])
        infos = {v.name: v for v in extra}
        for name in names:
            infos.setdefault(name, self.resolve(name, at, scope))
        need_sh = dict.fromkeys(d.firstprivate + d.lastprivate + [v for _, v in d.reductions])
        aliases = [{"name": n, "addr": self.address_of(infos[n], ctx)} for n in need_sh]
        undefs = [n for n in names if ctx.get(infos[n].key) == "define"]
        decls = [declare(decl_type_text(infos[n]), n) for n in names]
        prologue = [f"__builtin_memcpy(&{n}, __sh_{n}, sizeof {n});" for n in d.firstprivate]
        epilogue = []
        for op, n in d.reductions:
            prologue.append(self._reduction_init(op, n))
            epilogue.append(self._reduction_combine(op, n))
        inner = dict(ctx)
        for info in infos.values():
            inner[info.key] = "private"
        return aliases, undefs, decls, prologue, epilogue, inner

    @staticmethod
    def _reduction_init(op: str, n: str) -> str:
        """Initialise a private reduction copy."""
        if op in ("min", "max"):  # start from the shared value: min/max are idempotent
            return f"XOMP_atomic_start(); {n} = *__sh_{n}; XOMP_atomic_end();"
        return f"{n} = {_IDENTITY[op]};"

    @staticmethod
    def _reduction_combine(op: str, n: str) -> str:
        """Fold a private reduction copy into the shared variable (Fig. 3 of the paper)."""
        if op == "min":
            body = f"if ({n} < *__sh_{n}) *__sh_{n} = {n};"
        elif op == "max":
            body = f"if ({n} > *__sh_{n}) *__sh_{n} = {n};"
        else:
            body = f"*__sh_{n} = *__sh_{n} {'+' if op == '-' else op} {n};"
        return f"XOMP_atomic_start(); {body} XOMP_atomic_end();"

    def render_loop(self, c: Construct, d: Directive, ctx: dict[Key, str], region: RegionInfo | None) -> str:
        """A work-shared loop over a normalised, possibly collapsed, iteration space."""
        scope = (c.start, c.end)  # clause names resolve to the declarations the construct uses
        levels, body_cur = parse_loop_nest(self.src, c.stmt, d.collapse, d.where)
        loop_vars = [self._loop_var(lv, scope) for lv in levels]
        self._check_rectangular(levels, loop_vars, d.where)
        # loop variables are private; one the enclosing region already privatised needs no new copy
        extra = [v for v in loop_vars if v.name not in d.private + d.lastprivate and ctx.get(v.key) != "private"]
        aliases, undefs, decls, prologue, epilogue, inner = self.privatize(d, ctx, scope, extra)
        body = self.render(body_cur.extent.start.offset, stmt_end(self.src, body_cur), inner, region)
        tvals = []
        n = len(levels)
        for i, lv in enumerate(levels):
            rest = " * ".join(f"__n{c.loop_id}_{j}" for j in range(i + 1, n))
            tvals.append({"var": lv.var, "lb": self.render(*lv.lb, ctx, region),
                          "ub": self.render(*lv.ub, ctx, region), "step": self._step(lv, ctx, region),
                          "cmp": lv.cmp, "div": f" / ({rest})" if rest else "",
                          "mod": f" % __n{c.loop_id}_{i}" if i else "", "last": lv.var in d.lastprivate})
        chunk = self.render_tokens(d.chunk, ctx, c.start, scope) if d.chunk else "0"
        self._note_loop(region, LoopInfo(c.loop_id, d.line, d.schedule, self.src.slice(
            d.chunk[0].start, d.chunk[-1].end) if d.chunk else "", d.collapse, d.nowait))
        return self.env.get_template("for_loop.c.j2").render(
            kind=d.kind, line=d.line, id=c.loop_id, aliases=aliases, undefs=undefs, decls=decls,
            prologue=prologue, epilogue=epilogue, levels=tvals, sched=SCHED_CODES[d.schedule],
            chunk=f"(long)({chunk})", body=body, lastprivate=d.lastprivate, nowait=int(d.nowait))

    def _step(self, lv: LoopLevel, ctx, region) -> str:
        """The signed step expression of one loop level."""
        text = self.render(*lv.step, ctx, region) if lv.step else "1"
        return f"-({text})" if lv.negate_step else text

    def _loop_var(self, lv: LoopLevel, scope) -> DeclInfo:
        """The declaration of a loop's iteration variable."""
        if lv.var_decl is not None:
            loc = lv.var_decl.location
            return self.decls[(loc.file.name if loc.file else "", loc.offset)]
        return self.resolve(lv.var, lv.init_at, (lv.init_at, lv.init_at + 1))

    def _check_rectangular(self, levels: list[LoopLevel], loop_vars: list[DeclInfo], where: str) -> None:
        """Collapsed inner bounds must not depend on outer loop variables."""
        for i, lv in enumerate(levels[1:], start=1):
            outer = {v.key for v in loop_vars[:i]}
            for rng in (lv.lb, lv.ub, lv.step):
                if rng and any(r.key in outer for r in self.refs_in(*rng)):
                    raise InputError(f"{where}: collapse over a non-rectangular loop nest is not supported")

    def render_single(self, c: Construct, ctx, region) -> str:
        """`single`: a one-iteration dynamic loop that the first thread to arrive takes."""
        scope = (c.start, c.end)
        aliases, undefs, decls, prologue, _, inner = self.privatize(c.d, ctx, scope)
        body = self.render(c.stmt.extent.start.offset, c.end, inner, region)
        self._note_loop(region, LoopInfo(c.loop_id, c.d.line, "single", "", 1, c.d.nowait))
        return self.env.get_template("single.c.j2").render(
            line=c.d.line, id=c.loop_id, aliases=aliases, undefs=undefs, decls=decls, prologue=prologue,
            body=body, sched=SCHED_CODES["single"], nowait=int(c.d.nowait))

    def _function_of(self, offset: int) -> ci.Cursor:
        """The function definition containing an offset."""
        for fn in self.functions:
            if fn.extent.start.offset <= offset < fn.extent.end.offset:
                return fn
        raise InputError(f"{self.src.where(offset)}: OpenMP directive outside a function")

    # ---- regions --------------------------------------------------------------------------
    def render_region(self, c: Construct) -> str:
        """A parallel region: the call site here, the outlined function before the enclosing function."""
        from translate.regions import build_region  # the region analysis lives in its own module
        return build_region(self, c)

    def translate(self) -> str:
        """The whole translated file."""
        self._insert_xomp_init()
        marks = {}
        body_parts = []
        pos = 0
        region_fns = sorted({self._function_of(c.start).extent.start.offset for c in self.constructs
                             if c.d.kind.startswith("parallel")})
        for k, fstart in enumerate(region_fns):
            body_parts.append(self.render(pos, fstart, {}, None))
            marks[k] = fstart
            body_parts.append(f"\0OUTLINED{k}\0")
            pos = fstart
        body_parts.append(self.render(pos, len(self.src.data), {}, None))
        text = "".join(body_parts)
        for k, fstart in marks.items():
            text = text.replace(f"\0OUTLINED{k}\0", "".join(self.outlined.get(fstart, [])))
        prologue = self.env.get_template("prologue.c.j2").render(source=self.src.path.name, locks=self.locks)
        return prologue + text

    def _insert_xomp_init(self) -> None:
        """Start main() with XOMP_init(argc, argv) as ROSE does (Fig. 3, line 9)."""
        for fn in self.functions:
            if fn.spelling != "main" or not any(c.d.kind.startswith("parallel") for c in self.constructs):
                continue
            params = [p.spelling for p in fn.get_arguments()]
            body = next((k for k in fn.get_children() if k.kind == ci.CursorKind.COMPOUND_STMT), None)
            if body is not None:
                args = ", ".join(params[:2]) if len(params) >= 2 and all(params[:2]) else "0, 0"
                self.inserts[body.extent.start.offset + 1] = f"\n  XOMP_init({args});"


def region_id(path: Path, line: int) -> int:
    """A stable 4-digit id from the file name and line (ROSE-like OUT__<n>__<id>__ names)."""
    return zlib.crc32(f"{path.name}:{line}".encode()) % 10000


def translate_source(src: Source) -> tuple[str, list[RegionInfo], list[LoopInfo]]:
    """Translate a parsed file; returns the C text, the regions and orphaned work-sharing."""
    tr = Translator(src)
    text = tr.translate()
    return text, sorted(tr.regions, key=lambda r: r.n), tr.orphan_loops
