"""Reading LLVM IR text: operand lists, operand values, call arguments, function spans and attributes.

The instrumentation pass (passes/irpass.py) edits IR text line by line; these helpers take that text apart
without llvmlite (which supplies only what the text cannot cheaply give).
"""
from __future__ import annotations

import re

LABEL_RE = re.compile(r'^("(?:[^"\\]|\\.)*"|[-\w.$]+):')
SHARED_LABEL_RE = re.compile(r"shared_var_trace\d*")


def split_top(text: str) -> list[str]:
    """Split on commas that are not inside (), [], {} or <>; operand lists nest all four."""
    parts, depth, cur, quote = [], 0, [], False
    for ch in text:
        if ch == '"':
            quote = not quote
        elif not quote and ch in "([{<":
            depth += 1
        elif not quote and ch in ")]}>":
            depth -= 1
        if ch == "," and depth == 0 and not quote:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur).strip())
    return parts


_VALUE_WORDS = {"null", "undef", "poison", "true", "false", "zeroinitializer", "splat", "getelementptr",
                "inttoptr", "bitcast", "addrspacecast", "ptrtoint", "select", "add", "sub", "mul"}


def split_space(text: str) -> list[str]:
    """Split on spaces outside brackets, so a constant expression stays one run of tokens."""
    toks, depth, cur = [], 0, []
    for ch in text:
        depth += {"(": 1, "[": 1, "<": 1, ")": -1, "]": -1, ">": -1}.get(ch, 0)
        if ch == " " and depth == 0:
            if cur:
                toks.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur:
        toks.append("".join(cur))
    return toks


def operand_value(typed: str) -> str | None:
    """From 'ptr align 8 noundef %x' return '%x' (the value after type and attributes)."""
    toks = split_space(typed.strip())[1:]
    if toks and toks[0].startswith("addrspace("):
        return None  # non-default address spaces are not traced (CPU code uses addrspace 0)
    i = 0
    while i < len(toks):
        tok = toks[i]
        if tok == "align":
            i += 2
        elif re.fullmatch(r"[a-z_]+(\(.*\))?", tok) and tok.split("(")[0] not in _VALUE_WORDS:
            i += 1
        else:
            rest = toks[i:]
            # `load atomic ..., ptr %p monotonic`: the ordering (and sync scope) follow the pointer.
            while len(rest) > 1 and (rest[-1] in _ATOMIC_ORDERINGS or rest[-1].startswith("syncscope(")):
                rest = rest[:-1]
            return " ".join(rest)
    return None


_ATOMIC_ORDERINGS = frozenset({"unordered", "monotonic", "acquire", "release", "acq_rel", "seq_cst"})


def call_args(text: str) -> list[str]:
    """Arguments of the call in an instruction line (the outermost parentheses after the callee)."""
    m = re.search(r"@[-\w.$]+\(", text)
    if not m:
        return []
    start, depth = m.end(), 1
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return split_top(text[start:i])
    return []


def body_after(text: str, keyword: str) -> str:
    """The operand list after an opcode keyword and its flags (atomic, volatile, weak)."""
    rhs = re.sub(r'^\s*(%[-\w.$]+|%"[^"]*")\s*=\s*', "", text)  # drop "%name = " (names may contain "load")
    body = rhs.split(f"{keyword} ", 1)[1]
    for flag in ("atomic ", "volatile ", "weak "):
        if body.startswith(flag):
            body = body[len(flag):]
    return body


def param_text(define_line: str) -> str:
    """The parameter list of a `define` line (between the parentheses after the function name)."""
    m = re.search(r'@("(?:[^"\\]|\\.)*"|[-\w.$]+)\(', define_line)
    start, depth = m.end(), 1
    for i in range(start, len(define_line)):
        depth += {"(": 1, ")": -1}.get(define_line[i], 0)
        if depth == 0:
            return define_line[start:i]
    return ""


def has_entry_label(lines: list[str]) -> bool:
    """Whether the function text spells out its entry label (clang omits numbered ones)."""
    for line in lines[1:]:
        if line.strip() and not line.lstrip().startswith(";"):
            return bool(LABEL_RE.match(line))
    return False


def function_spans(lines: list[str]) -> dict[str, tuple[int, int]]:
    """Map function name to its [define line, closing brace line] span in the text."""
    spans, start, name = {}, None, None
    for i, line in enumerate(lines):
        if line.startswith("define "):
            m = re.search(r'@("(?:[^"\\]|\\.)*"|[-\w.$]+)\(', line)
            start, name = i, m.group(1).strip('"')
        elif line == "}" and start is not None:
            spans[name] = (start, i)
            start = None
    return spans


def shared_labels(raw_ir: str) -> dict[str, str]:
    """Per function, the translator's shared_var_trace<n> label as it appears before optimisation."""
    found: dict[str, str] = {}
    lines = raw_ir.splitlines()
    for name, (a, b) in function_spans(lines).items():
        for line in lines[a:b]:
            m = LABEL_RE.match(line)
            if m and SHARED_LABEL_RE.fullmatch(m.group(1)):
                found[name] = m.group(1)
                break
    return found


_ATTR_GROUP_RE = re.compile(r"^attributes (#\d+) = \{(.*)\}$")


def attribute_groups(lines: list[str]) -> dict[str, str]:
    """The module's attribute groups: '#3' -> the text between its braces."""
    return {m.group(1): m.group(2) for m in map(_ATTR_GROUP_RE.match, lines) if m}


def has_fma(define_line: str, groups: dict[str, str]) -> bool:
    """Whether the function's target features include FMA (clang's default x86-64 target does not)."""
    features = " ".join(groups.get(g, "") for g in re.findall(r"(#\d+)", define_line.split(")")[-1]))
    found = re.search(r'"target-features"="([^"]*)"', features)
    if found is None:
        return True  # no target features: assume the fused instruction (e.g. AArch64 always has it)
    return "+fma" in found.group(1).split(",")
