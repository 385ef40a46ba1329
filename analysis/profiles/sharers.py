"""The sharer sets a shared trace's CRD engine keeps beside its hash slots (ReuseEngine(sharer_cores=p),
analysis/profiles/reuse.py, whose kernel inlines update_sharers once per access).

A line's set is a bitmap of the cores holding a valid copy (64 cores per word), then one bit that flags a
line never stored (valid in every core: the bitmap names the cores that touched it), then a last word:
the core (+ 1) that took its copy by a transfer since the line's last store (0: none). A load adds its
core, a store leaves only its core. A hit whose core is not a sharer, of a line stored since it was
first touched, is stale (a coherence miss when the core's private stack holds the line). A store by a
sharer while another core is one too is an upgrade: it hits, but waits for the other copies'
invalidation; a store of the core that took its copy by a transfer since the last store is not (a
read-modify-write of a line that moved, which the measured transfer cost covers).
"""
from __future__ import annotations

import numba
import numpy as np


def sharer_words(sharer_cores: int) -> int:
    """Words of a sharer set: a bit per core and the never-stored flag, then a word for the core that took its
    copy by a transfer since the last store (update_sharers); none without sharer sets."""
    return (sharer_cores + 64) // 64 + 1 if sharer_cores > 0 else 0


@numba.njit(cache=True, nogil=True, inline="always")
def update_sharers(sharers, slot, c, hit, store, events, n_ev, i, upgrades, flag):
    """Core c's access i to the slot's line. A hit on a copy c did not hold, of a line stored since it was
    first touched, is stale (its index goes to events[n_ev]); as a load it brings the line to c by a transfer,
    and the set's last word remembers c + 1. A store to a copy c holds that another core holds too is an
    upgrade (upgrades[c]), unless c took the copy by that transfer since the last store: a read-modify-write
    of a line that moved, which the measured transfer cost covers. Then a store leaves only c's copy valid, a
    load adds c, a first touch makes every copy valid (the set: c and the never-stored flag, bit `flag`).
    Returns the new n_ev."""
    one = np.uint64(1)
    last = sharers.shape[1] - 1  # the word of the core that took its copy by a transfer (+ 1; 0: none)
    w = c >> 6
    bit = one << np.uint64(c & 63)
    fw = flag >> 6
    fbit = one << np.uint64(flag & 63)
    cur = sharers[slot, w]
    mover = np.uint64(c + 1)
    stale = hit and (cur & bit) == 0 and (sharers[slot, fw] & fbit) == 0
    if stale:
        events[n_ev] = i
        n_ev += 1
    if last == 1:  # one word of cores: selects instead of branches (stores are unpredictable)
        moved = sharers[slot, 1]
        if store and hit and (cur & bit) != 0 and moved != mover and (cur & ~(bit | fbit)) != 0:
            upgrades[c] += 1
        sharers[slot, 0] = bit if store else (cur | bit if hit else bit | fbit)
        sharers[slot, 1] = mover if stale and not store else (moved if hit and not store else np.uint64(0))
        return n_ev
    if store and hit and (cur & bit) != 0 and sharers[slot, last] != mover and others_hold(sharers, slot, w, bit, fw,
                                                                                          fbit):
        upgrades[c] += 1
    if store or not hit:  # only this core's copy stays valid (and, first touched, the flag)
        for x in range(last + 1):
            sharers[slot, x] = 0
        sharers[slot, w] = bit
        if not store:
            sharers[slot, fw] |= fbit
    else:
        sharers[slot, w] = cur | bit
        if stale:
            sharers[slot, last] = mover
    return n_ev


@numba.njit(cache=True, nogil=True, inline="always")
def others_hold(sharers, slot, w, bit, fw, fbit):
    """Whether a core other than the one of word w, bit `bit`, holds the slot's line (the flag bit and the
    last word aside)."""
    for x in range(sharers.shape[1] - 1):
        word = sharers[slot, x]
        if x == w:
            word &= ~bit
        if x == fw:
            word &= ~fbit
        if word != 0:
            return True
    return False
