"""Grant cases for the ``grant-targets`` policy's tests: the prod stack's names, grant resources as the program
writes them, the pack run on a pure plan with extra resources (``tests/test_policy_targets.py``,
``tests/test_policy_grants_allowed.py``, ``tests/test_policy_rbac.py``), and ``grant-targets`` alone on a stack of a few
resources of the prod stack (``prod_resource``, ``grant_findings``)."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import json
from typing import Any

from pulumi_policy import StackValidationArgs

from policy.tpu_rl_policies.targets import grant_targets
from tests import analyzer
from tests.policy_args import Reports, policy_resource
from tests.pure_plan import pure_plan
from tools.plan.offline import Plan

policies = importlib.import_module("policy.tpu_rl_policies")
TARGETS = analyzer.pack_policy("grant-targets")
PROJECT = "my-tpu-prod-project"
BUCKET = f"{PROJECT}-tpu-rl-prod"
MODEL = "gemma4-26b"
STACK_CONFIG = {
    "gcp:project": PROJECT,
    "tpu-rl:clusterName": "tpu-rl-prod",
    "tpu-rl:model": json.dumps({"name": MODEL, "revision": "main"}),
}
"""The prod stack's settings ``grant-targets`` reads (its project, cluster and model)."""
STEP = f"serviceAccount:tpu-rl-prod-export@{PROJECT}.iam.gserviceaccount.com"
NODE = f"serviceAccount:tpu-rl-prod-cpu-np@{PROJECT}.iam.gserviceaccount.com"
PRINCIPAL = f"serviceAccount:{PROJECT}.svc.id.goog[tpu-rl/tpu-rl-prod-export]"
CACHE = {"grant-targets": {"enforcementLevel": "mandatory", "hubCaches": ["gs://shared-hub/hub/"]}}
PROJECT_IAM = "gcp:projects/iAMMember:IAMMember"
BUCKET_IAM = "gcp:storage/bucketIAMMember:BucketIAMMember"
KEY_IAM = "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember"
REPO_IAM = "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember"
ACCOUNT_IAM = "gcp:serviceaccount/iAMMember:IAMMember"
KEY = f"projects/{PROJECT}/locations/us-east5/keyRings/tpu-rl-prod-keys/cryptoKeys/gke-secrets"
AGENT = "serviceAccount:service-123456789012@container-engine-robot.iam.gserviceaccount.com"
MIRROR = ("gcp:artifactregistry/repository:Repository", "mirror", {
    "project": PROJECT, "location": "us-east5", "repositoryId": "tpu-rl-prod-cloud-tpu-images-maxtext-images",
    "mode": "REMOTE_REPOSITORY", "format": "DOCKER",
})  # fmt: skip
KEY_RING = (
    "gcp:kms/keyRing:KeyRing",
    "key-ring",
    {"project": PROJECT, "location": "us-east5", "name": "tpu-rl-prod-keys"},
)
CRYPTO_KEY = ("gcp:kms/cryptoKey:CryptoKey", "secrets-key", {"name": "gke-secrets", "keyRing": "key-ring-id"})


def _resource(type_: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    options = {"protect": False, "ignoreChanges": [], "deleteBeforeReplace": False, "customTimeouts": None}
    return {"type": type_, "name": name, "inputs": inputs, "options": {**options, "parent": None}}


def _plan(*extra: tuple[str, str, dict[str, Any]], stack: str = "prod") -> Plan:
    base = pure_plan(stack)
    return dataclasses.replace(base, resources=[*base.resources, *(_resource(*e) for e in copy.deepcopy(extra))])


def judge(
    plan: Plan, *overrides: str, stack: str = "prod", preview: bool = False, config: dict[str, Any] | None = None
) -> list[analyzer.Finding]:
    pack = analyzer.Pack(
        {"all": "mandatory", **(config or {})},
        dry_run=preview,
        policies=[TARGETS],
        stack=stack,
        stack_config=analyzer.engine_config(stack, *overrides),
    )
    return pack.analyze_stack(analyzer.resources(plan, preview=preview, stack_view=True))


def messages(plan: Plan, *overrides: str, stack: str = "prod", config: dict[str, Any] | None = None) -> list[str]:
    return [f.message for f in judge(plan, *overrides, stack=stack, config=config)]


def grant(type_: str, member: str = STEP, **inputs: Any) -> tuple[str, str, dict[str, Any]]:
    return (type_, "hostile", {"member": member, **inputs})


def under(bucket: str, *prefixes: str) -> dict[str, str]:
    """An IAM condition as infra/gcp/access.py writes it."""
    terms = [f'resource.name.startsWith("projects/_/buckets/{bucket}/objects/{p}")' for p in prefixes]
    return {"title": "t", "expression": " || ".join(terms)}


def prod_resource(type_: str, name: str, props: dict[str, Any]) -> Any:
    """A resource of the prod stack as ``StackValidationArgs`` holds it."""
    return policy_resource(type_, name, props, stack="prod")


def grant_findings(resources: list[Any]) -> list[tuple[str, str | None]]:
    """(message, URN) of each ``grant-targets`` finding on the stack of ``resources``, called as the SDK calls it."""
    report = Reports()
    grant_targets.validate(StackValidationArgs(resources, {"hubCaches": [], "writtenHubCaches": []}), report)
    return report.calls
