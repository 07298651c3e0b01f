"""One scrubber for every message built from a remote reply: tokens never reach the user."""

from __future__ import annotations

import pytest

from core.redact import HF_TOKEN, scrub

pytestmark = pytest.mark.pure


def test_known_secrets_and_token_shapes_are_redacted_and_the_text_is_one_bounded_line():
    text = "bad gateway;\n request had Bearer s3cret-value ya29.a0AfH6SM-x_y and hf_abcdefgh\tand eyJ" + "a" * 20
    assert scrub(text, "s3cret-value", "") == (
        "bad gateway; request had Bearer [redacted] [redacted] and [redacted] and [redacted]"
    )
    assert scrub("x\n" * 300) == "x " * 100
    assert scrub("y" * 500) == "y" * 200
    assert scrub("y" * 500, limit=160) == "y" * 160


@pytest.mark.parametrize(
    ("text", "redacted"),
    [("hf_abcdefg", False), ("hf_abcdefgh", True), ("eyJ" + "a" * 19, False), ("eyJ" + "a" * 20, True)],
)
def test_the_shortest_token_shapes(text, redacted):
    assert (scrub(text) == "[redacted]") is redacted


def test_config_refuses_hugging_face_tokens_from_16_characters():
    assert HF_TOKEN.fullmatch("hf_" + "a" * 16) and not HF_TOKEN.search("hf_" + "a" * 15)
