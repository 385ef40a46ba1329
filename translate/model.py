"""What translation found, handed to the CLI and to later stages."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class LoopInfo:
    """One work-shared construct (loop, master or single) with its marker id."""

    loop_id: int
    line: int
    schedule: str  # static | dynamic | guided | master | single
    chunk: str     # chunk expression as written; "" = default
    collapse: int
    nowait: bool


@dataclass
class RegionInfo:
    """One parallel region and the outlined function it became."""

    n: int
    name: str
    line: int
    file: str = ""                    # the source file's name: the region is known to users as file:line
    shared: list[str] = field(default_factory=list)
    private: list[str] = field(default_factory=list)
    firstprivate: list[str] = field(default_factory=list)
    lastprivate: list[str] = field(default_factory=list)
    reductions: list[tuple[str, str]] = field(default_factory=list)
    loops: list[LoopInfo] = field(default_factory=list)

    @property
    def where(self) -> str:
        """`file.c:line`, the name users know a region by."""
        return f"{self.file}:{self.line}"

    def schedule_text(self) -> str:
        """Schedules of the region's loops, e.g. `static dynamic,4`."""
        parts = [lp.schedule + (f",{lp.chunk}" if lp.chunk else "") for lp in self.loops]
        return " ".join(parts) if parts else "-"


@dataclass
class TranslationResult:
    """The output file and its regions, in source order."""

    source: Path
    output: Path
    regions: list[RegionInfo] = field(default_factory=list)
    orphan_loops: list[LoopInfo] = field(default_factory=list)  # work-sharing outside any region

    def to_json(self) -> dict:
        """A JSON-ready dict."""
        return {"source": str(self.source), "output": str(self.output),
                "regions": [{**r.__dict__, "loops": [lp.__dict__ for lp in r.loops],
                             "reductions": [list(x) for x in r.reductions]} for r in self.regions],
                "orphan_loops": [lp.__dict__ for lp in self.orphan_loops]}
