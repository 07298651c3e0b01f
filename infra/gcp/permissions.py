"""The permissions the account running `pulumi up` needs in the stack's project, by the predefined role that
grants them, derived from what the program creates (no Pulumi here); docs/permissions.md is the same table.

What each role is for is what ``infra.gcp`` registers (``capacity.SURVIVORS`` lists every type):

- ``gcp.projects.Service`` (``infra.gcp.apis``): Service Usage ``services.enable``. (``gcp.projects.ServiceIdentity``,
  ``infra.gcp.kms``, calls ``services.generateServiceIdentity`` too, a permission this project could not place in a
  narrower predefined role than Owner or Editor: not checked, docs/permissions.md says so);
- ``gcp.compute.Network``, ``Subnetwork``, ``Router`` and its ``RouterNat`` (``infra.gcp.network``): networks,
  subnetworks and routers; its ``Firewall``: firewall rules, which Compute Network Admin does not grant;
- ``gcp.container.Cluster`` and ``NodePool`` (``infra.gcp.cluster``), and every Kubernetes object the program
  applies through the cluster's endpoint (namespaces, CRDs, ClusterRoles of Kueue and JobSet, JobSets): GKE
  maps IAM permissions to the Kubernetes API (``container.clusterRoles.create``, ...), and only Kubernetes Engine
  Admin has the RBAC ones;
- ``gcp.serviceaccount.Account`` and ``gcp.serviceaccount.IAMMember`` (``infra.gcp.identities``, Workload Identity
  in ``infra.gcp.cluster``); the node pools run as those accounts, which needs ``iam.serviceAccounts.actAs``;
- ``gcp.projects.IAMMember`` (the node accounts' project role): the project's IAM policy;
- ``gcp.storage.Bucket`` and ``BucketIAMMember`` (``infra.gcp.storage``, ``infra.gcp.identities``), and the
  objects the steps' checks read (``workloads.observe.artifacts``) and ``forceDestroy`` deletes;
- with ``tpu-rl:gke.secretsEncryptionKey: create``: ``gcp.kms.KeyRing``, ``CryptoKey`` and ``CryptoKeyIAMMember``
  (``infra.gcp.kms``); the key's delete (deletion_policy DELETE) lists its versions and schedules each for destruction,
  then turns rotation off (terraform-provider-google ``resourceKMSCryptoKeyDelete``: ``clearCryptoKeyVersions``,
  ``disableCryptoKeyRotation``, a key update). A key of one's own is granted to GKE's service agent on the key
  itself (its IAM policy: ``cloudkms.cryptoKeys.setIamPolicy`` on that key, perhaps in another project), which a
  test on the stack's project cannot see: not checked here. Before anything is created the capacity check lists the
  project's clusters (``container.clusters.list``) to tell a key another stack's cluster uses from one a destroy left
  (``infra.gcp.capacity.keys``).

Permission names: the IAM permissions reference (https://cloud.google.com/iam/docs/permissions-reference) and the
roles reference (https://cloud.google.com/iam/docs/roles-permissions), each permission listed under the role
named here. The check asks Resource Manager which of them the caller holds on the project
(``projects.testIamPermissions``, https://cloud.google.com/resource-manager/reference/rest/v3/projects/
testIamPermissions: it answers the subset held, inherited grants included, and needs no permission itself).

Each stack's state bucket and key are granted on themselves, per stack (``STATE_WRITE``, ``STATE_READ``), and made by
`make state-bucket` with ``STATE_SETUP`` (tools/state_bucket.py, tools/state_access.py; docs/permissions.md "Each
stack's state").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from core.images import through_mirror
from core.settings import Settings


@dataclass(frozen=True)
class Grant:
    """One predefined role and the permissions of it that the program's resources use."""

    role: str
    why: str
    """What the program does with it (docs/permissions.md)."""
    permissions: tuple[str, ...]
    kms: bool = False
    """Needed only with ``tpu-rl:gke.secretsEncryptionKey: create``."""
    mirror: bool = False
    """Needed only with ``tpu-rl:images.mirror`` (``core.images.through_mirror``)."""


GRANTS: tuple[Grant, ...] = (
    Grant(
        "roles/serviceusage.serviceUsageAdmin",
        "enables the APIs the stack needs",
        (
            "serviceusage.services.enable",
            "serviceusage.services.get",
            "serviceusage.services.list",
        ),
    ),
    Grant(
        "roles/compute.networkAdmin",
        "creates the VPC, its subnet and the router with Cloud NAT",
        (
            "compute.networks.create",
            "compute.networks.delete",
            "compute.networks.get",
            "compute.networks.updatePolicy",
            "compute.subnetworks.create",
            "compute.subnetworks.delete",
            "compute.subnetworks.get",
            "compute.subnetworks.update",
            "compute.routers.create",
            "compute.routers.delete",
            "compute.routers.get",
            "compute.routers.update",
        ),
    ),
    Grant(
        "roles/compute.securityAdmin",
        "creates the firewall rule for traffic inside the VPC",
        ("compute.firewalls.create", "compute.firewalls.delete", "compute.firewalls.get", "compute.firewalls.update"),
    ),
    Grant(
        "roles/container.admin",
        "creates the cluster and its node pools, and applies Kueue, JobSet and the steps (CRDs, ClusterRoles)",
        (
            "container.clusters.create",
            "container.clusters.delete",
            "container.clusters.get",
            "container.clusters.list",
            "container.clusters.update",
            "container.operations.get",
            "container.namespaces.create",
            "container.customResourceDefinitions.create",
            "container.clusterRoles.create",
            "container.clusterRoleBindings.create",
        ),
    ),
    Grant(
        "roles/iam.serviceAccountAdmin",
        "creates the node and step service accounts and their Workload Identity bindings",
        (
            "iam.serviceAccounts.create",
            "iam.serviceAccounts.delete",
            "iam.serviceAccounts.get",
            "iam.serviceAccounts.update",
            "iam.serviceAccounts.getIamPolicy",
            "iam.serviceAccounts.setIamPolicy",
        ),
    ),
    Grant(
        "roles/iam.serviceAccountUser",
        "runs the node pools as those accounts",
        ("iam.serviceAccounts.actAs",),
    ),
    Grant(
        "roles/resourcemanager.projectIamAdmin",
        "grants the node accounts their project role (roles/container.defaultNodeServiceAccount)",
        ("resourcemanager.projects.getIamPolicy", "resourcemanager.projects.setIamPolicy"),
    ),
    Grant(
        "roles/storage.admin",
        "creates the artifacts bucket and its grants, reads the steps' outputs (and empties it with forceDestroy)",
        (
            "storage.buckets.create",
            "storage.buckets.delete",
            "storage.buckets.get",
            "storage.buckets.update",
            "storage.buckets.getIamPolicy",
            "storage.buckets.setIamPolicy",
            "storage.objects.list",
            "storage.objects.get",
            "storage.objects.delete",
        ),
    ),
    Grant(
        "roles/cloudkms.admin",
        "creates the Secrets key ring and key and grants GKE's service agent the key; on destroy, schedules the key's "
        "versions for destruction and turns its rotation off",
        (
            "cloudkms.keyRings.create",
            "cloudkms.keyRings.get",
            "cloudkms.cryptoKeys.create",
            "cloudkms.cryptoKeys.get",
            "cloudkms.cryptoKeys.update",
            "cloudkms.cryptoKeys.getIamPolicy",
            "cloudkms.cryptoKeys.setIamPolicy",
            "cloudkms.cryptoKeyVersions.list",
            "cloudkms.cryptoKeyVersions.destroy",
        ),
        kms=True,
    ),
    Grant(
        "roles/artifactregistry.admin",
        "creates the image mirrors (Artifact Registry remote repositories) and grants the node accounts read access",
        (
            "artifactregistry.repositories.create",
            "artifactregistry.repositories.get",
            "artifactregistry.repositories.update",
            "artifactregistry.repositories.delete",
            "artifactregistry.repositories.getIamPolicy",
            "artifactregistry.repositories.setIamPolicy",
        ),
        mirror=True,
    ),
)
"""Every role the account running `up` needs, with the permissions the program uses of each (docs/permissions.md)."""


def needed(settings: Settings) -> dict[str, str]:
    """Permission -> the role that grants it, for this stack (pure; in ``GRANTS`` order)."""
    create_key = settings.gke.secrets_key == "create"
    mirror = through_mirror(settings.images, settings.project, settings.region, settings.cluster_name)
    return {p: g.role for g in GRANTS if (create_key or not g.kms) and (mirror or not g.mirror) for p in g.permissions}


def missing_text(project: str, wanted: Mapping[str, str], held: Iterable[str]) -> str | None:
    """One line naming every permission of ``wanted`` not in ``held``, by the role that grants it; None: none
    missing."""
    have = set(held)
    by_role: dict[str, list[str]] = {}
    for permission, role in wanted.items():
        if permission not in have:
            by_role.setdefault(role, []).append(permission)
    if not by_role:
        return None
    count = sum(len(p) for p in by_role.values())
    roles = "; ".join(f"{role}: {', '.join(permissions)}" for role, permissions in by_role.items())
    return (
        f"the account running `up` lacks {count} permission(s) in project {project} that the stack's resources need "
        f"({roles}); grant it those roles (docs/permissions.md), e.g. gcloud projects add-iam-policy-binding {project} "
        f"--member=user:YOU --role={next(iter(by_role))}"
    )


# ---------------------------------------------------------------------------------------------
# A stack's state: its bucket and its key (tools/state.py), granted on each, per stack


@dataclass(frozen=True)
class StateGrant:
    """A predefined role on one stack's state bucket or state key, and the permissions of it Pulumi uses."""

    role: str
    on: str
    """``bucket`` (the stack's state bucket) or ``key`` (its secrets key)."""
    why: str
    permissions: tuple[str, ...]


STATE_WRITE: tuple[StateGrant, ...] = (
    StateGrant(
        "roles/storage.objectUser",
        "bucket",
        "reads and writes the stack's checkpoint, history and backups, and takes and clears its lock",
        ("storage.objects.get", "storage.objects.list", "storage.objects.create", "storage.objects.delete"),
    ),
    StateGrant(
        "roles/cloudkms.cryptoKeyEncrypterDecrypter",
        "key",
        "decrypts the stack's data key (every command that reads a secret) and encrypts a new one (`stack init`, "
        "`change-secrets-provider`)",
        ("cloudkms.cryptoKeyVersions.useToDecrypt", "cloudkms.cryptoKeyVersions.useToEncrypt"),
    ),
)
"""What an operator and a stack's deploy account need on that stack's state (up, refresh, destroy, unlock)."""

STATE_READ: tuple[StateGrant, ...] = (
    StateGrant(
        "roles/storage.objectViewer",
        "bucket",
        "reads the stack's checkpoint (a preview writes nothing and takes no lock)",
        ("storage.objects.get", "storage.objects.list"),
    ),
    StateGrant(
        "roles/cloudkms.cryptoKeyDecrypter",
        "key",
        "decrypts the stack's data key",
        ("cloudkms.cryptoKeyVersions.useToDecrypt",),
    ),
)
"""What a stack's preview account needs on that stack's state: pulumi/pulumi ``pkg/backend/diy/backend.go``
``Preview`` takes no lock and ``apply`` persists nothing for a dry run."""

STATE_SETUP: tuple[Grant, ...] = (
    Grant(
        "roles/serviceusage.serviceUsageAdmin",
        "enables the Cloud Storage and Cloud KMS APIs",
        ("serviceusage.services.enable", "serviceusage.services.get"),
    ),
    Grant(
        "roles/browser",
        "reads the project's number, which tells the stack's bucket from another project's of the same name",
        ("resourcemanager.projects.get",),
    ),
    Grant(
        "roles/storage.admin",
        "creates the stack's state bucket, sets its IAM policy and reads which stacks it holds",
        (
            "storage.buckets.create",
            "storage.buckets.get",
            "storage.buckets.update",
            "storage.buckets.getIamPolicy",
            "storage.buckets.setIamPolicy",
            "storage.objects.list",
        ),
    ),
    Grant(
        "roles/cloudkms.admin",
        "creates the stack's key ring and key and sets the key's IAM policy (`make state-move`: takes the state's "
        "grants off the key it leaves); it cannot encrypt or decrypt: the account also needs "
        "roles/cloudkms.cryptoKeyEncrypterDecrypter on the key, which `make state-bucket` grants it",
        (
            "cloudkms.keyRings.create",
            "cloudkms.keyRings.get",
            "cloudkms.cryptoKeys.create",
            "cloudkms.cryptoKeys.get",
            "cloudkms.cryptoKeys.update",
            "cloudkms.cryptoKeys.getIamPolicy",
            "cloudkms.cryptoKeys.setIamPolicy",
        ),
    ),
)
"""What `make state-bucket` needs in the stack's project (Project Owner holds all of it)."""


def state_permissions(access: str) -> dict[str, tuple[str, ...]]:
    """``{"bucket": (...), "key": (...)}``: the permissions ``access`` (``read`` or ``write``) needs on each."""
    grants = STATE_WRITE if access == "write" else STATE_READ
    return {on: tuple(p for g in grants if g.on == on for p in g.permissions) for on in ("bucket", "key")}


def state_role(access: str, on: str) -> str:
    """The role that grants ``access`` on the ``bucket`` or the ``key``."""
    grants = STATE_WRITE if access == "write" else STATE_READ
    return next(g.role for g in grants if g.on == on)
