"""Start the TPU slice's scheduled host maintenance now, before a training run, rather than in the middle of one.

    python -m tools.maintenance (--stack NAME | --config-file FILE) [--set KEY=VALUE] [--force]

Reads the stack's config and its cluster as `make status` does (``tools.status``: the context
``gke_<project>_<region>_<cluster>``, every call bounded), lists the slice's nodes (GKE's accelerator and topology
labels) with their scheduled maintenance time (``workloads.observe.slice_maintenance``), and labels each of them
``cloud.google.com/perform-maintenance=true``, which makes GKE start the maintenance now (GKE "Manage GKE node
disruption for GPUs and TPUs"; Cloud TPU "Manually start a host maintenance event": TPU v6e multi-host pools of 2x4
or larger). It refuses while a training JobSet of the stack is running or queued (the maintenance would interrupt
it), and when no node of the slice has a maintenance scheduled (a manual start is for a scheduled maintenance):
``--force`` (`make maintenance FORCE=1`) labels anyway, as a rehearsal under a short run does (docs/maintenance.md
"Rehearse a host maintenance on a dev slice").

Exit 0 once every node is labelled (or already was); 1 when it refuses, the slice has no nodes (an autoscaled pool
outside training), or the cluster cannot be read or written (a retry may do); 2 for bad input (a config problem, no
context for the cluster). One line each.
"""

from __future__ import annotations

import argparse
import datetime
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core import deadline
from core.boundary import BoundaryError
from core.errors import TpuRlError
from core.printed_commands import kubectl, make_target
from core.redact import env_secrets, remember
from core.settings import Settings
from infra.k8s import live
from infra.transports import read_response
from tools.notices import hide_python_version_notice
from tools.process import entry_point, report
from tools.status import kubeconfig_for, load_settings
from workloads.observe import slice_maintenance
from workloads.observe.live_state import live_step

MERGE_PATCH = "application/merge-patch+json"
"""A JSON merge patch (RFC 7386) of the node's labels, as `kubectl label` changes one label and leaves the rest."""


REHEARSAL = 'docs/maintenance.md "Rehearse a host maintenance on a dev slice"'
"""Where the refusal under a running training points: a rehearsal is the one reason to label under it."""


class MaintenanceError(TpuRlError):
    """The maintenance was not started: a refusal, no nodes, or a cluster that cannot be read or written (exit 1)."""


class NodeLabeler(live.ClusterReader):
    """``ClusterReader`` plus a node's label: the same client, budget (``cluster-read``), retries and one-line
    errors. A merge patch of one label is idempotent, so a retried patch is the same change."""

    def label_node(self, name: str, key: str, value: str) -> None:
        from kubernetes.client.exceptions import ApiException

        path = f"/api/v1/nodes/{name}"
        api = self._api()
        budget = self.budgets.read
        timeout = (budget.connect, budget.read)
        body = {"metadata": {"labels": {key: value}}}

        def attempt(left: float) -> None:
            def call() -> None:
                response = api.core.patch_node(
                    name, body, _content_type=MERGE_PATCH, _preload_content=False, _request_timeout=timeout
                )
                read_response(response, live.DRAINED, f"PATCH {self.where}{path}")  # the node, read only to its end

            deadline.call(call, left, cancel=self.close)

        try:
            deadline.retrying(attempt, budget, wait_for=self._transient, clock=live.retry_clock, sleep=live.retry_sleep)
        except deadline.DeadlineExceededError:
            late = f"the cluster at {self.where} did not answer PATCH {path} within {budget.total:g} s"
            raise self._fail(live.ClusterReadError(late)) from None
        except live.ClusterReadError as err:
            raise self._fail(err) from None
        except ApiException as err:
            if err.status in (401, 403):
                raise self._fail(
                    live.ClusterReadError(
                        f"the cluster at {self.where} refused to label node {name} (HTTP {err.status}): the identity "
                        "needs to update nodes (container.nodes.update, in roles/container.admin, which `make up` "
                        "needs too) and a fresh login"
                    )
                ) from None
            if err.status == 404:
                gone = f"node {name} is gone (the slice was re-created?): run `make maintenance` again"
                raise self._fail(live.ClusterReadError(gone)) from None
            raise self._fail(self._describe(err, path)) from None
        except Exception as err:  # noqa: BLE001 (the client's errors, described in one line as every read's)
            raise self._fail(self._describe(err, path)) from None


def running_training(reader: live.ClusterReader, settings: Settings) -> list[str]:
    """The stack's training JobSets that have not ended (running, restarting, or queued to start)."""
    selector = f"app.kubernetes.io/instance={settings.cluster_name},app.kubernetes.io/component=train"
    found = reader.jobsets(settings.namespace, selector)
    return sorted(obj.metadata.name for obj in found if live_step(obj).state == "running")


def node_line(node: slice_maintenance.SliceNode, now: datetime.datetime) -> str:
    """``gke-...-x1y2  scheduled 2026-12-03 09:00 UTC (in 3 d 4 h)`` and what else its labels say."""
    if node.scheduled is None:
        when = "no maintenance scheduled"
    else:
        lead = (
            "due now"
            if node.scheduled <= now
            else f"in {slice_maintenance.span((node.scheduled - now).total_seconds())}"
        )
        when = f"scheduled {slice_maintenance.utc(node.scheduled)} ({lead})"
    extra = []
    if node.requested:
        extra.append(f"{slice_maintenance.PERFORM_LABEL}=true")
    if node.active:
        extra.append(f"{slice_maintenance.ACTIVE_LABEL}={node.active}")
    return f"  {node.name}  {when}" + (f" · {', '.join(extra)}" if extra else "")


def refuse(settings: Settings, notices: slice_maintenance.SliceNotices, running: list[str]) -> None:
    """``MaintenanceError`` when the maintenance must not start (module docstring); ``--force`` skips this."""
    stack = settings.stack
    if running:
        raise MaintenanceError(
            f"training JobSet {settings.namespace}/{running[0]} has not ended (it runs, or waits for the slice): a "
            f"maintenance now interrupts it; wait for it to end (`make status STACK={stack}`), or rehearse a "
            f"maintenance under it with `make maintenance STACK={stack} FORCE=1` ({REHEARSAL})"
        )
    if not notices.scheduled():
        raise MaintenanceError(
            f"no node of the slice of stack {stack} has a maintenance scheduled "
            f"({slice_maintenance.SCHEDULED_LABEL}): a manual start is for a scheduled maintenance, so nothing is "
            f"labelled; `make maintenance STACK={stack} FORCE=1` labels anyway"
        )


def start(settings: Settings, labeler: NodeLabeler, say: Callable[[str], object], *, force: bool) -> None:
    """List the slice's nodes (``say`` each line as it is known), then refuse or label each of them."""
    shape = settings.slice
    now = datetime.datetime.fromtimestamp(slice_maintenance.clock(), datetime.UTC)
    try:
        notices = slice_maintenance.read_slice(labeler, shape.gke_accelerator, shape.topology)
        if not notices.nodes:
            raise MaintenanceError(
                f"the slice of stack {settings.stack} has no nodes ({shape.gke_accelerator} {shape.topology}): an "
                "autoscaled pool (tpu-rl:tpu.capacity spot, flex-start or on-demand) has none outside training, so "
                "there is nothing to start"
            )
        say(f"the slice's nodes ({slice_maintenance.slice_selector(shape.gke_accelerator, shape.topology)}):")
        for line in [node_line(node, now) for node in notices.nodes]:
            say(line)
        for problem in notices.problems:
            say(f"warning: {problem}")
        if not force:
            refuse(settings, notices, running_training(labeler, settings))
        for node in notices.nodes:
            if node.requested:
                say(f"{node.name}: already labelled {slice_maintenance.PERFORM_LABEL}=true")
                continue
            labeler.label_node(node.name, slice_maintenance.PERFORM_LABEL, "true")
            say(f"{node.name}: labelled {slice_maintenance.PERFORM_LABEL}=true")
    except (live.ClusterReadError, BoundaryError) as err:
        raise MaintenanceError(f"cannot read or label the slice's nodes: {err}", exit_code=err.exit_code) from None
    for line in follow(settings, scheduled=bool(notices.scheduled())):
        say(line)


def follow(settings: Settings, *, scheduled: bool) -> list[str]:
    """What happens now and how to follow it, naming the stack and its cluster's context."""
    stack, shape = settings.stack, settings.slice
    labels = f"{slice_maintenance.SCHEDULED_LABEL},{slice_maintenance.ACTIVE_LABEL}"
    selector = slice_maintenance.slice_selector(shape.gke_accelerator, shape.topology)
    now = (
        "GKE starts the host maintenance of the slice now; a large slice may be away up to a few hours (Cloud TPU, "
        '"Manually start a host maintenance event").'
        if scheduled
        else "no maintenance was scheduled on the slice: whether GKE starts one for the label, no page read says; the "
        "status shows whether it does."
    )
    return [
        now,
        f"follow it: `{make_target('status', stack)}` (its slice maintenance lines), or "
        f"`{kubectl(settings, 'get', 'nodes', '-l', selector, '-L', labels)}`; once the slice is back: "
        f"`{make_target('up', stack)}`",
    ]


def main(argv: list[str] | None = None, *, reader_options: dict[str, Any] | None = None) -> int:
    remember(*env_secrets(dict(os.environ)))  # the environment's tokens and passphrases, in every line printed
    parser = argparse.ArgumentParser(prog="python -m tools.maintenance", description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--stack", help="Pulumi.<STACK>.yaml")
    source.add_argument("--config-file", type=Path, help="this stack config file")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a key (--path syntax)"
    )
    parser.add_argument("--kubeconfig", type=Path, help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    parser.add_argument("--context", help="context of the stack's cluster (default: gke_<project>_<region>_<cluster>)")
    parser.add_argument(
        "--force", action="store_true", help="label even while training runs or with no maintenance scheduled"
    )
    args = parser.parse_args(argv)
    hide_python_version_notice()
    try:
        settings = load_settings(args)
        labeler = NodeLabeler(kubeconfig_for(settings, args.kubeconfig, args.context), **(reader_options or {}))
        try:
            start(settings, labeler, lambda line: print(line, flush=True), force=args.force)
        finally:
            labeler.close()
    except TpuRlError as err:  # bad input exits 2; a refusal, no nodes or an unreadable cluster 1
        return report(err)
    return 0


if __name__ == "__main__":
    entry_point(main)
