"""Redaction by shape (``core/redact.py``), on lines shaped as the real writers print them: any ``Authorization``
value, a signed URL's signature, a private key, every secret the process knows, and bidirectional controls shown."""

from __future__ import annotations

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
    ("char", "shown"),
    [
        ("\u202e", "<U+202E>"),
        ("\u2066", "<U+2066>"),
        ("\u200f", "<U+200F>"),
        ("\u2028", "<U+2028>"),
        ("\ufeff", "<U+FEFF>"),
    ],
    ids=["RLO", "LRI", "RLM", "LS", "BOM"],
)
def test_bidirectional_and_invisible_characters_are_shown(char, shown):
    line = f"step failed: {char}txt.exe"
    assert scrub(line) == f"step failed: {shown}txt.exe"
    assert redact_text(line) == f"step failed: {shown}txt.exe"
    assert scrub("naïve café — ok") == "naïve café — ok"  # letters and punctuation outside C0/C1: kept
