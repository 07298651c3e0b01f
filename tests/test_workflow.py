"""Workflow behaviour: ordering, waiting, content addressing, secrets, and the failed-JobSet error."""

from __future__ import annotations

import json

import pulumi
import pytest
import yaml

from infra.gcp.naming import names_for
from tests.conftest import JOBSET, SENTINEL_TOKEN, one, plan_of, statuses
from tests.conftest import step_resources as steps
from tests.fake_kube import with_state
from tests.lifecycle_walk import settings
from tools.plan import main as plan_main
from tools.plan import plan_stack
from tools.stack_files import ROOT
from workloads.specs.commands import slice_warnings
from workloads.specs.step_specs import plan_workflow

PROD_CONTEXT = "gke_my-tpu-prod-project_us-east5_tpu-rl-prod"
"""The example prod stack's cluster context (gke_<project>_<region>_<cluster>), which a logs command names."""


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_steps_run_in_order_on_awaited_results(stack):
    plan = plan_of(stack)
    s = steps(plan)
    ready = {
        "jobset",
        "kueue",
        "kueue-local-queue",
        "kueue-cluster-queue",
        "namespace",
        "scratch-storage-class",
        "hf-token",
    }
    assert ready <= set(s["convert"]["options"]["dependsOn"])
    # Each CPU step waits for its own Kubernetes service account (made once its grants and binding are: the step's
    # first use waits for them to apply, workloads/container/mark_folder.py), with the rest of the platform.
    accounts = {r["name"] for r in plan.resources if r["name"].endswith("-ksa")}
    assert accounts == {f"{step}-ksa" for step in names_for(settings(stack, [])).ksas}
    for name, step in s.items():
        assert name == "train" or f"{name}-ksa" in step["options"]["dependsOn"], name
    assert "train-head-serviceaccount" in s["train"]["options"]["dependsOn"], "the head's account and its Role"
    assert s["convert"]["name"] in s["train"]["options"]["dependsOn"]
    assert {f"tpu-pool-{i}" for i in range(plan_of(stack).outputs["tpuSlice"]["slices"])} <= set(
        s["train"]["options"]["dependsOn"]
    ), "only training waits for the TPU pools"
    assert not any(d.startswith("tpu-pool") for d in s["convert"]["options"]["dependsOn"])
    assert s["train"]["name"] in s["export"]["options"]["dependsOn"]
    assert (
        s["train"]["inputs"]["metadata"]["annotations"]["tpu-rl/input"]
        == plan.outputs["steps"]["convert"]["artifactUri"]
    )
    assert (
        s["export"]["inputs"]["metadata"]["annotations"]["tpu-rl/input"]
        == plan.outputs["steps"]["train"]["artifactUri"]
    )
    assert s["train"]["inputs"]["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"


def test_waiting_options_and_the_jobset_controller():
    plan = plan_of("prod")
    for step, resource in steps(plan).items():
        assert "ttlSecondsAfterFinished" not in json.dumps(resource["inputs"])
        annotations = resource["inputs"]["metadata"]["annotations"]
        # The provider only applies the object; the program waits for it (workloads.observe.waiting).
        assert annotations["pulumi.com/skipAwait"] == "true" and "pulumi.com/waitFor" not in annotations
        assert resource["options"]["customTimeouts"] == {"create": "10m", "update": "10m", "delete": "20m"}
        if step != "train":
            job = resource["inputs"]["spec"]["replicatedJobs"][0]["template"]["spec"]
            assert job["backoffLimit"] == 0 and job["activeDeadlineSeconds"] == 4 * 3600
    for resource in plan.find("kubernetes:core/v1:Namespace") + plan.find("kubernetes:helm.sh/v3:Release"):
        assert resource["options"]["deletedWith"] == "cluster"
    release = one(plan, "kubernetes:helm.sh/v3:Release", "jobset")["inputs"]
    assert release["chart"] == "oci://registry.k8s.io/jobset/charts/jobset"
    assert release["version"] == "0.10.1" and release["namespace"] == "jobset-system"


@pytest.mark.slow
def test_timeouts_and_restarts_come_from_config():
    plan = plan_of("prod", "tpu-rl:workflow.timeouts.train=36h", "tpu-rl:workflow.maxRestarts=2")
    train = steps(plan)["train"]
    head = train["inputs"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert head["activeDeadlineSeconds"] == 36 * 3600
    assert train["inputs"]["spec"]["failurePolicy"]["maxRestarts"] == 2
    waits = plan_workflow(settings("prod", ["tpu-rl:workflow.timeouts.train=36h", "tpu-rl:workflow.maxRestarts=2"]))
    assert waits.train.await_seconds == 3 * (36 * 3600 + 15 * 60), "`up` waits for 3 attempts x (36h + 15m)"


def test_conversion_and_export_run_on_cpu_not_on_the_slice():
    plan = plan_of("prod")
    for name in ("convert", "export"):
        (job,) = steps(plan)[name]["inputs"]["spec"]["replicatedJobs"]
        pod = job["template"]["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {"cloud.google.com/gke-nodepool": "cpu-np"}
        assert pod["tolerations"] == [
            {"key": "tpu-rl/pool", "operator": "Equal", "value": "cpu-np", "effect": "NoSchedule"}
        ], "cpu-np's taint, and nothing that lets the pod onto a TPU node"
        container = pod["containers"][0]
        assert "google.com/tpu" not in json.dumps(container["resources"])
        assert {"name": "HF_HOME", "value": "/scratch/huggingface"} in container["env"]
        scratch = pod["volumes"][0]
        assert scratch["name"] == "scratch" and int(scratch["emptyDir"]["sizeLimit"].removesuffix("Gi")) >= 60
    (convert,) = steps(plan)["convert"]["inputs"]["spec"]["replicatedJobs"]
    assert (
        convert["template"]["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["memory"] == "168Gi"
    )


@pytest.mark.slow
def test_unchanged_config_plans_identical_objects():
    first, _ = plan_stack(ROOT / "Pulumi.prod.yaml", secrets={"tpu-rl:hfToken": SENTINEL_TOKEN})
    second, _ = plan_stack(
        ROOT / "Pulumi.prod.yaml", secrets={"tpu-rl:hfToken": "hf_anotherTOKENvalueXXXXXXXXXXXXXXXX"}
    )
    assert first.kubernetes_objects() == second.kubernetes_objects(), "the token is not part of any identity"


@pytest.mark.slow
def test_changing_a_training_knob_reruns_training_and_export_only():
    before = steps(plan_of("prod"))
    after = steps(plan_of("prod", "tpu-rl:training.learningRate=1e-5"))
    name = lambda r: r["inputs"]["metadata"]["name"]  # noqa: E731
    assert name(before["convert"]) == name(after["convert"])
    assert before["convert"]["inputs"] == after["convert"]["inputs"]
    assert name(before["train"]) != name(after["train"])
    assert name(before["export"]) != name(after["export"])


def test_changing_the_model_revision_reruns_everything():
    before = steps(plan_of("prod"))
    after = steps(plan_of("prod", "tpu-rl:model.revision=0123456789abcdef0123456789abcdef01234567"))
    for step in ("convert", "train", "export"):
        assert before[step]["inputs"]["metadata"]["name"] != after[step]["inputs"]["metadata"]["name"]


@pytest.mark.slow
def test_no_output_path_is_reused_by_a_different_configuration():
    variants = [
        (),
        ("tpu-rl:training.learningRate=1e-5",),
        ("tpu-rl:training.numBatches=40",),
        ("tpu-rl:training.optimizer=adamw",),
        ("tpu-rl:training.dataset=gsm8k",),
        ("tpu-rl:tpu.topology=8x8", "tpu-rl:training.iciTensorParallelism=2"),
        ("tpu-rl:images.maxtext=us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training:0.2.5-build2",),
    ]
    seen: dict[str, tuple] = {}
    for overrides in variants:
        outputs = plan_of("prod", *overrides).outputs["steps"]
        for step in ("train", "export"):
            uri = outputs[step]["artifactUri"]
            assert uri not in seen or seen[uri] == overrides, f"{step} path {uri} reused by {overrides} and {seen[uri]}"
            seen[uri] = overrides


def test_a_rerun_of_the_same_training_resumes_in_the_same_path():
    # MaxText resumes from the newest checkpoint under base_output_directory/run_name when one exists.
    a = plan_of("prod").outputs["steps"]["train"]
    b, _ = plan_stack(ROOT / "Pulumi.prod.yaml", secrets={"tpu-rl:hfToken": SENTINEL_TOKEN})
    assert a == b.outputs["steps"]["train"]
    assert a["artifactUri"] == a["outputUri"] + "rl/checkpoints/actor/"
    assert a["checkpointUri"] == a["artifactUri"] + "50/model_params/", "offline: the configured last step"


def test_token_appears_only_in_the_secret(tmp_path):
    plan = plan_of("dev")
    for resource in plan.resources:
        assert SENTINEL_TOKEN not in json.dumps(resource), resource["name"]
    assert SENTINEL_TOKEN not in json.dumps(plan.outputs)
    holders = [name for name, inputs in plan.raw_inputs.items() if SENTINEL_TOKEN in json.dumps(inputs)]
    assert holders == ["hf-token"]
    assert one(plan, "kubernetes:core/v1:Secret", "hf-token")["inputs"]["stringData"] == {"token": "[secret]"}
    for obj in plan.kubernetes_objects():
        for container in _containers(obj):
            for env in container.get("env", []):
                assert "value" not in env or "TOKEN" not in env["name"], env
            assert "hf_access_token" not in json.dumps(container.get("command", []) + container.get("args", []))


def test_token_never_reaches_plan_files(tmp_path):
    from tools.plan import write_plan

    write_plan(plan_of("dev"), tmp_path)
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SENTINEL_TOKEN not in path.read_text(), path


def test_each_manifest_file_reads_back_as_its_object_with_scripts_as_literal_blocks(tmp_path):
    from tools.plan import write_plan
    from tools.plan.cli import is_kubernetes_object, manifest_filename

    plan = plan_of("dev")
    write_plan(plan, tmp_path)
    objects = [r["inputs"] for r in plan.resources if is_kubernetes_object(r["type"])]
    assert len(objects) > 10
    for obj in objects:
        text = (tmp_path / "manifests" / manifest_filename(obj)).read_text()
        assert yaml.safe_load(text) == json.loads(json.dumps(obj))
        assert list(yaml.safe_load(text))[:2] == ["apiVersion", "kind"]
    scripts = [s for obj in objects for s in _strings(obj) if "\n" in s]
    assert scripts
    written = "".join(p.read_text() for p in (tmp_path / "manifests").iterdir())
    assert written.count(": |") >= len({s for s in scripts if not s.endswith(" ")})


def _strings(node):
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def _containers(node):
    """Every container and init container anywhere in a manifest."""
    if isinstance(node, dict):
        yield from node.get("containers", []) + node.get("initContainers", [])
        for value in node.values():
            yield from _containers(value)
    elif isinstance(node, list):
        for value in node:
            yield from _containers(value)


def test_workflow_disabled_plans_no_steps(tmp_path):
    assert plan_main(["--stack", "dev", "--set", "tpu-rl:workflow.enabled=false", "--out", str(tmp_path)]) == 0
    manifests = sorted(p.name for p in (tmp_path / "manifests").iterdir())
    assert not [m for m in manifests if m.startswith(("job-", "jobset-"))]
    assert "namespace-cluster-tpu-rl.yaml" in manifests
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert "steps" not in plan["outputs"] and "hfModelUri" not in plan["outputs"]


def test_the_plan_prints_what_the_program_warns_of(capsys):
    """Two slices' line reaches the offline plan as it reaches `pulumi preview` (``pulumi.log.warn``)."""
    two = [
        "tpu-rl:tpu.slices=2",
        "tpu-rl:training.iciExpertParallelism=1",
        "tpu-rl:training.rolloutTensorParallelism=32",
    ]
    assert plan_main(["--stack", "prod", *(word for o in two for word in ("--set", o))]) == 0
    (line,) = slice_warnings(2)
    assert f"warning: {line}" in capsys.readouterr().err.splitlines()


def test_dev_plan_writes_the_three_steps(tmp_path):
    assert plan_main(["--stack", "dev", "--out", str(tmp_path)]) == 0
    names = sorted(p.name for p in (tmp_path / "manifests").iterdir())
    assert [n.split("-")[0] for n in names if n.startswith("job")] == ["jobset", "jobset", "jobset"]


def test_outputs_per_step():
    outputs = plan_of("prod").outputs
    for step in ("convert", "train", "export"):
        out = outputs["steps"][step]
        assert out["name"].startswith(f"gemma4-26b-{step}-")
        assert out["artifactUri"].startswith(f"gs://my-tpu-prod-project-tpu-rl-prod/gemma4-26b/{step}/")
        assert out["logs"].startswith(f"kubectl --context {PROD_CONTEXT} logs -n tpu-rl "), "the stack's cluster"
        assert out["consoleLogs"].startswith("https://console.cloud.google.com/logs/query;query=")
    assert "-c workload-container" in outputs["steps"]["train"]["logs"]
    assert outputs["hfModelUri"] == outputs["steps"]["export"]["artifactUri"]


def _failed_jobset(type_: str, inputs: dict) -> dict | None:
    if type_ == JOBSET and inputs["metadata"]["labels"]["app.kubernetes.io/component"] == "train":
        return {
            "terminalState": "Failed",
            "conditions": [
                {"type": "StartupPolicyCompleted", "status": "True"},
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "FailedJobs",
                    "message": "jobset failed due to one or more job failures",
                },
            ],
        }
    return None


@pytest.mark.slow
def test_a_failed_jobset_stops_up_with_name_reason_and_logs_command():
    plan, _ = plan_stack(
        ROOT / "Pulumi.prod.yaml",
        secrets={"tpu-rl:hfToken": SENTINEL_TOKEN},
        outputs_for=statuses(_failed_jobset),
        raise_errors=False,
    )
    assert isinstance(plan.error, pulumi.RunError)
    message = str(plan.error)
    name = steps(plan)["train"]["name"]
    assert f"JobSet tpu-rl/{name} failed (FailedJobs): jobset failed due to one or more job failures" in message
    assert (
        f"kubectl --context {PROD_CONTEXT} logs -n tpu-rl -l job-name={name}-pathways-head-0 -c workload-container"
        in message
    )
    assert "export" not in steps(plan), "export is never created after a failed training"


def test_a_failed_cpu_step_stops_up_with_name_reason_and_logs_command():
    def failed_convert(type_, inputs):
        if type_ == JOBSET and inputs["metadata"]["labels"]["app.kubernetes.io/component"] == "convert":
            return with_state(inputs, "failed")["status"]
        return None

    plan, _ = plan_stack(
        ROOT / "Pulumi.prod.yaml",
        secrets={"tpu-rl:hfToken": SENTINEL_TOKEN},
        outputs_for=statuses(failed_convert),
        raise_errors=False,
    )
    name = steps(plan)["convert"]["name"]
    assert str(plan.error) == (
        f"JobSet tpu-rl/{name} failed (FailedJobs): jobset failed due to one or more job failures (first failed "
        f"job: {name}-convert-0). Read the logs with: kubectl --context {PROD_CONTEXT} logs -n tpu-rl "
        f"-l job-name={name}-convert-0 -c convert --tail=200 -f. Run `make up STACK=prod` again to retry it"
    )
    assert "train" not in steps(plan)


def test_a_completed_jobset_lets_export_run():
    def completed(type_, inputs):
        return (
            {"terminalState": "Completed", "conditions": [{"type": "Completed", "status": "True"}]}
            if type_ == JOBSET
            else None
        )

    plan, _ = plan_stack(
        ROOT / "Pulumi.prod.yaml", secrets={"tpu-rl:hfToken": SENTINEL_TOKEN}, outputs_for=statuses(completed)
    )
    assert "export" in steps(plan)


def test_cpu_pool_check_matches_what_the_pathways_head_requests():
    from core.config.finish import HEAD_REQUEST_GIB, HEAD_REQUEST_VCPU

    head = steps(plan_of("prod"))["train"]["inputs"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    spec = head["spec"]
    # Native sidecars run beside the main container: the pod requests their sum.
    containers = spec["initContainers"] + spec["containers"]
    requests = [c["resources"].get("requests") or c["resources"]["limits"] for c in containers]
    assert sum(int(r["cpu"]) for r in requests) == HEAD_REQUEST_VCPU
    assert sum(int(r["memory"].removesuffix("Gi")) for r in requests) == HEAD_REQUEST_GIB
