"""Data-sharing analysis of one parallel region and the outlined function it becomes (Fig. 3)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from common.errors import InputError
from translate.decls import (Construct, DeclInfo, Key, SizeGuard, decl_type_text, declare, pointer_to, region_id,
                             simple_type)
from translate.linkage import linkage_declarations
from translate.localtypes import LocalTypes, check_named
from translate.loops import parse_loop_nest
from translate.macros import replay_for
from translate.model import RegionInfo
from translate.reductions import reduction_combine, reduction_init
from translate.services import RegionServices

_ASSIGN_OPS = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=", "++", "--"}


@dataclass
class Sharing:
    """How each variable of a region is reached from the outlined function."""

    shared: list[DeclInfo] = field(default_factory=list)
    modes: dict[Key, str] = field(default_factory=dict)
    private: list[DeclInfo] = field(default_factory=list)      # plain private copies
    copied: list[DeclInfo] = field(default_factory=list)       # firstprivate / reduction: need the original
    loop_private: list[DeclInfo] = field(default_factory=list)  # a combined loop's own variables
    unpassed: list[DeclInfo] = field(default_factory=list)  # shared by the rules, but only used privately
    types: LocalTypes = field(default_factory=LocalTypes)  # local type declarations the region needs


def _modified(tr: RegionServices, info: DeclInfo, start: int, end: int) -> bool:
    """Whether the region assigns to the variable or takes its address."""
    toks = tr.src.tokens
    for r in tr.refs_in(start, end):
        if r.key != info.key or not r.direct:
            continue
        i = tr.src.token_index(r.start)
        after = toks[i + 1].text if i + 1 < len(toks) else ""
        before = toks[i - 1].text if i > 0 else ""
        if after in _ASSIGN_OPS or before in ("++", "--", "&"):
            return True
    return False


def _check_array_use(tr: RegionServices, info: DeclInfo, start: int, end: int) -> None:
    """A shared array becomes a pointer in the outlined function: sizeof and & would change meaning."""
    toks = tr.src.tokens
    for r in tr.refs_in(start, end):
        if r.key != info.key or not r.direct:
            continue
        i = tr.src.token_index(r.start)
        before = [t.text for t in toks[max(i - 2, 0):i]]
        if i + 1 < len(toks) and toks[i + 1].text == "[":
            continue  # &a[i] and sizeof a[0] mean the same with a pointer
        if before[-1:] in (["&"], ["sizeof"]) or before == ["sizeof", "("]:
            raise InputError(f"{tr.src.where(r.start)}: `{before[-1] if before[-1] != '(' else 'sizeof'}` "
                             f"of the shared array '{info.name}' inside a parallel region is not supported; "
                             f"use its element count or a pointer instead")


def _mode(tr: RegionServices, info: DeclInfo, start: int, end: int) -> str:
    """ptr, define or value for one shared variable."""
    if info.is_array and not info.is_pointer:
        _check_array_use(tr, info, start, end)
        return "value"
    if info.is_pointer and info.bounds and not _modified(tr, info, start, end):
        return "value"  # a variably modified pointer's type needs its bounds' values, unpacked after it
    hidden = any(not r.direct for r in tr.refs_in(start, end) if r.key == info.key)
    return "define" if hidden else "ptr"


def _clause_vars(tr: RegionServices, c: Construct, start: int, end: int) -> list[DeclInfo]:
    """Variables named in chunk expressions of the region's loops, evaluated inside the region."""
    out = []
    for inner in tr.constructs:
        if inner is c or start <= inner.start < end:
            for tok in inner.d.chunk:
                if tok.text[0].isalpha() or tok.text[0] == "_":
                    try:
                        out.append(tr.resolve(tok.text, inner.d.start, (start, end)))
                    except InputError:
                        pass  # a macro or function name
    return out


def _loop_directive(c: Construct):
    """The loop half of a combined `parallel for`: the clauses that act on the loop."""
    return dataclasses.replace(c.d, private=[], firstprivate=[], shared=[])


def analyse(tr: RegionServices, c: Construct, scope: tuple[int, int]) -> tuple[Sharing, list[DeclInfo]]:
    """Classify the variables a region uses; returns the sharing and the combined loop's variables."""
    d = c.d
    start, end = c.stmt.extent.start.offset, c.end
    main = str(tr.src.path)
    loop_vars: list[DeclInfo] = []
    if d.kind == "parallel for":
        levels, _ = parse_loop_nest(tr.src, c.stmt, d.collapse, d.where)
        loop_vars = [tr.loop_var(lv, scope) for lv in levels]
    region_reductions = d.reductions if d.kind == "parallel" else []
    private_names = list(dict.fromkeys(d.private))
    copied_names = list(dict.fromkeys(d.firstprivate + [v for _, v in region_reductions]))
    sh = Sharing()
    sh.private = [tr.resolve(n, d.start, (start, end)) for n in private_names]
    sh.loop_private = [v for v in loop_vars if v.key not in {p.key for p in sh.private}
                       and v.name not in d.lastprivate]
    sh.copied = [tr.resolve(n, d.start, (start, end)) for n in copied_names]
    own = {v.key for v in sh.private + sh.copied + sh.loop_private}

    def inside(info: DeclInfo) -> bool:
        return info.key[0] == main and start <= info.offset < end

    todo = [tr.decls[r.key] for r in tr.refs_in(start, end) if r.key in tr.decls]
    todo += _clause_vars(tr, c, start, end)
    todo += sh.private + sh.copied
    sh.types = tr.local_types.for_region([c.stmt] + [v.cursor for v in todo], c.start, c.end)
    todo += [tr.decls[k] for k in sh.types.bound_vars if k in tr.decls]
    seen: set[Key] = set()
    while todo:
        info = todo.pop(0)
        if info.key in seen:
            continue
        seen.add(info.key)
        todo += [tr.decls[k] for k in info.bounds if k in tr.decls]
        if info.is_global or inside(info) or info.key in own:
            continue
        sh.shared.append(info)
    covered = _privatised_ranges(tr, c, scope)
    needed = {k for v in sh.shared + sh.private + sh.copied for k in v.bounds} | set(sh.types.bound_vars)
    sh.unpassed = [v for v in sh.shared if v.key not in needed and _always_private(tr, v, covered, start, end)]
    sh.shared = [v for v in sh.shared if v not in sh.unpassed]
    for info in sh.shared:
        sh.modes[info.key] = _mode(tr, info, start, end)
    return sh, loop_vars


def _privatised_ranges(tr: RegionServices, c: Construct, scope) -> list[tuple[int, int, set[str]]]:
    """Ranges of the region's inner constructs and the names each gives a fresh private copy."""
    out = []
    for inner in tr.constructs:
        if inner is c or not (c.start <= inner.start < c.end) or inner.stmt is None:
            continue
        names = set(inner.d.private)
        if inner.d.kind == "for":
            levels, _ = parse_loop_nest(tr.src, inner.stmt, inner.d.collapse, inner.d.where)
            names |= {lv.var for lv in levels}
        names -= set(inner.d.lastprivate)
        out.append((inner.start, inner.end, names))
    return out


def _always_private(tr: RegionServices, info: DeclInfo, covered, start: int, end: int) -> bool:
    """True when every use in the region sits inside a construct that privatises the variable.

    Such a variable is shared by OpenMP's rules but never touched as shared, so it is not passed.
    """
    refs = [r for r in tr.refs_in(start, end) if r.key == info.key]
    return bool(refs) and all(any(s <= r.start < e and info.name in names for s, e, names in covered)
                              for r in refs)


def _unpacks(tr: RegionServices, sh: Sharing):
    """Declarations of the outlined function's shared-variable block."""
    ptr, value = [], []
    for info in sh.shared + sh.copied:
        check_named(decl_type_text(info), info.name, tr.src.where(info.offset))
    for info in sh.shared:
        if sh.modes[info.key] == "value" and info.is_array and info.cursor.kind.name != "PARM_DECL":
            cast = tr.elem_ptr_type(info, {}, "__out_argv")
            value.append({"decl": cast + info.name, "cast": cast, "field": f"{info.name}_p"})
            continue
        t = tr.var_type(info, {}, "__out_argv")
        if sh.modes[info.key] == "value":
            if t.endswith("*"):
                value.append({"decl": t + info.name, "cast": t, "field": f"{info.name}_p"})
            else:
                cast = t if simple_type(t) else f"__typeof__({t})"
                value.append({"decl": declare(t, info.name), "cast": cast, "field": f"{info.name}_p"})
        else:
            cast = pointer_to(t)
            ptr.append({"decl": cast + info.name, "cast": cast, "field": f"{info.name}_p"})
    for info in sh.copied:
        cast = "void *" if info.is_array and not info.is_pointer else pointer_to(tr.var_type(info, {}))
        ptr.append({"decl": f"{cast}__sh_{info.name}", "cast": cast, "field": f"{info.name}_p"})
    return ptr, value


def _outer_local(tr: RegionServices, info: DeclInfo, c: Construct) -> bool:
    """A local of the enclosing function declared before the region (may now look unused there)."""
    return not info.is_global and info.offset >= 0 and not (c.start <= info.offset < c.end)


def _size_guards(tr: RegionServices, c: Construct, spelled: list[SizeGuard]) -> list[str]:
    """`_Static_assert`s that the build's array sizes equal the translate-time ones clang spelled."""
    out = []
    for g in spelled:
        info, text = g.info, g.text
        if not _outer_local(tr, info, c):
            continue  # not visible at the call site
        if g.pointer:
            check = f"sizeof(*{info.name}) == sizeof(*({text})0)"
        else:
            check = f"sizeof({info.name}) == sizeof({text})"
        msg = (f"pptmc: the array bounds of '{info.name}' differ from translate time; re-run pptmc "
               f"translate with the -D flags of this build")
        out.append(f'_Static_assert({check}, "{msg}");')
    return list(dict.fromkeys(out))


def build_region(tr: RegionServices, c: Construct, outer: dict[Key, str] | None = None) -> str:
    """Render the call site; store the struct and outlined function for the enclosing function.

    `outer` is the context of the enclosing outlined function when the region is nested: it is
    outlined the same way and started from there; XOMP_parallel_start then opens a nested libomp
    region, which (nested parallelism being off by default) runs with a team of one.
    """
    outer_ctx = outer or {}
    d = c.d
    fn = tr.function_of(c.start)
    scope = (fn.extent.start.offset, fn.extent.end.offset)
    n = len(tr.regions) + 1
    name = f"OUT__{n}__{region_id(tr.src.path, d.line)}__"
    struct = f"{name}_data"
    first_guard = len(tr.size_guards)
    sh, loop_vars = analyse(tr, c, scope)
    info = RegionInfo(n=n, name=name, line=d.line, file=tr.src.path.name, shared=[v.name for v in sh.shared],
                      private=[v.name for v in sh.private + sh.loop_private],
                      firstprivate=list(d.firstprivate), lastprivate=list(d.lastprivate),
                      reductions=list(d.reductions))
    tr.regions.append(info)
    ctx = dict(sh.modes)
    for v in sh.private + sh.copied:
        ctx[v.key] = "private"
    if d.kind == "parallel for":
        body = tr.render_loop(c, _loop_directive(c), ctx, info)
    else:
        body = tr.render(c.stmt.extent.start.offset, c.end, ctx, info)
    ptr, value = _unpacks(tr, sh)
    defines = [v.name for v in sh.shared if sh.modes[v.key] == "define"]
    bound_keys = {k for v in sh.shared if sh.modes[v.key] == "value" for k in v.bounds}
    bound_keys |= {k for v in sh.private + sh.copied for k in v.bounds} | set(sh.types.bound_vars)
    temp = [v.name for v in sh.shared if sh.modes[v.key] == "ptr" and v.key in bound_keys]
    region_reductions = d.reductions if d.kind == "parallel" else []
    prologue = [f"__builtin_memcpy(&{v}, __sh_{v}, sizeof {v});" for v in d.firstprivate]
    prologue += [reduction_init(op, v) for op, v in region_reductions]
    epilogue = [reduction_combine(op, v) for op, v in region_reductions]
    decls = [declare(tr.var_type(v, ctx), v.name) for v in sh.private + sh.copied]
    macros = replay_for(tr.macro_directives, scope[0], c.start, c.end)
    tr.outlined.setdefault(scope[0], []).append(tr.env.get_template("outlined.c.j2").render(
        macro_push=macros.push, macro_before=macros.before, macro_pop=macros.pop,
        line=d.line, struct=struct, name=name, n=n,
        fields=[{"field": u["field"]} for u in ptr + value], ptr_unpacks=ptr, value_unpacks=value,
        defines=defines + temp, temp_defines=temp, decls=decls, prologue=prologue, body=body,
        epilogue=epilogue, body_defines=defines,
        plain_types=sh.types.plain + linkage_declarations(tr.src, fn, c.start),
        dependent_types=sh.types.dependent))
    fields = [{"field": f"{v.name}_p", "value": v.name if sh.modes[v.key] == "value"
               else tr.address_of(v, outer_ctx)} for v in sh.shared]
    fields += [{"field": f"{v.name}_p", "value": v.name if v.is_array and not v.is_pointer
                else tr.address_of(v, outer_ctx)} for v in sh.copied]
    num_threads = tr.render_tokens(d.num_threads, outer_ctx, c.start, scope) if d.num_threads else ""
    if_expr = tr.render_tokens(d.if_expr, outer_ctx, c.start, scope) if d.if_expr else ""
    # a nested call site sits in an outlined function, where the originals are not all visible
    guards = [] if outer is not None else _size_guards(tr, c, tr.size_guards[first_guard:])
    unused = [] if outer is not None else [v.name for v in sh.private + sh.loop_private + sh.unpassed
                                           if _outer_local(tr, v, c)]
    return tr.env.get_template("region_call.c.j2").render(
        guards=guards, kind=d.kind, line=d.line, name=name, struct=struct, n=n, fields=fields,
        num_threads=num_threads, if_expr=if_expr, unused=unused, after_call=macros.after_call)
