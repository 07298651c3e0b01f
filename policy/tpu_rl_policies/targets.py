"""Where every grant lands, and what it may give there (``grant-targets``): an allow-list, deny by default. On each
target the program grants on (the stack's project, its bucket, a shared Hub cache the base branch's policy config
names, its Cloud KMS key, its image mirrors, its step accounts), each of the stack's accounts may hold only the roles
its step needs there (``GRANTS``, derived from ``infra.gcp.identities``, ``infra.gcp.access``, ``infra.gcp.kms`` and
``infra.gcp.cluster``; ``tests/test_policy_grants_allowed.py`` pins them to what the program's plans grant), object
roles only under the step folders the program writes, read from the grant's IAM condition; a custom role is judged
as the narrowest allowed role whose permissions hold all of its own. Never a grant on a state bucket or state key,
nor on any other kind of resource.

What the stack's own resources are is read from the stack (its ``Bucket``, ``Cluster``, ``KeyRing`` and
``CryptoKey``, ``Repository``, ``Account`` and ``IAMCustomRole`` resources) and from the configuration the engine
sends the pack (``gcp:project``, ``tpu-rl:clusterName``, ``tpu-rl:model.name``, ``tpu-rl:gke.secretsEncryptionKey``,
``tpu-rl:stateBackend``). The shared Hub cache comes from the policy config (``hubCaches``), which is the base
branch's, never from the stack's configuration, which is the pull request's. A value the engine does not know yet (at
a preview, a repository's or an account's name, a member's email) is judged at ``pulumi up`` (``resources._judged``);
what rests only on known values (a writer role on any repository) is judged at once."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from core.config.formats import CLUSTER_NAME
from core.iam_types import GRANT_CLASS, IAM_TYPES, grant_kind
from core.layout import PATHWAYS_SCRATCH
from core.models import MODELS
from core.state_names import is_state_bucket, is_state_key, project_part
from core.steps import STEPS, HubCache

from .grants import (
    GKE_AGENT,
    WORKLOAD_PRINCIPAL,
    Grant,
    Own,
    _text,
    condition_prefixes,
    grants_of,
    own_resources,
)
from .properties import _config, _l, judging, unseen
from .resources import BUCKET, DEPLOYMENT, Report, Resource, _guarded_stack

NODE_ROLE = "roles/container.defaultNodeServiceAccount"
REGISTRY_READER = "roles/artifactregistry.reader"
SERVICE_USAGE = "roles/serviceusage.serviceUsageConsumer"
BUCKET_READER = "roles/storage.legacyBucketReader"
WRITER = "roles/storage.objectUser"
READER = "roles/storage.objectViewer"
KEY_ROLE = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
WORKLOAD_IDENTITY_USER = "roles/iam.workloadIdentityUser"
NODES = ("cpu", "tpu")
"""The node pools' accounts the steps' pods run as where they use the host network (Pathways), and which pull the
steps' images."""
STEP_HOLDERS: tuple[str, ...] = tuple(name for name, facts in STEPS.items() if facts.identity != "nodes")
"""The steps with a Google account of their own (``infra.gcp.access``)."""


def _bucket_folders() -> dict[str, dict[str, frozenset[str]]]:
    """Holder -> object role -> the steps whose folders (``scratch``: the Pathways scratch) it holds the role under,
    as ``infra.gcp.access.access`` gives them: each step account writes its own step's and reads those it ``reads``;
    the node accounts write the ``nodes`` steps' and the scratch and read what those steps read."""
    nodes = [facts for facts in STEPS.values() if facts.identity == "nodes"]
    node_access = {
        WRITER: frozenset((*(facts.name for facts in nodes), "scratch")),
        READER: frozenset(r for facts in nodes for r in facts.reads),
    }
    own: dict[str, dict[str, frozenset[str]]] = {
        name: {WRITER: frozenset((name,)), READER: frozenset(facts.reads)}
        for name, facts in STEPS.items()
        if name in STEP_HOLDERS
    }
    return {**own, **{node: node_access for node in NODES}}


BUCKET_FOLDERS = _bucket_folders()

GRANTS: dict[str, dict[str, frozenset[str]]] = {
    "project": {
        "system": frozenset((NODE_ROLE, REGISTRY_READER)),
        **{node: frozenset((NODE_ROLE, REGISTRY_READER, SERVICE_USAGE)) for node in NODES},
    },
    "bucket": {
        holder: frozenset((BUCKET_READER, *(role for role, steps in folders.items() if steps)))
        for holder, folders in BUCKET_FOLDERS.items()
    },
    "cache": {
        name: frozenset((WRITER, READER)) if facts.hub_cache is HubCache.FILLS else frozenset((READER,))
        for name, facts in STEPS.items()
        if facts.hub_cache is not None
    },
    "repository": {node: frozenset((REGISTRY_READER,)) for node in NODES},
}
"""Target -> the stack's account (``system``, ``cpu``, ``tpu`` or a step) -> the roles it may hold there: GKE's node
role, the registry reader (a private registry) and Service Usage Consumer (Image streaming from the mirrors) in the
project; on the bucket, names (``legacyBucketReader``) and objects under its folders (``BUCKET_FOLDERS``); on a shared
Hub cache, the conversion's writer or reader and the export's reader; the mirrors' reader to the image pullers. The
key's one grant is GKE's service agent's (``KEY_ROLE``), an account's Workload Identity's (``WORKLOAD_IDENTITY_USER``,
to a Kubernetes service account's principal)."""
ROLES_ON = {target: frozenset().union(*by_holder.values()) for target, by_holder in GRANTS.items()}
ROLES_ON |= {"key": frozenset((KEY_ROLE,)), "account": frozenset((WORKLOAD_IDENTITY_USER,))}
"""Target -> every role any of the stack's principals may hold there."""
ANY_BUCKET = ROLES_ON["bucket"] | ROLES_ON["cache"]


ROLE_PERMISSIONS: dict[str, frozenset[str]] = {
    BUCKET_READER: frozenset(("storage.buckets.get", "storage.objects.list")),
    READER: frozenset(("storage.objects.get", "storage.objects.list", "storage.folders.get", "storage.folders.list")),
    WRITER: frozenset(
        (
            "storage.objects.get",
            "storage.objects.list",
            "storage.objects.create",
            "storage.objects.delete",
            "storage.objects.update",
            "storage.objects.restore",
            "storage.multipartUploads.create",
            "storage.multipartUploads.abort",
            "storage.multipartUploads.list",
            "storage.multipartUploads.listParts",
            "storage.folders.get",
            "storage.folders.list",
            "storage.folders.create",
            "storage.folders.delete",
            "storage.folders.rename",
        )
    ),
    REGISTRY_READER: frozenset(
        (
            "artifactregistry.repositories.get",
            "artifactregistry.repositories.list",
            "artifactregistry.repositories.downloadArtifacts",
            "artifactregistry.dockerimages.get",
            "artifactregistry.dockerimages.list",
            "artifactregistry.tags.get",
            "artifactregistry.tags.list",
            "artifactregistry.versions.get",
            "artifactregistry.versions.list",
        )
    ),
    KEY_ROLE: frozenset(("cloudkms.cryptoKeyVersions.useToEncrypt", "cloudkms.cryptoKeyVersions.useToDecrypt")),
}
"""What a custom role may hold to be judged as one of the allowed roles: a subset of the predefined role's
permissions (Google's IAM roles reference), never more. The project roles and ``workloadIdentityUser`` are granted
only as themselves."""
NARROWEST_FIRST = (BUCKET_READER, READER, WRITER, REGISTRY_READER, KEY_ROLE)
CUSTOM_ROLE = re.compile(r"(projects|organizations)/[^/]+/roles/[^/]+")

Say = Callable[[str], None]


@dataclass(frozen=True)
class Stack:
    """What a grant is judged against: the stack's own resources, the shared Hub caches the policy config names
    (bucket -> folders), the projects whose stacks' artifact buckets a cache may never be, and the model whose folders
    the steps write."""

    own: Own
    caches: dict[str, dict[str, bool]]
    """Bucket -> folder -> whether this stack writes it."""
    models: frozenset[str]


def _caches(config: Mapping[str, Any]) -> dict[str, dict[str, bool]]:
    """The policy config's shared Hub caches (``gs://<bucket>/<folder>/``): ``hubCaches`` the stack reads,
    ``writtenHubCaches`` the one it writes (``tpu-rl:model.hubCacheWriter``), bucket -> folder -> written. Every entry
    is ``gs://<bucket>/<folder>`` (the engine refuses any other before the pack runs: the schema's pattern); the
    written ones are read last, so a folder listed in both is written."""
    caches: dict[str, dict[str, bool]] = {}
    for key, writes in (("hubCaches", False), ("writtenHubCaches", True)):
        for entry in _l(config.get(key)):
            bucket, _, folder = str(entry).removeprefix("gs://").partition("/")
            caches.setdefault(bucket, {})[folder] = writes
    return caches


def artifact_bucket(bucket: str, own: Own) -> bool:
    """Whether ``bucket`` is named as a stack of the stack's project names its artifacts bucket by default,
    ``<gcp:project>-<clusterName>`` (``core.config.storage_rules``): any stack's of the project, whatever its
    cluster."""
    return any(
        bucket.startswith(f"{project_part(p)}-") and CLUSTER_NAME.matches(bucket.removeprefix(f"{project_part(p)}-"))
        for p in own.projects
    )


def _resolved(role: Any, target: str, stack: Stack, say: Say) -> str | None:
    """The allowed role a grant's role is judged as: itself if allowed on ``target``; a custom role the stack declares,
    as the narrowest allowed role on ``target`` that holds all its permissions; else None, said."""
    allowed = ROLES_ON[target]
    if role in allowed:
        return str(role)
    if not (isinstance(role, str) and CUSTOM_ROLE.fullmatch(role)):
        if role in ANY_BUCKET:  # a role of another target (any other is said before the target is known)
            say(f"{role} on the stack's {target}: it needs only {', '.join(sorted(allowed))} there; grant those")
        return None
    if role not in stack.own.custom_roles:
        say(
            f"the custom role {role} is not one the stack declares (gcp:projects/iAMCustomRole), so its permissions "
            f"cannot be judged: grant {', '.join(sorted(allowed))}"
        )
        return None
    held = {str(p) for p in _l(stack.own.custom_roles[role])}
    for candidate in (r for r in NARROWEST_FIRST if r in allowed):
        if held <= ROLE_PERMISSIONS[candidate]:
            return candidate
    extra = sorted(held - frozenset().union(*(ROLE_PERMISSIONS[r] for r in allowed)))
    say(
        f"the custom role {role} holds {', '.join(extra[:3]) or ', '.join(sorted(held)[:3])}, which no role the stack "
        f"needs on its {target} holds: grant {', '.join(sorted(allowed))}"
    )
    return None


def _folders(holder: str, role: str, models: frozenset[str]) -> set[str]:
    """The object-name prefixes ``holder`` (one ``GRANTS["bucket"]`` names) may hold an object role under, in the
    stack's bucket."""
    steps = BUCKET_FOLDERS[holder].get(role, frozenset())
    scratch = {PATHWAYS_SCRATCH.removesuffix("/")} if "scratch" in steps else set()
    return scratch | {f"{m}/{s}/" for m in models for s in steps if s != "scratch"}


def _under(folders: tuple[str, ...]) -> Callable[[str], bool]:
    """Whether a prefix is under one of ``folders``."""
    return lambda prefix: prefix.startswith(folders)


def _bounded(grant: Grant, role: str, bucket: str, allowed: Callable[[str], bool], say: Say) -> None:
    """An object role's condition: read (``condition_prefixes``), on ``bucket``, every prefix ``allowed``."""
    if role == BUCKET_READER:
        return
    parsed = condition_prefixes(grant.condition)
    if parsed is None:
        say(
            f"{grant.role} on {bucket} is bounded by no condition the pack reads: bound it to the step's folders, "
            'resource.name.startsWith("projects/_/buckets/<bucket>/objects/<folder>") terms joined by || '
            "(infra/gcp/access.py)"
        )
        return
    on, prefixes = parsed
    outside = [p for p in prefixes if on != bucket or not allowed(p)]
    if outside:
        say(
            f"{grant.role} on {bucket} under {', '.join(f'{on}/{p}' for p in outside)}: outside the folders its "
            "step uses; bound it to them (infra/gcp/access.py)"
        )


def _bucket_target(bucket: str, stack: Stack, say: Say) -> str | None:
    """``bucket`` or ``cache``; None (said) for a state bucket or any other."""
    own = stack.own
    if is_state_bucket(bucket, own.state_backend):
        say(
            f"grants on {bucket}, a Pulumi state bucket: the state and its secrets are reached by the account "
            "that runs pulumi only (make state-bucket), never by a workload: remove the grant"
        )
        return None
    if bucket in own.buckets:
        return "bucket"
    if bucket in stack.caches and not artifact_bucket(bucket, own):
        return "cache"
    if bucket in stack.caches:
        say(
            f"grants on {bucket} as a shared Hub cache, but it is named as a stack's artifacts bucket "
            "(<gcp:project>-<clusterName>): another stack's outputs; keep the cache in a bucket of its own"
        )
        return None
    say(
        f"grants on bucket {bucket}, which is neither the stack's bucket nor a shared Hub cache the policy config "
        "names (grant-targets hubCaches): another stack's or project's data: grant on the stack's own bucket"
    )
    return None


def _on_bucket(props: Mapping[str, Any], grants: list[Grant], stack: Stack, say: Say) -> Callable[..., None] | None:
    for grant in grants:
        if grant.role not in ANY_BUCKET and not CUSTOM_ROLE.fullmatch(str(grant.role)):
            say(f"{grant.role} on a bucket: the steps need {', '.join(sorted(ROLES_ON['bucket']))} only")
    value = props.get("bucket")
    if unseen(value):
        return None
    bucket = str(value).removeprefix("gs://").removeprefix("b/").removeprefix("projects/_/buckets/").partition("/")[0]
    target = _bucket_target(bucket, stack, say)
    if target is None:
        return None
    roles = [(grant, _resolved(grant.role, target, stack, say)) for grant in grants]

    def per_holder(holder: str, holder_say: Say, only: Grant | None = None) -> None:
        for grant, role in roles:
            if role is None or (only is not None and grant is not only):  # only the binding it is a member of
                continue
            if role not in GRANTS[target].get(holder, frozenset()):
                holder_say(f"{grant.role} on the {target} {bucket}: its step does not use it; remove the grant")
            elif target == "cache":
                folders = tuple(f for f, writes in stack.caches[bucket].items() if writes or role == READER)
                _bounded(grant, role, bucket, _under(folders), holder_say)
            else:
                allowed = _folders(holder, role, stack.models)
                _bounded(grant, role, bucket, allowed.__contains__, holder_say)

    return per_holder


def _on_project(props: Mapping[str, Any], grants: list[Grant], stack: Stack, say: Say) -> Callable[..., None] | None:
    for grant in grants:
        if grant.role not in ROLES_ON["project"]:
            say(f"project-level {grant.role} to the stack's identities: {_why_project(str(grant.role))}")
    project = props.get("project")
    if unseen(project):
        return None
    if project not in stack.own.projects:
        say(
            f"grants {', '.join(str(g.role) for g in grants)} in project {project}, not the stack's "
            f"({', '.join(sorted(stack.own.projects)) or 'none known'}): grant in gcp:project only"
        )
    return _holders_roles("project", [g for g in grants if g.role in ROLES_ON["project"]], "the project")


def _why_project(role: str) -> str:
    if role.startswith("roles/storage."):
        return (
            "it reaches every bucket of the project, other stacks' and their state among them: grant it on the bucket"
        )
    if role == "roles/browser" or role.lower().endswith("viewer"):  # roles/viewer, roles/iam.securityReviewer, ...
        return "it reads every resource of its kind in the project, other stacks' among them"
    return "the stack's identities need only " + ", ".join(sorted(ROLES_ON["project"])) + " at project level"


def _holders_roles(target: str, grants: list[Grant], where: str) -> Callable[..., None]:
    def per_holder(holder: str, say: Say, only: Grant | None = None) -> None:
        for grant in grants:
            if (only is None or grant is only) and grant.role not in GRANTS[target].get(holder, frozenset()):
                who = f"the {holder} account" if holder else "an account of no kind the stack makes"
                say(f"{grant.role} on {where} to {who}: its step does not use it; remove the grant")

    return per_holder


def _on_key(props: Mapping[str, Any], grants: list[Grant], stack: Stack, say: Say) -> Callable[..., None] | None:
    for grant in grants:
        if grant.role != KEY_ROLE:
            say(f"{grant.role} on the stack's key: GKE's service agent needs {KEY_ROLE} only")
    key = props.get("cryptoKeyId")
    if unseen(key):
        return None
    if is_state_key(str(key)):
        say(
            f"grants on {key}, a Pulumi state secrets key: it decrypts the stack's secrets, the Hugging Face "
            "token among them, and is used by the account that runs pulumi only: remove the grant"
        )
        return None
    if key not in stack.own.keys:
        say(f"grants on the key {key}, not the stack's (tpu-rl:gke.secretsEncryptionKey): remove the grant")
    for grant in grants:
        for member in grant.members:
            if not unseen(member) and not (isinstance(member, str) and GKE_AGENT.fullmatch(member)):
                say(
                    f"grants the stack's key to {member}: only GKE's service agent uses it (to encrypt Secrets); "
                    "remove the grant"
                )
    return None


def _on_repository(props: Mapping[str, Any], grants: list[Grant], stack: Stack, say: Say) -> Callable[..., None] | None:
    for grant in grants:
        if grant.role != REGISTRY_READER:
            say(
                f"{grant.role} on a repository makes a writer of a repository the steps' images come from: it could "
                f"replace an image that runs with the Hugging Face token; grant {REGISTRY_READER}"
            )
    project, location, repository = props.get("project"), props.get("location"), props.get("repository")
    if unseen(repository) or unseen(project) or unseen(location):
        return None
    parts = str(repository).split("/")
    if len(parts) == 6 and parts[0] == "projects" and parts[2] == "locations" and parts[4] == "repositories":
        repo_key = (parts[1], parts[3], parts[5])
    else:
        repo_key = (str(project), str(location), str(repository))
    if repo_key not in stack.own.repositories:
        say(f"grants on repository {'/'.join(repo_key)}, not one of the stack's image mirrors: remove the grant")
        return None
    return _holders_roles("repository", [g for g in grants if g.role == REGISTRY_READER], "/".join(repo_key))


def _on_account(props: Mapping[str, Any], grants: list[Grant], stack: Stack, say: Say) -> Callable[..., None] | None:
    for grant in grants:
        if grant.role != WORKLOAD_IDENTITY_USER:
            say(
                f"{grant.role} on a service account lets its members act as or administer it: the stack binds "
                f"Kubernetes service accounts with {WORKLOAD_IDENTITY_USER} only"
            )
        for member in grant.members:
            if not unseen(member) and not (isinstance(member, str) and WORKLOAD_PRINCIPAL.fullmatch(member)):
                say(
                    f"{grant.role} on a service account to {member}, not a Kubernetes service account's Workload "
                    "Identity principal (serviceAccount:<project>.svc.id.goog[<namespace>/<name>]): remove the grant"
                )
    account = props.get("serviceAccountId")
    if unseen(account):
        return None
    email = str(account).rpartition("/")[2]
    if email not in stack.own.accounts:
        say(f"grants on the account {email}, not one of the stack's: remove the grant")
    return None


JUDGES: dict[str, Callable[[Mapping[str, Any], list[Grant], Stack, Say], Callable[..., None] | None]] = {
    "projects/": _on_project,
    "storage/Bucket": _on_bucket,
    "kms/CryptoKey": _on_key,
    "artifactregistry/Repository": _on_repository,
    "serviceaccount/": _on_account,
}
"""A grant's target judged by the module and resource of its type (``gcp:storage/bucketIAMMember:BucketIAMMember``:
``storage/Bucket``); each returns the check of the grant's holders, run once its target is judged, or None. A grant on
any other resource (a managed folder, a key ring, a secret) is a finding: the program makes none."""


def _target(resource_type: str) -> str:
    module = resource_type.split(":")[1].split("/")[0]
    match = GRANT_CLASS.fullmatch(resource_type.rpartition(":")[2])
    return f"{module}/{match.group('on') if match else '?'}"


def _member_holder(member: Any, stack: Stack) -> str | None:
    """The holder a member is (``""``: an account of the stack's of no kind the program makes, which holds nothing;
    None: not one of the stack's accounts, which ``stack-principals`` says)."""
    if unseen(member) or not isinstance(member, str):
        return None
    return stack.own.holders.get(member.removeprefix("serviceAccount:"))


def _judge(r: Resource, stack: Stack, report: Report) -> Callable[[], None] | None:
    """Judge where a grant lands and the roles any holder may have there; return the judgement of its holders (who
    holds which role under which folders), which rests on its members (not known at a preview), or None."""

    def say(message: str) -> None:
        report(f"{r.name}: {message}", r.urn)

    grants = grants_of(r.props)
    judge = JUDGES.get(_target(r.resource_type))
    if judge is None:
        say(
            f"a {grant_kind(r.resource_type)} grant on a {_target(r.resource_type).replace('/', ' ')} resource "
            f"({r.resource_type}): the stack grants on its project, bucket, key, image mirrors and accounts only: "
            "remove it"
        )
        return None
    per_holder = judge(r.props, grants, stack, say)
    if per_holder is None:
        return None

    def holders() -> None:
        for grant in grants:
            judged: set[str] = set()  # a holder listed twice in one binding is judged once
            for member in grant.members:
                if isinstance(member, str) and WORKLOAD_PRINCIPAL.fullmatch(member):
                    say(
                        f"{grant.role} to {member}, a Kubernetes service account's principal: only its step's Google "
                        "account holds grants; bind the Kubernetes service account to it with workloadIdentityUser"
                    )
                    continue
                holder = _member_holder(member, stack)
                if holder is not None and holder not in judged:
                    judged.add(holder)
                    per_holder(holder, say, grant)

    return holders


def _grant_targets(args: StackValidationArgs, resources: list[Resource], report: Report) -> None:
    """Every grant's target first, then its holders (whose emails a preview does not know yet)."""
    own = own_resources(resources)
    model = DEPLOYMENT.setting("tpu-rl:model", "name")
    stack = Stack(own, _caches(_config(args)), frozenset((model,) if isinstance(model, str) else MODELS))
    holders = []
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
            holders.append(_judge(r, stack, report))
    for judged in holders:
        if judged is not None:
            with judging():
                judged()


grant_targets = StackValidationPolicy(
    name="grant-targets",
    description=(
        "Grants land on the stack's own project, bucket, key, image mirrors and accounts or a shared Hub cache the "
        "policy config names, each account holding only the roles its step needs there, under its steps' folders."
    ),
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep the grants of infra/gcp/identities.py, infra/gcp/access.py and infra/gcp/kms.py.",
    config_schema=PolicyConfigSchema(
        properties={
            key: {
                "type": "array",
                "items": {"type": "string", "pattern": "^gs://[a-z0-9][a-z0-9_.-]+/.+"},
                "default": [],
            }
            for key in ("hubCaches", "writtenHubCaches")
        }
    ),
    validate=_guarded_stack(_grant_targets),
)
