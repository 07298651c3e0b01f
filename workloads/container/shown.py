"""What a step prints of a text from elsewhere (a Hub or GCS error, a record's field, a line of train_rl's log, the API
server's reason): what a terminal would draw of it, with the secrets the pod holds, private keys and token shapes
redacted.

The programs of ``workloads/container`` import it from their ConfigMap's folder (``python3 /tpu-rl/<file>`` puts it
first on ``sys.path``; ``workloads/specs/commands.py`` ``program_imports`` ships it beside each). It is standard
library only, as the image runs it, so it holds core's patterns as core writes them, and
``tests/test_container_shown.py`` checks that each is core's:

1. first, what a terminal acts on or does not draw: ANSI escape sequences whole (colours, clear-screen, OSC 8
   hyperlinks and their targets, OSC 52 clipboard writes), control characters but tab and newline, invisible and
   format characters (the soft hyphen, zero-width characters, bidirectional controls, the tag characters
   U+E0000-E007F) and variation selectors that can carry text (``core/terminal.py`` ``HIDDEN``), so the rules after
   it read what a person reads;
2. the values of the pod's environment variables named as secrets (``HF_TOKEN``: ``core/redact.py``
   ``SECRET_NAMES``), wherever they are;
3. private keys: a PEM block, a block cut before its ``END`` line and a body cut from its ``BEGIN`` line
   (``core/redact_keys.py`` ``KEY_MARK``);
4. token shapes: Hugging Face's, Google's OAuth tokens, API keys and client secrets, JWTs (``core/redact.py``
   ``ACCESS_TOKENS``).

``make logs`` and ``make status`` redact again on the workstation (``core.redact``), with every rule; this is what a
pod's log holds in the cluster, where anyone who may read the namespace's logs reads it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

HIDDEN = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?|\x1b[]PX^_][^\n\x07\x1b\x9c]*(?:\x1b\\|\x9c|\x07)?|\x1b[ -/]*[0-~]"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
    "|[\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u17b4\u17b5\u180b-\u180f"
    "\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufeff\uffa0\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e007f]"
    "|[\ufe00-\ufe0d\U000e0100-\U000e01ef]"
    "|(?<![\u00a9\u00ae\u203c\u2049\u2100-\u2bff\u3030\u303d\u3297\u3299\U0001f000-\U0001faff])[\ufe0e\ufe0f]"
    "|[\ufe0e\ufe0f](?=[\ufe00-\ufe0f\U000e0100-\U000e01ef])"
)
"""What a terminal acts on or does not draw: ``core/terminal.py``'s ``HIDDEN``."""
LINE_SEPARATORS = str.maketrans({"\u2028": "\n", "\u2029": "\n"})
"""The Unicode line and paragraph separators, which are line breaks: ``core/terminal.py``'s."""
SECRET_NAMES = re.compile(r"TOKEN|SECRET|PASSPHRASE|PASSWORD|CREDENTIAL|PRIVATE|(^|_)KEY($|_)", re.IGNORECASE)
"""An environment variable whose value is a secret: ``core/redact.py``'s ``SECRET_NAMES``."""
KEY_MARK = re.compile(r"-----(?P<kind>BEGIN|END) (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
"""A PEM private key's first or last line: ``core/redact_keys.py``'s ``KEY_MARK``."""
ACCESS_TOKENS = re.compile(
    r"hf_(?:oauth_)?[A-Za-z0-9]{30,}"
    r"|ya29\.[A-Za-z0-9._-]+"
    r"|1//0[A-Za-z0-9_-]{20,}"
    r"|AIza[0-9A-Za-z_-]{35}"
    r"|GOCSPX-[A-Za-z0-9_-]{20,}"
    r"|eyJ[A-Za-z0-9._-]{20,}"
)
"""Token shapes, each by its prefix, alphabet and length: ``core/redact.py``'s ``ACCESS_TOKENS`` (``hf_transfer`` is a
name, not a token)."""
REDACTED = "[redacted]"
REDACTED_KEY = "[redacted private key]"
_BODY_BEFORE = re.compile(r"(?:[ \t\r\n]*=*[A-Za-z0-9+/]+)*")
"""A key's base64 body before its ``END`` line, read backwards (on the reversed text)."""
_BEHIND = 65536
"""How far back from an ``END`` line its body is looked for (a 16384-bit RSA key's body is about 12 KB)."""
SHORTEST_SECRET = 8
"""A shorter value of a secret's variable is no secret worth a redaction that would mangle ordinary words."""


def held_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of the environment's variables named as secrets (``SECRET_NAMES``), the longest first."""
    env = os.environ if environ is None else environ
    found = {value for name, value in env.items() if SECRET_NAMES.search(name) and len(value) >= SHORTEST_SECRET}
    return sorted(found, key=len, reverse=True)


def _private_keys(text: str) -> str:
    """Each PEM private key as ``[redacted private key]``: from its ``BEGIN`` line to its ``END`` line (to the end of
    the text when it has none), or its body before an ``END`` line whose ``BEGIN`` line was cut."""
    marks = list(KEY_MARK.finditer(text))
    out, pos = [], 0
    for index, mark in enumerate(marks):
        if mark.start() < pos:
            continue
        if mark["kind"] == "BEGIN":
            start = mark.start()
            end = next((after.end() for after in marks[index + 1 :] if after["kind"] == "END"), len(text))
        else:
            behind = text[max(pos, mark.start() - _BEHIND) : mark.start()][::-1]
            start, end = mark.start() - _BODY_BEFORE.match(behind).end(), mark.end()  # type: ignore[union-attr]
        out += [text[pos:start], REDACTED_KEY]
        pos = end
    return "".join(out) + text[pos:]


def redacted(text: object, environ: Mapping[str, str] | None = None) -> str:
    """``text`` as a terminal would draw it (``HIDDEN`` removed, line separators as newlines), then the pod's secrets
    (``held_secrets`` of ``environ``, the process's by default), private keys and token shapes redacted: the module's
    rules in its order. Newlines and tabs stay."""
    shown = HIDDEN.sub("", str(text)).translate(LINE_SEPARATORS)
    for secret in held_secrets(environ):
        shown = shown.replace(secret, REDACTED)
    return ACCESS_TOKENS.sub(REDACTED, _private_keys(shown))


def line(text: object, limit: int | None = 300, unprintable: str = "?") -> str:
    """``text`` as one log line (``redacted``, whitespace folded, any other character that does not print as
    ``unprintable``), at most ``limit`` characters (None: whole)."""
    flat = "".join(c if c.isprintable() else unprintable for c in " ".join(redacted(text).split()))
    return " ".join(flat.split())[:limit] if unprintable.isspace() else flat[:limit]
