"""Compute Engine machine families: size of predefined shapes and the boot disk each family takes.

Sources: Compute Engine "Machine families resource and comparison guide" and "Hyperdisk"
(supported machine series), as of 2026-11; the quota metrics each family draws on (``CPU_QUOTAS``): "Allocation
quotas", with what could and could not be read of it. N4, N4D, C4, C4A, C4D, M4 and X4 take Hyperdisk only:
``pd-balanced`` boot disks and PD-backed storage classes are rejected there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PD_FAMILIES = ("e2", "n1", "n2", "n2d", "c2", "c2d", "c3", "c3d", "t2d", "t2a", "m1", "m2", "m3")
HYPERDISK_FAMILIES = ("n4", "n4d", "c4", "c4a", "c4d", "m4", "x4")

# GiB of memory per vCPU by family and class (standard, highmem, highcpu).
_DEFAULT_RATIOS = {"standard": 4.0, "highmem": 8.0, "highcpu": 1.0}
_RATIOS = {
    "n1": {"standard": 3.75, "highmem": 6.5, "highcpu": 0.9},
    "c4": {"standard": 3.75, "highmem": 7.75, "highcpu": 2.0},
    "c4d": {"standard": 3.875, "highmem": 7.75, "highcpu": 1.875},
    **{
        family: {"standard": 4.0, "highmem": 8.0, "highcpu": 2.0} for family in ("c2d", "c3", "c3d", "c4a", "n4", "n4d")
    },
}
_SHAPE = re.compile(r"(?P<family>[a-z][a-z0-9]*)-(?P<cls>standard|highmem|highcpu)-(?P<vcpus>[0-9]+)")


@dataclass(frozen=True)
class MachineShape:
    """Size of one machine type."""

    name: str
    vcpus: int
    memory_gib: float


def machine_family(name: str) -> str:
    """``n2-standard-64`` -> ``n2``."""
    return name.split("-", 1)[0]


def machine_shape(name: str) -> MachineShape | None:
    """Shape of a predefined machine type such as ``n2-standard-64``, or None if unknown."""
    match = _SHAPE.fullmatch(name)
    if not match:
        return None
    vcpus = int(match["vcpus"])
    ratio = _RATIOS.get(match["family"], _DEFAULT_RATIOS)[match["cls"]]
    return MachineShape(name, vcpus, vcpus * ratio)


@dataclass(frozen=True)
class CpuQuota:
    """The regional Compute Engine quota metrics one machine family's vCPUs count against."""

    metrics: tuple[str, ...]
    """What the family draws on for sure: a pool short of one stops `up` (a capacity-check problem)."""
    maybe: tuple[str, ...] = ()
    """What the sources read here do not settle: a pool short of one is a warning, never a stop."""


# The rule, as data. Source: Compute Engine "Allocation quotas", CPU quota section,
# https://docs.cloud.google.com/compute/resource-usage#cpu_quota (formerly cloud.google.com/compute/quotas).
# That section's own text could not be read from any stored copy this project's research had (every copy of
# the page stops before it; docs/first-run.md "Quota rules"). What could be read instead:
# - the Compute API's ``Quota.Metric`` enum (Google.Cloud.Compute.V1 ``Quota.Types.Metric``; googleapis
#   compute v1 ``Quota``): ``CPUS`` "Guest CPUs", and a metric per machine series (``E2_CPUS``, ``N2_CPUS``,
#   ``N2D_CPUS``, ``C2_CPUS``, ``C2D_CPUS``, ``C3_CPUS``, ``M1_CPUS``, ``M2_CPUS``, ``T2D_CPUS``, ...);
# - quota errors naming the series' metric for N2 and N4 VMs ("Quota 'N2_CPUS' exceeded. Limit: 24.0 in region
#   us-east1"; "Quota 'N4_CPUS' exceeded");
# - notes in two public repositories (not named by the search index that found them) by people who read the
#   section: "The Compute Engine allocation quota documentation
#   (https://docs.cloud.google.com/compute/resource-usage#cpu_quota) ... explicitly maps E2 to CPUS"; "The
#   documented E2 CPU quota pool is CPUS, shared with N1"; "E2 and N1 both consume the regional CPUS shared
#   pool"; one observes "E2_CPUS ... limit 24 and usage 0 even with E2 VMs running".
# So: E2 and N1 draw on ``CPUS`` (and not on ``E2_CPUS``, whose usage stays 0 for E2 VMs: it is not checked);
# every other series draws on its own ``<SERIES>_CPUS``. Whether those also count against ``CPUS`` is not
# settled by anything readable here, so ``CPUS`` is a ``maybe`` for them: the check never stops a project
# on a rule it cannot cite (the reading that never stops a valid project), and still warns.
_OWN_METRIC = ("n2", "n2d", "c2", "c2d", "c3", "c3d", "t2d", "t2a", "m1", "m2", "m3", "n4", "n4d", "c4", "c4a", "c4d")
CPU_QUOTAS: dict[str, CpuQuota] = {
    "e2": CpuQuota(("CPUS",)),
    "n1": CpuQuota(("CPUS",)),
    **{family: CpuQuota((f"{family.upper()}_CPUS",), maybe=("CPUS",)) for family in _OWN_METRIC},
    # M4 and X4 VMs: their series' metric by the same naming; a region that does not list it makes the check
    # say so (a warning), as for any metric it does not list.
    "m4": CpuQuota(("M4_CPUS",), maybe=("CPUS",)),
    "x4": CpuQuota(("X4_CPUS",), maybe=("CPUS",)),
}
"""Machine family -> the regional quota metrics its vCPUs count against (every family in ``PD_FAMILIES`` and
``HYPERDISK_FAMILIES``)."""


def cpu_quota(name: str) -> CpuQuota | None:
    """The quota rule of a machine type's family, or None for a family the table does not know."""
    return CPU_QUOTAS.get(machine_family(name))


def boot_disk_type(name: str) -> str | None:
    """The balanced boot disk this machine's family takes, or None for an unknown family."""
    family = machine_family(name)
    if family in HYPERDISK_FAMILIES:
        return "hyperdisk-balanced"
    if family in PD_FAMILIES:
        return "pd-balanced"
    return None


# The regional quota metric each boot disk type's gigabytes count against. Sources (the "Allocation quotas" page's
# disk section could not be read either, see above; these rest on what Compute Engine itself answers):
# - ``pd-standard``: ``DISKS_TOTAL_GB`` (kubeflow/kubeflow#2401: GKE nodes' 100 GB pd-standard boot disks, "Quota
#   'DISKS_TOTAL_GB' exceeded. Limit: 16384.0 in region us-east1");
# - ``pd-balanced`` and ``pd-ssd``: ``SSD_TOTAL_GB`` (terraform-google-kubernetes-engine#1795: a cluster's default
#   pool of 100 GB pd-balanced boot disks, 'Insufficient regional quota to satisfy request: resource
#   "SSD_TOTAL_GB"', and gone once its disk_type was pd-standard; kubeflow/pipelines#10907, the same for GKE);
# - ``hyperdisk-balanced``: ``HDB_TOTAL_GB`` (a metric of the Compute API's ``Quota.Metric`` enum,
#   google-cloud-compute 1.48 ``compute_v1.Quota.Metric.HDB_TOTAL_GB``; "Quota 'HDB_TOTAL_GB' exceeded. Limit:
#   40960.0 in region us-central1" for GKE TPU nodes, whose boot disks are hyperdisk-balanced).
# Hyperdisk's provisioned IOPS and throughput have quotas of their own (``HDB_TOTAL_IOPS``,
# ``HDB_TOTAL_THROUGHPUT``, per zone in Cloud Quotas): not checked (docs/first-run.md "Quota rules").
DISK_QUOTAS: dict[str, str] = {
    "pd-standard": "DISKS_TOTAL_GB",
    "pd-balanced": "SSD_TOTAL_GB",
    "pd-ssd": "SSD_TOTAL_GB",
    "hyperdisk-balanced": "HDB_TOTAL_GB",
}
"""Disk type -> the regional quota metric its GB count against (every boot disk type the pools and slices take)."""


def disk_quota(disk_type: str) -> str | None:
    """The regional quota metric of a disk type's GB, or None for a type the table does not know."""
    return DISK_QUOTAS.get(disk_type)
