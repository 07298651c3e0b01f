"""The names of a stack's state home (plain data, no I/O): the bucket its Pulumi state lives in and the Cloud KMS key
its secrets are encrypted with, as ``tools/state_home.py`` gives them to a stack that records none, and the shapes
that tell any stack's state bucket or key from another bucket or key.

A stack ``S`` of project ``P`` keeps its state in ``gs://P-pulumi-state-S`` and encrypts its secrets with
``projects/P/locations/global/keyRings/pulumi-state-S/cryptoKeys/state``, a key ring of its own: a grant on a ring is
inherited by every key in it, and ``roles/cloudkms.admin`` holds ``cloudkms.keyRings.setIamPolicy``, so whoever
administers one key of a shared ring could grant itself decrypt on every other key in it
(https://cloud.google.com/kms/docs/reference/permissions-and-roles). Earlier versions put every stack's key in one
ring, ``pulumi-state`` (``cryptoKeys/tpu-rl-S``), and before that shared ``gs://P-pulumi-state`` and the key
``pulumi-secrets`` between a project's stacks; `make state-move` moves a stack off either. The policy pack refuses
any grant of a stack's program on a bucket or key of these shapes (``policy/tpu_rl_policies/targets.py``): the state
and its secrets are reached only by the account that runs ``pulumi``, granted by ``make state-bucket``, never by a
workload.
"""

from __future__ import annotations

import re
from urllib.parse import urlparse

from core.names import PROJECT

STATE_SUFFIX = "-pulumi-state"
"""What every state bucket's name ends with, or has before ``-<stack>``."""
SHARED_RING = "pulumi-state"
"""The key ring every stack's key shared in earlier versions (a ring cannot be deleted, so it and its keys stay)."""
KEY_LOCATION = "global"
STATE_KEY_ID = "state"
"""Each stack's key, ``state``, in a ring of its own, ``pulumi-state-<stack>`` in ``global`` (``state_key``): the
ring names the stack, and an IAM condition on the ring's name covers the ring and its key alike."""
LEGACY_SUFFIX = STATE_SUFFIX
"""The shared bucket earlier versions gave every stack of a project: ``gs://<gcp:project>-pulumi-state``."""
LEGACY_KEY = "pulumi-secrets"
"""The shared key earlier versions gave every stack of a project, in the ring ``pulumi-state``."""
KEY_ID = re.compile(r"[A-Za-z0-9_-]{1,63}")
"""A Cloud KMS key ring or key id (https://cloud.google.com/kms/docs/resource-hierarchy: letters, digits, '_',
'-')."""
STATE_BUCKET = re.compile(rf".+{STATE_SUFFIX}(-[A-Za-z0-9_.-]+)?")
"""Any stack's state bucket by its given name (``<project>-pulumi-state`` or ``<project>-pulumi-state-<stack>``)."""
STATE_KEY = re.compile(
    rf"projects/[^/]+/locations/[^/]+/keyRings/{SHARED_RING}(-[A-Za-z0-9_-]+)?(/cryptoKeys/[^/]+)?(/.*)?"
)
"""Any key of a state key ring (a stack's own ``pulumi-state-<stack>`` or the shared ``pulumi-state``), or the ring
itself, in any location."""


def project_part(project: str) -> str:
    """A domain-scoped project (``example.com:p``) names its buckets with its last part."""
    return project.split(":")[-1]


def state_bucket(project: str, stack: str) -> str:
    """``<gcp:project>-pulumi-state-<stack>``: the bucket a stack that records no home gets (not checked to be a
    bucket name: ``tools.state_home.default_bucket`` refuses one that is not)."""
    return f"{project_part(project)}{STATE_SUFFIX}-{stack}"


def ring_id(stack: str) -> str:
    """The id of the stack's own key ring, ``pulumi-state-<stack>``."""
    return f"{SHARED_RING}-{stack}"


def state_ring(project: str, stack: str) -> str:
    return f"projects/{project}/locations/{KEY_LOCATION}/keyRings/{ring_id(stack)}"


def state_key(project: str, stack: str) -> str:
    """The stack's own secrets key, in its own ring (not checked to be a ring id: ``tools.state_home.own_key``
    refuses one that is not)."""
    return f"{state_ring(project, stack)}/cryptoKeys/{STATE_KEY_ID}"


def shared_ring_key(project: str, stack: str) -> str:
    """The key earlier versions gave the stack in the shared ring, ``pulumi-state/cryptoKeys/tpu-rl-<stack>``."""
    return f"projects/{project}/locations/{KEY_LOCATION}/keyRings/{SHARED_RING}/cryptoKeys/{PROJECT}-{stack}"


def ring_of(key: str) -> str:
    """The key ring of a key's resource name: its first six parts, ``projects/P/locations/L/keyRings/R`` (whatever
    the ring is named, ``cryptoKeys`` too)."""
    return "/".join(key.split("/")[:6])


def in_shared_ring(key: str) -> bool:
    """Whether a key (a resource name) is in the ring every stack's key shared in earlier versions."""
    return ring_of(key).endswith(f"/keyRings/{SHARED_RING}") and "/cryptoKeys/" in key


def is_legacy_key(key: str) -> bool:
    """Whether a key is the one earlier versions gave every stack of a project (any project)."""
    return key.endswith(f"/keyRings/{SHARED_RING}/cryptoKeys/{LEGACY_KEY}")


def legacy_bucket(project: str) -> str:
    return f"{project_part(project)}{LEGACY_SUFFIX}"


def backend_bucket(url: str) -> str:
    """The bucket of a ``gs://`` state home ("" otherwise)."""
    return urlparse(url).netloc if url.startswith("gs://") else ""


def is_state_bucket(bucket: str, recorded: str) -> bool:
    """Whether ``bucket`` (a name, or ``gs://`` / ``projects/_/buckets/`` form) is a state bucket: named as every
    stack's is, or the ``recorded`` home's (``tpu-rl:stateBackend``, "" when none is)."""
    name = bucket.removeprefix("gs://").removeprefix("projects/_/buckets/").partition("/")[0]
    home = backend_bucket(recorded)  # "" for a home in no bucket (Pulumi Cloud, a file): no name is it
    return bool(STATE_BUCKET.fullmatch(name)) or (bool(home) and name == home)


def key_name(key: str) -> str:
    """A Cloud KMS key's resource name, of a ``gcpkms://`` secrets provider URL (its query dropped) or as it is."""
    return key.removeprefix("gcpkms://").partition("?")[0].strip("/")


def is_state_key(key: str) -> bool:
    """Whether a Cloud KMS key (or ring) is of the state's key ring."""
    return bool(STATE_KEY.fullmatch(key_name(key)))
