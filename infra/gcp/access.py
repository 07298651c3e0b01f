"""Who may read and write where in the artifacts bucket: IAM conditions on object-name prefixes (plain data).

Each identity gets object access only under the prefixes its step reads or writes (``core.layout``), as the
step catalogue says (``core.steps.STEPS``: what each step ``reads``, and who it runs as):

- each CPU step has a Google service account of its own, which its pods' Kubernetes service account
  (``core.names.step_ksa``) maps to by Workload Identity, and which writes only the step's own
  ``<model>/<step>/`` and reads only the outputs of the steps it reads: the conversion writes
  ``<model>/convert/``; the export reads ``<model>/train/`` (the checkpoint it exports) and ``<model>/convert/``
  (the base's files at the converted commit) and writes ``<model>/export/``; the publication reads
  ``<model>/export/`` and writes ``<model>/publish/`` (its record). No step can write another's output: the
  export's identity cannot plant files in what the publication uploads, and the publication's (it holds the Hub
  write token) can change nothing the other steps made. A step whose identity is ``always`` has it in every
  stack, the publication's too: turning the publication on later changes no IAM, so its step never starts
  before its grants have propagated (IAM takes up to 7 minutes,
  https://cloud.google.com/iam/docs/access-change-propagation), and an identity no pod runs as can do nothing.
  A ``when-run`` identity exists only in a stack that runs its step, and its Kubernetes service account waits
  for the propagation (``program.stack``);
- ``cpu`` (the Pathways head runs with ``hostNetwork``, hence as the node's account) and ``tpu`` (the
  Pathways workers, likewise), for the step that runs as the ``nodes`` (training): read ``<model>/convert/``,
  write ``<model>/train/`` (checkpoints, TensorBoard) and the Pathways scratch ``pathways/`` (the prefix
  ``pathways``: the folder's own name included).

Each step's script creates its output folder before MaxText does anything (``workloads.specs.commands``
``mark_folder``): TensorFlow's GCS filesystem, which MaxText's paths go through, walks up from a new folder
looking each missing parent up as an object, and would otherwise reach ``<model>/<step>``, outside the
prefix, where GCS answers 403.

Writers get ``roles/storage.objectUser`` (Orbax deletes its temporary objects), readers
``roles/storage.objectViewer``, each with a condition on ``resource.name``. ``roles/storage.legacyBucketReader``
(``storage.buckets.get``, which Orbax and the GCS clients call first, and ``storage.objects.list``, which
IAM checks on the bucket, where an object-name condition cannot hold) stays unconditional: every identity
may list names, none may read or change an object outside its prefixes.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from core.layout import PATHWAYS_SCRATCH, step_prefix
from core.steps import STEPS, HubCache

WRITER_ROLE = "roles/storage.objectUser"
READER_ROLE = "roles/storage.objectViewer"
BUCKET_READER_ROLE = "roles/storage.legacyBucketReader"
NODE_ACCOUNTS = ("cpu", "tpu")
"""The node pools' accounts a ``nodes`` step runs as: cpu-np's (the Pathways head) and the TPU pools'."""


@dataclass(frozen=True)
class Access:
    """The prefixes an identity writes and reads (steps' names; ``scratch``: the Pathways scratch)."""

    write: tuple[str, ...]
    read: tuple[str, ...] = ()
    step: bool = True
    """A CPU step's own identity (a Kubernetes service account bound by Workload Identity); False: a node
    pool's account, which the pods that run with ``hostNetwork`` use."""


def access(running: Collection[str] = ()) -> dict[str, Access]:
    """Identity -> what it may touch, for a stack running the steps ``running``: each CPU step's own (those whose
    identity is ``always``, and each ``when-run`` one that runs), then the node accounts of cpu-np and the TPU
    pools (what the ``nodes`` steps write and read, and the Pathways scratch)."""
    own: dict[str, Access] = {
        name: Access(write=(name,), read=facts.reads)
        for name, facts in STEPS.items()
        if facts.identity == "always" or (facts.identity == "when-run" and name in running)
    }
    nodes = [facts for facts in STEPS.values() if facts.identity == "nodes"]
    write = tuple(facts.name for facts in nodes) + ("scratch",)
    read = tuple(dict.fromkeys(r for facts in nodes for r in facts.reads))
    return {**own, **{account: Access(write=write, read=read, step=False) for account in NODE_ACCOUNTS}}


def step_identities(running: Collection[str] = ()) -> tuple[str, ...]:
    """The steps with an identity of their own in a stack running ``running`` (every stack has each ``always``
    one, whether or not it runs the step)."""
    return tuple(name for name, entry in access(running).items() if entry.step)


@dataclass(frozen=True)
class BucketGrant:
    """One bucket-level IAM member: an identity, a role and, unless None, the condition it holds under."""

    holder: str
    role: str
    prefixes: tuple[str, ...]
    """Object-name prefixes the grant is limited to (empty: the whole bucket)."""
    target: str = "bucket"
    """Which bucket, in the resource name: ``bucket`` (the stack's) or ``hubcache`` (a shared Hub cache's)."""

    @property
    def role_name(self) -> str:
        """The role without ``roles/storage.`` (``objectUser``)."""
        return self.role.removeprefix("roles/storage.")

    @property
    def resource_name(self) -> str:
        """The grant's Pulumi resource name (``<holder>-<target>-<role>``: ``convert-bucket-objectUser``)."""
        return f"{self.holder}-{self.target}-{self.role_name}"

    def condition(self, bucket: str) -> dict[str, str] | None:
        """The IAM condition (title, description, expression) on the prefixes, or None."""
        if not self.prefixes:
            return None
        return {
            "title": f"{self.holder} {self.role_name} prefixes",
            "description": "tpu-rl: only under " + ", ".join(self.prefixes),
            "expression": " || ".join(
                f'resource.name.startsWith("projects/_/buckets/{bucket}/objects/{prefix}")' for prefix in self.prefixes
            ),
        }


def _prefix(model: str, step: str) -> str:
    # The scratch without its "/": a GCS client's mkdir (TensorFlow's) looks the folder up as the object
    # ``pathways`` first, which ``pathways/`` would not cover (the Pathways servers are closed binaries; how
    # they create their folders is not known). A step's folder is created by its script (``mark_folder``).
    return PATHWAYS_SCRATCH.removesuffix("/") if step == "scratch" else step_prefix(model, step)


def bucket_grants(model: str, running: Collection[str] = ()) -> list[BucketGrant]:
    """Every identity's grants on the bucket for a stack training ``model`` and running the steps ``running``; an
    identity that reads nothing gets no reader grant."""
    grants = []
    for holder, entry in access(running).items():
        grants.append(BucketGrant(holder, BUCKET_READER_ROLE, ()))
        grants.append(BucketGrant(holder, WRITER_ROLE, tuple(_prefix(model, s) for s in entry.write)))
        if entry.read:
            grants.append(BucketGrant(holder, READER_ROLE, tuple(_prefix(model, s) for s in entry.read)))
    return grants


HUB_CACHE_WRITE_ROLES = (WRITER_ROLE, "roles/storage.objectCreator", "roles/storage.objectAdmin")
"""Object roles that create, replace or delete objects (``storage.objects.create``/``delete``): the one a cache's
writer holds, and those the capacity check looks for on another stack's identity (``infra.gcp.capacity.hub_cache``)."""


def hub_cache_grants(prefix: str, writes: bool) -> list[BucketGrant]:
    """The grants on a shared Hub cache's bucket (``tpu-rl:model.hubCache``), each bound to its folder ``prefix``,
    to the steps whose entry uses the cache (``core.steps.HubCache``). One stack writes it: where this stack is the
    writer (``writes``), the identity of the step that fills the cache (the conversion) gets ``objectUser`` there; in
    every other stack ``objectViewer`` (``storage.objects.get`` and ``list`` only: "Storage Object Viewer",
    https://cloud.google.com/storage/docs/access-control/iam-roles), so no reader can plant or replace a file of the
    cache, and a reader keeps what it fetches from the Hub in its own bucket's cache. A step that reads the cache (the
    export, ``workloads/container/complete_export.py``: the base's other tensors, from the objects the conversion
    hashed) gets ``objectViewer`` in every stack. Nobody else, and nothing outside the folder (the bucket is the
    project's, not the stack's: other stacks' grants live beside these, and a destroy removes only its own). No
    ``legacyBucketReader``: both programs read and write objects by name (``blob.exists``, ``get_blob``, ranged
    downloads: ``storage.objects.get``), never list or ``buckets.get`` the cache."""
    fills = WRITER_ROLE if writes else READER_ROLE
    return [
        BucketGrant(name, fills if facts.hub_cache is HubCache.FILLS else READER_ROLE, (prefix,), "hubcache")
        for name, facts in STEPS.items()
        if facts.hub_cache is not None
    ]


REGISTRY_READER_ROLE = "roles/artifactregistry.reader"
SERVICE_USAGE_ROLE = "roles/serviceusage.serviceUsageConsumer"
IMAGE_PULLERS = NODE_ACCOUNTS
"""Who pulls the steps' images: the kubelet of a node pulls with the node's account, and the steps run on cpu-np
(the CPU steps, the Pathways head) and the TPU pools (the Pathways workers); the system pool runs none of them."""


@dataclass(frozen=True)
class RegistryGrant:
    """One image puller's grant for the stack's image mirrors (``infra.gcp.artifact_registry``)."""

    holder: str
    role: str
    repository: str | None
    """The mirror's repository id the role is granted on; None: the project."""

    @property
    def resource_name(self) -> str:
        return f"{self.holder}-{self.repository or 'project'}-{self.role.rsplit('.', 1)[-1]}"


def registry_grants(repositories: Collection[str]) -> list[RegistryGrant]:
    """What the image pullers need of the mirrors ``repositories``, and no more: Artifact Registry Reader on each
    mirror itself (not the project: "Configure roles and permissions", the reader role on a repository,
    https://cloud.google.com/artifact-registry/docs/access-control), and Service Usage Consumer on the project,
    which GKE's Image streaming asks of a node's own service account in the project that hosts the images ("Use Image
    streaming to pull container images", Requirements). Nothing without a mirror."""
    if not repositories:
        return []
    return [
        *(RegistryGrant(holder, REGISTRY_READER_ROLE, repo) for repo in repositories for holder in IMAGE_PULLERS),
        *(RegistryGrant(holder, SERVICE_USAGE_ROLE, None) for holder in IMAGE_PULLERS),
    ]
