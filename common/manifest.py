"""A folder of results says what is in it: a manifest, written last, names its files with their size and
SHA-256, the pptmc version and a run id. manifest.json covers a whole folder (a profile folder);
results.json covers the named result tables of `pptmc run` / `pptmc suite` beside their cached work
folders. A reader checks the folder against it and refuses files that were changed, lost or mixed in from
another run; a results folder without results.json is incomplete (its run was stopped mid-write)."""
from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Iterable

from common.cache import file_digest
from common.errors import InputError, PptmcError
from common.io import write_json
from common.version import VERSION

MANIFEST = "manifest.json"
RESULTS = "results.json"


def write_manifest(folder: Path, what: str, files: Iterable[str] | None = None, name: str = MANIFEST,
                   inputs: dict | None = None) -> Path:
    """Record every file under `folder`, or only the named `files` (relative to it), in `folder/name`:
    its writer's last act, so a manifest never vouches for files still being written. `inputs`: what
    the results were made from (step keys, options), kept for readers."""
    folder = Path(folder)
    paths = ([p for p in sorted(folder.rglob("*")) if p.is_file() and p.name != name] if files is None
             else [folder / f for f in dict.fromkeys(files)])
    for p in paths:
        if not p.is_file():
            raise PptmcError(f"{p}: gone before its manifest was written; is another program writing into {folder}?")
    record = {"what": what, "pptmc_version": VERSION, "run_id": uuid.uuid4().hex, "written_unix": int(time.time()),
              "pid": os.getpid(),
              "files": {p.relative_to(folder).as_posix(): {"bytes": p.stat().st_size, "sha256": file_digest(p)}
                        for p in paths}}
    if inputs is not None:
        record["inputs"] = inputs
    path = folder / name
    write_json(path, record)
    return path


def read_manifest(folder: Path, name: str, rerun: str) -> dict | None:
    """The manifest `folder/name` as written (None when there is none); an unreadable one is refused."""
    path = Path(folder) / name
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
        if not isinstance(record.get("files"), dict):
            raise ValueError("no file list")
    except (OSError, ValueError, AttributeError) as exc:
        raise InputError(f"{path}: unreadable manifest ({exc}); {rerun}") from exc
    return record


def check_files(folder: Path, files: dict, rerun: str) -> None:
    """Refuse the first listed file that is missing or whose size or SHA-256 differs from its entry."""
    folder = Path(folder)
    for name, want in files.items():
        p = folder / name
        if not p.is_file():
            raise InputError(f"{folder}: {name} is missing (the manifest lists it); {rerun}")
        if not isinstance(want, dict) or p.stat().st_size != want.get("bytes") or file_digest(p) != want.get("sha256"):
            raise InputError(f"{folder}: {name} is not the file this run wrote (size or checksum differs); {rerun}")


def check_manifest(folder: Path, rerun: str) -> None:
    """Refuse a folder whose files do not match its manifest (a folder without one is not checked)."""
    record = read_manifest(folder, MANIFEST, rerun)
    if record is not None:
        check_files(folder, record["files"], rerun)


def check_results(folder: Path, names: Iterable[str], rerun: str) -> dict:
    """Before reading result tables `names` back from a `pptmc run`/`suite` folder: refuse a folder
    without results.json (its results are incomplete), a name it does not list (a leftover of an earlier
    run, or another program's file) and any listed file changed or lost since; returns the manifest."""
    folder = Path(folder)
    record = read_manifest(folder, RESULTS, rerun)
    if record is None:
        raise InputError(f"{folder}: the results are incomplete (no {RESULTS}: the run that wrote them stopped "
                         f"before its last step, or is still writing); {rerun}")
    for name in names:
        if name not in record["files"]:
            raise InputError(f"{folder}: {name} is not one of this run's results ({RESULTS} does not list it: a "
                             f"leftover of an earlier run or another program's file); {rerun}")
    check_files(folder, record["files"], rerun)
    return record
