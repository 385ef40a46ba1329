"""The code that starts and folds a private reduction copy (Fig. 3), shared by regions and loops."""
from __future__ import annotations

# The value each operator's private copy starts from (min/max start from the shared value instead).
REDUCTION_IDENTITY = {"+": "0", "-": "0", "|": "0", "^": "0", "||": "0", "*": "1", "&&": "1", "&": "~0"}


def reduction_init(op: str, n: str) -> str:
    """Initialise a private reduction copy."""
    if op in ("min", "max"):  # start from the shared value: min/max are idempotent
        return f"XOMP_atomic_start(); {n} = *__sh_{n}; XOMP_atomic_end();"
    return f"{n} = {REDUCTION_IDENTITY[op]};"


def reduction_combine(op: str, n: str) -> str:
    """Fold a private reduction copy into the shared variable (Fig. 3 of the paper)."""
    if op == "min":
        body = f"if ({n} < *__sh_{n}) *__sh_{n} = {n};"
    elif op == "max":
        body = f"if ({n} > *__sh_{n}) *__sh_{n} = {n};"
    else:
        body = f"*__sh_{n} = *__sh_{n} {'+' if op == '-' else op} {n};"
    return f"XOMP_atomic_start(); {body} XOMP_atomic_end();"
