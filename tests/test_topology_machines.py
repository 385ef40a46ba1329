"""Machine files describe which cores share one instance of a cache level (`cores_per_instance`): loading,
refusing impossible groupings, writing them back, the shipped topologies, and host detection from sysfs."""
from __future__ import annotations

import tomllib

import pytest

import machines
from common.errors import InputError
from machines import detect
from machines.loader import dumps_toml
from machines.warnings import machine_warnings


def edited(name: str, level: int, **fields) -> dict:
    """A shipped machine's dict with fields of one cache level replaced."""
    data = machines.machine_to_dict(machines.load_machine(name))
    data["caches"][level].update(fields)
    return data


def round_trips(m: machines.Machine) -> bool:
    data = machines.machine_to_dict(m)
    return (machines.validate_machine_dict(data, "dict") == m
            and machines.validate_machine_dict(tomllib.loads(dumps_toml(data)), "toml") == m)


def test_zen2_l3_is_one_16_mib_instance_per_4_core_ccx_and_round_trips():
    m = machines.load_machine("zen2-epyc-7702p")
    l3 = m.caches[2]
    assert (l3.size_bytes, l3.shared, l3.cores_per_instance, l3.instance_cores(m.cores)) == (16 << 20, True, 4, 4)
    assert m.cores // l3.instance_cores(m.cores) == 16  # the chip's 256 MB: 16 CCXs
    assert "4 cores" in m.sources["caches[2]"]
    assert [c.instance_cores(m.cores) for c in m.caches[:2]] == [1, 1]
    assert machines.machine_to_dict(m)["caches"][2]["cores_per_instance"] == 4
    assert round_trips(m)


def test_two_socket_broadwell_has_one_l3_per_socket():
    m = machines.load_machine("broadwell-2s-e5-2699v4")
    one = machines.load_machine("broadwell-e5-2699v4")
    assert m.cores == 2 * one.cores == 44
    assert m.caches[2].instance_cores(m.cores) == 22 and m.caches[2].size_bytes == one.caches[2].size_bytes
    assert m.ram.bandwidth_all_cores_gbs == 2 * one.ram.bandwidth_all_cores_gbs
    assert m.ops == one.ops and m.caches[:2] == one.caches[:2]  # the same part: per-core figures copied
    assert all(m.sources.values()) and machine_warnings(m) == []
    assert round_trips(m)


def test_an_absent_grouping_is_not_written_back():
    m = machines.load_machine("haswell-i7-5960x")
    assert all(c.cores_per_instance == 0 for c in m.caches)
    assert all("cores_per_instance" not in c for c in machines.machine_to_dict(m)["caches"])
    # given as every core, it is kept as given (and still means one instance for all)
    m8 = machines.validate_machine_dict(edited("haswell-i7-5960x", 2, cores_per_instance=8), "all.toml")
    assert m8.caches[2].cores_per_instance == 8 and round_trips(m8)
    private = machines.validate_machine_dict(edited("haswell-i7-5960x", 1, cores_per_instance=1), "one.toml")
    assert private.caches[1].instance_cores(8) == 1 and round_trips(private)


@pytest.mark.parametrize("fields,message", [
    ({"cores_per_instance": 3}, "caches[2].cores_per_instance: 3 does not divide the machine's 8 cores"),
    ({"cores_per_instance": 0}, "caches[2].cores_per_instance: must be positive"),
    ({"cores_per_instance": 2.0}, "caches[2].cores_per_instance: expected an integer"),
    ({"cores_per_instance": 1}, "caches[2].cores_per_instance: 1 core per instance describes a private level"),
    ({"cores_per_instance": 2, "shared": False}, "caches[2].cores_per_instance: 2 cores share one instance, but "
                                                 "shared = false"),
])
def test_impossible_groupings_are_refused_naming_the_field(fields, message):
    with pytest.raises(InputError) as err:
        machines.validate_machine_dict(edited("haswell-i7-5960x", 2, **fields), "bad.toml")
    assert message in str(err.value) and str(err.value).startswith("bad.toml")


def test_a_private_level_may_only_say_one_core():
    with pytest.raises(InputError, match=r"caches\[0\].cores_per_instance: 4 cores share one instance"):
        machines.validate_machine_dict(edited("zen2-epyc-7702p", 0, cores_per_instance=4), "bad.toml")


def test_groups_that_do_not_nest_are_warned_about():
    """An L2 shared by 8 cores over an L3 per 4: each L3 group does not hold whole L2 groups."""
    data = edited("zen2-epyc-7702p", 1, shared=True, cores_per_instance=8)
    warnings = machine_warnings(machines.validate_machine_dict(data, "odd.toml"))
    assert any(w.startswith("caches[2].cores_per_instance: L3 is shared by groups of 4 cores") for w in warnings)


def fake_host(root, packages: int, cores_per_package: int, l3_cores: int):
    """A sysfs tree: 2 hyperthreads per core (cpu n and n + cores), private L1, an L3 per `l3_cores` cores of a
    package. Returns cpu0's directory."""
    cores = packages * cores_per_package
    for cpu in range(2 * cores):
        core = cpu % cores
        topo = root / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        for name, value in (("physical_package_id", core // cores_per_package),
                            ("core_id", core % cores_per_package), ("thread_siblings_list", f"{core},{core + cores}")):
            (topo / name).write_text(f"{value}\n")
    first = range(0, l3_cores)
    l3_list = ",".join(f"{c},{c + cores}" for c in first)
    for i, (level, size, ways, shared) in enumerate([(1, "32K", 8, f"0,{cores}"), (3, "16384K", 16, l3_list)]):
        d = root / "cpu0" / "cache" / f"index{i}"
        d.mkdir(parents=True)
        for name, value in (("level", level), ("type", "Unified"), ("size", size), ("coherency_line_size", 64),
                            ("ways_of_associativity", ways), ("shared_cpu_list", shared)):
            (d / name).write_text(f"{value}\n")
    return root / "cpu0"


@pytest.mark.parametrize("packages,per_package,l3_cores", [(1, 8, 4), (2, 6, 6), (1, 4, 4)])
def test_detect_counts_the_physical_cores_sharing_a_level(tmp_path, packages, per_package, l3_cores):
    """sysfs shared_cpu_list names CPUs: hyperthreads fold into their core; a level all cores share gets no
    cores_per_instance, one shared by a group does."""
    l1, l3 = detect.sysfs_caches(fake_host(tmp_path, packages, per_package, l3_cores))
    assert (l1.shared, l1.cores_sharing) == (False, 0)
    assert (l3.shared, l3.cores_sharing) == (True, l3_cores)
    cores = packages * per_package
    entry, _ = detect.instance_grouping(l3, cores)
    assert entry == ({} if l3_cores == cores else {"cores_per_instance": l3_cores})
    assert detect.instance_grouping(l1, cores) == ({}, "")


def test_detect_writes_no_grouping_that_does_not_divide_the_cores():
    """A process allowed on 6 cores of a chip with an L3 per 4 cannot describe its groups: shared by all, said so."""
    l3 = detect.SysCache(3, 16 << 20, 64, 16, True, cores_sharing=4)
    entry, note = detect.instance_grouping(l3, 6)
    assert entry == {} and "does not divide the 6 cores" in note


def test_lscpu_fallback_reads_an_l3_per_ccx():
    """64 cores, 16 x 16 MiB of L3: one instance per 4 cores (shared), and 64 x 512 KiB of L2: private."""
    text = ("NAME ONE-SIZE ALL-SIZE WAYS TYPE LEVEL SETS PHY-LINE COHERENCY-SIZE\n"
            "L2 524288 33554432 8 Unified 2 1024 1 64\n"
            "L3 16777216 268435456 16 Unified 3 16384 1 64\n")
    l2, l3 = detect.lscpu_caches(text, cores=64)
    assert (l2.shared, l2.cores_sharing) == (False, 0)
    assert (l3.shared, l3.cores_sharing) == (True, 4)
