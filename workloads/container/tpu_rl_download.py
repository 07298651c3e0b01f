"""What the evaluation's and the publication's programs share, a file of their ConfigMaps only (their programs import
it; ``workloads.specs.commands.program_imports`` ships it beside them): a downloaded object's local file that takes at
most the object's listed size (``CappedFile``). Standard library only, as the image runs it.
"""

from __future__ import annotations

from pathlib import Path


class CappedFile:
    """The local copy of one object, at most ``cap`` bytes (its listed size): a server that sends more stops the
    download (google-cloud-storage writes the body in chunks) with ``too_large`` instead of filling the disk. Its line
    names ``what`` when given."""

    def __init__(self, path: Path, cap: int, too_large: type[Exception], what: str = "") -> None:
        self.file, self.cap, self.too_large, self.written = path.open("wb"), cap, too_large, 0
        self.what = f"{what}: " if what else ""

    def write(self, chunk: bytes) -> int:
        self.written += len(chunk)
        if self.written > self.cap:
            raise self.too_large(f"{self.what}GCS sent more than its {self.cap} listed bytes")
        return self.file.write(chunk)

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.close()
