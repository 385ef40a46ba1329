"""Machine files: every shipped file loads and round-trips; every validation error names its field and file."""
from __future__ import annotations

import copy
import json
import tomllib

import pytest

import machines
from machines.loader import dumps_toml
from machines.model import OP_CLASSES
from pptmc import cli
from common.errors import InputError

SHIPPED = ["broadwell-2s-e5-2699v4", "broadwell-e5-2699v4", "haswell-i7-5960x", "zen2-epyc-7702p"]


def test_list_machines_names_the_shipped_machines():
    assert machines.list_machines() == SHIPPED


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_file_loads_and_round_trips(name):
    m = machines.load_machine(name)
    assert [c.name for c in m.caches] == ["L1", "L2", "L3"]
    assert set(m.ops) == set(OP_CLASSES)
    assert [c.shared for c in m.caches] == [False, False, True]
    assert all(m.sources.get(path) for path in ["", "ram", *(f"caches[{i}]" for i in range(3)),
                                                 *(f"ops.{op}" for op in OP_CLASSES)])
    data = machines.machine_to_dict(m)
    assert machines.validate_machine_dict(data, "roundtrip") == m
    assert machines.validate_machine_dict(tomllib.loads(dumps_toml(data)), "toml") == m


def test_table5_figures():
    """Cores, clocks and per-instance cache sizes of the paper's Table 5 (EPYC: per core / per CCX)."""
    got = {n: (m.cores, m.frequency_ghz, [c.size_bytes // 1024 for c in m.caches])
           for n in SHIPPED if n != "broadwell-2s-e5-2699v4" for m in [machines.load_machine(n)]}
    assert got == {"haswell-i7-5960x": (8, 3.0, [32, 256, 20 * 1024]),
                   "broadwell-e5-2699v4": (22, 2.2, [32, 256, 55 * 1024]),
                   "zen2-epyc-7702p": (64, 2.0, [32, 512, 16 * 1024])}


def _base() -> dict:
    return machines.machine_to_dict(machines.load_machine("haswell-i7-5960x"))


def _del(path):
    def edit(d):
        *parents, last = path
        for p in parents:
            d = d[p]
        del d[last]
    return edit


def _set(path, value):
    def edit(d):
        *parents, last = path
        for p in parents:
            d = d[p]
        d[last] = value
    return edit


BAD = [
    (_del(["caches", 2, "associativity"]), "caches[2].associativity: missing"),
    (_del(["ram", "latency_ns"]), "ram.latency_ns: missing"),
    (_del(["ops", "fp_fma"]), "ops.fp_fma: missing"),
    (_del(["ram"]), "ram: missing"),
    (_set(["cores"], "8"), "cores: expected an integer"),
    (_set(["cores"], True), "cores: expected an integer"),
    (_set(["caches", 1, "shared"], 1), "caches[1].shared: expected true or false"),
    (_set(["frequency_ghz"], "fast"), "frequency_ghz: expected a number"),
    (_set(["caches", 0, "size_bytes"], -32768), "caches[0].size_bytes: must be positive"),
    (_set(["ops", "int_add", "latency"], -1), "ops.int_add.latency: must be positive"),
    (_set(["caches", 0, "line_bytes"], 48), "caches[0].line_bytes: must be a power of two"),
    (_set(["caches", 0, "associativity"], 7), "caches[0].associativity"),
    (_set(["caches", 0, "size_bytes"], 1000), "caches[0].size_bytes: 1000 is not a multiple"),
    (_set(["ops", "int_pow"], {"latency": 1, "recip_throughput": 1, "source": "x"}),
     "ops.int_pow: unknown operation class"),
    (_set(["caches", 1, "latncy_cycles"], 3), "caches[1].latncy_cycles: unknown field"),
    (_set(["caches", 1, "name"], "L1"), "level name 'L1' appears more than once"),
    (_set(["caches"], []), "caches: expected a non-empty array"),
    (_set(["ram", "bandwidth_one_core_gbs"], 500.0), "ram.bandwidth_one_core_gbs: 500.0 exceeds"),
    (_set(["schema_version"], 2), "schema_version: unsupported value 2"),
    (_del(["schema_version"]), "schema_version: missing"),
]


@pytest.mark.parametrize("edit,message", BAD, ids=[m for _, m in BAD])
def test_validation_error_names_field_and_source(edit, message):
    data = copy.deepcopy(_base())
    edit(data)
    with pytest.raises(InputError) as exc:
        machines.validate_machine_dict(data, "bad.toml")
    assert message in str(exc.value)
    assert str(exc.value).startswith("bad.toml: ")


def test_all_errors_reported_together():
    data = _base()
    del data["caches"][2]["associativity"]
    data["cores"] = -1
    with pytest.raises(InputError) as exc:
        machines.validate_machine_dict(data, "x")
    assert "caches[2].associativity: missing" in str(exc.value) and "cores: must be positive" in str(exc.value)


def test_load_bad_file_names_the_file(tmp_path):
    data = _base()
    del data["caches"][2]["associativity"]
    path = tmp_path / "broken.toml"
    path.write_text(dumps_toml(data))
    with pytest.raises(InputError, match=r"broken\.toml: .*caches\[2\]\.associativity: missing"):
        machines.load_machine(path)
    with pytest.raises(InputError, match=r"broken\.toml: .*caches\[2\]\.associativity: missing"):
        cli.run(["machines", "validate", str(path)])


def test_syntax_error_and_unknown_name(tmp_path):
    path = tmp_path / "syntax.toml"
    path.write_text("cores = = 3\n")
    with pytest.raises(InputError, match=r"syntax\.toml: not valid TOML"):
        machines.load_machine(path)
    with pytest.raises(InputError, match="unknown machine 'pentium'.*haswell-i7-5960x"):
        machines.load_machine("pentium")
    with pytest.raises(InputError, match="not found"):
        machines.load_machine(tmp_path / "missing.toml")


def test_cli_list_show_validate(capsys, tmp_path):
    assert cli.run(["machines", "list"]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in SHIPPED)
    assert cli.run(["machines", "show", "zen2-epyc-7702p", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown == machines.machine_to_dict(machines.load_machine("zen2-epyc-7702p"))
    assert cli.run(["machines", "show", "broadwell-e5-2699v4"]) == 0
    out = capsys.readouterr().out
    assert "L3: 56320 KiB" in out and "sockets (" not in out and "another socket" not in out  # one socket
    assert cli.run(["machines", "show", "broadwell-2s-e5-2699v4"]) == 0  # the file's figures, by hand
    out = capsys.readouterr().out
    assert "cores 44 on 2 sockets (22 each)" in out
    assert "145.5 ns from another socket" in out and "76.8 GB/s one socket" in out
    good = tmp_path / "good.toml"
    good.write_text(dumps_toml(_base()))
    assert cli.run(["machines", "validate", str(good)]) == 0
    assert "valid machine file" in capsys.readouterr().out
    full = tmp_path / "full.toml"  # the optional tables are shown too
    full.write_text(dumps_toml({**_base(), "tlbs": _tlbs(),
                                "coherence": {"transfer_cycles": 20.0, "upgrade_cycles": 23.0, "source": "t"},
                                "core": {"store_new_line_cycles": 1.0, "source": "s"}}))
    assert cli.run(["machines", "show", str(full)]) == 0
    out = capsys.readouterr().out
    assert "DTLB: 64 entries of 4 KiB pages, 4-way, miss +0.5 cyc" in out and "STLB: 2048" in out
    assert "coherence: line from another core's cache 20 cyc, store to a line another core holds 23 cyc" in out
    assert "store to a new line 1 cyc" in out


def test_parallel_table_is_optional_and_round_trips():
    """Absent [parallel]: no overhead (0 ns); present: read, sourced, and written back."""
    assert machines.load_machine("haswell-i7-5960x").parallel == machines.Parallel(0.0, 0.0)
    data = _base()
    data["parallel"] = {"fork_join_ns": 1500.0, "barrier_ns": 600, "source": "overhead.c"}
    m = machines.validate_machine_dict(data, "p.toml")
    assert (m.parallel.fork_join_ns, m.parallel.barrier_ns) == (1500.0, 600.0)
    assert m.sources["parallel"] == "overhead.c"
    assert machines.validate_machine_dict(tomllib.loads(dumps_toml(machines.machine_to_dict(m))), "t") == m
    data["parallel"].update(cold_start_ns=30000.0, cold_start_one_ns=18000.0)
    m = machines.validate_machine_dict(data, "p.toml")
    assert (m.parallel.cold_start_ns, m.parallel.cold_start_one_ns) == (30000.0, 18000.0)
    assert machines.validate_machine_dict(tomllib.loads(dumps_toml(machines.machine_to_dict(m))), "t") == m


@pytest.mark.parametrize("edit,message", [
    ({"fork_join_ns": -1.0, "barrier_ns": 1.0, "source": "x"}, "parallel.fork_join_ns: must not be negative"),
    ({"fork_join_ns": 1.0, "barrier_ns": 1.0, "cold_start_ns": 5.0, "source": "x"},
     "parallel: give both cold_start_ns and cold_start_one_ns"),
    ({"fork_join_ns": 1.0, "barrier_ns": 1.0, "cold_start_ns": "a", "cold_start_one_ns": 1, "source": "x"},
     "parallel.cold_start_ns: expected"),
    ({"fork_join_ns": 1.0, "source": "x"}, "parallel.barrier_ns: missing"),
    ({"fork_join_ns": 1.0, "barrier_ns": 1.0, "source": "x", "spin": 3}, "parallel.spin: unknown field"),
    ({"fork_join_ns": 1.0, "barrier_ns": 1.0}, "parallel.source: missing"),
])
def test_parallel_table_errors_name_the_field(edit, message):
    data = _base()
    data["parallel"] = edit
    with pytest.raises(InputError, match=message.replace(".", r"\.")):
        machines.validate_machine_dict(data, "bad.toml")


def test_calls_table_is_optional_and_round_trips():
    """[calls.<function>]: cost of a C library call; absent on the shipped files, kept with its source."""
    assert machines.load_machine("haswell-i7-5960x").calls == {}
    data = _base()
    data["calls"] = {"exp": {"latency": 40.0, "recip_throughput": 12.5, "source": "libm.c"}}
    m = machines.validate_machine_dict(data, "c.toml")
    assert m.calls["exp"].recip_throughput == 12.5 and m.sources["calls.exp"] == "libm.c"
    assert machines.validate_machine_dict(tomllib.loads(dumps_toml(machines.machine_to_dict(m))), "t") == m


@pytest.mark.parametrize("entry,message", [
    ({"latency": 40.0, "source": "x"}, "calls.exp.recip_throughput: missing"),
    ({"latency": 40.0, "recip_throughput": 0, "source": "x"}, "calls.exp.recip_throughput"),
    ({"latency": 40.0, "recip_throughput": 9.0}, "calls.exp.source: missing"),
])
def test_calls_table_errors_name_the_field(entry, message):
    data = _base()
    data["calls"] = {"exp": entry}
    with pytest.raises(InputError, match=message.replace(".", r"\.")):
        machines.validate_machine_dict(data, "bad.toml")


def _tlbs() -> list[dict]:
    return [{"name": "DTLB", "entries": 64, "associativity": 4, "page_bytes": 4096, "miss_cycles": 0.5,
             "source": "tlb.c"},
            {"name": "STLB", "entries": 2048, "associativity": 0, "fully_associative": True, "page_bytes": 4096,
             "miss_cycles": 24.0,
             "source": "tlb.c"}]


def test_tlbs_are_optional_and_round_trip():
    assert machines.load_machine("haswell-i7-5960x").tlbs == ()
    data = _base()
    data["tlbs"] = _tlbs()
    m = machines.validate_machine_dict(data, "t.toml")
    assert [(t.name, t.entries, t.associativity, t.miss_cycles) for t in m.tlbs] == [
        ("DTLB", 64, 4, 0.5), ("STLB", 2048, 0, 24.0)]
    assert m.sources["tlbs[1]"] == "tlb.c"
    assert machines.validate_machine_dict(tomllib.loads(dumps_toml(machines.machine_to_dict(m))), "t") == m


TLB_BAD = [
    (lambda t: t[0].pop("entries"), "tlbs[0].entries: missing"),
    (lambda t: t[1].update(page_bytes=5000), "tlbs[1].page_bytes: must be a power of two"),
    (lambda t: t[0].update(associativity=5), "tlbs[0].associativity: 64 entries do not divide into 5 ways"),
    (lambda t: t[1].update(miss_cycles=-1), "tlbs[1].miss_cycles: must not be negative"),
    (lambda t: t[1].update(name="DTLB"), "level name 'DTLB' appears more than once"),
    (lambda t: t[0].update(ways=4), "tlbs[0].ways: unknown field"),
]


@pytest.mark.parametrize("edit,message", TLB_BAD, ids=[m for _, m in TLB_BAD])
def test_tlb_errors_name_the_field(edit, message):
    data = _base()
    data["tlbs"] = _tlbs()
    edit(data["tlbs"])
    with pytest.raises(InputError, match=message.replace(".", r"\.").replace("[", r"\[").replace("]", r"\]")):
        machines.validate_machine_dict(data, "bad.toml")


OPTIONAL_FIGURES = [  # table, its content, Machine attribute, a bad content and the error it must give
    ("core", {"reorder_window_ops": 240, "source": "window.c"}, "reorder_window_ops",
     {"reorder_window_ops": -3, "source": "x"}, r"core\.reorder_window_ops: must be positive"),
    ("core", {"store_new_line_cycles": 1.03, "source": "stores.c"}, "store_new_line_cycles",
     {"store_new_line_cycles": 0, "source": "x"}, r"core\.store_new_line_cycles: must be positive"),
    ("core", {"reorder_window_ops": 240, "source": "window.c"}, "reorder_window_ops",
     {"source": "x"}, "core: needs at least one of"),
    ("core", {"chain_lookahead_ops": 290, "source": "window.c"}, "chain_lookahead_ops",
     {"chain_lookahead_ops": "many", "source": "x"}, r"core\.chain_lookahead_ops: "),
    ("coherence", {"transfer_cycles": 17.5, "source": "transfer.c"}, "transfer_cycles",
     {"transfer_cycle": 3, "source": "x"}, r"coherence\.transfer_cycle: unknown field"),
    ("coherence", {"transfer_cycles": 17.5, "upgrade_cycles": 23.4, "source": "transfer.c"}, "upgrade_cycles",
     {"transfer_cycles": 17.5, "upgrade_cycles": -1, "source": "x"}, r"coherence\.upgrade_cycles: must not be negative"),
]


@pytest.mark.parametrize("table,content,attr,bad,message", OPTIONAL_FIGURES,
                         ids=[f"{t[0]}.{t[2]}:{t[4][:12]}" for t in OPTIONAL_FIGURES])
def test_optional_core_and_coherence_figures_round_trip_and_are_checked(table, content, attr, bad, message):
    assert getattr(machines.load_machine("zen2-epyc-7702p"), attr) == 0.0  # absent: 0, the paper's model
    data = _base()
    data[table] = content
    m = machines.validate_machine_dict(data, "ok.toml")
    assert getattr(m, attr) == pytest.approx(content[attr]) and m.sources[table] == content["source"]
    assert machines.validate_machine_dict(tomllib.loads(dumps_toml(machines.machine_to_dict(m))), "t") == m
    data[table] = bad
    with pytest.raises(InputError, match=message):
        machines.validate_machine_dict(data, "bad.toml")


def test_strided_cold_line_costs_round_trip_and_need_one_figure_per_set_count():
    """Haswell's L1: 32 KiB, 8 ways, 64-byte lines = 64 sets, so 7 figures (1, 2, .., 64 sets)."""
    data = _base()
    data["ram"]["strided_cold_line_ns"] = [9.4, 9.2, 11.2, 12.8, 13.5, 10.4, 7.6]
    m = machines.validate_machine_dict(data, "t")
    assert m.ram.strided_cold_line_ns == (9.4, 9.2, 11.2, 12.8, 13.5, 10.4, 7.6)
    assert machines.validate_machine_dict(tomllib.loads(dumps_toml(machines.machine_to_dict(m))), "t") == m
    data["ram"]["strided_cold_line_ns"] = [9.4, 9.2]
    with pytest.raises(InputError, match=r"ram\.strided_cold_line_ns: has 2 figures; L1 has 64 sets, so it needs 7"):
        machines.validate_machine_dict(data, "t")
    data["ram"]["strided_cold_line_ns"] = [9.4, "fast", 11.2, 12.8, 13.5, 10.4, 7.6]
    with pytest.raises(InputError, match=r"ram\.strided_cold_line_ns\[1\]: must be a positive number"):
        machines.validate_machine_dict(data, "t")


def test_tlb_update_cost_is_optional_round_trips_and_is_checked():
    data = _base()
    data["tlbs"] = _tlbs()
    assert machines.validate_machine_dict(data, "t").tlbs[0].rmw_miss_cycles == 0.0
    data["tlbs"][0]["rmw_miss_cycles"] = 1.38
    m = machines.validate_machine_dict(data, "t")
    assert m.tlbs[0].rmw_miss_cycles == 1.38
    assert machines.validate_machine_dict(tomllib.loads(dumps_toml(machines.machine_to_dict(m))), "t") == m
    data["tlbs"][0]["rmw_miss_cycles"] = -1
    with pytest.raises(InputError, match=r"tlbs\[0\]\.rmw_miss_cycles: must not be negative"):
        machines.validate_machine_dict(data, "t")
