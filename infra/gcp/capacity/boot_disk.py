"""cpu-np's secondary boot disk image (``tpu-rl:cpuPool.bootDiskImage``): GKE makes each new cpu-np node a disk from
the image of ``gcp:project`` (``infra.gcp.gke_spec.secondary_boot_disks``), so an image that is missing or that
Compute Engine will not make disks from fails only at cpu-np's create, after the network, the bucket, the identities
and the cluster exist. Before anything is created one ``images.get`` (``compute_v1.ImagesClient.get``, bounded like
every read) says whether it can serve:

- it exists (otherwise: build it, docs/images-and-caches.md "Image pulls", or fix the name);
- its ``status`` is READY (PENDING: the builder has not finished; FAILED, DELETING: it never will be);
- its deprecation state (``deprecated.state``), https://cloud.google.com/compute/docs/images/deprecate-custom,
  "Deprecation states": OBSOLETE, "the image is marked obsolete and is no longer available for use. An error message
  is returned if you try to use this image in a request", and DELETED, "An error message is returned if you try to
  use a deleted image", stop `up`; DEPRECATED, "the image is marked deprecated but can still be used to create a VM",
  is a warning: the page says so of a VM, not of the disk GKE makes from it.

Its ``diskSizeGb`` sizes each node's secondary disk ("The size of the secondary boot disk is determined by the disk
image size", of the node's boot disk type: "The secondary boot disk type is the same as the node boot disk",
https://cloud.google.com/kubernetes-engine/docs/how-to/data-container-image-preloading), which the quota check counts
(``infra.gcp.capacity.needs``). Without the setting nothing is read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core import deadline
from core.settings import Settings
from infra.gcp.capacity.findings import Finding
from infra.gcp.capacity.reads import (
    Clients,
    ReadFailedError,
    as_count,
    as_text,
    bounded_read,
    require_field,
    require_name,
)

KEY = "tpu-rl:cpuPool.bootDiskImage"
SOURCE = "Compute Engine (images.get)"
BUILD = 'build it (docs/images-and-caches.md "Image pulls": gke-disk-image-builder)'
NOT_COUNTED = "; its secondary boot disks were not counted against the disk quota"
DEPRECATION = "https://cloud.google.com/compute/docs/images/deprecate-custom"


@dataclass(frozen=True)
class BootDiskImage:
    """A disk image as ``images.get`` answers it, the fields cpu-np's secondary boot disk needs."""

    status: str
    """READY | PENDING | FAILED | DELETING (Compute's ``Image.Status``)."""
    deprecation: str
    """``deprecated.state``: ACTIVE | DEPRECATED | OBSOLETE | DELETED; "" when the image is not deprecated."""
    disk_size_gb: int | None
    """``diskSizeGb``: each node's secondary disk; None when the reply gives none."""


def boot_disk_findings(project: str, name: str, found: BootDiskImage | None) -> list[Finding]:
    """Whether GKE can make cpu-np's secondary boot disks from image ``name`` of ``project`` (None: it does not
    exist) (pure)."""
    image = f"{KEY}: image {name} of project {project}"
    if found is None:
        return [Finding("problem", f"{image} does not exist; {BUILD} or fix the name")]
    findings: list[Finding] = []
    if found.status == "PENDING":
        findings.append(
            Finding("problem", f"{image} is PENDING, not READY: wait for the builder to finish, then run `up` again")
        )
    elif found.status != "READY":
        findings.append(Finding("problem", f"{image} is {found.status}, not READY; {BUILD} again or set another image"))
    if found.deprecation in ("OBSOLETE", "DELETED"):
        findings.append(
            Finding(
                "problem",
                f"{image} is {found.deprecation}, and Compute Engine returns an error for a request that uses it "
                f"({DEPRECATION}); {BUILD} again or set another image",
            )
        )
    elif found.deprecation == "DEPRECATED":
        findings.append(
            Finding(
                "unknown",
                f'{image} is DEPRECATED, which "can still be used to create a VM" ({DEPRECATION}); whether GKE '
                f"still makes cpu-np's secondary boot disks from it, the page does not say; {BUILD} again or set "
                "another image",
            )
        )
    return findings


def image_reply(message: Any, name: str) -> BootDiskImage:
    """``compute_v1.Image`` ``name`` as the check reads it."""
    require_name(message, name)
    require_field(message, "status", "status")
    status = as_text(message.status, "status", 20)
    if status == "READY":
        require_field(message, "disk_size_gb", "diskSizeGb")  # a READY image has its size (one not yet may not)
    deprecation = ""
    if "deprecated" in message and "state" in message.deprecated:
        deprecation = as_text(message.deprecated.state, "deprecated.state", 20)
    return BootDiskImage(
        status=status,
        deprecation=deprecation,
        disk_size_gb=as_count(message.disk_size_gb, "diskSizeGb") if "disk_size_gb" in message else None,
    )


def check_boot_disk_image(
    settings: Settings, clients: Clients, budget: deadline.Budget
) -> tuple[list[Finding], int | None]:
    """cpu-np's secondary boot disk image, read once (nothing without ``tpu-rl:cpuPool.bootDiskImage``): the
    findings, and the GB of each node's secondary disk when the image was read (None: nothing to count)."""
    from google.api_core import exceptions as api

    name = settings.cpu_pool.boot_disk_image
    if not name:
        return [], None
    try:
        found = bounded_read(
            f"reading image {name} ({KEY})",
            SOURCE,
            lambda options: image_reply(clients.images.get(project=settings.project, image=name, **options), name),
            clients,
            budget,
        )
    except api.NotFound:
        return boot_disk_findings(settings.project, name, None), None
    except ReadFailedError as err:
        return [Finding("unknown", f"{err}; cpu-np's secondary boot disk image was not checked{NOT_COUNTED}")], None
    return boot_disk_findings(settings.project, name, found), found.disk_size_gb
