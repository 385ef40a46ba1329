"""Keep the macros a parallel region sees visible in its outlined function (issue #29).

The outlined function is emitted before the enclosing function, so a `#define` or `#undef` between
the function's start and the region would be missed there. The active directives of that stretch
are replayed before the outlined function, between `#pragma push_macro`/`pop_macro` of every name
they (or the region's own directives) touch, so the macro state after the outlined function is the
one before it. The region's own directives move into the outlined function with its body, so the
call site replays them after the call: the rest of the enclosing function sees what it saw before.
"""
from __future__ import annotations

from dataclasses import dataclass

from translate.source import Source, line_end

_DIRECTIVES = ("define", "undef")


@dataclass(frozen=True)
class MacroDirective:
    """One active `#define` or `#undef` line of the main file."""

    start: int  # offset of the '#'
    name: str
    text: str   # the directive as written, continuation lines included


@dataclass(frozen=True)
class MacroReplay:
    """What one region needs around its outlined function and after its call site."""

    push: list[str]    # `#pragma push_macro` lines before the outlined function
    before: list[str]  # directives between the enclosing function's start and the region
    pop: list[str]     # `#pragma pop_macro` lines after it
    after_call: list[str]  # the region's own directives, replayed after the call


def macro_directives(src: Source) -> list[MacroDirective]:
    """Active `#define`/`#undef` lines of the main file, in source order."""
    toks = src.tokens
    out = []
    for i, tok in enumerate(toks[:-2]):
        first_on_line = i == 0 or toks[i - 1].line != tok.line
        if tok.text != "#" or not first_on_line or toks[i + 1].text not in _DIRECTIVES:
            continue
        if toks[i + 1].line != tok.line or src.is_skipped(tok.start):
            continue
        text = src.slice(tok.start, line_end(src.data, tok.start))
        out.append(MacroDirective(tok.start, toks[i + 2].text, text))
    return out


def replay_for(directives: list[MacroDirective], fn_start: int, start: int, end: int) -> MacroReplay:
    """The replay of a region [start, end) in the function starting at `fn_start`."""
    before = [m for m in directives if fn_start <= m.start < start]
    inside = [m for m in directives if start <= m.start < end]
    names = list(dict.fromkeys(m.name for m in before + inside))
    return MacroReplay(push=[f'#pragma push_macro("{n}")' for n in names], before=[m.text for m in before],
                       pop=[f'#pragma pop_macro("{n}")' for n in names], after_call=[m.text for m in inside])
