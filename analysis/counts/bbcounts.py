"""Basic-block execution counts solved from branch probabilities (AMM Sec. 3.2.3, issue #6).

For each function we solve N_j = sum_{i in pred(j)} P_ij * N_i with the entry block fixed to the
function's call count. Probabilities come from a counting run, a user file, or a documented static
heuristic (results of the heuristic are flagged as estimates).

File formats defined here:

* CFG JSON (written by the tracer): ``{"version": 1, "functions": {fname: {"entry": id,
  "calls": n | null, "blocks": [ids], "edges": [[from, to], ...]}}}``. Optional per-function
  ``"labels": {id: label}`` lets probability files name blocks as ``function:label``, and
  optional ``"call_sites": [[block_id, callee], ...]`` (one row per call instruction) lets a
  function whose "calls" is null get its call count from its callers' solved block counts.
* Probability file: ``{"edges": [{"from": id | "function:label", "to": ..., "p": 0.9}, ...],
  "calls": {fname: n}}`` ("calls" optional). Out-edges a block does not list share its remaining
  probability evenly; mass not given to any edge leaves the function (return/unreachable).
* Count file: ``{"block_counts": {id: n}, "edge_counts": [[from, to, n], ...]}``, the same
  shape `pptmc bbcounts -o` writes (it adds "source", "estimate" and "functions").
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx
import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from common.errors import InputError

EdgeProbabilities = dict[tuple[int, int], float]
DEFAULT_TRIP_COUNT = 10.0  # heuristic guess: a loop body runs 10 times per loop entry (p_stay = 0.9)


@dataclass(frozen=True)
class FunctionCfg:
    """One function's control-flow graph as exported by the tracer."""

    name: str
    entry: int
    calls: float | None
    blocks: tuple[int, ...]
    edges: tuple[tuple[int, int], ...]
    labels: dict[int, str] = field(default_factory=dict)
    call_sites: tuple[tuple[int, str], ...] = ()

    def graph(self) -> nx.DiGraph:
        """The CFG as a networkx DiGraph (duplicate switch edges merged)."""
        g = nx.DiGraph()
        g.add_nodes_from(self.blocks)
        g.add_edges_from(self.edges)
        return g

    def block_name(self, block: int) -> str:
        """`function:label` when the label is known, else `function:#id`."""
        return f"{self.name}:{self.labels.get(block, f'#{block}')}"


@dataclass(frozen=True)
class Cfg:
    """All functions of one program."""

    functions: dict[str, FunctionCfg]
    source: str

    def function_of(self) -> dict[int, str]:
        """Block id -> owning function name."""
        return {b: f.name for f in self.functions.values() for b in f.blocks}

    def block_ids(self) -> dict[str, int]:
        """`function:label` name -> block id (only for blocks with a label)."""
        return {f"{f.name}:{lab}": b for f in self.functions.values() for b, lab in f.labels.items()}


@dataclass
class BlockCounts:
    """Solved (or measured) execution counts of every block."""

    counts: dict[int, float]
    function_of: dict[int, str]
    source: str                       # "counts", "probabilities" or "heuristic"
    estimate: bool                    # True when the probabilities were guessed
    assumed_calls: list[str] = field(default_factory=list)  # functions whose call count defaulted to 1

    def probabilities(self) -> dict[int, float]:
        """P(BB_i) = N_i / sum N (AMM Eq. 3)."""
        total = sum(self.counts.values())
        return {b: (n / total if total > 0 else 0.0) for b, n in self.counts.items()}

    def to_json(self) -> dict:
        """The count-file shape that `load_counts` reads back."""
        return {"version": 1, "source": self.source, "estimate": self.estimate,
                "assumed_calls": self.assumed_calls,
                "block_counts": {str(b): self.counts[b] for b in sorted(self.counts)},
                "functions": {str(b): self.function_of.get(b, "") for b in sorted(self.counts)}}


# ---------------------------------------------------------------- loading


def _read_json(path: Path, what: str) -> dict:
    """Parse a JSON file or raise InputError naming it."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError as exc:
        raise InputError(f"{path}: {what} not found; check the path") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid JSON ({exc}); give a {what}") from exc
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object at the top level of the {what}")
    return data


def _as_int(value, path: Path, where: str) -> int:
    """An integer block id, or InputError naming the field."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InputError(f"{path}: {where}: expected an integer block id, got {value!r}")
    try:
        return int(value)
    except ValueError as exc:
        raise InputError(f"{path}: {where}: expected an integer block id, got {value!r}") from exc


def parse_cfg(data: dict, source: str = "<cfg>") -> Cfg:
    """Validate a CFG JSON object (see module docstring) into a Cfg."""
    path = Path(source)
    funcs = data.get("functions")
    if not isinstance(funcs, dict) or not funcs:
        raise InputError(f"{source}: field 'functions' must be a non-empty object; is this a pptmc CFG file?")
    out: dict[str, FunctionCfg] = {}
    for name, f in funcs.items():
        where = f"functions.{name}"
        if not isinstance(f, dict) or "entry" not in f or "blocks" not in f:
            raise InputError(f"{source}: {where}: needs 'entry', 'blocks' and 'edges'")
        blocks = tuple(_as_int(b, path, f"{where}.blocks") for b in f["blocks"])
        entry = _as_int(f["entry"], path, f"{where}.entry")
        if entry not in blocks:
            raise InputError(f"{source}: {where}.entry {entry} is not in its 'blocks' list")
        edges = []
        for k, e in enumerate(f.get("edges", [])):
            if not isinstance(e, (list, tuple)) or len(e) != 2:
                raise InputError(f"{source}: {where}.edges[{k}]: expected [from, to]")
            a, b = (_as_int(x, path, f"{where}.edges[{k}]") for x in e)
            if a not in blocks or b not in blocks:
                raise InputError(f"{source}: {where}.edges[{k}] = {e}: both ends must be blocks of {name}")
            edges.append((a, b))
        calls = f.get("calls")
        if calls is not None and (not isinstance(calls, (int, float)) or calls < 0):
            raise InputError(f"{source}: {where}.calls must be a non-negative number or null, got {calls!r}")
        labels = {_as_int(k, path, f"{where}.labels"): str(v) for k, v in (f.get("labels") or {}).items()}
        sites = []
        for k, site in enumerate(f.get("call_sites") or []):
            if not isinstance(site, (list, tuple)) or len(site) != 2 or site[1] not in funcs:
                raise InputError(f"{source}: {where}.call_sites[{k}] = {site!r}: expected [block, known function]")
            blk = _as_int(site[0], path, f"{where}.call_sites[{k}]")
            if blk not in blocks:
                raise InputError(f"{source}: {where}.call_sites[{k}]: block {blk} is not a block of {name}")
            sites.append((blk, str(site[1])))
        out[name] = FunctionCfg(name, entry, None if calls is None else float(calls), blocks,
                                tuple(dict.fromkeys(edges)), labels, tuple(sites))
    seen: dict[int, str] = {}
    for f in out.values():
        for b in f.blocks:
            if b in seen:
                raise InputError(f"{source}: block {b} is listed in both {seen[b]} and {f.name}; ids must be unique")
            seen[b] = f.name
    return Cfg(out, source)


def load_cfg(path: str | Path) -> Cfg:
    """Load a CFG from its JSON file, or from an instrumented binary via instrument.load_cfg.

    Block labels come from the binary's block table (`<binary>.blocks.json`) when it is there.
    """
    path = Path(path)
    if path.suffix == ".json":
        data = _read_json(path, "CFG JSON file")
    else:
        try:
            from instrument import load_cfg as tracer_load_cfg  # the tracer owns where the CFG lives
        except ImportError as exc:
            raise InputError(f"{path}: not a .json CFG file and the tracer's load_cfg is not available; "
                             "pass the CFG JSON written next to the binary") from exc
        data = tracer_load_cfg(path)
    table = block_table(path)
    if table is not None:
        for name, f in data.get("functions", {}).items():
            if isinstance(f, dict) and "labels" not in f:
                f["labels"] = {str(b): e.label for b, e in table.blocks.items() if e.function == name}
    return parse_cfg(data, str(path))


def block_table(path: Path):
    """The tracer's block table beside a binary or its `.cfg.json`, or None when there is none."""
    name = path.name
    binary = path.with_name(name[: -len(".cfg.json")]) if name.endswith(".cfg.json") else path
    if (path.suffix == ".json" and binary == path) or not binary.with_name(binary.name + ".blocks.json").is_file():
        return None
    try:
        from instrument import load_block_table
    except ImportError:
        return None
    return load_block_table(binary)


def _edge_rows(raw, path: Path) -> list[tuple[int, int, float]]:
    """Edge counts as [[from, to, n]] or [{"from", "to", "count"}] rows."""
    rows = []
    for k, e in enumerate(raw or []):
        if isinstance(e, dict):
            e = [e.get("from"), e.get("to"), e.get("count")]
        if not isinstance(e, (list, tuple)) or len(e) != 3 or not isinstance(e[2], (int, float)) or e[2] < 0:
            raise InputError(f"{path}: edge_counts[{k}]: expected [from, to, count>=0], got {e!r}")
        rows.append((_as_int(e[0], path, f"edge_counts[{k}]"), _as_int(e[1], path, f"edge_counts[{k}]"), float(e[2])))
    return rows


def load_counts(path: str | Path) -> tuple[dict[int, float], dict[tuple[int, int], float]]:
    """Read a count file: (block counts, edge counts); edge counts may be empty."""
    path = Path(path)
    data = _read_json(path, "count file")
    blocks_raw = data.get("block_counts")
    if not isinstance(blocks_raw, dict):
        raise InputError(f"{path}: field 'block_counts' must be an object {{block_id: count}}")
    blocks = {}
    for k, v in blocks_raw.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or not math.isfinite(v):
            raise InputError(f"{path}: block_counts.{k}: expected a non-negative count, got {v!r}")
        blocks[_as_int(k, path, f"block_counts key {k!r}")] = float(v)
    edges = {}
    for a, b, n in _edge_rows(data.get("edge_counts"), path):
        edges[(a, b)] = edges.get((a, b), 0.0) + n
    return blocks, edges


# ---------------------------------------------------------------- probabilities


def probabilities_from_counts(cfg: Cfg, edge_counts: dict[tuple[int, int], float],
                              block_counts: dict[int, float] | None = None) -> EdgeProbabilities:
    """P_ij = edge count / block count; flow not on any edge is the block returning."""
    probs: EdgeProbabilities = {}
    block_counts = block_counts or {}
    for f in cfg.functions.values():
        g = f.graph()
        for i in g.nodes:
            out = {(i, j): float(edge_counts.get((i, j), 0.0)) for j in g.successors(i)}
            total = max(block_counts.get(i, 0.0), sum(out.values()))
            for e, n in out.items():
                probs[e] = n / total if total > 0 else 1.0 / len(out)
    return probs


def probabilities_from_file(cfg: Cfg, path: str | Path) -> tuple[EdgeProbabilities, dict[str, float]]:
    """Read a user probability file; returns (edge probabilities, call-count overrides)."""
    path = Path(path)
    data = _read_json(path, "probability file")
    names = cfg.block_ids()
    given: EdgeProbabilities = {}
    for k, e in enumerate(data.get("edges") or []):
        where = f"edges[{k}]"
        if not isinstance(e, dict) or not {"from", "to", "p"} <= e.keys():
            raise InputError(f"{path}: {where}: expected {{\"from\", \"to\", \"p\"}}")
        a, b = (_resolve_block(e[key], names, path, f"{where}.{key}") for key in ("from", "to"))
        p = e["p"]
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
            raise InputError(f"{path}: {where}.p must be a probability in [0, 1], got {p!r}")
        given[(a, b)] = float(p)
    probs = _complete_probabilities(cfg, given, path)
    calls = data.get("calls") or {}
    for fname, n in calls.items():
        if fname not in cfg.functions or not isinstance(n, (int, float)) or n < 0:
            raise InputError(f"{path}: calls.{fname}: needs a known function and a count >= 0")
    return probs, {k: float(v) for k, v in calls.items()}


def _resolve_block(value, names: dict[str, int], path: Path, where: str) -> int:
    """A block given as an id or as `function:label`."""
    if isinstance(value, str) and value in names:
        return names[value]
    if isinstance(value, str) and ":" in value:
        raise InputError(f"{path}: {where}: unknown block name {value!r}; use a block id or a labelled name")
    return _as_int(value, path, where)


def _complete_probabilities(cfg: Cfg, given: EdgeProbabilities, path: Path) -> EdgeProbabilities:
    """Check given edges exist and sum <= 1 per block; unlisted out-edges share what is left."""
    known = {e for f in cfg.functions.values() for e in f.edges}
    for e in given:
        if e not in known:
            raise InputError(f"{path}: edge {e[0]} -> {e[1]} is not in the CFG ({cfg.source}); check the ids")
    probs: EdgeProbabilities = {}
    for f in cfg.functions.values():
        g = f.graph()
        for i in g.nodes:
            out = [(i, j) for j in g.successors(i)]
            listed = sum(given.get(e, 0.0) for e in out if e in given)
            if listed > 1.0 + 1e-9:
                raise InputError(f"{path}: out-edges of block {f.block_name(i)} sum to {listed:.6g} > 1")
            rest = [e for e in out if e not in given]
            for e in out:
                probs[e] = given[e] if e in given else max(0.0, 1.0 - listed) / len(rest)
    return probs


def heuristic_probabilities(cfg: Cfg, trip_count: float = DEFAULT_TRIP_COUNT) -> EdgeProbabilities:
    """Ball-Larus-style static guess: stay in a loop with p = 1 - 1/trip_count; other branches uniform.

    Loops are natural loops (back edge u->h where h dominates u). At a block with some out-edges
    leaving an enclosing loop and some staying, the staying edges share 1 - 1/trip_count and the
    exits share the rest. Every other block splits evenly among its successors.
    """
    if trip_count <= 1.0:
        raise InputError(f"--trip-count must be > 1 (got {trip_count}); it is the guessed iterations per loop entry")
    p_stay = 1.0 - 1.0 / trip_count
    probs: EdgeProbabilities = {}
    for f in cfg.functions.values():
        g = f.graph()
        loops = natural_loops(g, f.entry)
        for i in g.nodes:
            succ = list(g.successors(i))
            exits = [j for j in succ if any(i in body and j not in body for body in loops)]
            stays = [j for j in succ if j not in exits]
            if exits and stays:
                probs.update({(i, j): p_stay / len(stays) for j in stays})
                probs.update({(i, j): (1.0 - p_stay) / len(exits) for j in exits})
            else:
                probs.update({(i, j): 1.0 / len(succ) for j in succ})
    return probs


def natural_loops(g: nx.DiGraph, entry: int) -> list[set[int]]:
    """Bodies of the natural loops reachable from entry (one per back edge)."""
    return [body for _, body in _back_edge_loops(g, entry)]


def _back_edge_loops(g: nx.DiGraph, entry: int) -> list[tuple[int, set[int]]]:
    """(header, body) of the natural loop of every back edge u->h (h dominates u) reachable from entry."""
    reach = nx.descendants(g, entry) | {entry}
    sub = g.subgraph(reach)
    idom = nx.immediate_dominators(sub, entry)

    def dominates(h: int, u: int) -> bool:
        while True:
            if u == h:
                return True
            parent = idom.get(u, u)  # recent networkx leaves the entry out of the map
            if parent == u:
                return False
            u = parent

    loops = []
    for u, h in sub.edges:
        if dominates(h, u):
            body = {h, u}
            stack = [u] if u != h else []
            while stack:
                for p in sub.predecessors(stack.pop()):
                    if p not in body:
                        body.add(p)
                        stack.append(p)
            loops.append((h, body))
    return loops


def enclosing_loops(f: FunctionCfg) -> dict[int, frozenset[int]]:
    """For every block of f, the body of the innermost loop around it that is more than a
    self-loop (the natural loops of one header merged); blocks in no such loop are left out."""
    by_header: dict[int, set[int]] = {}
    for header, body in _back_edge_loops(f.graph(), f.entry):
        by_header.setdefault(header, set()).update(body)
    out: dict[int, frozenset[int]] = {}
    for body in sorted((frozenset(b) for b in by_header.values() if len(b) > 1), key=len):
        for block in body:  # innermost (smallest) first
            out.setdefault(block, body)
    return out


# ---------------------------------------------------------------- solving


def solve_function(f: FunctionCfg, probs: EdgeProbabilities, calls: float) -> dict[int, float]:
    """Solve (I - P^T) N = calls * e_entry for one function with a sparse LU."""
    g = nx.DiGraph()
    g.add_nodes_from(f.blocks)
    g.add_weighted_edges_from((i, j, probs.get((i, j), 0.0)) for i, j in f.edges)
    live = nx.descendants(_positive(g), f.entry) | {f.entry}  # blocks no positive path reaches run 0 times
    _check_closed_cycles(f, g.subgraph(live))
    order = sorted(live)
    index = {b: k for k, b in enumerate(order)}
    rows, cols, vals = [], [], []
    for i, j, w in g.subgraph(live).edges(data="weight"):
        if w > 0:
            rows.append(index[j])
            cols.append(index[i])
            vals.append(-w)
    n = len(order)
    a = sp.identity(n, format="csc") + sp.csc_matrix((vals, (rows, cols)), shape=(n, n))
    b = np.zeros(n)
    b[index[f.entry]] = calls
    x = np.atleast_1d(spla.spsolve(a, b))
    if not np.all(np.isfinite(x)):
        raise InputError(f"function {f.name}: the count equations are singular; check that every loop can exit")
    counts = {blk: 0.0 for blk in f.blocks}
    counts.update({blk: float(max(x[index[blk]], 0.0)) for blk in order})
    return counts


def _positive(g: nx.DiGraph) -> nx.DiGraph:
    """All blocks, with only the edges taken with probability > 0."""
    pos = nx.DiGraph()
    pos.add_nodes_from(g.nodes)
    pos.add_edges_from((i, j) for i, j, w in g.edges(data="weight") if w > 0)
    return pos


def _check_closed_cycles(f: FunctionCfg, g: nx.DiGraph) -> None:
    """Raise InputError for a strongly connected set of blocks that flow can enter but never leave."""
    pos = _positive(g)
    for scc in nx.strongly_connected_components(pos):
        if len(scc) == 1 and not pos.has_edge(next(iter(scc)), next(iter(scc))):
            continue
        leaves = any(j not in scc for i in scc for j in pos.successors(i))
        returns = any(sum(w for _, _, w in g.out_edges(i, data="weight")) < 1.0 - 1e-12 for i in scc)
        if not leaves and not returns:
            names = ", ".join(f.block_name(b) for b in sorted(scc))
            raise InputError(f"function {f.name}: blocks [{names}] form a cycle whose exit probability is 0, "
                             "so their counts are infinite and the equations are singular; give one of their "
                             "out-edges a probability > 0 (probability file), or use a counting run")


def solve_counts(cfg: Cfg, probs: EdgeProbabilities, calls: dict[str, float] | None = None,
                 source: str = "probabilities", estimate: bool = False) -> BlockCounts:
    """Counts of every block of every function, callers first.

    A function's call count is, in order: `calls[name]`, the CFG's "calls", the sum of its call
    sites' block counts (when it has callers), else 1 (listed in `assumed_calls`).
    """
    calls = calls or {}
    counts: dict[int, float] = {}
    assumed = []
    incoming: dict[str, list[int]] = {}
    for f in cfg.functions.values():
        for blk, callee in f.call_sites:
            incoming.setdefault(callee, []).append(blk)
    for name in _callers_first(cfg, calls):
        f = cfg.functions[name]
        n = calls.get(name, f.calls)
        if n is None and incoming.get(name):
            n = sum(counts[b] for b in incoming[name])
        if n is None:
            n = 1.0
            assumed.append(name)
        counts.update(solve_function(f, probs, n))
    return BlockCounts(counts, cfg.function_of(), source, estimate, assumed)


def _callers_first(cfg: Cfg, calls: dict[str, float]) -> list[str]:
    """Functions in call-graph order; recursion needs an explicit call count somewhere on the cycle."""
    g = nx.DiGraph()
    g.add_nodes_from(cfg.functions)
    for f in cfg.functions.values():
        for _, callee in f.call_sites:
            known = calls.get(callee, cfg.functions[callee].calls) is not None
            if not known:  # a known count cuts the dependency, so recursion through it is fine
                g.add_edge(f.name, callee)
    try:
        return list(nx.lexicographical_topological_sort(g))
    except nx.NetworkXUnfeasible as exc:
        cycle = " -> ".join(u for u, _ in nx.find_cycle(g))
        raise InputError(f"recursive calls {cycle} with no call count: give one of these functions a count "
                         f"('calls' in the CFG or the probability file)") from exc


def counts_from_run(cfg: Cfg, block_counts: dict[int, float],
                    edge_counts: dict[tuple[int, int], float]) -> BlockCounts:
    """Solve with probabilities measured by a counting run; entry counts are the measured entries."""
    probs = probabilities_from_counts(cfg, edge_counts, block_counts)
    calls = {f.name: _measured_calls(f, block_counts, edge_counts) for f in cfg.functions.values()}
    result = solve_counts(cfg, probs, calls, source="counts", estimate=False)
    result.counts = {b: _snap(n) for b, n in result.counts.items()}
    return result


def _snap(n: float) -> float:
    """Measured probabilities are ratios of integer counts, so the true solution is integral:
    remove the sparse solver's rounding noise (relative 1e-12 or so), keep anything further off."""
    r = round(n)
    return float(r) if abs(n - r) <= 1e-7 * max(1.0, abs(n)) else n


def add_hosted_blocks(result: BlockCounts, table) -> BlockCounts:
    """Give the tracer's virtual blocks (e.g. shared_var_trace<n>, not in the CFG) their host block's count."""
    for e in table.blocks.values():
        if e.block_id not in result.counts and e.host_block in result.counts:
            result.counts[e.block_id] = result.counts[e.host_block]
            result.function_of[e.block_id] = e.function
    return result


def _measured_calls(f: FunctionCfg, block_counts: dict[int, float],
                    edge_counts: dict[tuple[int, int], float]) -> float:
    """Calls = entries of the entry block not explained by an edge into it."""
    into = sum(edge_counts.get((i, f.entry), 0.0) for i, j in f.edges if j == f.entry)
    return max(float(block_counts.get(f.entry, 0.0)) - into, 0.0)


def count_weighted_totals(per_block: dict[int, dict[str, float]], counts: dict[int, float]) -> dict[str, float]:
    """Operation totals: each block's static instruction mix times its execution count."""
    totals: dict[str, float] = {}
    for block, mix in per_block.items():
        n = counts.get(block, 0.0)
        for op, k in mix.items():
            totals[op] = totals.get(op, 0.0) + k * n
    return totals
