"""POW2: the power-of-two dataset size of the column-walking kernels, and `pptmc suite --size` lists.

Oracles: the bounds are checked bit by bit (a power of two has one bit set) and against MEDIUM's;
mvt's POW2 binary against a numpy replica of its init and kernel; the suite's (benchmark, size) runs
and its per-size accuracy means against lists and means written out by hand.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchmarks.polybench import catalog
from benchmarks.polybench.build import build_native, run_native
from common.errors import InputError, ToolError
from pptmc import cli, suite
from pptmc.commands.pipeline import suite_config

TIME_STEPS = {"TSTEPS"}  # counts of sweeps, not extents: free to be any number
NOT_POW2 = ("blackscholes", "convolution-2d", "durbin", "jacobi-2d", "lu")
MACHINE = "haswell-i7-5960x"


def is_pow2(v: int) -> bool:
    """One bit set."""
    return v > 0 and v & (v - 1) == 0


@pytest.mark.parametrize("name", catalog.POW2_KERNELS)
def test_pow2_bounds_are_powers_of_two_and_not_medium(name):
    bench = catalog.by_name(name)
    pow2, medium = catalog.dataset_sizes(bench, "POW2"), catalog.dataset_sizes(bench, "MEDIUM")
    assert pow2.keys() == medium.keys()
    extents = {k: v for k, v in pow2.items() if k not in TIME_STEPS}
    assert extents and all(is_pow2(v) and v >= 16 for v in extents.values()), extents
    assert max(extents.values()) >= 128  # a column stride of at least 1 KiB of doubles
    assert pow2 != medium


def test_at_least_six_kernels_and_the_rest_refuse_pow2():
    assert len(set(catalog.POW2_KERNELS)) >= 6
    assert set(catalog.POW2_KERNELS) | set(NOT_POW2) == {b.name for b in catalog.benchmarks()}
    lu = catalog.by_name("lu")
    assert "POW2" not in catalog.sizes_of(lu) and "POW2" in catalog.sizes_of(catalog.by_name("atax"))
    with pytest.raises(InputError, match=r"lu: no POW2 dataset; it has MINI, SMALL, MEDIUM, LARGE, EXTRALARGE, PAPER"):
        catalog.dataset_sizes(lu, "pow2")
    assert catalog.size_define("pow2") == "-DPOW2_DATASET"


def test_mvt_pow2_build_runs_at_n_1024_and_matches_numpy(tmp_path):
    """-DPOW2_DATASET really selects POW2 (pbench.h's SMALL default must not win) and computes mvt."""
    build = build_native(catalog.by_name("mvt"), "POW2", tmp_path / "mvt", extra_flags=["-Wall", "-Wextra"])
    assert build.warnings == ""
    run = run_native(build.exe, 2, dump=True)
    n = 1024
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    A = ((i * j) % n) / n
    k = np.arange(n)
    x1, x2, y1, y2 = (k % n) / n, ((k + 1) % n) / n, ((k + 3) % n) / n, ((k + 4) % n) / n
    for got, want in ((run.arrays["x1"], x1 + A @ y1), (run.arrays["x2"], x2 + A.T @ y2)):
        assert got.size == n
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10 * np.abs(want).max())


@pytest.mark.parametrize("name", catalog.POW2_KERNELS)
def test_pow2_trace_fits_the_validation_budget(tmp_path, name):
    """The parallel regions' trace stays under 20 M references (validate simulates it per thread count),
    and is big enough that the columns it walks outgrow an L1 set's ways."""
    import instrument
    from pptmc.pipeline import benchmark_config, instrument_step, trace_step, translate_step

    cfg = benchmark_config(catalog.by_name(name), "POW2", tmp_path, machines=(MACHINE,), cores=(1,))
    quiet = lambda _msg: None  # noqa: E731
    trace = trace_step(cfg, instrument_step(cfg, translate_step(cfg, quiet), quiet), quiet)
    assert 1_000_000 < instrument.open_trace(trace).info.n_accesses < 20_000_000


def test_a_kernel_without_pow2_stops_the_build(tmp_path):
    with pytest.raises(ToolError, match="lu has no POW2 dataset"):
        build_native(catalog.by_name("lu"), "POW2", tmp_path / "lu")


def _suite_cfg(tmp_path, *extra: str):
    """The suite's configuration from a command line, parsed as `pptmc suite` parses it."""
    args = cli.build_parser().parse_args(["suite", "-o", str(tmp_path / "out"), "--machines", MACHINE, *extra])
    return suite_config(args)


def test_suite_runs_each_benchmark_at_each_listed_size_it_has(tmp_path):
    cfg = _suite_cfg(tmp_path, "--sizes", "mini, POW2", "--benchmarks", "atax,lu")
    assert cfg.sizes == ("MINI", "POW2")
    runs = [(c.size, b.name) for c, b in suite.size_tasks(cfg)]
    assert runs == [("MINI", "atax"), ("MINI", "lu"), ("POW2", "atax")]
    work = {(c.size, b.name): suite.pipeline_config(c, b).workdir for c, b in suite.size_tasks(cfg)}
    out = tmp_path / "out" / "work"
    assert work == {("MINI", "atax"): out / "atax", ("MINI", "lu"): out / "lu", ("POW2", "atax"): out / "atax@POW2"}


@pytest.mark.parametrize("extra, sizes", [
    ((), ("MINI",)),
    (("--validate",), ("MINI", "POW2")),
    (("--validate", "--benchmarks", "jacobi-2d"), ("MINI",)),  # no POW2 variant among those selected
    (("--size", "SMALL", "--validate"), ("SMALL",)),
])
def test_suite_default_sizes(tmp_path, extra, sizes):
    assert _suite_cfg(tmp_path, *extra).sizes == sizes


@pytest.mark.parametrize("extra, message", [
    (("--size", "MINI,HUGE"), "--size: dataset size 'HUGE': unknown; choose one of MINI, SMALL, MEDIUM, LARGE, "
                              "EXTRALARGE, PAPER, POW2"),
    (("--size", ","), "--size: give one or more dataset sizes"),
    (("--size", "POW2", "--benchmarks", "lu"), "lu: no POW2 dataset; it has MINI"),
    (("--size", "POW2", "--benchmarks", "lu,jacobi-2d"), "lu: no POW2 dataset"),
])
def test_suite_rejects_bad_sizes_with_one_message(tmp_path, capsys, extra, message):
    with pytest.raises(SystemExit) as done:
        cli.main(["suite", "-o", str(tmp_path / "out"), "--machines", MACHINE, *extra])
    err = capsys.readouterr().err
    assert done.value.code == 2 and message in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()  # refused before any work


def _rows(size: str, errors_pp: list[float]) -> pd.DataFrame:
    """Comparison rows of atax at one size with the given errors."""
    return pd.DataFrame({"benchmark": "atax", "machine": MACHINE, "cores": range(1, len(errors_pp) + 1),
                         "level": "L1", "mode": "paper", "interleave": "rr", "predicted": 0.5,
                         "ground_truth": [0.5 + e / 100 for e in errors_pp], "abs_error_pp": errors_pp,
                         "size": size})


def test_validation_summaries_never_pool_two_sizes():
    outcomes = [suite.ValidationOutcome("atax", _rows("MINI", [1.0, 2.0]), size="MINI"),
                suite.ValidationOutcome("atax", _rows("POW2", [10.0, 20.0]), size="POW2")]
    tables = suite.validation_tables(outcomes)
    overall = tables["validation_accuracy"].query("machine == 'all'").set_index("size")
    assert overall.loc["MINI", "mean_abs_error_pp"] == 1.5 and overall.loc["POW2", "mean_abs_error_pp"] == 15.0
    assert list(tables["validation_accuracy"].columns)[0] == "size"
    assert list(tables["validation_outliers"]["size"]) == ["POW2", "POW2"]
