"""What the adoption commands share (``tools/adopt_maxtext.py``, ``tools/adopt_controller.py``): how a vendored file
is hashed, compressed and listed in ``tests/data/vendor/SHA256SUMS``, how a command refuses its arguments, and how it
ends on a failure (``AdoptError``: one line naming the command)."""

from __future__ import annotations

import functools
import hashlib
import lzma
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from core.errors import TpuRlError
from tools.process import report


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def git_blob(data: bytes) -> str:
    """``git hash-object`` of ``data``."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


@functools.cache
def compressed(content: bytes) -> bytes:
    """``content`` as it is vendored (``.xz``, xz's strongest preset): the same bytes for the same file, made once per
    process (the tests adopt the same release several times)."""
    return lzma.compress(content, preset=9 | lzma.PRESET_EXTREME)


def merge_sums(sums_file: Path, sums: Mapping[str, str], replaced: Callable[[str], bool]) -> None:
    """``SHA256SUMS`` with the lines of ``sums`` (name -> sha256) in place of those whose name ``replaced`` says,
    sorted by name."""
    kept = {}
    for line in sums_file.read_text().splitlines():
        digest, name = line.split("  ", 1)
        if not replaced(name):
            kept[name] = digest
    kept |= sums
    sums_file.write_text("".join(f"{kept[name]}  {name}\n" for name in sorted(kept)))


def refuse(prog: str, problems: list[str]) -> int:
    """Every problem of the arguments, a line each, and exit status 2."""
    for problem in problems:
        print(f"{prog}: {problem}", file=sys.stderr)
    return 2


class AdoptError(TpuRlError):
    """One line: what failed and the fix."""


def run(prog: str, problems: list[str], adopt: Callable[[], int]) -> int:
    """Every problem of the arguments, a line each, and exit status 2; else ``adopt``, whose failure is one line
    naming the command, with the error's exit status."""
    if problems:
        return refuse(prog, problems)
    try:
        return adopt()
    except TpuRlError as err:
        return report(err, prefix=prog)
