"""Machine figures that validate but are likely slips: each warning names its field.

`pptmc machines validate` prints them; loading a machine never fails on them (machines/SCHEMA.md).
"""
from __future__ import annotations

from machines.model import CacheLevel, Machine

FIRST_LEVEL_WARN_BYTES = 4 << 20  # a first-level cache above this is likely a unit slip (KiB or MiB as bytes)
ANY_LEVEL_WARN_BYTES = 4 << 30    # no cache instance is this large


def machine_warnings(machine: Machine) -> list[str]:
    """Figures that validate but likely are slips: a level smaller than the one above it, an absurd
    cache size, or groups of cores sharing a level that do not nest; each names its field. `pptmc machines
    validate` prints them."""
    caches = [(c.name, c.size_bytes, _size(c.size_bytes)) for c in machine.caches]
    tlbs = [(t.name, t.entries, f"{t.entries} entries") for t in machine.tlbs]
    return [*_shrinking_levels("caches", "size_bytes", caches, "its local hit rates come out negative"),
            *_shrinking_levels("tlbs", "entries", tlbs, "accesses that hit the level above are charged its misses"),
            *_absurd_sizes(machine.caches), *_unnested_groups(machine)]


def _shrinking_levels(key: str, field_name: str, levels: list[tuple[str, int, str]], harm: str) -> list[str]:
    """A warning per level, given as (name, capacity, capacity shown), that holds less than the one above it."""
    return [f"{key}[{i}].{field_name}: {name} ({shown}) is smaller than {above} above it ({above_shown}); {harm}: "
            f"check the figure, and that levels are listed first level first"
            for i, ((above, above_cap, above_shown), (name, cap, shown))
            in enumerate(zip(levels, levels[1:]), start=1) if cap < above_cap]


def _absurd_sizes(caches: tuple[CacheLevel, ...]) -> list[str]:
    """A warning per cache level far larger than any real one of its kind (sizes are in bytes)."""
    out = []
    for i, c in enumerate(caches):
        limit = FIRST_LEVEL_WARN_BYTES if i == 0 else ANY_LEVEL_WARN_BYTES
        if c.size_bytes > limit:
            kind = "a first-level cache" if i == 0 else "a cache instance"
            out.append(f"caches[{i}].size_bytes: {c.name} of {_size(c.size_bytes)} is larger than {kind} is "
                       f"expected to be ({_size(limit)}); sizes are in bytes")
    return out


def _unnested_groups(machine: Machine) -> list[str]:
    """A warning per level whose groups of cores do not each hold whole groups of the level above (an L2 shared
    by 8 cores over an L3 per 4): real hierarchies nest, so such a grouping is likely a slip."""
    groups = [c.instance_cores(machine.cores) for c in machine.caches]
    return [f"caches[{i}].cores_per_instance: {c.name} is shared by groups of {groups[i]} cores, which do not "
            f"hold whole groups of {groups[i - 1]} cores of {machine.caches[i - 1].name} above it: check the figures"
            for i, c in enumerate(machine.caches) if i and groups[i] % groups[i - 1]]


def _size(size_bytes: int) -> str:
    """A byte count in the largest binary unit that divides it."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size_bytes >= 1 << shift and size_bytes % (1 << shift) == 0:
            return f"{size_bytes >> shift} {unit}"
    return f"{size_bytes} B"
