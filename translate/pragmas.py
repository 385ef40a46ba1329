"""Find `#pragma omp` lines with libclang's lexer and read their directive and clauses.

libclang exposes OpenMP directives as cursors but not their clauses, so the clauses are
read from the pragma's own tokens. Every directive or clause outside the supported set
stops translation with file:line:column and the words "not supported".
"""
from __future__ import annotations

from dataclasses import dataclass, field

from common.errors import InputError
from translate.source import Source, Token, line_end

REDUCTION_OPS = ("+", "*", "-", "&", "|", "^", "&&", "||", "min", "max")
SCHEDULES = ("static", "dynamic", "guided", "runtime", "auto")
ATOMIC_KINDS = ("read", "write", "update", "capture", "seq_cst")

# Clauses accepted by each supported directive.
_LOOP = {"private", "firstprivate", "lastprivate", "reduction", "schedule", "collapse", "nowait"}
_REGION = {"private", "firstprivate", "shared", "default", "reduction", "num_threads", "if"}
ALLOWED = {
    "parallel": _REGION,
    "for": _LOOP,
    "parallel for": (_REGION | _LOOP) - {"nowait"},
    "single": {"private", "firstprivate", "nowait"},
    "master": set(),
    "barrier": set(),
    "critical": set(),
    "atomic": set(),
}
STANDALONE = {"barrier"}


@dataclass
class Directive:
    """One `#pragma omp` line: what it is and its clauses."""

    kind: str
    start: int  # offset of '#'
    end: int    # offset just past the pragma line
    where: str  # file:line:column
    line: int
    private: list[str] = field(default_factory=list)
    firstprivate: list[str] = field(default_factory=list)
    lastprivate: list[str] = field(default_factory=list)
    shared: list[str] = field(default_factory=list)
    reductions: list[tuple[str, str]] = field(default_factory=list)
    default: str | None = None
    schedule: str = "static"
    chunk: list[Token] = field(default_factory=list)
    collapse: int = 1
    nowait: bool = False
    num_threads: list[Token] = field(default_factory=list)
    if_expr: list[Token] = field(default_factory=list)
    critical_name: str = ""
    atomic_kind: str = "update"  # read | write | update (capture is rejected)
    atomic_seq_cst: bool = False  # `seq_cst` clause: sequentially consistent (OpenMP's default is relaxed)


def _split_args(src: Source, toks: list[Token], i: int, what: str) -> tuple[list[Token], int]:
    """Tokens inside the parentheses starting at toks[i]; returns them and the index after ')'."""
    if i >= len(toks) or toks[i].text != "(":
        raise InputError(f"{src.where(toks[i - 1].start)}: clause '{what}' needs a parenthesised argument")
    depth, j = 0, i
    while j < len(toks):
        depth += {"(": 1, ")": -1}.get(toks[j].text, 0)
        if depth == 0:
            return toks[i + 1:j], j + 1
        j += 1
    raise InputError(f"{src.where(toks[i].start)}: unbalanced parentheses in clause '{what}'")


def _names(src: Source, args: list[Token], what: str) -> list[str]:
    """A comma-separated list of plain variable names."""
    names = [t.text for t in args if t.text != ","]
    bad = [t for t in args if t.text != "," and not (t.text[0].isalpha() or t.text[0] == "_")]
    if bad or not names:
        raise InputError(f"{src.where(args[0].start if args else 0)}: clause '{what}' must list variable "
                         f"names; array sections and expressions are not supported")
    return names


def _directive_kind(src: Source, toks: list[Token], where: str) -> tuple[str, int]:
    """The directive name (e.g. 'parallel for') and the index of its first clause token."""
    words = [t.text for t in toks[3:5]]
    if not words:
        raise InputError(f"{where}: '#pragma omp' without a directive")
    if words[0] == "parallel":
        if len(words) > 1 and words[1] == "for":
            return "parallel for", 5
        if len(words) > 1 and words[1] in ("sections", "master", "loop", "workshare", "masked"):
            raise InputError(f"{where}: '#pragma omp parallel {words[1]}' is not supported")
        return "parallel", 4
    if words[0] == "for" and len(words) > 1 and words[1] == "simd":
        raise InputError(f"{where}: '#pragma omp for simd' is not supported")
    if words[0] in ALLOWED:
        return words[0], 4
    raise InputError(f"{where}: '#pragma omp {words[0]}' is not supported (supported: "
                     f"{', '.join(sorted(ALLOWED))})")


def _apply_clause(src: Source, d: Directive, name: str, args: list[Token]) -> None:
    """Store one clause on the directive, validating its argument."""
    at = src.where(args[0].start) if args else d.where
    if name in ("private", "firstprivate", "lastprivate", "shared"):
        getattr(d, name).extend(_names(src, args, name))
    elif name == "reduction":
        colon = next((k for k, t in enumerate(args) if t.text == ":"), None)
        op = "".join(t.text for t in args[:colon]) if colon is not None else ""
        if op not in REDUCTION_OPS:
            raise InputError(f"{at}: reduction operator '{op}' is not supported "
                             f"(use one of {' '.join(REDUCTION_OPS)})")
        d.reductions.extend((op, v) for v in _names(src, args[colon + 1:], name))
    elif name == "default":
        if [t.text for t in args] not in (["shared"], ["none"]):
            raise InputError(f"{at}: default({' '.join(t.text for t in args)}) is not supported; "
                             f"use default(shared) or default(none)")
        d.default = args[0].text
    elif name == "schedule":
        if not args or args[0].text not in SCHEDULES or (len(args) > 1 and args[1].text != ",") \
                or (args[0].text in ("runtime", "auto") and len(args) > 1):
            raise InputError(f"{at}: schedule({' '.join(t.text for t in args)}) is not supported; "
                             f"use static, dynamic or guided with an optional chunk, runtime or auto")
        d.schedule, d.chunk = args[0].text, args[2:]
    elif name == "collapse":
        if len(args) != 1 or not args[0].text.isdigit() or int(args[0].text) < 1:
            raise InputError(f"{at}: collapse needs a positive integer literal")
        d.collapse = int(args[0].text)
    elif name == "num_threads":
        d.num_threads = args
    elif name == "if":
        if len(args) > 2 and args[1].text == ":":  # OpenMP 4.5 directive-name modifier
            if args[0].text != "parallel":
                raise InputError(f"{at}: if({args[0].text}: ...) is not supported on '#pragma omp {d.kind}'")
            args = args[2:]
        d.if_expr = args


def _parse_clauses(src: Source, d: Directive, toks: list[Token], i: int) -> None:
    """Read clauses from toks[i:] into the directive."""
    if d.kind == "critical" and i < len(toks) and toks[i].text == "(":
        args, i = _split_args(src, toks, i, "critical")
        if len(args) != 1:
            raise InputError(f"{d.where}: critical needs a single name in parentheses")
        d.critical_name = args[0].text
    while d.kind == "atomic" and i < len(toks) and toks[i].text in ATOMIC_KINDS + (",",):
        if toks[i].text == "capture":
            raise InputError(f"{src.where(toks[i].start)}: '#pragma omp atomic capture' is not supported; "
                             f"use a critical section")
        if toks[i].text in ("read", "write", "update"):
            d.atomic_kind = toks[i].text
        d.atomic_seq_cst = d.atomic_seq_cst or toks[i].text == "seq_cst"
        i += 1
    while i < len(toks):
        tok = toks[i]
        if tok.text == ",":
            i += 1
            continue
        name = tok.text
        if name not in ALLOWED[d.kind]:
            raise InputError(f"{src.where(tok.start)}: clause '{name}' on '#pragma omp {d.kind}' is not "
                             f"supported")
        i += 1
        args: list[Token] = []
        if name != "nowait":
            args, i = _split_args(src, toks, i, name)
        else:
            d.nowait = True
        _apply_clause(src, d, name, args)


def find_directives(src: Source) -> list[Directive]:
    """Every `#pragma omp` line of the main file, in source order."""
    out = []
    toks = src.tokens
    for k, tok in enumerate(toks):
        if tok.text != "#" or k + 2 >= len(toks) or toks[k + 1].text != "pragma" or toks[k + 2].text != "omp":
            continue
        if (k > 0 and toks[k - 1].line == tok.line) or src.is_skipped(tok.start):
            continue
        end = line_end(src.data, tok.start)
        ptoks = [t for t in toks[k:k + 400] if t.start < end]
        where = src.where(tok.start)
        kind, i = _directive_kind(src, ptoks, where)
        d = Directive(kind=kind, start=tok.start, end=end, where=where, line=tok.line)
        _parse_clauses(src, d, ptoks, i)
        out.append(d)
    return out
