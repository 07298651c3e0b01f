"""A step's logs, of its current or last attempt, through the Kubernetes client (no kubectl).

    python -m tools.logs (--stack NAME | --config-file FILE) [--set KEY=VALUE] --step STEP [--tail N] [--pod POD]

Reads the stack's config and the cluster as `make status` does (``tools.status``: the context
``gke_<project>_<region>_<cluster>``, every read bounded), then the step's JobSet and its pods. The attempt is
the newest: a JobSet restart makes new Jobs, whose pods carry the attempt in the label
``jobset.sigs.k8s.io/restart-attempt`` (kubernetes-sigs/jobset ``pkg/constants/constants.go`` ``RestartsKey``, "the
restart attempt number the JobSet is currently on"). Of that attempt's pods it shows the one that failed, else
the step's coordinator (its first replicated Job's first pod: a CPU step's only pod, training's Pathways head),
or the pod ``--pod`` names; the container is the step's own (``Step.container``) or, in a failed pod without
it, the one that failed. The last ``--tail`` lines (at most ``MAX_LOG_BYTES``), redacted as the status is
(``core.redact``), go to stdout; which pod and container they are, and the other pods, to stderr.

Exit 0 with the logs; 1 when the step has no pod yet (not started, or its pods are gone); 2 for bad input (an
unknown step, a step this stack does not run, a config problem) or a cluster that cannot be read, one line each.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core import deadline
from core.bounded import Cap
from core.errors import BadInputError, TpuRlError
from core.redact import env_secrets, redact_text, remember, scrub
from core.settings import Settings
from core.steps import STEPS
from infra.k8s import live, live_objects
from infra.transports import read_response
from tools.notices import hide_python_version_notice
from tools.process import entry_point, report
from tools.status import kubeconfig_for, load_settings
from workloads.specs.step_specs import Step

RESTART_LABEL = "jobset.sigs.k8s.io/restart-attempt"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
DEFAULT_TAIL = 200
MAX_TAIL = 10_000
MAX_LOG_BYTES = 4 * 1024 * 1024
"""What one read asks the API server for at most (``limitBytes``): the tail of a long log, never all of it."""
LOG_CAP = Cap(MAX_LOG_BYTES, live.CAP.fix, cut=True)
"""The one bounded read (``core.bounded``) of a log: ``limitBytes`` "may return slightly more or slightly less than
the specified limit" (the API's ``PodLogOptions``), so the first ``MAX_LOG_BYTES`` are kept, not refused."""


class LogsError(BadInputError):
    """Bad input, or the cluster cannot be read (one line, exit 2)."""


class NoPodsError(TpuRlError):
    """The step has no pod to read (one line, exit 1)."""


@dataclass(frozen=True)
class Choice:
    """The pod and container whose log is shown, and why."""

    pod: str
    container: str
    attempt: int
    why: str
    others: tuple[str, ...]


class LogReader(live.ClusterReader):
    """``ClusterReader`` plus a pod's log: the same client, budget, retries and one-line errors."""

    def pod_log(self, namespace: str, pod: str, container: str, tail: int) -> str:
        path = f"/api/v1/namespaces/{namespace}/pods/{pod}/log"
        api = self._api()
        budget = self.budgets.read
        timeout = (budget.connect, budget.read)

        def attempt(left: float) -> bytes:
            def call() -> bytes:
                response = api.core.read_namespaced_pod_log(
                    pod,
                    namespace,
                    container=container,
                    tail_lines=tail,
                    limit_bytes=MAX_LOG_BYTES,
                    _preload_content=False,
                    _request_timeout=timeout,
                )
                return read_response(response, LOG_CAP, f"GET {self.where}{path}")

            return deadline.call(call, left, cancel=self.close)

        try:
            body = deadline.retrying(attempt, budget, wait_for=self._transient)
        except deadline.DeadlineExceededError:
            raise self._fail(
                live.ClusterReadError(f"the cluster at {self.where} did not answer {path} within {budget.total:g} s")
            ) from None
        except live.ClusterReadError as err:
            raise self._fail(err) from None
        except Exception as err:  # noqa: BLE001 (the client's errors, described in one line as every read's)
            raise self._fail(self._describe(err, path)) from None
        return body.decode("utf-8", errors="replace")


def _step(settings: Settings, name: str, steps: dict[str, Step]) -> Step:
    if name in steps:
        return steps[name]
    if name not in STEPS:
        raise LogsError(f"--step {scrub(name, limit=40)!r} is not a step; the steps are {', '.join(STEPS)}")
    facts = STEPS[name]
    why = ""
    if facts.switch:  # a boolean of the step's own, or a key the step runs with when set (tpu-rl:publish.repo)
        why = f" ({facts.switch} is {'false' if facts.switch_doc else 'not set'})"
    raise LogsError(f"stack {settings.stack} runs no {name} step{why}; its steps are {', '.join(steps)}")


def _attempt(pod: live_objects.Pod) -> int:
    text = pod.metadata.labels.get(RESTART_LABEL, "0")
    return int(text) if text.isascii() and text.isdigit() else 0


def _failed(pod: live_objects.Pod) -> str | None:
    """The container that failed in ``pod`` (its name; the pod's phase alone: ``""``), or None."""
    for status in pod.status.container_statuses:
        code = status.state.terminated.exit_code if status.state.terminated else None
        if code not in (None, 0):
            return status.name
    return "" if pod.status.phase == "Failed" else None


def _order(pod: live_objects.Pod) -> tuple[int, int, str]:
    """The coordinator first: job index 0, completion index 0 (then by name)."""
    labels = pod.metadata.labels

    def index(key: str) -> int:
        text = labels.get(key, "0")
        return int(text) if text.isascii() and text.isdigit() else 0

    return index(JOB_INDEX_LABEL), index(COMPLETION_INDEX_LABEL), pod.metadata.name


def choose(step: Step, pods: list[live_objects.Pod], wanted: str | None = None) -> Choice:
    """Which pod (and container) of the step's pods to read: ``wanted``, else of the newest attempt the one that
    failed, else the coordinator (module docstring)."""
    if not pods:
        raise NoPodsError(
            f"step {step.step} (JobSet {step.name}) has no pod yet: it has not started, or its pods are gone"
        )
    attempt = max(_attempt(pod) for pod in pods)
    newest = sorted((pod for pod in pods if _attempt(pod) == attempt), key=_order)
    if wanted is not None:
        chosen = next((pod for pod in pods if pod.metadata.name == wanted), None)
        if chosen is None:
            names = ", ".join(pod.metadata.name for pod in newest)
            raise LogsError(f"--pod {scrub(wanted, limit=80)!r} is not a pod of step {step.step}; its pods: {names}")
        why, failed = "chosen with --pod", _failed(chosen)
    else:
        failing = [pod for pod in newest if _failed(pod) is not None]
        if failing:
            chosen, why = failing[0], "failed"
        else:
            first_job = step.manifest["spec"]["replicatedJobs"][0]["name"]
            leaders = [pod for pod in newest if pod.metadata.labels.get(REPLICATED_JOB_LABEL) == first_job]
            chosen, why = (leaders or newest)[0], "the coordinator"
        failed = _failed(chosen)
    containers = [container.name for container in chosen.spec.containers]
    if failed:
        container = failed  # the container that failed says why
    elif step.container in containers or not containers:
        container = step.container
    else:
        container = containers[0]  # another pod of the step (a TPU worker): its own container
    others = tuple(pod.metadata.name for pod in newest if pod is not chosen)
    return Choice(chosen.metadata.name, container, _attempt(chosen), why, others)


def read_logs(settings: Settings, step: Step, reader: LogReader, tail: int, wanted: str | None) -> tuple[Choice, str]:
    """The chosen pod and its redacted log (bounded reads)."""
    namespace = settings.namespace
    try:
        if reader.get(live_objects.JOBSET_API, "JobSet", namespace, step.name) is None:
            raise NoPodsError(f"step {step.step} has not started: JobSet {namespace}/{step.name} does not exist")
        pods = reader.step_pods(namespace, step.name)
        choice = choose(step, pods, wanted)
        text = reader.pod_log(namespace, choice.pod, choice.container, tail)
    except live.ClusterReadError as err:
        raise LogsError(f"cannot read the cluster: {err}", exit_code=err.exit_code) from None
    return choice, redact_text(text)


def _tail(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= MAX_TAIL:
        raise argparse.ArgumentTypeError(f"{scrub(text, limit=20)!r} is not a number of lines from 1 to {MAX_TAIL}")
    return int(text)


def main(argv: list[str] | None = None, *, reader_options: dict[str, Any] | None = None) -> int:
    remember(*env_secrets(dict(os.environ)))  # the environment's tokens and passphrases, in every line printed
    parser = argparse.ArgumentParser(prog="python -m tools.logs", description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--stack", help="Pulumi.<STACK>.yaml")
    source.add_argument("--config-file", type=Path, help="this stack config file")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a key (--path syntax)"
    )
    parser.add_argument("--step", required=True, help=f"the step: {', '.join(STEPS)}")
    parser.add_argument("--tail", type=_tail, default=DEFAULT_TAIL, help=f"the last N lines (default {DEFAULT_TAIL})")
    parser.add_argument("--pod", help="this pod of the step instead (the list is printed with the logs)")
    parser.add_argument("--kubeconfig", type=Path, help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    parser.add_argument("--context", help="context of the stack's cluster (default: gke_<project>_<region>_<cluster>)")
    args = parser.parse_args(argv)
    hide_python_version_notice()
    try:
        from workloads.specs.step_specs import plan_workflow

        settings = load_settings(args)
        if not settings.workflow.enabled:
            raise LogsError(f"stack {settings.stack} runs no workflow (tpu-rl:workflow.enabled is false)")
        plan = plan_workflow(settings)
        step = _step(settings, args.step, {s.step: s for s in plan.steps})
        reader = LogReader(kubeconfig_for(settings, args.kubeconfig, args.context), **(reader_options or {}))
        try:
            choice, text = read_logs(settings, step, reader, args.tail, args.pod)
        finally:
            reader.close()
    except TpuRlError as err:  # bad input exits 2; an unreadable cluster or a step without pods (NoPodsError) 1
        return report(err)
    others = f"; other pods: {', '.join(choice.others)} (--pod NAME)" if choice.others else ""
    print(
        f"logs of {choice.pod}, container {choice.container} (attempt {choice.attempt}, {choice.why}){others}",
        file=sys.stderr,
    )
    sys.stdout.write(text if not text or text.endswith("\n") else text + "\n")
    return 0


if __name__ == "__main__":
    entry_point(main)
