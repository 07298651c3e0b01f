"""What the controllers do with the steps' failure policies: the Job controller's ``podFailurePolicy`` and JobSet
0.10.1's ``failurePolicy`` (``tests.jobset_model`` cites both), run against the real manifests. Pure."""

from __future__ import annotations

import pytest

from core.names import DRILL_EXIT, SLICE_DOWN_EXIT, SLICE_WAIT_EXIT, STALLED_EXIT
from tests.jobset_model import DISRUPTED, job_failure, job_spec, jobset_action, pod_outcome
from tests.lifecycle_walk import settings
from workloads.specs.step_specs import plan_workflow

pytestmark = pytest.mark.pure

PLAN = plan_workflow(settings("prod", []))


TRAIN = PLAN.train.manifest
HEAD = job_spec(TRAIN, "pathways-head")


@pytest.mark.parametrize(
    ("exit_code", "conditions", "reason", "action"),
    [
        (1, [], "PodFailurePolicy", "FailJobSet"),  # a Python exception
        (137, [], "PodFailurePolicy", "FailJobSet"),  # OOMKilled
        (3, [], "PodFailurePolicy", "FailJobSet"),  # a setup check
        (2, [], "PodFailurePolicy", "FailJobSet"),  # a bad flag (absl exits 2)
        (143, DISRUPTED, "BackoffLimitExceeded", "RestartJobSet"),  # preempted: SIGTERM, then 143
        (137, DISRUPTED, "BackoffLimitExceeded", "RestartJobSet"),  # evicted past its grace period
        (SLICE_DOWN_EXIT, [], "BackoffLimitExceeded", "RestartJobSet"),  # a TPU slice lost under the trainer
        (STALLED_EXIT, [], "BackoffLimitExceeded", "RestartJobSet"),  # ended by the stall watchdog
        (DRILL_EXIT, [], "PodFailurePolicy", "RestartJobSetAndIgnoreMaxRestarts"),  # the restart drill
        (177, [], "PodFailurePolicy", "FailJobSet"),  # an exit code that ends in the drill's is not it
        (DRILL_EXIT, DISRUPTED, "BackoffLimitExceeded", "RestartJobSet"),  # disrupted while the drill ended it
        (SLICE_WAIT_EXIT, [], "PodFailurePolicy", "FailJobSet"),  # the slice not back within the recovery budget
    ],
    ids=[
        "exception",
        "oom",
        "setup",
        "flag",
        "preempted",
        "evicted",
        "slice-down",
        "stalled",
        "drill",
        "177",
        "both",
        "slice-absent",
    ],
)
def test_the_trainer_fails_at_once_and_only_a_disruption_restarts(exit_code, conditions, reason, action):
    failure = job_failure(HEAD, "workload-container", exit_code, conditions)
    assert failure is not None and failure[0] == reason
    assert jobset_action(TRAIN, [("pathways-head", *failure)]) == action


def test_the_drill_restarts_only_the_heads_job_and_counts_against_no_restart():
    """The drill's rule names the head's Job and is the only one that ignores maxRestarts: a worker Job that failed
    with the same words would not match it, and every other restart is counted."""
    failure = job_failure(HEAD, "workload-container", DRILL_EXIT, [])
    assert failure is not None
    assert jobset_action(TRAIN, [("worker", *failure)]) == "FailJobSet"
    rules = TRAIN["spec"]["failurePolicy"]["rules"]
    assert [r["name"] for r in rules if r["action"] == "RestartJobSetAndIgnoreMaxRestarts"] == ["restartDrill"]


def test_jobs_failed_both_ways_by_the_same_reconcile_restart():
    """A worker Job out of its in-place restarts and the trainer's exit 1 seen together: the restart rule
    comes first and is tried against every failed Job (a failure seen alone first is final: FailJobSet)."""
    assert jobset_action(TRAIN, [("pathways-head", "PodFailurePolicy"), ("worker", "BackoffLimitExceeded")]) == (
        "RestartJobSet"
    )


def test_the_deadline_fails_the_jobset():
    assert jobset_action(TRAIN, [("pathways-head", "DeadlineExceeded")]) == "FailJobSet"


def test_a_worker_restarts_in_place_and_its_job_fails_only_past_its_backoff():
    worker = job_spec(TRAIN, "worker")
    assert worker["template"]["spec"]["restartPolicy"] == "OnFailure" and "podFailurePolicy" not in worker
    assert worker["backoffLimit"] == 8 * 4, "four in-place restarts per TPU VM (xpk)"


@pytest.mark.parametrize("step", ["convert", "export"])
@pytest.mark.parametrize(
    ("exit_code", "conditions", "reason"),
    [(1, [], "PodFailurePolicy"), (137, [], "PodFailurePolicy"), (3, [], "PodFailurePolicy"), (143, DISRUPTED, None)],
    ids=["exception", "oom", "setup", "disrupted"],
)
def test_a_cpu_step_fails_at_once_and_a_disrupted_pod_is_re_created(step, exit_code, conditions, reason):
    manifest = getattr(PLAN, step).manifest
    job = job_spec(manifest, step)
    failure = job_failure(job, step, exit_code, conditions)
    assert (failure[0] if failure else None) == reason
    if failure:
        assert jobset_action(manifest, [(step, *failure)]) == "RestartJobSet"  # no rules: the default...
        assert manifest["spec"]["failurePolicy"]["maxRestarts"] == 0, "...with no restart left: Failed"


def test_an_exit_of_zero_never_fails_a_job():
    assert pod_outcome(HEAD, "workload-container", 0, []) == ("Count", "")
