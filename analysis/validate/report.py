"""Figures of a validation table (analysis.validate.compare.COLUMNS): predicted vs ground-truth hit rates."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from common.errors import InputError
from common.io import atomic_path

_MODE_COLORS = {"iteration": "tab:blue", "paper": "tab:orange"}
_NEEDED = {"benchmark", "machine", "cores", "level", "mode", "interleave", "predicted", "ground_truth", "abs_error_pp"}


def _pyplot():
    """matplotlib with the file-only Agg backend (no display on build machines)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    """Write a figure atomically as PNG and free it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100, bbox_inches="tight")
    _pyplot().close(fig)
    return path


def write_validation_figures(df: pd.DataFrame, outdir: Path) -> list[Path]:
    """One figure per benchmark (hit rate vs cores per machine and level) plus error summaries."""
    missing = _NEEDED - set(df.columns)
    if missing:
        raise InputError(f"validation table lacks columns {', '.join(sorted(missing))}; "
                         f"pass the output of analysis.validate.compare.validate_program")
    outdir = Path(outdir)
    if df.empty:
        return []
    paths = [_benchmark_figure(g, bench, outdir) for bench, g in df.groupby("benchmark")]
    paths.append(_error_bars(df, outdir / "validation_errors.png"))
    paths.append(_scatter(df, outdir / "validation_scatter.png"))
    return paths


def _benchmark_figure(g: pd.DataFrame, bench: str, outdir: Path) -> Path:
    """Rows = machines, columns = levels; ground truth in black, one line per mode (mean over interleaves),
    the spread over interleaves as error bars."""
    plt = _pyplot()
    machines, levels = sorted(g["machine"].unique()), sorted(g["level"].unique())
    fig, axes = plt.subplots(len(machines), len(levels), figsize=(3.2 * len(levels), 2.6 * len(machines)),
                             squeeze=False, sharex=True)
    for i, machine in enumerate(machines):
        for j, level in enumerate(levels):
            ax = axes[i][j]
            sub = g[(g["machine"] == machine) & (g["level"] == level)]
            truth = sub.groupby("cores")["ground_truth"].agg(["mean", "min", "max"])
            ax.errorbar(truth.index, truth["mean"], yerr=[truth["mean"] - truth["min"], truth["max"] - truth["mean"]],
                        color="black", marker="s", label="ground truth", capsize=2)
            for mode, part in sub.groupby("mode"):
                pred = part.groupby("cores")["predicted"].agg(["mean", "min", "max"])
                ax.errorbar(pred.index, pred["mean"], yerr=[pred["mean"] - pred["min"], pred["max"] - pred["mean"]],
                            color=_MODE_COLORS.get(mode, None), marker="o", label=f"model ({mode})", capsize=2)
            ax.set_xscale("log", base=2)
            ax.set_title(f"{machine} {level}", fontsize=8)
            if j == 0:
                ax.set_ylabel("cumulative hit rate")
            if i == len(machines) - 1:
                ax.set_xlabel("cores (threads)")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"{bench}: predicted vs ground truth", y=1.02)
    return _save(fig, outdir / f"validation_{_safe(bench)}.png")


def _error_bars(df: pd.DataFrame, path: Path) -> Path:
    """Mean absolute error per level, one bar per mode; error bars = standard deviation over rows."""
    plt = _pyplot()
    stats = df.groupby(["level", "mode"])["abs_error_pp"].agg(["mean", "std"]).fillna(0.0).reset_index()
    levels, modes = sorted(stats["level"].unique()), sorted(stats["mode"].unique())
    fig, ax = plt.subplots(figsize=(1.6 + 1.4 * len(levels), 3.2))
    width = 0.8 / max(len(modes), 1)
    for k, mode in enumerate(modes):
        part = stats[stats["mode"] == mode].set_index("level").reindex(levels)
        xs = [i + (k - (len(modes) - 1) / 2) * width for i in range(len(levels))]
        ax.bar(xs, part["mean"], width, yerr=part["std"], capsize=3, label=mode, color=_MODE_COLORS.get(mode))
    ax.set_xticks(range(len(levels)), levels)
    ax.set_ylabel("mean |error| (percentage points)")
    ax.set_title("hit-rate error by level and mode")
    ax.legend(fontsize=8)
    return _save(fig, path)


def _scatter(df: pd.DataFrame, path: Path) -> Path:
    """Every comparison: predicted against ground truth, with the diagonal."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(4.2, 4.2))
    for mode, part in df.groupby("mode"):
        ax.scatter(part["ground_truth"], part["predicted"], s=8, alpha=0.6, label=mode, color=_MODE_COLORS.get(mode))
    lo = float(min(df["ground_truth"].min(), df["predicted"].min()))
    ax.plot([lo, 1.0], [lo, 1.0], color="gray", linewidth=0.8)
    ax.set_xlabel("ground-truth cumulative hit rate")
    ax.set_ylabel("predicted cumulative hit rate")
    ax.legend(fontsize=8)
    return _save(fig, path)


def _safe(name: str) -> str:
    """A file-name-safe benchmark name."""
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in str(name))
