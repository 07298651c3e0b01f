"""What a container reads from one of the stack's Secrets, as the API server stores it: ``data`` is base64 (text only
where it decodes: anything else the policy cannot read), ``stringData`` is merged over it, and a part the engine does
not know yet at a preview leaves every key unknown rather than absent."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from policy.tpu_rl_policies.env import StackObjects, container_env
from policy.tpu_rl_policies.properties import UNKNOWN, Unseen
from policy.tpu_rl_policies.resources import SECRET, Resource

pytestmark = pytest.mark.pure

NAMESPACE = "tpu-rl"


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _read(secret: dict[str, Any], *keys: str) -> dict[str, Any]:
    """Variable -> the value a container gets for each of ``keys`` through a ``secretKeyRef`` to ``secret`` (a key
    the Secret lacks sets no variable)."""
    props = {"metadata": {"name": "creds", "namespace": NAMESPACE}, **secret}
    objects = StackObjects([Resource(SECRET, props, "urn:creds", "creds")])
    container = {
        "env": [{"name": key.upper(), "valueFrom": {"secretKeyRef": {"name": "creds", "key": key}}} for key in keys]
    }
    return {name: value.value for name, value in container_env(container, NAMESPACE, objects).values.items()}


@pytest.mark.parametrize(
    ("secret", "expected"),
    [
        pytest.param({"data": {"token": _b64(b"hf_abc")}}, "hf_abc", id="base64 decoded"),
        pytest.param({"data": {"token": _b64(b"hf_\xff")}}, "hf_\ufffd", id="bytes that are not UTF-8 replaced"),
        pytest.param({"stringData": {"token": "plain"}}, "plain", id="stringData as written"),
        pytest.param(
            {"data": {"token": _b64(b"old")}, "stringData": {"token": "new"}}, "new", id="stringData over data"
        ),
    ],
)
def test_a_secret_key_reads_as_the_text_the_api_server_stores(secret: dict[str, Any], expected: str) -> None:
    assert _read(secret, "token") == {"TOKEN": expected}


@pytest.mark.parametrize(
    "secret",
    [
        pytest.param({"data": {"token": "aGk=!"}}, id="data not base64"),
        pytest.param({"data": {"token": "aGk =", "other": _b64(b"x")}}, id="data with a space"),
        pytest.param({"data": {"token": 12}}, id="data not text"),
        pytest.param({"stringData": {"token": 8080}}, id="stringData not text"),
        pytest.param({"stringData": {"token": ["a"]}}, id="stringData a list"),
    ],
)
def test_a_secret_value_the_policy_cannot_read_is_unknown_under_its_own_key(secret: dict[str, Any]) -> None:
    """A value that is not base64 text (the API server refuses it) or not a string is no text the policy may judge:
    the variable is set, to ``UNKNOWN``, never to a lenient decoding of it."""
    read = _read(secret, "token")
    assert list(read) == ["TOKEN"]
    assert read["TOKEN"] is UNKNOWN


@pytest.mark.parametrize("part", ["data", "stringData"])
def test_a_secret_part_not_known_yet_leaves_every_key_unknown(part: str) -> None:
    """At a preview either part may still be unknown: any key may come from it, so each variable read from the
    Secret is that unknown value (judged at ``pulumi up``), not the other part's text nor unset."""
    pending = Unseen(f"Secret creds: {part}")
    other = "stringData" if part == "data" else "data"
    known = {"token": "plain"} if other == "stringData" else {"token": _b64(b"plain")}
    read = _read({part: pending, other: known}, "token", "absent")
    assert list(read) == ["TOKEN", "ABSENT"]
    assert read["TOKEN"] is pending
    assert read["ABSENT"] is pending


def test_a_data_value_not_known_yet_stays_unknown_and_the_next_keys_are_read() -> None:
    pending = Unseen("Secret creds: data.first")
    read = _read({"data": {"first": pending, "second": _b64(b"two")}}, "first", "second")
    assert read["FIRST"] is pending
    assert read["SECOND"] == "two"
