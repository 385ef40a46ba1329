"""Command-line value parsers shared by every stage's subcommands (one implementation, one message)."""
from __future__ import annotations

from common.errors import InputError


def parse_counts(text: str, option: str = "--cores", example: str = "1,2,4,8") -> list[int]:
    """'4,1,2' -> [1, 2, 4]: sorted, without repeats; anything but positive integers is an input error."""
    try:
        counts = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        counts = []
    if not counts or counts[0] < 1:
        raise InputError(f"{option} {text!r}: give comma-separated positive integers, e.g. {example}")
    return counts
