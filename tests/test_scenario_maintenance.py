"""A TPU maintenance event mid-training, end to end: the real program (``tests.engine``'s model of the engine and the
provider) against the loopback API server, where the slice's nodes go away, the trainer's JobSet restarts and its
workers wait Pending, and Kueue's Workload shows what Kueue 0.17.1 writes (``PodsReady`` False ``WaitForRecovery`` from
the moment the pods stopped being Ready, ``Recovered`` once they are back, or the deactivation past its recovery
budget: ``workloads.observe.recovery`` cites the functions). The program's clock is the model's: no wall waits.

The deploy workflow's continuation (``.github/workflows/deploy.yml``: `make up` under ``timeout --signal=INT`` at
``UP_MINUTES``, then the next round's `make up`) is played as the program sees it: the first `up` is stopped while it
waits (the CLI's SIGINT ends the program's wait: ``tests/test_interrupt.py``), and the next one finds the step
unchanged (a SameStep) and follows it through the rest of the recovery (``tests/test_deploy_workflow.py`` runs the
workflow's own bash)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import yaml

from tests.engine import Stack, StoppedError
from tests.fake_kube import step_pod
from tests.scenario import live, names, trigger
from tools.stack_files import ROOT
from workloads.observe.waiting import POLL_SECONDS

pytestmark = pytest.mark.slow


NAMESPACE = "tpu-rl"
HOUR = 3600.0
SINCE = "2026-11-30T10:02:00Z"
"""When the slice's pods stopped being Ready; the stack's recovery budget (4h30m) ends at 14:32 UTC."""
GONE = (
    "0/4 nodes are available: 1 node(s) had untolerated taint {tpu-rl/pool: cpu-np}, 3 node(s) didn't match Pod's "
    "node affinity/selector. preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
)
"""kube-scheduler's FitError for a worker whose TPU nodes are gone (``schedule_one.go``)."""


def up_minutes() -> float:
    """The deploy workflow's bound on one round's `make up` (its ``UP_MINUTES``)."""
    deploy = yaml.safe_load((ROOT / ".github" / "workflows" / "deploy.yml").read_text())
    (step,) = [s for s in deploy["jobs"]["deploy"]["steps"] if "make up STACK" in s.get("run", "")]
    return float(step["env"]["UP_MINUTES"])


def pods(stack: Stack, name: str, workers: str) -> None:
    """The training step's pods: the head running on cpu-np, the slice's workers ``workers`` (running, or
    unschedulable while its nodes are gone)."""
    obj = stack.cluster.get("JobSet", NAMESPACE, name)
    assert obj is not None
    found = [step_pod(obj, "pathways-head", "running")]
    found += [step_pod(obj, "worker", workers, index=i, message=GONE) for i in range(8)]
    stack.cluster.core[("pods", NAMESPACE)] = found


def training(stack: Stack, name: str, *, restarts: int = 0, recovered: bool = False) -> None:
    """Every pod Ready: the JobSet running, Kueue's Workload admitted with PodsReady True."""
    stack.cluster.set_state("JobSet", NAMESPACE, name, "running", restarts=restarts)
    stack.cluster.kueue(NAMESPACE, name, "recovered" if recovered else "running", since=SINCE)
    pods(stack, name, "running")


def maintenance(stack: Stack, name: str) -> None:
    """The slice's nodes are gone: the trainer died of its lost slice (exit 75), the JobSet restarted (Recreate:
    every Job made again, ``restarts`` 1) and its workers wait Pending; Kueue waits for them (recovery)."""
    stack.cluster.set_state("JobSet", NAMESPACE, name, "pending", restarts=1)
    stack.cluster.kueue(NAMESPACE, name, "recovering", since=SINCE)
    pods(stack, name, "unschedulable")


def timeline(stack: Stack, name: str, events: list[tuple[float, Callable[[Stack, str], None]]]) -> None:
    """The cluster acts at these hours after the first pause of the program's wait for ``name``. Between two events
    the program's clock skips ahead: the wait reads each state right after the event that made it and once more a
    poll before the next event (its bounds are checked at both ends), not every 20 s of hours (each poll is a real
    read through the exec plugin and TLS)."""
    began: list[float] = []
    pending = sorted(events, key=lambda e: e[0])
    fired = [False]

    def on_wait(s: Stack) -> None:
        if not began:
            began.append(s.clock)
        due = [e for e in pending if s.clock - began[0] >= e[0] * HOUR]
        for event in due:
            pending.remove(event)
            event[1](s, name)
        if not due and not fired[0] and pending:
            s.clock = max(s.clock, began[0] + pending[0][0] * HOUR - POLL_SECONDS)
        fired[0] = bool(due)

    stack.on_wait = on_wait


def recovery_line(name: str, until: str = "14:32") -> str:
    return (
        f"JobSet {NAMESPACE}/{name}: Kueue waits for the slice to come back (recovery, until {until} UTC): pod "
        f"{name}-worker-0-0-x7k2p cannot be scheduled yet (the TPU slice pool)"
    )


def finish(s: Stack, name: str) -> None:
    s.finish(name)


def deactivated(s: Stack, name: str) -> None:
    """Kueue's recovery budget passed: with backoffLimitCount 0 it deactivates the Workload (triggerDeactivation)."""
    s.cluster.kueue(NAMESPACE, name, "deactivated")


@pytest.mark.parametrize(
    ("capacity", "until"),
    [((), "14:32"), (("tpu-rl:tpu.capacity=flex-start", "tpu-rl:tpu.reservation="), "16:02")],
    ids=["reservation", "flex-start"],
)
def test_a_maintenance_mid_training_is_followed_through_kueues_recovery_and_the_run_goes_on(stack, capacity, until):
    """The slice is away 4 hours (twice tpu-rl:workflow.stallTimeout, 16 x tpu-rl:workflow.unschedulableTimeout)
    within Kueue's recovery budget (4h30m; flex-start 6h): `up` follows the step, says what Kueue waits for and until
    when, and the export runs once training completes. The restarted head waits for its workers meanwhile instead of
    being ended as stalled (its script: ``tests/test_scenario_slice_wait.py``), so the one restart the lost slice cost
    is all it costs."""
    stack.overrides = [*stack.overrides, *capacity]
    train = names(stack)["train"]
    timeline(
        stack,
        train,
        [
            (0, training),
            (1, maintenance),
            (5, lambda s, n: training(s, n, restarts=1, recovered=True)),
            (6, finish),
        ],
    )
    done = stack.up({"train": "run"})
    assert done.error is None, done.error
    assert done.actions[names(stack)["export"]] == "create", "nobody had to run `up` again"
    assert any(m == recovery_line(train, until) for _, m in done.plan.logs)


def test_the_deploy_workflows_next_round_adopts_a_step_in_recovery_and_follows_it(stack):
    """The slice goes away 20 minutes before the workflow's bound stops the round's `up`; the next round's `up`
    finds the step unchanged (a SameStep) and mid-recovery (Kueue's deadline is the Workload's, from before this
    `up`), follows it past the unschedulable bound until the slice is back, and runs the export."""
    train = names(stack)["train"]
    bound = up_minutes() / 60
    timeline(
        stack,
        train,
        [
            (0, training),
            (bound - 1 / 3, maintenance),
            (bound, lambda s, n: setattr(s, "stop", StoppedError(f"stopped while waiting for {n}"))),
            (bound + 2, lambda s, n: training(s, n, restarts=1, recovered=True)),
            (bound + 3, finish),
        ],
    )
    first = stack.up({"train": "run"})
    assert "stopped while waiting for" in str(first.error)
    assert names(stack)["export"] not in first.actions
    uid = live(stack, "train")["metadata"]["uid"]
    stopped_at = stack.clock

    second = stack.up()
    assert second.error is None, second.error
    assert second.actions[train] == "same" and live(stack, "train")["metadata"]["uid"] == uid, "adopted, not re-run"
    assert stack.clock - stopped_at >= 2 * HOUR, "followed past the unschedulable bound"
    assert any(m == recovery_line(train) for _, m in second.plan.logs)
    assert second.actions[names(stack)["export"]] == "create"


def test_a_maintenance_longer_than_kueues_budget_fails_up_with_one_line_and_the_next_up_resumes(stack):
    """The slice stays away past Kueue's recovery budget: Kueue deactivates the Workload (backoffLimitCount 0) and
    `up` stops with one line naming the budget; the next `up` retries the step (its UID is the trigger), which Kueue
    admits again, and training resumes from its checkpoint."""
    train = names(stack)["train"]
    budget = 4.5
    timeline(
        stack,
        train,
        [(0, training), (1, maintenance), (1 + budget, deactivated)],
    )
    stopped = stack.up({"train": "run"})
    message = str(stopped.error)
    assert message.startswith(f"Kueue stopped JobSet {NAMESPACE}/{train} (DeactivatedDueToRequeuingLimitExceeded: ")
    assert (
        "were not all Ready again within tpu-rl:kueue.recoveryTimeout (4h30m) after they stopped being Ready at "
        in (message)
    )
    assert "10:02 UTC" in message and "raise tpu-rl:kueue.recoveryTimeout" in message and "\n" not in message
    uid = live(stack, "train")["metadata"]["uid"]

    stack.on_wait = None
    retried = stack.up()
    assert retried.error is None, retried.error
    assert retried.actions[train] == "replace" and trigger(retried.plan, train) == uid
    assert any(
        "was stopped by Kueue (DeactivatedDueToRequeuingLimitExceeded); retrying it" in m for _, m in retried.plan.logs
    )
    assert retried.actions[names(stack)["export"]] == "create"
