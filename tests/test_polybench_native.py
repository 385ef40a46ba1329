"""The 14 benchmark programs build cleanly, give the same answer for any team size, and compute the right thing.

Oracles: numpy/scipy formulations of each kernel at MINI size (closed forms such as A^T A x, np.cov,
L U = A, Q R = A, scipy's Toeplitz solver, the exact normal CDF), fed with the C harness's init replicated
in numpy.  The C kernels print every output value with PBENCH_DUMP=1.
"""
from __future__ import annotations

import dataclasses
import subprocess

import numpy as np
import pytest
import scipy.linalg
import scipy.stats

from benchmarks.polybench import catalog
from benchmarks.polybench.build import build_native, parse_output, run_native
from common.errors import InputError, RunError, ToolError
from common.toolchain import toolchain

PAPER_ABBREVS = {"adi", "atx", "bcg", "blk", "c2d", "cov", "dgn", "dbn", "grm", "jcb", "lu", "2mm", "mvt", "smm"}
NAMES = [b.name for b in catalog.benchmarks()]
THREADS = (1, 2, 3, 4)


@pytest.fixture(scope="session")
def builds(tmp_path_factory):
    """Every benchmark compiled once at MINI with -Wall -Wextra."""
    out = tmp_path_factory.mktemp("polybench")
    return {b.name: build_native(b, "MINI", out / b.name, extra_flags=["-Wall", "-Wextra"])
            for b in catalog.benchmarks()}


@pytest.fixture(scope="session")
def runs(builds):
    """Each benchmark run at MINI with 1..4 threads, dumping its output arrays."""
    return {name: {t: run_native(build.exe, t, dump=True) for t in THREADS} for name, build in builds.items()}


def mini(name: str) -> dict[str, int]:
    """The MINI bounds, read from the C source so the references follow any resizing."""
    return catalog.dataset_sizes(catalog.by_name(name), "MINI")


def grid(rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer index grids i (row) and j (column), as the C init loops see them."""
    return np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")


# ---------------------------------------------------------------- catalog

def test_catalog_lists_the_papers_fourteen_programs():
    benches = catalog.benchmarks()
    assert {b.abbrev for b in benches} == PAPER_ABBREVS
    assert len({b.name for b in benches}) == 14
    for b in benches:
        assert b.source.is_file() and b.include_dir.joinpath("pbench.h").is_file()
        assert all(p.is_file() for p in b.harness_sources)
        assert f"void {b.kernel}(" in b.source.read_text()
    assert catalog.by_name("jcb").name == "jacobi-2d"


def test_size_define_and_unknown_names():
    assert catalog.size_define("SMALL") == "-DSMALL_DATASET"
    assert catalog.size_define("paper") == "-DPAPER_DATASET"
    assert catalog.size_macro("Mini") == "MINI_DATASET"
    with pytest.raises(InputError, match="HUGE"):
        catalog.size_define("HUGE")
    with pytest.raises(InputError, match="nosuch"):
        catalog.by_name("nosuch")


@pytest.mark.parametrize("name", NAMES)
def test_every_size_sets_the_same_bounds_and_grows(name):
    bench = catalog.by_name(name)
    sizes = {s: catalog.dataset_sizes(bench, s) for s in catalog.SIZES}
    assert all(v.keys() == sizes["MINI"].keys() for v in sizes.values())
    work = {s: np.prod(list(v.values()), dtype=float) for s, v in sizes.items()}
    assert work["MINI"] < work["SMALL"] < work["MEDIUM"] <= work["LARGE"] <= work["EXTRALARGE"]


def test_paper_sizes_follow_table_4():
    paper = {b.name: catalog.dataset_sizes(b, "PAPER") for b in catalog.benchmarks()}
    assert paper["adi"] == {"TSTEPS": 50, "N": 1000}
    assert paper["2mm"] == {"NI": 512, "NJ": 512, "NK": 512, "NL": 512}
    assert paper["doitgen"] == {"NR": 128, "NQ": 128, "NP": 128}
    assert paper["blackscholes"] == {"NUM_OPTIONS": 65536, "NUM_RUNS": 100}
    assert paper["symm"] == {"M": 1024, "N": 1024}


@pytest.mark.parametrize("size", ["MEDIUM", "LARGE", "EXTRALARGE", "PAPER"])
def test_all_sizes_compile(size):
    """Syntax-check each source at the big sizes (binaries would not fit the test budget)."""
    tc = toolchain()
    for bench in catalog.benchmarks():
        cmd = [str(tc.clang), "-fsyntax-only", "-Wall", "-Wextra", "-Werror", *tc.openmp_compile_flags(),
               f"-I{bench.include_dir}", catalog.size_define(size), str(bench.source)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, f"{bench.name} at {size}: {proc.stderr}"


# ---------------------------------------------------------------- native runs

@pytest.mark.parametrize("name", NAMES)
def test_compiles_without_warnings(builds, name):
    assert builds[name].warnings == ""


@pytest.mark.parametrize("name", NAMES)
def test_identical_results_for_any_thread_count(runs, name):
    bench = catalog.by_name(name)
    first = runs[name][1]
    assert set(first.checksums) == set(bench.outputs)
    for t in THREADS[1:]:
        assert runs[name][t].checksums == first.checksums, f"{name} differs at {t} threads"
        for array in bench.outputs:
            np.testing.assert_array_equal(runs[name][t].arrays[array], first.arrays[array])
    assert all(np.isfinite(a).all() for a in first.arrays.values())


def test_cold_start_flushes_and_keeps_results(builds, runs, monkeypatch):
    monkeypatch.setenv("PBENCH_FLUSH_BYTES", str(1 << 20))
    cold = run_native(builds["atax"].exe, 2, cold=True)
    assert cold.checksums == runs["atax"][2].checksums
    assert cold.region_seconds > 0
    monkeypatch.setenv("PBENCH_FLUSH_BYTES", "lots")
    with pytest.raises(RunError, match="PBENCH_FLUSH_BYTES"):
        run_native(builds["atax"].exe, 1, cold=True)


def test_build_failure_names_the_source_and_leaves_no_binary(tmp_path):
    broken = tmp_path / "broken.c"
    broken.write_text("int main(void) { return undefined_name; }\n")
    bench = dataclasses.replace(catalog.by_name("atax"), source=broken)
    with pytest.raises(ToolError, match="broken.c"):
        build_native(bench, "MINI", tmp_path / "out" / "broken")
    assert not (tmp_path / "out" / "broken").exists()


def test_run_native_reports_a_missing_program(tmp_path):
    with pytest.raises(InputError, match="no such program"):
        run_native(tmp_path / "absent", 1)


def test_parse_output_reports_missing_timing():
    with pytest.raises(InputError, match="PBENCH_REGION_SECONDS"):
        parse_output("PBENCH_CHECKSUM y n=1 sum=1 wsum=1\n", "", source="prog")
    with pytest.raises(InputError, match="truncated"):
        parse_output("PBENCH_DUMP y 3\n1.0\n", "PBENCH_REGION_SECONDS 0.1\n")


def test_default_build_is_small_and_prints_region_time(tmp_path):
    """The documented plain command line works: no dataset flag means SMALL."""
    tc = toolchain()
    here = catalog.HERE
    exe = tmp_path / "mvt"
    subprocess.run([str(tc.clang), "-O2", *tc.openmp_compile_flags(), f"-I{here}", str(here / "mvt.c"),
                    str(here / "pbench.c"), *tc.openmp_link_flags(), "-lm", "-o", str(exe)], check=True)
    result = run_native(exe, 2, dump=True)
    assert result.arrays["x1"].size == catalog.dataset_sizes(catalog.by_name("mvt"), "SMALL")["N"]
    assert result.region_seconds > 0


# ---------------------------------------------------------------- references

def close(actual: np.ndarray, expected: np.ndarray, rtol: float = 1e-10) -> None:
    """Equal up to summation order: the C loops sum sequentially, numpy/BLAS pairwise."""
    np.testing.assert_allclose(np.ravel(actual), np.ravel(expected), rtol=rtol, atol=rtol * np.abs(expected).max())


def out(runs, name: str, array: str) -> np.ndarray:
    """An output array of the one-thread run (the others are checked equal to it)."""
    return runs[name][1].arrays[array]


def test_atax_matches_numpy(runs):
    s = mini("atax")
    m, n = s["M"], s["N"]
    i, j = grid(m, n)
    A = ((i + 2 * j) % n) / (4 * m)
    x = 1.0 + np.arange(n) / n
    close(out(runs, "atax", "y"), A.T @ (A @ x))


def test_bicg_matches_numpy(runs):
    s = mini("bicg")
    n, m = s["N"], s["M"]
    i, j = grid(n, m)
    A = ((i * (j + 1)) % n) / n
    p = (np.arange(m) % 17) / 17
    r = (np.arange(n) % 11) / 11
    close(out(runs, "bicg", "s"), A.T @ r)
    close(out(runs, "bicg", "q"), A @ p)


def test_mvt_matches_numpy(runs):
    n = mini("mvt")["N"]
    i, j = grid(n, n)
    A = ((i * j) % n) / n
    k = np.arange(n)
    x1, x2, y1, y2 = (k % n) / n, ((k + 1) % n) / n, ((k + 3) % n) / n, ((k + 4) % n) / n
    close(out(runs, "mvt", "x1"), x1 + A @ y1)
    close(out(runs, "mvt", "x2"), x2 + A.T @ y2)


def jacobi_step(src: np.ndarray, dst: np.ndarray) -> None:
    """One 5-point sweep of the interior, boundaries untouched."""
    dst[1:-1, 1:-1] = 0.2 * (src[1:-1, 1:-1] + src[1:-1, :-2] + src[1:-1, 2:] + src[2:, 1:-1] + src[:-2, 1:-1])


def test_jacobi_2d_matches_numpy(runs):
    s = mini("jacobi-2d")
    n = s["N"]
    i, j = grid(n, n)
    A = (i * (j + 2) + 2) / n
    B = (i * (j + 3) + 3) / n
    for _ in range(s["TSTEPS"]):
        jacobi_step(A, B)
        jacobi_step(B, A)
    close(out(runs, "jacobi-2d", "A"), A)


def test_2mm_matches_numpy(runs):
    s = mini("2mm")
    ni, nj, nk, nl = s["NI"], s["NJ"], s["NK"], s["NL"]
    i, k = grid(ni, nk)
    A = ((i * k + 1) % ni) / ni
    k, j = grid(nk, nj)
    B = ((k * (j + 1)) % nj) / nj
    j, l = grid(nj, nl)
    C = ((j * (l + 3) + 1) % nl) / nl
    i, l = grid(ni, nl)
    D = ((i * (l + 2)) % nk) / nk
    close(out(runs, "2mm", "D"), 1.5 * A @ B @ C + 1.25 * D)


def test_covariance_matches_numpy(runs):
    s = mini("covariance")
    i, j = grid(s["N"], s["M"])
    data = ((i * (j + 1) + 3 * j) % 19) / 19
    close(out(runs, "covariance", "cov"), np.cov(data, rowvar=False))


def test_lu_factors_reproduce_the_matrix(runs):
    n = mini("lu")["N"]
    i, j = grid(n, n)
    A0 = np.where(i == j, n + 1.0, ((i * j + 1) % n) / n)
    LU = out(runs, "lu", "A").reshape(n, n)
    L = np.tril(LU, -1) + np.eye(n)
    U = np.triu(LU)
    # Without pivoting the factorisation with unit-diagonal L is unique, so L U = A0 pins it down.
    close((L @ U).ravel(), A0, rtol=1e-12)
    assert not np.allclose(LU, A0)


def blackscholes_inputs(count: int) -> tuple[np.ndarray, ...]:
    """The harness's option portfolio: spot, strike, rate, volatility, time, put flag."""
    i = np.arange(count)
    return (50.0 + (i % 97) / 2, 40.0 + (i % 89) * 0.625, 0.01 + (i % 7) / 200, 0.1 + (i % 11) / 32,
            0.25 + (i % 13) / 8, i % 2)


def bs_price(s, k, r, v, t, put, cdf) -> np.ndarray:
    """Black-Scholes call/put price with a pluggable normal CDF."""
    d1 = (np.log(s / k) + (r + 0.5 * v * v) * t) / (v * np.sqrt(t))
    d2 = d1 - v * np.sqrt(t)
    disc = k * np.exp(-r * t)
    return np.where(put == 1, disc * (1 - cdf(d2)) - s * (1 - cdf(d1)), s * cdf(d1) - disc * cdf(d2))


def abramowitz_stegun_cdf(x: np.ndarray) -> np.ndarray:
    """The polynomial CDF approximation the C kernel (like PARSEC) uses."""
    ax = np.abs(x)
    k = 1.0 / (1.0 + 0.2316419 * ax)
    poly = k * (0.319381530 + k * (-0.356563782 + k * (1.781477937 + k * (-1.821255978 + k * 1.330274429))))
    upper = 1.0 - 0.3989422804014327 * np.exp(-0.5 * ax * ax) * poly
    return np.where(x < 0, 1.0 - upper, upper)


def test_blackscholes_matches_the_formula(runs):
    count = mini("blackscholes")["NUM_OPTIONS"]
    prices = out(runs, "blackscholes", "prices")
    args = blackscholes_inputs(count)
    close(prices, bs_price(*args, cdf=abramowitz_stegun_cdf), rtol=1e-9)
    # The polynomial CDF is within 7.5e-8 of the exact one; prices stay within a few 1e-6.
    np.testing.assert_allclose(prices, bs_price(*args, cdf=scipy.stats.norm.cdf), atol=2e-5)
    s, k, r, _, t, put = args
    call, put_price = prices[put == 0], prices[put == 1]
    assert (call >= np.maximum(s - k * np.exp(-r * t), 0)[put == 0] - 1e-5).all()
    assert (put_price >= -1e-9).all()


def test_convolution_2d_matches_numpy(runs):
    s = mini("convolution-2d")
    ni, nj = s["NI"], s["NJ"]
    i, j = grid(ni, nj)
    A = ((i * 7 + j * 3) % 32) / 32
    # coef[dj + 1][di + 1] weighs A[i + di][j + dj]: the C constants c11..c33 row by row.
    coef = np.array([[0.2, -0.3, 0.4], [0.5, 0.6, 0.7], [-0.8, -0.9, 0.1]])
    B = np.zeros_like(A)
    for dj in (-1, 0, 1):
        for di in (-1, 0, 1):
            B[1:-1, 1:-1] += coef[dj + 1, di + 1] * A[1 + di:ni - 1 + di, 1 + dj:nj - 1 + dj]
    close(out(runs, "convolution-2d", "B"), B)


def test_symm_matches_numpy(runs):
    s = mini("symm")
    m, n = s["M"], s["N"]
    i, j = grid(m, n)
    C = ((i + j) % 100) / m
    B = ((n + i - j) % 100) / m
    i, k = grid(m, m)
    lower = np.where(k <= i, ((i + k) % 100) / m, 0.0)
    A = lower + np.tril(lower, -1).T
    close(out(runs, "symm", "C"), 1.5 * A @ B + 1.2 * C)


def test_doitgen_matches_numpy(runs):
    s = mini("doitgen")
    nr, nq, np_ = s["NR"], s["NQ"], s["NP"]
    r, q, p = np.meshgrid(np.arange(nr), np.arange(nq), np.arange(np_), indexing="ij")
    A = ((r * q + p) % np_) / np_
    a, b = grid(np_, np_)
    C4 = ((a * b) % np_) / np_
    close(out(runs, "doitgen", "A"), np.einsum("rqs,sp->rqp", A, C4))


def test_durbin_solves_the_toeplitz_system(runs):
    n = mini("durbin")["N"]
    r = 0.5 / (np.arange(n) + 2.0) ** 2
    first_column = np.concatenate(([1.0], r[:-1]))
    close(out(runs, "durbin", "y"), scipy.linalg.solve_toeplitz(first_column, -r), rtol=1e-9)


def test_gramschmidt_is_a_qr_decomposition(runs):
    s = mini("gramschmidt")
    m, n = s["M"], s["N"]
    i, j = grid(m, n)
    A0 = ((i * j + 1) % m) / m + np.where(i == j, 10.0, 0.0)
    Q = out(runs, "gramschmidt", "Q").reshape(m, n)
    R = out(runs, "gramschmidt", "R").reshape(n, n)
    # Thin QR with positive diagonal R is unique: compare with LAPACK after fixing signs.
    q_ref, r_ref = np.linalg.qr(A0)
    signs = np.sign(np.diag(r_ref))
    close(Q, q_ref * signs, rtol=1e-9)
    close(R, signs[:, None] * r_ref, rtol=1e-9)


def test_adi_matches_numpy(runs):
    s = mini("adi")
    n, tsteps = s["N"], s["TSTEPS"]
    i, j = grid(n, n)
    u = (i + n - j) / n
    v, p, q = np.zeros((n, n)), np.zeros((n, n)), np.zeros((n, n))
    dx = dy = 1.0 / n
    mul1, mul2 = 2.0 * (1.0 / tsteps) / (dx * dx), 1.0 * (1.0 / tsteps) / (dy * dy)
    a, b, d, e = -mul1 / 2, 1 + mul1, -mul2 / 2, 1 + mul2
    c, f = a, d
    rows = slice(1, n - 1)
    for _ in range(tsteps):
        # Column sweep, all columns at once: column i of u along j.
        v[0, rows], p[rows, 0], q[rows, 0] = 1.0, 0.0, 1.0
        for jj in range(1, n - 1):
            den = a * p[rows, jj - 1] + b
            p[rows, jj] = -c / den
            q[rows, jj] = (-d * u[jj, :-2] + (1 + 2 * d) * u[jj, 1:-1] - f * u[jj, 2:] - a * q[rows, jj - 1]) / den
        v[n - 1, rows] = 1.0
        for jj in range(n - 2, 0, -1):
            v[jj, rows] = p[rows, jj] * v[jj + 1, rows] + q[rows, jj]
        # Row sweep.
        u[rows, 0], p[rows, 0], q[rows, 0] = 1.0, 0.0, 1.0
        for jj in range(1, n - 1):
            den = d * p[rows, jj - 1] + e
            p[rows, jj] = -f / den
            q[rows, jj] = (-a * v[:-2, jj] + (1 + 2 * a) * v[1:-1, jj] - c * v[2:, jj] - d * q[rows, jj - 1]) / den
        u[rows, n - 1] = 1.0
        for jj in range(n - 2, 0, -1):
            u[rows, jj] = p[rows, jj] * u[rows, jj + 1] + q[rows, jj]
    close(out(runs, "adi", "u"), u)
