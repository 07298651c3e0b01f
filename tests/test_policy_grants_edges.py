"""How the grant rules read an IAM policy document (``policyData`` of an ``IAMPolicy`` resource,
``policy/tpu_rl_policies/grants.py``): each binding a grant, a document the pack cannot read a grant of an unreadable
role, and one not known yet no grant, its reading noted for the preview's advisory."""

from __future__ import annotations

from typing import Any

import pytest

from policy.tpu_rl_policies.grants import Grant, _document, grants_of
from policy.tpu_rl_policies.properties import Unseen
from tests.policy_args import noting

pytestmark = pytest.mark.pure

READER = "serviceAccount:tpu-rl-prod-export@my-tpu-prod-project.iam.gserviceaccount.com"
CONDITION = {"title": "hub", "expression": 'resource.name.startsWith("projects/_/buckets/b/objects/hub/")'}
UNREADABLE = Grant("(a policy document this pack cannot read)", [], None)
DOCUMENT = f"""
bindings:
- role: roles/storage.objectViewer
  members: ["{READER}"]
  condition: {{title: hub, expression: 'resource.name.startsWith("projects/_/buckets/b/objects/hub/")'}}
- role: roles/logging.logWriter
  members: ["{READER}", "group:ops@example.com"]
"""


@pytest.mark.parametrize(
    ("policy_data", "grants"),
    [
        (
            DOCUMENT,
            [
                Grant("roles/storage.objectViewer", [READER], CONDITION),
                Grant("roles/logging.logWriter", [READER, "group:ops@example.com"], None),
            ],
        ),
        (
            '{"bindings": [{"role": "roles/viewer", "members": ["user:a@example.com"]}]}',
            [Grant("roles/viewer", ["user:a@example.com"], None)],
        ),
        ("bindings: [{role: roles/owner", [UNREADABLE]),
        ({"bindings": [{"role": "roles/owner", "members": [READER]}]}, [UNREADABLE]),
        (None, [UNREADABLE]),
        ("", []),
        ("etag: BwXyz", []),
    ],
    ids=["yaml", "json", "broken", "a-mapping-not-its-text", "null", "empty", "no-bindings"],
)
def test_each_binding_of_a_policy_document_is_a_grant(policy_data: Any, grants: list[Grant]) -> None:
    """A document is read as YAML (JSON is YAML): each binding its role to its members under its condition. A text
    that does not parse, or a value that is no text, is one grant of a role named unreadable, which the rules judge
    rather than skip; a document with no bindings grants nothing."""
    assert grants_of({"project": "my-tpu-prod-project", "policyData": policy_data}) == grants


def test_a_policy_document_not_known_yet_grants_nothing_and_its_reading_is_noted() -> None:
    """At a preview the document of a policy built from outputs is unknown: no grant is judged on it, and the read is
    noted, so the policy says what it could not see instead of passing it as an empty document."""
    unknown = Unseen("policyData")
    assert noting(lambda: _document(unknown)) == (None, [unknown])
    assert grants_of({"policyData": unknown}) == []
