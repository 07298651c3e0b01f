"""Token shapes and scrubbing, shared by the config readers, the live reads, the preflight, the report, ``make logs``
and the policy pack: no message the project prints may carry a credential.

Every text is first made what a terminal shows (``core.terminal.visible``: escape sequences, control and invisible
characters removed), then the rules run on that text, in this order, each on what the one before left:

1. every secret the process knows (``remember``, the caller's), as written, wrapped across lines, percent- or
   JSON-escaped, and in base64 (standard and URL-safe, at each of the three byte offsets, so inside a longer
   encoded text too: ``core.redact_keys.encoded_forms``);
2. private keys: PEM blocks, a PEM body cut from its ``BEGIN`` line, a run of base64 lines of a key's width, and base64
   text that decodes to a key file, a key or a known secret (``core.redact_keys``);
3. secret fields in any quoting: ``Authorization``, ``Proxy-Authorization``, ``Cookie``, ``X-Goog-*`` and API-key
   headers, and fields named as tokens, keys, secrets or passwords (``Name: value``, ``"name": "value"``, JSON-escaped
   ``\\"name\\": \\"value\\"``, gRPC metadata ``('name', 'value')``, ``name=value``, Go's ``Name:[value]``);
4. the userinfo of a URL (``https://user:password@host``) and a signed URL's signature and credential;
5. token shapes: Hugging Face (``hf_`` and 30 or more letters and digits: ``hf_transfer``, ``hf_hub_download`` are
   names, not tokens), Google OAuth access and refresh tokens, API keys and client secrets, JWTs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING or __package__:  # the project's package
    from core.redact_keys import REDACTED, TOKEN_SHAPES, encoded_forms, private_keys, wrapped
    from core.terminal import TERMINAL_CONTROLS, visible
else:  # a file of a step's ConfigMap, beside its programs (workloads/specs/commands.py CORE_FILES)
    from redact_keys import REDACTED, TOKEN_SHAPES, encoded_forms, private_keys, wrapped
    from terminal import TERMINAL_CONTROLS, visible

__all__ = ["HF_TOKEN", "TERMINAL_CONTROLS", "env_secrets", "redact_text", "remember", "scrub", "scrub_lines"]

HF_TOKEN = re.compile(r"hf_[A-Za-z0-9]{16,}")
"""What the config refuses as a Hugging Face access token (``hf_`` + at least 16 letters/digits; real ones have 34):
stricter than the redaction's shape, as a setting never holds a name like ``hf_transfer``."""

ACCESS_TOKENS = re.compile(TOKEN_SHAPES)
"""Token shapes in text from elsewhere (``core.redact_keys.TOKEN_SHAPES``)."""

_QUOTE = r"\\*[\"'`]"
_NAME = re.compile(
    r"[\w-]*?(?:api|access|auth|secret|private|signing|subscription|session)[-_]?key"
    r"|[\w-]*?(?:access|auth|refresh|id|session|security|bearer|oauth|api|hf|csrf|xsrf)[-_]?token"
    r"|[\w-]*?(?:secret|password|passwd|passphrase)"
    r"|(?:identity|registry)token|auth"  # a registry credentials file's fields (``{"auths": {host: {"auth": ...}}}``)
    r"|(?:proxy-)?authorization|(?:set-)?cookie|x-goog-[a-z0-9-]+",
    re.IGNORECASE,
)
"""The name of a secret field, a whole word: a header that carries credentials (``X-Goog-*``: ``X-Goog-Api-Key``,
``X-Goog-Iam-Authorization-Token``, ``X-Goog-Encryption-Key``...), or a name that says key, token, secret or password
(``x-api-key``, ``HF_TOKEN``, ``client_secret``, ``PULUMI_CONFIG_PASSPHRASE``; not ``max_tokens``, ``pad_token``)."""
_HEADER = re.compile(r"(?:proxy-)?authorization|(?:set-)?cookie|x-[\w-]+", re.IGNORECASE)
"""The secret fields that are HTTP headers or gRPC metadata: their value runs to the end of the line (``Bearer x``,
``a=1; b=2``), and a tuple (``('authorization', 'Bearer x')``) or a ``{"name": ..., "value": ...}`` pair holds one."""
_NAME_END = re.compile(
    r"(?:key|token|secret|password|passwd|passphrase|authorization|auth|cookie|x-goog-[a-z0-9-]+)(?![\w-])",
    re.IGNORECASE,
)
"""Where a secret field's name may end (the scan looks for these, then reads the word back to its start)."""
_WORD_BACKWARDS = re.compile(r"[\w-]*")
_AFTER_NAME = re.compile(
    rf"(?P<nq>{_QUOTE})?[ \t]*(?:(?P<sep>:=|=>|[:=])|,[ \t]*(?:{_QUOTE}?value{_QUOTE}?[ \t]*[:=])?)[ \t]*"
    rf"(?P<open>b?{_QUOTE}|\[)?",
    re.IGNORECASE,
)
"""What follows a secret field's name: its closing quote, the separator (``:``, ``=``, or a tuple's ``,``, which needs
a quoted name) and the value's opening quote or bracket. ``_fields`` finds where the value ends."""
_BARE_VALUE = re.compile(r"(?:(?:bearer|basic|token|digest|negotiate)[ \t]+)?[^\s\"'`\\&;,)\]}]+", re.IGNORECASE)
"""An unquoted value but a header's after ``:``: the scheme and one word (``authorization=Bearer x&y=1``,
``password: x``)."""
_HEADER_VALUE = re.compile(r"[^\n\"'`\\]*")
"""An unquoted header's value after ``:``: the rest of its line, up to a quote or an escape (``-H 'Cookie: a=1;
b=2'``, ``b'...Authorization: Basic x\\r\\n...'``)."""
_NOT_A_VALUE = re.compile(r"[0-9]{1,6}|true|false|yes|no|none|null|on|off", re.IGNORECASE)
"""An unquoted value that is no secret: a small number, a boolean, nothing (``ALLOW_PASSPHRASE=1``)."""
_QUOTED = {quote: re.compile(rf"(?:\\.|[^{quote}\\\n])*") for quote in "\"'`"}

USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^\s/?#\"'`<>\\\[\]]+@")
"""The userinfo of a URL, up to its last ``@`` before the path: ``user:password``, or a token as the user name."""
SIGNED_QUERY = re.compile(
    r"(?P<name>(?:[?&;]|\\u0026)"
    r"(?:x-goog-signature|x-goog-credential|x-amz-signature|x-amz-credential|x-amz-security-token|"
    r"signature|sig|token|access_token|id_token|refresh_token|code|api_key|apikey|key|se|sp|skoid|sktid)=)"
    r"[^&\s\"'#<>\\]+",
    re.IGNORECASE,
)
"""A URL's query parameter that signs or authorises the request: a GCS or S3 signed URL's signature and credential,
an Azure SAS's ``sig``, an OAuth token or code, an API key; after ``?``, ``&`` or ``;`` (HTML's ``&amp;`` too), and
after ``&`` as JSON escapes it (``\\u0026``)."""

_known: set[str] = set()


def remember(*secrets: str) -> None:
    """Secrets every later ``scrub`` and ``redact_text`` of this process redacts (a tool's tokens, the environment's
    secrets: ``env_secrets``); empty and short values (under 8 characters) are not secrets worth a redaction that
    would mangle ordinary words."""
    _known.update(s for s in secrets if isinstance(s, str) and len(s) >= 8)


SECRET_NAMES = re.compile(r"TOKEN|SECRET|PASSPHRASE|PASSWORD|CREDENTIAL|PRIVATE|(^|_)KEY($|_)", re.IGNORECASE)


def env_secrets(environ: dict[str, str]) -> list[str]:
    """The values of the environment variables named as secrets (``HF_TOKEN``, ``PULUMI_CONFIG_PASSPHRASE``,
    ``GOOGLE_OAUTH_ACCESS_TOKEN``...)."""
    return [value for name, value in environ.items() if SECRET_NAMES.search(name) and value]


def _value_end(text: str, start: int, opener: str | None, header: bool) -> int:
    """Where a secret field's value that starts at ``start`` ends: at its closing quote or bracket, else at the end
    of its line; unquoted, at the end of its line for a header, else at the end of a word."""
    line_end = text.find("\n", start)
    line_end = len(text) if line_end < 0 else line_end
    if opener == "[":
        close = text.find("]", start, line_end)
    elif opener:
        quote = opener.lstrip("bB")
        if len(quote) == 1:
            return _QUOTED[quote].match(text, start, line_end).end()  # type: ignore[union-attr]
        close = text.find(quote, start, line_end)
    else:
        bare = (_HEADER_VALUE if header else _BARE_VALUE).match(text, start, line_end)
        return start + len(bare.group().rstrip()) if bare else start
    return line_end if close < 0 else close


def _name_at(text: str, end: int, tail_start: int) -> str | None:
    """The secret field's name that ends at ``end`` (``_NAME``: the whole word before it; a word after an escaped
    newline or tab, ``\\r\\nAuthorization``, starts after it), or None."""
    before = _WORD_BACKWARDS.match(text[max(0, tail_start - 64) : tail_start][::-1]).group()[::-1]  # type: ignore[union-attr]
    word = before + text[tail_start:end]
    start = tail_start - len(before)
    if start > 0 and text[start - 1] == "\\" and word[:1] in "nrt":
        word = word[1:]
    return word if _NAME.fullmatch(word) else None


def _value_span(text: str, name: str, m: re.Match[str]) -> tuple[int, int] | None:
    """Where the value of the secret field ``name`` is (``m``: what follows the name), or None when there is none: no
    separator, a list of names, a signed URL's parameter, an unquoted ``secret`` (prose: "stored as a secret: only"), a
    word after ``= `` (prose), an empty value, a number or a boolean, a structure, or a value redacted already."""
    header, quoted, sep = bool(_HEADER.fullmatch(name)), bool(m["nq"]), m["sep"]
    if sep is None and not (quoted and header):
        return None
    if not quoted and ((sep == "=" and name.lower().startswith("x-goog-")) or name.lower() == "secret"):
        return None
    start = m.end()
    if sep and sep != ":" and not m["open"] and start > m.end("sep"):
        return None
    end = _value_end(text, start, m["open"], header and sep != "=")
    value = text[start:end]
    at = m.start("open") if m["open"] else start
    if not value or value.startswith("[redacted") or text.startswith(("[redacted", "{"), at):
        return None
    return None if not m["open"] and _NOT_A_VALUE.fullmatch(value) else (start, end)


def _fields(text: str) -> str:
    """Each secret field's value as ``[redacted]``, its name, quotes and separator kept."""
    out, pos = [], 0
    for tail in _NAME_END.finditer(text):
        name = _name_at(text, tail.end(), tail.start()) if tail.start() >= pos else None
        m = _AFTER_NAME.match(text, tail.end()) if name else None
        span = _value_span(text, name, m) if name and m else None
        if span:
            out += [text[pos : span[0]], REDACTED]
            pos = span[1]
    return "".join(out) + text[pos:]


def _known_secrets(text: str, secrets: Iterable[str]) -> str:
    """Each secret in ``secrets`` redacted, longest first, wherever it is in any of its forms."""
    for secret in sorted(secrets, key=len, reverse=True):
        half = len(secret) // 2
        if secret[:half] in text or secret[half:] in text:  # wrapped anywhere, one half is whole
            text = wrapped(secret).sub(REDACTED, text)
        for form in encoded_forms(secret) if len(secret) >= 8 else ():
            text = text.replace(form, REDACTED)
    return text


def _redacted(text: str, secrets: tuple[str, ...]) -> str:
    known = {s for s in (*secrets, *_known) if s}
    text = private_keys(_known_secrets(visible(text), known), known)
    text = USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", _fields(text))
    text = SIGNED_QUERY.sub(lambda m: f"{m['name']}{REDACTED}", text)
    return ACCESS_TOKENS.sub(REDACTED, text)


def scrub(text: str, *secrets: str, limit: int = 200) -> str:
    """`text` safe to print as one line: what a terminal shows of it (``core.terminal.visible``) with every secret
    redacted (the module's docstring: `secrets` and those ``remember``ed, keys, secret fields, URL userinfo, signed
    URLs' signatures, token shapes), whitespace folded, at most `limit` characters."""
    return " ".join(_redacted(text, secrets).split())[:limit]


def scrub_lines(text: str, *secrets: str, limit: int = 200) -> list[str]:
    """Each line of `text` (a ``ConfigError`` holds one problem a line) as ``scrub`` makes a line, redacted as a whole
    first (a key spans lines); empty lines dropped (a blank text is one empty line)."""
    redacted = _redacted(text, secrets)
    lines = [" ".join(line.split())[:limit] for line in redacted.splitlines()]
    return [line for line in lines if line] or [""]


def redact_text(text: str, *secrets: str, width: int = 4000) -> str:
    """Many lines of remote text (a pod's log) safe to print, as ``scrub`` makes one line safe: what a terminal shows
    of it with every secret redacted; the lines, their indentation and tabs kept (a CRLF end read as LF), each line cut
    at `width` characters."""
    return "\n".join(line[:width] for line in _redacted(text, secrets).split("\n"))
