"""Instrumented builds and one-run memory traces of OpenMP parallel regions (FORMAT.md documents the files)."""
from instrument.build import BlockEntry, BlockTable, BuildResult, assembly_path, build_instrumented, load_block_table, load_cfg
from instrument.export import export_text
from instrument.run import CountResult, run_counts, run_trace, unlisted_piece_cores
from instrument.tracefile import TraceReader, open_trace, piece_cores_of

__all__ = ["BlockEntry", "BlockTable", "BuildResult", "CountResult", "assembly_path", "TraceReader", "build_instrumented",
           "export_text", "load_block_table", "load_cfg", "open_trace", "piece_cores_of", "run_counts", "run_trace",
           "unlisted_piece_cores"]
