"""``known-workload-kinds``, ``no-admission-webhooks`` and ``model-revision-pinned`` on one resource, called as the
SDK calls a resource policy's check: which resources run containers where the pack does not judge their pods, how many
of their places a finding lists, the name each finding gives the resource (its ``metadata.name``, else its name in the
stack), and where a step's revision is read (every word of its containers' command and args, every file of a
ConfigMap)."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from pulumi_policy import ResourceValidationArgs

from tests.policy_args import OPTIONS, Reports

pytestmark = pytest.mark.pure

workloads = importlib.import_module("policy.tpu_rl_policies.workloads")
iam = importlib.import_module("policy.tpu_rl_policies.iam")
pods = importlib.import_module("policy.tpu_rl_policies.pods")
RUNNER = "kubernetes:example.com/v1:Runner"
POD = {"containers": [{"name": "main", "image": "img"}]}
CUSTOM = (
    "a custom workload kind, whose pods get their namespace, service account and host access where the pack does not "
    "see; run it as a Job or JobSet"
)


def judged(check: Any, type_: str, props: dict[str, Any], name: str = "in-stack") -> list[str]:
    report = Reports()
    check(
        ResourceValidationArgs(type_, props, f"urn:pulumi:dev::tpu-rl::{type_}::{name}", name, OPTIONS, None),
        props,
        report,
    )
    return [message for message, _ in report.calls]


def runner(count: int, **metadata: Any) -> dict[str, Any]:
    """A custom kind holding ``count`` pod templates."""
    spec = {f"p{i}": {"template": {"spec": POD}} for i in range(count)}
    return {"metadata": metadata, "spec": spec}


@pytest.mark.parametrize(
    ("count", "shown"),
    [
        (1, "spec.p0.template.spec"),
        (3, "spec.p0.template.spec, spec.p1.template.spec, spec.p2.template.spec"),
        (4, "spec.p0.template.spec, spec.p1.template.spec, spec.p2.template.spec and 1 more"),
    ],
)
def test_a_custom_kinds_pods_are_listed_three_at_most(count, shown):
    assert judged(workloads._known_workload_kinds, RUNNER, runner(count, name="meta")) == [
        f"Runner meta ({RUNNER}) runs containers outside the pod specs of the built-in workload kinds ({shown}): "
        + CUSTOM
    ]


def test_a_custom_kind_without_a_metadata_name_is_named_as_in_the_stack():
    (message,) = judged(workloads._known_workload_kinds, RUNNER, runner(1))
    assert message.startswith(f"Runner in-stack ({RUNNER}) runs containers")


def test_pod_fields_without_containers_run_nothing_and_a_stray_image_is_named_by_its_field():
    assert judged(workloads._known_workload_kinds, RUNNER, {"spec": {"hostNetwork": True}}) == []
    assert (
        judged(workloads._known_workload_kinds, "kubernetes:batch/v1:Job", {"spec": {"template": {"spec": POD}}}) == []
    )
    (message,) = judged(workloads._known_workload_kinds, RUNNER, {"spec": {"step": {"image": "img"}}})
    assert "(spec.step.image)" in message


def test_another_providers_resource_that_runs_an_image_is_refused():
    assert judged(workloads._known_workload_kinds, "docker:index/container:Container", {"image": "nginx"}) == [
        "docker:index/container:Container in-stack runs images outside the cluster (image): tpu-rl runs its steps as "
        "JobSets in its cluster, where the pack judges their pods' identity and host access; remove it"
    ]


WEBHOOK = "kubernetes:admissionregistration.k8s.io/v1:ValidatingWebhookConfiguration"


@pytest.mark.parametrize(("metadata", "name"), [({"name": "hook"}, "hook"), ({}, "in-stack"), (None, "in-stack")])
def test_an_admission_webhook_is_refused_by_its_name(metadata, name):
    props = {} if metadata is None else {"metadata": metadata}
    assert judged(iam._admission, WEBHOOK, props) == [
        f"ValidatingWebhookConfiguration {name} sees or changes every object it matches, Secrets and pods among them: "
        "the stack installs admission control only through the reviewed charts (JobSet's and Kueue's webhooks)"
    ]


JOB = "kubernetes:batch/v1:Job"
MOVING = (
    "model revision 'main' is a moving ref; pin a commit for reproducible runs (tpu-rl pulumi --stack <stack> -- "
    "config set --path 'tpu-rl:model.revision' <commit>)"
)


def test_a_revision_is_read_from_a_containers_command_and_its_args():
    container = {"name": "main", "image": "img", "command": ["convert", "--revision=main"], "args": ["--out=gs://b"]}
    job = {"spec": {"template": {"spec": {"containers": [container]}}}}
    assert pods.command_text(job["spec"]) == "convert --revision=main --out=gs://b"
    assert judged(workloads._model_revision, JOB, job) == [MOVING]


def test_a_revision_is_read_across_a_configmaps_files_each_its_own_words():
    data = {"run.sh": "python3 convert.py --revision=main", "z.txt": "done"}
    assert judged(workloads._model_revision, "kubernetes:core/v1:ConfigMap", {"data": data}) == [MOVING]
