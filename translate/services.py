"""What the region builder and the atomic rewriter need from the translator, as typing.Protocols.

translate/regions.py and translate/atomics.py depend on these interfaces only, so the dependency
runs one way: translator.py uses them and implements the protocols (structurally).
"""
from __future__ import annotations

from typing import Protocol

import clang.cindex as ci
import jinja2

from translate.decls import Construct, DeclInfo, Key, SizeGuard
from translate.localtypes import LocalTypeIndex
from translate.loops import LoopLevel
from translate.macros import MacroDirective
from translate.model import RegionInfo
from translate.pragmas import Directive
from translate.source import Source, Token, VarRef


class Renderer(Protocol):
    """Renders source ranges with shared variables rewritten for a context."""

    src: Source

    def render(self, start: int, end: int, ctx: dict[Key, str], region: RegionInfo | None) -> str:
        """Text of [start, end) with constructs translated and references rewritten for `ctx`."""
        ...


class RegionServices(Renderer, Protocol):
    """The translator's state and services that outlining one parallel region uses."""

    env: jinja2.Environment
    decls: dict[Key, DeclInfo]
    constructs: list[Construct]
    local_types: LocalTypeIndex
    regions: list[RegionInfo]
    outlined: dict[int, list[str]]
    size_guards: list[SizeGuard]
    macro_directives: list[MacroDirective]

    def refs_in(self, start: int, end: int) -> list[VarRef]:
        """Variable references inside [start, end)."""
        ...

    def resolve(self, name: str, at: int, scope: tuple[int, int]) -> DeclInfo:
        """The declaration a clause's variable name refers to at offset `at`."""
        ...

    def function_of(self, offset: int) -> ci.Cursor:
        """The function definition containing an offset."""
        ...

    def loop_var(self, lv: LoopLevel, scope: tuple[int, int]) -> DeclInfo:
        """The declaration of a loop's iteration variable."""
        ...

    def render_loop(self, c: Construct, d: Directive, ctx: dict[Key, str], region: RegionInfo | None) -> str:
        """A work-shared loop over a normalised, possibly collapsed, iteration space."""
        ...

    def render_tokens(self, toks: list[Token], ctx: dict[Key, str], at: int, scope: tuple[int, int]) -> str:
        """A clause expression (chunk, num_threads) with shared scalars dereferenced."""
        ...

    def var_type(self, info: DeclInfo, ctx: dict[Key, str], base: str = "0") -> str:
        """The variable's type as outlined code spells it."""
        ...

    def elem_ptr_type(self, info: DeclInfo, ctx: dict[Key, str], base: str = "0") -> str:
        """A pointer to the first element of an array variable (what the array decays to)."""
        ...

    def address_of(self, info: DeclInfo, ctx: dict[Key, str]) -> str:
        """An expression for the address of the variable as the current code sees it."""
        ...
