"""Edges of the config readers that a message or a value depends on: encrypted secrets offline, the
detail of a malformed value, long keys, a machine Kueue cannot size. Pure."""

from __future__ import annotations

import pytest

from core.config.load import read_fields
from core.config.values import OPAQUE_SECRET, ConfigError, error
from core.redact import scrub
from tests.lifecycle_walk import raw, settings

pytestmark = pytest.mark.pure

TOKEN = "tpu-rl:hfToken"


def prod(**values):
    """The prod stack's raw config with ``values`` in place (full key -> value), and its secret keys."""
    config, secret = raw("prod", [])
    return {**config, **values}, secret | {TOKEN}


def test_an_encrypted_secret_counts_as_set_without_being_read():
    """Offline the tools never decrypt: the placeholder of an encrypted value is not a token to check."""
    assert read_fields(*prod(**{TOKEN: OPAQUE_SECRET}))["hfTokenSet"] is True


def test_a_decrypted_secret_is_read_like_any_value():
    assert read_fields(*prod(**{TOKEN: "hf_" + "a" * 30}))["hfTokenSet"] is True
    with pytest.raises(ConfigError, match="is invalid: a Hugging Face read token"):
        read_fields(*prod(**{TOKEN: "hf_ with spaces"}))


def test_the_placeholder_text_in_a_plain_key_is_read_as_text():
    """Only a secret key's placeholder is skipped: the same text in a plain key is an invalid value."""
    with pytest.raises(ConfigError, match="^tpu-rl:namespace = "):
        read_fields(*prod(**{"tpu-rl:namespace": OPAQUE_SECRET}))


def test_a_value_nested_too_deep_says_so():
    deep = '{"a":' + "[" * 200 + "]" * 200 + "}"
    with pytest.raises(ConfigError) as err:
        settings("prod", [f"tpu-rl:training.extraArgs={deep}"])
    assert str(err.value).endswith(
        "is invalid: malformed JSON (nested deeper than 64 levels); expected an object of MaxText key: value pairs"
    )


def test_a_long_key_is_shown_cut_to_120_characters():
    key = "tpu-rl:" + "k" * 200
    message = str(error(key, 1, "no such key"))
    assert message == f"{scrub(key, limit=120)} = 1 is invalid: no such key"
    assert message.split(" = ")[0] != scrub(key, limit=121)


def test_a_machine_kueue_cannot_size_is_refused_with_the_fix():
    with pytest.raises(ConfigError) as err:
        settings("prod", ["tpu-rl:cpuPool.machineType=n2-custom-64-262144"])
    assert str(err.value) == (
        'tpu-rl:cpuPool.machineType = "n2-custom-64-262144" is invalid: has no known size, and Kueue\'s cpu and '
        "memory quota is the pool's size; use a predefined machine type such as n4-standard-64, or set "
        "tpu-rl:kueue.enabled false"
    )
