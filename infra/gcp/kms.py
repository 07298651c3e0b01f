"""The Cloud KMS key GKE encrypts Secrets with (``tpu-rl:gke.secretsEncryptionKey``), and the GKE service
agent's right to use it.

Application-layer Secrets encryption (CIS GKE 5.3.1) wraps every Secret, the Hugging Face token included,
with a key in Cloud KMS before etcd stores it. GKE requires the key in the cluster's location and needs
``roles/cloudkms.cryptoKeyEncrypterDecrypter`` for its service agent
``service-PROJECT_NUMBER@container-engine-robot.iam.gserviceaccount.com`` on that key before the cluster is
created or updated with it.

The grant is not in effect when its create returns: "access changes ... are eventually consistent", a policy
change takes "Typically 2 minutes, potentially 7 minutes or longer"
(https://cloud.google.com/iam/docs/access-change-propagation), and the provider does not retry a cluster
create that fails on it (google-beta ``resourceContainerClusterCreate``: ``transport_tpg.Retry`` with the
default predicates only, none for a KMS or IAM permission error). So a new grant is followed by a wait
(``GrantPropagation``, the analogue of Terraform's ``time_sleep``), and the cluster depends on the wait.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_gcp as gcp
from pulumi import dynamic

from infra.gcp.naming import crypto_key_id, key_ring_id
from infra.options import child_options

KEY_ROLE = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
ROTATION_PERIOD = "7776000s"
"""90 days: Cloud KMS's recommended rotation for symmetric keys."""
PROPAGATION_SECONDS = 420.0
"""How long a new grant is given to take effect before the cluster is created: the 7 minutes IAM documents as
"potentially" (its "typically" is 2). It runs once per grant, while the network is created alongside."""
PROPAGATION_DOC = "https://cloud.google.com/iam/docs/access-change-propagation"


def gke_service_agent(project_number: str) -> str:
    """The GKE service agent of a project, as an IAM member."""
    return f"serviceAccount:service-{project_number}@container-engine-robot.iam.gserviceaccount.com"


def key_name(project: str, region: str, ring: str, key: str) -> str:
    """A Cloud KMS key's resource name (what ``database_encryption.key_name`` takes)."""
    return crypto_key_id(project, region, ring, key)


def wait_for_propagation(
    seconds: float,
    grant: str,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
    step: float = 15.0,
) -> str:
    """Wait ``seconds`` by ``clock`` (a sleep that wakes early, as on a signal, sleeps again; never past the bound
    by more than one ``step``), then return the one line that says why and what to do if it was not enough."""
    ends = clock() + max(0.0, seconds)
    while (left := ends - clock()) > 0:
        sleep(min(step, left))
    return (
        f"waited {seconds:g} s for the new grant {grant} to take effect (IAM: typically 2 minutes, potentially 7 "
        f"or longer, {PROPAGATION_DOC}); if the cluster create still fails on a Cloud KMS permission, run "
        "`pulumi up` again"
    )


class GrantPropagationProvider(dynamic.ResourceProvider):
    """Create waits (``wait_for_propagation``) and records that it did; nothing else is done to anything.

    A dynamic provider is pickled into the state by reference (dill, ``pulumi/dynamic/dynamic.py``
    ``serialize_provider``: this class is importable, so its module and name are stored, not its code), and the
    engine runs it in ``pulumi-resource-pulumi-python`` from the project directory, which imports it from there:
    keep ``infra.gcp.kms.GrantPropagationProvider`` importable under this name (the destroy of a stack that has the
    resource needs it too; ``tests/test_kms_wait.py`` pins it).
    """

    serialize_as_secret_always = False  # the pickle holds no secret: a module and a class name

    def create(self, props: dict[str, Any]) -> dynamic.CreateResult:
        line = wait_for_propagation(float(props["seconds"]), str(props["grant"]))
        print(line, file=sys.stderr, flush=True)  # the engine shows a provider's stderr as a message
        return dynamic.CreateResult(str(props["grant"]), {**props, "note": line})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> dynamic.DiffResult:
        """A new grant (another key, member or role: another id) waits again; nothing else does."""
        changed = olds.get("grant") != news.get("grant")
        return dynamic.DiffResult(changes=changed, replaces=["grant"] if changed else [], delete_before_replace=False)


class GrantPropagation(dynamic.Resource, module="kms", name="GrantPropagation"):
    """The wait after a new grant (``GrantPropagationProvider``): created once per grant, so only the `up` that
    makes the grant waits; every later `up` finds it done."""

    def __init__(
        self, name: str, grant: pulumi.Input[str], seconds: float, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__(GrantPropagationProvider(), name, {"grant": grant, "seconds": seconds}, opts)


@dataclass(frozen=True)
class SecretsKeyArgs:
    """What the key and its grant are built from."""

    project: str
    region: str
    """The cluster's location: GKE accepts only a key there."""
    key: str
    """``create``, or the name of an existing key (``projects/P/locations/R/keyRings/K/cryptoKeys/C``)."""
    ring_name: str
    """The key ring the stack creates with ``create`` (``Names.key_ring``)."""
    key_id: str
    """The key the stack creates in that ring (``Names.crypto_key``)."""
    labels: dict[str, str]
    adopt: frozenset[str] = field(default_factory=frozenset)
    """Ids of a ring and key of these names that exist already (an earlier stack's, left by its destroy): the
    capacity check found them (``infra.gcp.capacity``, ``Finding.reuse``), and they are imported, not created."""


class SecretsKey(pulumi.ComponentResource):
    """The key (created, or given) and the GKE service agent's grant on it; ``name`` is what the cluster takes,
    ``ready`` what it waits for."""

    name: str
    grant: gcp.kms.CryptoKeyIAMMember
    ready: GrantPropagation

    def __init__(self, name: str, args: SecretsKeyArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tpu-rl:gcp:SecretsKey", name, None, opts)
        child = child_options(self, opts)
        # GKE's service agent may not exist yet right after the container API is enabled on a new project
        # (IAM then answers 400 "service account ... does not exist", which the provider does not retry):
        # generating the service identity first creates it. Its email is not always returned, so the member
        # is built from the project number.
        agent = gcp.projects.ServiceIdentity(
            "gke-service-agent", project=args.project, service="container.googleapis.com", opts=child
        )
        after: list[pulumi.Resource] = [agent]
        if args.key == "create":
            ring_id = key_ring_id(args.project, args.region, args.ring_name)
            self.name = key_name(args.project, args.region, args.ring_name, args.key_id)
            # A key ring cannot be deleted in Cloud KMS: `destroy` drops it from the state and leaves it. One that
            # an earlier destroy left is imported (``import_``: the engine reads it and then updates it to these
            # inputs, pulumi >= 3.174); its id is what the provider gives a ring it creates, so the import is a
            # no-op on every later `up` (step_generator.go: an import only when the old id differs).
            ring = gcp.kms.KeyRing(
                "key-ring",
                name=args.ring_name,
                project=args.project,
                location=args.region,
                opts=child_options(self, opts, import_=ring_id if ring_id in args.adopt else None),
            )
            # ABANDON: `destroy` (or removing the key from the config) leaves the key and its versions in
            # Cloud KMS instead of destroying every version, which would make the Secrets of a cluster still
            # encrypted with it unreadable; a later stack of the same names imports it (above). No `protect`:
            # the delete is harmless, and a protected key would fail the `up` that removes it.
            crypto_key = gcp.kms.CryptoKey(
                "secrets-key",
                name=args.key_id,
                key_ring=ring.id,
                purpose="ENCRYPT_DECRYPT",
                rotation_period=ROTATION_PERIOD,
                deletion_policy="ABANDON",
                labels=args.labels,
                opts=child_options(self, opts, import_=self.name if self.name in args.adopt else None),
            )
            after.append(crypto_key)
        else:
            self.name = args.key
        number = gcp.organizations.get_project_output(project_id=args.project).number
        self.grant = gcp.kms.CryptoKeyIAMMember(
            "gke-agent-key-user",
            crypto_key_id=self.name,
            role=KEY_ROLE,
            member=number.apply(gke_service_agent),
            opts=child_options(self, opts, depends_on=after),
        )
        # The grant's id names the key, the role and the member: a new grant is a new id, and waits again.
        self.ready = GrantPropagation(
            "gke-agent-key-propagation", self.grant.id, PROPAGATION_SECONDS, opts=child_options(self, opts)
        )
        self.register_outputs({"name": self.name, "member": self.grant.member, "agent": agent.id})
