"""Properties of the redaction (``core/redact.py``) over generated secrets and the shapes they are printed in: the
quotings of a header (JSON, JSON inside JSON, gRPC tuples, curl, Go), a URL's userinfo, an environment assignment,
base64 at any offset and in either alphabet, a secret wrapped across lines; each printed as a hostile or careless
program prints it (colour codes between its characters, invisible characters in it, CRLF ends, among other log
lines). No secret survives, and text with no secret in it is changed only by what a terminal would not show."""

from __future__ import annotations

import base64
import json
import random
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import Phase, assume, configuration, given, settings
from hypothesis import strategies as st

from core import redact
from core.redact import redact_text, remember, scrub
from core.terminal import TERMINAL_CONTROLS, visible

pytestmark = [pytest.mark.pure, pytest.mark.slow]
configuration.set_hypothesis_home_dir(
    Path(tempfile.gettempdir()) / "tpu-rl-hypothesis"
)  # not the checkout's .hypothesis

PROPERTIES = settings(
    max_examples=120,
    deadline=None,
    database=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
)
"""The same examples on every run (a CI run cannot fail on a new draw), nothing written to the checkout."""

ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
OPAQUE = st.text(ALNUM + "-._~", min_size=16, max_size=48).filter(lambda s: sum(c in ALNUM for c in s) >= 12)
"""An opaque bearer token (no known prefix): only where it is printed says it is one."""
HF = st.text(ALNUM, min_size=34, max_size=34).map(lambda s: "hf_" + s)
GOOGLE = st.text(ALNUM + "-_", min_size=40, max_size=120).map(lambda s: "ya29.a0" + s)
KNOWN = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=10, max_size=40).filter(
    lambda s: len(set(s)) >= 6
)
"""A secret the process knows (``remember``): a passphrase, a write token, any printable text."""

HEADER_SHAPES: dict[str, Callable[[str], str]] = {
    "header": lambda s: f"Authorization: Bearer {s}",
    "proxy": lambda s: f"> Proxy-Authorization: Basic {s}",
    "json": lambda s: json.dumps({"headers": {"Authorization": f"Bearer {s}"}}),
    "json-in-json": lambda s: json.dumps({"body": json.dumps({"authorization": f"Bearer {s}", "x": 1})}),
    "json-in-json-in-json": lambda s: json.dumps({"a": json.dumps({"b": json.dumps({"Authorization": s})})}),
    "grpc": lambda s: repr([("x-goog-api-client", "gl-python/3.11"), ("authorization", f"Bearer {s}")]),
    "grpc-bytes": lambda s: repr([(b"authorization", f"Bearer {s}".encode())]),
    "metadatum": lambda s: f"_Metadatum(key='authorization', value='Bearer {s}')",
    "curl": lambda s: f'curl -sS -H "Authorization: Bearer {s}" -H "Accept: */*" https://hub/api',
    "urllib3": lambda s: (
        "send: " + repr(f"GET /api HTTP/1.1\r\nHost: hub\r\nAuthorization: Bearer {s}\r\n\r\n".encode())
    ),
    "go": lambda s: f"map[Accept:[*/*] Authorization:[Bearer {s}]]",
    "python": lambda s: repr({"authorization": f"Bearer {s}", "accept": "*/*"}),
    "har": lambda s: json.dumps({"name": "authorization", "value": f"Bearer {s}"}),
    "form": lambda s: f"POST /token authorization={s}&grant_type=x",
    "yaml": lambda s: f"headers:\n  authorization: Bearer {s}\n  accept: '*/*'",
    "cookie": lambda s: f"Cookie: session={s}; theme=dark",
    "x-goog": lambda s: f"x-goog-api-key: {s}",
    "api-key": lambda s: json.dumps({"api_key": s}),
    "env": lambda s: f"+ export HF_TOKEN={s}",
    "env-quoted": lambda s: f"GOOGLE_OAUTH_ACCESS_TOKEN='{s}' gcloud auth print-access-token",
    "password": lambda s: f"password: {s}",
    "userinfo": lambda s: f"git clone https://oauth2:{s}@github.com/acme/repo.git",
    "userinfo-user": lambda s: f"remote: https://{s}@huggingface.co/acme/model",
}
"""Where a secret is printed so that the text around it says it is one."""

NOISE = st.lists(
    st.sampled_from(
        [
            "I1205 12:00:01.123 train_rl.py:88] step 10, loss 0.25",
            "hf_transfer is not installed; falling back",
            "Downloading model-00001-of-00002.safetensors: 100%",
            "the Authorization header is required",
            "W1205 absl.py:1] max_tokens=512 pad_token: <pad>",
            "gs://bucket/gemma4-26b/convert/hub/google/gemma-4-26b-a4b-it/0123abcd/",
        ]
    ),
    max_size=3,
)
COLOURS = ["\x1b[31m", "\x1b[1;33m", "\x1b[0m", "\x1b]8;;https://x.example/\x07", "\x1b]8;;\x07"]
INVISIBLES = ["\u200b", "\u00ad", "\u2060", "\ufeff", "\U000e0020", "\u202e", "\u2066"]


@st.composite
def printed(draw: st.DrawFn, line: str) -> str:
    """``line`` as a program may print it: colour codes or invisible characters between some or all of its characters,
    CRLF or LF ends, among other log lines."""
    mode = draw(st.sampled_from(["plain", "colour-every-char", "colour-some", "invisible-some"]))
    if mode == "colour-every-char":
        line = "".join(c + draw(st.sampled_from(COLOURS)) for c in line)
    elif mode != "plain":
        pool = COLOURS if mode == "colour-some" else INVISIBLES
        cuts = sorted(draw(st.lists(st.integers(0, len(line)), max_size=8)))
        pieces, done = [], 0
        for at in cuts:
            pieces += [line[done:at], draw(st.sampled_from(pool))]
            done = at
        line = "".join(pieces) + line[done:]
    before, after = draw(NOISE), draw(NOISE)
    return draw(st.sampled_from(["\n", "\r\n"])).join([*before, line, *after])


def _leaks(secret: str, out: str, around: str) -> list[str]:
    """The 8-character pieces of ``secret`` in ``out`` that the text ``around`` it does not hold itself."""
    return [
        secret[i : i + 8]
        for i in range(len(secret) - 7)
        if secret[i : i + 8] in out and secret[i : i + 8] not in around
    ]


@pytest.fixture(autouse=True)
def _forget():
    known = set(redact._known)
    yield
    redact._known.clear()
    redact._known.update(known)


@PROPERTIES
@given(st.data(), st.sampled_from(sorted(HEADER_SHAPES)), OPAQUE | HF | GOOGLE)
def test_a_secret_where_the_text_says_it_is_one_never_prints(data, shape, secret):
    line = HEADER_SHAPES[shape](secret)
    text = data.draw(printed(line))
    around = visible(text).replace(secret, "") + "[redacted]"
    for out in (redact_text(text), scrub(text, limit=10**6)):
        assert not _leaks(secret, out, around), (shape, out)
        assert not TERMINAL_CONTROLS.search(out)
    assert redact_text(redact_text(text)) == redact_text(text), "redacting twice changes nothing more"


@PROPERTIES
@given(st.data(), HF | GOOGLE)
def test_a_token_by_its_shape_never_prints_wherever_it_is(data, token):
    words = data.draw(
        st.lists(st.sampled_from(["error:", "token", "was", "(", ")", "'", '"', "=", ":", "/"]), max_size=6)
    )
    at = data.draw(st.integers(0, len(words)))
    text = data.draw(printed(" ".join([*words[:at], token, *words[at:]])))
    out = redact_text(text)
    assert not _leaks(token, out, "[redacted]"), out


def _base64_forms(secret: bytes, prefix: bytes, suffix: bytes) -> list[str]:
    raw = prefix + secret + suffix
    standard = base64.b64encode(raw).decode()
    return [standard, standard.rstrip("="), base64.urlsafe_b64encode(raw).decode().rstrip("=")]


def _encoded_cores(secret: bytes) -> list[str]:
    """The characters of ``secret``'s base64 that its bytes alone decide, at each byte offset and in both alphabets
    (written here apart from ``core.redact_keys``)."""
    cores = []
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + secret).decode()
        first, last = (8 * offset + 5) // 6, (8 * (offset + len(secret))) // 6
        cores += [encoded[first:last], encoded[first:last].replace("+", "-").replace("/", "_")]
    return cores


@PROPERTIES
@given(st.data(), KNOWN, st.binary(max_size=5), st.binary(max_size=5))
def test_a_known_secret_never_prints_in_any_form(data, secret, prefix, suffix):
    remember(secret)
    forms = {
        "as written": secret,
        "wrapped": (lambda at: secret[:at] + "\n    " + secret[at:])(data.draw(st.integers(1, len(secret) - 1))),
        "json": json.dumps(secret)[1:-1],
        **{f"base64 {i}": form for i, form in enumerate(_base64_forms(secret.encode(), prefix, suffix))},
    }
    name = data.draw(st.sampled_from(sorted(forms)))
    text = data.draw(printed(f"value {forms[name]} rejected"))
    out = redact_text(text)
    around = visible(text).replace(forms[name], "") + "[redacted]"
    assert not _leaks(secret, out, around), (name, out)
    for core in _encoded_cores(secret.encode()):
        assert not _leaks(core, out, around), (name, core, out)


@settings(PROPERTIES, max_examples=30)  # each example a key of up to 1,800 bytes through every redaction rule
@given(st.data(), st.integers(0, 2**32), st.integers(0, 30), st.sampled_from([64, 70, 76]))
def test_a_private_key_never_prints_whole_or_cut(data, seed, cut, width):
    rng = random.Random(seed)  # a key's bytes are random: a seed, not bytes that shrink to zeros
    body = base64.b64encode(rng.randbytes(rng.randint(100, 1800))).decode()
    lines = [body[i : i + width] for i in range(0, len(body), width)]
    pem = ["-----BEGIN PRIVATE KEY-----", *lines, "-----END PRIVATE KEY-----"]
    shape = data.draw(st.sampled_from(["whole", "tail", "head", "middle"]))
    shown = {"whole": pem, "tail": pem[1 + cut % len(lines) :], "head": pem[: -1 - cut % len(lines)]}.get(
        shape, lines[cut % 5 : len(lines) - cut % 5]
    )
    assume(shape != "middle" or sum(len(line) == width for line in shown) >= 2)  # a body cut at both ends: 2 lines
    text = data.draw(printed("\n".join(shown)))
    out = redact_text(text)
    for line in lines[:-1]:
        assert not _leaks(line, out, "[redacted private key]"), (shape, out)


WORDS = st.sampled_from(
    [
        "step",
        "loss",
        "hf_transfer",
        "hf_hub_download",
        "hf_xet",
        "max_tokens=512",
        "tokenizer_path:",
        "Authorization",
        "header",
        "secretName:",
        "hf-token",
        "model-00001-of-00002.safetensors",
        "gs://bucket/gemma4-26b/train/",
        "https://huggingface.co/google/gemma-4-26b-a4b-it",
        "sha256:" + "0123456789abcdef" * 4,
        "0.25",
        "✓",
        "❤️",
        "中文",
        "(",
        ")",
        ",",
        "\n",
        "\t",
    ]
)


@PROPERTIES
@given(st.data(), st.lists(WORDS, max_size=40))
def test_text_with_no_secret_is_only_what_a_terminal_shows(data, words):
    text = " ".join(words)
    hostile = data.draw(printed(text))
    assert redact_text(hostile) == visible(hostile)
    assert redact_text(text) == text
    assert scrub(hostile, limit=10**6) == " ".join(visible(hostile).split())
