"""Atomic output helpers: a result file is either complete or absent, never half-written."""
from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import IO, Iterator

from common.errors import PptmcError


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it over `path` only if the block succeeds."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        if tmp_path.exists():  # mkstemp makes it 0600: give it the mode open() (or a linker) would
            executable = tmp_path.stat().st_mode & 0o111
            os.chmod(tmp_path, (0o777 if executable else 0o666) & ~_umask())
        os.replace(tmp_path, target)
    except OSError as exc:
        tmp_path.unlink(missing_ok=True)
        raise PptmcError(f"{target}: could not write ({exc.strerror}); check free space and permissions") from exc
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process's file-mode creation mask. Linux states it in /proc/self/status; elsewhere reading it
    means setting it and putting it back, which another thread creating a file meanwhile could see."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w") -> Iterator[IO]:
    """Open a temporary file for writing; it replaces `path` only when the block finishes cleanly."""
    with atomic_path(path) as tmp:
        with open(tmp, mode) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write a whole text file atomically."""
    with atomic_open(path, "w") as handle:
        handle.write(text)


def write_json(path: str | os.PathLike, obj) -> None:
    """Write JSON atomically, sorted and indented so diffs stay readable."""
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def write_table(df, path: str | os.PathLike) -> Path:
    """Write a pandas DataFrame atomically as CSV or Parquet, chosen by the file suffix."""
    target = Path(path)
    with atomic_path(target) as tmp:
        if target.suffix == ".parquet":
            df.to_parquet(tmp, index=False)
        elif target.suffix == ".json":
            tmp.write_text(df.to_json(orient="records", indent=2))
        else:
            df.to_csv(tmp, index=False)
    return target


def _json_default(obj):
    """Serialise numpy scalars and paths that json does not know."""
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if hasattr(obj, "__dataclass_fields__"):
        import dataclasses

        return dataclasses.asdict(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


@contextlib.contextmanager
def program_output_to(path: str | os.PathLike) -> Iterator[Path]:
    """Send file descriptors 1 and 2 (ours and our children's) to `path`, so that a traced or measured
    program's own output (its results, its timing lines) is kept in a log instead of mixing with
    pptmc's tables and progress bars."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = (os.dup(1), os.dup(2))
    try:
        with open(target, "wb") as log:
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            yield target
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, copy in zip((1, 2), saved):
            os.dup2(copy, fd)
            os.close(copy)
