"""Run lifecycle: identity decides replacement, an interrupted `up` re-attaches, a failed step is retried.

The engine behaviour these options rely on is cited in workloads/steps.py, workloads/live_state.py and the
README ("What happens when..."); here everything the mock runtime can show is pinned.
"""

from __future__ import annotations

import re

import pulumi
import pytest

from infra.config.values import format_duration
from infra.k8s import live
from infra.plan import plan_stack
from infra.plan.stack_files import ROOT
from tests.conftest import JOB, JOBSET, SENTINEL_TOKEN, plan_of, step_resources
from tests.lifecycle_walk import STEPS, settings, table, walk
from workloads.live_state import RETRY_ANNOTATION
from workloads.steps import AWAIT_GRACE_SECONDS, OPERATIONAL_PATHS, plan_workflow

README = (ROOT / "README.md").read_text()


@pytest.fixture(scope="module")
def walks():
    return {stack: walk(stack) for stack in ("dev", "prod")}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_key_renames_a_step_or_is_ignored(walks, stack):
    """Walks every key of the schema (a new key is covered automatically; the walk fails if it cannot
    find a valid other value). classify() fails on any step that keeps its name while a field outside
    its ignoreChanges changed."""
    outcomes = walks[stack]
    from infra.config.schema import FIELDS

    assert set(outcomes) == {f.key for f in FIELDS}
    ignored = {key for key, result in outcomes.items() if "ignored" in result.values()}
    assert ignored <= {
        "tpu-rl:workflow.maxRestarts",
        "tpu-rl:tpu.capacity",  # the default restarts follow the capacity mode
        "tpu-rl:tpu.reservation",  # on dev it switches the capacity to reservation
        "tpu-rl:workflow.timeouts.convert",
        "tpu-rl:workflow.timeouts.train",
        "tpu-rl:workflow.timeouts.export",
    }, "only operational settings may change a step without renaming it"
    for key in ("tpu-rl:workflow.timeouts.train", "tpu-rl:workflow.maxRestarts"):
        assert outcomes[key] == {"convert": "kept", "train": "ignored", "export": "kept"}, key
    for key in ("tpu-rl:training.learningRate", "tpu-rl:training.numBatches", "tpu-rl:images.pathwaysServer"):
        assert outcomes[key] == {"convert": "kept", "train": "re-runs", "export": "re-runs"}, key
    for key in ("tpu-rl:model.revision", "tpu-rl:images.maxtext", "tpu-rl:namespace", "tpu-rl:bucketName"):
        assert set(outcomes[key].values()) == {"re-runs"}, key
    for key in ("tpu-rl:hfToken", "tpu-rl:cpuPool.machineType", "tpu-rl:gke.maintenanceExclusion"):
        assert set(outcomes[key].values()) == {"kept"}, key


def test_readme_publishes_what_reruns_when_you_change_a_key(walks):
    expected = table(walks["prod"])
    assert expected in README, "README's table is stale; it should read:\n" + expected


@pytest.mark.parametrize(
    ("stack", "overrides"),
    [
        ("dev", ()),
        ("prod", ()),
        ("prod", ("tpu-rl:workflow.timeouts.train=30h", "tpu-rl:workflow.maxRestarts=0")),
        ("prod", ("tpu-rl:tpu.slices=2", "tpu-rl:training.optimizer=adamw")),
    ],
)
def test_the_walk_sees_what_the_program_registers(stack, overrides):
    """The pure builders the walk uses are exactly what the program registers under the mock runtime."""
    registered = step_resources(plan_of(stack, *overrides))
    built = plan_workflow(settings(stack, list(overrides)))
    for step in built.steps:
        resource = registered[step.step]
        assert resource["name"] == step.name == resource["inputs"]["metadata"]["name"]
        inputs = {**resource["inputs"], "metadata": dict(resource["inputs"]["metadata"])}
        annotations = inputs["metadata"].pop("annotations")
        expected = {**step.manifest, "metadata": dict(step.manifest["metadata"])}
        assert annotations == {
            **expected["metadata"].pop("annotations"),
            **{k: v for k, v in annotations.items() if k == "tpu-rl/input"},
        }
        assert inputs == expected
        options = resource["options"]
        assert options["ignoreChanges"] == list(step.ignore_changes) == list(OPERATIONAL_PATHS[step.kind])
        assert options["customTimeouts"]["create"] == format_duration(step.await_seconds)


def test_step_options_never_replace_a_step_for_anything_but_its_identity(prod_plan):
    for step, resource in step_resources(prod_plan).items():
        options = resource["options"]
        assert options["replaceOnChanges"] == [], "'*' would also match #initerror and kill a running step"
        assert options["deleteBeforeReplace"] is True, "a retry re-uses the name"
        assert options["deletedWith"] == "cluster" and options["provider"] == "gke"
        assert "pulumi.com/replaceUnready" not in resource["inputs"]["metadata"]["annotations"], (
            "replaceUnready replaces a Job that is still running"
        )
        assert resource["name"].startswith(f"gemma4-26b-{step}-")


@pytest.mark.pure
@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_pulumi_waits_longer_than_each_steps_own_deadline(stack):
    s = settings(stack, [])
    for step in plan_workflow(s).steps:
        deadline = step.deadline_seconds
        attempts = 1 + s.workflow.max_restarts if step.kind == "JobSet" else 1
        assert step.await_seconds == attempts * (deadline + AWAIT_GRACE_SECONDS)
        assert step.await_seconds > attempts * deadline
        manifest = step.manifest
        if step.kind == "Job":
            assert manifest["spec"]["activeDeadlineSeconds"] == deadline == s.workflow.timeouts[step.step]
        else:
            head = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]
            assert head["activeDeadlineSeconds"] == deadline == s.workflow.timeouts["train"]
            assert manifest["spec"]["failurePolicy"]["maxRestarts"] == s.workflow.max_restarts


def test_prod_waits_for_two_24h_attempts():
    resource = step_resources(plan_of("prod"))["train"]
    assert resource["options"]["customTimeouts"] == {"create": "48h30m", "update": "48h30m", "delete": "20m"}


def test_the_names_the_next_up_would_use_are_stable():
    first = {s: r["name"] for s, r in step_resources(plan_of("prod")).items()}
    again = plan_stack(ROOT / "Pulumi.prod.yaml", secrets={"tpu-rl:hfToken": SENTINEL_TOKEN})[0]
    assert {s: r["name"] for s, r in step_resources(again).items()} == first
    assert all(re.fullmatch(rf"gemma4-26b-{s}-[0-9a-f]{{10}}", n) for s, n in first.items())


def test_the_kubernetes_provider_adopts_a_run_a_killed_up_created(prod_plan):
    provider = prod_plan.one("pulumi:providers:kubernetes", "gke")["inputs"]
    assert provider["upsertExistingObjects"] == "true" or provider["upsertExistingObjects"] is True
    assert provider["clusterIdentifier"] == "my-tpu-prod-project/us-east5/tpu-rl-prod"


# ---------------------------------------------------------------------------------------------
# What the next `up` does, by the live state of each step


def job(name, *, failed=False, complete=False, uid="uid-j", deadline=14400, retry_of=""):
    conditions = (
        [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "too many"}]
        if (failed)
        else [{"type": "Complete", "status": "True"}]
        if complete
        else []
    )
    return {
        "kind": "Job",
        "metadata": {"name": name, "uid": uid, "annotations": {RETRY_ANNOTATION: retry_of} if retry_of else {}},
        "spec": {"activeDeadlineSeconds": deadline, "backoffLimit": 1},
        "status": {"conditions": conditions},
    }


def jobset(name, state="", *, uid="uid-t", restarts=1, deadline=86400, retry_of=""):
    return {
        "kind": "JobSet",
        "metadata": {"name": name, "uid": uid, "annotations": {RETRY_ANNOTATION: retry_of} if retry_of else {}},
        "spec": {
            "failurePolicy": {"maxRestarts": restarts},
            "replicatedJobs": [{"template": {"spec": {"activeDeadlineSeconds": deadline}}}],
        },
        "status": {
            "terminalState": state,
            "conditions": [{"type": "Failed", "status": "True", "reason": "FailedJobs", "message": "jobset failed"}]
            if state == "Failed"
            else [],
        },
    }


def completed(type_, inputs):
    if type_ == JOBSET:
        return {"terminalState": "Completed"}
    if type_ == JOB:
        return {"conditions": [{"type": "Complete", "status": "True"}]}
    return None


@pytest.fixture
def artifacts_present(monkeypatch):
    """Every artifact check passes (the checks themselves run against fake-gcs-server in test_artifacts)."""

    def names(client, uri, limit=0):
        if uri.endswith("/actor/"):
            return ["50/commit_success.txt", "50/model_params/x"]
        return ["config.json", "model.safetensors", "tokenizer.json", "_METADATA"]

    monkeypatch.setattr("workloads.artifacts.object_names", names)
    monkeypatch.setattr("workloads.artifacts.storage_client", lambda: object())


NAMES = {s: r["name"] for s, r in step_resources(plan_of("prod", "tpu-rl:workflow.preflight=false")).items()}


def up(monkeypatch, objects=None, *, preview=False, reader=None, overrides=()):
    """The program as in `pulumi up` (or preview), with the cluster answering ``objects`` by name."""
    objects = objects or {}

    def get_json(kubeconfig, path, **kwargs):
        if reader is not None:
            return reader(path)
        if "?labelSelector=" in path:
            return {"items": [o for o in objects.values() if o["kind"] == "JobSet"]}
        return objects.get(path.rsplit("/", 1)[-1])

    monkeypatch.setattr(live, "get_json", get_json)
    plan, _ = plan_stack(
        ROOT / "Pulumi.prod.yaml",
        ["tpu-rl:workflow.preflight=false", *overrides],
        live=True,
        preview=preview,
        secrets={"tpu-rl:hfToken": SENTINEL_TOKEN},
        status_for=completed,
        raise_errors=False,
    )
    return plan


def annotations(plan, step):
    return plan.one(JOBSET if step == "train" else JOB, NAMES[step])["inputs"]["metadata"]["annotations"]


def test_first_up_creates_every_step_without_markers(monkeypatch, artifacts_present):
    plan = up(monkeypatch)
    assert plan.error is None, plan.error
    for step in STEPS:
        assert plan.replacement_triggers[NAMES[step]] == ""
        assert RETRY_ANNOTATION not in annotations(plan, step)


@pytest.mark.parametrize(
    ("step", "failed"),
    [("convert", job(NAMES["convert"], failed=True, uid="uid-c1")), ("train", jobset(NAMES["train"], "Failed"))],
)
def test_a_step_that_ended_failed_is_retried(monkeypatch, artifacts_present, step, failed):
    plan = up(monkeypatch, {NAMES[step]: failed})
    assert plan.error is None, plan.error
    uid = failed["metadata"]["uid"]
    assert plan.replacement_triggers[NAMES[step]] == uid, "a new trigger value makes Pulumi replace the object"
    assert annotations(plan, step)[RETRY_ANNOTATION] == uid
    others = [s for s in STEPS if s != step]
    assert all(plan.replacement_triggers[NAMES[s]] == "" for s in others)


def test_a_completed_retry_is_stable(monkeypatch, artifacts_present):
    retried = up(monkeypatch, {NAMES["train"]: jobset(NAMES["train"], "Failed", uid="uid-1")})
    after = up(monkeypatch, {NAMES["train"]: jobset(NAMES["train"], "Completed", uid="uid-2", retry_of="uid-1")})
    assert after.replacement_triggers[NAMES["train"]] == retried.replacement_triggers[NAMES["train"]] == "uid-1"
    assert after.one(JOBSET, NAMES["train"])["inputs"] == retried.one(JOBSET, NAMES["train"])["inputs"]


def test_a_running_step_is_re_attached_not_replaced(monkeypatch, artifacts_present):
    """After Ctrl-C or a Pulumi timeout the run goes on: same name, same trigger, nothing to replace."""
    running = {NAMES["train"]: jobset(NAMES["train"], ""), NAMES["convert"]: job(NAMES["convert"], complete=True)}
    plan = up(monkeypatch, running)
    assert plan.error is None, plan.error
    assert plan.replacement_triggers[NAMES["train"]] == ""
    assert RETRY_ANNOTATION not in annotations(plan, "train")


def test_a_retry_that_would_keep_changed_operational_values_stops_up(monkeypatch, artifacts_present):
    failed = {NAMES["train"]: jobset(NAMES["train"], "Failed", deadline=3600)}
    plan = up(monkeypatch, failed)
    assert isinstance(plan.error, pulumi.RunError)
    message = str(plan.error)
    assert f"JobSet tpu-rl/{NAMES['train']} failed (FailedJobs)" in message
    assert "deadline 3600 s (configured 86400 s)" in message
    assert f"kubectl delete jobset -n tpu-rl {NAMES['train']} && pulumi refresh --yes" in message
    preview = up(monkeypatch, failed, preview=True)
    assert preview.error is None and any("deadline 3600 s" in w for w in preview.warnings())


def test_another_run_holding_the_slice_stops_up_but_only_warns_in_preview(monkeypatch, artifacts_present):
    other = "gemma4-26b-train-0123456789"
    plan = up(monkeypatch, {other: jobset(other, "")})
    assert isinstance(plan.error, pulumi.RunError)
    assert f"training run {other} (an earlier configuration) is still running" in str(plan.error)
    assert f"kubectl delete jobset -n tpu-rl {other}" in str(plan.error)
    preview = up(monkeypatch, {other: jobset(other, "")}, preview=True)
    assert preview.error is None and any(other in w for w in preview.warnings())
    finished = up(monkeypatch, {other: jobset(other, "Completed")})
    assert finished.error is None, "a finished earlier run holds nothing"


def unreachable(path):
    raise live.ClusterReadError("cannot reach the cluster at 203.0.113.9: is this machine in tpu-rl:authorizedNetworks")


def test_preview_never_depends_on_reaching_the_cluster(monkeypatch, artifacts_present):
    plan = up(monkeypatch, preview=True, reader=unreachable)
    assert plan.error is None, plan.error
    warnings = plan.warnings()
    assert any("preview could not read JobSet" in w and "authorizedNetworks" in w for w in warnings)
    # A null trigger is "no trigger" to the engine (step_generator.go, shouldTriggerReplace); an unknown one
    # would always show as a replacement.
    assert plan.replacement_triggers[NAMES["train"]] is None, "the preview shows the step unchanged"
    assert RETRY_ANNOTATION not in annotations(plan, "train")


def test_up_stops_with_one_line_when_the_cluster_cannot_be_read(monkeypatch, artifacts_present):
    plan = up(monkeypatch, reader=unreachable)
    assert isinstance(plan.error, pulumi.RunError)
    assert str(plan.error).startswith("cannot read ") and "authorizedNetworks" in str(plan.error)


def test_offline_plans_never_read_the_cluster(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("the offline plan read a cluster")

    monkeypatch.setattr(live, "get_json", forbidden)
    plan, _ = plan_stack(ROOT / "Pulumi.dev.yaml", secrets={"tpu-rl:hfToken": SENTINEL_TOKEN})
    assert plan.error is None
