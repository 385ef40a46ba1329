#!/usr/bin/env python3
"""run.py of a probe kit (written by `pptmc machines probe-kit`): measure a machine without pptmc or a compiler.

Needs only Python 3's standard library. Runs the kit's prebuilt microbenchmarks exactly as `pptmc machines
detect` plans them (the kit's probeplan.py is machines/probeplan.py), then the suite's prebuilt native
programs as `pptmc measure` runs them: cold cache (PBENCH_COLD=1), threads pinned one per core
(OMP_PROC_BIND=close, OMP_PLACES=cores unless the environment sets them), in rounds over all benchmarks.

    python3 KIT/run.py -o RESULTS [--threads 1,2,4,...] [--repeats 5] [--budget SECONDS] [--quick]

RESULTS is written whole or not at all: the runs go to a hidden folder beside it, renamed to RESULTS at
the end. Take RESULTS home and run `pptmc machines ingest RESULTS -o machine.toml` and
`pptmc measure --ingest RESULTS -o DIR`.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KIT = Path(__file__).resolve().parent
sys.dont_write_bytecode = True  # the kit stays as built (its files are checked against kit.json)
sys.path.insert(0, str(KIT))
import probeplan  # noqa: E402  (the kit's copy of machines/probeplan.py)

RESULTS_FORMAT = 1
REGION_SECONDS = re.compile(r"^PBENCH_REGION_SECONDS (\S+)$")  # benchmarks/polybench/pbench.c's report


class KitError(Exception):
    """A problem with the kit, the command line or this machine; the message says what to do."""


def say(message: str) -> None:
    """One progress line on stderr."""
    sys.stderr.write(f"run.py: {message}\n")
    sys.stderr.flush()


def sha256(path: Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_kit() -> dict:
    """The kit's kit.json, after checking every file it lists is there with its recorded hash."""
    manifest = KIT / "kit.json"
    try:
        kit = json.loads(manifest.read_text())
        files = kit["files"]
    except (OSError, ValueError, KeyError) as exc:
        raise KitError(f"{manifest}: unreadable or not a probe kit manifest ({exc}); copy the whole kit folder "
                       f"again, or build a new one with `pptmc machines probe-kit -o KIT`") from exc
    for rel, digest in sorted(files.items()):
        path = KIT / rel
        if not path.is_file() or sha256(path) != digest:
            raise KitError(f"{path}: missing or different from the sha256 that {manifest} records (a partial "
                           f"copy?); copy the whole kit folder again")
    if kit.get("arch") != platform.machine():
        raise KitError(f"{manifest}: arch is {kit.get('arch')!r}, this machine is {platform.machine()!r}; build "
                       f"a kit on a {platform.machine()} machine")
    check_libc(kit.get("glibc_required"), manifest)
    return kit


def check_libc(required: str | None, manifest: Path) -> None:
    """Refuse before running when this machine's C library is older than the one the kit was linked against."""
    have = os.confstr("CS_GNU_LIBC_VERSION") if "CS_GNU_LIBC_VERSION" in os.confstr_names else ""
    found = re.search(r"(\d+)\.(\d+)", have or "")
    if not required or not found:
        return
    need = tuple(int(p) for p in required.split("."))
    if (int(found.group(1)), int(found.group(2))) < need:
        raise KitError(f"{manifest}: glibc_required is {required}, this machine has {have}; build the kit on a "
                       f"system whose glibc is at most that old")


def thread_counts(text: str | None, cores: int) -> list[int]:
    """--threads, or powers of two below the core count and the core count; refuses more than `cores`."""
    if text is None:
        return sorted({1 << k for k in range(cores.bit_length()) if 1 << k <= cores} | {cores})
    try:
        counts = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        counts = []
    if not counts or counts[0] < 1:
        raise KitError(f"--threads {text!r}: give comma-separated positive integers, e.g. 1,2,4")
    too_many = [c for c in counts if c > cores]
    if too_many:
        raise KitError(f"--threads {','.join(map(str, too_many))}: this machine has {cores} cores (the physical "
                       f"cores this process may run on, from /sys/devices/system/cpu); give at most {cores}")
    return counts


def kit_environment() -> dict[str, str]:
    """This environment with the kit's libomp first on the library path."""
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(KIT / "lib"), env.get("LD_LIBRARY_PATH")]))
    return env


def run_probes(facts: dict, effort: str, env: dict[str, str], steps_log: list[dict]) -> dict:
    """The microbenchmarks of `pptmc machines detect`, planned by the kit's probeplan.py: the raw results."""
    steps = probeplan.plan(facts, probeplan.EFFORTS[effort])

    def binary(program: str) -> Path:
        """The kit's build of `program` for this CPU."""
        return KIT / "bin" / probeplan.kit_binary_name(program, facts["flags"], facts["machine"])

    def done(step: probeplan.Step, seconds: float) -> None:
        """Record a finished step in kit.json's steps."""
        steps_log.append({"step": f"probe {step.key}", "status": "ok", "seconds": round(seconds, 3)})

    return probeplan.run_plan(steps, binary, env, say, done)


def region_seconds(exe: Path, threads: int, env: dict[str, str]) -> float:
    """One cold-cache run of a native benchmark on `threads` pinned threads (env carries the flush size,
    probeplan.harness_flush_environment): its parallel-region seconds."""
    run_env = {**probeplan.pinned_environment(env), "OMP_NUM_THREADS": str(threads), "PBENCH_COLD": "1",
               "PBENCH_DUMP": "0"}
    try:
        proc = subprocess.run([str(exe)], capture_output=True, text=True, env=run_env, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise KitError(f"{exe}: could not run ({exc})") from exc
    if proc.returncode:
        raise KitError(f"{exe}: exited with status {proc.returncode}: {proc.stderr.strip()[-300:]}")
    seconds = [float(m.group(1)) for line in proc.stderr.splitlines() if (m := REGION_SECONDS.match(line.strip()))]
    if not seconds:
        raise KitError(f"{exe}: printed no PBENCH_REGION_SECONDS line; the kit is damaged, build a new one")
    return sum(seconds)


def run_native(kit: dict, threads: list[int], repeats: int, env: dict[str, str], steps_log: list[dict],
               budget: float | None = None) -> dict:
    """Every benchmark on every thread count, once per round, `repeats` rounds (fewer where a round would
    start after `budget` seconds; one at least): seconds per run."""
    samples: dict[str, dict[str, list[float]]] = {b: {str(t): [] for t in threads} for b in kit["benchmarks"]}
    total = repeats * len(samples)
    began = time.monotonic()
    done = 0
    for round_no in range(repeats):
        if round_no and budget is not None and time.monotonic() - began > budget:
            say(f"--budget {budget:g} s spent: stopping after {round_no} of {repeats} rounds")
            break
        done = round_no + 1
        for number, bench in enumerate(samples, start=1):
            say(f"[native {round_no * len(samples) + number}/{total}] round {round_no + 1} of {repeats}: {bench} "
                f"at {kit['size']} on {','.join(map(str, threads))} threads")
            start = time.monotonic()
            exe = KIT / "bench" / f"{bench}-{kit['size']}"
            for t in threads:
                samples[bench][str(t)].append(region_seconds(exe, t, env))
            steps_log.append({"step": f"native {bench} round {round_no + 1}", "status": "ok",
                              "seconds": round(time.monotonic() - start, 3)})
    return {"size": kit["size"], "repeats": done, "repeats_asked": repeats, "threads": threads, "samples": samples}


def write_json(path: Path, data: object) -> str:
    """Write JSON and return its sha256."""
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return sha256(path)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """run.py's command line."""
    p = argparse.ArgumentParser(prog="run.py", description="Measure this machine with a pptmc probe kit.")
    p.add_argument("-o", "--output", required=True, help="results folder to create (must not exist)")
    p.add_argument("--threads", help="comma-separated thread counts (default: powers of two up to the cores, "
                                     "and the core count)")
    p.add_argument("--repeats", type=int, default=5, help="rounds of native runs; the median is kept (default 5)")
    p.add_argument("--quick", action="store_true", help="quick microbenchmarks (detect --quick): rougher figures")
    p.add_argument("--budget", type=float, help="seconds of native runs after which no new round starts (for a "
                                                "batch job's time limit; at least one round runs)")
    return p.parse_args(argv)


def measure(args: argparse.Namespace, kit: dict, facts: dict, threads: list[int], work: Path) -> None:
    """Run everything into `work`, recording each step; kit.json, written last, says whether it finished."""
    log: list[dict] = []
    record = {"format": RESULTS_FORMAT, "kit_version": kit["kit_version"], "kit_sha256": sha256(KIT / "kit.json"),
              "effort": "quick" if args.quick else "full", "threads": threads, "repeats": args.repeats,
              "host": {k: facts[k] for k in ("cores", "logical_cpus", "model_name", "machine", "node")},
              "started": time.strftime("%Y-%m-%d %H:%M:%S"), "steps": log, "files": {}, "complete": False}
    env = kit_environment()
    try:
        record["files"]["facts.json"] = write_json(work / "facts.json", facts)
        raw = run_probes(facts, record["effort"], env, log)
        record["files"]["probes.json"] = write_json(work / "probes.json", raw)
        native = run_native(kit, threads, args.repeats, {**env, **probeplan.harness_flush_environment(facts)}, log,
                            args.budget)
        record["files"]["native.json"] = write_json(work / "native.json", native)
    except KeyboardInterrupt:
        log.append({"step": "interrupted", "status": "error", "error": "interrupted"})
        write_json(work / "kit.json", record)
        raise
    except (KitError, probeplan.ProbeError) as exc:
        log.append({"step": "failed", "status": "error", "error": str(exc)})
        write_json(work / "kit.json", record)
        hint = ("; the kit needs a newer C library than this machine has" if "GLIBC" in str(exc) else "")
        raise KitError(f"{exc}{hint}\nincomplete results kept in {work} (kit.json says complete = false)") from exc
    record["complete"] = True
    record["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    write_json(work / "kit.json", record)


def main(argv: list[str] | None = None) -> int:
    """Check everything that can be checked, then measure into a hidden folder and rename it to RESULTS."""
    args = parse_args(argv)
    out = Path(args.output).resolve()
    try:
        if out.exists():
            raise KitError(f"{out}: already exists; remove it or give another -o")
        if args.repeats < 1:
            raise KitError(f"--repeats {args.repeats}: give at least 1")
        if args.budget is not None and not args.budget > 0:
            raise KitError(f"--budget {args.budget:g}: give a positive number of seconds")
        kit = load_kit()
        facts = probeplan.host_facts(KIT / "bin" / "cpuid")  # CPUID's report where sysfs has no caches
        threads = thread_counts(args.threads, int(facts["cores"]))
        probeplan.plan(facts, probeplan.EFFORTS["quick" if args.quick else "full"])  # refuses unusable caches
        out.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
        say(f"{facts['model_name']}, {facts['cores']} cores; threads {','.join(map(str, threads))}; "
            f"writing into {work}")
        measure(args, kit, facts, threads, work)
        work.chmod(0o755)  # mkdtemp made it private
        os.rename(work, out)
    except (KitError, probeplan.ProbeError) as exc:
        say(f"error: {exc}")
        return 2
    say(f"wrote {out}; take it home and run `pptmc machines ingest {out.name} -o machine.toml`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
