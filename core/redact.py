"""Token shapes and scrubbing, shared by the config readers, the live reads, the preflight, the
report and the policy pack: no message the project prints may carry a credential."""

from __future__ import annotations

import re

HF_TOKEN = re.compile(r"hf_[A-Za-z0-9]{16,}")
"""A Hugging Face access token (``hf_`` + at least 16 letters/digits; real ones have 34)."""

ACCESS_TOKENS = re.compile(r"ya29\.[A-Za-z0-9._-]+|hf_[A-Za-z0-9]{8,}|eyJ[A-Za-z0-9._-]{20,}")
"""Anything token-shaped in text from elsewhere: Google OAuth and Hugging Face tokens, JWTs.
Broader than ``HF_TOKEN``: a redaction too many costs nothing."""


AUTHORIZATION = re.compile(
    r"""(?P<name>(?:proxy-)?authorization["']?\s*[:=]\s*["']?)(?:(?:bearer|basic|token|digest|negotiate)\s+)?"""
    r"""[^\s"',;&]+(?:\s+[^\s"',;=&]+(?=["',;]|$))?""",
    re.IGNORECASE,
)
"""An ``Authorization`` (or ``Proxy-Authorization``) header or field, whatever its scheme and value: its value goes,
the name stays (``Authorization: [redacted]``)."""
SIGNED_QUERY = re.compile(
    r"(?P<name>[?&;](?:x-goog-signature|x-goog-credential|x-amz-signature|x-amz-credential|x-amz-security-token|"
    r"signature|sig|token|access_token|id_token|refresh_token|code|api_key|apikey|key|se|sp|skoid|sktid)=)[^&\s\"'#<>]+",
    re.IGNORECASE,
)
"""A URL's query parameter that signs or authorises the request: a GCS or S3 signed URL's signature and credential,
an Azure SAS's ``sig``, an OAuth token or code, an API key."""
PRIVATE_KEY = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----.*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\Z)"
    r"|\"private_key\"\s*:\s*\"[^\"]*\"?",
    re.DOTALL,
)
"""A PEM private key block (to its end, or to the end of the text when cut), and a service account key file's
``"private_key"`` field."""
INVISIBLE = re.compile("[\u061c\u200b-\u200f\u202a-\u202e\u2028\u2029\u2060-\u2064\u2066-\u2069\ufeff]")
"""Bidirectional controls (the "Trojan Source" characters: embeddings, overrides, isolates, marks), zero-width
characters and the Unicode line and paragraph separators: shown as ``<U+XXXX>``, so text cannot reorder or hide what
a reader sees."""
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


def _shapes(text: str, secrets: tuple[str, ...]) -> str:
    for secret in sorted({*secrets, *_known}, key=len, reverse=True):
        if secret:
            text = text.replace(secret, "[redacted]")
    text = PRIVATE_KEY.sub("[redacted private key]", text)
    text = AUTHORIZATION.sub(lambda m: f"{m['name']}[redacted]", text)
    text = SIGNED_QUERY.sub(lambda m: f"{m['name']}[redacted]", text)
    return INVISIBLE.sub(lambda m: f"<U+{ord(m.group()):04X}>", text)


TERMINAL_CONTROLS = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)
"""ANSI escape sequences (CSI, OSC) and the C0/C1 control characters (tab and newline stay: they are
folded into spaces), so remote text cannot move the cursor, recolour or rewrite the terminal."""


def scrub(text: str, *secrets: str, limit: int = 200) -> str:
    """`text` safe to print: `secrets` (and those ``remember``ed), token-shaped words, ``Authorization`` values,
    signed URLs' signatures and private keys redacted, terminal control sequences removed, bidirectional controls
    shown, one line, at most `limit` characters."""
    text = TERMINAL_CONTROLS.sub("", _shapes(text, secrets))
    return " ".join(ACCESS_TOKENS.sub("[redacted]", text).split())[:limit]


def scrub_lines(text: str, *secrets: str, limit: int = 200) -> list[str]:
    """Each line of `text` (a ``ConfigError`` holds one problem a line) through ``scrub``; empty lines dropped."""
    lines = [scrub(line, *secrets, limit=limit) for line in text.splitlines()]
    return [line for line in lines if line] or [scrub(text, *secrets, limit=limit)]


def redact_text(text: str, *secrets: str, width: int = 4000) -> str:
    """Many lines of remote text (a pod's log) safe to print, as ``scrub`` makes one line safe: `secrets` and
    token-shaped words redacted, terminal control sequences removed; the lines, their indentation and tabs kept,
    each line cut at `width` characters."""
    text = ACCESS_TOKENS.sub(
        "[redacted]", TERMINAL_CONTROLS.sub("", _shapes(text, secrets))
    )  # \r too: CRLF ends read as LF
    return "\n".join(line[:width] for line in text.split("\n"))
