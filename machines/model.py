"""Typed machine description: what the loader returns and every model consumes.

The on-disk schema (TOML, versioned) is documented in machines/SCHEMA.md; this module is
the in-memory contract. Times are in core cycles unless a name says otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from machines.curves import Curves

# Operation classes with a latency and a reciprocal throughput in every machine file.
INDEXINGS = ("virtual", "physical", "hashed")
PLACEMENTS = ("close", "spread")  # OpenMP proc_bind: thread t on core t, or threads spread evenly over the cores


def thread_cores(threads: int, cores: int, placement: str) -> list[int]:
    """The core each of `threads` threads runs on (OpenMP proc_bind close or spread over `cores` cores;
    more threads than cores wrap around, as an oversubscribed run would)."""
    if placement == "spread" and threads <= cores:
        return [t * cores // threads for t in range(threads)]
    return [t % cores for t in range(threads)]
OP_CLASSES = ("int_add", "int_mul", "int_div", "fp_add", "fp_mul", "fp_div", "fp_fma", "load", "store")


@dataclass(frozen=True)
class CacheLevel:
    """One cache level; `shared` means one instance serves all cores."""

    name: str                 # "L1", "L2", "L3"
    size_bytes: int           # capacity of one instance
    line_bytes: int
    associativity: int        # 0 = fully associative; 1 = direct-mapped
    latency_cycles: float
    recip_throughput_cycles: float
    shared: bool
    # how a line's set is chosen (the file's optional `indexing`): "virtual" (from the virtual address: first-level
    # caches), "physical" (from the physical address: the bits above the page offset come from the frame the OS
    # picked) or "hashed" (a hash of the physical address: sliced last-level caches)
    indexing: str = "physical"
    # cores that share one instance (the file's optional `cores_per_instance`): 1 for a private level, e.g. 4 for
    # an L3 per 4-core CCX; 0 = the default: 1 when private, every core of the machine when shared
    cores_per_instance: int = 0
    # optional: ns per load of a walk down a column whose lines keep conflicting out of the level above (they
    # fit its capacity, not its sets) and come from this one, few misses in flight (walks.c); 0 = not measured:
    # such refills cost the level's reciprocal throughput, as a stream's do
    conflict_refill_ns: float = 0.0
    # optional, first level only: ns per in-place update of a walk down a column whose dirty lines keep
    # conflicting out of this level, entry i for a walk over 2**i of its sets (updates.c); () = not measured:
    # such refills cost the next level's reciprocal throughput, as a stream's do
    column_update_ns: tuple[float, ...] = ()

    @property
    def fully_associative(self) -> bool:
        """Any line may sit in any way (the file's `fully_associative = true`)."""
        return self.associativity == 0

    @property
    def n_lines(self) -> int:
        return self.size_bytes // self.line_bytes

    @property
    def sets(self) -> int:
        """Number of sets (1 when fully associative)."""
        return self.n_lines // self.associativity if self.associativity > 0 else 1

    def instance_cores(self, machine_cores: int) -> int:
        """How many cores share one instance of this level on a machine of `machine_cores` cores."""
        if self.cores_per_instance:
            return self.cores_per_instance
        return machine_cores if self.shared else 1

    def known_set_bits(self, page_bytes: int) -> int:
        """How many of the set index's low bits the program's virtual addresses fix: all of them when
        virtually indexed, those inside the page offset when physically indexed, none when hashed (or
        fully associative). A power-of-two set count is assumed where any bit is known (the loader checks)."""
        if self.fully_associative or self.indexing == "hashed":
            return 0
        set_bits = self.sets.bit_length() - 1
        if self.indexing == "virtual":
            return set_bits
        return min(set_bits, max(page_bytes // self.line_bytes, 1).bit_length() - 1)


@dataclass(frozen=True)
class OpCost:
    """Latency and reciprocal throughput of one operation class, in cycles."""

    latency: float
    recip_throughput: float


@dataclass(frozen=True)
class Ram:
    """Main memory figures."""

    latency_ns: float
    bandwidth_one_core_gbs: float
    bandwidth_all_cores_gbs: float
    # optional: ns per cold line of a walk down a column (a load every half page or more apart) whose
    # lines fall into 2^i of the first-level cache's sets, i = 0 .. log2(sets) (strided.c); () = such
    # lines cost what a stream's do (line / one-core bandwidth)
    strided_cold_line_ns: tuple[float, ...] = ()
    # optional: load-to-use latency of a line homed on another socket's memory (0 = not given: the same as
    # latency_ns); and the sustained bandwidth one socket's memory controllers serve (0 = not given:
    # bandwidth_all_cores_gbs / Machine.sockets)
    remote_latency_ns: float = 0.0
    bandwidth_socket_gbs: float = 0.0


@dataclass(frozen=True)
class Parallel:
    """OpenMP parallel overhead with all `Machine.cores` threads, in ns (0 = not modelled)."""

    fork_join_ns: float = 0.0     # one parallel region: fork, join and its closing barrier
    barrier_ns: float = 0.0       # one barrier, e.g. the implied one at the end of a work-shared loop
    # the first region after a cache flush (the harness's cold start), extra over a warm one: with all
    # cores, and with one thread (optional; 0 = not modelled)
    cold_start_ns: float = 0.0
    cold_start_one_ns: float = 0.0


@dataclass(frozen=True)
class TlbLevel:
    """One level of data address translation (first-level DTLB, then the second-level STLB)."""

    name: str                 # "DTLB", "STLB"
    entries: int
    associativity: int        # 0 = fully associative; 1 = direct-mapped
    page_bytes: int
    miss_cycles: float        # extra cycles an access pays when it misses this level (throughput)
    # optional: extra cycles of an in-place update (a load and a store to its page) whose page misses this
    # level, in a loop walking down a column (tlb.c); 0 = such updates cost miss_cycles like any load
    rmw_miss_cycles: float = 0.0

    @property
    def fully_associative(self) -> bool:
        """Any translation may sit in any entry (the file's `fully_associative = true`)."""
        return self.associativity == 0


@dataclass(frozen=True)
class Machine:
    """A CPU as the models see it."""

    name: str
    description: str
    cores: int
    frequency_ghz: float
    caches: tuple[CacheLevel, ...]   # ordered L1 first
    ram: Ram
    bus_width_bytes: int
    simd_width_bits: int
    ops: dict[str, OpCost]
    sources: dict[str, str] = field(default_factory=dict)  # field path -> where the figure comes from
    parallel: Parallel = Parallel()  # optional [parallel] table; absent = no overhead term
    calls: dict[str, OpCost] = field(default_factory=dict)  # optional [calls.<function>]: C library calls
    # optional [core] table: operations past a stalled dependence chain that the out-of-order core
    # keeps in flight (in the pass's counted-operation units); 0 = short chains do not overlap
    reorder_window_ops: float = 0.0
    # optional [core] figure: operations of the next instance of a long chain that run under the current
    # instance's tail (window.c's long instances); 0 = only reorder_window_ops' overlap
    chain_lookahead_ops: float = 0.0
    # optional [core] figure: reciprocal throughput of stores that each write another L1 line than the
    # store before them; 0 = the same as ops.store
    store_new_line_cycles: float = 0.0
    # optional [core] figure: llvm-mca's name of the core's scheduling model (e.g. "haswell"); "" = no
    # in-core loop bound (analysis/runtime/incore.py)
    llvm_mcpu: str = ""
    # optional [coherence] figure: cycles per line (throughput) an access pays when the line was last written
    # by another core's private cache (a write-invalidate transfer); 0 = charged as the level that serves it
    transfer_cycles: float = 0.0
    # optional [coherence] figure: cycles per line a store pays beyond a hit when the line it writes is also held
    # by another core (the store waits for that copy's invalidation: an upgrade); 0 = no such cost
    upgrade_cycles: float = 0.0
    # optional [[tlbs]]: data TLB levels, first level first; () = address translation costs nothing
    tlbs: tuple[TlbLevel, ...] = ()
    # optional top-level figure: the page size backing the program's data (4 KiB; 2 MiB where transparent huge
    # pages back the arrays): it fixes which set bits a physically indexed cache takes from the virtual address
    page_bytes: int = 4096
    schema_version: int = 1
    # optional [curves] table: figures measured per active-core count (machines/curves.py); None = the model
    # scales the all-core and one-core figures as it always has
    curves: Curves | None = None
    # optional top-level figure: sockets (NUMA nodes), each with its own memory controllers; cores are numbered
    # socket by socket, so core c sits on socket c // (cores // sockets)
    sockets: int = 1

    @property
    def line_bytes(self) -> int:
        return self.caches[0].line_bytes

    @property
    def cores_per_socket(self) -> int:
        """Cores of one socket (the loader checks that `sockets` divides `cores`)."""
        return self.cores // self.sockets

    def socket_of(self, core: int) -> int:
        """The socket core `core` sits on: cores are numbered socket by socket."""
        return core // self.cores_per_socket

    @property
    def remote_latency_ns(self) -> float:
        """DRAM latency of a line homed on another socket: the file's figure, else the local one."""
        return self.ram.remote_latency_ns or self.ram.latency_ns

    @property
    def socket_bandwidth_gbs(self) -> float:
        """Sustained bandwidth one socket's memory controllers serve: the file's figure, else an equal share of
        the all-core figure."""
        return self.ram.bandwidth_socket_gbs or self.ram.bandwidth_all_cores_gbs / self.sockets

    def cycles_to_seconds(self, cycles: float) -> float:
        return cycles / (self.frequency_ghz * 1e9)
