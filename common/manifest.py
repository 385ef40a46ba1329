"""A folder of results says what is in it: manifest.json, written last, names every file with its size and
SHA-256, the pptmc version and a run id. A reader that finds a manifest checks the folder against it and
refuses a folder whose files were changed, lost or mixed in from another run."""
from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

from common.cache import file_digest
from common.errors import InputError
from common.io import write_json
from common.version import VERSION

MANIFEST = "manifest.json"


def write_manifest(folder: Path, what: str) -> Path:
    """Record every file under `folder` (its last act before the folder is published)."""
    folder = Path(folder)
    files = {str(p.relative_to(folder)): {"bytes": p.stat().st_size, "sha256": file_digest(p)}
             for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MANIFEST}
    path = folder / MANIFEST
    write_json(path, {"what": what, "pptmc_version": VERSION, "run_id": uuid.uuid4().hex,
                             "written_unix": int(time.time()), "pid": os.getpid(), "files": files})
    return path


def check_manifest(folder: Path, rerun: str) -> None:
    """Refuse a folder whose files do not match its manifest (a folder without one is not checked)."""
    folder = Path(folder)
    path = folder / MANIFEST
    if not path.is_file():
        return
    try:
        files = json.loads(path.read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path}: unreadable manifest ({exc}); {rerun}") from exc
    for name, want in files.items():
        p = folder / name
        if not p.is_file():
            raise InputError(f"{folder}: {name} is missing (the manifest lists it); {rerun}")
        if p.stat().st_size != want.get("bytes") or file_digest(p) != want.get("sha256"):
            raise InputError(f"{folder}: {name} is not the file this run wrote (size or checksum differs); {rerun}")
