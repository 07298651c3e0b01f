"""The record the ``python3`` shims of the step-script tests keep of each call: its argv, written by the shim's own
``sh`` (``LOG``, a line of the shim with ``{log}`` for the file), read back by ``read_calls``. Logging a call starts
no interpreter: the scripts call ``python3`` a few times each, and a Python started only to write a line of JSON
would cost more than the bash that runs them."""

from __future__ import annotations

from pathlib import Path

LOG = 'printf \'%s\\0\' "$#" "$@" >> "{log}"'
"""The shim's line that records its call: the number of words, then each word, every one ending in a NUL (which no
argument can hold)."""


def read_calls(log: Path) -> list[list[str]]:
    """Each recorded call's argv, in order, decoded as Python decodes its own (UTF-8, undecodable bytes kept as
    surrogates)."""
    words = log.read_bytes().split(b"\0")
    if words.pop() != b"":
        raise AssertionError(f"{log} ends in the middle of a call")
    calls: list[list[str]] = []
    while words:
        count = int(words.pop(0))
        calls.append([word.decode("utf-8", "surrogateescape") for word in words[:count]])
        del words[:count]
    return calls
