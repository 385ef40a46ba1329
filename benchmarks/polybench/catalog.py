"""The benchmark list of the PPT-Multicore paper (Table 4), so every stage builds the same programs."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from common.errors import InputError

HERE = Path(__file__).resolve().parent
SIZES = ("MINI", "SMALL", "MEDIUM", "LARGE", "EXTRALARGE", "PAPER")   # every benchmark defines these
# POW2: power-of-two leading dimensions (N = 256 for O(N^3) work, 1024 for O(N^2)), where a walk down a
# column of doubles strides 1-8 KiB and piles its lines into a few cache sets; only the kernels whose
# loops walk a matrix down its columns have it (the others' sources stop a POW2 build with #error).
POW2_KERNELS = ("2mm", "adi", "atax", "bicg", "covariance", "doitgen", "gramschmidt", "mvt", "symm")
ALL_SIZES = (*SIZES, "POW2")
DEFAULT_SIZE = "SMALL"
# Timed runs (pptmc measure): MEDIUM regions last 0.5-50 ms on this class of host (MINI/SMALL: 2-300 us,
# where fork/join and timer overhead dominate), while the single trace and reuse profiles stay at ~5-15 s
# per benchmark. LARGE multiplies the accesses by 30-100x and the profiling time with them.
MEASURE_SIZE = "MEDIUM"


@dataclass
class Benchmark:
    """One benchmark program: where its source is and how to build and run it."""

    name: str
    abbrev: str
    source: Path
    harness_sources: list[Path]
    include_dir: Path
    args: list[str] = field(default_factory=list)
    domain: str = ""
    description: str = ""
    outputs: tuple[str, ...] = ()
    kernel: str = ""


# (name, paper abbreviation, domain, description, arrays the harness prints, kernel function)
_TABLE = (
    ("adi", "adi", "Stencils", "Alternating Direction Implicit method for 2D heat diffusion", ("u",), "kernel_adi"),
    ("atax", "atx", "Linear Algebra", "Matrix transpose and vector multiplication", ("y",), "kernel_atax"),
    ("bicg", "bcg", "Linear Algebra", "BiCG sub kernel of BiCGStab linear solver", ("s", "q"), "kernel_bicg"),
    ("blackscholes", "blk", "Recognition, Mining and Synthesis", "Black-Scholes partial differential equation",
     ("prices",), "kernel_blackscholes"),
    ("convolution-2d", "c2d", "Stencils", "2D convolution", ("B",), "kernel_conv2d"),
    ("covariance", "cov", "Datamining", "Covariance computation", ("cov",), "kernel_covariance"),
    ("doitgen", "dgn", "Linear Algebra", "Multiresolution analysis kernel", ("A",), "kernel_doitgen"),
    ("durbin", "dbn", "Linear Algebra", "Toeplitz system solver", ("y",), "kernel_durbin"),
    ("gramschmidt", "grm", "Linear Algebra", "QR decomposition with modified Gram Schmidt", ("R", "Q"),
     "kernel_gramschmidt"),
    ("jacobi-2d", "jcb", "Stencils", "Jacobi iteration", ("A",), "kernel_jacobi_2d"),
    ("lu", "lu", "Linear Algebra", "LU decomposition without pivoting", ("A",), "kernel_lu"),
    ("2mm", "2mm", "Linear Algebra", "Two matrix multiplication", ("D",), "kernel_2mm"),
    ("mvt", "mvt", "Linear Algebra", "Matrix vector product and transpose", ("x1", "x2"), "kernel_mvt"),
    ("symm", "smm", "Linear Algebra", "Symmetric matrix-multiply", ("C",), "kernel_symm"),
)


def harness_sources() -> list[Path]:
    """The C files every benchmark links besides its own source."""
    return [HERE / "pbench.c"]


def benchmarks() -> list[Benchmark]:
    """All 14 benchmarks of the paper's Table 4, in the table's order."""
    return [
        Benchmark(name=name, abbrev=abbrev, source=HERE / f"{name}.c", harness_sources=harness_sources(),
                  include_dir=HERE, args=[], domain=domain, description=desc, outputs=outputs, kernel=kernel)
        for name, abbrev, domain, desc, outputs, kernel in _TABLE
    ]


def by_name(name: str) -> Benchmark:
    """Look a benchmark up by its name or paper abbreviation."""
    for bench in benchmarks():
        if name in (bench.name, bench.abbrev):
            return bench
    known = ", ".join(b.name for b in benchmarks())
    raise InputError(f"benchmark {name!r}: unknown; choose one of {known}")


def size_macro(size: str) -> str:
    """The macro that selects a dataset size, e.g. "SMALL" -> "SMALL_DATASET" (for APIs taking defines)."""
    key = size.strip().upper()
    if key not in ALL_SIZES:
        raise InputError(f"dataset size {size!r}: unknown; choose one of {', '.join(ALL_SIZES)}")
    return f"{key}_DATASET"


def size_define(size: str) -> str:
    """The preprocessor flag that selects a dataset size, e.g. "SMALL" -> "-DSMALL_DATASET"."""
    return f"-D{size_macro(size)}"


def sizes_of(bench: Benchmark) -> tuple[str, ...]:
    """The dataset sizes this benchmark's source defines (POW2 only for POW2_KERNELS)."""
    return SIZES + (("POW2",) if bench.name in POW2_KERNELS else ())


def check_size(bench: Benchmark, size: str) -> str:
    """The size's canonical name, or an InputError naming the benchmark and the sizes it has."""
    key = size_macro(size)[:-len("_DATASET")]
    if key not in sizes_of(bench):
        raise InputError(f"{bench.name}: no {key} dataset; it has {', '.join(sizes_of(bench))} "
                         f"({key} is defined for {', '.join(POW2_KERNELS)})")
    return key


_BRANCH = re.compile(r"^#(?:el)?if\s+defined\((\w+)_DATASET\)\s*$")
_DEFINE = re.compile(r"^#define\s+(\w+)\s+(\d+)\s*$")


def dataset_sizes(bench: Benchmark, size: str) -> dict[str, int]:
    """The problem bounds (N, M, TSTEPS, ...) a dataset size sets, read from the kernel's source."""
    key = check_size(bench, size)
    sizes: dict[str, int] = {}
    current = None
    for line in bench.source.read_text().splitlines():
        line = line.strip()
        if m := _BRANCH.match(line):
            current = m.group(1)
        elif line == "#endif" and current is not None:
            if sizes:
                break
            current = None
        elif current == key and (m := _DEFINE.match(line)):
            sizes[m.group(1)] = int(m.group(2))
    if not sizes:
        raise InputError(f"{bench.source}: no `#if defined({key}_DATASET)` block with #define lines; add one")
    return sizes
