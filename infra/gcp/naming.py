"""Deterministic names of every GCP object, derived from config (plain functions)."""

from __future__ import annotations

from dataclasses import dataclass

from core.names import step_account, step_ksa
from core.settings import Settings
from infra.gcp.access import step_identities


@dataclass(frozen=True)
class Names:
    """Names of the platform's GCP objects for one stack."""

    network: str
    subnet: str
    router: str
    nat: str
    firewall_internal: str
    key_ring: str
    """The key ring of ``tpu-rl:gke.secretsEncryptionKey: create``."""
    crypto_key: str
    tpu_pools: tuple[str, ...]
    service_accounts: dict[str, str]
    """Role -> account id (6-30 characters): the node pools' (system, cpu, tpu) and each CPU step's own
    (convert, export and publish in every stack, a ``when-run`` step's where it runs: ``infra.gcp.access``)."""
    ksas: dict[str, str]
    """CPU step -> its pods' Kubernetes service account, bound to the step's own Google account and named as it
    (``core.names.step_ksa``: a Workload Identity principal no other stack of the project has)."""


def names_for(settings: Settings) -> Names:
    """All names derive from clusterName (at most 20 characters, so every id fits its limit)."""
    c = settings.cluster_name
    slice_prefix = f"tpu-{settings.tpu.version}-{settings.slice.topology}"
    steps = step_identities(settings.workflow.steps)
    return Names(
        network=f"{c}-net",
        subnet=f"{c}-sub",
        router=f"{c}-router",
        nat=f"{c}-nat",
        firewall_internal=f"{c}-internal",
        key_ring=f"{c}-keys",
        crypto_key="gke-secrets",
        tpu_pools=tuple(f"{slice_prefix}-{i}" for i in range(settings.tpu.slices)),
        service_accounts={
            "system": f"{c}-sys-np",
            "cpu": f"{c}-cpu-np",
            "tpu": f"{c}-tpu-np",
            **{step: step_account(c, step) for step in steps},
        },
        ksas={step: step_ksa(c, step) for step in steps},
    )


def key_ring_id(project: str, region: str, ring: str) -> str:
    """A Cloud KMS key ring's resource name, which is also the provider's id of a ``gcp.kms.KeyRing``
    (magic-modules ``mmv1/products/kms/KeyRing.yaml``: ``id_format: projects/{{project}}/locations/{{location}}/
    keyRings/{{name}}``)."""
    return f"projects/{project}/locations/{region}/keyRings/{ring}"


def crypto_key_id(project: str, region: str, ring: str, key: str) -> str:
    """A Cloud KMS key's resource name (what ``database_encryption.key_name`` takes), which is also the provider's
    id of a ``gcp.kms.CryptoKey`` whose ``key_ring`` is the ring's id (``CryptoKey.yaml``: ``id_format:
    '{{key_ring}}/cryptoKeys/{{name}}'``)."""
    return f"{key_ring_id(project, region, ring)}/cryptoKeys/{key}"
