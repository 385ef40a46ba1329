"""Reading typed fields of a parsed machine file, every problem recorded with its field path.

machines/loader.py checks each table with a Checker, so one run reports every bad field of a file.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Checker:
    """Reads typed fields from a parsed TOML table and records every problem with its path."""

    errors: list[str] = field(default_factory=list)

    def fail(self, path: str, problem: str) -> None:
        """Record one problem; validation goes on so every bad field is reported at once."""
        self.errors.append(f"{path}: {problem}")

    def table(self, data: Any, path: str) -> dict | None:
        """`data` if it is a TOML table, else None and an error at `path`."""
        if not isinstance(data, dict):
            self.fail(path, f"expected a table, got {kind_name(data)}")
            return None
        return data

    def unknown(self, data: dict, allowed: set[str], prefix: str) -> None:
        """An error per key not in `allowed`: a misspelt optional field must not pass silently."""
        for key in sorted(set(data) - allowed):
            self.fail(f"{prefix}{key}", "unknown field (check the spelling against machines/SCHEMA.md)")

    def get(self, data: dict, key: str, prefix: str, kind: str, *, positive: bool = False,
            non_negative: bool = False) -> Any:
        """One field of `kind` in ('int', 'number', 'str', 'bool'); None (and an error) if bad."""
        path = f"{prefix}{key}"
        if key not in data:
            self.fail(path, "missing")
            return None
        value = data[key]
        ok = {"int": isinstance(value, int) and not isinstance(value, bool),
              "number": isinstance(value, (int, float)) and not isinstance(value, bool),
              "str": isinstance(value, str),
              "bool": isinstance(value, bool)}[kind]
        if not ok:
            self.fail(path, f"expected {KIND_NAMES[kind]}, got {kind_name(value)} {value!r}")
            return None
        if not finite(value):
            self.fail(path, f"{value!r} is not a finite number")
            return None
        if kind == "str" and not value.strip():
            self.fail(path, "must not be empty")
            return None
        if positive and not value > 0:
            self.fail(path, f"must be positive, got {value!r}")
            return None
        if non_negative and value < 0:
            self.fail(path, f"must not be negative, got {value!r}")
            return None
        return value


KIND_NAMES = {"int": "an integer", "number": "a number", "str": "a string", "bool": "true or false"}


def finite(value: Any) -> bool:
    """False for inf and nan, which TOML allows but no figure of a machine can be."""
    return not isinstance(value, float) or math.isfinite(value)


def kind_name(value: Any) -> str:
    """The TOML name of a value's type, for error messages."""
    return {bool: "boolean", int: "integer", float: "float", str: "string", dict: "table",
            list: "array"}.get(type(value), type(value).__name__)


def power_of_two(chk: Checker, path: str, value: int | None) -> int | None:
    """The value if it is a power of two (or already None), else None and an error at `path`."""
    if value is not None and value & (value - 1):
        chk.fail(path, f"must be a power of two, got {value}")
        return None
    return value
