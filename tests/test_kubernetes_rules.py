"""Kubernetes' rules for names, labels and annotations (``core.kubernetes_rules``), called directly: each rule at
its length limit and one past it, its alphabet's edges, and each refusal in the API server's exact words
(apimachinery v0.35.0, ``pkg/util/validation/validation.go`` and ``pkg/api/validate/content/kube.go``)."""

from __future__ import annotations

import pytest

from core import kubernetes_rules as rules

pytestmark = pytest.mark.pure

LABEL = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end "
    "with an alphanumeric character"
)
SUBDOMAIN = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start "
    "and end with an alphanumeric character"
)
DNS1035 = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character"
)
VALUE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character"
)
QUALIFIED = (
    "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character, with an optional DNS subdomain prefix and '/'"
)
NAME_PART = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    "character"
)


@pytest.mark.parametrize(
    ("value", "problems"),
    [
        ("a" * 63, []),
        ("a" * 64, ["must be no more than 63 characters"]),
        ("a-0", []),
        ("a.b", ["must not contain dots"]),
        ("A", [LABEL]),
        ("-a", [LABEL]),
        ("", [LABEL]),
        ("a" * 64 + ".b", ["must be no more than 63 characters", "must not contain dots"]),
    ],
    ids=["at-63", "at-64", "a-hyphen", "a-dot", "upper-case", "a-leading-hyphen", "empty", "long-and-dotted"],
)
def test_a_dns1123_label(value: str, problems: list[str]) -> None:
    assert rules.dns1123_label(value) == problems


@pytest.mark.parametrize(
    ("value", "problems"),
    [
        (".".join(["a" * 63] * 4)[:253], []),
        ("a" * 254, ["must be no more than 253 characters"]),
        ("a.b-c", []),
        ("a..b", [SUBDOMAIN]),
        ("a_b", [SUBDOMAIN]),
        ("B" * 254, ["must be no more than 253 characters", SUBDOMAIN]),
    ],
    ids=["at-253", "at-254", "dotted", "an-empty-label", "an-underscore", "long-and-upper-case"],
)
def test_a_dns1123_subdomain(value: str, problems: list[str]) -> None:
    assert rules.dns1123_subdomain(value) == problems


@pytest.mark.parametrize(
    ("value", "problems"),
    [
        ("a" * 63, []),
        ("a" * 64, ["must be no more than 63 characters"]),
        ("0a", [DNS1035]),
        ("a-", [DNS1035]),
        ("a.b", [DNS1035]),
        ("0" * 64, ["must be no more than 63 characters", DNS1035]),
    ],
    ids=["at-63", "at-64", "a-digit-first", "a-trailing-hyphen", "a-dot", "long-and-a-digit-first"],
)
def test_a_dns1035_label(value: str, problems: list[str]) -> None:
    assert rules.dns1035_label(value) == problems


@pytest.mark.parametrize(
    ("value", "problems"),
    [
        ("", []),
        ("a" * 63, []),
        ("a" * 64, ["must be no more than 63 bytes"]),
        ("é" * 32, ["must be no more than 63 bytes", VALUE]),
        ("A_b.c-9", []),
        ("_a", [VALUE]),
        ("a b", [VALUE]),
    ],
    ids=["empty", "at-63", "at-64", "64-bytes-of-32-characters", "its-alphabet", "a-leading-underscore", "a-space"],
)
def test_a_label_value(value: str, problems: list[str]) -> None:
    assert rules.label_value(value) == problems


@pytest.mark.parametrize(
    ("key", "problems"),
    [
        ("app", []),
        ("example.com/App_1", []),
        ("a/b/c", [QUALIFIED]),
        ("/name", ["prefix part " + SUBDOMAIN]),
        ("Example.com/a", ["prefix part " + SUBDOMAIN]),
        ("example.com/", ["name part must be non-empty"]),
        ("", ["name part must be non-empty"]),
        ("a" * 63, []),
        ("a" * 64, ["name part must be no more than 63 characters"]),
        ("-a", [NAME_PART]),
        ("x/" + "-" * 64, ["name part must be no more than 63 characters", NAME_PART]),
        ("a" * 254 + "/b", ["prefix part must be no more than 253 characters"]),
    ],
    ids=[
        "a-name",
        "a-prefix-and-name",
        "two-slashes",
        "an-empty-prefix",
        "an-upper-case-prefix",
        "an-empty-name-after-a-prefix",
        "empty",
        "a-name-at-63",
        "a-name-at-64",
        "a-leading-hyphen",
        "long-and-hyphens",
        "a-prefix-at-254",
    ],
)
def test_a_label_key(key: str, problems: list[str]) -> None:
    assert rules.label_key(key) == problems


def test_annotation_keys_are_read_lowercased_and_all_of_them_count_against_256_kib() -> None:
    assert rules.annotation_problems({"Example.COM/Key": "v"}) == []
    assert rules.annotation_problems({"a/b/c": "v"}) == [f"annotation key 'a/b/c': {QUALIFIED}"]
    at_limit = {"a": "x" * (256 * 1024 - 2), "b": ""}
    assert rules.annotation_problems(at_limit) == []
    past = {"a": "x" * (256 * 1024 - 2), "b": "y"}
    assert rules.annotation_problems(past) == [
        f"annotations: Too long: may not be more than {256 * 1024} bytes ({256 * 1024 + 1})"
    ]
    assert rules.annotation_problems({"e": "é" * (128 * 1024)}) == [
        f"annotations: Too long: may not be more than {256 * 1024} bytes ({256 * 1024 + 1})"
    ]
