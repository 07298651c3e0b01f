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

The model, shared by the failure-policy tests and the scenarios that play a training's attempts through its real
script (``tests/test_scenario_slice_wait.py``)."""

from __future__ import annotations

import re
from typing import Any

DISRUPTED = [{"type": "DisruptionTarget", "status": "True"}]
"""The pod condition Kubernetes sets before it stops a pod from outside (an eviction, a preemption)."""


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


def head_exit(manifest: dict[str, Any], exit_code: int, counted: int, conditions: list[dict[str, str]] | None = None):
    """What becomes of a training JobSet whose head's workload container exited ``exit_code`` after ``counted``
    restarts that counted: ``("completed", counted)``, ``("restarted", counted after it)`` or ``("failed", reason)``
    (``FailJobSet``'s rule, or ``ReachedMaxRestarts`` past ``maxRestarts``)."""
    if exit_code == 0 and not conditions:
        return "completed", counted
    head = job_spec(manifest, "pathways-head")
    failure = job_failure(head, "workload-container", exit_code, list(conditions or []))
    if failure is None:
        return "running", counted
    action = jobset_action(manifest, [("pathways-head", *failure)])
    if action == "FailJobSet":
        return "failed", failure[0]
    if action == "RestartJobSetAndIgnoreMaxRestarts":
        return "restarted", counted
    if counted >= manifest["spec"]["failurePolicy"]["maxRestarts"]:
        return "failed", "ReachedMaxRestarts"
    return "restarted", counted + 1
