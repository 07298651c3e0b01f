"""Who may read and write where in the artifacts bucket: IAM conditions on object-name prefixes (plain data).

Each identity gets object access only under the prefixes its step reads or writes (``core.layout``):

- each CPU step has a Google service account of its own, which its pods' Kubernetes service account
  (``core.names.step_ksa``) maps to by Workload Identity: the conversion writes ``<model>/convert/``; the
  export reads ``<model>/train/`` (the checkpoint it exports) and ``<model>/convert/`` (the base's files at
  the converted commit) and writes ``<model>/export/``; the publication reads ``<model>/export/`` and writes
  ``<model>/publish/`` (its record). No step can write another's output: the export's identity cannot plant
  files in what the publication uploads, and the publication's (it holds the Hub write token) can change
  nothing the other steps made. Every stack has all of them, the publication's too: turning the publication
  on later changes no IAM, so its step never starts before its grants have propagated (IAM takes up to 7
  minutes, https://cloud.google.com/iam/docs/access-change-propagation), and an identity no pod runs as can
  do nothing;
- ``cpu`` (the Pathways head runs with ``hostNetwork``, hence as the node's account) and ``tpu`` (the
  Pathways workers, likewise): read ``<model>/convert/``, write ``<model>/train/`` (checkpoints, TensorBoard)
  and the Pathways scratch ``pathways/`` (the prefix ``pathways``: the folder's own name included).

Each step's script creates its output folder before MaxText does anything (``workloads.build.commands``
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

from dataclasses import dataclass

from core.layout import PATHWAYS_SCRATCH, step_prefix
from core.names import PUBLISH

WRITER_ROLE = "roles/storage.objectUser"
READER_ROLE = "roles/storage.objectViewer"
BUCKET_READER_ROLE = "roles/storage.legacyBucketReader"


@dataclass(frozen=True)
class Access:
    """The prefixes an identity writes and reads (steps' names; ``scratch``: the Pathways scratch)."""

    write: tuple[str, ...]
    read: tuple[str, ...] = ()
    step: bool = True
    """A CPU step's own identity (a Kubernetes service account bound by Workload Identity); False: a node
    pool's account, which the pods that run with ``hostNetwork`` use."""


ACCESS: dict[str, Access] = {
    "convert": Access(write=("convert",)),
    "export": Access(write=("export",), read=("train", "convert")),
    PUBLISH: Access(write=(PUBLISH,), read=("export",)),
    "cpu": Access(write=("train", "scratch"), read=("convert",), step=False),
    "tpu": Access(write=("train", "scratch"), read=("convert",), step=False),
}
"""Identity -> what it may touch: each CPU step's own, and the node accounts of cpu-np and the TPU pools."""


def step_identities() -> tuple[str, ...]:
    """The steps with an identity of their own (every stack has each, whether or not it runs the step)."""
    return tuple(name for name, access in ACCESS.items() if access.step)


@dataclass(frozen=True)
class BucketGrant:
    """One bucket-level IAM member: an identity, a role and, unless None, the condition it holds under."""

    holder: str
    role: str
    prefixes: tuple[str, ...]
    """Object-name prefixes the grant is limited to (empty: the whole bucket)."""

    @property
    def role_name(self) -> str:
        """The role without ``roles/storage.`` (``objectUser``)."""
        return self.role.removeprefix("roles/storage.")

    @property
    def resource_name(self) -> str:
        """The grant's Pulumi resource name (``<holder>-bucket-<role>``)."""
        return f"{self.holder}-bucket-{self.role_name}"

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


def bucket_grants(model: str) -> list[BucketGrant]:
    """Every identity's grants on the bucket for a stack training ``model``; an identity that reads nothing gets
    no reader grant."""
    grants = []
    for holder, access in ACCESS.items():
        grants.append(BucketGrant(holder, BUCKET_READER_ROLE, ()))
        grants.append(BucketGrant(holder, WRITER_ROLE, tuple(_prefix(model, s) for s in access.write)))
        if access.read:
            grants.append(BucketGrant(holder, READER_ROLE, tuple(_prefix(model, s) for s in access.read)))
    return grants
