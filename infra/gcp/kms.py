"""The Cloud KMS key GKE encrypts Secrets with (``tpu-rl:gke.secretsEncryptionKey``), and the GKE service
agent's right to use it.

Application-layer Secrets encryption (CIS GKE 5.3.1) wraps every Secret, the Hugging Face token included,
with a key in Cloud KMS before etcd stores it. GKE requires the key in the cluster's location and needs
``roles/cloudkms.cryptoKeyEncrypterDecrypter`` for its service agent
``service-PROJECT_NUMBER@container-engine-robot.iam.gserviceaccount.com`` on that key before the cluster is
created or updated with it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.options import child_options

KEY_ROLE = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
ROTATION_PERIOD = "7776000s"
"""90 days: Cloud KMS's recommended rotation for symmetric keys."""


def gke_service_agent(project_number: str) -> str:
    """The GKE service agent of a project, as an IAM member."""
    return f"serviceAccount:service-{project_number}@container-engine-robot.iam.gserviceaccount.com"


def key_name(project: str, region: str, ring: str, key: str) -> str:
    """A Cloud KMS key's resource name (what ``database_encryption.key_name`` takes)."""
    return f"projects/{project}/locations/{region}/keyRings/{ring}/cryptoKeys/{key}"


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


class SecretsKey(pulumi.ComponentResource):
    """The key (created, or given) and the GKE service agent's grant on it; ``name`` is what the cluster takes."""

    name: str
    grant: gcp.kms.CryptoKeyIAMMember

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
            # A key ring cannot be deleted in Cloud KMS: `destroy` drops it from the state and leaves it.
            ring = gcp.kms.KeyRing(
                "key-ring", name=args.ring_name, project=args.project, location=args.region, opts=child
            )
            # ABANDON: `destroy` (or removing the key from the config) leaves the key and its versions in
            # Cloud KMS instead of destroying every version, which would make the Secrets of a cluster still
            # encrypted with it unreadable; a later stack names it (README "Cluster hardening"). No `protect`:
            # the delete is harmless, and a protected key would fail the `up` that removes it.
            crypto_key = gcp.kms.CryptoKey(
                "secrets-key",
                name=args.key_id,
                key_ring=ring.id,
                purpose="ENCRYPT_DECRYPT",
                rotation_period=ROTATION_PERIOD,
                deletion_policy="ABANDON",
                labels=args.labels,
                opts=child,
            )
            after.append(crypto_key)
            self.name = key_name(args.project, args.region, args.ring_name, args.key_id)
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
        self.register_outputs({"name": self.name, "member": self.grant.member, "agent": agent.id})
