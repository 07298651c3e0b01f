"""Which grant each member of an IAM resource is judged by, called as the engine calls the policies (at `pulumi up`,
the prod stack's configuration from ``ConfigureStack``) on a small stack built by hand (the bucket and the export's,
the conversion's and the CPU pool's accounts):

- ``grant-targets`` judges each member of a policy document (``BucketIAMPolicy``) by the role and condition of the
  binding it is a member of only, never by another binding's; and a holder listed twice in one binding once;
- ``iam-service-accounts-only`` names a policy document given as anything but text as unreadable (never as granting
  nothing), in the words it names one that does not parse.

Each finding is the exact line an operator reads, on the grant's URN where the policy names one."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pulumi_policy import ResourceValidationArgs

from policy.tpu_rl_policies.iam import iam_grants
from policy.tpu_rl_policies.resources import DEPLOYMENT
from tests.grant_cases import BUCKET, MODEL, PROJECT, STACK_CONFIG, grant_findings, prod_resource
from tests.policy_args import OPTIONS, Reports

pytestmark = pytest.mark.pure

BINDING = "gcp:storage/bucketIAMBinding:BucketIAMBinding"
POLICY = "gcp:storage/bucketIAMPolicy:BucketIAMPolicy"
READER = "roles/storage.objectViewer"
WRITER = "roles/storage.objectUser"


@pytest.fixture(autouse=True)
def engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's ``ConfigureStack`` for the prod stack at `pulumi up`, restored after the test."""
    monkeypatch.setattr(DEPLOYMENT, "config", dict(STACK_CONFIG))
    monkeypatch.setattr(DEPLOYMENT, "dry_run", False)


def member(holder: str) -> str:
    return f"serviceAccount:tpu-rl-prod-{holder}@{PROJECT}.iam.gserviceaccount.com"


def urn(type_: str) -> str:
    return f"urn:pulumi:prod::tpu-rl::{type_}::grant"


def under(*folders: str) -> dict[str, str]:
    """An IAM condition as infra/gcp/access.py writes it, bounding a grant to the model's ``folders`` of the bucket."""
    terms = [f'resource.name.startsWith("projects/_/buckets/{BUCKET}/objects/{MODEL}/{f}/")' for f in folders]
    return {"title": "t", "expression": " || ".join(terms)}


def targets_found(type_: str, props: dict[str, Any]) -> list[tuple[str, str | None]]:
    """(message, URN) of each ``grant-targets`` finding on the stack with one grant, ``grant``, of ``type_``."""
    stack = [
        prod_resource(
            "gcp:storage/bucket:Bucket", "bucket", {"name": BUCKET, "project": PROJECT, "location": "US-EAST5"}
        ),
        *(
            prod_resource(
                "gcp:serviceaccount/account:Account", holder, {"accountId": f"tpu-rl-prod-{holder}", "project": PROJECT}
            )
            for holder in ("export", "convert", "cpu-np")
        ),
        prod_resource(type_, "grant", {"bucket": BUCKET, **props}),
    ]
    return grant_findings(stack)


def unused(role: str) -> str:
    return f"grant: {role} on the bucket {BUCKET}: its step does not use it; remove the grant"


def outside(role: str, *folders: str) -> str:
    return (
        f"grant: {role} on {BUCKET} under {', '.join(f'{BUCKET}/{MODEL}/{f}/' for f in folders)}: outside the folders "
        "its step uses; bound it to them (infra/gcp/access.py)"
    )


def document(*bindings: tuple[str, str, dict[str, str]]) -> str:
    """A policy document's text as the provider takes it (JSON): one binding of each (role, holder, condition)."""
    return json.dumps({"bindings": [{"role": r, "members": [member(h)], "condition": c} for r, h, c in bindings]})


@pytest.mark.parametrize(
    ("conversion", "expected"),
    [
        (WRITER, []),
        (READER, [unused(READER)]),
    ],
    ids=["each-binding-its-own-role", "a-role-the-conversion-does-not-use"],
)
def test_a_member_of_a_policy_document_is_judged_by_its_own_binding_only(conversion: str, expected: list[str]) -> None:
    """The export reads the conversion's folder and the conversion writes it: one binding each, both pass, though
    the export writes no conversion folder and the conversion reads nothing (the other's binding would refuse
    either); a conversion given the reader is refused once, for its own binding."""
    policy = document((READER, "export", under("convert")), (conversion, "convert", under("convert")))
    assert targets_found(POLICY, {"policyData": policy}) == [(message, urn(POLICY)) for message in expected]


@pytest.mark.parametrize(
    ("holders", "expected"),
    [
        (["convert", "convert"], [outside(WRITER, "train")]),
        (["convert", "export"], [outside(WRITER, "train")] * 2),
        (["convert", "cpu-np"], [outside(WRITER, "train")]),
    ],
    ids=["one-account-listed-twice", "two-accounts", "one-account-whose-step-writes-there"],
)
def test_an_account_listed_twice_in_one_binding_is_judged_once(holders: list[str], expected: list[str]) -> None:
    """The writer under the training's folder, which only the node accounts write: the conversion's account listed
    twice is refused once; the export's and the conversion's accounts once each; the CPU pool's passes."""
    props = {"role": WRITER, "members": [member(h) for h in holders], "condition": under("train")}
    assert targets_found(BINDING, props) == [(message, urn(BINDING)) for message in expected]


UNREADABLE = (
    "(a policy document this pack cannot read) is not a service account: tpu-rl grants roles to its own service "
    "accounts only (a person, a group, a domain, allUsers or a federated identity would reach the stack's bucket, key "
    "or accounts)"
)
AUTHORITATIVE = (
    "BucketIAMPolicy replaces every other grant of its role or resource (authoritative); grant with the matching "
    "BucketIAMMember, as infra/gcp/ does"
)


@pytest.mark.parametrize(
    "data",
    [
        {"bindings": [{"role": "roles/owner", "members": ["allUsers"]}]},
        ["allUsers"],
        '{"bindings": [{"role": "roles/owner", "members": ["allUsers"]}',
    ],
    ids=["an-object", "a-list", "text-that-does-not-parse"],
)
def test_a_policy_document_that_is_not_text_is_named_unreadable(data: Any) -> None:
    """A ``policyData`` given as an object or a list, not the JSON text the provider takes, is named a document the
    pack cannot read, as text that does not parse is, after the authoritative finding: one finding in those words,
    never the document's members read as if it were text, nor nothing found as if it granted nothing. (A resource
    policy's finding is on the resource the engine asks about: ``report`` gets no URN.)"""
    report = Reports()
    props = {"bucket": BUCKET, "policyData": data}
    iam_grants.validate(ResourceValidationArgs(POLICY, props, urn(POLICY), "grant", OPTIONS, None), report)
    assert report.calls == [(AUTHORITATIVE, None), (UNREADABLE, None)]
