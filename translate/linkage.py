"""Block-scope declarations with linkage that a region sees: re-declared in its outlined function.

`double helper(double);` or `extern int counter;` inside the enclosing function make those names
visible to the region only; the outlined function, emitted before that function, would call an
undeclared function. Re-declaring them at the top of the outlined function (block scope again, the
same entity by linkage) keeps exactly what the region saw.
"""
from __future__ import annotations

import clang.cindex as ci

from translate.loops import stmt_end
from translate.source import Source, safe_kind


def _has_linkage(decl: ci.Cursor) -> bool:
    """A function declaration or an `extern` variable."""
    kind = safe_kind(decl)
    return kind == ci.CursorKind.FUNCTION_DECL or (
        kind == ci.CursorKind.VAR_DECL and decl.storage_class == ci.StorageClass.EXTERN)


def _contains(cur: ci.Cursor, offset: int) -> bool:
    """Whether the cursor's extent holds the offset."""
    return cur.extent.start.offset <= offset < cur.extent.end.offset


def linkage_declarations(src: Source, fn: ci.Cursor, at: int) -> list[str]:
    """Texts of the block-scope declaration statements with linkage only that are in scope at `at`."""
    out: list[str] = []

    def visit(cur: ci.Cursor) -> None:
        for child in cur.get_children():
            if _contains(child, at):
                visit(child)
            elif safe_kind(cur) == ci.CursorKind.COMPOUND_STMT and child.extent.end.offset <= at \
                    and safe_kind(child) == ci.CursorKind.DECL_STMT:
                decls = list(child.get_children())
                if decls and all(_has_linkage(d) for d in decls):
                    out.append(src.slice(child.extent.start.offset, stmt_end(src, child)))

    visit(fn)
    return out
