"""`pptmc doctor`: report the versions of every required piece and the command that fixes a missing one."""
from __future__ import annotations

import importlib
import platform
from dataclasses import dataclass

from common import toolchain as tc
from common.errors import ToolError

PIP_FIX = "make setup   (creates .venv with the pinned dependencies)"


@dataclass
class Check:
    """One line of the doctor report."""

    name: str
    version: str | None
    required: bool = True
    fix: str = ""

    @property
    def ok(self) -> bool:
        return self.version is not None


def _module_version(module: str) -> str | None:
    try:
        return getattr(importlib.import_module(module), "__version__", "installed")
    except ImportError:
        return None


def _llvmlite_check() -> Check:
    version = _module_version("llvmlite")
    if version is not None:
        import llvmlite.binding as llvm

        version = f"{version} (LLVM {'.'.join(map(str, llvm.llvm_version_info))})"
    return Check("llvmlite", version, fix=f"pip install llvmlite, or {PIP_FIX}")


def _toolchain_checks() -> list[Check]:
    clang = tc.find_clang()
    checks = [Check(f"clang-{tc.LLVM_MAJOR}", tc.clang_version(clang) if clang else None, fix=tc.FIX_COMMAND)]
    try:
        found = tc.toolchain()
        checks.append(Check("libomp", str(found.omp_libdir / "libomp.so"), fix=tc.FIX_COMMAND))
    except ToolError:
        checks.append(Check("libomp", None, fix=tc.FIX_COMMAND))
    checks.append(Check("llvm-mca", _llvm_mca(), fix=f"apt-get install llvm-{tc.LLVM_MAJOR}"))
    return checks


def _llvm_mca() -> str | None:
    """Where llvm-mca is (the in-core loop bound of machines with core.llvm_mcpu), or None."""
    from analysis.runtime.incore import find_mca

    return find_mca()


def collect() -> list[Check]:
    """Every check, required first."""
    checks = [Check("python", platform.python_version())]
    checks += _toolchain_checks()
    checks.append(_llvmlite_check())
    for module in ("numba", "numpy", "pandas", "networkx", "jinja2", "zstandard", "scipy"):
        checks.append(Check(module, _module_version(module), fix=f"pip install {module}, or {PIP_FIX}"))
    checks.append(Check("libclang (python)", _module_version("clang.cindex") and _libclang_version(),
                        fix=f"pip install libclang, or {PIP_FIX}"))
    for module in ("matplotlib", "tqdm", "pyarrow"):
        checks.append(Check(module, _module_version(module), required=False, fix=f"pip install {module}"))
    return checks


def _libclang_version() -> str:
    from importlib.metadata import version

    return version("libclang")


def report(checks: list[Check]) -> str:
    """Human-readable table of the checks."""
    lines = []
    for check in checks:
        status = "ok" if check.ok else ("MISSING" if check.required else "missing (optional)")
        lines.append(f"{check.name:20s} {status:18s} {check.version or ''}")
        if not check.ok:
            lines.append(f"{'':20s} fix: {check.fix}")
    return "\n".join(lines)
