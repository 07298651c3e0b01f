"""Kubernetes' own rules for names, labels and annotations (plain functions, no client).

The rules and their messages are apimachinery's at v0.35.0 (Kubernetes 1.35):

- ``pkg/util/validation/validation.go``: ``IsDNS1123Label`` (at most 63, ``[a-z0-9]([-a-z0-9]*[a-z0-9])?``),
  ``IsDNS1123Subdomain`` (at most 253, labels joined by dots), ``IsDNS1035Label`` (at most 63, a letter first);
- ``pkg/api/validate/content/kube.go``: ``IsLabelValue`` (at most 63 bytes, empty allowed,
  ``(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?``) and ``IsLabelKey`` (an optional DNS-1123 subdomain prefix
  and ``/``, then a name of at most 63);
- ``pkg/api/validation/objectmeta.go``: ``TotalAnnotationSizeLimitB`` (the sum of every key's and value's
  length, at most 256 KiB).

Each function returns the problems (empty: valid), worded as the API server words them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
DNS1035_LABEL_MAX = 63
LABEL_VALUE_MAX = 63
LABEL_NAME_MAX = 63
ANNOTATIONS_MAX_BYTES = 256 * 1024

_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL)
_DNS1123_SUBDOMAIN_RE = re.compile(rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*")
_DNS1035_LABEL_RE = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_LABEL_VALUE_RE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_QUALIFIED_NAME_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def _too_long(limit: int, unit: str = "characters") -> str:
    return f"must be no more than {limit} {unit}"


def dns1123_label(value: str) -> list[str]:
    """``IsDNS1123Label``: pod hostnames and subdomains, the longest Indexed Job hostname, PodSet names."""
    problems = []
    if len(value) > DNS1123_LABEL_MAX:
        problems.append(_too_long(DNS1123_LABEL_MAX))
    if not _DNS1123_LABEL_RE.fullmatch(value):
        problems.append(
            "must not contain dots"
            if _DNS1123_SUBDOMAIN_RE.fullmatch(value)
            else "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
            "start and end with an alphanumeric character"
        )
    return problems


def dns1123_subdomain(value: str) -> list[str]:
    """``IsDNS1123Subdomain``: object names (JobSets, Jobs, pods, ConfigMaps)."""
    problems = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        problems.append(_too_long(DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        problems.append(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
            "must start and end with an alphanumeric character"
        )
    return problems


def dns1035_label(value: str) -> list[str]:
    """``IsDNS1035Label``: Service names (``ValidateServiceName``), and what JobSet's webhook asks of its
    subdomain and of the Job and pod names it will generate."""
    problems = []
    if len(value) > DNS1035_LABEL_MAX:
        problems.append(_too_long(DNS1035_LABEL_MAX))
    if not _DNS1035_LABEL_RE.fullmatch(value):
        problems.append(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
            "character, and end with an alphanumeric character"
        )
    return problems


def label_value(value: str) -> list[str]:
    """``IsLabelValue`` (``content.IsLabelValue`` since v0.35: its length message says bytes)."""
    problems = []
    if len(value.encode()) > LABEL_VALUE_MAX:
        problems.append(_too_long(LABEL_VALUE_MAX, "bytes"))
    if not _LABEL_VALUE_RE.fullmatch(value):
        problems.append(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
            "must start and end with an alphanumeric character"
        )
    return problems


def label_key(key: str) -> list[str]:
    """``IsLabelKey`` (a qualified name): ``[prefix/]name``, the prefix a DNS-1123 subdomain."""
    parts = key.split("/")
    if len(parts) > 2:
        return [
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character, with an optional DNS subdomain prefix and '/'"
        ]
    problems = [f"prefix part {p}" for p in dns1123_subdomain(parts[0])] if len(parts) == 2 else []
    name = parts[-1]
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > LABEL_NAME_MAX:
        problems.append(f"name part {_too_long(LABEL_NAME_MAX)}")
    if name and not _QUALIFIED_NAME_RE.fullmatch(name):
        problems.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
            "alphanumeric character"
        )
    return problems


def annotation_problems(found: Mapping[str, str]) -> list[str]:
    """``ValidateAnnotations``: every key a qualified name (lowercased), all of them at most 256 KiB."""
    problems = [f"annotation key {key!r}: {p}" for key in found for p in label_key(key.lower())]
    size = sum(len(key.encode()) + len(value.encode()) for key, value in found.items())
    if size > ANNOTATIONS_MAX_BYTES:
        problems.append(f"annotations: Too long: may not be more than {ANNOTATIONS_MAX_BYTES} bytes ({size})")
    return problems
