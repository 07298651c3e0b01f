"""Live status of a stack's run while `pulumi up` waits: each step's state, the step training reached,
an ETA from the estimate model, the latest reward, the slice (its nodes Ready, its host maintenance notices, what the
training's head waits for and until when) and the command to read each step's logs.

    python -m tools.status (--stack NAME | --config-file FILE) [--set KEY=VALUE] [--watch]

Reads the stack's config as the program does (no Pulumi CLI), the cluster through the context
``gcloud container clusters get-credentials`` writes (``gke_<project>_<region>_<cluster>``; see the
stack output ``getCredentialsCommand``) and the run's files in GCS. Every read is bounded; an
unreachable cluster or bucket is one line and exit 1, a JobSet or Workload of another shape one line naming the field
and exit 2 (docs/troubleshooting.md). Exit 1 when a step failed (or Kueue stopped it), else 0.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.boundary import BoundaryError
from core.errors import BadInputError, TpuRlError
from core.redact import env_secrets, remember, scrub
from core.settings import Settings
from infra.k8s import credentials, live
from infra.k8s.live_objects import JobSet, JobSetStatus, Workload, true_condition
from tools.notices import hide_python_version_notice
from tools.process import entry_point, report
from workloads.observe.live_state import live_step
from workloads.observe.waiting import read_step
from workloads.specs.step_specs import Step, Workflow


class StatusError(BadInputError):
    """The status cannot be read (one line): exit 2 for what the operator gave, or the exit code of the read that
    failed (1 for an unreadable cluster or a GCS that did not answer)."""


@dataclass
class StepStatus:
    step: str
    name: str
    state: str
    """pending (not created, or its pods not all up) | queued (Kueue has not admitted it) | running |
    succeeded | failed | stopped (Kueue stopped it: the next `pulumi up` runs it again)."""
    started: datetime | None = None
    finished: datetime | None = None
    restarts: int | None = None
    reason: str = ""
    detail: str = ""
    lines: list[str] = field(default_factory=list)
    """Lines shown under the table (training: each attempt's start-up and what the slice bills)."""
    slice_said: str = ""
    """Training: what its newest attempt's wait for the slice says now, when it waits or gave up ("" otherwise)."""

    def duration(self, now: datetime) -> str:
        if self.started is None:
            return "-"
        seconds = int(((self.finished or now) - self.started).total_seconds())
        return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _condition_time(status: JobSetStatus, *types: str) -> datetime | None:
    """When the first of the conditions `types` that is True became True."""
    found = next(filter(None, (true_condition(status.conditions, kind) for kind in types)), None)
    return found.last_transition_time if found else None


def step_status(step: Step, obj: JobSet | None, workloads: list[Workload] | None = None) -> StepStatus:
    """The state of one step from its live JobSet (None: not created yet) and, for a step queued to Kueue,
    its Workloads."""
    if obj is None:
        return StepStatus(step.step, step.name, "pending")
    current = live_step(obj, workloads)
    finished = _condition_time(obj.status, "Completed", "Failed")
    shown = current.state in ("failed", "stopped", "queued")
    reason = f"{current.reason}: {current.message}".strip(": ")[:200] if shown else ""
    state = current.state
    if state == "running" and not _all_pods_ready(obj):
        state = "pending"
    return StepStatus(
        step.step, step.name, state, obj.metadata.creation_timestamp, finished, obj.status.restarts, reason
    )


def _all_pods_ready(obj: JobSet) -> bool:
    """Whether a running JobSet has its pods up (else it is waiting: pending).

    It counts, per replicated Job, the child Jobs whose pods are all ready or completed
    (`status.replicatedJobsStatus[].ready`), which stays below `replicas` while the TPU slice's
    pods (or a CPU step's pod) wait for nodes.
    """
    counts = {entry.name: entry for entry in obj.status.replicated_jobs_status}
    if not obj.spec.replicated_jobs:
        return False
    for job in obj.spec.replicated_jobs:
        entry = counts.get(job.name)
        done = entry.ready + entry.succeeded if entry else 0
        if done < job.replicas:
            return False
    return True


def training_detail(settings: Settings, data: Any, running: bool, now: float | None = None) -> str:
    """``step 12/50 · ETA 0:41 · reward 0.63`` from the run's files in GCS."""
    from core.estimate import step_seconds_for

    total = settings.training.final_step
    reached = data.last_step
    parts = [f"step {reached if reached is not None else 0}/{total}"]
    if running:
        remaining = max(0, total - (reached or 0)) * step_seconds_for(settings)
        parts.append(f"ETA {int(remaining // 3600)}:{int(remaining % 3600 // 60):02d}")
    if data.final_reward is not None:
        parts.append(f"reward {data.final_reward:.4g}")
    held = data.held_chip_hours(settings.total_chips, now=(now or time.time()) if running else None)
    steps = data.step_chip_hours(settings.total_chips)
    if held is not None or steps is not None:
        shown = ", ".join(
            f"{value:,.1f} {what}" for value, what in ((held, "held"), (steps, "in steps")) if value is not None
        )
        parts.append(f"chip-h {shown}")
    stalled = [a for a in data.evaluations.attempts if a.stalled]
    if stalled:
        parts.append(f"{len(stalled)} attempt{'s' if len(stalled) > 1 else ''} ended stalled ({stalled[-1].name})")
    post = (data.evaluations.post or {}).get("accuracy")
    pre = (data.evaluations.pre or {}).get("accuracy")
    if pre is not None:
        parts.append(f"accuracy {pre:g}%" + (f" -> {post:g}%" if post is not None else ""))
    return " · ".join(parts)


def kubeconfig_for(settings: Settings, path: Path | None, context: str | None) -> dict[str, Any]:
    """The kubeconfig ``kubectl --context`` would use for the stack's cluster, files read with limits."""
    files = [Path(p) for p in (str(path) if path else os.environ.get("KUBECONFIG", "")).split(os.pathsep) if p]
    files = files or [Path.home() / ".kube" / "config"]
    wanted = context or settings.kube_context
    fetch = settings.get_credentials_command
    try:
        return credentials.kubeconfig_from_files(files, wanted)
    except live.ClusterReadError as err:
        hint = f": run `{fetch}`" if fetch and str(err).startswith("no context") else ""
        raise StatusError(f"{err}{hint}") from None  # the kubeconfig files are what the operator gave: exit 2


def read_status(
    settings: Settings, plan: Workflow, kubeconfig: dict[str, Any], client: Any
) -> tuple[list[StepStatus], str]:
    """Every step's status and the training detail (bounded reads; one reader per refresh)."""
    from workloads.observe.artifacts import StorageError
    from workloads.observe.run_data import gather

    reader = live.ClusterReader(kubeconfig)
    statuses = []
    try:
        for step in plan.steps:
            obj, workloads, _pods = read_step(reader, settings.namespace, step.name, queued=bool(settings.kueue.queue))
            statuses.append(step_status(step, obj, workloads))
    except live.ClusterReadError as err:
        raise StatusError(f"cannot read the cluster: {err}", exit_code=err.exit_code) from None
    finally:
        reader.close()
    for step, status in zip(plan.steps, statuses, strict=True):
        detail_of = DETAILS.get(step.output)
        if detail_of is not None and status.state == "succeeded":
            status.detail = detail_of(client, step)
    train = next(s for s in statuses if s.step == plan.train.step)
    detail = ""
    if train.state != "pending" or train.started is not None:
        try:
            data = gather(client, plan.train.output_uri)
        except StorageError as err:
            raise StatusError(f"cannot read the run in GCS: {err}", exit_code=err.exit_code) from None
        detail = training_detail(settings, data, train.state == "running")
        train.detail = detail
        train.slice_said = head_wait(data, train.state)
        train.lines = startup_lines(settings, plan, kubeconfig, client, data, train)
    return statuses, detail


def startup_lines(
    settings: Settings, plan: Workflow, kubeconfig: dict[str, Any], client: Any, data: Any, train: StepStatus
) -> list[str]:
    """Each training attempt's start-up by component and what the slice bills, beside the training steps' chip-hours
    (``workloads.observe.startup``). The logs are read from GCS (bounded; a failure is the status's one line); the
    live objects with a reader of their own: when they cannot be read (nodes need cluster-wide read access) the
    lines say so and come from the logs alone."""
    from workloads.observe.artifacts import StorageError, bounded
    from workloads.observe.startup import read_cluster_facts, read_log_attempts, slice_billing, startups, status_lines

    output = plan.train.output_uri
    try:
        attempts = bounded(
            client, f"reading the logs under {output}logs/", lambda call: read_log_attempts(client, output, **call)
        )
    except StorageError as err:
        raise StatusError(f"cannot read the run in GCS: {err}", exit_code=err.exit_code) from None
    reader = live.ClusterReader(kubeconfig)
    facts, unread = None, ""
    try:
        facts = read_cluster_facts(reader, settings.namespace, plan.train.name, settings.slice.gke_accelerator)
    except (live.ClusterReadError, BoundaryError) as err:
        unread = scrub(str(err), limit=300)
    finally:
        reader.close()
    now = time.time()
    chips = settings.total_chips
    found = startups(attempts, facts, [a.start for a in data.scalars.attempts], now=now)
    lines = status_lines(found, chips) or ["no attempt has started yet"]
    if unread:
        lines.append(f"the cluster's side not read ({unread}): from the logs alone")
    finished = train.finished.timestamp() if train.finished else None
    billing = slice_billing(settings.tpu.capacity, chips, facts, now, finished)
    steps = data.step_chip_hours(chips)
    billed = "unknown" if billing.chip_hours is None else f"{billing.chip_hours:,.1f} chip-h"
    in_steps = "unknown" if steps is None else f"{steps:,.1f} chip-h"
    lines.append(f"slice billed {billed} ({billing.basis}) · training steps {in_steps}")
    return lines


def head_wait(data: Any, state: str) -> str:
    """``slice: the head of attempt <start>: waiting for the slice until 14:32 UTC (...): 0 of 8 workers Ready; ...``:
    what the newest training attempt's wait for its slice said last (its side file, copied as each line is said), while
    it waits, or when the slice did not come back; "" otherwise."""
    from workloads.observe.evaluations import GAVE_UP, WAITING

    attempts = data.evaluations.attempts
    said = (attempts[-1].slice_said if attempts else None) or ""
    waiting = said.startswith(WAITING) and state in ("pending", "running")
    if not (waiting or said.startswith(GAVE_UP)):
        return ""
    return scrub(f"slice: the head of attempt {attempts[-1].name}: {said}", limit=400)


def slice_lines(settings: Settings, kubeconfig: dict[str, Any], now: datetime) -> list[str]:
    """The slice's nodes (how many are Ready, what keeps it away) and host maintenance notices
    (``workloads.observe.slice_maintenance``: scheduled, requested, under way), read with a reader of its own. A
    convenience: when the nodes cannot be read (they are cluster-scoped) the line says so and the status goes on."""
    from core.tpu import Capacity
    from workloads.observe.slice_maintenance import SliceSize, read_slice, slice_line, status_lines

    reader = live.ClusterReader(kubeconfig)
    try:
        notices = read_slice(reader, settings.slice.gke_accelerator, settings.slice.topology)
    except live.ClusterReadError as err:
        return [f"slice and its maintenance notices not read ({scrub(str(err), limit=300)})"]
    finally:
        reader.close()
    size = SliceSize(settings.slice.hosts * settings.tpu.slices, settings.tpu.capacity == Capacity.RESERVATION)
    return [slice_line(notices, size), *status_lines(notices, now)]


def _published(client: Any, step: Step) -> str:
    """A publication's detail: the Hub branch and commit its record names."""
    from core.names import HUB_URL
    from workloads.observe.artifacts import StorageError, bounded, published_record

    record_uri = step.artifact_uri

    try:
        record = bounded(client, f"reading {record_uri}", lambda call: published_record(client, record_uri, **call))
    except StorageError as err:
        raise StatusError(f"cannot read the run in GCS: {err}", exit_code=err.exit_code) from None
    if record is None:
        return f"no record at {record_uri}"
    return scrub(f"{HUB_URL}/{record['repo']}/tree/{record['branch']} (commit {record['commit'][:12]})", limit=200)


def _converted(client: Any, step: Step) -> str:
    """The conversion's detail: the base model's commit it converted (every later step is of it). A convenience:
    when GCS cannot say, the row says so and the status goes on (the training row reads GCS and fails loudly)."""
    from core.layout import SOURCE_RECORD
    from workloads.observe.artifacts import StorageError, bounded, source_record

    output_uri = step.output_uri

    what = f"reading {output_uri}{SOURCE_RECORD}"
    try:
        record = bounded(client, what, lambda call: source_record(client, output_uri, **call))
    except StorageError as err:
        return scrub(f"base commit unknown ({err})", limit=200)
    if record is None:
        return f"no record at {output_uri}{SOURCE_RECORD}"
    return scrub(f"base {record.repo}@{record.commit[:12]}", limit=200)


def _recorded(client: Any, step: Step) -> str:
    """A step record's detail (``core.records``): its title and summary, as the step wrote them (parsed where read).
    A convenience like the conversion's: when GCS cannot say, the row says so."""
    from workloads.observe.artifacts import StorageError, bounded, step_record

    record_uri = step.artifact_uri
    try:
        record = bounded(client, f"reading {record_uri}", lambda call: step_record(client, record_uri, **call))
    except StorageError as err:
        return scrub(f"record unknown ({err})", limit=200)
    if record is None:
        return f"no record at {record_uri}"
    return scrub(f"{record.title}: {record.summary}", limit=200)


DETAILS: dict[str, Callable[[Any, Step], str]] = {
    "maxtext-checkpoint": _converted,
    "hub-record": _published,
    "record": _recorded,
}
"""A completed step's detail column by the kind of output it left (``Step.output``): the commit a conversion
converted, the branch a publication made, a step record's summary (training's is the run's progress,
``training_detail``)."""


def render(
    settings: Settings, plan: Workflow, statuses: list[StepStatus], now: datetime, notices: Sequence[str] = ()
) -> str:
    """The table, each step's lines, the slice's ``notices`` (``slice_lines``), what training's head waits for, and
    the log commands."""
    where = (
        f"cluster {settings.cluster_name} ({settings.project}/{settings.region})"
        if settings.existing is None
        else f"existing cluster of context {settings.kube_context}"
    )
    header = f"stack {settings.stack}: {where}, namespace {settings.namespace} · {now:%Y-%m-%d %H:%M:%S} UTC"
    rows = [("STEP", "NAME", "STATE", "STARTED", "DURATION", "RESTARTS", "DETAIL")]
    for s in statuses:
        started = f"{s.started:%Y-%m-%d %H:%M}" if s.started else "-"
        restarts = "-" if s.restarts is None else str(s.restarts)
        rows.append((s.step, s.name, s.state, started, s.duration(now), restarts, s.reason or s.detail))
    widths = [max(len(r[i]) for r in rows) for i in range(6)]
    lines = [header] + ["  ".join(c.ljust(widths[i]) if i < 6 else c for i, c in enumerate(r)).rstrip() for r in rows]
    for s in statuses:
        if s.lines:
            lines += [f"start-up and billing ({s.step}):", *(f"  {line}" for line in s.lines)]
    lines += list(notices)
    lines += [s.slice_said for s in statuses if s.slice_said]
    lines += [f"logs {step.step}: {step.logs_command}" for step in plan.steps]
    return "\n".join(lines)


def load_settings(args: argparse.Namespace) -> Settings:
    """The stack's settings from ``--stack``/``--config-file`` and ``--set``; ``StatusError`` holding every config
    problem (one line each)."""
    from core.config import ConfigError
    from tools.stack_files import StackFileError, load_stack

    try:
        return load_stack(args.stack, args.config_file, args.set)[0]
    except (ConfigError, StackFileError) as err:
        raise StatusError(str(err)) from None


def _interval(text: str) -> float:
    """``--interval``: a finite number of seconds, 0..3600 (0 only makes sense in tests)."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{scrub(text, limit=20)!r} is not a number of seconds") from None
    if not 0 <= seconds <= 3600:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"{scrub(text, limit=20)!r} is not between 0 and 3600 seconds")
    return seconds


def main(argv: list[str] | None = None, *, clock: Any = time) -> int:
    remember(*env_secrets(dict(os.environ)))  # the environment's tokens and passphrases, in every line printed
    parser = argparse.ArgumentParser(prog="python -m tools.status", description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--stack", help="Pulumi.<STACK>.yaml")
    source.add_argument("--config-file", type=Path, help="this stack config file")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a key (--path syntax)"
    )
    parser.add_argument("--kubeconfig", type=Path, help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    parser.add_argument("--context", help="context of the stack's cluster (default: gke_<project>_<region>_<cluster>)")
    parser.add_argument("--watch", action="store_true", help="refresh until the run ends")
    parser.add_argument(
        "--interval", type=_interval, default=30.0, help="seconds between refreshes with --watch (1..3600)"
    )
    args = parser.parse_args(argv)
    hide_python_version_notice()  # before the Google client libraries are imported
    try:
        from workloads.observe.artifacts import StorageError, open_client
        from workloads.specs.step_specs import plan_workflow

        settings = load_settings(args)
        if not settings.workflow.enabled:
            raise StatusError(f"stack {settings.stack} runs no workflow (tpu-rl:workflow.enabled is false)")
        plan = plan_workflow(settings)
        kubeconfig = kubeconfig_for(settings, args.kubeconfig, args.context)
        try:
            client = open_client()
        except StorageError as err:
            raise StatusError(str(err), exit_code=err.exit_code) from None
        while True:
            statuses, _ = read_status(settings, plan, kubeconfig, client)
            now = datetime.now(UTC)
            notices = slice_lines(settings, kubeconfig, now)
            print(render(settings, plan, statuses, now, notices), flush=True)
            failed = any(s.state in ("failed", "stopped") for s in statuses)
            done = failed or statuses[-1].state == "succeeded"
            if not args.watch or done:
                return 1 if failed else 0
            clock.sleep(max(1.0, args.interval) if clock is time else args.interval)
            print(flush=True)
    except TpuRlError as err:
        return report(err)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    entry_point(main)
