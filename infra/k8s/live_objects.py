"""The live Kubernetes objects the program and `make status` read, as typed values (``core.boundary``).

A JobSet, a Kueue Workload, a pod or an event enters here, once, where the cluster reader (``infra.k8s.live``)
returns it: the layers above take these values, never the reader's JSON. Only the fields the program reads, each of
its type as the API defines it (JobSet v1alpha2 ``jobset_types.go``, Kueue v1beta2 ``workload_types.go``, core/v1
``types.go``), outside text made printable. A missing field takes its API default; a field of another shape
(``terminal_state`` a list, ``conditions`` a number, ``metadata`` a string, a time without its zone) is one
``BoundaryError`` line naming the object and the field, instead of a traceback later.
"""

from __future__ import annotations

import datetime
from typing import Any

from pydantic import Field

from core.boundary import MAX_ITEMS, Count, Model, Text, Time, parse

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
WORKLOAD_API = "kueue.x-k8s.io/v1beta2"
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
"""The JobSet controller labels every pod of a JobSet with its name (a step's pods are selected by it)."""
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
"""Kueue labels a job's Workload with the job's UID (its name carries a hash: select by this label)."""


class Condition(Model):
    """``metav1.Condition`` (JobSet, Workload) and ``PodCondition``: type, status, reason, message, time."""

    type: Text = ""
    status: Text = ""
    reason: Text = ""
    message: Text = ""
    last_transition_time: Time | None = None


Conditions = list[Condition]


def true_condition(conditions: Conditions, kind: str) -> Condition | None:
    """The condition of type ``kind`` when it is True."""
    return next((c for c in conditions if c.type == kind and c.status == "True"), None)


def any_condition(conditions: Conditions, kind: str) -> Condition | None:
    """The condition of type ``kind``, whatever its status."""
    return next((c for c in conditions if c.type == kind), None)


class Meta(Model):
    name: Text = ""
    uid: Text = ""
    creation_timestamp: Time | None = None
    annotations: dict[str, Text] = Field(default_factory=dict)
    labels: dict[str, Text] = Field(default_factory=dict)


# -- JobSet (jobset.x-k8s.io/v1alpha2) --------------------------------------------------------------------


class ReplicatedJob(Model):
    name: Text = ""
    replicas: Count = 1


class JobSetSpec(Model):
    suspend: bool | None = None
    replicated_jobs: list[ReplicatedJob] = Field(default_factory=list, max_length=MAX_ITEMS)


class ReplicatedJobStatus(Model):
    name: Text = ""
    ready: Count = 0
    succeeded: Count = 0
    failed: Count = 0
    active: Count = 0
    suspended: Count = 0


class JobSetStatus(Model):
    terminal_state: Text = ""
    conditions: Conditions = Field(default_factory=list, max_length=MAX_ITEMS)
    restarts: Count = 0
    replicated_jobs_status: list[ReplicatedJobStatus] = Field(default_factory=list, max_length=MAX_ITEMS)


class JobSet(Model):
    metadata: Meta = Field(default_factory=Meta)
    spec: JobSetSpec = Field(default_factory=JobSetSpec)
    status: JobSetStatus = Field(default_factory=JobSetStatus)


# -- Kueue Workload (kueue.x-k8s.io/v1beta2) ------------------------------------------------------------


class WorkloadSpec(Model):
    active: bool | None = None


class WorkloadStatus(Model):
    conditions: Conditions = Field(default_factory=list, max_length=MAX_ITEMS)


class Workload(Model):
    metadata: Meta = Field(default_factory=Meta)
    spec: WorkloadSpec = Field(default_factory=WorkloadSpec)
    status: WorkloadStatus = Field(default_factory=WorkloadStatus)


# -- Pod and Event (core/v1) ----------------------------------------------------------------------------


class Container(Model):
    name: Text = ""
    image: Text = ""


class PodSpec(Model):
    node_selector: dict[str, Text] = Field(default_factory=dict)
    containers: list[Container] = Field(default_factory=list, max_length=MAX_ITEMS)
    init_containers: list[Container] = Field(default_factory=list, max_length=MAX_ITEMS)


class Running(Model):
    started_at: Time | None = None


class Terminated(Model):
    reason: Text = ""
    exit_code: int | None = None
    started_at: Time | None = None


class ContainerState(Model):
    running: Running | None = None
    terminated: Terminated | None = None


class ContainerStatus(Model):
    name: Text = ""
    image_id: Text = Field(default="", alias="imageID")
    state: ContainerState = Field(default_factory=ContainerState)
    last_state: ContainerState = Field(default_factory=ContainerState)

    @property
    def started(self) -> datetime.datetime | None:
        """When it first started (of its current and its last run)."""
        times = [
            s.started_at
            for state in (self.state, self.last_state)
            for s in (state.running, state.terminated)
            if s is not None and s.started_at is not None
        ]
        return min(times) if times else None


class PodStatus(Model):
    phase: Text = ""
    conditions: Conditions = Field(default_factory=list, max_length=MAX_ITEMS)
    container_statuses: list[ContainerStatus] = Field(default_factory=list, max_length=MAX_ITEMS)
    init_container_statuses: list[ContainerStatus] = Field(default_factory=list, max_length=MAX_ITEMS)


class Pod(Model):
    metadata: Meta = Field(default_factory=Meta)
    spec: PodSpec = Field(default_factory=PodSpec)
    status: PodStatus = Field(default_factory=PodStatus)


class InvolvedObject(Model):
    kind: Text = ""
    name: Text = ""


class Event(Model):
    involved_object: InvolvedObject = Field(default_factory=InvolvedObject)
    reason: Text = ""
    message: Text = ""
    last_timestamp: Time | None = None
    event_time: Time | None = None
    first_timestamp: Time | None = None

    @property
    def when(self) -> datetime.datetime | None:
        """When it last happened (``last_timestamp``, or for a new-style event ``event_time``)."""
        return self.last_timestamp or self.event_time or self.first_timestamp


# -- parsing --------------------------------------------------------------------------------------------


def jobset(raw: Any, source: str) -> JobSet:
    return parse(JobSet, raw, source)


def jobset_status(raw: Any, source: str) -> JobSetStatus:
    """A JobSet's ``status`` alone (what the provider recorded as the object's output); none is empty."""
    return parse(JobSetStatus, raw if raw is not None else {}, f"{source} status")


def each(model: type[Any], items: list[Any], source: str) -> list[Any]:
    """Every item of a list the reader returned, as ``model`` (the item's index in the source)."""
    return [parse(model, item, f"{source} item {index}") for index, item in enumerate(items[:MAX_ITEMS])]


def workloads(items: list[Any], source: str) -> list[Workload]:
    return each(Workload, items, source)


def pods(items: list[Any], source: str) -> list[Pod]:
    return each(Pod, items, source)


def events(items: list[Any], source: str) -> list[Event]:
    return each(Event, items, source)


def jobsets(items: list[Any], source: str) -> list[JobSet]:
    return each(JobSet, items, source)
