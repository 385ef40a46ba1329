"""The whole pipeline for one OpenMP program: translate → instrument → trace → profile → predict.

Each step writes into its own folder under `workdir` and is skipped when a content key over
its inputs and parameters matches the previous run (see common.cache). Stages are reached only
through their public APIs.
"""
from __future__ import annotations

import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import pandas as pd

from analysis.options import DEFAULT_OPTIONS, ModelOptions
from common.cache import code_digest, reuse_or_invalidate, mark_done, step_key
from common.errors import InputError
from common.io import program_output_to, write_json, write_table
from common.locks import folder_lock, output_folder

if TYPE_CHECKING:  # the analysis stages load numba: imported where a step runs
    from analysis.predict import RegionSources
    from analysis.runtime.trace_terms import TraceTerms

Progress = Callable[[str], None]


@dataclass(frozen=True)
class PipelineConfig:
    """What to analyse and how; everything a cached artifact depends on."""

    source: Path                              # the file that names the program (its main, usually)
    workdir: Path
    args: tuple[str, ...] = ()
    more_sources: tuple[Path, ...] = ()       # the program's other C files (each translated when it has OpenMP)
    include_dirs: tuple[Path, ...] = ()
    defines: tuple[str, ...] = ()
    extra_sources: tuple[Path, ...] = ()
    machines: tuple[str, ...] = ("haswell-i7-5960x",)
    cores: tuple[int, ...] = (1, 2, 4, 8, 16)
    options: ModelOptions = DEFAULT_OPTIONS   # the model (analysis/options.py), the same for every command
    opt_level: str = "2"
    line_size: int = 64
    dram_traffic: bool = False                # also predict DRAM read and write-back bytes (a pass more)


def benchmark_config(bench, size: str, outdir: Path, **fields) -> PipelineConfig:
    """The pipeline configuration of one catalog benchmark at one size; its cached steps live in
    outdir/work/<name>, and `fields` are PipelineConfig's (machines, cores, options)."""
    from benchmarks.polybench.catalog import size_define

    return PipelineConfig(
        source=bench.source, workdir=Path(outdir) / "work" / bench.name, args=tuple(bench.args),
        include_dirs=(bench.include_dir,), defines=(size_define(size).removeprefix("-D"),),
        extra_sources=tuple(bench.harness_sources), **fields)


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
    trace_complete: bool = True               # False: the program crashed or was cut short while traced


def _noop(_: str) -> None:
    return None


@dataclass(frozen=True)
class Translation:
    """The program's files after translation: what is instrumented, and what is compiled as it is."""

    main: Path                                # the first file with OpenMP, translated
    others: tuple[Path, ...] = ()             # the other files with OpenMP, translated (instrumented too)
    plain: tuple[Path, ...] = ()              # the other files without OpenMP, as they are

    @property
    def files(self) -> tuple[Path, ...]:
        return (self.main, *self.others, *self.plain)


_OPENMP = re.compile(r"^\s*#\s*pragma\s+omp\b", re.M)


def translate_step(cfg: PipelineConfig, progress: Progress) -> Translation:
    """Outline the parallel regions of every file that has OpenMP into ROSE-style C (each cached); the
    program's other files are compiled as they are. A lone file is always translated (the translator
    says why one without a parallel region cannot be)."""
    sources = [cfg.source, *map(Path, cfg.more_sources)]
    translated, plain = [], []
    for k, source in enumerate(sources):
        if len(sources) > 1 and not _OPENMP.search(source.read_text(errors="replace")):
            plain.append(source)
            continue
        name = f"{source.stem}.xomp.c" if k == 0 else f"{k}-{source.stem}.xomp.c"
        translated.append(_translate_file(cfg, source, cfg.workdir / "translate" / name, progress))
    if not translated:
        raise InputError(f"{', '.join(s.name for s in sources)}: no file has an OpenMP pragma; pptmc predicts "
                         f"OpenMP programs, so give it the files whose code starts a parallel region")
    return Translation(translated[0], tuple(translated[1:]), tuple(plain))


def _translate_file(cfg: PipelineConfig, source: Path, out: Path, progress: Progress) -> Path:
    """One file's translation, reused while the file, its headers and the translator are unchanged."""
    import translate

    key = step_key([source, *_headers(cfg)], {"I": cfg.include_dirs, "D": cfg.defines,
                                              "code": code_digest("translate")})
    stamp = out.with_name(f".{out.name}.key")
    if not reuse_or_invalidate(stamp, key, [out]):
        progress(f"translate {source.name}")
        result = translate.translate_file(source, out, include_dirs=cfg.include_dirs, defines=cfg.defines)
        write_json(_regions_file(out), [{"region": r.name, "where": r.where, "file": r.file, "line": r.line,
                                         "schedules": r.schedule_text()} for r in result.regions])
        mark_done(stamp, key)
    return out


def _regions_file(translated: Path) -> Path:
    """Where a translation's region list is kept (outlined name -> file:line)."""
    return translated.with_name(translated.name + ".regions.json")


def regions_table(translation: Translation) -> pd.DataFrame:
    """Every traced parallel region of the program: its outlined function and the file:line users know."""
    rows = [row for t in (translation.main, *translation.others) for row in json.loads(_regions_file(t).read_text())]
    return pd.DataFrame(rows, columns=["region", "where", "file", "line", "schedules"])


def _headers(cfg: PipelineConfig) -> list[Path]:
    """The headers a build of the program may read: its files' folders' and those of its include folders."""
    folders = dict.fromkeys([cfg.source.parent, *(Path(s).parent for s in cfg.more_sources),
                             *map(Path, cfg.include_dirs)])
    return sorted({p for d in folders for p in Path(d).glob("*.h")})


def build_benchmark_binaries(bench, size: str, workdir: Path, modes=("count", "trace")) -> dict[str, Path]:
    """Translate one catalog benchmark at `size` as the pipeline does and build one instrumented
    binary per mode (uncached: for tests and benchmarks that compare builds)."""
    import instrument
    import translate
    from benchmarks.polybench.catalog import size_macro

    defines = (size_macro(size),)
    translated = Path(workdir) / f"{bench.name}.xomp.c"
    translate.translate_file(bench.source, translated, include_dirs=[bench.include_dir], defines=defines)
    binaries = {}
    for mode in modes:  # the XOMP runtime and the source's folder come from the translation's marker
        binaries[mode] = Path(workdir) / f"{mode}.inst"
        instrument.build_instrumented(translated, binaries[mode], mode=mode, defines=defines,
                                      include_dirs=(bench.include_dir,), extra_sources=bench.harness_sources)
    return binaries


def instrument_step(cfg: PipelineConfig, translated: Translation, progress: Progress) -> Path:
    """Build the instrumented binary of the translated program (cached)."""
    import instrument

    binary = cfg.workdir / "instrument" / f"{cfg.source.stem}.inst"
    # the translation's marker names the XOMP runtime and the source's folder (translate/buildinfo.py)
    key = step_key([*translated.files, *cfg.extra_sources, *_headers(cfg)],
                   {"I": cfg.include_dirs, "D": cfg.defines, "O": cfg.opt_level,
                    "code": code_digest("passes", "instrument", "translate")})
    stamp = binary.parent / ".key"
    if not reuse_or_invalidate(stamp, key, [binary, instrument.assembly_path(binary)]):
        progress("instrument")
        instrument.build_instrumented(translated.main, binary, opt_level=cfg.opt_level,
                                      include_dirs=cfg.include_dirs, defines=cfg.defines,
                                      extra_sources=(*translated.plain, *cfg.extra_sources),
                                      more_sources=translated.others)
        mark_done(stamp, key)
    return binary


def trace_step(cfg: PipelineConfig, binary: Path, progress: Progress) -> Path:
    """Record the sequential trace of the parallel regions (cached)."""
    import instrument

    trace = cfg.workdir / "trace" / f"{cfg.source.stem}.pptrace"
    key = step_key([binary], {"args": cfg.args, "pieces": sorted(cfg.cores)})
    stamp = trace.parent / ".key"
    if not reuse_or_invalidate(stamp, key, [trace]):
        progress("trace")
        with program_output_to(trace.parent / "program.out"):  # the program's own output, kept apart
            instrument.run_trace(binary, list(cfg.args), trace, threads=1, piece_cores=cfg.cores)
        mark_done(stamp, key)
    return trace


def profile_step(cfg: PipelineConfig, trace: Path, progress: Progress, bar: bool = False) -> Path:
    """Private and concurrent reuse profiles for every core count (cached); `bar`: show the sweep's
    progress bar (the longest stage) on stderr."""
    from analysis.hitrates.rates import profile_needs
    from analysis.profiles.sweep import compute_profiles
    from machines import load_machine

    out = cfg.workdir / "profiles"
    opt = cfg.options
    needs = profile_needs([load_machine(name) for name in cfg.machines], cfg.cores, opt.hit_rates, opt.placement)
    params = {"cores": cfg.cores, "mode": opt.mode, "interleave": opt.interleave, "seed": opt.seed,
              "line": cfg.line_size, "coherence": opt.coherence, "class_bits": needs.class_bits,
              "groupings": needs.groupings, "writebacks": cfg.dram_traffic, "class_crds": needs.class_crds,
              "writeback_bits": needs.writeback_bits if cfg.dram_traffic else 0,
              "code": code_digest("analysis")}
    key = step_key([trace], params)
    stamp = out / ".key"
    if not reuse_or_invalidate(stamp, key, [out]):
        from analysis.profiles.limits import check_memory

        check_memory(list(cfg.cores), str(trace), cfg.line_size, needs.class_bits, needs.groupings)
        progress("profile")
        profiles = compute_profiles(trace, list(cfg.cores), mode=opt.mode, interleave=opt.interleave,
                                    seed=opt.seed, line_size=cfg.line_size, coherence=opt.coherence, progress=bar,
                                    writebacks=cfg.dram_traffic, **needs._asdict())
        with output_folder(out, "pptmc profile (pipeline step)") as folder:  # replaced whole, with a manifest
            profiles.save(folder)
        mark_done(stamp, key)
    return out


def page_profile_step(cfg: PipelineConfig, trace: Path, page_bytes: int, progress: Progress) -> Path:
    """Private reuse profiles at page granularity, for the TLB levels of the machines (cached)."""
    from analysis.runtime.tlb import page_profiles

    out = cfg.workdir / f"page_profiles_{page_bytes}"
    opt = cfg.options
    params = {"cores": cfg.cores, "mode": opt.mode, "interleave": opt.interleave, "seed": opt.seed,
              "page": page_bytes, "code": code_digest("analysis")}
    key = step_key([trace], params)
    stamp = out / ".key"
    if not reuse_or_invalidate(stamp, key, [out]):
        progress(f"profile pages of {page_bytes} B (TLB)")
        page_profiles(trace, cfg.cores, page_bytes, opt.mode, opt.interleave, opt.seed).save(out)
        mark_done(stamp, key)
    return out


def _trace_table(out: Path, trace: Path, params: dict, what: str, compute: Callable[[], pd.DataFrame],
                 progress: Progress) -> pd.DataFrame:
    """A table one pass over the trace gives, kept in `out` until the trace, `params` or the analysis code change."""
    key = step_key([trace], {**params, "code": code_digest("analysis")})
    stamp = out.with_suffix(".key")
    if not reuse_or_invalidate(stamp, key, [out]):
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

    return trace_terms(trace, machine, cfg.options.cpu_form, cached)


@dataclass
class Predictions:
    """What predict_step returns: tables per machine, plus the trace facts some machines need."""

    hit_rates: pd.DataFrame
    runtimes: pd.DataFrame
    tlb_rates: pd.DataFrame | None = None     # machines with [[tlbs]] only
    coherence: dict[int, float] = field(default_factory=dict)  # cores -> coherence-miss fraction
    terms: dict[str, TraceTerms] = field(default_factory=dict)  # machine name -> its trace facts
    n_accesses: int = 0                       # the trace's memory accesses
    trace_complete: bool = True               # the trace's footer says the run ended normally
    dram: pd.DataFrame | None = None          # DRAM traffic (PipelineConfig.dram_traffic)


def region_sources(cfg: PipelineConfig, profiles_dir: Path, trace: Path, binary: Path | None,
                   progress: Progress) -> RegionSources:
    """The program's facts for analysis/predict.py, each taken from (or made into) the cached steps."""
    from analysis.predict import RegionSources
    from analysis.profiles.profileset import ProfileSet

    return RegionSources(
        trace=trace, binary=binary, profiles=ProfileSet.load(profiles_dir),
        terms_for=lambda machine: trace_terms_step(cfg, trace, machine, progress),
        page_profiles_for=lambda page: ProfileSet.load(page_profile_step(cfg, trace, page, progress)))


def hit_rates_step(cfg: PipelineConfig, profiles_dir: Path, trace: Path) -> pd.DataFrame:
    """Hit rates alone (no runtimes) on every requested machine, one table with a machine column."""
    from analysis.predict import predict_hit_rates_for
    from machines import load_machine

    sources = region_sources(cfg, profiles_dir, trace, None, _noop)
    return pd.concat([predict_hit_rates_for(sources, load_machine(name), cfg.cores, cfg.options)
                      for name in cfg.machines], ignore_index=True)


def predict_step(cfg: PipelineConfig, profiles_dir: Path, trace: Path, binary: Path,
                 progress: Progress) -> Predictions:
    """Hit rates, runtimes and the TLB and trace facts on every requested machine (analysis/predict.py)."""
    from analysis.predict import predict_machine
    from machines import load_machine

    progress("predict")
    sources = region_sources(cfg, profiles_dir, trace, binary, progress)
    preds = [predict_machine(sources, load_machine(name), cfg.cores, cfg.options) for name in cfg.machines]
    tlb_frames = [p.tlb_rates for p in preds if p.tlb_rates is not None]
    dram_frames = [p.dram for p in preds if p.dram is not None]
    return Predictions(pd.concat([p.hit_rates for p in preds], ignore_index=True),
                       pd.concat([p.runtimes for p in preds], ignore_index=True),
                       pd.concat(tlb_frames, ignore_index=True) if tlb_frames else None,
                       preds[0].coherence, {p.machine.name: p.terms for p in preds},
                       int(sources.record.info.n_accesses), bool(sources.record.info.complete),
                       pd.concat(dram_frames, ignore_index=True) if dram_frames else None)


def run_pipeline(cfg: PipelineConfig, progress: Progress = _noop, bars: bool = False) -> PipelineResult:
    """Run every step for one program and write its result tables into `workdir` (one writer at a time);
    `bars`: progress bars for the long stages (for a user at a terminal, not for the suite's workers)."""
    with folder_lock(cfg.workdir):
        return _run_steps(cfg, progress, bars)


def _trace_terms_of_every_machine(cfg: PipelineConfig, trace: Path, progress: Progress) -> None:
    """The single-pass trace facts of every machine (cached), computed beside the profiling sweep: they
    need the trace alone, and on two or more cores this hides most of their time."""
    from machines import load_machine

    for name in cfg.machines:
        trace_terms_step(cfg, trace, load_machine(name), progress)


def _run_steps(cfg: PipelineConfig, progress: Progress, bars: bool) -> PipelineResult:
    """The steps of run_pipeline, each reusing its cached outputs when its key matches."""
    timings: dict[str, float] = {}

    def timed(name, fn, *args):
        start = time.perf_counter()
        value = fn(*args)
        timings[name] = time.perf_counter() - start
        return value

    translated = timed("translate", translate_step, cfg, progress)
    binary = timed("instrument", instrument_step, cfg, translated, progress)
    trace = timed("trace", trace_step, cfg, binary, progress)
    with ThreadPoolExecutor(max_workers=1) as beside:  # the trace passes' numba kernels release the GIL
        terms = beside.submit(_trace_terms_of_every_machine, cfg, trace, progress)
        profiles_dir = timed("profile", profile_step, cfg, trace, progress, bars)
        terms.result()  # cached in the work folder: predict_step reads them back
    pred = timed("predict", predict_step, cfg, profiles_dir, trace, binary, progress)
    write_run_results(cfg, translated, pred)
    return PipelineResult(cfg.source.stem, pred.hit_rates, pred.runtimes, trace, profiles_dir, pred.n_accesses, timings,
                          pred.tlb_rates, pred.coherence, pred.terms, pred.trace_complete)


RUN_TABLES = ("regions.csv", "hit_rates.csv", "runtimes.csv")   # every run's results; tlb_miss_rates.csv when
# priced, dram_traffic.csv when asked (--dram-traffic)


def write_run_results(cfg: PipelineConfig, translated: Translation, pred: Predictions) -> None:
    """The run's result tables, then results.json naming them (common/manifest.py). The old manifest goes
    first, so a run stopped mid-write leaves none and readers call its results incomplete instead of
    taking a mix of old and new tables for one run's."""
    from common.manifest import RESULTS, write_manifest

    (cfg.workdir / RESULTS).unlink(missing_ok=True)
    write_table(regions_table(translated), cfg.workdir / "regions.csv")
    pred.hit_rates["trace_complete"] = pred.trace_complete  # results from a crashed run say so
    pred.runtimes["trace_complete"] = pred.trace_complete
    write_table(pred.hit_rates, cfg.workdir / "hit_rates.csv")
    write_table(pred.runtimes, cfg.workdir / "runtimes.csv")
    names = list(RUN_TABLES)
    if pred.tlb_rates is not None:
        write_table(pred.tlb_rates, cfg.workdir / "tlb_miss_rates.csv")
        names.append("tlb_miss_rates.csv")
    else:  # an earlier run's table for other machines must not pass for this run's
        (cfg.workdir / "tlb_miss_rates.csv").unlink(missing_ok=True)
    if pred.dram is not None:
        write_table(pred.dram.assign(trace_complete=pred.trace_complete), cfg.workdir / "dram_traffic.csv")
        names.append("dram_traffic.csv")
    else:
        (cfg.workdir / "dram_traffic.csv").unlink(missing_ok=True)
    write_manifest(cfg.workdir, "pptmc run results", files=names, name=RESULTS, inputs=run_inputs(cfg))


def run_inputs(cfg: PipelineConfig) -> dict:
    """What a run's results were made from, for its manifest: the cached steps' keys (their stamps) and
    the prediction's own parameters."""
    stamps = {"instrument": cfg.workdir / "instrument" / ".key", "trace": cfg.workdir / "trace" / ".key",
              "profile": cfg.workdir / "profiles" / ".key"}
    keys = {step: stamp.read_text().strip() for step, stamp in stamps.items() if stamp.is_file()}
    return {"source": str(cfg.source), "args": list(cfg.args), "machines": list(cfg.machines),
            "cores": list(cfg.cores), "model": cfg.options.as_dict(), "step_keys": keys}
