"""Human-readable suite report: figures in the style of the paper's Fig. 5-6 and 8-10, and index.html.

Built only from the machine-readable tables, so the report can be regenerated without rerunning.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from common.io import atomic_path, write_text


def _pyplot():
    """Matplotlib with a file-only backend (CI and servers have no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
    _pyplot().close(fig)
    return path


def hit_rate_figure(hits: pd.DataFrame, machine: str, path: Path) -> Path:
    """Fig. 5-6 style: predicted hit rate per level, one panel per core count, bars per benchmark."""
    plt = _pyplot()
    data = hits[hits["machine"] == machine]
    cores = sorted(data["cores"].unique())
    levels = sorted(data["level"].unique())
    benchmarks = list(dict.fromkeys(data["benchmark"]))
    fig, axes = plt.subplots(len(cores), 1, figsize=(max(8, len(benchmarks) * 0.8), 2.8 * len(cores)), squeeze=False,
                             constrained_layout=True)
    width = 0.8 / max(1, len(levels))
    x = np.arange(len(benchmarks))
    for ax, ncores in zip(axes[:, 0], cores):
        panel = data[data["cores"] == ncores].set_index(["benchmark", "level"])["cumulative_hit_rate"]
        for i, level in enumerate(levels):
            values = [panel.get((b, level), np.nan) for b in benchmarks]
            ax.bar(x + i * width, values, width, label=f"Model {level}")
        ax.set_ylim(max(0.0, float(np.nanmin(panel.values)) - 0.05) if len(panel) else 0, 1.0)
        ax.set_title(f"{machine}: {ncores} core{'s' if ncores > 1 else ''}", fontsize=9)
        ax.set_xticks(x + width * (len(levels) - 1) / 2, benchmarks, rotation=30, fontsize=8)
        ax.set_ylabel("hit rate")
    axes[0, 0].legend(ncol=len(levels), fontsize=8)
    return _save(fig, path)


def runtime_figure(runs: pd.DataFrame, machine: str, path: Path) -> Path:
    """Fig. 8-10 style: predicted parallel-region runtime per benchmark and core count."""
    plt = _pyplot()
    data = runs[runs["machine"] == machine]
    table = data.pivot_table(index="benchmark", columns="cores", values="runtime_s")
    fig, ax = plt.subplots(figsize=(max(8, len(table) * 0.8), 3.5))
    table.plot.bar(ax=ax, logy=True, rot=30)
    ax.set_ylabel("predicted runtime (s)")
    ax.set_title(f"{machine}: predicted parallel-region runtime")
    ax.legend(title="cores", fontsize=8)
    return _save(fig, path)


def reuse_profile_figure(name: str, profiles_dir: Path, path: Path) -> Path | None:
    """Cumulative reuse-distance distribution (PRD of core 0 and CRD) for each core count."""
    from analysis.profiles.profileset import ProfileSet

    plt = _pyplot()
    profiles = ProfileSet.load(profiles_dir)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.2), sharey=True)
    for ncores in sorted(profiles.crd):
        for ax, profile, title in ((axes[0], profiles.prd[(ncores, 0)], "PRD (core 0)"),
                                   (axes[1], profiles.crd[ncores], "CRD (shared)")):
            distances, cdf = _cdf(profile)
            ax.step(np.maximum(distances, 1), cdf, where="post", label=f"{ncores} cores")
            ax.set_xscale("log")
            ax.set_title(f"{name}: {title}", fontsize=9)
            ax.set_xlabel("reuse distance (cache lines)")
    axes[0].set_ylabel("P(D <= x)")
    axes[1].legend(fontsize=8)
    return _save(fig, path)


def _cdf(profile) -> tuple[np.ndarray, np.ndarray]:
    """P(D <= lower edge) over all accesses, cold misses counted as infinite distance."""
    lower = np.asarray(profile.lower, dtype=float)
    counts = np.asarray(profile.count, dtype=float)
    order = np.argsort(lower)
    total = max(float(profile.total), 1.0)
    return lower[order], np.cumsum(counts[order]) / total


@dataclass
class ReportSection:
    """An extra part of index.html (e.g. validation): figures first, then tables."""

    title: str
    figures: list[tuple[str, Path]] = field(default_factory=list)
    tables: list[tuple[str, pd.DataFrame]] = field(default_factory=list)


def _section_html(section: ReportSection, outdir: Path) -> list[str]:
    parts = [f"<h2>{html.escape(section.title)}</h2>"]
    parts += [f"<h3>{html.escape(title)}</h3><img src='{p.relative_to(outdir)}' style='max-width:100%'>"
              for title, p in section.figures if p is not None]
    for title, table in section.tables:
        parts += [f"<h3>{html.escape(title)}</h3>", _table_html(table)]
    return parts


def _table_html(df: pd.DataFrame) -> str:
    return df.to_html(index=False, float_format=lambda v: f"{v:.4g}", border=0, classes="t") if not df.empty else "<p>none</p>"


def _incomplete_banner(status: pd.DataFrame) -> list[str]:
    """A warning above everything when a benchmark's trace was cut short (its results say so too)."""
    cut = status["trace_complete"].eq(False) if "trace_complete" in status.columns else None
    if cut is None or not cut.any():
        return []
    names = ", ".join(status.loc[cut, "benchmark"].astype(str))
    return [f"<p style='background:#fdd;padding:0.5em'><b>Incomplete traces:</b> {html.escape(names)} "
            f"(the program crashed or was cut short while traced; their rows say trace_complete = false)</p>"]


def write_report(outdir: Path, hits: pd.DataFrame, runs: pd.DataFrame, status: pd.DataFrame,
                 profile_dirs: dict[str, Path], extra: Sequence[ReportSection] = (), model: str = "") -> Path:
    """Write figures under outdir/figures and an index.html that shows them with the tables; `model` is
    the ModelOptions line the predictions were made with."""
    figdir = outdir / "figures"
    figures: list[tuple[str, Path]] = []
    machines = list(dict.fromkeys(hits["machine"])) if not hits.empty else []
    for machine in machines:
        figures.append((f"Hit rates, {machine}", hit_rate_figure(hits, machine, figdir / f"hitrates-{machine}.png")))
        if not runs.empty and "runtime_s" in runs.columns:
            figures.append((f"Runtimes, {machine}", runtime_figure(runs, machine, figdir / f"runtimes-{machine}.png")))
    for name, pdir in profile_dirs.items():
        figures.append((f"Reuse profiles, {name}", reuse_profile_figure(name, pdir, figdir / f"reuse-{name}.png")))
    body = ["<h1>pptmc suite results</h1>", f"<p>Model: <code>{html.escape(model)}</code></p>" if model else "",
            *_incomplete_banner(status), "<h2>Status</h2>", _table_html(status)]
    body += [f"<h2>{html.escape(title)}</h2><img src='{p.relative_to(outdir)}' style='max-width:100%'>"
             for title, p in figures if p is not None]
    for section in extra:
        body += _section_html(section, outdir)
    body += ["<h2>Hit rates</h2>", _table_html(hits), "<h2>Runtimes</h2>", _table_html(runs)]
    style = "<style>body{font-family:sans-serif;margin:2em} table.t{border-collapse:collapse;font-size:12px}" \
            "table.t td,table.t th{padding:2px 6px;border-bottom:1px solid #ddd}</style>"
    index = outdir / "index.html"
    write_text(index, f"<!doctype html><html><head><meta charset='utf-8'><title>pptmc results</title>{style}"
                      f"</head><body>{''.join(body)}</body></html>\n")
    return index
