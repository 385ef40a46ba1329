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

from pathlib import Path

import clang.cindex as ci
import jinja2

from common.errors import InputError
from translate.atomics import AtomicWriter
from translate.decls import Construct, DeclInfo, Key, SizeGuard, decl_type_text, declare, pointer_to, simple_type
from translate.localtypes import LocalTypeIndex, variably_modified
from translate.buildinfo import marker_line
from translate.loops import LoopLevel, parse_loop_nest, stmt_end
from translate.macros import macro_directives
from translate.model import LoopInfo, RegionInfo
from translate.pragmas import STANDALONE, Directive, find_directives
from translate.reductions import reduction_combine, reduction_init
from translate.regions import build_region
from translate.source import Source, Token, VarRef, safe_kind, shown_path
from translate.spelling import DeclText, declaration_text, join_tokens, macro_definitions

# schedule(auto) is static (the implementation's choice, documented); runtime is read from
# OMP_SCHEDULE by XOMP_runtime_schedule when the loop starts, so the marker shows the real one.
SCHED_CODES = {"static": 0, "dynamic": 1, "guided": 2, "master": 3, "single": 4, "auto": 0}


def _env() -> jinja2.Environment:
    """Templates live next to this module as files."""
    return jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
                              trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                              undefined=jinja2.StrictUndefined, autoescape=False)


class Translator:
    """One translation of one file (implements translate/services.py's RegionServices)."""

    def __init__(self, src: Source):
        self.src = src
        self.env = _env()
        self.decls: dict[Key, DeclInfo] = {}
        self.stmt_at: dict[int, ci.Cursor] = {}
        self.functions: list[ci.Cursor] = []
        self.decl_stmts: list[ci.Cursor] = []
        self._index_ast()
        self.local_types = LocalTypeIndex(src, self.decl_stmts)
        self.macros = macro_definitions(src.tu, str(src.path))
        self.macro_directives = macro_directives(src)
        self.ref_at = {r.start: r for r in src.refs}
        self._decl_texts: dict[Key, DeclText | None] = {}
        self._stmt_by_start = {st.extent.start.offset: st for st in self.decl_stmts}
        self._fn_ranges = [(f.extent.start.offset, f.extent.end.offset) for f in self.functions]
        self.size_guards: list[SizeGuard] = []  # clang-spelled array types to check at build time
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
            if kind == ci.CursorKind.DECL_STMT:
                self.decl_stmts.append(cur)
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
        if variably_modified(cur.type):
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

    # ---- type spelling -----------------------------------------------------------------------
    def decl_text(self, info: DeclInfo) -> DeclText | None:
        """The declaration's own tokens around its name (macros kept), when usable."""
        if info.key not in self._decl_texts:
            self._decl_texts[info.key] = declaration_text(self.src, info.cursor, self._stmt_by_start,
                                                          self._fn_ranges, self.macros)
        return self._decl_texts[info.key]

    def type_name(self, info: DeclInfo, ctx: dict[Key, str]) -> str | None:
        """`__typeof__(<declaration without its name>)`, shared scalars in bounds dereferenced."""
        text = self.decl_text(info)
        if text is None:
            return None
        parts = []
        for t in text.before + text.after:
            ref = self.ref_at.get(t.start)
            if ref is not None and not variably_modified(info.type) and ref.key in self.decls \
                    and not self.decls[ref.key].is_global:
                return None  # e.g. `double b[sizeof a]`: a local the outlined code cannot see
            parts.append(f"(*{t.text})" if ref is not None and ref.direct and ctx.get(ref.key) == "ptr" else t.text)
        text = join_tokens(parts)
        return text if simple_type(text) else f"__typeof__({text})"

    def var_type(self, info: DeclInfo, ctx: dict[Key, str], base: str = "0") -> str:
        """The variable's type as outlined code spells it; an array parameter is its element pointer."""
        name = self.type_name(info, ctx)
        if name is not None and info.is_array and info.cursor.kind == ci.CursorKind.PARM_DECL:
            return self._elem_ptr(name, info, base) or self._clang_spelled(info, decl_type_text(info), True)
        return name or self._clang_spelled(info, decl_type_text(info), info.is_pointer)

    def elem_ptr_type(self, info: DeclInfo, ctx: dict[Key, str], base: str = "0") -> str:
        """A pointer to the first element of an array variable (what the array decays to)."""
        name = self.type_name(info, ctx)
        spelled = name and self._elem_ptr(name, info, base)
        return spelled or self._clang_spelled(info, pointer_to(info.type.element_type.spelling), True)

    @staticmethod
    def _elem_ptr(type_name: str, info: DeclInfo, base: str) -> str | None:
        """`__typeof__((*(T *)base)[0]) *`; a variably modified T is evaluated, so base must be valid."""
        if not variably_modified(info.type):
            base = "0"  # not evaluated: __typeof__ only evaluates variably modified operands
        elif base == "0":
            return None
        return f"__typeof__((*({type_name} *){base})[0]) *"

    def _clang_spelled(self, info: DeclInfo, text: str, pointer: bool) -> str:
        """Fall back to clang's spelling; constant array sizes get a build-time check at the call site.

        `pointer`: the spelled type is a pointer, so the check compares what it points to.
        """
        if "[" in text and not variably_modified(info.type):
            self.size_guards.append(SizeGuard(info, text, pointer))
        return text

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
            return self.render_region(c, ctx if region is not None else None)
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
        code = AtomicWriter(self, c.stmt, ctx, region, c.d.atomic_seq_cst).code(c.d.atomic_kind)
        return self.env.get_template("atomic.c.j2").render(line=c.d.line, body=body, code=code,
                                                           kind=c.d.atomic_kind)

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
        decls = [declare(self.var_type(infos[n], ctx), n) for n in names]
        prologue = [f"__builtin_memcpy(&{n}, __sh_{n}, sizeof {n});" for n in d.firstprivate]
        epilogue = []
        for op, n in d.reductions:
            prologue.append(reduction_init(op, n))
            epilogue.append(reduction_combine(op, n))
        inner = dict(ctx)
        for info in infos.values():
            inner[info.key] = "private"
        return aliases, undefs, decls, prologue, epilogue, inner

    def render_loop(self, c: Construct, d: Directive, ctx: dict[Key, str], region: RegionInfo | None) -> str:
        """A work-shared loop over a normalised, possibly collapsed, iteration space."""
        scope = (c.start, c.end)  # clause names resolve to the declarations the construct uses
        levels, body_cur = parse_loop_nest(self.src, c.stmt, d.collapse, d.where)
        loop_vars = [self.loop_var(lv, scope) for lv in levels]
        triangular = self._check_rectangular(levels, loop_vars, d)
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
        if triangular:  # the inner bounds read the outer (private) variable
            tvals[1].update(lb=self.render(*levels[1].lb, inner, region),
                            ub=self.render(*levels[1].ub, inner, region))
        chunk = self.render_tokens(d.chunk, ctx, c.start, scope) if d.chunk else "0"
        self._note_loop(region, LoopInfo(c.loop_id, d.line, d.schedule, self.src.slice(
            d.chunk[0].start, d.chunk[-1].end) if d.chunk else "", d.collapse, d.nowait))
        runtime = d.schedule == "runtime"
        return self.env.get_template("for_loop.c.j2").render(
            kind=d.kind, line=d.line, id=c.loop_id, aliases=aliases, undefs=undefs, decls=decls,
            prologue=prologue, epilogue=epilogue, levels=tvals, runtime=runtime,
            sched=f"__sched{c.loop_id}" if runtime else SCHED_CODES[d.schedule],
            chunk=f"__chunk{c.loop_id}" if runtime else f"(long)({chunk})", body=body,
            lastprivate=d.lastprivate, nowait=int(d.nowait), triangular=triangular,
            static_blocks=not runtime and d.schedule in ("static", "auto") and not d.chunk,
            static_chunked=not runtime and d.schedule == "static" and bool(d.chunk),
            odometer=_odometer(c.loop_id, n) if n > 1 and not triangular else "")

    def _step(self, lv: LoopLevel, ctx, region) -> str:
        """The signed step expression of one loop level."""
        text = self.render(*lv.step, ctx, region) if lv.step else "1"
        return f"-({text})" if lv.negate_step else text

    def loop_var(self, lv: LoopLevel, scope) -> DeclInfo:
        """The declaration of a loop's iteration variable."""
        if lv.var_decl is not None:
            loc = lv.var_decl.location
            return self.decls[(loc.file.name if loc.file else "", loc.offset)]
        return self.resolve(lv.var, lv.init_at, (lv.init_at, lv.init_at + 1))

    def _check_rectangular(self, levels: list[LoopLevel], loop_vars: list[DeclInfo], d: Directive) -> bool:
        """Whether a collapsed nest is triangular; errors for non-rectangular nests it cannot run.

        Supported: collapse(2) whose inner lower/upper bound reads the outer variable (the
        flattened index then walks a prefix sum of the row lengths).
        """
        triangular = False
        for i, lv in enumerate(levels[1:], start=1):
            for what, rng in (("lower bound", lv.lb), ("upper bound", lv.ub), ("step", lv.step)):
                used = [v.name for v in loop_vars[:i] if rng and any(r.key == v.key for r in self.refs_in(*rng))]
                if not used:
                    continue
                if len(levels) != 2 or what == "step" or lv.var in d.lastprivate or levels[0].var in d.lastprivate:
                    raise InputError(f"{d.where}: collapse({d.collapse}) over a non-rectangular nest: the {what} "
                                     f"of loop {i + 1} ('{lv.var}') uses the outer variable '{used[0]}'; only "
                                     f"collapse(2) with inner bounds depending on the outer variable is "
                                     f"supported (no step dependence, no lastprivate loop variable)")
                triangular = True
        return triangular

    def render_single(self, c: Construct, ctx, region) -> str:
        """`single`: a one-iteration dynamic loop that the first thread to arrive takes."""
        scope = (c.start, c.end)
        aliases, undefs, decls, prologue, _, inner = self.privatize(c.d, ctx, scope)
        body = self.render(c.stmt.extent.start.offset, c.end, inner, region)
        self._note_loop(region, LoopInfo(c.loop_id, c.d.line, "single", "", 1, c.d.nowait))
        return self.env.get_template("single.c.j2").render(
            line=c.d.line, id=c.loop_id, aliases=aliases, undefs=undefs, decls=decls, prologue=prologue,
            body=body, sched=SCHED_CODES["single"], nowait=int(c.d.nowait))

    def function_of(self, offset: int) -> ci.Cursor:
        """The function definition containing an offset."""
        for fn in self.functions:
            if fn.extent.start.offset <= offset < fn.extent.end.offset:
                return fn
        raise InputError(f"{self.src.where(offset)}: OpenMP directive outside a function")

    # ---- regions --------------------------------------------------------------------------
    def render_region(self, c: Construct, outer: dict[Key, str] | None = None) -> str:
        """A parallel region: the call site here, the outlined function before the enclosing function."""
        return build_region(self, c, outer)

    def translate(self) -> str:
        """The whole translated file."""
        self._require_parallel_region()
        self._insert_xomp_init()
        marks = {}
        body_parts = []
        pos = 0
        region_fns = sorted({self.function_of(c.start).extent.start.offset for c in self.constructs
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
        prologue = self.env.get_template("prologue.c.j2").render(
            marker=marker_line(self.src.path), source=self.src.path.name, locks=self.locks)
        return prologue + text

    def _require_parallel_region(self) -> None:
        """A file without a parallel region has nothing to predict: say so instead of copying it."""
        if any(c.d.kind.startswith("parallel") for c in self.constructs):
            return
        kinds = ", ".join(f"'{k}'" for k in sorted({c.d.kind for c in self.constructs}))
        found = f" (only orphaned {kinds})" if kinds else ""
        raise InputError(f"{shown_path(self.src.path)}: no '#pragma omp parallel' region{found}; pptmc "
                         f"predicts OpenMP programs, so give it a file whose code starts a parallel region")

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


def translate_source(src: Source) -> tuple[str, list[RegionInfo], list[LoopInfo]]:
    """Translate a parsed file; returns the C text, the regions and orphaned work-sharing."""
    tr = Translator(src)
    text = tr.translate()
    return text, sorted(tr.regions, key=lambda r: r.n), tr.orphan_loops


def _odometer(loop_id: int, levels: int) -> str:
    """Advance collapsed counters innermost first, carrying outward, so an iteration needs no division.

    The flattened index k maps to level counters by k / (inner trip counts) % trip count; computing
    that every iteration costs an integer division per level (the runtime trip counts are not
    constants), which the native OpenMP build does not pay, so the mix the runtime model sees
    would be wrong. The counters start from the chunk's first index and then step like an odometer.
    """
    expr = f"++__c{loop_id}_0"
    for i in range(1, levels):
        expr = f"(++__c{loop_id}_{i} == __n{loop_id}_{i} ? (__c{loop_id}_{i} = 0, {expr}) : 0)"
    return expr

