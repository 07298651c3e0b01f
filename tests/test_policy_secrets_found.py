"""Where ``no-secrets-in-workloads`` finds secret material, judged directly (``secrets.no_secrets_in_workloads`` on a
few small resources): the exact line an operator reads for each place a token may sit, and the resource it is on.

A label or annotation is named by where its metadata sits (the object's own: no prefix; a pod template's: ``pod
<where>: ``; any other: ``<path>: ``); a container's text by its path without list indexes, a mapping key being a
text too, read down to the pack's depth limit; env by literal value or the ConfigMap it comes from, found in the
workload's own namespace; a ConfigMap's data and a service-account-token Secret on their own resources; a resource of
another provider is not this policy's. Each beside the near miss that passes. ``tests/test_policy.py`` covers the same
policy through whole plans; these pin the messages and paths themselves."""

from __future__ import annotations

from typing import Any

import pytest

from policy.tpu_rl_policies import secrets
from policy.tpu_rl_policies.resources import DEPLOYMENT
from tests.policy_args import Reports, policy_resource, stack_args

pytestmark = pytest.mark.pure

TOKEN = "hf_" + "a" * 34
"""A made-up Hugging Face token (the shape the pack refuses)."""
HF = "a Hugging Face token"
FIX = "pass secrets as env valueFrom.secretKeyRef (MaxText reads HF_TOKEN from the environment)"

JOB = "kubernetes:batch/v1:Job"
CRON_JOB = "kubernetes:batch/v1:CronJob"
JOB_SET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
SECRET = "kubernetes:core/v1:Secret"
CUSTOM = "kubernetes:example.com/v1:Runner"
GCP = "gcp:cloudrun/service:Service"


@pytest.fixture(autouse=True)
def at_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """Judged as at ``pulumi up`` (a value the check cannot read is a finding, not a preview's advisory)."""
    monkeypatch.setattr(DEPLOYMENT, "dry_run", False)


def urn(type_: str, name: str) -> str:
    return f"urn:pulumi:dev::tpu-rl::{type_}::{name}"


def resource(type_: str, props: dict[str, Any], name: str = "step") -> Any:
    """A resource as ``StackValidationArgs`` holds it."""
    return policy_resource(type_, name, props)


def findings(*resources: Any) -> list[tuple[str, str | None]]:
    report = Reports()
    secrets.no_secrets_in_workloads.validate(stack_args(*resources), report)
    return report.calls


def job(*containers: dict[str, Any], namespace: str = "ml", **spec: Any) -> Any:
    """A Job named ``step`` in ``namespace`` running ``containers`` (``spec``: more of its pod spec)."""
    pod = {"containers": list(containers), **spec}
    return resource(JOB, {"metadata": {"name": "step", "namespace": namespace}, "spec": {"template": {"spec": pod}}})


def container(**fields: Any) -> dict[str, Any]:
    return {"name": "c", "image": "ghcr.io/x/y@sha256:" + "0" * 64, **fields}


# ---------------------------------------------------------------------------------------------------------------------
# Labels and annotations, named by where their metadata sits


def test_a_label_of_the_objects_own_metadata_is_named_without_a_prefix():
    clean = resource(JOB, {"metadata": {"name": "step", "labels": {"team": "ml"}}})
    dirty = resource(JOB, {"metadata": {"name": "step", "labels": {"team": TOKEN}}}, "dirty")
    assert findings(clean) == []
    assert findings(dirty) == [
        (f"label team contains secret material ({HF}); {FIX}", urn(JOB, "dirty")),
    ]


@pytest.mark.parametrize("field", ["labels", "annotations"])
def test_a_label_or_annotation_whose_key_is_a_token_is_a_finding_that_never_shows_it(field):
    dirty = resource(JOB, {"metadata": {"name": "step", field: {TOKEN: "x", "team": "ml"}}}, "dirty")
    assert findings(dirty) == [
        (f"{field[:-1]} <secret> contains secret material ({HF}); {FIX}", urn(JOB, "dirty")),
    ]


def test_a_jobsets_pod_template_metadata_is_its_pods_and_its_job_template_metadata_its_path():
    replicated = {
        "name": "workers",
        "template": {
            "metadata": {"annotations": {"note": f"--token={TOKEN}"}},
            "spec": {"template": {"metadata": {"annotations": {"run": f"HF_TOKEN={TOKEN}"}}, "spec": {}}},
        },
    }
    jobset = resource(JOB_SET, {"metadata": {"name": "rl"}, "spec": {"replicatedJobs": [replicated]}}, "rl")
    assert findings(jobset) == [
        (
            f"spec.replicatedJobs[0].template.metadata: annotation note contains secret material ({HF}); {FIX}",
            jobset.urn,
        ),
        (f"pod workers: annotation run contains secret material ({HF}); {FIX}", jobset.urn),
    ]


def test_a_cronjobs_pod_template_metadata_is_named_by_the_template_path():
    template = {"metadata": {"labels": {"secret": "x", "tag": TOKEN}}, "spec": {}}
    cron = resource(
        CRON_JOB,
        {"metadata": {"name": "nightly"}, "spec": {"jobTemplate": {"spec": {"template": template}}}},
        "nightly",
    )
    assert findings(cron) == [
        (f"pod spec.jobTemplate.spec.template: label tag contains secret material ({HF}); {FIX}", cron.urn),
    ]


def test_metadata_in_a_list_of_a_custom_kind_is_named_by_its_full_path():
    props = {"spec": {"stages": [{"name": "a"}, {"metadata": {"annotations": {"k": TOKEN}}}]}}
    runner = resource(CUSTOM, props, "runner")
    assert findings(runner) == [
        (f"spec.stages[1].metadata: annotation k contains secret material ({HF}); {FIX}", runner.urn),
    ]


def test_labels_outside_a_metadata_mapping_are_not_labels():
    """A ``labels`` mapping that is not under ``metadata`` (a selector, a custom kind's own field) is not read as
    metadata."""
    props = {"spec": {"labels": {"k": TOKEN}, "selector": {"matchLabels": {"k": "v"}}}}
    assert findings(resource(CUSTOM, props, "runner")) == []


def test_metadata_deep_in_nested_mappings_and_lists_is_read():
    """Metadata 40 mappings deep, and inside 40 nested lists, is still read (well inside the depth limit)."""
    node: Any = {"metadata": {"labels": {"k": TOKEN}}}
    for _ in range(40):
        node = {"n": node}
    deep_maps = resource(CUSTOM, {"spec": node}, "maps")
    listed: Any = {"metadata": {"labels": {"k": TOKEN}}}
    for _ in range(40):
        listed = [listed]
    deep_lists = resource(CUSTOM, {"spec": listed}, "lists")
    maps_path = "spec" + ".n" * 40 + ".metadata"
    lists_path = "spec" + "[0]" * 40 + ".metadata"
    assert findings(deep_maps, deep_lists) == [
        (f"{maps_path}: label k contains secret material ({HF}); {FIX}", deep_maps.urn),
        (f"{lists_path}: label k contains secret material ({HF}); {FIX}", deep_lists.urn),
    ]


# ---------------------------------------------------------------------------------------------------------------------
# A container's texts: by path without list indexes, keys included, down to the depth limit


def test_a_containers_texts_are_named_by_their_path_without_list_indexes():
    probe = {"httpGet": {"path": "/", "httpHeaders": [{"name": "X", "value": "ok"}, {"name": "Y", "value": TOKEN}]}}
    step = job(container(args=["run", "--token=abc123"], livenessProbe=probe))
    assert findings(step) == [
        (f"container c: args contains secret material (a --token flag); {FIX}", step.urn),
        (f"container c: livenessProbe.httpGet.httpHeaders.value contains secret material ({HF}); {FIX}", step.urn),
    ]
    assert findings(job(container(args=["run", "--tokens"]))) == []


def test_a_mapping_key_is_a_text_and_an_empty_key_is_named_dot():
    """A key that is itself a token is found, named ``<secret>`` (a message never carries the token); a text under
    an empty key has the empty path, shown as ``.``."""
    step = job(container(resources={"limits": {TOKEN: "1"}}, **{"": TOKEN}))
    assert findings(step) == [
        (f"container c: resources.limits.<secret> contains secret material ({HF}); {FIX}", step.urn),
        (f"container c: . contains secret material ({HF}); {FIX}", step.urn),
    ]


def nested_maps(depth: int, leaf: Any) -> Any:
    """``leaf`` under ``depth`` mappings, each of key ``x``."""
    for _ in range(depth):
        leaf = {"x": leaf}
    return leaf


def nested_lists(depth: int, leaf: Any) -> Any:
    for _ in range(depth):
        leaf = [leaf]
    return leaf


def root_container(**fields: Any) -> Any:
    """A custom kind whose object is itself a container (an image at its root): its texts are at their depth in the
    props."""
    return resource(CUSTOM, {"name": "runner", "image": "img", **fields}, "runner")


def test_a_text_at_the_depth_limit_of_a_container_is_read():
    """The pack reads 64 levels: a token 64 mappings deep, or under a key and 63 nested lists, is found."""
    maps = root_container(**nested_maps(64, TOKEN))
    lists = root_container(x=nested_lists(63, TOKEN))
    assert findings(maps) == [
        (f"container runner: {'.'.join(['x'] * 64)} contains secret material ({HF}); {FIX}", maps.urn),
    ]
    assert findings(lists) == [(f"container runner: x contains secret material ({HF}); {FIX}", lists.urn)]


def test_a_text_half_way_to_the_depth_limit_is_read():
    maps = root_container(**nested_maps(33, TOKEN))
    lists = root_container(x=nested_lists(33, TOKEN))
    assert findings(maps) == [
        (f"container runner: {'.'.join(['x'] * 33)} contains secret material ({HF}); {FIX}", maps.urn),
    ]
    assert findings(lists) == [(f"container runner: x contains secret material ({HF}); {FIX}", lists.urn)]


@pytest.mark.parametrize(
    ("fields", "path"),
    [({"x": nested_maps(64, TOKEN)}, ".x" * 65), ({"x": nested_lists(64, TOKEN)}, ".x" + "[0]" * 64)],
    ids=["65-mappings", "key-and-64-lists"],
)
def test_a_text_past_the_depth_limit_of_a_root_container_is_unread_and_said(fields, path):
    """One level deeper than 64 the props hold a value the pack does not read (``properties.plain``): the check says
    so rather than pass it."""
    assert findings(root_container(**fields)) == [
        (
            f"cannot judge Runner runner: {path} (nested more than 64 levels): not known at `pulumi up`; give it a "
            "value the program knows",
            None,
        ),
    ]


# ---------------------------------------------------------------------------------------------------------------------
# Env: literal values, valueFrom, and what a ConfigMap of the workload's namespace gives


def test_env_literal_values_are_findings_and_references_pass():
    env = [
        {"name": "API_KEY", "value": "abc"},
        {"name": "PLAIN", "value": TOKEN},
        {"name": "HF_TOKEN", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "t"}}},
        {"name": "MODE", "value": "fast"},
        {"value": "fast"},
        {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "p"}}},
    ]
    step = job(container(env=env))
    assert findings(step) == [
        (f"container c: env API_KEY has a literal value; {FIX}", step.urn),
        (f"container c: env PLAIN has a literal value; {FIX}", step.urn),
        (f"container c: HF_TOKEN must come from a secretKeyRef; {FIX}", step.urn),
    ]
    secret_ref = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}
    assert findings(job(container(env=[secret_ref]))) == []


def config_map(name: str, namespace: str, data: dict[str, Any]) -> Any:
    props = {"metadata": {"name": name, "namespace": namespace}, "data": data}
    return resource(CONFIG_MAP, props, f"{name}-{namespace}")


def test_hf_token_from_a_config_map_of_the_workloads_namespace_via_env_from():
    """Two ConfigMaps of one name in two namespaces: the workload reads its own namespace's."""
    maps = [
        config_map("env", "ml", {"HF_TOKEN": "set-later", "DB_PASSWORD": "x"}),
        config_map("env", "other", {"MODE": "fast"}),
    ]
    step = job(container(envFrom=[{"configMapRef": {"name": "env"}}]), namespace="ml")
    assert findings(step, *maps) == [
        (f"container c: HF_TOKEN must come from a secretKeyRef; {FIX}", step.urn),
        (f"container c: env DB_PASSWORD comes from ConfigMap env, which is not a Secret; {FIX}", step.urn),
    ]
    assert findings(job(container(envFrom=[{"configMapRef": {"name": "env"}}]), namespace="other"), *maps) == []


def test_a_script_from_the_config_map_of_the_workloads_namespace_is_read():
    maps = [
        config_map("scripts", "ml", {"run.sh": f"export X={TOKEN}"}),
        config_map("scripts", "other", {"run.sh": "echo hi"}),
    ]
    volumes = [{"name": "s", "configMap": {"name": "scripts"}}]
    runs = container(command=["bash", "/s/run.sh"], volumeMounts=[{"name": "s", "mountPath": "/s"}])
    step = job(runs, namespace="ml", volumes=volumes)
    assert findings(step, *maps) == [
        (f"container c: /s/run.sh (ConfigMap scripts key run.sh) contains secret material ({HF}); {FIX}", step.urn),
        (
            f"ConfigMap scripts: data run.sh contains secret material ({HF}); store it in a Secret",
            urn(CONFIG_MAP, "scripts-ml"),
        ),
    ]
    other = job(runs, namespace="other", volumes=volumes)
    assert findings(other, maps[1]) == []


# ---------------------------------------------------------------------------------------------------------------------
# ConfigMaps and Secrets on their own; another provider's resource


def test_a_config_maps_data_is_judged_on_the_config_map():
    dirty = config_map("cfg", "ml", {"safe": "x", "cred": f"MY_SECRET={'b' * 8}"})
    assert findings(dirty, config_map("cfg", "other", {"safe": "x"})) == [
        (
            "ConfigMap cfg: data cred contains secret material (a *_TOKEN/KEY/SECRET/PASSWORD= assignment); store it "
            "in a Secret",
            dirty.urn,
        ),
    ]


def test_a_config_maps_key_that_is_a_token_is_a_finding_that_never_shows_it():
    dirty = config_map("cfg", "ml", {TOKEN: "x", "safe": "x"})
    assert findings(dirty) == [
        (f"ConfigMap cfg: data <secret> contains secret material ({HF}); store it in a Secret", dirty.urn),
    ]


@pytest.mark.parametrize(
    ("type_", "found"),
    [("kubernetes.io/service-account-token", True), ("Opaque", False), ("kubernetes.io/dockerconfigjson", False)],
    ids=["service-account-token", "opaque", "dockerconfigjson"],
)
def test_a_service_account_token_secret_is_a_finding_and_other_types_pass(type_, found):
    secret = resource(SECRET, {"metadata": {"name": "sa"}, "type": type_, "stringData": {"token": TOKEN}}, "sa-res")
    expected = [
        (
            "Secret sa is a kubernetes.io/service-account-token: a service account's token that never expires; the "
            "steps get short-lived tokens from their pods' own accounts, remove it",
            urn(SECRET, "sa-res"),
        ),
    ]
    assert findings(secret) == (expected if found else [])


def test_a_resource_of_another_provider_is_not_judged():
    props = {
        "metadata": {"labels": {"k": TOKEN}},
        "template": {"containers": [{"image": "gcr.io/x/y", "args": [f"--token={TOKEN}"]}]},
    }
    assert findings(resource(GCP, props, "svc")) == []
