"""Locate clang-19 and libomp once per call, so every stage builds with the same compiler."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from common.errors import ToolError

LLVM_MAJOR = 19
FIX_COMMAND = f"apt-get install -y clang-{LLVM_MAJOR} libomp-{LLVM_MAJOR}-dev libzstd-dev   (or: make setup)"


@dataclass(frozen=True)
class Toolchain:
    """Paths of the compiler pieces every build step needs."""

    clang: Path
    resource_dir: Path
    omp_include: Path
    omp_libdir: Path

    def openmp_compile_flags(self) -> list[str]:
        """Flags that make clang accept `#pragma omp` against libomp's omp.h."""
        return ["-fopenmp", f"-I{self.omp_include}"]

    def openmp_link_flags(self) -> list[str]:
        """Flags that link libomp and let the binary find it at run time."""
        return ["-fopenmp", f"-L{self.omp_libdir}", f"-Wl,-rpath,{self.omp_libdir}"]

    def llvm_tool(self, name: str) -> Path:
        """An LLVM tool of clang's own version (e.g. llvm-link), from clang's folder or the Debian prefix."""
        for folder in (self.clang.resolve().parent, Path(f"/usr/lib/llvm-{LLVM_MAJOR}/bin")):
            if (folder / name).is_file():
                return folder / name
        raise ToolError(f"{name} (LLVM {LLVM_MAJOR}) not found; install it with: apt-get install -y llvm-{LLVM_MAJOR}")


def find_clang() -> Path | None:
    """Return clang-19 from $PPTMC_CLANG, PATH, or the Debian LLVM prefix."""
    candidates = [os.environ.get("PPTMC_CLANG"), shutil.which(f"clang-{LLVM_MAJOR}"),
                  f"/usr/lib/llvm-{LLVM_MAJOR}/bin/clang"]
    for cand in candidates:
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK):
            return Path(cand)
    return None


def clang_version(clang: Path) -> str:
    """First line of `clang --version`."""
    out = subprocess.run([str(clang), "--version"], capture_output=True, text=True, check=False)
    return out.stdout.splitlines()[0] if out.stdout else "unknown"


@functools.lru_cache(maxsize=1)
def _cached_toolchain() -> Toolchain:
    clang = find_clang()
    if clang is None:
        raise ToolError(f"clang-{LLVM_MAJOR} not found; install it with: {FIX_COMMAND}")
    res = subprocess.run([str(clang), "-print-resource-dir"], capture_output=True, text=True, check=True)
    resource_dir = Path(res.stdout.strip())
    omp_include = resource_dir / "include"
    if not (omp_include / "omp.h").is_file():
        raise ToolError(f"omp.h not found under {omp_include}; install libomp with: {FIX_COMMAND}")
    omp_libdir = Path(f"/usr/lib/llvm-{LLVM_MAJOR}/lib")
    if not (omp_libdir / "libomp.so").exists():
        raise ToolError(f"libomp.so not found in {omp_libdir}; install it with: {FIX_COMMAND}")
    return Toolchain(clang=clang, resource_dir=resource_dir, omp_include=omp_include, omp_libdir=omp_libdir)


def toolchain() -> Toolchain:
    """The located toolchain; raises ToolError with the fixing command when a piece is missing."""
    return _cached_toolchain()
