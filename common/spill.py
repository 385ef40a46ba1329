"""A first-in first-out file of zstd-compressed frames: where bounded buffers spill beyond the memory budget
(analysis/profiles/interleave.py, the references waiting to be interleaved; analysis/sampling/shards/queues.py
QueuePool, the merge's waiting samples; analysis/sampling/near/shared_windows.py SharedWindows, the shared
window segments waiting for every core). Frames come back unchanged and in the order written."""
from __future__ import annotations

import struct
import tempfile

import zstandard

from common.errors import PptmcError

_FRAME = struct.Struct("<Q")  # compressed bytes of one frame


class FrameFile:
    """A temporary file in spill_dir (None: the system's temporary directory), created at the first append, with
    separate read and write offsets; `what` names its contents in the error raised when the disk refuses it."""

    def __init__(self, spill_dir: str | None, what: str) -> None:
        self.spill_dir, self.what = spill_dir, what
        self.file = None
        self.read_at = self.write_at = 0
        self.compressor = zstandard.ZstdCompressor(level=1)
        self.decompressor = zstandard.ZstdDecompressor()

    def empty(self) -> bool:
        """Whether every frame written has been read back."""
        return self.read_at == self.write_at

    def append(self, raw: bytes) -> None:
        """One frame at the end of the file (the spill directory's OSError as a PptmcError naming what to do)."""
        data = self.compressor.compress(raw)
        try:
            if self.file is None:
                self.file = tempfile.TemporaryFile(prefix="pptmc-spill-", dir=self.spill_dir)  # noqa: SIM115
            self.file.seek(self.write_at)
            self.file.write(_FRAME.pack(len(data)) + data)
        except OSError as exc:
            where = self.spill_dir or tempfile.gettempdir()
            raise PptmcError(f"{where}: cannot spill {self.what} ({exc.strerror}); free disk space, point TMPDIR at "
                             f"a larger disk or raise $PPTMC_MEMORY_BUDGET") from exc
        self.write_at = self.file.tell()

    def pop(self, max_size: int = 0) -> bytes:
        """The oldest frame not read yet (the caller checks empty() first); max_size: its raw size when known."""
        self.file.seek(self.read_at)
        (size,) = _FRAME.unpack(self.file.read(_FRAME.size))
        raw = self.decompressor.decompress(self.file.read(size), max_output_size=max_size)
        self.read_at = self.file.tell()
        return raw

    def close(self) -> None:
        """Drop the file (its space goes back to the disk)."""
        if self.file is not None:
            self.file.close()
            self.file = None
        self.read_at = self.write_at = 0
