"""Load, validate and serialise machine files (TOML, schema in machines/SCHEMA.md).

Validation collects every problem with its field path (`caches[2].associativity: missing`)
so one run of `pptmc machines validate` shows all that needs fixing.
"""
from __future__ import annotations

import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

from machines.curves import check_curves, curves_to_dict
from machines.fields import Checker, finite, kind_name, power_of_two
from machines.model import INDEXINGS, OP_CLASSES, CacheLevel, Machine, OpCost, Parallel, Ram, TlbLevel
from machines.sockets import RAM_FIGURES, check_sockets, ram_figures_to_dict, read_ram_figures
from common.errors import InputError

SCHEMA_VERSION = 1
SUPPORTED_SCHEMA_VERSIONS = (1,)

_TOP_KEYS = {"schema_version", "name", "description", "cores", "frequency_ghz", "bus_width_bytes",
             "simd_width_bits", "source", "caches", "ram", "ops", "parallel", "calls", "core", "tlbs",
             "coherence", "page_bytes", "curves", "sockets"}
_RAM_KEYS = {"latency_ns", "bandwidth_one_core_gbs", "bandwidth_all_cores_gbs", "strided_cold_line_ns", "source",
             *RAM_FIGURES}
_OP_KEYS = {"latency", "recip_throughput", "source"}
_PARALLEL_KEYS = {"fork_join_ns", "barrier_ns", "cold_start_ns", "cold_start_one_ns", "source"}
_COLD_KEYS = ("cold_start_ns", "cold_start_one_ns")


# A level table's fields: TOML key (= the dataclass field) -> (kind, checks, default when optional or None).
_Spec = dict[str, tuple[str, dict, Any]]
_CACHE_SPEC: _Spec = {
    "name": ("str", {}, None), "size_bytes": ("int", {"positive": True}, None),
    "line_bytes": ("int", {"positive": True}, None), "associativity": ("int", {"non_negative": True}, None),
    "latency_cycles": ("number", {"positive": True}, None),
    "recip_throughput_cycles": ("number", {"positive": True}, None), "shared": ("bool", {}, None),
    "fully_associative": ("bool", {}, False), "indexing": ("str", {}, ""),
    "cores_per_instance": ("int", {"positive": True}, 0),
    "conflict_refill_ns": ("number", {"positive": True}, 0.0), "column_update_ns": ("figures", {}, ())}
_TLB_SPEC: _Spec = {
    "name": ("str", {}, None), "entries": ("int", {"positive": True}, None),
    "associativity": ("int", {"non_negative": True}, None), "page_bytes": ("int", {"positive": True}, None),
    "miss_cycles": ("number", {"non_negative": True}, None),
    "rmw_miss_cycles": ("number", {"non_negative": True}, 0.0), "fully_associative": ("bool", {}, False)}


def _read_level(chk: Checker, raw: Any, path: str, spec: _Spec) -> dict | None:
    """One [[caches]] or [[tlbs]] table read field by field (every error reported); None if it is no table.
    A bad field reads as None; an absent optional one as its default; numbers become floats."""
    data = chk.table(raw, path)
    if data is None:
        return None
    prefix = f"{path}."
    chk.unknown(data, {*spec, "source"}, prefix)
    chk.get(data, "source", prefix, "str")
    fields = {}
    for key, (kind, checks, default) in spec.items():
        if kind == "figures":
            fields[key] = positive_figures(chk, data, key, prefix)
            continue
        value = chk.get(data, key, prefix, kind, **checks) if key in data or default is None else default
        fields[key] = float(value) if kind == "number" and value is not None else value
    return fields


def _check_cache(chk: Checker, raw: Any, i: int) -> CacheLevel | None:
    """One [[caches]] entry: geometry, latency, throughput, sharing."""
    prefix = f"caches[{i}]."
    f = _read_level(chk, raw, f"caches[{i}]", _CACHE_SPEC)
    if f is None:
        return None
    size, line = f["size_bytes"], power_of_two(chk, f"{prefix}line_bytes", f["line_bytes"])
    f["line_bytes"] = line
    n_lines = None
    if size is not None and line is not None:
        if size % line:
            chk.fail(f"{prefix}size_bytes", f"{size} is not a multiple of line_bytes {line}")
        else:
            n_lines = size // line
    f["associativity"] = _ways(chk, prefix, f, n_lines, "lines")
    f["indexing"] = _indexing(chk, prefix, f, i)
    if f["indexing"] not in (None, "hashed") and f["associativity"] and n_lines is not None:
        _check_indexed_sets(chk, prefix, f, n_lines // f["associativity"])
    return None if None in f.values() else CacheLevel(**f)


def default_indexing(level: int, shared: bool) -> str:
    """A level's indexing when its file says none: the first level is virtually indexed, a shared (last)
    level sliced and hashed, any other level physically indexed."""
    return "virtual" if level == 0 else "hashed" if shared else "physical"


def _indexing(chk: Checker, prefix: str, fields: dict, i: int) -> str | None:
    """The level's `indexing`, its default when absent (default_indexing), or None and an error."""
    value = fields["indexing"]
    if value == "":
        return None if fields["shared"] is None else default_indexing(i, fields["shared"])
    if value not in INDEXINGS:
        chk.fail(f"{prefix}indexing", f"{value!r}: use one of {', '.join(INDEXINGS)}")
        return None
    return value


def _ways(chk: Checker, prefix: str, fields: dict, count: int | None, unit: str) -> int | None:
    """A level's associativity as the models read it (0 = fully associative), or None and an error.
    Pops the file's `fully_associative` flag: 0 ways without it is a slip, not a choice."""
    ways, fully = fields["associativity"], fields.pop("fully_associative")
    path = f"{prefix}associativity"
    if ways is None or fully is None:
        return None
    if fully:
        if ways not in (0, count) and count is not None:
            chk.fail(path, f"fully_associative = true needs 0 or the number of {unit} ({count}), got {ways}")
            return None
        return 0
    if ways == 0:
        chk.fail(path, "0 ways: give the number of ways, or add fully_associative = true for a fully "
                       "associative level")
        return None
    if count is not None and count % ways:
        chk.fail(path, f"{count} {unit} do not divide into {ways} ways")
        return None
    return ways


def _check_indexed_sets(chk: Checker, prefix: str, fields: dict, sets: int) -> None:
    """A cache that takes its set from address bits (indexing virtual or physical) has a power-of-two
    set count; the set-aware hit-rate model places lines by those bits."""
    if sets & (sets - 1):
        chk.fail(f"{prefix}size_bytes", f"{fields['size_bytes']} B in {fields['line_bytes']} B lines and "
                                        f"{fields['associativity']} ways (associativity) make {sets} sets, not a "
                                        f"power of two, but indexing = {fields['indexing']!r} takes the set "
                                        f"from address bits, so the set-aware hit rates cannot place its lines: "
                                        f"change size_bytes or associativity, or set {prefix}indexing = "
                                        f"\"hashed\" for a sliced cache with hashed sets (its hit rates are "
                                        f"then SDCM's, as with --hit-rates sdcm)")
        fields["size_bytes"] = None


def _check_caches(chk: Checker, data: dict) -> tuple[CacheLevel, ...]:
    raw = data.get("caches")
    if raw is None:
        chk.fail("caches", "missing (an array of [[caches]] tables, L1 first)")
        return ()
    if not isinstance(raw, list) or not raw:
        chk.fail("caches", f"expected a non-empty array of tables, got {kind_name(raw)}")
        return ()
    return _named_levels(chk, "caches", [_check_cache(chk, item, i) for i, item in enumerate(raw)])


def _named_levels(chk: Checker, key: str, levels: list) -> tuple:
    """The valid levels of a [[key]] array; a name used twice is an error."""
    names = [lv.name for lv in levels if lv is not None]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        chk.fail(key, f"level name {dup!r} appears more than once")
    return tuple(lv for lv in levels if lv is not None)


def _check_ram(chk: Checker, data: dict) -> Ram | None:
    if "ram" not in data:
        chk.fail("ram", "missing")
        return None
    ram = chk.table(data["ram"], "ram")
    if ram is None:
        return None
    chk.unknown(ram, _RAM_KEYS, "ram.")
    vals = [chk.get(ram, k, "ram.", "number", positive=True)
            for k in ("latency_ns", "bandwidth_one_core_gbs", "bandwidth_all_cores_gbs")]
    chk.get(ram, "source", "ram.", "str")
    remote = read_ram_figures(chk, ram)
    if any(v is None for v in vals):
        return None
    if vals[1] > vals[2]:
        chk.fail("ram.bandwidth_one_core_gbs", f"{vals[1]} exceeds bandwidth_all_cores_gbs {vals[2]}")
    return Ram(latency_ns=float(vals[0]), bandwidth_one_core_gbs=float(vals[1]),
               bandwidth_all_cores_gbs=float(vals[2]),
               strided_cold_line_ns=positive_figures(chk, ram, "strided_cold_line_ns", "ram."), **remote)


def positive_figures(chk: Checker, table: dict, key: str, prefix: str) -> tuple[float, ...]:
    """An optional list of positive numbers, one per power of two of L1 sets (ram.strided_cold_line_ns,
    caches[0].column_update_ns; the length is checked against the L1's sets later); () when absent."""
    if key not in table:
        return ()
    costs = table[key]
    if not isinstance(costs, list) or not costs:
        chk.fail(f"{prefix}{key}", f"expected a non-empty list of numbers, got {kind_name(costs)}")
        return ()
    bad = [i for i, v in enumerate(costs) if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0
           or not finite(v)]
    if bad:
        value = costs[bad[0]]
        chk.fail(f"{prefix}{key}[{bad[0]}]", f"must be a positive number, got {value!r}"
                 if finite(value) else f"{value!r} is not a finite number")
        return ()
    return tuple(float(v) for v in costs)


def _check_set_figures(chk: Checker, caches: list, ram: Ram | None) -> None:
    """ram.strided_cold_line_ns and caches[0].column_update_ns have one figure per power of two up to the
    first-level cache's sets."""
    if not caches:
        return
    sets = caches[0].sets
    want = sets.bit_length() if sets > 0 and sets & (sets - 1) == 0 else 0
    for path, figures in (("ram.strided_cold_line_ns", ram.strided_cold_line_ns if ram else ()),
                          ("caches[0].column_update_ns", caches[0].column_update_ns)):
        if figures and len(figures) != want:
            chk.fail(path, f"has {len(figures)} figures; {caches[0].name} has {sets} sets, so it needs {want} "
                           f"(1, 2, 4, .., {sets} sets)"
                     if want else f"{caches[0].name} has {sets} sets, not a power of two: leave the field out")


def _check_conflict_levels(chk: Checker, caches: list) -> None:
    """conflict_refill_ns prices refills that conflicted out of L1 and L2, so only a third or later level has it;
    column_update_ns prices dirty lines conflicting out of the first level, so only it has that."""
    for i, cache in enumerate(caches[:2]):
        if cache.conflict_refill_ns:
            chk.fail(f"caches[{i}].conflict_refill_ns", "prices lines that conflicted out of the first two levels and "
                                                        "came from this one: give it on the third level or later")
    for i, cache in enumerate(caches[1:], start=1):
        if cache.column_update_ns:
            chk.fail(f"caches[{i}].column_update_ns", "prices dirty lines conflicting out of the first level: "
                                                      "give it on caches[0]")


def _check_ops(chk: Checker, data: dict) -> dict[str, OpCost]:
    if "ops" not in data:
        chk.fail("ops", "missing")
        return {}
    ops = chk.table(data["ops"], "ops")
    if ops is None:
        return {}
    for key in sorted(set(ops) - set(OP_CLASSES)):
        chk.fail(f"ops.{key}", f"unknown operation class; known: {', '.join(OP_CLASSES)}")
    out: dict[str, OpCost] = {}
    for op in OP_CLASSES:
        if op not in ops:
            chk.fail(f"ops.{op}", "missing")
            continue
        cost = _op_cost(chk, ops[op], f"ops.{op}")
        if cost is not None:
            out[op] = cost
    return out


def _op_cost(chk: Checker, raw: Any, path: str) -> OpCost | None:
    """One {latency, recip_throughput, source} table (an operation class or a library call)."""
    entry = chk.table(raw, path)
    if entry is None:
        return None
    prefix = f"{path}."
    chk.unknown(entry, _OP_KEYS, prefix)
    lat = chk.get(entry, "latency", prefix, "number", positive=True)
    thr = chk.get(entry, "recip_throughput", prefix, "number", positive=True)
    chk.get(entry, "source", prefix, "str")
    if lat is None or thr is None:
        return None
    return OpCost(latency=float(lat), recip_throughput=float(thr))


def _check_parallel(chk: Checker, data: dict) -> Parallel:
    """The optional [parallel] table; absent means no overhead term (both costs 0)."""
    if "parallel" not in data:
        return Parallel()
    par = chk.table(data["parallel"], "parallel")
    if par is None:
        return Parallel()
    chk.unknown(par, _PARALLEL_KEYS, "parallel.")
    vals = [chk.get(par, k, "parallel.", "number", non_negative=True) for k in ("fork_join_ns", "barrier_ns")]
    chk.get(par, "source", "parallel.", "str")
    cold = [chk.get(par, k, "parallel.", "number", non_negative=True) if k in par else 0.0 for k in _COLD_KEYS]
    if sum(k in par for k in _COLD_KEYS) == 1:
        chk.fail("parallel", f"give both {' and '.join(_COLD_KEYS)} or neither")
    if any(v is None for v in vals + cold):
        return Parallel()
    return Parallel(fork_join_ns=float(vals[0]), barrier_ns=float(vals[1]), cold_start_ns=float(cold[0]),
                    cold_start_one_ns=float(cold[1]))


_CALL_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _check_calls(chk: Checker, data: dict) -> dict[str, OpCost]:
    """The optional [calls.<function>] tables: cost of one call of a C library function (cycles)."""
    if "calls" not in data:
        return {}
    calls = chk.table(data["calls"], "calls")
    out: dict[str, OpCost] = {}
    for name, raw in (calls or {}).items():
        if not _CALL_NAME_RE.match(name):
            chk.fail(f"calls.{name}", "not a C function name")
            continue
        cost = _op_cost(chk, raw, f"calls.{name}")
        if cost is not None:
            out[name] = cost
    return out


_CORE_FIGURES = ("reorder_window_ops", "store_new_line_cycles", "chain_lookahead_ops")
_MCPU_RE = re.compile(r"^[a-z][a-z0-9_.-]*$")


def _check_core(chk: Checker, data: dict) -> tuple[float, float, float, str]:
    """The optional [core] table: (out-of-order window past a stalled chain, cost of a store to
    another line than the store before it, lookahead into the next instance of a long chain,
    llvm-mca's processor name); each optional, 0 or ""."""
    if "core" not in data:
        return 0.0, 0.0, 0.0, ""
    core = chk.table(data["core"], "core")
    if core is None:
        return 0.0, 0.0, 0.0, ""
    chk.unknown(core, {*_CORE_FIGURES, "llvm_mcpu", "source"}, "core.")
    chk.get(core, "source", "core.", "str")
    if not any(key in core for key in (*_CORE_FIGURES, "llvm_mcpu")):
        chk.fail("core", f"needs at least one of {', '.join(_CORE_FIGURES)}, llvm_mcpu")
    values = [chk.get(core, key, "core.", "number", positive=True) if key in core else 0.0 for key in _CORE_FIGURES]
    mcpu = chk.get(core, "llvm_mcpu", "core.", "str") if "llvm_mcpu" in core else ""
    if mcpu and not _MCPU_RE.match(mcpu):
        chk.fail("core.llvm_mcpu", f"{mcpu!r} is not a processor name (`llc-19 -mcpu=help` lists them)")
    return float(values[0] or 0.0), float(values[1] or 0.0), float(values[2] or 0.0), mcpu or ""


def _check_coherence(chk: Checker, data: dict) -> tuple[float, float]:
    """The optional [coherence] table: (the cost of a line last written by another core, the cost of an upgrade);
    0 for a figure absent."""
    if "coherence" not in data:
        return 0.0, 0.0
    table = chk.table(data["coherence"], "coherence")
    if table is None:
        return 0.0, 0.0
    chk.unknown(table, {"transfer_cycles", "upgrade_cycles", "source"}, "coherence.")
    cost = chk.get(table, "transfer_cycles", "coherence.", "number", positive=True)
    upgrade = (chk.get(table, "upgrade_cycles", "coherence.", "number", non_negative=True)
               if "upgrade_cycles" in table else 0.0)
    chk.get(table, "source", "coherence.", "str")
    return float(cost or 0.0), float(upgrade or 0.0)


def _check_tlb(chk: Checker, raw: Any, i: int) -> TlbLevel | None:
    """One [[tlbs]] entry: geometry and the cost of missing it."""
    prefix = f"tlbs[{i}]."
    f = _read_level(chk, raw, f"tlbs[{i}]", _TLB_SPEC)
    if f is None:
        return None
    f["page_bytes"] = power_of_two(chk, f"{prefix}page_bytes", f["page_bytes"])
    f["associativity"] = _ways(chk, prefix, f, f["entries"], "entries")
    return None if None in f.values() else TlbLevel(**f)


def _check_tlbs(chk: Checker, data: dict) -> tuple[TlbLevel, ...]:
    """The optional [[tlbs]] array, first level first; absent means no translation cost."""
    if "tlbs" not in data:
        return ()
    raw = data["tlbs"]
    if not isinstance(raw, list):
        chk.fail("tlbs", f"expected an array of [[tlbs]] tables, got {kind_name(raw)}")
        return ()
    return _named_levels(chk, "tlbs", [_check_tlb(chk, item, i) for i, item in enumerate(raw)])


def _collect_sources(data: dict) -> dict[str, str]:
    """Table path -> its `source` string; every figure in a table cites that table's source."""
    sources = {"": data.get("source", "")}
    for i, cache in enumerate(data.get("caches") or []):
        if isinstance(cache, dict):
            sources[f"caches[{i}]"] = cache.get("source", "")
    for i, tlb in enumerate(data.get("tlbs") or []) if isinstance(data.get("tlbs"), list) else ():
        if isinstance(tlb, dict):
            sources[f"tlbs[{i}]"] = tlb.get("source", "")
    if isinstance(data.get("ram"), dict):
        sources["ram"] = data["ram"].get("source", "")
    for table in ("parallel", "core", "coherence", "curves"):
        if isinstance(data.get(table), dict):
            sources[table] = data[table].get("source", "")
    for op, entry in (data.get("ops") or {}).items() if isinstance(data.get("ops"), dict) else ():
        if isinstance(entry, dict):
            sources[f"ops.{op}"] = entry.get("source", "")
    for name, entry in (data.get("calls") or {}).items() if isinstance(data.get("calls"), dict) else ():
        if isinstance(entry, dict):
            sources[f"calls.{name}"] = entry.get("source", "")
    return sources


def validate_machine_dict(data: dict, source: str) -> Machine:
    """Check a parsed machine file and build the Machine; InputError lists every bad field."""
    chk = Checker()
    if not isinstance(data, dict):
        raise InputError(f"{source}: expected a TOML table at the top level")
    version = data.get("schema_version")
    if version is None:
        chk.fail("schema_version", f"missing (this pptmc reads schema_version = {SCHEMA_VERSION})")
    elif isinstance(version, bool) or not isinstance(version, int) or version not in SUPPORTED_SCHEMA_VERSIONS:
        chk.fail("schema_version", f"unsupported value {version!r}; this pptmc reads "
                                   f"{', '.join(map(str, SUPPORTED_SCHEMA_VERSIONS))}")
    if chk.errors:  # a file of another schema version cannot be checked field by field
        raise InputError(f"{source}: " + "; ".join(chk.errors))
    chk.unknown(data, _TOP_KEYS, "")
    name = chk.get(data, "name", "", "str")
    description = data.get("description", "")
    if not isinstance(description, str):
        chk.fail("description", f"expected a string, got {kind_name(description)}")
    cores = chk.get(data, "cores", "", "int", positive=True)
    freq = chk.get(data, "frequency_ghz", "", "number", positive=True)
    bus = chk.get(data, "bus_width_bytes", "", "int", positive=True)
    simd = chk.get(data, "simd_width_bits", "", "int", positive=True)
    chk.get(data, "source", "", "str")
    caches = _check_caches(chk, data)
    _check_instances(chk, caches, cores)
    ram = _check_ram(chk, data)
    _check_conflict_levels(chk, caches)
    _check_set_figures(chk, caches, ram)
    ops = _check_ops(chk, data)
    parallel = _check_parallel(chk, data)
    calls = _check_calls(chk, data)
    window, store_new_line, lookahead, mcpu = _check_core(chk, data)
    tlbs = _check_tlbs(chk, data)
    transfer, upgrade = _check_coherence(chk, data)
    page = _check_page(chk, data, caches)
    curves = check_curves(chk, data, cores)
    sockets = check_sockets(chk, data, cores, caches, ram)
    if chk.errors:
        raise InputError(f"{source}: invalid machine file: " + "; ".join(chk.errors)
                         + " (schema: machines/SCHEMA.md)")
    return Machine(name=name, description=description, cores=cores, frequency_ghz=float(freq),
                   caches=caches, ram=ram, bus_width_bytes=bus, simd_width_bits=simd, ops=ops,
                   sources=_collect_sources(data), schema_version=version, parallel=parallel,
                   calls=calls, reorder_window_ops=window, store_new_line_cycles=store_new_line,
                   chain_lookahead_ops=lookahead, tlbs=tlbs, llvm_mcpu=mcpu, transfer_cycles=transfer, upgrade_cycles=upgrade,
                   page_bytes=page, curves=curves, sockets=sockets)


def _check_instances(chk: Checker, caches: tuple[CacheLevel, ...], cores: int | None) -> None:
    """Each level's optional cores_per_instance: 1 for a private level; for a shared one at least 2 (unless the
    machine has one core) and a divisor of `cores`, so the cores split into whole groups."""
    for i, c in enumerate(caches):
        k, path = c.cores_per_instance, f"caches[{i}].cores_per_instance"
        if not k:
            continue
        if not c.shared and k != 1:
            chk.fail(path, f"{k} cores share one instance, but shared = false (one instance per core): set "
                           f"shared = true for a level a group of cores shares, or cores_per_instance = 1")
        elif c.shared and k == 1 and cores != 1:
            chk.fail(path, "1 core per instance describes a private level: set shared = false, or give the "
                           "number of cores that share one instance")
        elif cores is not None and cores % k:
            chk.fail(path, f"{k} does not divide the machine's {cores} cores: give the cores that share one "
                           f"instance (e.g. 4 for an L3 per 4-core CCX), a divisor of cores")


def _check_page(chk: Checker, data: dict, caches: tuple[CacheLevel, ...]) -> int | None:
    """The optional page_bytes: a power of two holding at least one cache line (default 4096)."""
    if "page_bytes" not in data:
        return 4096
    page = power_of_two(chk, "page_bytes", chk.get(data, "page_bytes", "", "int", positive=True))
    if page is not None and caches and page < caches[0].line_bytes:
        chk.fail("page_bytes", f"{page} B is smaller than a cache line ({caches[0].line_bytes} B)")
        return None
    return page


def machine_to_dict(m: Machine) -> dict:
    """The TOML-ready dict of a Machine; validate_machine_dict(machine_to_dict(m)) == m."""
    src = m.sources
    caches = [{"name": c.name, "size_bytes": c.size_bytes, "line_bytes": c.line_bytes,
               "associativity": c.associativity, **({"fully_associative": True} if c.fully_associative else {}),
               "latency_cycles": c.latency_cycles,
               "recip_throughput_cycles": c.recip_throughput_cycles, "shared": c.shared,
               **({} if c.indexing == default_indexing(i, c.shared) else {"indexing": c.indexing}),
               **({"cores_per_instance": c.cores_per_instance} if c.cores_per_instance else {}),
               **({"conflict_refill_ns": c.conflict_refill_ns} if c.conflict_refill_ns else {}),
               **({"column_update_ns": list(c.column_update_ns)} if c.column_update_ns else {}),
               "source": src.get(f"caches[{i}]", "")} for i, c in enumerate(m.caches)]
    ops = {op: {"latency": cost.latency, "recip_throughput": cost.recip_throughput,
                "source": src.get(f"ops.{op}", "")} for op, cost in m.ops.items()}
    out = {"schema_version": m.schema_version, "name": m.name, "description": m.description,
            "cores": m.cores, "frequency_ghz": m.frequency_ghz, "bus_width_bytes": m.bus_width_bytes,
            "simd_width_bits": m.simd_width_bits, "source": src.get("", ""), "caches": caches,
            "ram": {"latency_ns": m.ram.latency_ns, "bandwidth_one_core_gbs": m.ram.bandwidth_one_core_gbs,
                    "bandwidth_all_cores_gbs": m.ram.bandwidth_all_cores_gbs,
                    **({"strided_cold_line_ns": list(m.ram.strided_cold_line_ns)}
                       if m.ram.strided_cold_line_ns else {}),
                    **ram_figures_to_dict(m.ram), "source": src.get("ram", "")},
            "ops": ops}
    if m.page_bytes != 4096:
        out["page_bytes"] = m.page_bytes
    if m.sockets != 1:
        out["sockets"] = m.sockets
    if "parallel" in src or m.parallel != Parallel():  # optional table: written only when the file had one
        out["parallel"] = {"fork_join_ns": m.parallel.fork_join_ns, "barrier_ns": m.parallel.barrier_ns,
                           **{k: getattr(m.parallel, k) for k in _COLD_KEYS if getattr(m.parallel, k)},
                           "source": src.get("parallel", "")}
    core = {k: getattr(m, k) for k in (*_CORE_FIGURES, "llvm_mcpu") if getattr(m, k)}
    if core:
        out["core"] = {**core, "source": src.get("core", "")}
    if m.transfer_cycles:
        out["coherence"] = {"transfer_cycles": m.transfer_cycles,
                            **({"upgrade_cycles": m.upgrade_cycles} if m.upgrade_cycles else {}),
                            "source": src.get("coherence", "")}
    if m.tlbs:
        out["tlbs"] = [{"name": t.name, "entries": t.entries, "associativity": t.associativity,
                        **({"fully_associative": True} if t.fully_associative else {}), "page_bytes": t.page_bytes,
                        "miss_cycles": t.miss_cycles,
                        **({"rmw_miss_cycles": t.rmw_miss_cycles} if t.rmw_miss_cycles else {}),
                        "source": src.get(f"tlbs[{i}]", "")} for i, t in enumerate(m.tlbs)]
    if m.calls:
        out["calls"] = {name: {"latency": cost.latency, "recip_throughput": cost.recip_throughput,
                               "source": src.get(f"calls.{name}", "")} for name, cost in m.calls.items()}
    if m.curves is not None:
        out["curves"] = curves_to_dict(m.curves, src.get("curves", ""))
    return out


def _data_dir():
    return resources.files("machines") / "data"


def list_machines() -> list[str]:
    """Names of the shipped machine files."""
    return sorted(p.name[:-5] for p in _data_dir().iterdir() if p.name.endswith(".toml"))


def _resolve(name_or_path: str | Path) -> Path:
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists() or "/" in str(name_or_path):
        if not path.is_file():
            raise InputError(f"{path}: machine file not found")
        return path
    shipped = _data_dir() / f"{name_or_path}.toml"
    if not shipped.is_file():
        raise InputError(f"unknown machine {name_or_path!r}; shipped machines: {', '.join(list_machines())}; "
                         "or give the path of a .toml machine file")
    return Path(str(shipped))


def load_machine(name_or_path: str | Path) -> Machine:
    """A shipped machine by name, or any machine file by path, validated."""
    path = _resolve(name_or_path)
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: not valid TOML ({exc}); fix the syntax") from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from exc
    return validate_machine_dict(data, str(path))


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{text}"'


def dumps_toml(data: dict) -> str:
    """Write a machine dict as TOML; hand-written because the stdlib only reads TOML and the
    schema needs just scalars, arrays of numbers, two arrays of tables and two levels of sub-tables."""
    scalars = [f"{k} = {_toml_value(v)}" for k, v in data.items() if not isinstance(v, (dict, list))]
    lines = scalars + [""]
    for cache in data.get("caches", []):
        lines += ["[[caches]]"] + [f"{k} = {_toml_value(v)}" for k, v in cache.items()] + [""]
    for tlb in data.get("tlbs", []):
        lines += ["[[tlbs]]"] + [f"{k} = {_toml_value(v)}" for k, v in tlb.items()] + [""]
    if "ram" in data:
        lines += ["[ram]"] + [f"{k} = {_toml_value(v)}" for k, v in data["ram"].items()] + [""]
    for op, entry in data.get("ops", {}).items():
        lines += [f"[ops.{op}]"] + [f"{k} = {_toml_value(v)}" for k, v in entry.items()] + [""]
    if "parallel" in data:
        lines += ["[parallel]"] + [f"{k} = {_toml_value(v)}" for k, v in data["parallel"].items()] + [""]
    for table in ("core", "coherence"):
        if table in data:
            lines += [f"[{table}]"] + [f"{k} = {_toml_value(v)}" for k, v in data[table].items()] + [""]
    for name, entry in data.get("calls", {}).items():
        lines += [f"[calls.{name}]"] + [f"{k} = {_toml_value(v)}" for k, v in entry.items()] + [""]
    if "curves" in data:
        curves = data["curves"]
        lines += ["[curves]"] + [f"{k} = {_toml_value(v)}" for k, v in curves.items() if k != "spread"] + [""]
        if "spread" in curves:
            lines += ["[curves.spread]"] + [f"{k} = {_toml_value(v)}" for k, v in curves["spread"].items()] + [""]
    return "\n".join(lines)
