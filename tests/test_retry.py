"""A training run that failed in an earlier `up` is replaced on the next one; a completed retry is left alone."""

from __future__ import annotations

import pytest

from infra.plan import plan_stack
from infra.plan.offline import ROOT
from tests.conftest import SENTINEL_TOKEN
from workloads.retry import RETRY_ANNOTATION, retry_marker

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
FAILED = {"metadata": {"uid": "uid-run-1", "annotations": {}}, "status": {"terminalState": "Failed"}}
COMPLETED_RETRY = {
    "metadata": {"uid": "uid-run-2", "annotations": {RETRY_ANNOTATION: "uid-run-1"}},
    "status": {"terminalState": "Completed"},
}


@pytest.mark.parametrize(
    ("live", "marker"),
    [
        (None, ""),
        ({"metadata": {"uid": "u"}, "status": {}}, ""),
        ({"metadata": {"uid": "u"}, "status": {"terminalState": "Completed"}}, ""),
        (FAILED, "uid-run-1"),
        (COMPLETED_RETRY, "uid-run-1"),
        ({**COMPLETED_RETRY, "status": {"terminalState": "Failed"}}, "uid-run-2"),
    ],
)
def test_retry_marker(live, marker):
    assert retry_marker(live) == marker


def _up(monkeypatch, live):
    monkeypatch.setattr("workloads.retry.read_live_jobset", lambda kubeconfig, namespace, name: live)
    monkeypatch.setattr("workloads.workflow._check_artifact", lambda kind, uri: None)
    plan, _ = plan_stack(
        ROOT / "Pulumi.prod.yaml",
        ["tpu-rl:workflow.preflight=false"],
        live=True,
        secrets={"tpu-rl:hfToken": SENTINEL_TOKEN},
        status_for=lambda type_, inputs: {"terminalState": "Completed"} if type_ == JOBSET else None,
    )
    return plan


def test_first_run_has_no_marker(monkeypatch):
    plan = _up(monkeypatch, None)
    assert plan.replacement_triggers["train"] == ""
    assert RETRY_ANNOTATION not in plan.one(JOBSET, "train")["inputs"]["metadata"]["annotations"]


def test_a_failed_run_is_replaced(monkeypatch):
    plan = _up(monkeypatch, FAILED)
    assert plan.replacement_triggers["train"] == "uid-run-1", "a new trigger value makes Pulumi replace the JobSet"
    annotations = plan.one(JOBSET, "train")["inputs"]["metadata"]["annotations"]
    assert annotations[RETRY_ANNOTATION] == "uid-run-1"
    assert plan.one(JOBSET, "train")["options"]["deleteBeforeReplace"] is True


def test_a_completed_retry_is_stable(monkeypatch):
    retried = _up(monkeypatch, FAILED)
    after = _up(monkeypatch, COMPLETED_RETRY)
    assert after.replacement_triggers["train"] == retried.replacement_triggers["train"]
    assert after.one(JOBSET, "train")["inputs"] == retried.one(JOBSET, "train")["inputs"]
