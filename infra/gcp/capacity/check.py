"""The capacity preflight's order: the permissions, the APIs, the shared Hub cache's bucket, then (with Compute Engine
enabled) the zone's offers, cpu-np's secondary boot disk image, what the stack holds, the reservation, the region's
quotas (cpu-np's secondary boot disks counted when the image was read), the project's quotas across all regions and
the TPU chips' limit, and the Secrets key."""

from __future__ import annotations

from core import deadline
from core.names import KMS_API, REQUIRED_APIS
from core.settings import Settings
from infra.client_errors import client_errors
from infra.gcp.capacity.apis import api_findings, check_permissions, read_api_states
from infra.gcp.capacity.boot_disk import KEY as BOOT_DISK_KEY
from infra.gcp.capacity.boot_disk import check_boot_disk_image
from infra.gcp.capacity.findings import Finding
from infra.gcp.capacity.hub_cache import check_hub_cache
from infra.gcp.capacity.keys import check_secrets_key
from infra.gcp.capacity.needs import needs, read_held
from infra.gcp.capacity.offers import check_offers
from infra.gcp.capacity.quotas import check_global_quotas, check_quotas, check_tpu_quota
from infra.gcp.capacity.reads import Clients, make_clients
from infra.gcp.capacity.reservations import check_reservation


def check_capacity(
    settings: Settings, clients: Clients | None = None, *, held_keys: str | None = None
) -> list[Finding]:
    """Every finding of the capacity preflight (bounded reads; never raises for a read it cannot make); ``held_keys``:
    the Cloud KMS keys the stack's state holds, as `make up` handed them over (``core.names.KEYS_IN_STATE``; None:
    unknown)."""
    budget = deadline.BUDGETS["compute"]
    try:
        clients = clients or make_clients()
    except client_errors() as err:  # no credentials: the check cannot run
        return [Finding("unknown", f"the capacity check could not start ({type(err).__name__}); nothing was checked")]
    try:
        return _check(settings, clients, budget, held_keys)
    finally:
        clients.close()


def _check(settings: Settings, clients: Clients, budget: deadline.Budget, held_keys: str | None) -> list[Finding]:
    findings: list[Finding] = check_permissions(settings, clients, budget)
    apis = REQUIRED_APIS + ((KMS_API,) if settings.gke.secrets_key else ())
    states, unread = read_api_states(settings.project, apis, clients, budget)
    if unread is not None and unread.level == "problem":
        return [*findings, unread]
    findings += [unread] if unread is not None else []
    # With the Cloud KMS API off in the project, no key ring of the stack's can be in use there (the stack
    # enables the API and never disables it): nothing to look for.
    kms = states is None or states.get(KMS_API) == "ENABLED"
    # Likewise no cluster of the project can use a key with the GKE API off.
    gke = states is None or states.get("container.googleapis.com") == "ENABLED"
    if states is not None:
        findings += api_findings(states, settings.project, apis)
    findings += check_hub_cache(settings, clients, budget)
    if states is not None and states.get("compute.googleapis.com") != "ENABLED":
        unread_image = (
            f", nor image {settings.cpu_pool.boot_disk_image} ({BOOT_DISK_KEY})"
            if settings.cpu_pool.boot_disk_image
            else ""
        )
        findings.append(
            Finding(
                "unknown",
                "the Compute Engine API is not enabled yet: the zone's offers, reservation and quotas were not "
                f"checked{unread_image}",
            )
        )
        return findings + check_secrets_key(settings, clients, budget, kms, gke, held_keys)
    vcpus = check_offers(settings, clients, budget, findings)
    image_findings, secondary_gb = check_boot_disk_image(settings, clients, budget)
    findings += image_findings
    need = needs(settings, vcpus, secondary_gb)
    ours = read_held(settings, need, clients, budget, findings)
    findings += check_reservation(settings, need, ours, clients, budget)
    findings += check_quotas(settings, need, ours, clients, budget)
    findings += check_global_quotas(settings, need, ours, clients, budget)
    if need.reservation is None:
        findings += check_tpu_quota(settings, need, clients, budget)
    return findings + check_secrets_key(settings, clients, budget, kms, gke, held_keys)
