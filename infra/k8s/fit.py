"""Whether an existing cluster (``tpu-rl:existingCluster``) has what the steps need, from what its API server shows:
the JobSet CRD of the configured version, Kueue's API where the steps are queued, the TPU slice's nodes and Workload
Identity. Plain functions of plain values: ``infra.k8s.live.ClusterReader.facts`` reads the facts, `up` and a preview
refuse on the problems (``infra.k8s.platform``), one line each, before the stack creates anything in the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.names import TPU_ACCELERATOR_LABEL, TPU_TOPOLOGY_LABEL
from core.printed_commands import helm, kubectl
from core.tpu import SliceShape
from infra.k8s.manifests import JOBSET_CHART, JOBSET_CRD, JOBSET_NAMESPACE, jobset_crd_problem

KUEUE_WORKLOAD_CRD = "workloads.kueue.x-k8s.io"
"""Kueue's Workload CRD: the program reads Workloads at ``KUEUE_API_VERSION`` (``infra.k8s.live_objects``)."""
KUEUE_API_VERSION = "v1beta2"
METADATA_SERVER_LABEL = "iam.gke.io/gke-metadata-server-enabled"
"""GKE labels a node ``true`` where its pool runs the GKE metadata server (``workloadMetadataConfig.mode:
GKE_METADATA``), which Workload Identity needs."""
TPU_RESOURCE = "google.com/tpu"
INSTANCE_LABEL = "app.kubernetes.io/instance"
"""Which stack an object is (``infra.k8s.manifests.platform_labels``): its ``tpu-rl:clusterName``."""


@dataclass(frozen=True)
class Node:
    """What the checks read of one node: its labels and its allocatable TPU chips."""

    labels: Mapping[str, str]
    tpu_chips: int


@dataclass(frozen=True)
class ClusterFacts:
    """What the checks read of the cluster."""

    nodes: tuple[Node, ...]
    jobset_crd: Mapping[str, Any] | None
    """JobSet's CRD (None: not installed)."""
    kueue_crd: Mapping[str, Any] | None
    """Kueue's Workload CRD (None: not installed)."""
    owners: Mapping[tuple[str, str], str] = field(default_factory=dict)
    """Each of ``Needs.claimed`` that exists -> its ``INSTANCE_LABEL`` ("" without one)."""


@dataclass(frozen=True)
class Needs:
    """What the stack's steps need of the cluster (from its settings)."""

    context: str
    """The kubeconfig context (the printed commands name it)."""
    stack: str
    jobset_version: str
    queued: bool
    """The steps are queued to Kueue (``tpu-rl:kueue.enabled`` or ``kueue.queue``)."""
    shape: SliceShape
    slices: int
    static_slice: bool
    """The slice's pool keeps its nodes (a reservation): none seen is a problem, not a pool scaled to zero."""
    workload_identity: bool
    instance: str = ""
    """The stack's ``INSTANCE_LABEL`` value (``tpu-rl:clusterName``), which every object it creates carries."""
    claimed: tuple[tuple[str, str], ...] = ()
    """The names the stack takes outside its namespace, as (kind, name): the namespace itself and its Kueue objects."""


@dataclass(frozen=True)
class Fit:
    """The problems (one line each: `up` stops) and the notes (said, `up` goes on)."""

    problems: tuple[str, ...]
    notes: tuple[str, ...]


def node_of(raw: Mapping[str, Any]) -> Node:
    """A node of the API's JSON: its labels and ``status.allocatable`` TPU chips (0 when absent or unreadable)."""
    metadata = raw.get("metadata") or {}
    labels = metadata.get("labels") or {}
    allocatable = (raw.get("status") or {}).get("allocatable") or {}
    chips = str(allocatable.get(TPU_RESOURCE, "0"))
    return Node(
        {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {},
        int(chips) if chips.isdigit() else 0,
    )


def instance_of(raw: Mapping[str, Any]) -> str:
    """An object's ``INSTANCE_LABEL`` ("" without one)."""
    labels = (raw.get("metadata") or {}).get("labels") or {}
    return str(labels.get(INSTANCE_LABEL, "")) if isinstance(labels, dict) else ""


def fit(facts: ClusterFacts, needs: Needs) -> Fit:
    """Every problem and note of the cluster for the stack's steps."""
    problems = [*_owned(facts, needs), *_jobset(facts, needs), *_kueue(facts, needs), *_workload_identity(facts, needs)]
    slice_problems, notes = _tpu_slice(facts, needs)
    return Fit((*problems, *slice_problems), notes)


def _owned(facts: ClusterFacts, needs: Needs) -> list[str]:
    """The provider adopts an object of the same name that exists (``upsert_existing_objects``), and the stack's
    destroy would delete it: a name the stack takes must be free, or the stack's own."""
    return [
        f"the cluster's {kind} {name} is not this stack's ({INSTANCE_LABEL}={owner or '(none)'}, this stack's is "
        f"{needs.instance}): the stack never takes over what it did not create; "
        + (
            "set tpu-rl:namespace to a namespace of its own"
            if kind == "Namespace"
            else "set tpu-rl:kueue.enabled false "
            "and tpu-rl:kueue.queue to a LocalQueue the cluster's owner makes in the stack's namespace"
        )
        for (kind, name), owner in sorted(facts.owners.items())
        if owner != needs.instance
    ]


def _jobset(facts: ClusterFacts, needs: Needs) -> list[str]:
    if facts.jobset_crd is None:
        install = helm(
            needs.context,
            "install",
            "jobset",
            JOBSET_CHART,
            "--version",
            needs.jobset_version,
            "--namespace",
            JOBSET_NAMESPACE,
            "--create-namespace",
        )
        return [
            f"the cluster has no JobSet (no CRD {JOBSET_CRD}): the stack does not install controllers on a cluster it "
            f"did not create; install JobSet {needs.jobset_version}: {install}"
        ]
    problem = jobset_crd_problem(facts.jobset_crd, needs.jobset_version, needs.context, needs.stack)
    return [problem] if problem else []


def _kueue(facts: ClusterFacts, needs: Needs) -> list[str]:
    if not needs.queued:
        return []
    if facts.kueue_crd is None:
        return [
            f"the steps are queued to Kueue (tpu-rl:kueue) but the cluster has no Kueue (no CRD {KUEUE_WORKLOAD_CRD}): "
            "install Kueue 0.17 (Cluster Toolkit's blueprint does), or set tpu-rl:kueue.enabled false"
        ]
    versions = (facts.kueue_crd.get("spec") or {}).get("versions") or []
    served = {v.get("name") for v in versions if isinstance(v, dict) and v.get("served")}
    if KUEUE_API_VERSION not in served:
        return [
            f"the cluster's Kueue serves no kueue.x-k8s.io/{KUEUE_API_VERSION} Workloads (it serves "
            f"{', '.join(sorted(str(v) for v in served)) or 'none'}), which the stack reads: upgrade Kueue to 0.17"
        ]
    return []


def _workload_identity(facts: ClusterFacts, needs: Needs) -> list[str]:
    if not needs.workload_identity or any(n.labels.get(METADATA_SERVER_LABEL) == "true" for n in facts.nodes):
        return []
    return [
        f"no node of the cluster runs GKE's metadata server (label {METADATA_SERVER_LABEL}=true), which Workload "
        "Identity needs for the CPU steps' own accounts: enable Workload Identity on the cluster and its pools, or set "
        "tpu-rl:existingCluster.workloadIdentity false (the steps then run as their nodes' identity)"
    ]


def _tpu_slice(facts: ClusterFacts, needs: Needs) -> tuple[list[str], tuple[str, ...]]:
    shape = needs.shape
    selector = f"{TPU_ACCELERATOR_LABEL}={shape.gke_accelerator},{TPU_TOPOLOGY_LABEL}={shape.topology}"
    hosts = [
        n
        for n in facts.nodes
        if n.labels.get(TPU_ACCELERATOR_LABEL) == shape.gke_accelerator
        and n.labels.get(TPU_TOPOLOGY_LABEL) == shape.topology
    ]
    wanted = shape.hosts * needs.slices
    listed = kubectl(needs.context, "get", "nodes", "-l", selector)
    if not hosts and not needs.static_slice:
        return [], (
            f"no TPU node of the slice ({selector}) is up now; an autoscaled pool adds them when the training asks "
            f"(`{listed}`)",
        )
    problems = []
    if len(hosts) < wanted:
        problems.append(
            f"the slice needs {wanted} TPU hosts ({needs.slices} x {shape.topology} {shape.gke_accelerator}, "
            f"{shape.chips_per_vm} chips each) and the cluster has {len(hosts)} (`{listed}`): add a node pool of that "
            "type and topology, or set tpu-rl:tpu to the cluster's"
        )
    short = [n for n in hosts if n.tpu_chips != shape.chips_per_vm]
    if short:
        problems.append(
            f"{len(short)} of the slice's TPU hosts offer another count of {TPU_RESOURCE} than {shape.chips_per_vm} "
            f"(`{listed}`): tpu-rl:tpu.machineType must be the pool's"
        )
    return problems, ()
