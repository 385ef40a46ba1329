"""Host detection: sysfs parsing against hand-made trees, and a quick real run of the microbenchmarks."""
from __future__ import annotations

import platform

import pytest

import machines
from machines import detect, probeplan
from pptmc import cli


def test_parse_size_and_cpu_list():
    assert detect.parse_size("48K") == 48 * 1024
    assert detect.parse_size("491520K") == 480 * 1024 * 1024
    assert detect.parse_size("2 MiB") == 2 * 1024 * 1024
    assert detect.cpu_list("0-3,8,10-11") == {0, 1, 2, 3, 8, 10, 11}
    with pytest.raises(ValueError):
        detect.parse_size("lots")


def _fake_cpu(root, entries, siblings="0,4"):
    cpu = root / "cpu0"
    (cpu / "topology").mkdir(parents=True)
    (cpu / "topology" / "thread_siblings_list").write_text(siblings + "\n")
    for i, (level, kind, size, ways, shared) in enumerate(entries):
        d = cpu / "cache" / f"index{i}"
        d.mkdir(parents=True)
        for name, value in (("level", level), ("type", kind), ("size", size), ("coherency_line_size", 64),
                            ("ways_of_associativity", ways), ("shared_cpu_list", shared)):
            (d / name).write_text(f"{value}\n")
    return cpu


def test_sysfs_caches_skips_instruction_and_uses_sibling_sharing(tmp_path):
    cpu = _fake_cpu(tmp_path, [(1, "Data", "32K", 8, "0,4"), (1, "Instruction", "32K", 8, "0,4"),
                               (2, "Unified", "256K", 8, "0,4"), (3, "Unified", "20480K", 20, "0-7")])
    got = detect.sysfs_caches(cpu)
    assert got == [detect.SysCache(1, 32768, 64, 8, False), detect.SysCache(2, 262144, 64, 8, False),
                   detect.SysCache(3, 20 * 1024 * 1024, 64, 20, True)]


@pytest.fixture(scope="module")
def detected(tmp_path_factory):
    out = tmp_path_factory.mktemp("detect") / "host.toml"
    assert cli.run(["machines", "detect", "--quick", "-o", str(out), "--name", "testhost"]) == 0
    return out


def test_detect_quick_writes_a_valid_plausible_file(detected):
    m = machines.load_machine(detected)
    assert m.name == "testhost"
    sys_caches = detect.sysfs_caches()
    assert [c.size_bytes for c in m.caches] == [c.size_bytes for c in sys_caches]
    assert m.cores == detect.physical_cores()
    assert m.ops["int_add"].latency == pytest.approx(1.0, abs=0.2)  # the calibration unit
    assert 0.3 < m.frequency_ghz < 7.0
    # A folded or vectorised chain would make these fail: division is slower than addition, a
    # dependent chain is slower than independent ones, deeper levels are slower.
    assert m.ops["fp_div"].latency > m.ops["fp_add"].latency
    assert m.ops["int_div"].latency > m.ops["int_mul"].latency
    assert m.ops["int_add"].recip_throughput < 0.9
    assert m.ops["fp_add"].recip_throughput < m.ops["fp_add"].latency
    assert m.caches[0].latency_cycles < m.caches[1].latency_cycles
    assert m.caches[0].latency_cycles < m.ram.latency_ns * m.frequency_ghz
    assert m.ram.bandwidth_one_core_gbs <= m.ram.bandwidth_all_cores_gbs
    # overhead.c: a region and a barrier cost something, and far less than a millisecond
    assert 0 < m.parallel.fork_join_ns < 1e6 and 0 < m.parallel.barrier_ns < 1e6
    assert "overhead.c" in m.sources["parallel"]
    # coldstart.c: a region after the harness's 64 MiB flush costs more than a warm fork (code and data
    # from memory), on one thread too
    assert m.parallel.cold_start_one_ns > 1000 and "coldstart.c" in m.sources["parallel"]
    # strided.c: one figure per power of two up to the L1's sets; a cold line down a column overlaps with
    # fewer than 64 others in flight, and costs less than two RAM latencies
    if m.ram.strided_cold_line_ns:
        assert len(m.ram.strided_cold_line_ns) == m.caches[0].sets.bit_length()
        assert m.ram.latency_ns / 64 < min(m.ram.strided_cold_line_ns)
        assert max(m.ram.strided_cold_line_ns) < 2 * m.ram.latency_ns
    # the core named for llvm-mca is one of its processors: the in-core bound runs with it
    if m.llvm_mcpu:
        from analysis.runtime.incore import mca_throughputs
        assert mca_throughputs([["addq %rax, %rax"]], m.llvm_mcpu)[0].cycles_per_iteration == pytest.approx(1, abs=0.1)
    # lines.c: a level below L1 delivers a line in more time than L1 serves an access, and in less
    # time than one core's RAM bandwidth moves a line
    ram_line_cycles = m.line_bytes / (m.ram.bandwidth_one_core_gbs / m.frequency_ghz)
    for i, level in enumerate(m.caches[1:], start=1):
        assert m.caches[0].recip_throughput_cycles < level.recip_throughput_cycles < ram_line_cycles
        assert "lines.c" in m.sources[f"caches[{i}]"]


def test_lines_microbenchmark_times_lines_not_the_loop(tmp_path):
    """One load per line: an L1-resident buffer is several times faster per line than a RAM-sized
    one, and bad arguments are refused with the usage line."""
    import subprocess

    binary = detect._compile("lines.c", tmp_path / "lines", [])
    l1 = detect._line_ns(binary, 16 << 10, 64, 3)
    ram = detect._line_ns(binary, 256 << 20, 64, 1)
    assert 0 < l1 * 3 < ram
    bad = subprocess.run([str(binary), "64", "12", "1", "1"], capture_output=True, text=True)
    assert bad.returncode == 2 and "LINE_BYTES a multiple of 8" in bad.stderr


LSCPU = """NAME ONE-SIZE ALL-SIZE WAYS TYPE        LEVEL   SETS PHY-LINE COHERENCY-SIZE
L1d     49152    98304   12 Data            1     64        1             64
L1i     65536   131072   16 Instruction     1     64        1             64
L2    2097152  4194304   16 Unified         2   2048        1             64
L3  503316480 503316480  16 Unified         3 491520        1             64
"""


def test_lscpu_fallback_parser():
    assert detect.lscpu_caches(LSCPU, cores=2) == [
        detect.SysCache(1, 49152, 64, 12, False), detect.SysCache(2, 2097152, 64, 16, False),
        detect.SysCache(3, 503316480, 64, 16, True)]


def test_sysfs_and_lscpu_agree_on_this_host():
    import shutil
    import subprocess

    if not shutil.which("lscpu") or not detect.SYSFS_CPU.joinpath("cpu0", "cache").is_dir():
        pytest.skip("needs lscpu and sysfs")
    text = subprocess.run(["lscpu", "-C", "--bytes"], capture_output=True, text=True, check=True).stdout
    import os
    # sharing is decided over every core of the chip, also when this process may run on fewer (taskset)
    assert detect.lscpu_caches(text, detect.physical_cores(cpus=range(os.cpu_count()))) == detect.sysfs_caches()


def _curve(first_entries: int, first_step: float, second_entries: int, walk: float) -> dict[int, float]:
    """An ideal tlb.c curve: 0 below the first reach, the first step up to the second, then both."""
    pages = detect.TLB_FIRST_PAGES + detect.TLB_SECOND_PAGES
    return {p: 0.0 if p <= first_entries else first_step if p <= second_entries else first_step + walk
            for p in pages}


def test_tlb_levels_read_reach_and_costs_off_the_curve():
    levels = detect.tlb_levels(_curve(64, 0.5, 1536, 20.0), 4096)
    assert [(lv["name"], lv["entries"], lv["miss_cycles"]) for lv in levels] == [("DTLB", 64, 0.5),
                                                                               ("STLB", 1536, 20.0)]
    # no second knee inside the sweep: only the first level
    assert [lv["name"] for lv in detect.tlb_levels(_curve(96, 0.5, 1 << 20, 20.0), 4096)] == ["DTLB"]
    # a flat curve (huge pages, or a TLB bigger than the sweep): no levels at all
    assert detect.tlb_levels(_curve(1 << 20, 0.5, 1 << 20, 0.0), 4096) == []


def test_tlb_microbenchmark_finds_a_reach_on_this_host(tmp_path):
    # Every x86-64 and Arm core maps fewer than 768 4 KiB pages in its first-level data TLB; the
    # paged layout must cost more there than the dense one touching as many lines.
    levels = detect.measure_tlb(tmp_path, 1.0, 64, detect.QUICK, lambda _m: None)
    assert levels and levels[0]["name"] == "DTLB"
    assert 8 <= levels[0]["entries"] < 768 and levels[0]["miss_cycles"] > 0


def test_stores_microbenchmark_and_core_table(tmp_path):
    got = detect.measure_stores(tmp_path, 1.0, 64, detect.QUICK, lambda _m: None)
    assert got["store_new_line_cycles"] > 0 and "stores.c" in got["source"]
    table = detect.core_table({"reorder_window_ops": 240, "source": "window.c"}, got)
    assert table["reorder_window_ops"] == 240 and "window.c" in table["source"] and "stores.c" in table["source"]
    assert detect.core_table({}, {}) == {}


def test_transfer_microbenchmark(tmp_path):
    caches = detect.sysfs_caches()
    assert detect.measure_transfer(tmp_path, 1.0, caches, 1, lambda _m: None) == {}  # one core: nothing to move
    if detect.physical_cores() < 2:
        pytest.skip("one core: no other core to transfer lines from")
    got = detect.measure_transfer(tmp_path, 1.0, caches, 2, lambda _m: None)
    assert got["transfer_cycles"] > 0 and "transfer.c" in got["source"]
    assert got["upgrade_cycles"] >= 0 and "upgrade_cycles" in got["source"]


def test_transfer_figures_take_upgrades_where_the_run_has_them():
    """ns x GHz, rounded; a kit's results from before the upgrade figure give none (and no error)."""
    res = {"other_ns": 4.0, "same_ns": 1.25, "upgrade_ns": 5.5}
    got = detect.transfer_figures(res, 4.0, 8192)
    assert got["transfer_cycles"] == 16.0 and got["upgrade_cycles"] == 22.0 and "5.500 ns per line more" in got["source"]
    old = detect.transfer_figures({"other_ns": 4.0, "same_ns": 1.25}, 4.0, 8192)
    assert "upgrade_cycles" not in old and "upgrade" not in old["source"]


def test_tlb_levels_ignore_the_cache_costs_of_the_largest_sweeps():
    """This host's curve: the walks' plateau is about 28 cycles, the largest counts cost more because the
    page tables no longer fit the caches; the knee is still 2048 pages."""
    curve = {16: 0.0, 32: -0.01, 48: -0.01, 64: -0.01, 96: 0.0, 128: 0.34, 192: 0.5, 256: 0.48, 384: 0.46,
             512: 0.46, 768: 0.53, 1024: 0.29, 1536: 0.31, 2048: 5.27, 3072: 23.55, 4096: 25.15, 6144: 27.59,
             8192: 28.61, 12288: 36.61, 16384: 47.3}
    levels = detect.tlb_levels(curve, 4096)
    assert [(lv["name"], lv["entries"]) for lv in levels] == [("DTLB", 96), ("STLB", 2048)]
    assert levels[1]["miss_cycles"] == pytest.approx(28.61 - 0.47, abs=0.05)


def test_window_figures_recover_the_lookahead_from_synthetic_chains():
    """window.c output made from known parameters: long instances take c L - (c k - P) ns, short ones
    overlap 1 + W / (6 L) (capped at 3): the fit must give k x 6 operations and W back."""
    c = {"add": 0.5, "div": 4.0}
    k, exit_ns, w = 45.0, 3.0, 480.0
    res = {}
    for kind, cost in c.items():
        for n in (16, 24, 32, 48, 64, 96, 128, 256, 384, 512, 768, 1024, 1536, 2048, 3072):
            if n >= detect.LONG_CHAIN_MIN_ITERATIONS:
                res[f"{kind}_{n}"] = (cost * n - (cost * k - exit_ns)) / n
            else:
                res[f"{kind}_{n}"] = cost / min(3.2, 1 + w / (6 * n))
    got = detect.window_figures(res)
    assert got["chain_lookahead_ops"] == round(6 * k)
    assert got["reorder_window_ops"] == w
    assert "loop exit 3.0 ns" in got["source"]
    assert detect.window_figures({"div_16": 1.0}) == {}


CPUID_SMT2 = """smt=2
cache level=1 type=data size=49152 line=64 ways=12 sharing=2
cache level=2 type=unified size=2097152 line=64 ways=16 sharing=2
cache level=3 type=unified size=110100480 line=64 ways=15 sharing=224
"""


def test_cpuid_caches_hand_case():
    """Two hyperthreads per core: L1 and L2 serve one core (private); the L3 serves 112 cores, capped at the
    chip's 16 that this host shows."""
    l1, l2, l3 = probeplan.cpuid_caches(CPUID_SMT2, cores=16)
    assert (l1.size_bytes, l1.associativity, l1.shared, l1.cores_sharing) == (49152, 12, False, 0)
    assert (l2.level, l2.shared) == (2, False)
    assert (l3.size_bytes, l3.line_bytes, l3.shared, l3.cores_sharing) == (110100480, 64, True, 16)


def test_host_facts_fall_back_to_cpuid_without_sysfs_or_lscpu(monkeypatch, tmp_path):
    """A sandbox whose sysfs describes no cache and which has no lscpu: the facts take CPUID's report, the
    same geometry sysfs gives here; without the helper the error names all three sources."""
    real = detect.sysfs_caches()
    if not real or platform.machine() != "x86_64":
        pytest.skip("needs an x86-64 host whose sysfs describes its caches (the oracle)")
    helper = detect.build_program("cpuid", tmp_path / "cpuid")
    monkeypatch.setattr(detect.probeplan, "sysfs_caches", lambda: [])
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    facts = probeplan.host_facts(helper)
    assert facts["cache_source"].startswith("CPUID")
    assert [(c["level"], c["size_bytes"], c["associativity"]) for c in facts["caches"]] == [
        (c.level, c.size_bytes, c.associativity) for c in real]
    with pytest.raises(probeplan.ProbeError, match="no caches described.*lscpu.*write the machine file by hand"):
        probeplan.host_facts()
