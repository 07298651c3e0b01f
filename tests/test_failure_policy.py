"""What the controllers do with the steps' failure policies: a small model of the Job controller's
``podFailurePolicy`` and of JobSet 0.10.1's ``failurePolicy``, run against the real manifests.

- Job controller (kubernetes ``pkg/controller/job/pod_failure_policy.go``, ``matchPodFailurePolicy``): the
  first rule that matches a failed pod decides; ``onExitCodes`` looks at the named container's
  ``terminated.exitCode`` (``In``/``NotIn``), ``onPodConditions`` at the pod's conditions. ``FailJob`` fails
  the Job with reason ``PodFailurePolicy``; ``Ignore`` re-creates the pod without counting; ``Count`` (and no
  match) counts against ``backoffLimit``, past which the Job fails ``BackoffLimitExceeded``.
- JobSet (``pkg/controllers/failure_policy.go``, ``executeFailurePolicy``): rules are tried in order, each
  against every failed Job (``findFirstFailedPolicyRuleAndJob``: ``onJobFailureReasons`` and
  ``targetReplicatedJobs``); no match is ``RestartJobSet``; a restart past ``maxRestarts`` fails the JobSet
  ``ReachedMaxRestarts``.
Pure."""

from __future__ import annotations

from typing import Any

import pytest

from core.names import SLICE_DOWN_EXIT, STALLED_EXIT
from tests.lifecycle_walk import settings
from workloads.specs.step_specs import plan_workflow

pytestmark = pytest.mark.pure

PLAN = plan_workflow(settings("prod", []))
DISRUPTED = [{"type": "DisruptionTarget", "status": "True"}]


def job_spec(manifest: dict[str, Any], rjob: str) -> dict[str, Any]:
    return next(r for r in manifest["spec"]["replicatedJobs"] if r["name"] == rjob)["template"]["spec"]


def pod_outcome(job: dict[str, Any], container: str, exit_code: int, conditions: list[dict[str, str]]) -> str:
    """What the Job controller does with one failed pod: FailJob | Ignore | Count."""
    for rule in (job.get("podFailurePolicy") or {}).get("rules", []):
        codes = rule.get("onExitCodes")
        if codes is not None:
            if codes.get("containerName") not in (None, container):
                continue
            inside = exit_code in codes["values"]
            if inside == (codes["operator"] == "In"):
                return str(rule["action"])
            continue
        wanted = rule.get("onPodConditions") or []
        if any(c in conditions for c in wanted):
            return str(rule["action"])
    return "Count"


def job_failure(job: dict[str, Any], container: str, exit_code: int, conditions: list[dict[str, str]]) -> str | None:
    """The Job's failure reason after one failed pod, or None (the pod is re-created)."""
    action = pod_outcome(job, container, exit_code, conditions)
    if action == "FailJob":
        return "PodFailurePolicy"
    if action == "Ignore":
        return None
    return "BackoffLimitExceeded" if job["backoffLimit"] == 0 else None


def jobset_action(manifest: dict[str, Any], failed: list[tuple[str, str]]) -> str:
    """What JobSet does with its failed Jobs [(replicated Job, failure reason), oldest first]."""
    policy = manifest["spec"]["failurePolicy"]
    for rule in policy.get("rules", []):
        for rjob, reason in failed:
            if rule.get("onJobFailureReasons") and reason not in rule["onJobFailureReasons"]:
                continue
            if rule.get("targetReplicatedJobs") and rjob not in rule["targetReplicatedJobs"]:
                continue
            return str(rule["action"])
    return "RestartJobSet"


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
    ],
    ids=["exception", "oom", "setup", "flag", "preempted", "evicted", "slice-down", "stalled"],
)
def test_the_trainer_fails_at_once_and_only_a_disruption_restarts(exit_code, conditions, reason, action):
    assert job_failure(HEAD, "workload-container", exit_code, conditions) == reason
    assert jobset_action(TRAIN, [("pathways-head", reason)]) == action


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
    assert job_failure(job, step, exit_code, conditions) == reason
    if reason:
        assert jobset_action(manifest, [(step, reason)]) == "RestartJobSet"  # no rules: the default...
        assert manifest["spec"]["failurePolicy"]["maxRestarts"] == 0, "...with no restart left: Failed"


def test_an_exit_of_zero_never_fails_a_job():
    assert pod_outcome(HEAD, "workload-container", 0, []) == "Count"
