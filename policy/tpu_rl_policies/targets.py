"""Where every grant lands (``grant-targets``): on the stack's own project, bucket, key, repositories and accounts, or
its declared shared Hub cache; never on a state bucket or a state key; project-level roles only those GKE nodes and
image pulls need; the stack's repositories, which the steps' images come from, readable and never writable.

What the stack's own resources are is read from the stack (its ``Bucket``, ``KeyRing`` and ``CryptoKey``,
``Repository`` and ``Account`` resources) and from the configuration the engine sends the pack (``Deployment``:
``gcp:project``, ``tpu-rl:model.hubCache``, ``tpu-rl:gke.secretsEncryptionKey``, ``tpu-rl:stateBackend``). A target
the engine does not know yet (at a preview, the name of a bucket or repository not created yet) is judged at
``pulumi up`` (``resources._judged``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import yaml
from pulumi_policy import EnforcementLevel, Severity, StackValidationArgs, StackValidationPolicy

from core.iam_types import IAM_TYPES, grant_kind
from core.state_names import is_state_bucket, is_state_key

from .grants import GKE_AGENT, Own, _members, _text, own_resources
from .properties import _l, _m, judging, unseen
from .resources import BUCKET, Report, Resource, _guarded_stack

PROJECT_ROLES = frozenset(
    (
        "roles/container.defaultNodeServiceAccount",
        "roles/artifactregistry.reader",
        "roles/serviceusage.serviceUsageConsumer",
    )
)
"""The project-level roles the stack's identities may have: GKE's node role, the registry reader where a registry may
be private, and Service Usage Consumer for Image streaming through the stack's mirrors (``infra.gcp.identities``,
``infra.gcp.access``; ``tests/test_policy_targets.py`` pins them to those modules)."""
CACHE_ROLES = frozenset(("roles/storage.objectViewer", "roles/storage.objectUser"))
"""What a grant on the shared Hub cache's bucket may give (``infra.gcp.access.hub_cache_grants``); its IAM condition
is ``scoped-bucket-grants``' to judge."""
REPOSITORY_ROLES = frozenset(("roles/artifactregistry.reader",))
"""What a grant on the stack's repositories may give: a writer (``writer``, ``repoAdmin``, ``admin``...) could
replace an image every step runs, with the Hugging Face token and a bucket identity."""
KEY_ROLE = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
ACCOUNT_ROLES = frozenset(("roles/iam.workloadIdentityUser",))


def _why_project(role: str) -> str:
    if role.startswith("roles/storage."):
        return (
            "it reaches every bucket of the project, other stacks' and their state among them: grant it on the bucket"
        )
    if role in ("roles/viewer", "roles/browser", "roles/iam.securityReviewer") or role.lower().endswith("viewer"):
        return "it reads every resource of its kind in the project, other stacks' among them"
    return "the stack's identities need only " + ", ".join(sorted(PROJECT_ROLES)) + " at project level"


def _roles(props: Mapping[str, Any]) -> list[Any]:
    """The roles a grant gives: ``role``, or each binding's of a policy document."""
    if "role" in props:
        return [props.get("role")]
    data = props.get("policyData")
    if unseen(data) or not isinstance(data, str):
        return []
    try:
        document = yaml.safe_load(data)
    except yaml.YAMLError:
        return ["(a policy document this pack cannot read)"]
    return [_m(b).get("role") for b in _l(_m(document).get("bindings"))]


def _bucket_name(value: str) -> str:
    return value.removeprefix("gs://").removeprefix("b/").removeprefix("projects/_/buckets/").split("/", 1)[0]


Say = Callable[[str], None]


def _on_project(props: Mapping[str, Any], roles: list[Any], own: Own, say: Say) -> None:
    project = props.get("project")
    if unseen(project):
        return
    if project not in own.projects:
        say(
            f"grants {', '.join(map(str, roles))} in project {project}, not the stack's "
            f"({', '.join(sorted(own.projects)) or 'none known'}): grant in gcp:project only"
        )
    for role in roles:
        if role not in PROJECT_ROLES:
            say(f"project-level {role} to the stack's identities: {_why_project(str(role))}")


def _on_bucket(props: Mapping[str, Any], roles: list[Any], own: Own, say: Say) -> None:
    bucket = props.get("bucket")
    if unseen(bucket):
        return
    target = _bucket_name(str(bucket))
    if is_state_bucket(target, own.state_backend):
        say(
            f"grants on {target}, a Pulumi state bucket: the state and its secrets are reached by the account "
            "that runs pulumi only (make state-bucket), never by a workload: remove the grant"
        )
    elif target in own.buckets:
        return
    elif own.cache_bucket and target == own.cache_bucket:
        for role in roles:
            if role not in CACHE_ROLES:
                say(
                    f"{role} on the shared Hub cache's bucket {target}: a cache grant gives "
                    f"{' or '.join(sorted(CACHE_ROLES))} bounded to its folder (infra/gcp/access.py)"
                )
    else:
        say(
            f"grants on bucket {target}, which is neither the stack's bucket nor its shared Hub cache "
            "(tpu-rl:model.hubCache): another stack's or project's data: grant on the stack's own bucket"
        )


def _on_key(props: Mapping[str, Any], roles: list[Any], own: Own, say: Say) -> None:
    key = props.get("cryptoKeyId", props.get("keyRingId"))
    if unseen(key):
        return
    if is_state_key(str(key)):
        say(
            f"grants on {key}, a Pulumi state secrets key: it decrypts the stack's secrets, the Hugging Face "
            "token among them, and is used by the account that runs pulumi only: remove the grant"
        )
        return
    if key not in own.keys:
        say(f"grants on the key {key}, not the stack's (tpu-rl:gke.secretsEncryptionKey): remove the grant")
    for member in _members(props):
        if unseen(member):
            continue
        if not (isinstance(member, str) and GKE_AGENT.fullmatch(member)):
            say(
                f"grants the stack's key to {member}: only GKE's service agent uses it (to encrypt Secrets); "
                "remove the grant"
            )
    for role in roles:
        if role != KEY_ROLE:
            say(f"{role} on the stack's key: GKE's service agent needs {KEY_ROLE} only")


def _on_repository(props: Mapping[str, Any], roles: list[Any], own: Own, say: Say) -> None:
    project, location, repository = props.get("project"), props.get("location"), props.get("repository")
    if unseen(project) or unseen(location) or unseen(repository):
        return
    repository = str(repository)
    parts = repository.split("/")
    if len(parts) == 6 and parts[0] == "projects" and parts[2] == "locations" and parts[4] == "repositories":
        repo_key = (parts[1], parts[3], parts[5])
    else:
        repo_key = (str(project), str(location), repository)
    if repo_key not in own.repositories:
        say(f"grants on repository {'/'.join(repo_key)}, not one of the stack's image mirrors: remove the grant")
    for role in roles:
        if role not in REPOSITORY_ROLES:
            say(
                f"{role} on repository {'/'.join(repo_key)} makes a writer of a repository the steps' images come "
                "from: it could replace an image that runs with the Hugging Face token; grant "
                "roles/artifactregistry.reader"
            )


def _on_account(props: Mapping[str, Any], roles: list[Any], own: Own, say: Say) -> None:
    account = props.get("serviceAccountId")
    if unseen(account):
        return
    email = str(account).rsplit("/", 1)[-1]
    if email not in own.accounts:
        say(f"grants on the account {email}, not one of the stack's: remove the grant")
    for role in roles:
        if role not in ACCOUNT_ROLES:
            say(
                f"{role} on the account {email} lets its members act as or administer it: the stack binds "
                "Kubernetes service accounts with roles/iam.workloadIdentityUser only"
            )


JUDGES: dict[str, Callable[[Mapping[str, Any], list[Any], Own, Say], None]] = {
    "projects": _on_project,
    "storage": _on_bucket,
    "kms": _on_key,
    "artifactregistry": _on_repository,
    "serviceaccount": _on_account,
}
"""The grant's target judged by the pulumi-gcp module of its type; a grant of any other module is a finding."""


def _judge(r: Resource, own: Own, report: Report) -> None:
    module = r.resource_type.split(":")[1].split("/")[0]
    roles = [role for role in _roles(r.props) if not unseen(role)]

    def say(message: str) -> None:
        report(f"{r.name}: {message}", r.urn)

    judge = JUDGES.get(module)
    if judge is not None:
        judge(r.props, roles, own, say)
        return
    say(
        f"a {grant_kind(r.resource_type)} grant on a {module} resource ({r.resource_type}): the stack grants on "
        "its project, bucket, key, image mirrors and accounts only: remove it"
    )


def _grant_targets(args: StackValidationArgs, resources: list[Resource], report: Report) -> None:
    own = own_resources(resources)
    for r in resources:
        if r.resource_type == BUCKET and is_state_bucket(_text(r.props.get("name")), own.state_backend):
            report(
                f"{r.name}: the stack's bucket is named as a Pulumi state bucket ({r.props.get('name')}): its grants "
                "would reach the state: name the bucket otherwise (tpu-rl:bucketName)",
                r.urn,
            )
        if r.resource_type not in IAM_TYPES:
            continue
        with judging():
            _judge(r, own, report)


grant_targets = StackValidationPolicy(
    name="grant-targets",
    description=(
        "Grants land on the stack's own project, bucket, key, image mirrors and accounts or its shared Hub cache; "
        "never on a state bucket or key; no project-level object or viewer roles; no writer of a trusted repository."
    ),
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep the grants of infra/gcp/identities.py, infra/gcp/access.py and infra/gcp/kms.py.",
    validate=_guarded_stack(_grant_targets),
)
