"""The redaction's rules for keys and encoded secrets (``core.redact`` runs them): a known secret in the forms it is
printed in, PEM private keys whole or cut, and base64 text that is a key, a key file or a known secret.

A log cut by ``make logs --tail`` can start inside a key: its body then has no ``BEGIN`` line, and a base64-encoded
service account key file (Pulumi's ``gcp.serviceaccount.Key.privateKey``, a Kubernetes Secret's data, ``base64
key.json``) can start anywhere in its JSON. So these rules judge what the text is, not how it starts: a run of base64
lines before an ``END ... PRIVATE KEY`` line, lines of a PEM body's width, and base64 (either alphabet, any of its
four alignments, wrapped or not) whose bytes hold a key file's field, a key's algorithm identifier or a known secret.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from functools import lru_cache
from itertools import pairwise
from urllib.parse import quote, quote_plus

REDACTED = "[redacted]"
REDACTED_KEY = "[redacted private key]"

_PIECE = r"[A-Za-z0-9+/]+=*"
_LINE_SEP = r"[ \t]*(?:\n|\\+(?:r\\+)?n)[ \t]*"
"""Between two lines of a key: a newline, or an escaped one inside a JSON or Python string (``\\n``, ``\\r\\n``)."""
KEY_MARK = re.compile(r"-----(?P<kind>BEGIN|END) (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
"""A PEM private key's first or last line (PKCS #8, RSA, EC, OpenSSH, encrypted, PGP's ``PRIVATE KEY BLOCK``)."""
_BODY_AFTER = re.compile(rf"(?:(?:{_LINE_SEP}|[ \t]+)(?:{_PIECE}|[A-Za-z-]+:[ \t]*[^\s\\]+))*")
"""A key's body after its ``BEGIN`` line: base64 lines (or words, where a key was printed with spaces for its line
breaks) and RFC 1421 headers (``Proc-Type: 4,ENCRYPTED``)."""
_BODY_BEFORE = re.compile(r"(?:[ \t]*(?:\n|n\\+(?:r\\+)?)[ \t]*=*[A-Za-z0-9+/]+)*")
"""A key's body before its ``END`` line, read backwards (on the reversed text: one pass, however long the text)."""
_BEHIND = 65536
"""How far back from an ``END`` line its body is looked for (a 16384-bit RSA key's body is about 12 KB)."""

_TOKEN = r"[A-Za-z0-9+/_-]"
BASE64_RUN = re.compile(
    rf"(?<!{_TOKEN}){_TOKEN}{{16,}}=*"
    rf"(?:[ \t]*\n[ \t]*{_TOKEN}+=*(?=[ \t]*(?:\n|\Z))|[ \t]*\\+(?:r\\+)?n[ \t]*{_TOKEN}+=*)*(?!{_TOKEN})"
)
"""A run of base64 text (either alphabet): a word of at least 16 characters, and the lines of one word each that
follow it (base64 wrapped at 64 or 76 characters), or the words after it each after an escaped newline (in a JSON
string)."""
_KEY_LINE = re.compile(r"(?=.*[A-Z])(?=.*[a-z])(?=.*[0-9])(?=.{60,80}$)[A-Za-z0-9+/]+={0,2}")
"""A full line of a PEM body (64 characters; OpenSSH's 70; MIME's 76), of base64 letters, digits and more: not hex."""
KEY_BYTES = (
    b"PRIVATE KEY",
    b"private_key",
    b"service_account",
    b"authorized_user",
    b"external_account",
    b"refresh_token",
    b"client_secret",
    b"client-key-data",
    b"openssh-key-v1",
    b"\x06\x09\x2a\x86\x48\x86\xf7\x0d\x01\x01\x01",  # the rsaEncryption OID, in a DER key (and a certificate)
    b"\x06\x07\x2a\x86\x48\xce\x3d\x02\x01",  # id-ecPublicKey
    b"\x06\x03\x2b\x65\x70",  # Ed25519
    b'"auths"',  # a registry's credentials file (a Secret's .dockerconfigjson)
)
"""What decoded base64 holds when it is a key file (a service account's, ADC's user credentials, a kubeconfig, a
registry's credentials), a PEM key or a DER key."""
TOKEN_SHAPES = (
    r"hf_(?:oauth_)?[A-Za-z0-9]{30,}"  # Hugging Face: hf_ + 34 letters and digits; names have underscores or are short
    r"|ya29\.[A-Za-z0-9._-]+"  # a Google OAuth access token
    r"|1//0[A-Za-z0-9_-]{20,}"  # a Google OAuth refresh token
    r"|AIza[0-9A-Za-z_-]{35}"  # a Google API key
    r"|GOCSPX-[A-Za-z0-9_-]{20,}"  # a Google OAuth client secret
    r"|eyJ[A-Za-z0-9._-]{20,}"  # a JWT (an identity token, a Kubernetes service account token)
)
"""Token shapes, each by its prefix, alphabet and length: in text (``core.redact``) and in decoded base64."""
NESTING = 3
"""How many times base64 is decoded inside base64 (a Secret's data holding a registry file holding an ``auth``)."""
_STANDARD = str.maketrans("-_", "+/")
_URL_SAFE = str.maketrans("+/", "-_")


@lru_cache(maxsize=256)
def encoded_forms(secret: str) -> tuple[str, ...]:
    """The forms ``secret`` is printed in besides itself: percent-encoded, JSON-escaped, and its base64 in both
    alphabets at each byte offset of a longer encoded text, each cut to the characters that hold only the secret's
    bits (the neighbouring bytes change the others: GitHub's secret scanning does the same); the long ones first."""
    forms = {quote(secret, safe=""), quote_plus(secret), json.dumps(secret)[1:-1]}
    raw = secret.encode()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode().rstrip("=")
        core = encoded[-(-8 * offset // 6) : 8 * (offset + len(raw)) // 6]
        forms |= {core, core.translate(_URL_SAFE)} if len(core) >= 8 else set()
    forms.discard(secret)
    return tuple(sorted(forms, key=len, reverse=True))


@lru_cache(maxsize=256)
def wrapped(secret: str) -> re.Pattern[str]:
    """``secret`` as written, or wrapped across lines anywhere in it (a line break with its indentation)."""
    return re.compile(r"(?:[ \t]*\n[ \t]*)?".join(map(re.escape, secret)))


@lru_cache(maxsize=16)
def _secret_bytes(known: frozenset[str]) -> re.Pattern[bytes]:
    """What decoded base64 is searched for: ``KEY_BYTES``, the token shapes and the ``known`` secrets."""
    literal = b"|".join(re.escape(b) for b in (*KEY_BYTES, *sorted(s.encode() for s in known if len(s) >= 8)))
    return re.compile(literal + b"|" + TOKEN_SHAPES.encode())


def _decoded(letters: str) -> bytes:
    """The bytes of base64 ``letters`` (standard alphabet, no padding) at each of its 4 alignments, joined by a new
    line; a last partial group of 2 or 3 letters decoded too (its 1 or 2 bytes: a token that ends the text)."""
    found = []
    for start in range(4):
        tail = letters[start:]
        whole = len(tail) // 4 * 4
        rest = tail[whole:] if len(tail) - whole >= 2 else ""
        found.append(base64.b64decode(tail[:whole] + rest + "=" * (-len(rest) % 4)))
    return b"\n".join(found)


def _is_secret(run: str, secrets: re.Pattern[bytes], depth: int = NESTING) -> bool:
    """Whether base64 ``run`` (``BASE64_RUN``) has two lines of a PEM body in a row, or decodes (either alphabet,
    wrapped or not, at any of its 4 alignments, its last partial group too) to a key, a token shape or a secret
    (``secrets``), or to base64 that does, down to ``depth`` encodings. A run of both alphabets (a path: ``/`` and
    ``_``) is no base64 to decode."""
    lines = re.split(_LINE_SEP, run) if "\n" in run or "\\" in run else [run]
    if any(len(a) == len(b) and _KEY_LINE.fullmatch(a) and _KEY_LINE.fullmatch(b) for a, b in pairwise(lines)):
        return True
    letters = "".join(lines).replace("=", "")
    if ("+" in letters or "/" in letters) and ("-" in letters or "_" in letters):
        return False
    decoded = _decoded(letters.translate(_STANDARD))
    if secrets.search(decoded) is not None:
        return True
    inner = decoded.decode("ascii", errors="replace")
    return depth > 1 and any(_is_secret(m.group(), secrets, depth - 1) for m in BASE64_RUN.finditer(inner))


def private_keys(text: str, known: Iterable[str] = ()) -> str:
    """``text`` with each PEM private key (its ``BEGIN`` line to its ``END`` line, or through its body when cut; a
    body cut from its ``BEGIN`` line back from its ``END`` line) as ``[redacted private key]``, and each base64 run
    (``BASE64_RUN``) that is a PEM body or decodes to a key, a key file or a ``known`` secret as ``[redacted]``."""
    marks = list(KEY_MARK.finditer(text))
    out, pos = [], 0
    for index, mark in enumerate(marks):
        if mark.start() < pos:
            continue
        if mark["kind"] == "BEGIN":
            after = marks[index + 1] if index + 1 < len(marks) else None
            start = mark.start()
            end = after.end() if after and after["kind"] == "END" else _BODY_AFTER.match(text, mark.end()).end()  # type: ignore[union-attr]
        else:
            behind = text[max(pos, mark.start() - _BEHIND) : mark.start()][::-1]
            start, end = mark.start() - _BODY_BEFORE.match(behind).end(), mark.end()  # type: ignore[union-attr]
            if start == mark.start() - _BEHIND > pos:  # a body longer than the look-back: the line it cuts is the key's
                start = max(pos, text.rfind("\n", 0, start) + 1)
            first = re.search(_LINE_SEP, text[start : mark.start()])
            if first and start > 0 and text[start - 1] in " \t" and first.start() < 16:  # a prose line's last word
                start += first.end()
        out += [text[pos:start], REDACTED_KEY]
        pos = end
    text = "".join(out) + text[pos:]
    secrets = _secret_bytes(frozenset(known))
    return BASE64_RUN.sub(lambda m: REDACTED if _is_secret(m.group(), secrets) else m.group(), text)
