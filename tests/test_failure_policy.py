"""What the controllers do with the steps' failure policies: a small model of the Job controller's
``podFailurePolicy`` and of JobSet 0.10.1's ``failurePolicy``, run against the real manifests.

- Job controller (kubernetes ``pkg/controller/job/pod_failure_policy.go``, ``matchPodFailurePolicy``): the
  first rule that matches a failed pod decides; ``onExitCodes`` looks at the named container's
  ``terminated.exitCode`` (``In``/``NotIn``), ``onPodConditions`` at the pod's conditions. ``FailJob`` fails
  the Job with reason ``PodFailurePolicy``; ``Ignore`` re-creates the pod without counting; ``Count`` (and no
  match) counts against ``backoffLimit``, past which the Job fails ``BackoffLimitExceeded``.
  A ``FailJob`` on an exit code says so in the Job's failure message: ``Container %s for pod %s/%s failed with exit
  code %v matching %v rule at index %d``.
- JobSet (``pkg/controllers/failure_policy.go``, ``executeFailurePolicy``): rules are tried in order, each
  against every failed Job (``findFirstFailedPolicyRuleAndJob``: ``ruleIsApplicable``, ``onJobFailureReasons``,
  ``onJobFailureMessagePatterns`` as regular expressions searched in the Job's failure message, and
  ``targetReplicatedJobs``); no match is ``RestartJobSet``; a ``RestartJobSet`` past ``maxRestarts`` fails the JobSet
  ``ReachedMaxRestarts``, and ``RestartJobSetAndIgnoreMaxRestarts`` restarts without counting
  (``failurePolicyRecreateAll`` with ``shouldCountTowardsMax`` false).
Pure."""

from __future__ import annotations

import re
from typing import Any

import pytest

from core.names import DRILL_EXIT, SLICE_DOWN_EXIT, STALLED_EXIT
from tests.lifecycle_walk import settings
from workloads.specs.step_specs import plan_workflow

pytestmark = pytest.mark.pure

PLAN = plan_workflow(settings("prod", []))
DISRUPTED = [{"type": "DisruptionTarget", "status": "True"}]


def job_spec(manifest: dict[str, Any], rjob: str) -> dict[str, Any]:
    return next(r for r in manifest["spec"]["replicatedJobs"] if r["name"] == rjob)["template"]["spec"]


def pod_outcome(
    job: dict[str, Any], container: str, exit_code: int, conditions: list[dict[str, str]]
) -> tuple[str, str]:
    """What the Job controller does with one failed pod (FailJob | Ignore | Count), and the Job's failure message
    for a FailJob on an exit code."""
    for index, rule in enumerate((job.get("podFailurePolicy") or {}).get("rules", [])):
        codes = rule.get("onExitCodes")
        if codes is not None:
            if codes.get("containerName") not in (None, container):
                continue
            inside = exit_code in codes["values"]
            if inside == (codes["operator"] == "In"):
                message = (
                    f"Container {container} for pod tpu-rl/run-pathways-head-0-0-x7k2p failed with exit code "
                    f"{exit_code} matching {rule['action']} rule at index {index}"
                )
                return str(rule["action"]), message
            continue
        wanted = rule.get("onPodConditions") or []
        if any(c in conditions for c in wanted):
            return str(rule["action"]), ""
    return "Count", ""


def job_failure(
    job: dict[str, Any], container: str, exit_code: int, conditions: list[dict[str, str]]
) -> tuple[str, str] | None:
    """The Job's failure (reason, message) after one failed pod, or None (the pod is re-created)."""
    action, message = pod_outcome(job, container, exit_code, conditions)
    if action == "FailJob":
        return "PodFailurePolicy", message
    if action == "Ignore":
        return None
    return ("BackoffLimitExceeded", "Job has reached the specified backoff limit") if job["backoffLimit"] == 0 else None


def jobset_action(manifest: dict[str, Any], failed: list[tuple[str, str] | tuple[str, str, str]]) -> str:
    """What JobSet does with its failed Jobs [(replicated Job, failure reason[, message]), oldest first]."""
    policy = manifest["spec"]["failurePolicy"]
    for rule in policy.get("rules", []):
        for rjob, reason, *message in failed:
            if rule.get("onJobFailureReasons") and reason not in rule["onJobFailureReasons"]:
                continue
            patterns = rule.get("onJobFailureMessagePatterns") or []
            if patterns and not any(re.search(p, message[0] if message else "") for p in patterns):
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
        (DRILL_EXIT, [], "PodFailurePolicy", "RestartJobSetAndIgnoreMaxRestarts"),  # the restart drill
        (177, [], "PodFailurePolicy", "FailJobSet"),  # an exit code that ends in the drill's is not it
        (DRILL_EXIT, DISRUPTED, "BackoffLimitExceeded", "RestartJobSet"),  # disrupted while the drill ended it
    ],
    ids=["exception", "oom", "setup", "flag", "preempted", "evicted", "slice-down", "stalled", "drill", "177", "both"],
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
