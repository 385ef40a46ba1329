"""The whole pipeline for one OpenMP program: translate → instrument → trace → profile → predict.

Each step writes into its own folder under `workdir` and is skipped when a content key over
its inputs and parameters matches the previous run (see common.cache). Stages are reached only
through their public APIs.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import pandas as pd

from common.cache import code_digest, is_fresh, mark_done, step_key
from common.io import stdout_to_file, write_table

if TYPE_CHECKING:
    from analysis.runtime.trace_terms import TraceTerms

Progress = Callable[[str], None]


@dataclass(frozen=True)
class PipelineConfig:
    """What to analyse and how; everything a cached artifact depends on."""

    source: Path
    workdir: Path
    args: tuple[str, ...] = ()
    include_dirs: tuple[Path, ...] = ()
    defines: tuple[str, ...] = ()
    extra_sources: tuple[Path, ...] = ()
    machines: tuple[str, ...] = ("haswell-i7-5960x",)
    cores: tuple[int, ...] = (1, 2, 4, 8, 16)
    mode: str = "auto"
    interleave: str = "rr"
    seed: int = 0
    opt_level: str = "2"
    line_size: int = 64
    coherence: bool = True         # write-invalidate coherence in the private profiles (analysis/ANALYSIS.md)
    layout: str = "pipelined"      # memory-time form (analysis/RUNTIME_MODEL.md); "contiguous" is the paper's
    contention: str = "roofline"   # DRAM contention model: "roofline" or "queuing"
    cpu_form: str = "critical-path"  # T_CPU form (analysis/RUNTIME_MODEL.md); "throughput" is the paper's


def benchmark_config(bench, size: str, outdir: Path, **options) -> PipelineConfig:
    """The pipeline configuration of one catalog benchmark at one size; its cached steps live in
    outdir/work/<name>, and `options` are PipelineConfig's model fields."""
    from benchmarks.polybench.catalog import size_define

    return PipelineConfig(
        source=bench.source, workdir=Path(outdir) / "work" / bench.name, args=tuple(bench.args),
        include_dirs=(bench.include_dir,), defines=(size_define(size).removeprefix("-D"),),
        extra_sources=tuple(bench.harness_sources), **options)


@dataclass
class PipelineResult:
    """Machine-readable results of one program; the report is built from these alone."""

    name: str
    hit_rates: pd.DataFrame
    runtimes: pd.DataFrame
    trace_path: Path
    profiles_dir: Path
    n_accesses: int
    timings: dict[str, float] = field(default_factory=dict)
    tlb_rates: pd.DataFrame | None = None   # cores, level, miss_rate, accesses, machine (machines with [[tlbs]])
    coherence: dict[int, float] = field(default_factory=dict)  # cores -> coherence-miss fraction of the profiles
    terms: dict[str, TraceTerms] = field(default_factory=dict)  # machine name -> its trace facts (trace_terms.py)


def _noop(_: str) -> None:
    return None


def translate_step(cfg: PipelineConfig, progress: Progress) -> Path:
    """Outline the parallel regions into ROSE-style C (cached)."""
    import translate

    out = cfg.workdir / "translate" / f"{cfg.source.stem}.xomp.c"
    headers = [p for d in cfg.include_dirs for p in Path(d).glob("*.h")]
    key = step_key([cfg.source, *headers], {"I": cfg.include_dirs, "D": cfg.defines,
                                            "code": code_digest("translate")})
    stamp = out.parent / ".key"
    if not is_fresh(stamp, key, [out]):
        progress("translate")
        translate.translate_file(cfg.source, out, include_dirs=cfg.include_dirs, defines=cfg.defines)
        mark_done(stamp, key)
    return out


def _runtime_parts() -> tuple[list[Path], list[Path]]:
    """XOMP runtime C files and their include folders, as translate ships them."""
    import translate

    parts = [Path(p) for p in translate.runtime_sources()]
    sources = [p for p in parts if p.suffix == ".c"]
    includes = sorted({p if p.is_dir() else p.parent for p in parts})
    return sources, includes


def build_benchmark_binaries(bench, size: str, workdir: Path, modes=("count", "trace")) -> dict[str, Path]:
    """Translate one catalog benchmark at `size` as the pipeline does and build one instrumented
    binary per mode (uncached: for tests and benchmarks that compare builds)."""
    import instrument
    import translate
    from benchmarks.polybench.catalog import size_macro

    xomp_sources, xomp_includes = _runtime_parts()
    defines = (size_macro(size),)
    translated = Path(workdir) / f"{bench.name}.xomp.c"
    translate.translate_file(bench.source, translated, include_dirs=[bench.include_dir], defines=defines)
    binaries = {}
    for mode in modes:
        binaries[mode] = Path(workdir) / f"{mode}.inst"
        instrument.build_instrumented(translated, binaries[mode], mode=mode, defines=defines,
                                      include_dirs=(bench.include_dir, *xomp_includes),
                                      extra_sources=[*xomp_sources, *bench.harness_sources])
    return binaries


def instrument_step(cfg: PipelineConfig, translated: Path, progress: Progress) -> Path:
    """Build the instrumented binary of the translated program (cached)."""
    import instrument

    xomp_sources, xomp_includes = _runtime_parts()
    extra = [*xomp_sources, *cfg.extra_sources]
    binary = cfg.workdir / "instrument" / f"{cfg.source.stem}.inst"
    includes = (*cfg.include_dirs, *xomp_includes)
    key = step_key([translated, *extra], {"I": includes, "D": cfg.defines, "O": cfg.opt_level,
                                          "code": code_digest("passes", "instrument")})
    stamp = binary.parent / ".key"
    if not is_fresh(stamp, key, [binary, instrument.assembly_path(binary)]):
        progress("instrument")
        instrument.build_instrumented(translated, binary, opt_level=cfg.opt_level, include_dirs=includes,
                                      defines=cfg.defines, extra_sources=extra)
        mark_done(stamp, key)
    return binary


def trace_step(cfg: PipelineConfig, binary: Path, progress: Progress) -> Path:
    """Record the sequential trace of the parallel regions (cached)."""
    import instrument

    trace = cfg.workdir / "trace" / f"{cfg.source.stem}.pptrace"
    key = step_key([binary], {"args": cfg.args})
    stamp = trace.parent / ".key"
    if not is_fresh(stamp, key, [trace]):
        progress("trace")
        with stdout_to_file(trace.parent / "program.out"):  # the program's own output, kept apart
            instrument.run_trace(binary, list(cfg.args), trace, threads=1)
        mark_done(stamp, key)
    return trace


def profile_step(cfg: PipelineConfig, trace: Path, progress: Progress) -> Path:
    """Private and concurrent reuse profiles for every core count (cached)."""
    from analysis.profiles.sweep import compute_profiles

    out = cfg.workdir / "profiles"
    params = {"cores": cfg.cores, "mode": cfg.mode, "interleave": cfg.interleave, "seed": cfg.seed,
              "line": cfg.line_size, "coherence": cfg.coherence, "code": code_digest("analysis")}
    key = step_key([trace], params)
    stamp = out / ".key"
    if not is_fresh(stamp, key, [out]):
        progress("profile")
        profiles = compute_profiles(trace, list(cfg.cores), mode=cfg.mode, interleave=cfg.interleave,
                                    seed=cfg.seed, line_size=cfg.line_size, coherence=cfg.coherence)
        profiles.save(out)
        mark_done(stamp, key)
    return out


def page_profile_step(cfg: PipelineConfig, trace: Path, page_bytes: int, progress: Progress) -> Path:
    """Private reuse profiles at page granularity, for the TLB levels of the machines (cached)."""
    from analysis.runtime.tlb import page_profiles

    out = cfg.workdir / f"page_profiles_{page_bytes}"
    params = {"cores": cfg.cores, "mode": cfg.mode, "interleave": cfg.interleave, "seed": cfg.seed,
              "page": page_bytes, "code": code_digest("analysis")}
    key = step_key([trace], params)
    stamp = out / ".key"
    if not is_fresh(stamp, key, [out]):
        progress(f"profile pages of {page_bytes} B (TLB)")
        page_profiles(trace, cfg.cores, page_bytes, cfg.mode, cfg.interleave, cfg.seed).save(out)
        mark_done(stamp, key)
    return out


def _trace_table(out: Path, trace: Path, params: dict, what: str, compute: Callable[[], pd.DataFrame],
                 progress: Progress) -> pd.DataFrame:
    """A table one pass over the trace gives, kept in `out` until the trace, `params` or the analysis code change."""
    key = step_key([trace], {**params, "code": code_digest("analysis")})
    stamp = out.with_suffix(".key")
    if not is_fresh(stamp, key, [out]):
        progress(what)
        write_table(compute(), out)
        mark_done(stamp, key)
    return pd.read_csv(out)


def trace_terms_step(cfg: PipelineConfig, trace: Path, machine, progress: Progress) -> TraceTerms:
    """The trace facts this machine prices (analysis/runtime/trace_terms.py), each table cached in the work directory."""
    from analysis.runtime.trace_terms import trace_terms

    def cached(name: str, params: dict, what: str, compute) -> pd.DataFrame:
        stem = "_".join(f"{key}{value}" for key, value in params.items())
        return _trace_table(cfg.workdir / name / f"{stem}.csv", trace, params, what, compute, progress)

    return trace_terms(trace, machine, cfg.cpu_form, cached)


def tlb_rates_for(cfg: PipelineConfig, machine, trace: Path, progress: Progress) -> pd.DataFrame | None:
    """The machine's TLB miss rates per core count, or None when its file has no [[tlbs]]."""
    from analysis.profiles.profileset import ProfileSet
    from analysis.runtime.tlb import page_sizes, tlb_miss_rates

    if not machine.tlbs:
        return None
    sets = {page: ProfileSet.load(page_profile_step(cfg, trace, page, progress)) for page in page_sizes(machine)}
    return tlb_miss_rates(sets, machine)


@dataclass
class Predictions:
    """What predict_step returns: tables per machine, plus the trace facts some machines need."""

    hit_rates: pd.DataFrame
    runtimes: pd.DataFrame
    tlb_rates: pd.DataFrame | None = None     # machines with [[tlbs]] only
    coherence: dict[int, float] = field(default_factory=dict)  # cores -> coherence-miss fraction
    terms: dict[str, TraceTerms] = field(default_factory=dict)  # machine name -> its trace facts


def hit_rates_step(cfg: PipelineConfig, profiles_dir: Path) -> pd.DataFrame:
    """SDCM hit rates on every requested machine, one table with a machine column (no runtimes)."""
    from analysis.hitrates.rates import predict_hit_rates
    from analysis.profiles.profileset import ProfileSet
    from machines import load_machine

    profiles = ProfileSet.load(profiles_dir)
    machines = [load_machine(name) for name in cfg.machines]
    return pd.concat([predict_hit_rates(profiles, m).assign(machine=m.name) for m in machines], ignore_index=True)


def predict_step(cfg: PipelineConfig, profiles_dir: Path, trace: Path, binary: Path,
                 progress: Progress) -> Predictions:
    """Hit rates, runtimes and the TLB and store-line facts on every requested machine."""
    from analysis.hitrates.rates import coherence_miss_rates
    from analysis.profiles.profileset import ProfileSet
    from analysis.runtime.model import predict_table
    from machines import load_machine

    progress("predict")
    coherence = coherence_miss_rates(ProfileSet.load(profiles_dir))
    machines = [load_machine(name) for name in cfg.machines]
    terms = {m.name: trace_terms_step(cfg, trace, m, progress) for m in machines}
    all_hits = hit_rates_step(cfg, profiles_dir)
    runtime_frames, tlb_frames = [], []
    for machine in machines:
        hits = all_hits[all_hits["machine"] == machine.name]
        tlb = tlb_rates_for(cfg, machine, trace, progress)
        if tlb is not None:
            tlb_frames.append(tlb.assign(machine=machine.name))
        runtimes = predict_table(machine, hits, trace, binary, tlb=tlb, coherence=coherence, terms=terms[machine.name],
                                 layout=cfg.layout, contention=cfg.contention, cpu_form=cfg.cpu_form)
        runtime_frames.append(runtimes.assign(machine=machine.name))
    return Predictions(all_hits, pd.concat(runtime_frames, ignore_index=True),
                       pd.concat(tlb_frames, ignore_index=True) if tlb_frames else None, coherence, terms)


def run_pipeline(cfg: PipelineConfig, progress: Progress = _noop) -> PipelineResult:
    """Run every step for one program and write its result tables into `workdir`."""
    timings: dict[str, float] = {}

    def timed(name, fn, *args):
        start = time.perf_counter()
        value = fn(*args)
        timings[name] = time.perf_counter() - start
        return value

    translated = timed("translate", translate_step, cfg, progress)
    binary = timed("instrument", instrument_step, cfg, translated, progress)
    trace = timed("trace", trace_step, cfg, binary, progress)
    profiles_dir = timed("profile", profile_step, cfg, trace, progress)
    pred = timed("predict", predict_step, cfg, profiles_dir, trace, binary, progress)
    write_table(pred.hit_rates, cfg.workdir / "hit_rates.csv")
    write_table(pred.runtimes, cfg.workdir / "runtimes.csv")
    if pred.tlb_rates is not None:
        write_table(pred.tlb_rates, cfg.workdir / "tlb_miss_rates.csv")
    import instrument

    n_accesses = instrument.open_trace(trace).info.n_accesses
    return PipelineResult(cfg.source.stem, pred.hit_rates, pred.runtimes, trace, profiles_dir, n_accesses, timings,
                          pred.tlb_rates, pred.coherence, pred.terms)
