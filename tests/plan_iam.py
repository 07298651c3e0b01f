"""What a stack's first `up` leaves in Google Cloud's IAM, laid out in the loopback IAM of ``tests/fake_iam.py`` from
the plan itself (``tools.plan``: the real program under Pulumi's mocks, every registered resource with its inputs), so
that a test of the access audit starts from what the program made, not from a hand-written copy of it.

``lay_out_plan`` turns every resource of a plan that holds an IAM policy or a grant into the fake's state: a service
account into an account (its policy empty), the artifacts bucket into a bucket of its project, a key ring and a key
into Cloud KMS's, an API into an enabled service, and every IAM member (``*IAMMember``/``*IamMember``: the only kind
the program registers, ``tests/test_scenario_two_stacks.py`` checks it) into a binding of the policy of the resource
it names, its condition kept. A grant type of the provider (``core.iam_types``) this module does not place fails, as
does an authoritative ``IAMBinding``/``IAMPolicy``: a new one must say which policy it writes. Kubernetes objects,
networks, the cluster and its pools hold no IAM policy the audit reads (the cluster's RBAC is ``tests/fake_kube.py``'s).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.iam_types import grant_kind
from tests.fake_compute import bucket as bucket_reply
from tests.fake_iam import PolicedApis, binding
from tools.plan.offline import Plan

Inputs = dict[str, Any]
GRANTS: dict[str, Callable[[PolicedApis, Inputs], tuple[dict[str, list[dict[str, Any]]], str]]] = {
    "gcp:projects/iAMMember:IAMMember": lambda fake, i: (fake.project_policies, i["project"]),
    "gcp:serviceaccount/iAMMember:IAMMember": lambda fake, i: (
        fake.account_policies,
        i["serviceAccountId"].rsplit("/serviceAccounts/", 1)[1],
    ),
    "gcp:storage/bucketIAMMember:BucketIAMMember": lambda fake, i: (fake.bucket_policies, i["bucket"]),
    "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember": lambda fake, i: (fake.key_policies, i["cryptoKeyId"]),
    "gcp:kms/keyRingIAMMember:KeyRingIAMMember": lambda fake, i: (fake.ring_policies, i["keyRingId"]),
    "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember": lambda fake, i: (
        fake.repository_policies,
        f"projects/{i['project']}/locations/{i['location']}/repositories/{i['repository']}",
    ),
}
"""Grant type -> the fake's policies it writes and the key of the resource it names (its inputs as the plan holds
them). Artifact Registry's are held, not served: the audit reads no repository (docs/audit.md "What it does not
see")."""


def lay_out_plan(fake: PolicedApis, plan: Plan) -> None:
    """Everything ``plan``'s `up` creates that an IAM policy holds or names (module docstring), in ``fake``."""
    by_name = {r["name"]: r for r in plan.resources}
    for resource in plan.resources:
        kind, inputs = resource["type"], resource["inputs"]
        if kind in GRANTS:
            policies, on = GRANTS[kind](fake, inputs)
            expression = (inputs.get("condition") or {}).get("expression", "")
            policies.setdefault(on, []).append(binding(inputs["role"], inputs["member"], expression))
        elif grant_kind(kind) is not None:
            raise AssertionError(f"{kind} ({resource['name']}): say which policy of tests/fake_iam.py it writes")
        elif kind == "gcp:serviceaccount/account:Account":
            fake.account_policies.setdefault(f"{inputs['accountId']}@{inputs['project']}.iam.gserviceaccount.com", [])
        elif kind == "gcp:storage/bucket:Bucket":
            fake.buckets[inputs["name"]] = bucket_reply(inputs["name"], inputs.get("location", "US-EAST5"))
            fake.bucket_projects[inputs["name"]] = inputs["project"]
            fake.bucket_policies.setdefault(inputs["name"], [])
        elif kind == "gcp:kms/keyRing:KeyRing":
            ring = _ring(inputs)
            fake.rings.setdefault(ring, {"name": ring, "createTime": "2026-12-05T09:00:00Z"})
            fake.ring_policies.setdefault(ring, [])
        elif kind == "gcp:kms/cryptoKey:CryptoKey":
            key = f"{_ring(by_name[inputs['keyRing'].removesuffix('-id')]['inputs'])}/cryptoKeys/{inputs['name']}"
            primary = {"name": f"{key}/cryptoKeyVersions/1", "state": "ENABLED"}
            fake.keys[key] = {"name": key, "purpose": inputs["purpose"], "primary": primary}
            fake.key_policies.setdefault(key, [])
        elif kind == "gcp:projects/service:Service":
            fake.services[inputs["service"]] = "ENABLED"


def _ring(inputs: Inputs) -> str:
    return f"projects/{inputs['project']}/locations/{inputs['location']}/keyRings/{inputs['name']}"
