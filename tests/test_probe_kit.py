"""Probe kits (issue #31): build one here, run it with nothing but Python 3's standard library (`env -i`), ingest
its results into a machine file and compare its native times with predictions; and every bad input refused
with nothing written that looks complete. Expectations come from the host itself (sysfs, /proc/cpuinfo,
clang's libomp) and from the files the kit recorded, not from the code under test."""
from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import machines
from common.errors import InputError
from pptmc import cli
from pptmc.measure import add_speedups

SYSFS = Path("/sys/devices/system/cpu")
BENCH = "atax"


def host_cores() -> int:
    """Distinct (package, core) pairs among the CPUs this process may use, read from sysfs here."""
    pairs = set()
    for cpu in os.sched_getaffinity(0):
        topo = SYSFS / f"cpu{cpu}" / "topology"
        pairs.add(((topo / "physical_package_id").read_text().strip(), (topo / "core_id").read_text().strip()))
    return len(pairs)


def run_kit(kit: Path, *args: str) -> subprocess.CompletedProcess:
    """python3 KIT/run.py in an empty environment: no venv, no PYTHONPATH, no LD_LIBRARY_PATH."""
    return subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", "python3", str(kit / "run.py"), *args],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def kit_and_results(tmp_path_factory):
    """One kit (atax at MINI), run once on 1 and 2 threads with the quick microbenchmarks."""
    if host_cores() < 2:
        pytest.skip("the round trip runs 2 threads: needs 2 cores")
    root = tmp_path_factory.mktemp("kit")
    kit, results = root / "KIT", root / "RESULTS"
    assert cli.run(["machines", "probe-kit", "-o", str(kit), "--benchmarks", BENCH, "--size", "MINI"]) == 0
    proc = run_kit(kit, "-o", str(results), "--threads", "1,2", "--repeats", "2", "--quick")
    assert proc.returncode == 0, proc.stderr
    return kit, results, proc.stderr


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def test_kit_is_self_contained(kit_and_results):
    """libomp is clang-19's own, found by the kit's binaries; every file matches its recorded sha256; the runner
    and its plan import the standard library only."""
    kit, _, _ = kit_and_results
    clang_omp = subprocess.run(["clang-19", "-print-file-name=libomp.so"], capture_output=True, text=True).stdout
    libs = list((kit / "lib").iterdir())
    assert len(libs) == 1 and libs[0].read_bytes() == Path(clang_omp.strip()).resolve().read_bytes()
    ldd = subprocess.run(["ldd", str(kit / "bin" / "stream")], capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": str(kit / "lib")}).stdout
    assert f"=> {kit / 'lib' / libs[0].name}" in ldd
    manifest = _json(kit / "kit.json")
    on_disk = {p.relative_to(kit).as_posix() for p in kit.rglob("*") if p.is_file()} - {"kit.json"}
    assert set(manifest["files"]) == on_disk
    for rel, digest in manifest["files"].items():
        assert hashlib.sha256((kit / rel).read_bytes()).hexdigest() == digest, rel
    assert (kit / "bench" / f"{BENCH}-MINI").stat().st_mode & 0o111
    for script in ("run.py", "probeplan.py"):
        tree = ast.parse((kit / script).read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert imported - {"probeplan", "__future__"} <= sys.stdlib_module_names, (script, imported)


def test_results_record_kit_host_and_every_step(kit_and_results):
    kit, results, stderr = kit_and_results
    record = _json(results / "kit.json")
    assert record["complete"] is True and record["kit_version"] == _json(kit / "kit.json")["kit_version"]
    assert record["host"]["cores"] == host_cores()
    model = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
    if model:
        assert record["host"]["model_name"] == model.group(1).strip()
    assert record["threads"] == [1, 2] and record["effort"] == "quick"
    assert all(step["status"] == "ok" for step in record["steps"])
    for name, digest in record["files"].items():
        assert hashlib.sha256((results / name).read_bytes()).hexdigest() == digest
    probes = _json(results / "probes.json")
    stepped = {s["step"].removeprefix("probe ") for s in record["steps"] if s["step"].startswith("probe ")}
    assert stepped == set(probes) and {"ops", "chase.RAM", "stream", "tlb"} <= stepped
    samples = _json(results / "native.json")["samples"]
    assert set(samples) == {BENCH} and all(len(v) == 2 and min(v) > 0 for v in samples[BENCH].values())
    # a progress line per step: every probe step and every native round
    assert stderr.count("run.py: [") == len(record["steps"])
    assert not list(results.parent.glob(".RESULTS.partial-*"))


def test_ingest_writes_the_machine_the_kit_measured(kit_and_results, tmp_path):
    """The machine file has the host's cores and cache sizes (sysfs) and the figures the kit recorded."""
    _, results, _ = kit_and_results
    out = tmp_path / "probed.toml"
    assert cli.run(["machines", "ingest", str(results), "-o", str(out)]) == 0
    m = machines.load_machine(out)
    assert m.cores == host_cores()
    data = [d for d in (SYSFS / "cpu0" / "cache").glob("index*") if (d / "type").read_text().strip() != "Instruction"]
    sizes = sorted(int(re.match(r"(\d+)K", (d / "size").read_text()).group(1)) * 1024 for d in data)
    assert sorted(c.size_bytes for c in m.caches) == sizes
    probes = _json(results / "probes.json")
    assert m.frequency_ghz == pytest.approx(max(r["ghz"] for r in probes["ops"]), abs=1e-3)
    assert m.ram.latency_ns == pytest.approx(min(r["ns_per_load"] for r in probes["chase.RAM"]), abs=0.05)
    assert m.ram.bandwidth_one_core_gbs == pytest.approx(probes["stream"][0]["gbs_1"], abs=0.005)
    assert "probe kit" in m.description
    # the curves over active cores come through: one-core bandwidth = the median of the curve step's last 3 runs
    assert m.curves is not None and m.curves.cores[0] == 1 and m.curves.cores[-1] == host_cores()
    one_core = sorted(r["gbs_1"] for r in probes["curves.stream"][-3:])
    assert m.curves.figures["bandwidth_gbs"][0] == pytest.approx(one_core[1], rel=1e-3)


def test_measure_ingest_compares_the_kits_times_with_predictions(kit_and_results, tmp_path, capsys):
    _, results, _ = kit_and_results
    out = tmp_path / "measure"
    assert cli.run(["measure", "--ingest", str(results), "-o", str(out), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    rows = {r["cores"]: r for r in printed["rows"]}
    spreads = _json(out / "runtime_validation.json")["unsettled_curves"]
    assert printed["unsettled_curves"] == spreads and isinstance(spreads, list)
    samples = _json(results / "native.json")["samples"][BENCH]
    assert set(rows) == {1, 2}
    for t, row in rows.items():
        times = sorted(samples[str(t)])
        assert row["measured_s"] == pytest.approx((times[0] + times[1]) / 2)   # median of two runs
        assert row["predicted_s"] > 0 and row["error"] == ""
    median = {t: sum(samples[str(t)]) / 2 for t in (1, 2)}
    assert rows[2]["measured_speedup"] == pytest.approx(median[1] / median[2])
    assert rows[2]["predicted_speedup"] == pytest.approx(rows[1]["predicted_s"] / rows[2]["predicted_s"])
    assert (out / "runtime_speedup.png").read_bytes()[:4] == b"\x89PNG"
    table = pd.read_csv(out / "runtime_validation.csv")
    assert {"measured_speedup", "predicted_speedup", "speedup_error"} <= set(table.columns)


def test_speedups_hand_case():
    df = pd.DataFrame({"benchmark": ["a", "a", "a", "b"], "cores": [1, 2, 4, 2],
                       "measured_s": [1.0, 0.5, 0.4, 1.0], "predicted_s": [0.9, 0.3, 0.3, 1.0]})
    out = add_speedups(df)
    assert list(out["measured_speedup"][:3]) == pytest.approx([1.0, 2.0, 2.5])
    assert list(out["predicted_speedup"][:3]) == pytest.approx([1.0, 3.0, 3.0])
    assert list(out["speedup_error"][:3]) == pytest.approx([0.0, 0.5, 0.2])
    assert out["measured_speedup"].isna().iloc[3]   # b has no 1-thread row


def test_default_thread_counts(kit_and_results):
    """Powers of two up to the cores, and the core count itself."""
    kit, _, _ = kit_and_results
    code = "import run; print([run.thread_counts(None, c) for c in (1, 2, 12, 16)])"
    proc = subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", "python3", "-B", "-c", code], cwd=kit,
                          capture_output=True, text=True)
    assert proc.stdout.strip() == "[[1], [1, 2], [1, 2, 4, 8, 12], [1, 2, 4, 8, 16]]"


def _copy(results: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "RESULTS"
    shutil.copytree(results, copy)
    return copy


def _edit_record(path: Path, **fields) -> None:
    record = _json(path / "kit.json")
    record.update(fields)
    (path / "kit.json").write_text(json.dumps(record))


@pytest.mark.parametrize("damage,message", [
    ("version", r"kit\.json: kit_version is '0\.0\.0\+0000'.*pptmc machines probe-kit"),
    ("truncate-native", r"native\.json: missing, truncated or changed"),
    ("truncate-probes", r"probes\.json: missing, truncated or changed"),
    ("truncate-record", r"kit\.json: not valid JSON"),
    ("missing-facts", r"facts\.json: missing"),
    ("incomplete", r"kit\.json: complete is False"),
])
def test_bad_results_are_refused_and_nothing_is_written(kit_and_results, tmp_path, damage, message):
    _, results, _ = kit_and_results
    bad = _copy(results, tmp_path)
    if damage == "version":
        _edit_record(bad, kit_version="0.0.0+0000")
    elif damage.startswith("truncate"):
        name = {"native": "native.json", "probes": "probes.json", "record": "kit.json"}[damage.split("-")[1]]
        text = (bad / name).read_text()
        (bad / name).write_text(text[:len(text) // 2])
    elif damage == "missing-facts":
        (bad / "facts.json").unlink()
    else:
        _edit_record(bad, complete=False)
    out = tmp_path / "machine.toml"
    with pytest.raises(InputError, match=message):
        cli.run(["machines", "ingest", str(bad), "-o", str(out)])
    with pytest.raises(InputError, match=message):
        cli.run(["measure", "--ingest", str(bad), "-o", str(tmp_path / "m")])
    assert not out.exists() and not (tmp_path / "m" / "runtime_validation.csv").exists()


def test_more_threads_than_cores_is_refused_before_anything_runs(kit_and_results, tmp_path):
    kit, _, _ = kit_and_results
    proc = run_kit(kit, "-o", str(tmp_path / "R"), "--threads", "64", "--quick")
    assert proc.returncode == 2
    assert f"--threads 64: this machine has {host_cores()} cores" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_failing_step_leaves_no_results_folder(kit_and_results, tmp_path):
    """A microbenchmark that fails mid-run: no RESULTS, only a hidden partial folder that says it is
    incomplete, which ingest refuses."""
    kit, _, _ = kit_and_results
    broken = tmp_path / "KIT"
    shutil.copytree(kit, broken)
    chase = broken / "bin" / "chase"
    chase.write_text("#!/bin/sh\necho broken >&2\nexit 3\n")
    manifest = _json(broken / "kit.json")
    manifest["files"]["bin/chase"] = hashlib.sha256(chase.read_bytes()).hexdigest()
    (broken / "kit.json").write_text(json.dumps(manifest))
    proc = run_kit(broken, "-o", str(tmp_path / "R"), "--threads", "1", "--quick")
    assert proc.returncode == 2 and "chase" in proc.stderr and "broken" in proc.stderr
    assert not (tmp_path / "R").exists()
    partial, = tmp_path.glob(".R.partial-*")
    assert _json(partial / "kit.json")["complete"] is False
    with pytest.raises(InputError, match="complete is False"):
        cli.run(["machines", "ingest", str(partial), "-o", str(tmp_path / "m.toml")])


def test_a_damaged_kit_or_an_existing_results_folder_is_refused(kit_and_results, tmp_path):
    kit, results, _ = kit_and_results
    proc = run_kit(kit, "-o", str(results), "--quick")
    assert proc.returncode == 2 and "already exists" in proc.stderr
    broken = tmp_path / "KIT"
    shutil.copytree(kit, broken)
    ops = broken / "bin" / "ops"
    ops.write_bytes(ops.read_bytes()[:100])
    proc = run_kit(broken, "-o", str(tmp_path / "R"), "--quick")
    assert proc.returncode == 2 and f"{ops}: missing or different" in proc.stderr
    assert not (tmp_path / "R").exists()


def test_a_budget_stops_new_rounds_and_the_results_say_how_many_ran(kit_and_results, tmp_path):
    """--budget: the first round always runs; none starts after the budget; native.json records the rounds done
    and asked, and ingest reads the shorter samples. A budget that is no positive number is refused."""
    kit, _, _ = kit_and_results
    proc = run_kit(kit, "-o", str(tmp_path / "R"), "--threads", "1", "--repeats", "3", "--budget", "0.001",
                   "--quick")
    assert proc.returncode == 0, proc.stderr
    native = _json(tmp_path / "R" / "native.json")
    assert (native["repeats"], native["repeats_asked"]) == (1, 3)
    assert [len(times) for times in native["samples"][BENCH].values()] == [1]
    assert "stopping after 1 of 3 rounds" in proc.stderr
    proc = run_kit(kit, "-o", str(tmp_path / "S"), "--budget", "-1", "--quick")
    assert proc.returncode == 2 and "--budget -1: give a positive number" in proc.stderr
    assert not (tmp_path / "S").exists()


def test_the_kit_reads_caches_from_cpuid_where_sysfs_has_none(kit_and_results):
    """The kit's cpuid helper (for sandboxes such as gVisor, whose sysfs has no cache description) reports the
    geometry sysfs describes here: level, size, line and ways of every data or unified cache."""
    kit, _, _ = kit_and_results
    from machines import probeplan

    sysfs = probeplan.sysfs_caches()
    if not sysfs:
        pytest.skip("this host's sysfs describes no caches: no oracle")
    got = probeplan.cpuid_caches(subprocess.run([str(kit / "bin" / "cpuid")], capture_output=True, text=True,
                                                check=True).stdout, host_cores())
    if platform_machine() != "x86_64":
        assert got == []
        return
    geometry = [(c.level, c.size_bytes, c.line_bytes, c.associativity) for c in sysfs]
    assert [(c.level, c.size_bytes, c.line_bytes, c.associativity) for c in got] == geometry


def platform_machine() -> str:
    """This host's architecture."""
    import platform

    return platform.machine()


def test_sizes_of_kits_and_measure_include_pow2_only_where_defined():
    """--size POW2 is taken for the kernels that define it and refused, naming the benchmark, for others."""
    from benchmarks.polybench.catalog import by_name
    from pptmc.commands.measure import check_size

    assert check_size("pow2", [by_name("atax"), by_name("symm")]) == "POW2"
    assert check_size("medium") == "MEDIUM"
    with pytest.raises(InputError, match=r"lu: no POW2 dataset"):
        check_size("POW2", [by_name("atax"), by_name("lu")])
    with pytest.raises(InputError, match=r"--size 'huge': unknown; choose one of .*POW2"):
        check_size("huge")
