"""One writer per output folder: a lock file naming its holder, so a second run stops at once with a
clear message instead of mixing its files with the first's."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import sys
from pathlib import Path
from typing import Iterator

from common.errors import InputError
from common.manifest import write_manifest

LOCK_NAME = ".pptmc.lock"


def _holder() -> dict:
    """Who holds a lock: this process, its host and its command line."""
    return {"pid": os.getpid(), "host": socket.gethostname(), "command": " ".join(sys.argv)}


def _alive(holder: dict) -> bool:
    """Whether the holder still runs (a lock from another host is taken to be held)."""
    if holder.get("host") != socket.gethostname():
        return True
    try:
        os.kill(int(holder.get("pid", 0)), 0)
    except (ProcessLookupError, ValueError):
        return False
    except PermissionError:
        return True
    return True


def _take(lock: Path) -> bool:
    """Create the lock file if absent (atomic: O_EXCL); False when it exists."""
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as handle:
        json.dump(_holder(), handle)
    return True


def _read(lock: Path) -> dict:
    try:
        return json.loads(lock.read_text())
    except (OSError, ValueError):
        return {}


@contextlib.contextmanager
def folder_lock(folder: Path, lock: Path | None = None) -> Iterator[Path]:
    """Hold `folder`'s lock (a file inside it, or `lock`) while writing into it; a lock left by a process
    that died is taken over."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lock = Path(lock) if lock is not None else folder / LOCK_NAME
    if not _take(lock):
        holder = _read(lock)
        if _alive(holder):
            raise InputError(f"{folder}: another pptmc (pid {holder.get('pid', '?')} on {holder.get('host', '?')}: "
                             f"{holder.get('command', '?')}) is writing there; wait for it, or give another -o")
        lock.unlink(missing_ok=True)  # its holder died: the folder's steps are checked by their stamps
        if not _take(lock):
            raise InputError(f"{folder}: another pptmc took the folder's lock just now; give another -o")
    try:
        yield lock
    finally:
        if _read(lock).get("pid") == os.getpid():
            lock.unlink(missing_ok=True)


@contextlib.contextmanager
def output_folder(target: Path, what: str = "results") -> Iterator[Path]:
    """Write a folder of results as one unit: into a temporary sibling, which gets its manifest
    (common/manifest.py) and then replaces `target` (renamed into place) only when the block succeeds; a
    failure leaves the old folder as it was. One writer at a time (a lock file beside it). Readers never see
    old and new files mixed."""
    target = Path(target)
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    if target.exists() and not target.is_dir():
        raise InputError(f"{target}: a file of that name exists; give a folder for the results")
    with folder_lock(parent, parent / f".{target.name}.lock"):
        work = parent / f".{target.name}.tmp-{os.getpid()}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        try:
            yield work
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        write_manifest(work, what)
        old = parent / f".{target.name}.old-{os.getpid()}"
        if target.exists():
            target.rename(old)
        work.rename(target)
        shutil.rmtree(old, ignore_errors=True)
