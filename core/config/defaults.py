"""Defaults that depend on the capacity mode, and the GKE and Cloud TPU timings they rest on: how many restarts a
training JobSet gets, how long Kueue waits for pods to be ready and for a slice to recover, how long a pod may stay
unschedulable, and the standing maintenance exclusion (each with its source); and each TPU version's default slice."""

from __future__ import annotations

from core.tpu import CATALOGUE, Capacity, TpuVersionName

# Default JobSet restarts by capacity mode, the least a run gets whatever its length: a reserved or on-demand slice
# survives one disruption; spot and flex-start capacity gets preempted more often. A longer run gets more, one per
# started DISRUPTION_HOURS of its training (core.config.workflow_rules.restarts_for_run).
DEFAULT_RESTARTS: dict[Capacity, int] = {
    Capacity.RESERVATION: 1,
    Capacity.ON_DEMAND: 1,
    Capacity.SPOT: 3,
    Capacity.FLEX_START: 2,
}
DISRUPTION_HOURS = 24
"""The planning bound on a training run's disruptions: one per started 24 hours of training, each costing one counted
JobSet restart (a lost slice, a TPU host maintenance event, a stalled attempt, a disrupted head). A figure to plan the
restarts by, not a measured rate (no source read here gives one): scheduled TPU maintenance "will get seven days
notice" (Cloud TPU, "View maintenance notifications": ``maintenanceType`` SCHEDULED), so a run can be placed around it,
and a day of training that meets two disruptions is what a higher ``tpu-rl:workflow.maxRestarts`` is for."""
# Default Kueue waitForPodsReady timeout by capacity mode: pods pull their images and autoscaled pools add
# nodes within minutes; flex-start capacity may take hours to be granted.
DEFAULT_PODS_READY: dict[Capacity, int] = {
    Capacity.RESERVATION: 1800,
    Capacity.ON_DEMAND: 1800,
    Capacity.SPOT: 1800,
    Capacity.FLEX_START: 7200,
}
# Default bound on an unschedulable pod by capacity mode: a pool that can grow does within minutes (a
# reserved slice is there already); flex-start capacity is obtained by waiting for it. Below the pods-ready
# timeout, so the program reports the scheduler's reasons before Kueue stops the step.
DEFAULT_UNSCHEDULABLE: dict[Capacity, int] = {
    Capacity.RESERVATION: 900,
    Capacity.ON_DEMAND: 900,
    Capacity.SPOT: 900,
    Capacity.FLEX_START: 3600,
}
# How long GKE may take to repair a node under a running step: auto-repair starts after about 10 minutes of
# NotReady and waits up to an hour for the drain before it re-creates the node ("Auto-repair process",
# https://cloud.google.com/kubernetes-engine/docs/how-to/node-auto-repair); a multi-host TPU slice is
# re-created as one unit ("About TPUs in GKE").
NODE_REPAIR_SECONDS = 10 * 60 + 60 * 60
# How long a TPU host maintenance event may keep the slice away. TPU VMs do not live-migrate, so a host event
# terminates the node and GKE re-creates it; host events bypass GKE's maintenance windows and exclusions ("Manage
# GKE node disruption for GPUs and TPUs", https://cloud.google.com/kubernetes-engine/docs/concepts/handle-disruption-
# gpu-tpu), and the whole multi-host slice goes with one host. Cloud TPU documents what it costs: "slice
# unavailability of up to a few hours", when there is not enough capacity to reschedule the slice at once
# (https://cloud.google.com/tpu/docs/manually-start-maintenance). "A few hours" is read as 4.
TPU_MAINTENANCE_SECONDS = 4 * 3600
# Kueue's recovery timeout is the longer of the two plus the pods-ready timeout (the re-created pods must be
# scheduled and start as the first ones did: by capacity mode, DEFAULT_PODS_READY), so a maintenance event on any
# capacity is waited for: 4h30m on a reservation, on-demand or spot capacity, 6h on flex-start.
RECOVERY_SECONDS = max(NODE_REPAIR_SECONDS, TPU_MAINTENANCE_SECONDS)
DEFAULT_EXCLUSION = "NO_MINOR_OR_NODE_UPGRADES"
"""The standing exclusion in every capacity mode: a training run depends on its TPU slice and on the Pathways head's
cpu-np node, and a node upgrade of either (surge 0 / unavailable 1, a multi-host slice as a whole) ends the attempt.
A flex-start slice alone would be spared (GKE upgrades flex-start nodes with short-lived upgrades, "Node pool upgrade
strategies"), but the head's cpu-np node is a surge pool in every mode. Node patches come in by a manual upgrade
between runs, which maintenance exclusions do not hold back (docs/when-a-step-fails.md "What happens when...": GKE
upgrades)."""


def default_topology(version: TpuVersionName) -> str:
    """The slice of a version's default machine type when ``tpu-rl:tpu.topology`` is not set."""
    entry = CATALOGUE[version]
    machine = entry.machine(entry.default_machine_type)
    assert machine is not None, f"TPU {version}: the default machine type is not one of its machine types"
    return machine.default_topology or machine.single_host_topology


def default_topologies() -> str:
    """``4x8 (v6e, v5e) or 2x2x4 (v5p)``: each version's default slice (the key's description)."""
    by_topology: dict[str, list[str]] = {}
    for version in CATALOGUE:
        by_topology.setdefault(default_topology(version), []).append(version)
    return " or ".join(f"{topology} ({', '.join(versions)})" for topology, versions in by_topology.items())
