"""A configured secret found by its value, in the forms the redaction finds it (``core.redact``'s rules 1 and 2): for
the policy pack's ``secret-holders``. Kept apart from the redaction's modules, which the steps ship: a step's name
hashes what it ships, and no step runs this."""

from __future__ import annotations

import re

from core.redact import _known_secrets
from core.redact_keys import _LINE_SEP, _STANDARD, BASE64_RUN, NESTING, _decoded


def holds(text: str, secret: str) -> bool:
    """Whether ``text`` carries ``secret``: as written, wrapped across lines, percent- or JSON-escaped, or in base64
    of either alphabet at any alignment, its last partial group too, nested down to ``NESTING`` encodings."""
    if _known_secrets(text, (secret,)) != text:
        return True
    pattern = re.compile(re.escape(secret.encode()))
    return len(secret) >= 8 and any(_decodes_to(run, pattern, len(secret), NESTING) for run in _runs(text, len(secret)))


def _runs(text: str, size: int) -> list[str]:
    """The base64 runs of ``text`` long enough to encode ``size`` bytes (4 letters for every 3; shorter ones, most
    of a script's words, cannot)."""
    return [m.group() for m in BASE64_RUN.finditer(text) if m.end() - m.start() >= size * 4 // 3]


def _decodes_to(run: str, secret: re.Pattern[bytes], size: int, depth: int) -> bool:
    """Whether base64 ``run`` (wrapped or not; a run of both alphabets is a path, no base64) decodes to ``secret`` (of
    ``size`` characters), or to base64 that does, down to ``depth`` encodings."""
    letters = "".join(re.split(_LINE_SEP, run)).replace("=", "")
    if ("+" in letters or "/" in letters) and ("-" in letters or "_" in letters):
        return False
    decoded = _decoded(letters.translate(_STANDARD))
    if secret.search(decoded) is not None:
        return True
    inner = decoded.decode("ascii", errors="replace")
    return depth > 1 and any(_decodes_to(run, secret, size, depth - 1) for run in _runs(inner, size))
