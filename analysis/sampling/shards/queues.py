"""The per-core queues of SHARDS pairs waiting for the round-robin merge (analysis/sampling/shards/shards_kernel.py), in
one pool of fixed-size blocks, spilled to disk beyond a memory budget.

With a static schedule core 0's sampled pairs wait until core p-1's first ones arrive, nearly a whole loop
instance, so what waits grows with the trace. Each core's queue is a chain of BLOCK-pair blocks taken from
one pool (a free list; a block goes back to it once its core's head leaves it), so the pool holds the sum of
the queues' lengths (plus a partly filled block per end of each queue), not p times the longest. Beyond the
budget (bytes of waiting pairs per core count: analysis.profiles.interleave's $PPTMC_MEMORY_BUDGET, shared by
the pass's core counts, less the shared window ring's part, memory.ring_budget) the full blocks between a
queue's head block and its tail block go, in order, to a zstd-compressed temporary file of their core
(spill.FrameFile, as the exact interleaver's lanes do); the chain then has a hole after the block before them,
and when the merge's head leaves that block the kernel stops (LOAD_QUEUE) and the next blocks are read back in
its place. The pairs come back unchanged, so spilling changes no count.

The kernels' side (`q_room`, `q_push`, `q_advance`) takes the arrays bundled (`Queues`) and allocates nothing; the
pool grows, spills and loads in Python between kernel calls (`QueuePool`).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from common.spill import FrameFile
from analysis.sampling.shards.stacks import DONE, GROW_QUEUE, LOAD_QUEUE, hot_helper

BLOCK = 4096  # pairs per block: 128 KiB of the four fields
FIELDS = 4  # private position, line (TAG on stores), private distance, gap
HB, HI, TB, TI, HOLE, DISK = range(6)  # ctl columns (see Queues)


class Queues(NamedTuple):
    """The pool's arrays: per block, BLOCK pairs' private position, line (TAG on stores), private distance and
    gap; nxt: each block's next one in its chain (its core's queue or the free list; -1: none); ctl[c]: core c's
    head block and index in it, tail block and next index in it (blocks -1: empty queue), the block after which
    its spilled blocks belong (-1: none) and how many are spilled; free: [first free block, blocks in use]."""

    pos: np.ndarray
    line: np.ndarray
    dist: np.ndarray
    gap: np.ndarray
    nxt: np.ndarray
    ctl: np.ndarray
    free: np.ndarray


@hot_helper
def q_room(qs, c):
    """DONE when core c's queue can take one more pair (a free block linked at its tail if needed), else
    GROW_QUEUE."""
    ctl = qs.ctl
    if ctl[c, TB] >= 0 and ctl[c, TI] < qs.pos.shape[1]:
        return DONE
    b = qs.free[0]
    if b < 0:
        return GROW_QUEUE
    qs.free[0] = qs.nxt[b]
    qs.free[1] += 1
    qs.nxt[b] = -1
    if ctl[c, TB] < 0:
        ctl[c, HB], ctl[c, HI] = b, 0
    else:
        qs.nxt[ctl[c, TB]] = b
    ctl[c, TB], ctl[c, TI] = b, 0
    return DONE


@hot_helper
def q_push(qs, c, pos, line, dist, gap):
    """Append a pair to core c's queue (room was DONE)."""
    b, t = qs.ctl[c, TB], qs.ctl[c, TI]
    qs.pos[b, t], qs.line[b, t], qs.dist[b, t], qs.gap[b, t] = pos, line, dist, gap
    qs.ctl[c, TI] = t + 1


@hot_helper
def q_advance(qs, c):
    """Drop core c's head pair (just released): DONE, or LOAD_QUEUE when the pairs after it are on disk (the
    head is left at the end of its block for QueuePool.load)."""
    ctl = qs.ctl
    b, i = ctl[c, HB], ctl[c, HI] + 1
    if b == ctl[c, TB] and i == ctl[c, TI]:  # the queue is empty: its block goes back
        _free(qs, b)
        ctl[c, HB], ctl[c, HI], ctl[c, TB], ctl[c, TI] = -1, 0, -1, 0
        return DONE
    ctl[c, HI] = i
    if i < qs.pos.shape[1]:
        return DONE
    if b == ctl[c, HOLE]:
        return LOAD_QUEUE
    ctl[c, HB], ctl[c, HI] = qs.nxt[b], 0
    _free(qs, b)
    return DONE


@hot_helper
def _free(qs, b):
    """Block b back to the free list (first: its pages are the warmest)."""
    qs.nxt[b] = qs.free[0]
    qs.free[0] = b
    qs.free[1] -= 1


class QueuePool:
    """p queues in one block pool (see the module docstring); budget: bytes of blocks in use beyond which full
    blocks spill to spill_dir (None: the system's temporary directory); block: pairs per block (default BLOCK)."""

    def __init__(self, p: int, budget: int, spill_dir: str | None = None, block: int | None = None) -> None:
        self.p, self.budget, self.spill_dir = p, budget, spill_dir
        self.block = int(block or BLOCK)
        self.block_bytes = self.block * FIELDS * 8
        n = max(2 * p, budget // self.block_bytes)  # zeroed lazily: only the pages of blocks ever used are touched
        self.data = [np.zeros((n, self.block), t) for t in (np.int64, np.uint64, np.int64, np.int64)]
        self.nxt = np.append(np.arange(1, n, dtype=np.int64), -1)
        self.ctl = np.zeros((p, 6), np.int64)
        self.ctl[:, [HB, TB, HOLE]] = -1
        self.free = np.zeros(2, np.int64)
        self.files: list[FrameFile | None] = [None] * p  # per core: its spill file
        self.spilled = 0  # blocks written to disk so far

    def arrays(self) -> Queues:
        """The arrays the kernels take (grow replaces the data: take them again after it)."""
        return Queues(*self.data, self.nxt, self.ctl, self.free)

    def idle(self) -> bool:
        """Whether no pair waits."""
        return bool((self.ctl[:, HB] < 0).all())

    def make_room(self) -> None:
        """After GROW_QUEUE: spill when the blocks in use pass the budget and that frees any, else grow."""
        if int(self.free[1]) * self.block_bytes >= self.budget and self.spill():
            return
        n, most = int(self.nxt.shape[0]), self.budget // self.block_bytes
        self.grow(max(8, min(n // 2, most - n) if n < most else n // 2))

    def grow(self, more: int) -> None:
        """`more` free blocks (zeroed lazily: only the blocks in use are copied, the new ones untouched)."""
        n = self.nxt.shape[0]
        data = []
        for a in self.data:
            b = np.zeros((n + more, self.block), a.dtype)
            b[:n] = a
            data.append(b)
        self.data = data
        fresh = np.append(np.arange(n + 1, n + more, dtype=np.int64), self.free[0])
        self.nxt = np.concatenate([self.nxt, fresh])
        self.free[0] = n

    def spill(self) -> int:
        """Write every queue's full blocks after its head (or hole) block and before its tail block to its spill
        file, in order, and free them; returns how many."""
        out = 0
        for c in range(self.p):
            start = int(self.ctl[c, HOLE]) if self.ctl[c, HOLE] >= 0 else int(self.ctl[c, HB])
            if start < 0:
                continue
            run, b = [], int(self.nxt[start])
            while b >= 0 and b != self.ctl[c, TB]:
                run.append(b)
                b = int(self.nxt[b])
            for b in run:
                self._write(c, b)
                self.nxt[b], self.free[0] = self.free[0], b
            if run:
                self.nxt[start] = self.ctl[c, TB]
                self.ctl[c, HOLE] = start
                self.ctl[c, DISK] += len(run)
                self.free[1] -= len(run)
                out += len(run)
        self.spilled += out
        return out

    def load(self) -> None:
        """After LOAD_QUEUE: each core whose head left its hole block gets its next spilled blocks back in that
        block's place (at most an eighth of the budget per core at a time)."""
        most = max(1, self.budget // (8 * self.p * self.block_bytes))
        for c in range(self.p):
            hole = int(self.ctl[c, HOLE])
            if hole < 0 or self.ctl[c, HB] != hole or self.ctl[c, HI] < self.block:
                continue
            k = int(min(most, self.ctl[c, DISK]))
            after = int(self.nxt[hole])
            self.nxt[hole], self.free[0] = self.free[0], hole  # the consumed block is the first reused
            self.free[1] -= 1
            blocks = []
            for _ in range(k):
                if self.free[0] < 0:
                    self.grow(max(8, k))
                b = int(self.free[0])
                self.free[0] = self.nxt[b]
                self._read(c, b)
                blocks.append(b)
            self.free[1] += k
            for a, b in zip(blocks, blocks[1:] + [after]):
                self.nxt[a] = b
            self.ctl[c, HB], self.ctl[c, HI] = blocks[0], 0
            self.ctl[c, DISK] -= k
            self.ctl[c, HOLE] = blocks[-1] if self.ctl[c, DISK] else -1
            if not self.ctl[c, DISK]:
                self.files[c].close()
                self.files[c] = None

    def _write(self, c: int, b: int) -> None:
        """Block b at the end of core c's spill file."""
        if self.files[c] is None:
            self.files[c] = FrameFile(self.spill_dir, "the sampled profiles' waiting samples")
        self.files[c].append(b"".join(a[b].tobytes() for a in self.data))

    def _read(self, c: int, b: int) -> None:
        """Core c's next spilled block into block b."""
        raw = self.files[c].pop(self.block_bytes)
        words = np.frombuffer(raw, np.uint64).reshape(FIELDS, self.block)
        for a, w in zip(self.data, words):
            a[b] = w.view(a.dtype)
