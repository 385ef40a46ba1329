"""Machine files that would validate but give wrong numbers (issue #28): non-finite figures, 0 ways without
`fully_associative`, private caches whose sets are not a power of two are refused; shrinking levels and
absurd sizes are warned about. Every message names the field."""
from __future__ import annotations

import copy
import tomllib

import pytest

import machines
from common.errors import InputError
from machines.warnings import machine_warnings
from machines.loader import dumps_toml

KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


def _base() -> dict:
    """The haswell machine as a dict, with a two-level TLB, to edit into a faulty file."""
    data = machines.machine_to_dict(machines.load_machine("haswell-i7-5960x"))
    data["tlbs"] = [{"name": "DTLB", "entries": 64, "associativity": 4, "page_bytes": 4096, "miss_cycles": 0.5,
                     "source": "test"},
                    {"name": "STLB", "entries": 1024, "associativity": 8, "page_bytes": 4096, "miss_cycles": 20.0,
                     "source": "test"}]
    return data


def _edited(table: str, index: int | None, key: str, value) -> dict:
    """The base dict with one field set; `index` picks an entry of an array of tables."""
    data = copy.deepcopy(_base())
    target = data[table] if index is None else data[table][index]
    target[key] = value
    return data


def _refused(data: dict) -> str:
    """The InputError message of a faulty machine dict."""
    with pytest.raises(InputError) as exc:
        machines.validate_machine_dict(data, "bad.toml")
    return str(exc.value)


NON_FINITE = [("ram", None, "latency_ns", float("inf"), "ram.latency_ns: inf is not a finite number"),
              ("ram", None, "bandwidth_one_core_gbs", float("-inf"), "ram.bandwidth_one_core_gbs: -inf is not"),
              ("caches", 0, "latency_cycles", float("nan"), "caches[0].latency_cycles: nan is not a finite number"),
              ("caches", 2, "recip_throughput_cycles", float("inf"), "caches[2].recip_throughput_cycles: inf is"),
              ("ops", None, "fp_add", {"latency": float("nan"), "recip_throughput": 1, "source": "x"},
               "ops.fp_add.latency: nan is not a finite number"),
              ("tlbs", 1, "miss_cycles", float("inf"), "tlbs[1].miss_cycles: inf is not a finite number"),
              ("ram", None, "strided_cold_line_ns", [1.0] * 6 + [float("inf")],
               "ram.strided_cold_line_ns[6]: inf is not a finite number")]


@pytest.mark.parametrize("table,index,key,value,message", NON_FINITE, ids=[m for *_, m in NON_FINITE])
def test_non_finite_figures_are_refused_naming_the_field(table, index, key, value, message):
    assert message in _refused(_edited(table, index, key, value))


def test_inf_and_nan_written_in_toml_are_refused(tmp_path):
    """TOML itself allows inf and nan: the file path's message names the field."""
    text = dumps_toml(machines.machine_to_dict(machines.load_machine("haswell-i7-5960x")))
    path = tmp_path / "inf.toml"
    path.write_text(text.replace("latency_ns = 70.0", "latency_ns = inf").replace("frequency_ghz = 3.0",
                                                                                  "frequency_ghz = nan"))
    with pytest.raises(InputError) as exc:
        machines.load_machine(path)
    assert "ram.latency_ns: inf is not a finite number" in str(exc.value)
    assert "frequency_ghz: nan is not a finite number" in str(exc.value)


@pytest.mark.parametrize("table,index", [("caches", 2), ("tlbs", 1)])
def test_zero_ways_without_the_flag_are_refused(table, index):
    message = _refused(_edited(table, index, "associativity", 0))
    assert f"{table}[{index}].associativity: 0 ways" in message and "fully_associative = true" in message


@pytest.mark.parametrize("table,index,count", [("caches", 0, 32 * KIB // 64), ("tlbs", 1, 1024)])
def test_fully_associative_levels_load_as_zero_ways_and_round_trip(table, index, count):
    """0 or the number of lines (entries) with the flag: the models see 0 ways, as before."""
    for ways in (0, count):
        data = _edited(table, index, "associativity", ways)
        data[table][index]["fully_associative"] = True
        m = machines.validate_machine_dict(data, "fa.toml")
        level = getattr(m, table)[index]
        assert level.associativity == 0 and level.fully_associative
        assert machines.machine_to_dict(m)[table][index]["fully_associative"] is True
        assert machines.validate_machine_dict(tomllib.loads(dumps_toml(machines.machine_to_dict(m))), "t") == m
    assert table != "caches" or m.caches[0].sets == 1


@pytest.mark.parametrize("flag,message", [(True, "caches[0].associativity: fully_associative = true needs 0 or "
                                                  "the number of lines (512), got 8"),
                                          ("yes", "caches[0].fully_associative: expected true or false")])
def test_bad_fully_associative_flag_is_refused(flag, message):
    assert message in _refused(_edited("caches", 0, "fully_associative", flag))


def test_private_cache_sets_must_be_a_power_of_two():
    """384 KiB in 64 B lines, 8 ways: 768 sets, which address bits cannot index."""
    message = _refused(_edited("caches", 1, "size_bytes", 384 * KIB))
    assert "caches[1].size_bytes: 393216 B in 64 B lines and 8 ways (associativity) make 768 sets" in message
    assert "change size_bytes or associativity" in message


def test_shared_last_level_may_have_any_set_count():
    """A sliced, hashed last level: 30 MiB in 20 ways is 24576 sets; the same level private is refused."""
    data = _edited("caches", 2, "size_bytes", 30 * MIB)
    assert machines.validate_machine_dict(data, "ok.toml").caches[2].sets == 24576
    data["caches"][2]["shared"] = False
    assert "caches[2].size_bytes" in _refused(data)


def test_l3_smaller_than_l2_is_warned_about():
    m = machines.validate_machine_dict(_edited("caches", 2, "size_bytes", 160 * KIB), "small.toml")
    warnings = machine_warnings(m)
    assert len(warnings) == 1
    assert warnings[0].startswith("caches[2].size_bytes: L3 (160 KiB) is smaller than L2 above it (256 KiB)")


def test_stlb_smaller_than_dtlb_is_warned_about():
    m = machines.validate_machine_dict(_edited("tlbs", 1, "entries", 32), "small.toml")
    assert [w.split(":")[0] for w in machine_warnings(m)] == ["tlbs[1].entries"]


def test_one_gib_l1_is_warned_about():
    m = machines.validate_machine_dict(_edited("caches", 0, "size_bytes", GIB), "huge.toml")
    warnings = machine_warnings(m)
    assert any(w.startswith("caches[0].size_bytes: L1 of 1 GiB is larger than a first-level cache") for w in warnings)
    assert any(w.startswith("caches[1].size_bytes: L2 (256 KiB) is smaller than L1") for w in warnings)


@pytest.mark.parametrize("name", machines.list_machines())
def test_shipped_machines_load_without_warnings(name):
    assert machine_warnings(machines.load_machine(name)) == []
