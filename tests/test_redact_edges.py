"""The redaction's boundaries (``core/redact.py``, ``core/redact_keys.py``): where a field's value ends, which secrets
and encodings count, how a key's body is bounded, which base64 is decoded, and how the output is cut."""

from __future__ import annotations

import base64
import hashlib

import pytest

from core import redact
from core.redact import redact_text, remember, scrub, scrub_lines

pytestmark = pytest.mark.pure

END = "-----END PRIVATE KEY-----"
LINES = [base64.b64encode(bytes((i * 7 + j * 13) % 256 for j in range(48))).decode() for i in range(4)]
"""A PEM body's lines: 64 base64 characters each (not a real key)."""
BODY = "\n".join(LINES)
PEM = f"-----BEGIN PRIVATE KEY-----\n{BODY}\n{END}"
DER_HEAD = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"
"""The base64 of a PKCS #8 RSA key's first 24 bytes (its rsaEncryption identifier among them)."""


# Secret fields


def test_each_field_of_a_line_is_redacted_and_a_name_inside_a_value_is_not_read_again():
    line = "login user=ci password=hunter22 api_token=tok-123456 done"
    assert scrub(line) == "login user=ci password=[redacted] api_token=[redacted] done"
    assert scrub("password=x_api_token=yyyy") == "password=[redacted]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("password:[hunter22\nnext] line\nlast] one", "password:[[redacted]\nnext] line\nlast] one"),
        (
            '{\\"password\\": \\"hunter22\nnext\\" line\nlast\\" one',
            '{\\"password\\": \\"[redacted]\nnext\\" line\nlast\\" one',
        ),
    ],
    ids=["go-bracket", "json-escaped-quote"],
)
def test_an_unclosed_value_ends_at_its_line(text, expected):
    """A value whose closing bracket or quote is missing on its line (a log cut mid-line) runs to the end of that
    line only: the next lines print as they are."""
    assert redact_text(text) == expected


def test_an_escaped_quote_value_ends_at_its_first_closing_quote():
    text = '{\\"password\\": \\"hunter22\\", \\"user\\": \\"bob\\"}'
    assert scrub(text) == '{\\"password\\": \\"[redacted]\\", \\"user\\": \\"bob\\"}'


def test_a_bytes_literal_with_a_capital_prefix_is_a_quoted_value():
    assert scrub('password=B"hunter22" user=bob') == 'password=B"[redacted]" user=bob'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Cookie: a=1; b=2", "Cookie: [redacted]"),
        ('curl -H "Authorization: Bearer abc def" https://x', 'curl -H "Authorization: [redacted]" https://x'),
    ],
)
def test_a_header_value_runs_to_the_end_of_its_line_or_quote(text, expected):
    assert scrub(text) == expected


@pytest.mark.parametrize("text", ["password=; user=bob", "password=&user=bob", "password=)"])
def test_an_empty_unquoted_value_is_left_as_it_is(text):
    assert scrub(text) == text


def test_an_unquoted_value_is_redacted_whatever_the_text_ends_with():
    assert scrub("config password=hunter22 {") == "config password=[redacted] {"


@pytest.mark.parametrize("text", ['policy: {"password": {"minLength": 12}}', "password: {min: 12}"])
def test_a_structure_after_a_secret_name_is_no_value(text):
    assert scrub(text) == text


def test_a_name_after_an_escaped_newline_or_a_backslash():
    """``\\n`` before a name is an escaped newline (``'\\nAuthorization``: the name starts after it); a backslash
    that escapes no newline or tab leaves the name whole (``\\X-Goog-...``)."""
    assert scrub("'\\nAuthorization: Basic c2VjcmV0'") == "'\\nAuthorization: [redacted]'"
    assert scrub('header "\\X-Goog-Encryption-Key: c2VjcmV0"') == 'header "\\X-Goog-Encryption-Key: [redacted]"'


@pytest.mark.parametrize(("pairs", "redacted"), [(26, False), (27, True)])
def test_a_name_is_read_back_64_characters_from_its_last_word(pairs, redacted):
    """An ``x-goog-*`` name with ``=`` is a URL's parameter, not a field; the name is the word's last 64 characters
    before its last word (``key``), so an ``x-goog-`` further back no longer counts and the ``api-key`` field is."""
    name = "x-goog-" + "a_" * pairs + "api-key"
    assert scrub(f"{name}=abcdefgh") == (f"{name}=[redacted]" if redacted else f"{name}=abcdefgh")


# Known secrets


def test_the_longest_known_secret_goes_first():
    """A secret that holds another (``user:password`` and ``password``) goes whole: none of it is left."""
    assert scrub("credentials ci:hunter2-long rejected", "hunter2-long", "ci:hunter2-long") == (
        "credentials [redacted] rejected"
    )


@pytest.mark.parametrize(
    "text",
    [
        "s3\ncretVALUE-123456",  # one line break in its first half
        "s3c\nretVA\nLUE-123456",  # two, both in its first half
    ],
    ids=["once", "twice"],
)
def test_a_known_secret_wrapped_in_its_first_half(text):
    assert scrub(text, "s3cretVALUE-123456") == "[redacted]"


def test_a_known_secrets_encodings_count_from_8_characters():
    """Under 8 characters a secret is redacted as written only: its encodings are too short to tell from other
    text."""
    assert scrub("login p%40ss%20wd%21 failed", "p@ss wd!") == "login [redacted] failed"
    assert scrub("p@ss wd, p%40ss%20wd", "p@ss wd") == "[redacted], p%40ss%20wd"


def test_remember_keeps_secrets_from_8_characters(monkeypatch):
    monkeypatch.setattr(redact, "_known", set())  # the process's secrets, for this test only
    remember("hunter22", "hunter2")
    assert scrub("a hunter22 b hunter2") == "a [redacted] b hunter2"


def test_a_known_secret_in_base64_wrapped_inside_it():
    """``base64`` wraps at 64 or 76 characters: a break inside the secret's encoding hides it from the encoded forms,
    and the decoded run still holds it."""
    encoded = base64.b64encode(b"x" * 40 + b"s3cret-value-42" + b"y" * 20).decode()
    text = f"{encoded[:64]}\n{encoded[64:]}"
    assert "MzY3JldC12YWx1ZS00M" not in text  # the secret's encoded form is cut by the break
    assert scrub(text, "s3cret-value-42") == "[redacted]"


# Output shape


def test_redact_text_cuts_each_line_at_4000_characters():
    assert redact_text("word " * 1000) == ("word " * 800)[:4000]
    assert redact_text("abc\ndef", width=2) == "ab\nde"


def test_scrub_lines_keeps_lines_apart_and_cuts_each_at_200():
    assert scrub_lines("a\n\n b") == ["a", "b"]
    assert scrub_lines("y" * 500) == ["y" * 200]
    assert scrub_lines(" \n\t") == [""]


# Private keys


def test_two_keys_and_the_text_around_them():
    out = redact_text(f"first {PEM}\nthen {PEM}\nend")
    assert out == "first [redacted private key]\nthen [redacted private key]\nend"


def test_an_end_line_with_no_body_before_it():
    assert redact_text(f"cut: {END}") == "cut: [redacted private key]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"I1205 cut key:\n{BODY}\n{END}\nI1205 next", "I1205 cut key:\n[redacted private key]\nI1205 next"),
        (f"{LINES[0][:10]}\n{BODY}\n{END}\t", "[redacted private key]\t"),
    ],
    ids=["after-a-line", "at-the-start"],
)
def test_a_body_cut_from_its_begin_line_goes_from_its_first_line(text, expected):
    """A body that starts a line (or the text, whatever the text ends with) goes from its first character."""
    assert redact_text(text) == expected


@pytest.mark.parametrize("before", [" ", "key: "], ids=["text-start", "after-words"])
@pytest.mark.parametrize("length", [10, 15, 16])
def test_a_prose_lines_last_word_before_a_body_is_kept_under_16_characters(before, length):
    word = LINES[0][:length]
    out = redact_text(f"{before}{word}\n{BODY}\n{END}")
    assert out == (f"{before}{word}\n[redacted private key]" if length < 16 else f"{before}[redacted private key]")


# Base64 runs


def test_two_lines_of_different_base64_widths_are_no_key():
    """A sha256 digest (44 characters) and a sha384 digest (64, a PEM line's width) on the next line."""
    digests = "\n".join(
        base64.b64encode(hashlib.new(name, b"model.safetensors").digest()).decode() for name in ("sha256", "sha384")
    )
    assert redact_text(f"digests:\n{digests}\n") == f"digests:\n{digests}\n"


_DER = bytes.fromhex("308204bd020100300d06092a864886f70d0101010500048204a7") + bytes(range(256))


@pytest.mark.parametrize(
    "encoded",
    [base64.b64encode(_DER).decode(), base64.urlsafe_b64encode(_DER).decode()],
    ids=["standard", "url-safe"],
)
def test_a_der_key_in_either_alphabet_is_decoded(encoded):
    assert scrub(f"tls.key: {encoded} ok", limit=1000) == "tls.key: [redacted] ok"


@pytest.mark.parametrize(
    ("mixed", "single"),
    [
        (f"/srv/keys_{DER_HEAD}", f"/srv/keys/{DER_HEAD}"),
        (f"c++-build-{DER_HEAD}", f"c++/build/{DER_HEAD}"),
    ],
)
def test_a_run_of_both_alphabets_is_no_base64(mixed, single):
    """A word with ``/`` or ``+`` and ``_`` or ``-`` is a path or a name, not decoded whatever it would decode to; the
    same word in one alphabet is."""
    assert scrub(f"saved {mixed}") == f"saved {mixed}"
    assert scrub(f"saved {single}") == "saved [redacted]"


def test_a_key_file_in_base64_with_soft_line_breaks():
    """A quoted-printable mail body wraps lines at 76 characters with ``=`` at each break: the run is joined without
    them, so a key file's field cut by a break is still found."""
    raw = b'{\n  "project_id": "acme-tpu-rl-dev",\n  "type": "service_account",\n  "client_id": "10987654321"\n}'
    encoded = base64.b64encode(raw).decode()
    first, rest = encoded[:75], encoded[75:]
    field = raw.index(b"service_account")
    assert field * 4 // 3 < 75 < (field + 15) * 4 // 3  # the break falls inside the field's encoding
    assert redact_text(f"key.json:\n{first}=\n{rest}\nI1205 sent") == "key.json:\n[redacted]\nI1205 sent"


def test_a_header_after_an_escaped_newline_at_the_very_start_is_redacted():
    assert scrub("\\nAuthorization: Basic c2VjcmV0") == "\\nAuthorization: [redacted]"


def test_a_key_body_longer_than_the_look_back_leaves_no_part_of_the_line_it_cuts():
    """Cut from its ``BEGIN`` line, a body of 1,100 lines reaches past the 64 KiB looked back from its ``END`` line:
    the line at the window's edge is the key's too, every character of it."""
    from core.redact_keys import private_keys

    lines = [base64.b64encode(hashlib.sha512(str(i).encode()).digest()[:48]).decode() for i in range(1100)]
    shown = private_keys("\n".join(lines) + "\n-----END PRIVATE KEY-----\n")
    assert not any(line[:20] in shown for line in lines), shown[:200]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("refresh_token=r3fr3sh-v4lue \\", "refresh_token=[redacted] \\"),
        ("refresh_token: r3fr3sh-v4lue\\", "refresh_token: [redacted]\\"),
        ("rcookie=a1 cookie=session-42 \\", "rcookie=a1 cookie=[redacted] \\"),
    ],
    ids=["continued-shell-line", "trailing-backslash", "a-longer-word-is-no-name"],
)
def test_a_name_at_the_start_of_a_text_ending_in_a_backslash_is_read_whole(text, expected):
    """A shell line continued on the next (``refresh_token=... \\``) ends with a backslash; the field at its start is
    its whole first word, not that word after an escaped ``\\n``, ``\\r`` or ``\\t`` (only a backslash before it
    makes one)."""
    assert scrub(text) == expected
    assert redact_text(text) == expected


# Registry credentials, tokens in base64, escaped separators


def test_a_registry_credentials_files_entries():
    """A docker config's ``auth`` (base64 of user:password, no shape a token has) and its token fields, as JSON and
    as the Secret's base64 of that JSON; ``auths``' host map and an ``auth`` word of prose stay."""
    config = '{"auths": {"us-docker.pkg.dev": {"auth": "b2F1dGgyYWNjZXNzdG9rZW46c2VjcmV0", "identitytoken": "t0k3n!"}}}'
    assert scrub(config) == ('{"auths": {"us-docker.pkg.dev": {"auth": "[redacted]", "identitytoken": "[redacted]"}}}')
    assert scrub('{"registrytoken": "abc123xyz"}') == '{"registrytoken": "[redacted]"}'
    assert scrub(f"dockerconfigjson: {base64.b64encode(config.encode()).decode()}") == "dockerconfigjson: [redacted]"
    assert scrub("oauth: enabled; auth: true") == "oauth: enabled; auth: true"


TOKEN = "hf_" + "Ab1" * 10
"""A token of the Hugging Face shape at its shortest (30 letters and digits), never ``remember``ed: found by its shape
alone, so a byte lost from the end of its encoding would lose it."""


@pytest.mark.parametrize("prefix", ["", "x", "xy"], ids=["aligned", "one-byte-before", "two-bytes-before"])
@pytest.mark.parametrize("suffix", ["", "!", "!?"], ids=["ends-the-text", "one-byte-after", "two-bytes-after"])
def test_a_token_shape_in_base64_at_any_alignment_and_in_a_last_partial_group(prefix, suffix):
    encoded = base64.b64encode(f"{prefix}{TOKEN}{suffix}".encode()).decode()
    assert scrub(f"data: {encoded}") == "data: [redacted]"
    assert scrub(f"data: {encoded.rstrip('=')}") == "data: [redacted]", "unpadded: the last group is partial"


def test_a_token_shape_in_base64_nested_to_three_encodings_and_not_past_them():
    once = base64.b64encode(f"token: {TOKEN}".encode())
    thrice = base64.b64encode(base64.b64encode(once)).decode()
    assert scrub(f"v={thrice}") == "v=[redacted]"
    four = base64.b64encode(thrice.encode()).decode()
    assert scrub(f"v={four}") == f"v={four}"[:200], "a fourth encoding is past NESTING"


def test_a_base64_text_of_ordinary_words_prints_unchanged():
    plain = base64.b64encode(b"the model card of a run, its reward curve and its answers").decode()
    assert scrub(plain) == plain


@pytest.mark.parametrize(
    ("separator", "kept"),
    [("\\u0026", "\\u0026"), ("&amp;", "&amp;"), ("&", "&")],
    ids=["json-escaped", "html-escaped", "plain"],
)
def test_a_signed_urls_signature_after_an_escaped_separator(separator, kept):
    url = (
        "https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256"
        f"{separator}X-Goog-Credential=sa%40p.iam.gserviceaccount.com%2F20261207"
        f"{separator}X-Goog-Signature=0a1b2c3d4e5f{separator}X-Goog-Date=20261207T000000Z"
    )
    assert scrub(f'{{"url": "{url}"}}') == (
        '{"url": "https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256'
        f'{kept}X-Goog-Credential=[redacted]{kept}X-Goog-Signature=[redacted]{kept}X-Goog-Date=20261207T000000Z"}}'
    )
