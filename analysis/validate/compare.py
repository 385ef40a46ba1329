"""The model's predicted hit rates compared with the ground truth of real multithreaded runs.

The model side is the normal pipeline (translate -> instrument -> one sequential trace ->
profiles -> hit rates), run per mode (iteration, paper) and interleave by pptmc/validation.py; the
ground truth is analysis.validate.groundtruth. Both are compared on the *cumulative* hit rate of each level, the
paper's Table-6 definition (1 - misses of this level and every level above / all accesses).
Errors are absolute, in percentage points. VALIDATION.md documents the outlier rules.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


MODES = ("iteration", "paper")
COLUMNS = ["benchmark", "machine", "cores", "level", "mode", "interleave", "predicted", "ground_truth",
           "abs_error_pp"]
# evidence the outlier rules use (kept next to each comparison row)
EVIDENCE = ["gt_invalidation_pp", "gt_fully_assoc", "gt_no_coherence", "error_vs_no_coherence_pp", "gt_placement_sd_pp",
            "gt_thread_imbalance", "model_core_imbalance",
            "gt_distinct_lines", "model_shared_cold", "shared_level", "gt_accesses", "model_accesses"]
CONFLICT_SHARE = 0.5     # conflict: set-assoc vs fully-assoc ground truth differ by >= half the error
SHARING_SHARE = 0.5      # sharing: invalidation misses (private) or lost sharing (shared) >= half the error
IMBALANCE_GAP = 0.10     # load imbalance: real and modelled max/mean per-core accesses differ by > 10 %


def split_evidence(profiles_dir: Path) -> pd.DataFrame:
    """Per core count: max / mean of the model's per-core access counts, and the distinct lines
    (cold misses) of its shared trace."""
    summary = pd.read_csv(Path(profiles_dir) / "summary.csv")
    if "class_bits" in summary:  # the plain profiles (per-set-class ones count the same accesses)
        summary = summary[summary["class_bits"] == 0]
    prd = summary[summary["kind"] == "prd"]
    imb = prd.groupby("cores")["total"].agg(lambda t: float(t.max() / t.mean()) if t.mean() > 0 else 1.0)
    cold = summary[summary["kind"] == "crd"].set_index("cores")["cold"]
    return pd.DataFrame({"model_core_imbalance": imb, "model_shared_cold": cold}).rename_axis("cores").reset_index()


def compare(gt: pd.DataFrame, model: pd.DataFrame, benchmark: str) -> pd.DataFrame:
    """Join model and ground truth on machine, cores, level and interleave; errors in percentage points."""
    g = gt.rename(columns={"cumulative_hit_rate": "ground_truth", "fa_cumulative_hit_rate": "gt_fully_assoc",
                           "nocoh_cumulative_hit_rate": "gt_no_coherence",
                           "thread_imbalance": "gt_thread_imbalance", "accesses": "gt_accesses",
                           "distinct_lines": "gt_distinct_lines", "shared": "shared_level"})
    g = g.assign(gt_invalidation_pp=100.0 * g["invalidations"] / g["gt_accesses"].clip(lower=1),
                 gt_placement_sd_pp=100.0 * g["placement_sd"] if "placement_sd" in g else np.nan)
    m = model.rename(columns={"cumulative_hit_rate": "predicted", "accesses": "model_accesses"})
    df = m.merge(g, on=["machine", "cores", "level", "interleave"], how="inner")
    df["benchmark"] = benchmark
    df["abs_error_pp"] = 100.0 * (df["predicted"] - df["ground_truth"]).abs()
    df["error_vs_no_coherence_pp"] = 100.0 * (df["predicted"] - df["gt_no_coherence"]).abs()
    return df[COLUMNS + EVIDENCE].sort_values(["machine", "mode", "interleave", "cores", "level"],
                                              ignore_index=True)


def accuracy_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Mean and max absolute error (pp) per level × mode × interleave, over all machines ("all") and per machine."""
    keys = ["level", "mode", "interleave"]
    agg = {"mean_abs_error_pp": ("abs_error_pp", "mean"), "max_abs_error_pp": ("abs_error_pp", "max"),
           "rows": ("abs_error_pp", "size")}
    if "error_vs_no_coherence_pp" in df:  # the error left when the ground truth has no coherence misses
        agg["mean_abs_error_no_coherence_pp"] = ("error_vs_no_coherence_pp", "mean")
    overall = df.groupby(keys, as_index=False).agg(**agg).assign(machine="all")
    per = df.groupby(["machine", *keys], as_index=False).agg(**agg)
    return pd.concat([overall, per], ignore_index=True)[["machine", *keys, *agg]]


def outliers(df: pd.DataFrame, threshold_pp: float = 3.0) -> pd.DataFrame:
    """Every comparison row above `threshold_pp`, with the broken assumption its evidence points to."""
    keys = ["benchmark", "machine", "cores", "level", "interleave"]
    ok = (df["abs_error_pp"] <= threshold_pp).astype(int)
    other_ok = ok.groupby([df[k] for k in keys]).transform("sum") - ok  # same comparison, other mode
    bad = df[df["abs_error_pp"] > threshold_pp]
    diagnosis = [diagnose(row, bool(o > 0)) for row, o in zip(bad.itertuples(index=False), other_ok[bad.index])]
    return bad.assign(diagnosis=pd.Series(diagnosis, index=bad.index, dtype=str)).reset_index(drop=True)


def diagnose(row, other_mode_ok: bool = False) -> str:
    """The rules of VALIDATION.md, in order; every rule whose evidence holds is named."""
    err = row.abs_error_pp
    found = []
    spread = getattr(row, "gt_placement_sd_pp", np.nan)
    if spread == spread and 2.0 * spread >= err:
        found.append("page placement")
    fa = getattr(row, "gt_fully_assoc", np.nan)
    if fa == fa and 100.0 * abs(fa - row.ground_truth) >= CONFLICT_SHARE * err:
        found.append("conflict misses")
    if row.cores > 1:
        lost = 100.0 * (getattr(row, "model_shared_cold", 0) - getattr(row, "gt_distinct_lines", 0)) / max(
            getattr(row, "gt_accesses", 1), 1)  # lines the model's shared trace has that the real run shares
        nocoh = getattr(row, "gt_no_coherence", np.nan)
        coherence_pp = 100.0 * abs(nocoh - row.ground_truth) if nocoh == nocoh else 0.0
        if max(getattr(row, "gt_invalidation_pp", 0.0), coherence_pp) >= SHARING_SHARE * err or (
                getattr(row, "shared_level", False) and lost >= SHARING_SHARE * err):
            found.append("sharing")
        gt_imb, model_imb = getattr(row, "gt_thread_imbalance", 1.0), getattr(row, "model_core_imbalance", 1.0)
        if model_imb == model_imb and abs(gt_imb - model_imb) > IMBALANCE_GAP * model_imb:
            found.append("load imbalance")
        if other_mode_ok and not found:  # weakest evidence: only when nothing more direct explains it
            found.append("schedule")
    if found:
        return "; ".join(found)
    ratio = getattr(row, "model_accesses", 0) / max(getattr(row, "gt_accesses", 1), 1)
    if abs(ratio - 1.0) > IMBALANCE_GAP:
        return f"none of the four: translation (the model's trace has {ratio:.2f}x the real accesses)"
    return "none of the four: translation or hierarchy effects"
