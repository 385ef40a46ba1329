"""Sockets (NUMA nodes) of a machine file: the optional top-level `sockets` and the [ram] figures of remote memory.

A socket has its own memory controllers: a line homed on another socket's memory costs `ram.remote_latency_ns`,
and one socket's controllers serve at most `ram.bandwidth_socket_gbs` (machines/SCHEMA.md). The runtime model
reads them by where the program's pages live (analysis/runtime/terms/numa.py). Every check records its problem
with the field path, as machines/loader.py does.
"""
from __future__ import annotations

from typing import Any

from machines.fields import Checker
from machines.model import CacheLevel, Ram

RAM_FIGURES = ("remote_latency_ns", "bandwidth_socket_gbs")  # optional [ram] figures of a machine with sockets


def read_ram_figures(chk: Checker, ram: dict) -> dict[str, float]:
    """The optional [ram] figures of remote memory (finite, positive); an absent or bad one reads as 0."""
    return {key: float(chk.get(ram, key, "ram.", "number", positive=True) or 0.0) if key in ram else 0.0
            for key in RAM_FIGURES}


def check_sockets(chk: Checker, data: dict, cores: int | None, caches: tuple[CacheLevel, ...],
                  ram: Ram | None) -> int:
    """The optional top-level `sockets` (default 1): a divisor of `cores` whose sockets each hold whole
    instances of every cache level, and the [ram] figures that only a machine of several sockets has."""
    if "sockets" not in data:
        sockets = 1
    else:
        sockets = chk.get(data, "sockets", "", "int", positive=True)
        if sockets is None:
            return 1
    if cores is not None and cores % sockets:
        chk.fail("sockets", f"{sockets} does not divide the machine's {cores} cores: give the number of sockets "
                            f"(NUMA nodes), each with the same number of cores")
        return sockets
    if cores is not None:
        _check_straddling(chk, caches, cores, sockets)
    if ram is not None:
        _check_ram_figures(chk, ram, sockets)
    return sockets


def _check_straddling(chk: Checker, caches: tuple[CacheLevel, ...], cores: int, sockets: int) -> None:
    """No instance of a cache level spans two sockets: the cores of one socket hold whole groups of each level."""
    per_socket = cores // sockets
    for i, level in enumerate(caches):
        group = level.instance_cores(cores)
        if per_socket % group and not cores % group:  # a group not dividing cores is refused already
            given = level.cores_per_instance or f"{cores} (shared by every core, the default)"
            chk.fail(f"caches[{i}].cores_per_instance", f"{given} cores per instance would straddle the "
                                                        f"{sockets} sockets of {per_socket} cores each: give a "
                                                        f"divisor of {per_socket} (e.g. {per_socket} for one "
                                                        f"{level.name} per socket)")


def _check_ram_figures(chk: Checker, ram: Ram, sockets: int) -> None:
    """remote_latency_ns at least the local latency; bandwidth_socket_gbs between one core's and the whole
    machine's, and with every socket together at least the whole machine's; neither on a one-socket machine."""
    remote, socket_bw = ram.remote_latency_ns, ram.bandwidth_socket_gbs
    if sockets == 1:
        for key, value in (("remote_latency_ns", remote), ("bandwidth_socket_gbs", socket_bw)):
            if value:
                chk.fail(f"ram.{key}", "a one-socket machine has no other socket's memory: leave it out, or give "
                                       "`sockets`")
        return
    if remote and remote < ram.latency_ns:
        chk.fail("ram.remote_latency_ns", f"{remote} is below the local latency_ns {ram.latency_ns}: a line from "
                                          f"another socket's memory crosses the socket link as well")
    if not socket_bw:
        return
    if socket_bw < ram.bandwidth_one_core_gbs:
        chk.fail("ram.bandwidth_socket_gbs", f"{socket_bw} is below bandwidth_one_core_gbs "
                                             f"{ram.bandwidth_one_core_gbs}: one core draws from one socket")
    elif socket_bw > ram.bandwidth_all_cores_gbs:
        chk.fail("ram.bandwidth_socket_gbs", f"{socket_bw} exceeds bandwidth_all_cores_gbs "
                                             f"{ram.bandwidth_all_cores_gbs} (the whole machine)")
    elif socket_bw * sockets < ram.bandwidth_all_cores_gbs:
        chk.fail("ram.bandwidth_socket_gbs", f"{sockets} sockets x {socket_bw} is below bandwidth_all_cores_gbs "
                                             f"{ram.bandwidth_all_cores_gbs}: the machine draws no more than its "
                                             f"sockets' controllers serve")


def ram_figures_to_dict(ram: Ram) -> dict[str, Any]:
    """The optional [ram] figures of remote memory that the file gives (0 = not given, not written)."""
    return {key: getattr(ram, key) for key in RAM_FIGURES if getattr(ram, key)}
