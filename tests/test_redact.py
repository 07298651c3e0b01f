"""One scrubber for every message built from a remote reply: tokens never reach the user, and names that only look
like tokens (``hf_transfer``) are left as they are."""

from __future__ import annotations

import re
from pathlib import Path

import huggingface_hub
import pytest

from core.redact import HF_TOKEN, redact_text, scrub

pytestmark = pytest.mark.pure

REPO = Path(__file__).resolve().parents[1]
HF_REAL = "hf_" + "QwErTyUiOpAsDfGhJkLzXcVbNmQwErTyUi"  # a token's shape: hf_ + 34 letters and digits


def test_known_secrets_and_token_shapes_are_redacted_and_the_text_is_one_bounded_line():
    text = f"bad gateway;\n request had Bearer s3cret-value ya29.a0AfH6SM-x_y and {HF_REAL}\tand eyJ" + "a" * 20
    assert scrub(text, "s3cret-value", "") == (
        "bad gateway; request had Bearer [redacted] [redacted] and [redacted] and [redacted]"
    )
    assert scrub("x\n" * 300) == "x " * 100
    assert scrub("y" * 500) == "y" * 200
    assert scrub("y" * 500, limit=160) == "y" * 160


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("hf_" + "a1" * 14 + "b", False),  # 29 letters and digits: a name's length
        ("hf_" + "a1" * 15, True),
        ("hf_oauth_" + "a1" * 15, True),
        ("eyJ" + "a" * 19, False),
        ("eyJ" + "a" * 20, True),
        ("AIza" + "A" * 34, False),
        ("AIza" + "A" * 35, True),
        ("1//0" + "x" * 19, False),
        ("1//0" + "x" * 20, True),
        ("GOCSPX-" + "x" * 20, True),
        ("ya29.x", True),
    ],
)
def test_the_shortest_token_shapes(text, redacted):
    assert (scrub(text) == "[redacted]") is redacted


def test_config_refuses_hugging_face_tokens_from_16_characters():
    assert HF_TOKEN.fullmatch("hf_" + "a" * 16) and not HF_TOKEN.search("hf_" + "a" * 15)


NAMES = (
    "hf_transfer",
    "hf_xet",
    "hf-xet",
    "hf_hub",
    "hf_hub_download",
    "hf_hub_url",
    "hf_api",
    "hf_raise_for_status",
    "HF_HUB_ENABLE_HF_TRANSFER",
    "HF_XET_HIGH_PERFORMANCE",
    "hf_access_token",
    "hf_model_path",
    "hf_train_files",
    "max_tokens",
    "pad_token",
    "eos_token_id",
    "tokenizer_path",
    "secretName",
    "secretKeyRef",
    "private_key_id",
    "tokens/sec",
)
"""Package, module, function, setting and field names that look like tokens or secret fields and are neither."""


def _names_in_the_hub_client() -> list[str]:
    """Every ``hf_*`` identifier of the installed huggingface_hub (the library's own names: a false positive corpus
    that grows with the library)."""
    root = Path(huggingface_hub.__file__).parent
    found = {m for path in root.rglob("*.py") for m in re.findall(r"\bhf_\w+", path.read_text(encoding="utf-8"))}
    return sorted(found)


def test_names_are_not_tokens():
    names = [*NAMES, *_names_in_the_hub_client()]
    assert len(names) > 40
    for name in names:
        line = f"pip install {name}; from x import {name}; {name}(repo) failed: see {name}."
        assert scrub(line, limit=500) == line, name


@pytest.mark.parametrize(
    "path",
    [
        "requirements.lock",
        "policy/requirements.lock",
        "tests/data/vendor/maxtext-0.2.4/configs/base.yml",
        "tests/data/vendor/maxtext-0.2.5/configs/base.yml",
        "tests/data/vendor/maxtext-0.2.5/configs/models/gemma4-26b.yml",
    ],
)
def test_package_lists_and_configs_print_unchanged(path):
    """Package names and versions, their sha256 hashes, MaxText's config keys (``hf_access_token: ''``,
    ``tokenizer_path``...): nothing in them is a secret, so nothing is redacted."""
    text = (REPO / path).read_text(encoding="utf-8")
    assert redact_text(text, width=10**6) == text


SHOWS_A_SECRETS_VALUE = ("extraArgs.hf_access_token = ",)
"""Reviewed messages that quote what was set as a secret: the value is redacted when printed, as it should be."""


def test_the_reviewed_messages_print_unchanged():
    """Every message a user can get (``tests/data/*.tsv``, reviewed word for word) names secrets, tokens, keys and
    passphrases in prose (``stored as a secret: only...``, ``ALLOW_PASSPHRASE=1``, ``secretsEncryptionKey = "projects/
    ..."``): none is redacted as if it held one."""
    changed = [
        cell
        for path in sorted((REPO / "tests" / "data").glob("*.tsv"))
        for line in path.read_text(encoding="utf-8").splitlines()
        for cell in line.split("\t")
        if scrub(cell, limit=10**6) != " ".join(cell.split()) and not any(s in cell for s in SHOWS_A_SECRETS_VALUE)
    ]
    assert not changed, changed
