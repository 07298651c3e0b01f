"""The accelerator catalogue: one entry per TPU generation, with everything the program knows about it (plain
data, no Pulumi).

An entry (``TpuVersion`` in ``CATALOGUE``) holds the GKE and Pathways names, the boot disk, the machine types and
the slices each forms (with the default one), the list prices per chip-hour, what an aggregate reservation of it
is called, the Cloud Quotas ids its chips draw on and where flex-start offers it. No code branches on a
generation's name: the config rules, the plan, the estimate, the capacity check and the messages read the entry
(docs/architecture.md "Catalogues"). A new generation is one entry here and its name in ``TpuVersionName`` (mypy
refuses a catalogue key the Literal does not list; ``tests/test_catalogue_entries.py`` checks the two are the
same set, and adds an entry in a test to prove the rest follows).

Sources: GKE "Plan TPUs in GKE" tables and xpk's ``system_characteristics.py`` (machine types, topologies);
each other field cites its own. A slice is ``topology`` chips; it needs ``chips / chips_per_vm`` VMs
("hosts"). A single-host slice is what one VM forms on its own; GKE rejects ``tpu_topology`` on such pools,
so they get no COMPACT placement policy.

The closed sets that go with it: the generations, a Literal mypy checks (``TpuVersionName``, the catalogue's keys,
which the configuration reads the string against), and the capacity modes, an enum (``Capacity``, its members in
order in ``CAPACITY_MODES``): a ``StrEnum``, so a mode compares equal to, formats as and serializes as the string
the config and the manifests hold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

TpuVersionName = Literal["v6e", "v5e", "v5p"]
"""The TPU generations the catalogue lists (``tpu-rl:tpu.version``): the keys of ``CATALOGUE``."""


class Capacity(StrEnum):
    """How TPU capacity is obtained (``tpu-rl:tpu.capacity``): a static slice on a specific reservation, or a pool
    autoscaled between 0 and one slice on spot, flex-start (Dynamic Workload Scheduler) or on-demand VMs. The
    config's value is parsed into a member once (``core.config.rules``); every module compares members."""

    RESERVATION = "reservation"
    SPOT = "spot"
    FLEX_START = "flex-start"
    ON_DEMAND = "on-demand"


CAPACITY_MODES: tuple[Capacity, ...] = tuple(Capacity)
"""Every mode, in the order the configuration reference and the messages list them."""
PREEMPTIBLE: tuple[Capacity, ...] = (Capacity.SPOT, Capacity.FLEX_START)
"""The capacity modes whose TPU VMs draw on preemptible quota."""


@dataclass(frozen=True)
class MachineType:
    """One TPU VM shape."""

    name: str
    chips_per_vm: int
    single_host_topology: str
    multi_host_topologies: tuple[str, ...] = ()
    default_topology: str = ""
    """The slice a multi-host type forms when ``tpu-rl:tpu.topology`` is not set ("" for a single-host type,
    which forms only ``single_host_topology``)."""

    @property
    def topologies(self) -> tuple[str, ...]:
        """Every topology this machine type can form, smallest first."""
        return (self.single_host_topology, *self.multi_host_topologies)

    @property
    def multi_host_capable(self) -> bool:
        return bool(self.multi_host_topologies)


@dataclass(frozen=True)
class TpuPrices:
    """USD per chip-hour, list prices (``core.estimate.PRICES_AS_OF`` says when they were recorded, and where
    from); spot and flex-start are fractions of on-demand (``core.estimate.SPOT_FACTOR``, ``FLEX_START_FACTOR``)."""

    on_demand: float
    reservation: float
    """The 1-year committed-use price (TPU reservations require a CUD)."""


ON_DEMAND_QUOTA = "TPUS-PER-TPU-FAMILY-per-project-region"
"""The Cloud Quotas id of on-demand TPU chips, one limit per ``tpu_family`` dimension."""


@dataclass(frozen=True)
class TpuQuota:
    """The Cloud Quotas quotas an autoscaled slice's chips draw on (``regions.get`` does not list them, so the
    capacity check reads ``cloudquotas_v1.CloudQuotasClient.get_quota_info``)."""

    family: str
    """The ``tpu_family`` dimension of ``on_demand`` (``CT6E``)."""
    preemptible: str
    """The quota of spot and flex-start chips (``PREEMPTIBLE-TPU-V6E-per-project-region``)."""
    on_demand: str = ON_DEMAND_QUOTA


@dataclass(frozen=True)
class TpuVersion:
    """One TPU generation: every fact the program knows about it (the catalogue entry)."""

    name: TpuVersionName
    gke_accelerator: str
    """The node label ``cloud.google.com/gke-tpu-accelerator`` (GKE)."""
    pathways_type: str
    """The Pathways resource manager's ``--instance_type`` prefix (``tpuv6e``)."""
    boot_disk_type: str
    default_machine_type: str
    machine_types: tuple[MachineType, ...]
    prices: TpuPrices
    reservation_family: str
    """What an aggregate TPU reservation of it is (``AllocationAggregateReservation.vmFamily``, the Compute API's
    ``VmFamily`` enum as google-cloud-compute's ``compute_v1`` lists it)."""
    quota: TpuQuota | None = None
    """The quotas its autoscaled chips draw on; None: not recorded here, so not checked."""
    flex_start_zones: tuple[str, ...] | None = None
    """The only zones flex-start offers it in; None: no restriction recorded."""
    accelerator_type: str = ""
    """Compute Engine's accelerator type of its chips in a zone (``acceleratorTypes.get``; the ``guestAccelerators``
    of its VMs, ``ct6e`` for v6e): a zone that does not list it is a capacity-check warning where it offers the
    slice's machine type, and a stop with that machine type where it offers neither. "": not checked."""

    def machine(self, name: str | None) -> MachineType | None:
        return next((m for m in self.machine_types if m.name == name), None)


_V6E_V5E_MULTI = ("2x4", "4x4", "4x8", "8x8", "8x16", "16x16")

# Prices: USD per chip-hour, from the Google Cloud TPU pricing page (https://cloud.google.com/tpu/pricing), list
# prices for us-east5 / us-central regions as recorded on 2026-11-29 for this project (core.estimate.PRICES_AS_OF);
# they were not re-fetched from this offline workplace, and they change: verify them for your region.
# Accelerator types: Compute Engine names a TPU VM's chips by its machine series (a ct6e-standard-1t VM's
# ``guest_accelerator`` is ``.../acceleratorTypes/ct6e``; aggregate reservations name ``acceleratorTypes/ct5p``,
# GKE's cluster-autoscaler tests; the series table of Compute's machine families: ct5lp v5e, ct5p v5p, ct6e v6e).
# Flex-start zones, from GKE's "About TPUs in GKE: flex-start" and Cluster Toolkit's DWS examples, as of 2026-11:
# TPU v6e flex-start is offered in a few zones only. Extend an entry when Google adds zones.
CATALOGUE: dict[TpuVersionName, TpuVersion] = {
    "v6e": TpuVersion(
        name="v6e",
        gke_accelerator="tpu-v6e-slice",
        pathways_type="tpuv6e",
        boot_disk_type="hyperdisk-balanced",
        default_machine_type="ct6e-standard-4t",
        machine_types=(
            MachineType("ct6e-standard-1t", 1, "1x1"),
            MachineType("ct6e-standard-4t", 4, "2x2", _V6E_V5E_MULTI, default_topology="4x8"),
            MachineType("ct6e-standard-8t", 8, "2x4"),
        ),
        prices=TpuPrices(on_demand=2.70, reservation=1.89),
        reservation_family="VM_FAMILY_CLOUD_TPU_LITE_POD_SLICE_CT6E",
        quota=TpuQuota(family="CT6E", preemptible="PREEMPTIBLE-TPU-V6E-per-project-region"),
        flex_start_zones=("asia-northeast1-b", "us-east5-a", "us-east5-b"),
        accelerator_type="ct6e",
    ),
    "v5e": TpuVersion(
        name="v5e",
        gke_accelerator="tpu-v5-lite-podslice",
        pathways_type="tpuv5e",
        boot_disk_type="pd-balanced",
        default_machine_type="ct5lp-hightpu-4t",
        machine_types=(
            MachineType("ct5lp-hightpu-1t", 1, "1x1"),
            MachineType("ct5lp-hightpu-4t", 4, "2x2", _V6E_V5E_MULTI, default_topology="4x8"),
            MachineType("ct5lp-hightpu-8t", 8, "2x4"),
        ),
        prices=TpuPrices(on_demand=1.20, reservation=0.84),
        reservation_family="VM_FAMILY_CLOUD_TPU_LITE_POD_SLICE_CT5LP",
        accelerator_type="ct5lp",
    ),
    "v5p": TpuVersion(
        name="v5p",
        gke_accelerator="tpu-v5p-slice",
        pathways_type="tpuv5",
        boot_disk_type="pd-balanced",
        default_machine_type="ct5p-hightpu-4t",
        machine_types=(
            MachineType(
                "ct5p-hightpu-4t",
                4,
                "2x2x1",
                ("2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8", "8x8x16"),
                default_topology="2x2x4",
            ),
        ),
        prices=TpuPrices(on_demand=4.20, reservation=2.94),
        reservation_family="VM_FAMILY_CLOUD_TPU_POD_SLICE_CT5P",
        accelerator_type="ct5p",
    ),
}

DEFAULT_VERSION: TpuVersionName = "v6e"


def chips_in(topology: str) -> int:
    """Number of chips in a topology string such as ``4x8`` or ``2x2x4``."""
    return math.prod(int(d) for d in topology.split("x"))


@dataclass(frozen=True)
class SliceShape:
    """A resolved slice: what one TPU node pool is, and what Pathways and pods call it."""

    version: TpuVersionName
    machine_type: str
    topology: str
    chips_per_vm: int
    gke_accelerator: str
    pathways_type: str
    boot_disk_type: str

    @property
    def chips(self) -> int:
        return chips_in(self.topology)

    @property
    def hosts(self) -> int:
        return self.chips // self.chips_per_vm

    @property
    def multi_host(self) -> bool:
        return self.hosts > 1

    @property
    def pathways_instance_type(self) -> str:
        """The resource manager's ``--instance_type``, e.g. ``tpuv6e:4x8``."""
        return f"{self.pathways_type}:{self.topology}"

    @property
    def pool_topology(self) -> str | None:
        """``placement_policy.tpu_topology``: only multi-host pools may set it."""
        return self.topology if self.multi_host else None


def resolve_slice(version: TpuVersionName, machine_type: str, topology: str) -> SliceShape:
    """Build a SliceShape; the caller has validated the combination with ``allowed_topologies``."""
    v = CATALOGUE[version]
    m = v.machine(machine_type)
    if m is None or topology not in m.topologies:
        raise ValueError(f"{machine_type} cannot form {topology}")
    return SliceShape(
        version=version,
        machine_type=machine_type,
        topology=topology,
        chips_per_vm=m.chips_per_vm,
        gke_accelerator=v.gke_accelerator,
        pathways_type=v.pathways_type,
        boot_disk_type=v.boot_disk_type,
    )


# Flex-start (Dynamic Workload Scheduler) needs GKE 1.33.0-gke.1712000 or later (GKE's "About TPUs in GKE:
# flex-start", as of 2026-11), whatever the TPU generation; the zones it offers a generation in are the entry's.
FLEX_START_MIN_GKE = "1.33.0-gke.1712000"
