"""The cluster's rules: the TPU slice and how its capacity is obtained (a reservation, flex-start's zones and GKE
version), the GKE settings (the version prefix's minimum, a hold of upgrades, the Secrets key) and the CPU node pools.
"""

from __future__ import annotations

import datetime
import re

from core.config.fields import project_key as _k
from core.config.values import UNREADABLE, Problems, UnreadableError, Values, error
from core.machines import HYPERDISK_FAMILIES, PD_FAMILIES, boot_disk_type, machine_family
from core.settings import ExistingCluster, GkeSettings, PoolSettings, TpuSettings
from core.tpu import CATALOGUE, FLEX_START_MIN_GKE, Capacity, SliceShape, TpuVersionName, resolve_slice

MAX_HOLD_DAYS = 30
"""GKE's longest ``NO_UPGRADES`` maintenance exclusion."""
KUEUE_KUBERNETES = ("1.33", "1.35")
"""The oldest and the newest Kubernetes the Kueue releases tpu-rl installs are tested on: Kueue v0.17.1's and
v0.17.8's ``Makefile-test.mk`` run their end-to-end tests on ``E2E_K8S_VERSIONS ?= 1.33.7 1.34.3 1.35.0``."""
MAINTENANCE_LABEL_MIN_GKE = "1.31.1-gke.2008000"
"""The oldest GKE that labels a TPU node with its scheduled maintenance, ``cloud.google.com/scheduled-maintenance-time``
(GKE, "Manage GKE node disruption for GPUs and TPUs"), which tells a run's operator the time beforehand."""


def read_hold(key: str, value: str) -> tuple[str, str] | None:
    """``START/END`` as two real UTC dates, END after START and at most GKE's 30 days later."""
    if not value:
        return None
    start, end = value.split("/")
    try:
        first, last = datetime.date.fromisoformat(start), datetime.date.fromisoformat(end)
    except ValueError:
        raise error(key, value, "START and END must be real dates YYYY-MM-DD") from None
    if not first < last <= first + datetime.timedelta(days=MAX_HOLD_DAYS):
        raise error(
            key, value, f"END must be after START and at most {MAX_HOLD_DAYS} days later (GKE's limit for NO_UPGRADES)"
        )
    return start, end


def _secrets_key(value: str, region: str) -> str | None:
    """The key must live where the cluster does: GKE refuses a key of another location."""
    if not value:
        return None
    if value != "create":
        location = value.split("/")[3]
        if location != region:
            raise error(
                _k("gke.secretsEncryptionKey"),
                value,
                f"the key must be in the cluster's location {region} (gcp:region), not {location}",
            )
    return value


def gke_settings(v: Values) -> GkeSettings:
    """``tpu-rl:gke``: the channel, version prefix, standing exclusion, window, hold of upgrades and Secrets key."""
    problems = Problems()
    exclusion = v[_k("gke.maintenanceExclusion")]
    hold = problems.run(read_hold, _k("gke.holdUpgrades"), v[_k("gke.holdUpgrades")])
    key = problems.run(_secrets_key, v[_k("gke.secretsEncryptionKey")], v["gcp:region"])
    problems.check()
    return GkeSettings(
        release_channel=v[_k("gke.releaseChannel")],
        version_prefix=v[_k("gke.versionPrefix")] or None,
        maintenance_exclusion=None if exclusion == "none" else exclusion,
        maintenance_window=v[_k("gke.maintenanceWindow")],
        hold_upgrades=hold,
        secrets_key=key,
    )


def tpu_settings(v: Values) -> tuple[TpuSettings, SliceShape]:
    """``tpu-rl:tpu``: the slice (version, machine type, topology, count) and how its capacity is obtained."""
    problems = Problems()
    machine_and_topology = problems.run(_machine_topology, v)
    reservation = problems.run(_reservation, v)
    problems.check()
    if machine_and_topology is UNREADABLE or reservation is UNREADABLE:
        raise UnreadableError("tpu")
    version, machine_name, topology = machine_and_topology
    settings = TpuSettings(version, machine_name, topology, v[_k("tpu.slices")], _capacity(v), reservation)
    return settings, resolve_slice(version, machine_name, topology)


def _machine_topology(v: Values) -> tuple[TpuVersionName, str, str]:
    version = CATALOGUE[v[_k("tpu.version")]]
    machine_name = v[_k("tpu.machineType")] or version.default_machine_type
    machine = version.machine(machine_name)
    if machine is None:
        raise error(
            _k("tpu.machineType"),
            machine_name,
            f"TPU {version.name} machine types are {', '.join(m.name for m in version.machine_types)}",
        )
    topology = v[_k("tpu.topology")]
    if machine.multi_host_capable:
        topology = topology or machine.default_topology
        if topology not in machine.multi_host_topologies:
            hint = (
                f"{topology} is a single-host slice and GKE rejects a topology on single-host pools; "
                if topology == machine.single_host_topology
                else ""
            )
            raise error(
                _k("tpu.topology"),
                topology,
                f"{hint}valid topologies of {machine.name} are {', '.join(machine.multi_host_topologies)}",
            )
    else:
        if topology not in (None, machine.single_host_topology):
            raise error(
                _k("tpu.topology"),
                topology,
                f"{machine.name} is single-host: it forms only {machine.single_host_topology}; omit the topology",
            )
        topology = machine.single_host_topology
    return version.name, machine_name, topology


def _capacity(v: Values) -> Capacity:
    """The capacity mode, parsed into its member (the schema's ``OneOf`` has checked it is one)."""
    return Capacity(v[_k("tpu.capacity")])


def _reservation(v: Values) -> str | None:
    capacity = _capacity(v)
    reservation = v[_k("tpu.reservation")]
    if capacity == Capacity.RESERVATION and reservation is None:
        raise error(
            _k("tpu.reservation"), None, "required with capacity reservation (the name of a specific reservation)"
        )
    if capacity != Capacity.RESERVATION and reservation is not None:
        raise error(_k("tpu.reservation"), reservation, f"only allowed with capacity reservation, not {capacity}")
    if reservation is not None and not reservation.startswith("projects/"):
        reservation = f"projects/{v['gcp:project']}/reservations/{reservation}"
    return reservation


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"[0-9]+", text))


def check_flex_start_zone(tpu: TpuSettings, v: Values) -> None:
    """Flex-start capacity: a zone that offers it for the version (its GKE version: ``check_gke_version``)."""
    if tpu.capacity != Capacity.FLEX_START:
        return
    zone = v["gcp:zone"]
    zones = CATALOGUE[tpu.version].flex_start_zones
    if zones is not None and zone not in zones:
        raise error(
            "gcp:zone",
            zone,
            f"TPU {tpu.version} flex-start is offered in {', '.join(zones)} only "
            "(GKE docs, 2026-11); choose one of them or another capacity mode",
        )


def _below(prefix: str, minimum: str) -> bool:
    """Whether every version ``prefix`` pins is older than ``minimum`` (compared as far as the prefix goes: "1.33."
    pins the channel's newest 1.33, which is past 1.33.0-gke.1712000)."""
    pinned = _version_tuple(prefix)
    return pinned < _version_tuple(minimum)[: len(pinned)]


def _minor(version: str) -> str:
    """``1.31`` of ``1.31.1-gke.2008000``."""
    return ".".join(version.split(".")[:2])


def check_gke_version(tpu: TpuSettings, v: Values, gke: GkeSettings) -> None:
    """A pinned version (``tpu-rl:gke.versionPrefix``) no older than what the stack relies on: flex-start's GKE
    (``FLEX_START_MIN_GKE``, with that capacity), the Kubernetes its Kueue is tested on (``KUEUE_KUBERNETES``, with
    ``tpu-rl:kueue.enabled``), and the GKE that labels a slice's nodes with their scheduled maintenance
    (``MAINTENANCE_LABEL_MIN_GKE``); a prefix below several is refused for the newest of them. An empty prefix takes
    the channel's default version."""
    prefix = gke.version_prefix
    if not prefix:
        return
    oldest, newest = KUEUE_KUBERNETES
    label, empty = MAINTENANCE_LABEL_MIN_GKE, "or leave it empty for the channel's default"
    needs = [
        (
            label,
            f'GKE labels a TPU node with its scheduled maintenance from {label} only: pin "{_minor(label)}." or '
            f"later, {empty}",
        ),
    ]
    if v[_k("kueue.enabled")]:
        kueue = f"the Kueue tpu-rl installs (tpu-rl:kueue.version) is tested on Kubernetes {oldest} to {newest}"
        needs.append((oldest, f'{kueue}: pin "{oldest}." or later (the prod example pins "{newest}."), {empty}'))
    if tpu.capacity == Capacity.FLEX_START:
        needs.append((FLEX_START_MIN_GKE, f"TPU flex-start needs GKE {FLEX_START_MIN_GKE} or later"))
    below = [need for need in needs if _below(prefix, need[0])]
    if below:
        raise error(_k("gke.versionPrefix"), prefix, max(below, key=lambda need: _version_tuple(need[0]))[1])


def pool_settings(v: Values, name: str) -> PoolSettings:
    """A CPU node pool (``tpu-rl:systemPool``, ``tpu-rl:cpuPool``): its size, and its boot disk by machine family."""
    problems = Problems()
    problems.run(_pool_size, v, name)
    disk = problems.run(_pool_disk, v, name)
    problems.check()
    return PoolSettings(
        v[_k(f"{name}.machineType")],
        v[_k(f"{name}.minNodes")],
        v[_k(f"{name}.maxNodes")],
        v[_k(f"{name}.diskSizeGb")],
        disk,
        v[_k(f"{name}.bootDiskImage")] if name == "cpuPool" else "",
    )


def _pool_size(v: Values, name: str) -> None:
    minimum, maximum = v[_k(f"{name}.minNodes")], v[_k(f"{name}.maxNodes")]
    if maximum < minimum:
        raise error(_k(f"{name}.maxNodes"), maximum, f"must be at least minNodes ({minimum})")


def _pool_disk(v: Values, name: str) -> str:
    machine = v[_k(f"{name}.machineType")]
    disk = boot_disk_type(machine)
    if disk is None:
        raise error(
            _k(f"{name}.machineType"),
            machine,
            f"unknown machine family {machine_family(machine)!r}: known families with PD boot disks are "
            f"{', '.join(PD_FAMILIES)}; with Hyperdisk only {', '.join(HYPERDISK_FAMILIES)}",
        )
    return disk


CREATED_ONLY = (
    "gke.secretsEncryptionKey",
    "gke.versionPrefix",
    "gke.holdUpgrades",
    "cpuPool.bootDiskImage",
    "images.mirror",
)
"""Keys that shape only what a stack creates around its own cluster (the Secrets key, the control plane's version, an
upgrade hold, the image cache's boot disk, the image mirrors): with an existing cluster they would change nothing, so
a value set there is refused rather than ignored."""


def existing_cluster(v: Values) -> ExistingCluster | None:
    """``tpu-rl:existingCluster``: the cluster the workflow runs on when the stack creates none (None: the stack's
    own). Every key of ``CREATED_ONLY`` set with it is one problem."""
    context = v[_k("existingCluster.kubeContext")]
    workload_identity = v[_k("existingCluster.workloadIdentity")]
    if not context:
        if workload_identity is not True:
            raise error(
                _k("existingCluster.workloadIdentity"),
                workload_identity,
                "only with tpu-rl:existingCluster.kubeContext (the stack's own cluster always has Workload Identity)",
            )
        return None
    problems = Problems()
    for key in CREATED_ONLY:
        value = v[_k(key)]
        if value:
            problems.add(
                error(
                    _k(key),
                    value,
                    "only for a cluster the stack creates: with tpu-rl:existingCluster.kubeContext it would change "
                    "nothing (unset it)",
                )
            )
    problems.check()
    return ExistingCluster(context, workload_identity)
