"""common.allocator: freed chunk-sized arrays are reused without the kernel zeroing fresh pages."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Allocate, touch and free chunk-sized arrays twice; print the page faults of the second round.
_ROUNDS = """
import resource, sys
import numpy as np
if sys.argv[1] == "keep":
    from common.allocator import keep_freed_memory
    if not keep_freed_memory():
        sys.exit("keep_freed_memory refused")
def rounds():
    for size in (3, 9, 5, 12, 7):  # MiB, like a chunk's columns, freed before the next
        a = np.empty(size << 20, np.uint8); a[::4096] = 1; del a
        bs = [np.empty(s << 20, np.uint8) for s in (4, 6, 8, 10)]
        for b in bs:
            b[::4096] = 1
        del bs
rounds()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
rounds()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def second_round_faults(mode: str) -> int:
    """Page faults of the second round in a fresh interpreter (the settings are process-wide)."""
    out = subprocess.run([sys.executable, "-c", _ROUNDS, mode], cwd=REPO, capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


def test_kept_memory_serves_the_next_chunks_without_fresh_pages():
    """With glibc's defaults the second round faults in thousands of pages (the heap top was
    given back); with keep_freed_memory it reuses the freed memory."""
    default, kept = second_round_faults("default"), second_round_faults("keep")
    assert default > 1000
    assert kept < default // 20
