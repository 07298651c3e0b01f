"""Redaction by shape (``core/redact.py``), on lines shaped as the real writers print them: any ``Authorization``
value, a signed URL's signature, a private key, every secret the process knows, and bidirectional controls shown."""

from __future__ import annotations

import base64
import json
import re

import pytest

from core import redact
from core.redact import env_secrets, redact_text, remember, scrub

pytestmark = pytest.mark.pure

OPAQUE = "gho_0pAqUe7oKeN"  # an opaque bearer token: no known prefix, not a JWT


@pytest.fixture(autouse=True)
def _forget():
    known = set(redact._known)
    yield
    redact._known.clear()
    redact._known.update(known)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # urllib3 / requests debug and curl -v lines
        (f"send: b'GET /v1 HTTP/1.1\\r\\nAuthorization: Bearer {OPAQUE}\\r\\n'", "Authorization: [redacted]"),
        ("> Authorization: Basic dXNlcjpwYXNzd29yZA==", "Authorization: [redacted]"),
        (f"> Proxy-Authorization: Negotiate {OPAQUE}", "Proxy-Authorization: [redacted]"),
        (f'{{"headers": {{"authorization": "token {OPAQUE}"}}}}', '"authorization": "[redacted]"'),
        (f"authorization={OPAQUE}&x=1", "authorization=[redacted]&x=1"),
    ],
    ids=["urllib3-debug", "curl-basic", "proxy-negotiate", "json-token", "form"],
)
def test_any_authorization_value(line, expected):
    for out in (scrub(line, limit=500), redact_text(line)):
        assert OPAQUE not in out and "dXNlcjpwYXNz" not in out and expected in out, out


SIGNED = (
    "https://storage.googleapis.com/b/o.safetensors?X-Goog-Algorithm=GOOG4-RSA-SHA256"
    "&X-Goog-Credential=sa%40p.iam.gserviceaccount.com%2F20261205%2Fauto%2Fstorage%2Fgoog4_request"
    "&X-Goog-Date=20261205T000000Z&X-Goog-Expires=900&X-Goog-SignedHeaders=host&X-Goog-Signature=9f8e7d6c5b4a"
)


@pytest.mark.parametrize(
    ("url", "gone", "kept"),
    [
        (SIGNED, ("9f8e7d6c5b4a", "sa%40p.iam"), ("X-Goog-Signature=[redacted]", "X-Goog-Date=20261205T000000Z")),
        ("https://b.s3.amazonaws.com/k?X-Amz-Signature=abcd1234&X-Amz-Credential=AKIA12345", ("abcd1234", "AKIA1"), ()),
        ("https://a.blob.core.windows.net/c/b?sv=2022-11-02&sig=Zm9v%2Bbar%3D", ("Zm9v",), ("sv=2022-11-02",)),
        ("https://cdn-lfs.hf.co/repos/x?Signature=Abc~Def__&Key-Pair-Id=K2", ("Abc~Def",), ()),
        ("https://hub/api?token=t0ken-value&page=2", ("t0ken-value",), ("page=2",)),
    ],
)
def test_url_query_signatures(url, gone, kept):
    out = redact_text(f"GET {url} -> 403")
    assert not [g for g in gone if g in out] and all(k in out for k in kept), out


@pytest.mark.parametrize(
    "text",
    [
        "no signature here: signature=abc is prose",  # not a query parameter (no ? or & before it)
        "https://hub/api?tokens=3&page=2",  # another parameter whose name starts like one
        "the Authorization header is required",  # the word, with no value after : or =
    ],
)
def test_just_outside_the_shapes_nothing_changes(text):
    assert scrub(text, limit=500) == text


def test_private_keys_whole_or_cut():
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nxyz\n-----END RSA PRIVATE KEY-----"
    out = redact_text(f"loaded key:\n{pem}\nnext line")
    assert out == "loaded key:\n[redacted private key]\nnext line"
    cut = redact_text("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC")  # a log cut mid-key
    assert cut == "[redacted private key]"
    key_file = '{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\\nMIIE\\n", "x": 1}'
    assert "MIIE" not in scrub(key_file, limit=500)
    public = "-----BEGIN PUBLIC KEY-----\nMIIBIjAN\n-----END PUBLIC KEY-----"
    assert redact_text(public) == public


def test_every_known_secret_of_the_process():
    line = "pulumi: passphrase s3cr3t-passphrase rejected; hf write token hfwrite-0paque"
    assert "s3cr3t" in scrub(line, limit=300)
    remember(*env_secrets({"PULUMI_CONFIG_PASSPHRASE": "s3cr3t-passphrase", "HOME": "/home/me", "HF_TOKEN": ""}))
    remember("hfwrite-0paque", "short")
    out = scrub(line, limit=300)
    assert "s3cr3t" not in out and "hfwrite" not in out and out.count("[redacted]") == 2
    assert "short" in scrub("a short line") and "/home/me" in scrub("/home/me")
    assert env_secrets({"MY_API_KEY": "v1", "KEYBOARD": "v2", "GOOGLE_OAUTH_ACCESS_TOKEN": "v3"}) == ["v1", "v3"]


def test_make_logs_and_status_redact_the_environments_secrets(monkeypatch, capsys):
    from tools import logs, status

    for tool, secret in ((logs, "logs-secret-value"), (status, "status-secret-value")):
        monkeypatch.setenv("TPU_RL_TEST_TOKEN", secret)
        with pytest.raises(SystemExit):
            tool.main(["--help"])
        assert secret in redact._known
        assert secret not in scrub(f"error: {secret}")


@pytest.mark.parametrize(
    "char",
    ["\u202e", "\u2066", "\u200f", "\ufeff", "\u00ad", "\U000e0041", "\x1b[2J", "\x1b]8;;https://evil\x07"],
    ids=["RLO", "LRI", "RLM", "BOM", "soft-hyphen", "tag", "clear-screen", "hyperlink"],
)
def test_bidirectional_invisible_and_terminal_characters_are_removed(char):
    """Removed, not shown: the rules then read the text a person reads (``core/terminal.py``)."""
    line = f"step failed: {char}txt.exe"
    assert scrub(line) == "step failed: txt.exe"
    assert redact_text(line) == "step failed: txt.exe"
    assert scrub("naïve café — ok ❤️") == "naïve café — ok ❤️"  # letters, punctuation and emoji: kept
    assert redact_text("a\u2028b") == "a\nb" and scrub("a\u2028b") == "a b", "a line separator breaks the line"


# ---------------------------------------------------------------------------------------------
# The terminal's text first, then the rules; every quoting; what --tail cuts

OPAQUE_HEADERS = {
    "coloured": (f"\x1b[1;33mAuthorization\x1b[0m: Bearer \x1b[32m{OPAQUE}\x1b[0m", "Authorization: [redacted]"),
    "colour-between-letters": (
        "".join(f"\x1b[3{i % 8}m{c}" for i, c in enumerate(f"Authorization: Bearer {OPAQUE}")) + "\x1b[0m",
        "Authorization: [redacted]",
    ),
    "zero-width-inside": (f"Author\u200bization: Bearer {OPAQUE[:5]}\u00ad{OPAQUE[5:]}", "Authorization: [redacted]"),
    "json": (json.dumps({"headers": {"Authorization": f"Bearer {OPAQUE}"}}), '"Authorization": "[redacted]"'),
    "json-in-json": (
        json.dumps({"body": json.dumps({"authorization": f"Bearer {OPAQUE}"})}),
        '\\"authorization\\": \\"[redacted]\\"',
    ),
    "json-in-json-in-json": (
        json.dumps({"log": json.dumps({"body": json.dumps({"authorization": f"Bearer {OPAQUE}"})})}),
        "[redacted]",
    ),
    "grpc-tuple": (
        repr([("x-goog-request-params", "bucket=b"), ("authorization", f"Bearer {OPAQUE}")]),
        "('authorization', '[redacted]')",
    ),
    "grpc-bytes": (repr((b"authorization", f"Bearer {OPAQUE}".encode())), "(b'authorization', b'[redacted]')"),
    "grpc-metadatum": (f"_Metadatum(key='authorization', value='Bearer {OPAQUE}')", "value='[redacted]'"),
    "curl": (f"curl -H 'Authorization: Bearer {OPAQUE}' -H 'Accept: */*'", "-H 'Authorization: [redacted]' -H"),
    "go-map": (f"map[Authorization:[Bearer {OPAQUE}] Accept:[*/*]]", "Authorization:[[redacted]] Accept:[*/*]"),
    "python-dict": (repr({"Authorization": f"Bearer {OPAQUE}"}), "{'Authorization': '[redacted]'}"),
    "har": (json.dumps({"name": "Authorization", "value": f"Bearer {OPAQUE}"}), '"value": "[redacted]"'),
    "cookie": (f"Cookie: session={OPAQUE}; theme=dark", "Cookie: [redacted]"),
    "set-cookie": (f"Set-Cookie: sid={OPAQUE}; HttpOnly", "Set-Cookie: [redacted]"),
    "x-goog-api-key": (f"X-Goog-Api-Key: {OPAQUE}", "X-Goog-Api-Key: [redacted]"),
    "x-goog-iam-token": (f"x-goog-iam-authorization-token: {OPAQUE}", "x-goog-iam-authorization-token: [redacted]"),
    "x-api-key": (f'"x-api-key": "{OPAQUE}"', '"x-api-key": "[redacted]"'),
    "api-key-yaml": (f"  api_key: {OPAQUE}", "api_key: [redacted]"),
    "env": (f"export HF_TOKEN='{OPAQUE}'", "HF_TOKEN='[redacted]'"),
    "passphrase": (f"PULUMI_CONFIG_PASSPHRASE={OPAQUE} pulumi up", "PULUMI_CONFIG_PASSPHRASE=[redacted] pulumi up"),
    "client-secret": (json.dumps({"client_secret": OPAQUE, "refresh_token": OPAQUE}), '"refresh_token": "[redacted]"'),
    "userinfo": (f"git clone https://oauth2:{OPAQUE}@github.com/o/r.git", "https://[redacted]@github.com/o/r.git"),
    "userinfo-token": (f"fetch https://{OPAQUE}@huggingface.co/x", "https://[redacted]@huggingface.co/x"),
    "userinfo-at-sign": (f"https://u:p@{OPAQUE}@pypi.example/simple", "https://[redacted]@pypi.example/simple"),
}


@pytest.mark.parametrize(("line", "expected"), OPAQUE_HEADERS.values(), ids=OPAQUE_HEADERS.keys())
def test_secret_fields_in_any_quoting_and_colour(line, expected):
    for out in (scrub(line, limit=1000), redact_text(line)):
        assert OPAQUE not in out and OPAQUE[:8] not in out and expected in out, out


@pytest.mark.parametrize(
    "text",
    [
        "Access-Control-Allow-Headers: Authorization, Content-Type",  # a list of names
        "Vary: Cookie, Accept-Encoding",
        "secretName: hf-token",  # a name that says secret, and is not the secret
        'the "password" field is required',
        "https://storage.googleapis.com/b/sa@p.iam.gserviceaccount.com/o",  # an @ in the path: no userinfo
        "X-Goog-Date=20261205T000000Z&X-Goog-Expires=900",  # a signed URL's parameters that sign nothing
        "max_tokens=512 pad_token: <pad> eos_token_id: 1",
        "tpu-rl:training is stored as a secret: only tpu-rl:hfToken may be",  # prose: an unquoted `secret`
        "or accept the passphrase with ALLOW_PASSPHRASE=1",  # a number or a boolean is no secret
        "a *_TOKEN/KEY/SECRET/PASSWORD= assignment",  # `= word`: prose, not an assignment
        'tpu-rl:gke.secretsEncryptionKey = "projects/p/locations/l/keyRings/r/cryptoKeys/k"',  # a KMS key's name
    ],
)
def test_near_misses_of_the_fields_print_unchanged(text):
    assert scrub(text, limit=500) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"secret": "s3cr3tvalue"}', '{"secret": "[redacted]"}'),  # `secret` quoted: a field
        ("PASSWORD=hunter2x", "PASSWORD=[redacted]"),
        ("ALLOW_PASSPHRASE=1234567", "ALLOW_PASSPHRASE=[redacted]"),  # past a small number
        ("password = 'hunter2x'", "password = '[redacted]'"),  # quoted after `= `
    ],
)
def test_the_fields_just_past_the_near_misses(text, expected):
    assert scrub(text) == expected


def _key_file(indent: int | None) -> bytes:
    return json.dumps(
        {
            "type": "service_account",
            "project_id": "acme-tpu",
            "private_key_id": "0123abcd",
            "private_key": PEM,
            "client_email": "sa@acme-tpu.iam.gserviceaccount.com",
            "token_uri": "https://oauth2.googleapis.com/token",
        },
        indent=indent,
    ).encode()


PEM = (
    "-----BEGIN PRIVATE KEY-----\n"
    + "\n".join(base64.b64encode(bytes((i * 7 + j * 13) % 256 for j in range(48))).decode() for i in range(20))
    + "\nAAEC\n-----END PRIVATE KEY-----\n"
)
"""A PEM private key's shape: 20 lines of 64 base64 characters, a short last line (not a real key)."""


@pytest.mark.parametrize(
    "encode",
    [
        lambda raw: base64.b64encode(raw).decode(),
        lambda raw: base64.b64encode(raw).decode().rstrip("="),
        lambda raw: base64.urlsafe_b64encode(raw).decode(),
        lambda raw: base64.encodebytes(raw).decode(),  # wrapped at 76, as `base64 key.json` prints it
        lambda raw: "\n".join(base64.encodebytes(raw).decode().splitlines()[-6:]),  # its last lines (--tail)
        lambda raw: base64.b64encode(raw).decode()[1001:],  # cut anywhere: each of the 4 alignments
        lambda raw: base64.b64encode(raw).decode()[1002:],
        lambda raw: base64.b64encode(raw).decode()[1003:],
    ],
    ids=["standard", "unpadded", "url-safe", "wrapped", "wrapped-tail", "cut-1", "cut-2", "cut-3"],
)
@pytest.mark.parametrize("indent", [None, 2], ids=["compact", "gcloud"])
def test_a_service_account_key_file_in_base64(encode, indent):
    """Pulumi's ``gcp.serviceaccount.Key.privateKey``, a Kubernetes Secret's data, ``base64 key.json``: whatever it
    starts with (``ewogICJ0eXBlIjogInNlcnZpY2VfYWNjb3VudCIs``, ``eyJ0eXBlIjogInNlcnZpY2VfYWNjb3VudCIs``...)."""
    encoded = encode(_key_file(indent))
    out = redact_text(f"key.json: {encoded}\nnext line")
    assert out.startswith("key.json: [redacted]") and out.endswith("\nnext line"), out
    assert not re.search(r"[A-Za-z0-9+/_-]{40}", out), out


def test_a_pem_body_cut_from_its_begin_line():
    lines = PEM.splitlines()
    for first in (1, 5, 19, 20):  # `make logs --tail` cut the BEGIN line and some of the body
        out = redact_text("\n".join(["I1205 starting", *lines[first:], "I1205 next"]))
        assert out == "I1205 starting\n[redacted private key]\nI1205 next", out
    body = redact_text("\n".join(["I1205 x", *lines[3:9], "I1205 y"]))  # neither its BEGIN nor its END line
    assert body == "I1205 x\n[redacted]\nI1205 y", body
    escaped = json.dumps({"private_key": PEM})[40:]  # a key file's field, cut before its name and BEGIN line
    assert "[redacted" in scrub(escaped, limit=5000) and not re.search(r"[A-Za-z0-9+/]{20}", scrub(escaped, limit=5000))
    hex_lines = "\n".join("0123456789abcdef" * 4 for _ in range(4))
    assert redact_text(hex_lines) == hex_lines, "64 hex digits a line (sha256 digests): not a key"


@pytest.mark.parametrize("offset", [0, 1, 2])
@pytest.mark.parametrize("alphabet", ["standard", "url-safe"])
@pytest.mark.parametrize("padded", [True, False])
def test_a_known_secret_printed_in_base64(offset, alphabet, padded):
    remember("s3cr3t-passphrase-value")
    raw = b"u:"[:offset] + b"s3cr3t-passphrase-value" + b"\n"
    encoded = (base64.b64encode if alphabet == "standard" else base64.urlsafe_b64encode)(raw).decode()
    encoded = encoded if padded else encoded.rstrip("=")
    out = scrub(f"Secret data: token: {encoded} (from kubectl get secret -o yaml)", limit=500)
    assert "[redacted]" in out and encoded[4:16] not in out, out


def test_a_known_secret_wrapped_across_lines():
    remember("s3cr3t-passphrase-value")
    assert redact_text("passphrase was s3cr3t-pass\n    phrase-value; retry") == "passphrase was [redacted]; retry"
