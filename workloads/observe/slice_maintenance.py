"""GKE's host maintenance notices on the TPU slice's nodes, and whether those nodes are there (``Ready``, as many as the
slice has), as typed values, and what they mean for a run (plain functions: `pulumi up`'s check before training,
`make status`, `make maintenance`).

What GKE writes, and where it says so:

- ``cloud.google.com/scheduled-maintenance-time``: on GKE 1.31.1-gke.2008000 and later, a node with GPUs or TPUs
  whose VM has an upcoming host maintenance that is not active yet carries this label, the start of the Compute
  Engine maintenance window in seconds since the Unix epoch (GKE "Monitor maintenance events",
  https://cloud.google.com/kubernetes-engine/docs/how-to/view-maintenance-events: ``kubectl get nodes -l
  cloud.google.com/scheduled-maintenance-time -L cloud.google.com/scheduled-maintenance-time`` prints e.g.
  ``1733083200``, "seconds, in Unix epoch time"). Scheduled maintenance comes with seven days' notice (Cloud TPU
  "View maintenance notifications", https://cloud.google.com/tpu/docs/view-maintenance-notifications).
- ``cloud.google.com/perform-maintenance=true``, set by the user, starts that maintenance now (GKE "Manage GKE node
  disruption for GPUs and TPUs", https://cloud.google.com/kubernetes-engine/docs/concepts/handle-disruption-gpu-tpu):
  for GKE multi-host node pools of TPU v6e VMs of 2x4 or larger, once a maintenance is scheduled; a large slice may
  then be unavailable for "up to a few hours" (Cloud TPU "Manually start a host maintenance event",
  https://cloud.google.com/tpu/docs/manually-start-maintenance).
- ``cloud.google.com/active-node-maintenance`` (``ONGOING`` while GKE stops the node's workloads for the
  maintenance): named by Google's own GKE troubleshooting skill (GoogleCloudPlatform/gke-mcp
  ``skills/gke-ai-troubleshooting-handle-disruption-gpu-tpu/SKILL.md``), by no GKE page read; `make status` shows it,
  and `up`'s check counts it as one more sign of a slice that is away (``away``), beside the nodes' ``Ready``.

A label of another shape is one problem line (the node is kept, its time unread), never an error.
"""

from __future__ import annotations

import datetime
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from core.boundary import MAX_ITEMS, BoundaryError, Model, parse
from core.names import TPU_ACCELERATOR_LABEL, TPU_TOPOLOGY_LABEL
from core.redact import scrub
from infra.k8s.live_objects import Conditions, Meta, any_condition

SCHEDULED_LABEL = "cloud.google.com/scheduled-maintenance-time"
PERFORM_LABEL = "cloud.google.com/perform-maintenance"
ACTIVE_LABEL = "cloud.google.com/active-node-maintenance"
EPOCH_SECONDS = re.compile(r"[0-9]{1,11}")
"""The label's value: whole seconds since the Unix epoch (11 digits reach the year 5138)."""
clock: Callable[[], float] = time.time
"""Now, in seconds since the epoch (tests move it)."""
SHOWN_NODES = 3
"""How many nodes a line names before it counts the rest."""


def slice_selector(accelerator: str, topology: str) -> str:
    """The label selector of the slice's nodes: its accelerator and topology, as GKE labels a TPU pool's nodes and
    the training pods select them (``infra.gcp.gke_spec``, ``workloads.specs.step_manifests``)."""
    return f"{TPU_ACCELERATOR_LABEL}={accelerator},{TPU_TOPOLOGY_LABEL}={topology}"


class _NodeStatus(Model):
    conditions: Conditions = Field(default_factory=list, max_length=MAX_ITEMS)


class _Node(Model):
    metadata: Meta = Field(default_factory=Meta)
    status: _NodeStatus = Field(default_factory=_NodeStatus)


@dataclass(frozen=True)
class SliceNode:
    """A node of the slice and what its labels say of its host maintenance."""

    name: str
    scheduled: datetime.datetime | None
    """When its maintenance window starts (UTC; None: none scheduled, or a label that is not a time)."""
    requested: bool = False
    """``perform-maintenance=true``: someone asked for the maintenance to start now."""
    active: str = ""
    """``active-node-maintenance``'s value ("" when the label is absent)."""
    ready: bool = True
    """Its ``Ready`` condition is ``True`` (a node whose kubelet stopped reporting is ``Unknown``: not Ready)."""


@dataclass(frozen=True)
class SliceNotices:
    """The slice's nodes and the problems met reading them (one line each)."""

    nodes: tuple[SliceNode, ...] = ()
    problems: tuple[str, ...] = ()

    def scheduled(self) -> list[SliceNode]:
        """The nodes with a scheduled maintenance, soonest first."""
        found = [node for node in self.nodes if node.scheduled is not None]
        return sorted(found, key=lambda node: (node.scheduled, node.name))

    def problem(self) -> str:
        """The problems as one line ("" when none)."""
        if not self.problems:
            return ""
        more = len(self.problems) - 1
        return self.problems[0] + (f" (and {more} more)" if more else "")


def scheduled_time(value: str) -> datetime.datetime:
    """The label's value as a UTC time; ``ValueError`` for any other shape."""
    if not EPOCH_SECONDS.fullmatch(value):
        raise ValueError(value)
    return datetime.datetime.fromtimestamp(int(value), datetime.UTC)


def slice_notices(items: Sequence[Any], source: str) -> SliceNotices:
    """The nodes a list returned, each parsed on its own: a node of another shape, or a label that is not a time, is
    a problem line, not an error."""
    nodes: list[SliceNode] = []
    problems: list[str] = []
    for index, item in enumerate(items[:MAX_ITEMS]):
        try:
            node = parse(_Node, item, f"{source} item {index}")
        except BoundaryError as err:
            problems.append(f"{err}: that node is not read")
            continue
        meta, labels = node.metadata, node.metadata.labels
        ready = any_condition(node.status.conditions, "Ready")
        raw, scheduled = labels.get(SCHEDULED_LABEL), None
        if raw is not None:
            try:
                scheduled = scheduled_time(raw)
            except (ValueError, OverflowError, OSError):
                problems.append(
                    f"node {meta.name}: {SCHEDULED_LABEL}={scrub(raw, limit=40)!r} is not a time in seconds since the "
                    "Unix epoch, as GKE writes it; its maintenance time is not read"
                )
        active = labels.get(ACTIVE_LABEL, "")
        is_ready = ready is not None and ready.status == "True"
        nodes.append(SliceNode(meta.name, scheduled, labels.get(PERFORM_LABEL) == "true", active, is_ready))
    return SliceNotices(tuple(nodes), tuple(problems))


def read_slice(reader: Any, accelerator: str, topology: str) -> SliceNotices:
    """The slice's nodes (``infra.k8s.live.ClusterReader.list`` of ``v1`` ``Node``, bounded; its ``ClusterReadError``
    is the caller's)."""
    listed = reader.list("v1", "Node", "", slice_selector(accelerator, topology))
    return slice_notices(listed, "the slice's nodes")


def span(seconds: float) -> str:
    """``3 d 4 h``, ``2 h 10 min``, ``45 min``: a lead time or a length, to the minute."""
    minutes = int(max(0.0, seconds) // 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{minutes} min" if minutes else "under 1 min"


def utc(when: datetime.datetime) -> str:
    return f"{when:%Y-%m-%d %H:%M} UTC"


def named(nodes: Sequence[SliceNode]) -> str:
    """``node a, node b, node c and 5 more`` (``SHOWN_NODES`` by name)."""
    names = [node.name for node in nodes[:SHOWN_NODES]]
    more = len(nodes) - len(names)
    text = ", ".join(names)
    return f"{'nodes' if len(nodes) > 1 else 'node'} {text}" + (f" and {more} more" if more else "")


@dataclass(frozen=True)
class Expected:
    """The expected training, from ``now``: it starts once the steps it waits for have run (``before`` seconds, the
    estimate's hours of those not done yet) and lasts ``training`` seconds (the estimate's training hours)."""

    now: datetime.datetime
    before: float
    training: float

    @property
    def start(self) -> datetime.datetime:
        return self.now + datetime.timedelta(seconds=self.before)

    @property
    def end(self) -> datetime.datetime:
        return self.start + datetime.timedelta(seconds=self.training)

    def where(self, when: datetime.datetime) -> str:
        """Where ``when`` falls: due now (past), before training starts, or how far into it."""
        if when <= self.now:
            return "due now (its time has passed)"
        if when < self.start:
            return f"in {span((when - self.now).total_seconds())}, before training starts (the steps before it run)"
        into = span((when - self.start).total_seconds())
        return f"{into} into the expected {span(self.training)} of training"


def inside(notices: SliceNotices, expected: Expected) -> list[SliceNode]:
    """The nodes whose maintenance starts before the expected end of training (a time already past: due now)."""
    return [node for node in notices.scheduled() if node.scheduled is not None and node.scheduled <= expected.end]


def notice(hits: Sequence[SliceNode], expected: Expected) -> str:
    """``host maintenance is scheduled on the TPU slice inside the expected training: node x at <time> UTC, <where>``
    (the soonest; ``hits`` soonest first, as ``inside`` gives them)."""
    first = hits[0].scheduled
    assert first is not None  # inside() keeps scheduled nodes only
    return (
        f"host maintenance is scheduled on the TPU slice inside the expected training: {named(hits)} at {utc(first)}, "
        f"{expected.where(first)}"
    )


def refusal(hits: Sequence[SliceNode], expected: Expected, stack: str) -> str:
    """The line `up` stops with: the nodes, the time, where it falls, and the two ways on."""
    return (
        f"{notice(hits, expected)}. Start it now, before training, with `make maintenance STACK={stack}` (the slice "
        f"may be away up to a few hours; `make status STACK={stack}` shows when it is back, then `make up "
        f"STACK={stack}`), or go on anyway with `make up STACK={stack} ACCEPT=maintenance` "
        '(docs/maintenance.md "The check in up")'
    )


def later(notices: SliceNotices, expected: Expected) -> str:
    """The info line for a maintenance scheduled after the expected end of training ("" when none)."""
    after = [node for node in notices.scheduled() if node.scheduled is not None and node.scheduled > expected.end]
    if not after or after[0].scheduled is None:
        return ""
    when = after[0].scheduled
    return (
        f"host maintenance is scheduled on the TPU slice after the expected end of training: {named(after)} at "
        f"{utc(when)} (in {span((when - expected.now).total_seconds())})"
    )


def status_lines(notices: SliceNotices, now: datetime.datetime) -> list[str]:
    """`make status`'s lines: the soonest scheduled maintenance, a requested one, one under way, and the problems."""
    total = len(notices.nodes)
    lines = []
    scheduled = notices.scheduled()
    if scheduled and scheduled[0].scheduled is not None:
        when = scheduled[0].scheduled
        lead = "due now" if when <= now else f"in {span((when - now).total_seconds())}"
        lines.append(f"slice maintenance scheduled {utc(when)} ({lead}) on {len(scheduled)} of {total} nodes")
    requested = [node for node in notices.nodes if node.requested]
    if requested:
        lines.append(f"slice maintenance requested ({PERFORM_LABEL}=true) on {len(requested)} of {total} nodes")
    active = [node for node in notices.nodes if node.active]
    if active:
        what = f"{ACTIVE_LABEL}={active[0].active}"
        lines.append(f"slice maintenance under way ({what}) on {len(active)} of {total} nodes")
    return lines + list(notices.problems)


@dataclass(frozen=True)
class SliceSize:
    """What the slice should be: its nodes (every host of every slice), and whether they exist outside training (a
    reservation's pool is static; an autoscaled pool is at zero until training scales it up)."""

    nodes: int
    reserved: bool


def away(notices: SliceNotices, shape: SliceSize) -> str:
    """What keeps the slice away ("" when nothing does): nodes not Ready, a maintenance under way, some of a
    reservation's nodes missing. A slice without any node is not judged: an autoscaled pool scales up for training,
    and a reservation's pool being created has none yet (`make status` says so: ``slice_line``)."""
    nodes = notices.nodes
    if not nodes:  # an autoscaled pool at zero; a reservation's not judged: a pool not created yet has none either
        return ""
    not_ready = [node for node in nodes if not node.ready]
    active = [node for node in nodes if node.active]
    missing = max(0, shape.nodes - len(nodes)) if shape.reserved else 0
    if not (not_ready or active or missing):
        return ""
    parts = [f"NotReady: {named(not_ready)}"] if not_ready else []
    if active:
        parts.append(f"maintenance under way ({ACTIVE_LABEL}={active[0].active}) on {len(active)}")
    if missing:
        parts.append(f"{missing} of the reservation's {shape.nodes} missing")
    ready = sum(node.ready for node in nodes)
    return f"{ready} of {shape.nodes} nodes Ready ({'; '.join(parts)})"


def away_refusal(gone: str, stack: str) -> str:
    """The line `up` stops with when the slice is away before training is created."""
    return (
        f"the TPU slice is away: {gone}; a training created now would wait for it under a start-up's bounds "
        "(tpu-rl:workflow.unschedulableTimeout, tpu-rl:kueue.podsReadyTimeout), not a maintenance's. Follow it with "
        f"`make status STACK={stack}` and run `make up STACK={stack}` once the slice is back, "
        f'or go on anyway with `make up STACK={stack} ACCEPT=maintenance` (docs/maintenance.md "The check in up")'
    )


def slice_line(notices: SliceNotices, shape: SliceSize) -> str:
    """`make status`'s line of the slice's nodes: how many are Ready, and what keeps it away."""
    if not notices.nodes:
        if shape.reserved:
            return (
                f"slice: away: 0 of {shape.nodes} nodes (none of the reservation's exists: a maintenance or a repair)"
            )
        return "slice: no nodes (its pool scales up for training and back to zero after it)"
    gone = away(notices, shape)
    if gone:
        return f"slice: away: {gone}"
    return f"slice: {sum(node.ready for node in notices.nodes)} of {shape.nodes} nodes Ready"
