"""Sockets and NUMA page placement (issue #32): the machine file's `sockets` and remote-memory figures (loading,
refusals naming the field, round trips), the DRAM latency and bandwidth per page policy and thread placement
against hand-computed values, the queuing network against Buzen's normalising constant, the one-socket model
unchanged, and the --numa-pages flag."""
from __future__ import annotations

import copy
import math
import tomllib
from itertools import product

import pytest

import machines
from analysis.options import ModelOptions
from analysis.runtime import model as rm
from analysis.runtime.terms.contention import dram_bandwidth_gbs, memory_credits, queuing_seconds
from analysis.runtime.terms.numa import dram_latency_ns
from common.errors import InputError
from machines.loader import dumps_toml
from machines.model import CacheLevel, Machine, OpCost, Ram
from pptmc import cli
from pptmc.commands.args import model_options

POLICIES = ("master", "interleave", "local")
PLACEMENTS = ("close", "spread")


def toy(sockets: int = 2, cores: int = 8, socket_bw: float = 0.0, remote: float = 160.0) -> Machine:
    """1 GHz (cycles = ns), RAM 100 ns local, one core 6.4 GB/s, the machine 25.6 GB/s; 64 B lines, so
    memory_credits = 6.4 x 100 / 64 = 10 requests per core."""
    group = cores // sockets
    caches = (CacheLevel("L1", 1024, 64, 2, 4, 1, False), CacheLevel("L2", 4096, 64, 4, 10, 2, False),
              CacheLevel("L3", 16384, 64, 4, 40, 4, True, cores_per_instance=group if group > 1 else 0))
    ops = {op: OpCost(1.0, 1.0) for op in ("int_add", "int_mul", "int_div", "fp_add", "fp_mul", "fp_div", "fp_fma",
                                           "load", "store")}
    ram = Ram(100.0, 6.4, 25.6, remote_latency_ns=remote if sockets > 1 else 0.0,
              bandwidth_socket_gbs=socket_bw)
    return Machine(name="toy", description="", cores=cores, frequency_ghz=1.0, caches=caches, ram=ram,
                   bus_width_bytes=8, simd_width_bits=256, ops=ops, sockets=sockets)


# --- the machine file -----------------------------------------------------------------------------------------


def two_socket_dict(**ram) -> dict:
    """haswell-i7-5960x (8 cores) as two sockets of 4, its L3 one per socket, with `ram` figures added."""
    data = machines.machine_to_dict(machines.load_machine("haswell-i7-5960x"))
    data["sockets"] = 2
    data["caches"][2]["cores_per_instance"] = 4
    data["ram"].update(ram)
    return data


def test_a_two_socket_file_loads_defaults_and_round_trips():
    m = machines.validate_machine_dict(two_socket_dict(), "two.toml")
    all_cores = m.ram.bandwidth_all_cores_gbs
    assert (m.sockets, m.cores_per_socket, [m.socket_of(c) for c in range(8)]) == (2, 4, [0] * 4 + [1] * 4)
    assert m.remote_latency_ns == m.ram.latency_ns and m.socket_bandwidth_gbs == all_cores / 2   # defaults
    given = machines.validate_machine_dict(two_socket_dict(remote_latency_ns=140.0, bandwidth_socket_gbs=40.0), "x")
    assert (given.remote_latency_ns, given.socket_bandwidth_gbs) == (140.0, 40.0)
    for m in (machines.validate_machine_dict(two_socket_dict(), "a"), given):
        data = machines.machine_to_dict(m)
        assert data["sockets"] == 2
        assert machines.validate_machine_dict(data, "dict") == m
        assert machines.validate_machine_dict(tomllib.loads(dumps_toml(data)), "toml") == m
    assert "sockets" not in machines.machine_to_dict(machines.load_machine("haswell-i7-5960x"))


def _edit(data: dict, path: tuple, value) -> dict:
    data = copy.deepcopy(data)
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


@pytest.mark.parametrize("path,value,message", [
    (("sockets",), 3, "sockets: 3 does not divide the machine's 8 cores"),
    (("sockets",), 0, "sockets: must be positive"),
    (("sockets",), 2.0, "sockets: expected an integer"),
    (("sockets",), True, "sockets: expected an integer"),
    (("sockets",), 4, "caches[2].cores_per_instance: 4 cores per instance would straddle the 4 sockets of 2 cores"),
    (("caches", 2, "cores_per_instance"), 8, "caches[2].cores_per_instance: 8 cores per instance would straddle"),
    (("ram", "remote_latency_ns"), 50.0, "ram.remote_latency_ns: 50.0 is below the local latency_ns"),
    (("ram", "remote_latency_ns"), float("inf"), "ram.remote_latency_ns: inf is not a finite number"),
    (("ram", "remote_latency_ns"), -3.0, "ram.remote_latency_ns: must be positive"),
    (("ram", "remote_latency_ns"), "far", "ram.remote_latency_ns: expected a number"),
    (("ram", "bandwidth_socket_gbs"), float("nan"), "ram.bandwidth_socket_gbs: nan is not a finite number"),
    (("ram", "bandwidth_socket_gbs"), 0, "ram.bandwidth_socket_gbs: must be positive"),
    (("ram", "bandwidth_socket_gbs"), 1.0, "ram.bandwidth_socket_gbs: 1.0 is below bandwidth_one_core_gbs"),
    (("ram", "bandwidth_socket_gbs"), 1000.0, "ram.bandwidth_socket_gbs: 1000.0 exceeds bandwidth_all_cores_gbs"),
    (("ram", "bandwidth_socket_gbs"), 20.0, "ram.bandwidth_socket_gbs: 2 sockets x 20.0 is below"),
    (("ram", "bandwith_socket_gbs"), 20.0, "ram.bandwith_socket_gbs: unknown field"),
])
def test_impossible_socket_figures_are_refused_naming_the_field(path, value, message):
    with pytest.raises(InputError) as err:
        machines.validate_machine_dict(_edit(two_socket_dict(), path, value), "bad.toml")
    assert message in str(err.value) and str(err.value).startswith("bad.toml")


def test_a_shared_level_of_every_core_straddles_sockets():
    data = two_socket_dict()
    del data["caches"][2]["cores_per_instance"]
    with pytest.raises(InputError, match=r"caches\[2\]\.cores_per_instance: 8 \(shared by every core, the default\)"):
        machines.validate_machine_dict(data, "bad.toml")


@pytest.mark.parametrize("key,value", [("remote_latency_ns", 150.0), ("bandwidth_socket_gbs", 30.0)])
def test_a_one_socket_machine_has_no_remote_figures(key, value):
    data = machines.machine_to_dict(machines.load_machine("haswell-i7-5960x"))
    data["ram"][key] = value
    with pytest.raises(InputError, match=rf"ram\.{key}: a one-socket machine has no other socket's memory"):
        machines.validate_machine_dict(data, "bad.toml")


def test_shipped_two_socket_broadwell_cites_its_remote_figures():
    m = machines.load_machine("broadwell-2s-e5-2699v4")
    assert (m.sockets, m.cores_per_socket, m.caches[2].instance_cores(m.cores)) == (2, 22, 22)
    # the cited MLC idle latencies of a two-socket E5-2682 v4: local 85.0 / 84.2 ns, remote 136.3 / 137.2 ns
    ratio = (136.3 + 137.2) / (85.0 + 84.2)
    assert m.ram.remote_latency_ns == pytest.approx(m.ram.latency_ns * ratio, abs=0.05)
    assert m.ram.bandwidth_socket_gbs == 76.8 == m.ram.bandwidth_all_cores_gbs / 2     # Intel ARK, per socket
    source = m.sources["ram"]
    assert "remote_latency_ns" in source and "E5-2682 v4" in source and "MLC" in source
    assert "bandwidth_socket_gbs" in source and "sockets" in m.sources[""]


# --- latency and bandwidth per page policy and placement (2 sockets x 4 cores) --------------------------------

# 4 threads: close puts them on cores 0-3 (socket 0), spread on cores 0, 2, 4, 6 (two per socket).
# Local 100 ns, remote 160 ns; one core 6.4 GB/s, one socket 12.8 GB/s (25.6 / 2).
HAND = {  # (placement, policy) -> (latency ns, bandwidth GB/s) at 4 threads
    ("close", "master"): (100.0, 12.8),       # all on socket 0, its pages there: min(4 x 6.4, 12.8)
    ("spread", "master"): (160.0, 12.8),      # socket 1's threads read socket 0's memory; one controller
    ("close", "interleave"): (130.0, 25.6),   # half the lines remote; both controllers: min(25.6, 2 x 12.8)
    ("spread", "interleave"): (130.0, 25.6),
    ("close", "local"): (100.0, 12.8),        # one socket's controller
    ("spread", "local"): (100.0, 25.6),       # each socket's controller serves its two: 2 x min(12.8, 12.8)
}


@pytest.mark.parametrize("placement,policy", list(HAND))
def test_latency_and_bandwidth_hand_computed(placement, policy):
    m = toy()
    latency, bandwidth = HAND[placement, policy]
    assert dram_latency_ns(m, 4, placement, policy) == pytest.approx(latency)
    assert dram_bandwidth_gbs(m, 4, placement, policy) == pytest.approx(bandwidth)


def test_more_cases_hand_computed():
    m = toy()
    # one thread on socket 0 under any policy but interleave is local; interleave half remote
    assert [dram_latency_ns(m, 1, "spread", p) for p in POLICIES] == pytest.approx([100.0, 130.0, 100.0])
    # 2 threads spread (cores 0 and 4): master -> socket 1's thread pays remote
    assert dram_latency_ns(m, 2, "spread", "master") == 160.0
    assert dram_bandwidth_gbs(m, 2, "spread", "master") == pytest.approx(12.8)     # min(2 x 6.4, 12.8)
    assert dram_bandwidth_gbs(m, 2, "spread", "local") == pytest.approx(12.8)      # each 6.4 of its own socket's
    # 6 threads close: 4 on socket 0, 2 on socket 1. Local: socket 0 serves 4/6 of the traffic at 12.8 and binds:
    # 12.8 / (4/6) = 19.2 (socket 1 alone would allow min(2 x 6.4, 12.8) / (2/6) = 38.4)
    assert dram_bandwidth_gbs(m, 6, "close", "local") == pytest.approx(19.2)
    assert dram_bandwidth_gbs(m, 6, "close", "interleave") == pytest.approx(25.6)  # min(6 x 6.4, 2 x 12.8)
    assert dram_latency_ns(m, 6, "close", "master") == 160.0
    # a socket bandwidth above the equal share: interleave is held to the all-core figure
    wide = toy(socket_bw=20.0)
    assert dram_bandwidth_gbs(wide, 8, "close", "interleave") == pytest.approx(25.6)  # min(51.2, 40, 25.6)
    assert dram_bandwidth_gbs(wide, 8, "close", "master") == pytest.approx(20.0)
    # no remote figure: remote costs what local does
    assert dram_latency_ns(toy(remote=0.0), 4, "spread", "master") == 100.0


def _region(machine: Machine, cores: int, **kw):
    """Every access from DRAM: 1000 loads of 8 B, 64 kB of DRAM traffic named explicitly."""
    none = {"L1": 0.0, "L2": 0.0, "L3": 0.0}
    return rm.predict_runtime(machine, cores, none, rm.OpCounts(load=1000), mem_accesses=1000, mem_bytes=8000,
                              dram_bytes=6.4e4, layout="contiguous", **kw)


def test_predictions_charge_the_latency_and_name_the_placement():
    m = toy()
    close = _region(m, 4, placement="close", numa_pages="master")
    spread = _region(m, 4, placement="spread", numa_pages="master")
    # Eq. 6 with every access served by RAM: delta = the DRAM latency in cycles (1 GHz)
    assert close.delta_avg_cycles == pytest.approx(100.0) and spread.delta_avg_cycles == pytest.approx(160.0)
    assert (spread.placement, spread.numa_pages, spread.dram_latency_ns) == ("spread", "master", 160.0)
    assert spread.t_dram_s == pytest.approx(6.4e4 / 12.8e9)
    local = _region(m, 4, placement="spread", numa_pages="local")
    assert local.dram_bandwidth_gbs == pytest.approx(25.6) and local.t_dram_s == pytest.approx(6.4e4 / 25.6e9)
    row = local.as_row()
    assert (row["placement"], row["numa_pages"], row["dram_latency_ns"]) == ("spread", "local", 100.0)
    with pytest.raises(InputError, match="numa pages 'nearest'"):
        _region(m, 4, numa_pages="nearest")


# --- the queuing network against Buzen's normalising constant -------------------------------------------------


def buzen_throughput(demands: list[float], think: float, population: int) -> float:
    """Independent oracle: X(N) = G(N-1) / G(N) of a closed product-form network (one delay station of `think`,
    queueing centres of `demands`), G by brute-force enumeration of every way the customers can be spread."""
    def g(n: int) -> float:
        total = 0.0
        for at_centres in product(range(n + 1), repeat=len(demands)):
            rest = n - sum(at_centres)
            if rest >= 0:
                total += think ** rest / math.factorial(rest) * math.prod(d ** k for d, k in zip(demands, at_centres))
        return total
    return g(population - 1) / g(population)


def test_queuing_per_socket_hand_computed():
    m = toy()
    k = memory_credits(m)
    assert k == 10
    lines, unloaded = 10.0, 1e-6                 # 640 B per core, 10 lines, 1 us unloaded
    service = 64 / 12.8e9                        # one socket's controller: 5 ns per line
    # master: one controller, 4 threads -> 40 customers
    think = k * unloaded / lines - service
    assert queuing_seconds(m, 4, unloaded, 640.0, "spread", "master") == pytest.approx(
        4 * lines / buzen_throughput([service], think, 4 * k))
    # local, spread: two independent networks of 2 threads, each at its own controller
    assert queuing_seconds(m, 4, unloaded, 640.0, "spread", "local") == pytest.approx(
        2 * lines / buzen_throughput([service], think, 2 * k))
    # interleave: every thread's lines half on each controller: two centres of demand S / 2
    think_i = k * unloaded / lines - service
    assert queuing_seconds(m, 2, unloaded, 640.0, "close", "interleave") == pytest.approx(
        2 * lines / buzen_throughput([service / 2, service / 2], think_i, 2 * k))
    # saturated: the roofline floor at the policy's bandwidth; interleaved, the 40 customers sometimes all wait at
    # one controller while the other idles: two balanced centres without think time give X = N / ((N + 1) D)
    for placement, policy in HAND:
        floor = 4 * 6.4e6 / (HAND[placement, policy][1] * 1e9) * (41 / 40 if policy == "interleave" else 1.0)
        assert queuing_seconds(m, 4, 1e-12, 6.4e6, placement, policy) == pytest.approx(floor, rel=2e-3)


# --- one socket: the model as it was ----------------------------------------------------------------------------


def test_one_socket_machine_is_unchanged_under_every_policy_and_placement():
    m = toy(sockets=1)
    k = 10
    for p in range(1, 9):
        expected_bw = min(p * 6.4, 25.6)                       # min(p x one-core, all-core)
        service = 64 / 25.6e9                                  # the all-core bandwidth serves
        think = k * 1e-6 / 10 - service
        expected_q = p * 10 / buzen_throughput([service], think, p * k) if p <= 2 else None
        for placement, policy in product(PLACEMENTS, POLICIES):
            assert dram_bandwidth_gbs(m, p, placement, policy) == pytest.approx(expected_bw, abs=0, rel=1e-15)
            assert dram_latency_ns(m, p, placement, policy) == 100.0
            if expected_q is not None:
                assert queuing_seconds(m, p, 1e-6, 640.0, placement, policy) == pytest.approx(expected_q)
            got = _region(m, p, placement=placement, numa_pages=policy, contention="queuing")
            base = _region(m, p, contention="queuing")
            assert got.runtime_s == base.runtime_s and got.delta_avg_cycles == 100.0


def test_one_socket_curve_is_read_at_p_under_every_policy():
    data = machines.machine_to_dict(machines.load_machine("haswell-i7-5960x"))
    data["curves"] = {"cores": [1, 2, 4, 8], "bandwidth_gbs": [15.0, 28.0, 48.0, 66.0], "source": "hand-made"}
    m = machines.validate_machine_dict(data, "curved")
    for placement, policy in product(PLACEMENTS, POLICIES):
        assert dram_bandwidth_gbs(m, 3, placement, policy) == 38.0           # (28 + 48) / 2, as before
        assert queuing_seconds(m, 4, 1e-12, 6.4e6, placement, policy) == pytest.approx(4 * 6.4e6 / 48e9, rel=1e-3)


def test_two_socket_curve_stands_for_one_controller():
    data = two_socket_dict()
    data["curves"] = {"cores": [1, 2, 4, 8], "bandwidth_gbs": [15.0, 28.0, 48.0, 66.0], "source": "hand-made"}
    m = machines.validate_machine_dict(data, "curved")
    # master: the 8 threads draw from socket 0's controller, the curve read at one socket's 4 cores
    assert dram_bandwidth_gbs(m, 8, "close", "master") == 48.0
    # local, spread over 4 threads: two per socket, each controller the curve at 2 -> 2 x 28
    assert dram_bandwidth_gbs(m, 4, "spread", "local") == 56.0
    # interleave at 6 threads: 3 threads' worth on each controller -> 2 x 38
    assert dram_bandwidth_gbs(m, 6, "close", "interleave") == 76.0


# --- the command line -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["predict", "t.trace", "--machine", "m"], ["run", "x.c"], ["suite"],
                                     ["measure", "-o", "out"]])
def test_every_predicting_command_takes_numa_pages(command):
    args = cli.build_parser().parse_args([*command, "--numa-pages", "interleave", "--placement", "spread"])
    options = model_options(args)
    assert (options.numa_pages, options.placement) == ("interleave", "spread")
    assert options.runtime_args()["numa_pages"] == "interleave" and "numa-pages=interleave" in options.describe()
    assert model_options(cli.build_parser().parse_args(command)).numa_pages == "master"


def test_a_bad_numa_pages_value_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["predict", "t.trace", "--machine", "m", "--numa-pages", "nearest"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "--numa-pages" in err and "'nearest'" in err and "master" in err
    with pytest.raises(InputError, match="--numa-pages 'nearest': use one of master, interleave, local"):
        ModelOptions(numa_pages="nearest")
