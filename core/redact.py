"""Token shapes and scrubbing, shared by the config readers, the live reads, the preflight, the
report and the policy pack: no message the project prints may carry a credential."""

from __future__ import annotations

import re

HF_TOKEN = re.compile(r"hf_[A-Za-z0-9]{16,}")
"""A Hugging Face access token (``hf_`` + at least 16 letters/digits; real ones have 34)."""

ACCESS_TOKENS = re.compile(r"ya29\.[A-Za-z0-9._-]+|hf_[A-Za-z0-9]{8,}|eyJ[A-Za-z0-9._-]{20,}")
"""Anything token-shaped in text from elsewhere: Google OAuth and Hugging Face tokens, JWTs.
Broader than ``HF_TOKEN``: a redaction too many costs nothing."""


TERMINAL_CONTROLS = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)
"""ANSI escape sequences (CSI, OSC) and the C0/C1 control characters (tab and newline stay: they are
folded into spaces), so remote text cannot move the cursor, recolour or rewrite the terminal."""


def scrub(text: str, *secrets: str, limit: int = 200) -> str:
    """`text` safe to print: `secrets` and token-shaped words redacted, terminal control sequences
    removed, one line, at most `limit` characters."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    text = TERMINAL_CONTROLS.sub("", text)
    return " ".join(ACCESS_TOKENS.sub("[redacted]", text).split())[:limit]


def scrub_lines(text: str, *secrets: str, limit: int = 200) -> list[str]:
    """Each line of `text` (a ``ConfigError`` holds one problem a line) through ``scrub``; empty lines dropped."""
    lines = [scrub(line, *secrets, limit=limit) for line in text.splitlines()]
    return [line for line in lines if line] or [scrub(text, *secrets, limit=limit)]


def redact_text(text: str, *secrets: str, width: int = 4000) -> str:
    """Many lines of remote text (a pod's log) safe to print, as ``scrub`` makes one line safe: `secrets` and
    token-shaped words redacted, terminal control sequences removed; the lines, their indentation and tabs kept,
    each line cut at `width` characters."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "[redacted]")
    text = ACCESS_TOKENS.sub("[redacted]", TERMINAL_CONTROLS.sub("", text))  # \r too: CRLF ends read as LF
    return "\n".join(line[:width] for line in text.split("\n"))
