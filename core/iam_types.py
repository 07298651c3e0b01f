"""Every IAM grant resource type of the pinned Google provider (plain data): ``core/data/gcp-iam-types.json``.

The file is written by ``tools/gcp_iam_types.py`` (``make iam-types``) from the resource modules the installed
``pulumi_gcp`` registers (its ``__init__.py`` ``_utilities.register(resource_modules=...)``: the type token of every
resource class), never by hand, and names the provider version it was read from. A grant type is one whose class ends
in ``IAMMember``, ``IAMBinding``, ``IAMPolicy`` or the ``Iam`` spelling of them (pulumi-gcp names most modules'
grants ``...IamMember``: ``gcp:artifactregistry/repositoryIamMember:RepositoryIamMember``). The policy pack judges
every type the file lists (``policy/tpu_rl_policies/iam.py``); ``tests/test_policy_iam_types.py`` fails when the
installed provider has a grant type the file lacks or another version.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

DATA = Path(__file__).parent / "data" / "gcp-iam-types.json"
GRANT_CLASS = re.compile(r"(?P<on>[A-Za-z0-9]*?)(?:IAM|Iam)(?P<kind>Member|Binding|Policy)")
"""The class name of an IAM grant resource: ``BucketIAMMember``, ``RepositoryIamBinding``, ``IAMPolicy``; ``on``, the
resource it grants on (``Bucket``, ``Repository``, empty for a project's ``IAMPolicy``)."""


def grant_types(tokens: list[str]) -> list[str]:
    """The IAM grant types among resource type tokens (``gcp:<module>/<member>:<Class>``), sorted."""
    return sorted({t for t in tokens if t.startswith("gcp:") and GRANT_CLASS.fullmatch(t.rsplit(":", 1)[-1])})


def load() -> tuple[str, frozenset[str]]:
    """(provider version, every IAM grant type) as the data file records them."""
    data = json.loads(DATA.read_text())
    return str(data["version"]), frozenset(str(t) for t in data["types"])


VERSION, IAM_TYPES = load()


def grant_kind(resource_type: str) -> str | None:
    """``Member``, ``Binding`` or ``Policy`` for a listed IAM grant type, else None."""
    if resource_type not in IAM_TYPES:
        return None
    match = GRANT_CLASS.fullmatch(resource_type.rsplit(":", 1)[-1])
    return match.group("kind") if match else None
