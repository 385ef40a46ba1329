"""Content-keyed caching of pipeline artifacts: a step reruns only when its inputs change."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Iterable

from common.version import VERSION as __version__
from common.io import write_text


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes, streamed."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def step_key(files: Iterable[Path], params: dict) -> str:
    """Key of one step: its input files' contents, its parameters and the pptmc version."""
    digest = hashlib.sha256(__version__.encode())
    for path in sorted(Path(p) for p in files):
        digest.update(str(path.name).encode())
        digest.update(file_digest(path).encode())
    digest.update(json.dumps(params, sort_keys=True, default=str).encode())
    return digest.hexdigest()


_CODE_SUFFIXES = (".py", ".j2", ".c", ".h")


def code_digest(*packages: str) -> str:
    """SHA-256 over the source files of pptmc's own packages, so that a cached artifact is rebuilt
    when the code that made it changes (not only when the user's input does)."""
    import importlib

    digest = hashlib.sha256()
    for name in packages:
        root = Path(importlib.import_module(name).__file__).parent
        for path in sorted(p for p in root.rglob("*") if p.suffix in _CODE_SUFFIXES and p.is_file()):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(file_digest(path).encode())
    return digest.hexdigest()


def reuse_or_invalidate(stamp: Path, key: str, outputs: Iterable[Path]) -> bool:
    """True when the step's stamp matches `key` and all its outputs exist (reuse them); otherwise the
    stamp is removed before the step rewrites its outputs, so outputs left half-rewritten by an
    interrupted run never count as done (mark_done writes the stamp back last)."""
    if stamp.is_file() and stamp.read_text().strip() == key and all(Path(o).exists() for o in outputs):
        return True
    stamp.unlink(missing_ok=True)
    return False


def mark_done(stamp: Path, key: str) -> None:
    """Record that the step's outputs correspond to `key` (written last, atomically)."""
    write_text(stamp, key + "\n")
