"""``iam-service-accounts-only`` on the members of a grant, judged through pulumi-policy's own analyzer
(``tests/analyzer.py``) one IAM resource at a time: every principal an IAM resource names (``grants._members``: its
``member``, its ``members``, or each binding of its policy document, ``policyData``) is a service account; a policy
document the pack cannot read is named as such, never passed; a member the engine does not know yet is noted and the
members after it still judged; and a grant type that looks like IAM but the pack's list of the provider's types lacks
is refused in one line naming the command that updates the list. Each finding the exact line an operator reads (a
resource policy's finding is on the resource the engine asks about, so the analyzer's answer carries no URN of its
own)."""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest
from pulumi.output import Unknown

from core import iam_types
from tests import analyzer

pytestmark = pytest.mark.pure

policies = importlib.import_module("policy.tpu_rl_policies")
GRANTS = analyzer.pack_policy("iam-service-accounts-only")
MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
BINDING = "gcp:storage/bucketIAMBinding:BucketIAMBinding"
POLICY = "gcp:storage/bucketIAMPolicy:BucketIAMPolicy"
ACCOUNT = "serviceAccount:tpu-rl-prod-export@my-tpu-prod-project.iam.gserviceaccount.com"
PERSON = "user:ops@example.com"
GROUP = "group:ops@example.com"
UNREADABLE = "(a policy document this pack cannot read)"


def grant(type_: str, **props: Any) -> analyzer.Resource:
    name = type_.rsplit(":", 1)[-1].lower()
    return analyzer.Resource(type_, name, f"urn:pulumi:prod::tpu-rl::{type_}::{name}", {"bucket": "b", **props})


def judge(resource: analyzer.Resource, preview: bool = False) -> list[analyzer.Finding]:
    return analyzer.Pack({"all": "mandatory"}, dry_run=preview, policies=[GRANTS]).analyze(resource)


def found(resource: analyzer.Resource) -> list[str]:
    return analyzer.found_at_up(GRANTS, resource)


def not_an_account(member: str) -> str:
    return (
        f"{member} is not a service account: tpu-rl grants roles to its own service accounts only (a person, a group, "
        "a domain, allUsers or a federated identity would reach the stack's bucket, key or accounts)"
    )


def authoritative(name: str) -> str:
    return (
        f"{name} replaces every other grant of its role or resource (authoritative); grant with the matching "
        "BucketIAMMember, as infra/gcp/ does"
    )


def document(*members: str) -> str:
    """A policy document's text as the provider takes it (JSON), one binding of ``members``."""
    return json.dumps({"bindings": [{"role": "roles/storage.objectViewer", "members": list(members)}]})


CASES = [
    # (id, the grant, the messages of its findings, in order)
    ("member-an-account", grant(MEMBER, role="roles/x", member=ACCOUNT), []),
    ("member-a-person", grant(MEMBER, role="roles/x", member=PERSON), [not_an_account(PERSON)]),
    (
        "members-each-judged",
        grant(BINDING, role="roles/x", members=[ACCOUNT, GROUP, PERSON]),
        [authoritative("BucketIAMBinding"), not_an_account(GROUP), not_an_account(PERSON)],
    ),
    (
        "a-documents-members",
        grant(POLICY, policyData=document(ACCOUNT, PERSON)),
        [authoritative("BucketIAMPolicy"), not_an_account(PERSON)],
    ),
    (
        "a-document-the-pack-cannot-read",
        grant(POLICY, policyData='{"bindings": [{"role": "roles/owner", "members": ["allUsers"]'),
        [authoritative("BucketIAMPolicy"), not_an_account(UNREADABLE)],
    ),
    ("no-document", grant(POLICY), [authoritative("BucketIAMPolicy")]),
]


@pytest.mark.parametrize(("case", "resource", "expected"), CASES, ids=[c[0] for c in CASES])
def test_every_member_a_grant_names_is_a_service_account(
    case: str, resource: analyzer.Resource, expected: list[str]
) -> None:
    """Each principal of ``member``, ``members`` or the policy document's bindings that is not a service account is
    one finding, after the authoritative one of a binding or a policy; a document that does not parse is one finding
    naming it unreadable (never read as granting nothing); an IAMPolicy with no document names no member."""
    assert found(resource) == expected


def test_a_member_not_known_yet_is_noted_and_the_members_after_it_still_judged() -> None:
    """At `pulumi up` an unknown member cannot be judged (never shown as a member that is not an account), and the
    person after it is refused; at a preview the authoritative finding stands, and the refusal of the person waits
    for the unknown, the advisory saying what it would report."""
    resource = grant(BINDING, role="roles/x", members=[Unknown(), PERSON, ACCOUNT])
    assert found(resource) == [
        authoritative("BucketIAMBinding"),
        not_an_account(PERSON),
        "cannot judge .members[0]: not known at `pulumi up`; give it a value the program knows",
    ]
    assert [(f.level, f.unjudged, f.message) for f in judge(resource, preview=True)] == [
        ("mandatory", False, authoritative("BucketIAMBinding")),
        (
            "advisory",
            True,
            "can't run policy 'iam-service-accounts-only' from policy pack 'tpu-rl-guardrails@v0.0.1' during preview: "
            ".members[0] not known until what they come from exists; judged at `pulumi up`; reading them as unset it "
            f"would report: {not_an_account(PERSON)}",
        ),
    ]


def test_a_policy_document_not_known_yet_is_noted_never_passed() -> None:
    """An IAMPolicy whose document is unknown at `pulumi up` cannot be judged: said, not passed as granting nothing."""
    assert found(grant(POLICY, policyData=Unknown())) == [
        authoritative("BucketIAMPolicy"),
        "cannot judge .policyData: not known at `pulumi up`; give it a value the program knows",
    ]


@pytest.mark.parametrize(
    ("type_", "expected"),
    [
        ("gcp:newservice/thingIamMember:ThingIamMember", True),
        ("gcp:newservice/thingIAMPolicy:ThingIAMPolicy", True),
        ("gcp:newservice/thing:Thing", False),
    ],
    ids=["iam-member-spelling", "iam-policy-spelling", "not-a-grant"],
)
def test_a_grant_type_the_list_lacks_is_refused_naming_the_command(type_: str, expected: bool) -> None:
    """A type shaped like an IAM grant that the pinned provider's list does not hold is judged by no rule, so it is
    one finding naming the provider version the list is of and `make iam-types`; any other type is not a grant."""
    lacks = (
        f"{type_} is an IAM grant type the pack's list of pulumi-gcp {iam_types.VERSION}'s types lacks, so no rule "
        "judges it: run `make iam-types` with the provider the program uses"
    )
    assert found(grant(type_, member="allUsers")) == ([lacks] if expected else [])
