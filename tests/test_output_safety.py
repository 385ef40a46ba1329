"""Output folders are written by one pptmc at a time, and a step interrupted mid-write is redone."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from common.cache import mark_done, reuse_or_invalidate
from common.errors import InputError
from common.locks import LOCK_NAME, folder_lock


def test_a_second_writer_is_refused_with_the_holders_pid(tmp_path):
    """While one process holds a folder, another gets an error naming it; afterwards the lock is gone."""
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": holder.pid, "host": os.uname().nodename,
                                                      "command": "pptmc run x.c -o out"}))
        with pytest.raises(InputError, match=rf"pid {holder.pid} .*pptmc run x\.c -o out.*is writing there"):
            with folder_lock(tmp_path):
                pytest.fail("took a lock another process holds")
    finally:
        holder.kill()
        holder.wait()


def test_a_dead_holders_lock_is_taken_over_and_released(tmp_path):
    """A lock left by a process that died (SIGKILL) does not block the next run, which removes its own."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": dead.pid, "host": os.uname().nodename}))
    with folder_lock(tmp_path) as lock:
        assert json.loads(lock.read_text())["pid"] == os.getpid()
    assert not (tmp_path / LOCK_NAME).exists()


def test_an_interrupted_step_is_never_taken_as_done(tmp_path):
    """The stamp goes before outputs are rewritten and comes back last: outputs half-rewritten for a new
    key are redone by a rerun with either key."""
    stamp, out = tmp_path / ".key", tmp_path / "table.csv"
    out.write_text("old\n")
    mark_done(stamp, "k1")
    assert reuse_or_invalidate(stamp, "k1", [out])        # done for k1
    assert not reuse_or_invalidate(stamp, "k2", [out])    # k2 starts rewriting ...
    out.write_text("half of k2\n")                        # ... and is interrupted here
    assert not reuse_or_invalidate(stamp, "k1", [out])    # neither key takes the mixed output
    assert not reuse_or_invalidate(stamp, "k2", [out])
