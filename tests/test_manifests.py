"""Every Kubernetes object in the dev and prod plans validates against the real schemas."""

from __future__ import annotations

import copy

import jsonschema
import kubernetes_validate
import pytest

from core.controllers import JOBSET_VERSIONS, KUEUE_VERSIONS
from tests.conftest import plan_of, release_crd
from tests.k8s_validation import (
    WebhookError,
    crd_validator,
    kueue_jobset_rules,
    kueue_webhook_rules,
    validate_core,
    validate_jobset,
)


@pytest.fixture(scope="module")
def jobset_validators():
    return [crd_validator(release_crd("jobset", version, "jobsets")) for version in JOBSET_VERSIONS]


def _objects(stack):
    return plan_of(stack).kubernetes_objects()


KUEUE = {"ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues", "LocalQueue": "localqueues"}


@pytest.fixture(scope="module")
def kueue_validators():
    """Each kind's validators, one per adopted Kueue release."""
    return {
        kind: [crd_validator(release_crd("kueue", version, plural), "v1beta2") for version in KUEUE_VERSIONS]
        for kind, plural in KUEUE.items()
    }


@pytest.mark.parametrize("stack", ["dev", "prod"])
@pytest.mark.slow
def test_every_core_object_validates(stack):
    objects = _objects(stack)
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == [
        "ClusterQueue",
        "ConfigMap",
        "ConfigMap",
        "ConfigMap",
        "JobSet",
        "JobSet",
        "JobSet",
        "LocalQueue",
        "Namespace",
        "NetworkPolicy",
        "NetworkPolicy",
        "NetworkPolicy",
        "ResourceFlavor",
        "ResourceFlavor",
        "Role",
        "RoleBinding",
        "Secret",
        "ServiceAccount",
        "ServiceAccount",
        "ServiceAccount",
        "ServiceAccount",
        "StorageClass",
    ], (
        "each step's scripts; the conversion's, the export's and the publication's own service accounts (every "
        "stack); the training head's, its Role and binding"
    )
    for obj in objects:
        if obj["kind"] not in ("JobSet", *KUEUE):
            validate_core(obj)


def _kueue_objects(stack: str, *overrides: str) -> list[dict]:
    return [o for o in plan_of(stack, *overrides).kubernetes_objects() if o["kind"] in KUEUE]


@pytest.mark.parametrize(
    ("stack", "overrides"),
    [
        ("dev", ()),
        ("prod", ()),
        (
            "prod",
            (
                "tpu-rl:tpu.slices=2",
                "tpu-rl:training.iciExpertParallelism=1",
                "tpu-rl:training.rolloutTensorParallelism=32",
            ),
        ),
    ],
)
@pytest.mark.slow
def test_the_kueue_objects_validate_against_kueues_crds_and_webhooks(stack, overrides, kueue_validators):
    objects = _kueue_objects(stack, *overrides)
    assert sorted(o["kind"] for o in objects) == ["ClusterQueue", "LocalQueue", "ResourceFlavor", "ResourceFlavor"]
    for obj in objects:
        for validator in kueue_validators[obj["kind"]]:
            errors = list(validator.iter_errors(obj))
            assert not errors, f"{obj['kind']}: {errors[0].message}"
    kueue_webhook_rules(objects)


BROKEN_KUEUE = {
    "quota-typo": (
        "ClusterQueue",
        lambda o: o["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].update({"nominalQuote": "1"}),
    ),
    "bad-quantity": (
        "ClusterQueue",
        lambda o: o["spec"]["resourceGroups"][0]["flavors"][1]["resources"][2].update({"nominalQuota": "100GB"}),
    ),
    "resources-out-of-order": (
        "ClusterQueue",
        lambda o: o["spec"]["resourceGroups"][0]["flavors"][1]["resources"].reverse(),
    ),
    "resource-in-two-groups": (
        "ClusterQueue",
        lambda o: o["spec"]["resourceGroups"].append(copy.deepcopy(o["spec"]["resourceGroups"][0])),
    ),
    "null-namespace-selector": ("ClusterQueue", lambda o: o["spec"].__setitem__("namespaceSelector", None)),
    "unknown-flavor": ("ClusterQueue", lambda o: o["spec"]["resourceGroups"][0]["flavors"][0].__setitem__("name", "x")),
    "local-queue-elsewhere": ("LocalQueue", lambda o: o["spec"].__setitem__("clusterQueue", "other")),
    "flavor-typo": ("ResourceFlavor", lambda o: o["spec"].__setitem__("nodeLabel", {})),
}


@pytest.mark.parametrize("case", sorted(BROKEN_KUEUE))
def test_the_kueue_validation_catches_broken_objects(case, kueue_validators):
    kind, mutate = BROKEN_KUEUE[case]
    objects = copy.deepcopy(_kueue_objects("prod"))
    target = next(o for o in objects if o["kind"] == kind)
    mutate(target)
    with pytest.raises((jsonschema.ValidationError, WebhookError)):
        for obj in objects:
            for validator in kueue_validators[obj["kind"]]:
                for error in validator.iter_errors(obj):
                    raise jsonschema.ValidationError(error.message)
        kueue_webhook_rules(objects)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_jobset_validates_against_the_crd_and_webhook(stack, jobset_validators):
    jobsets = [o for o in _objects(stack) if o["kind"] == "JobSet"]
    components = [o["metadata"]["labels"]["app.kubernetes.io/component"] for o in jobsets]
    assert sorted(components) == ["convert", "export", "train"]
    for jobset in jobsets:
        for validator in jobset_validators:
            validate_jobset(jobset, validator)
        kueue_jobset_rules(jobset)
        assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "tpu-rl"


@pytest.mark.slow
def test_two_slices_and_big_topologies_still_fit_name_limits(jobset_validators):
    (jobset,) = [
        o
        for o in plan_of(
            "prod",
            "tpu-rl:tpu.topology=16x16",
            "tpu-rl:tpu.slices=2",
            "tpu-rl:training.iciExpertParallelism=1",
            "tpu-rl:training.rolloutTensorParallelism=256",
        ).kubernetes_objects()
        if o["kind"] == "JobSet" and o["metadata"]["labels"]["app.kubernetes.io/component"] == "train"
    ]
    assert jobset["spec"]["replicatedJobs"][1]["replicas"] == 2
    assert jobset["spec"]["replicatedJobs"][1]["template"]["spec"]["completions"] == 64
    validate_jobset(jobset, jobset_validators[0])


def _jobset(stack="prod", step="train"):
    return copy.deepcopy(
        next(
            o
            for o in _objects(stack)
            if o["kind"] == "JobSet" and o["metadata"]["labels"]["app.kubernetes.io/component"] == step
        )
    )


def _break(mutate, step="train"):
    obj = _jobset(step=step)
    mutate(obj)
    return obj


BROKEN_JOBSETS = {
    "typo-field": lambda o: o["spec"].__setitem__("replicatedJob", []),
    "bad-restart-strategy": lambda o: o["spec"]["failurePolicy"].__setitem__("restartStrategy", "Sometimes"),
    "replicas-string": lambda o: o["spec"]["replicatedJobs"][0].__setitem__("replicas", "1"),
    "container-typo": lambda o: o["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][
        0
    ].__setitem__("imagee", "x"),
    "duplicate-replicated-job": lambda o: o["spec"]["replicatedJobs"].append(
        copy.deepcopy(o["spec"]["replicatedJobs"][0])
    ),
    "bad-memory-quantity": lambda o: o["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"
    ][0]["resources"]["limits"].__setitem__("memory", "100GB"),
    "name-too-long": lambda o: o["metadata"].__setitem__("name", "x" * 45),
    "coordinator-missing": lambda o: o["spec"]["coordinator"].__setitem__("replicatedJob", "leader"),
    "success-target-missing": lambda o: o["spec"]["successPolicy"].__setitem__("targetReplicatedJobs", ["nope"]),
    "int32-overflow": lambda o: o["spec"]["replicatedJobs"][1]["template"]["spec"].__setitem__("parallelism", 2**31),
}


@pytest.mark.parametrize("case", sorted(BROKEN_JOBSETS))
def test_validator_catches_broken_jobsets(case, jobset_validators):
    with pytest.raises((jsonschema.ValidationError, WebhookError, kubernetes_validate.ValidationError)):
        validate_jobset(_break(BROKEN_JOBSETS[case]), jobset_validators[0])


@pytest.mark.parametrize(
    "change",
    [
        lambda o: o["metadata"]["labels"].__setitem__("kueue.x-k8s.io/queue-name", "Team_Queue"),
        lambda o: o["spec"].__setitem__("suspend", True),
    ],
    ids=["queue-not-a-dns-name", "suspend-set"],
)
def test_the_kueue_jobset_rules_catch_a_bad_queue_label_and_a_suspend(change):
    jobset = _jobset()
    kueue_jobset_rules(jobset)  # the clean JobSet passes (raises nothing)
    change(jobset)
    with pytest.raises(WebhookError):
        kueue_jobset_rules(jobset)


BROKEN_CPU_JOBSETS = {
    "container-typo": lambda o: o["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][
        0
    ].__setitem__("imagee", "x"),
    # a pod failure policy needs restartPolicy Never (the Job API's validation)
    "restart-on-failure": lambda o: o["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"].__setitem__(
        "restartPolicy", "OnFailure"
    ),
    "name-too-long": lambda o: o["metadata"].__setitem__("name", "x" * 46),
    "network-typo": lambda o: o["spec"]["network"].__setitem__("enableDNSHostname", False),
}


@pytest.mark.parametrize("case", sorted(BROKEN_CPU_JOBSETS))
def test_validator_catches_broken_cpu_jobsets(case, jobset_validators):
    validate_jobset(_jobset(step="convert"), jobset_validators[0])  # the clean JobSet passes (raises nothing)
    with pytest.raises((jsonschema.ValidationError, WebhookError, kubernetes_validate.ValidationError)):
        validate_jobset(_break(BROKEN_CPU_JOBSETS[case], step="convert"), jobset_validators[0])


def test_validator_catches_broken_core_objects():
    secret = copy.deepcopy(next(o for o in _objects("dev") if o["kind"] == "Secret"))
    secret["metadata"]["name"] = "Not_A_DNS_Name"
    with pytest.raises(WebhookError):
        validate_core(secret)


PUBLISHING = ("tpu-rl:publish.repo=acme/gemma4-grpo", "tpu-rl:workflow.preflight=false")


@pytest.mark.slow
def test_a_publishing_stacks_objects_validate(jobset_validators):
    """The publish step's JobSet (CRD, JobSet's and Kueue's webhook rules), its card's ConfigMap and the
    write token's Secret, against the real schemas."""
    objects = plan_of("prod", *PUBLISHING).kubernetes_objects()
    publish = [
        o
        for o in objects
        if o["kind"] == "JobSet" and o["metadata"]["labels"]["app.kubernetes.io/component"] == "publish"
    ]
    assert len(publish) == 1
    for validator in jobset_validators:
        validate_jobset(publish[0], validator)
    kueue_jobset_rules(publish[0])
    extra = [
        o for o in objects if o["kind"] in ("ConfigMap", "Secret") and not o["metadata"]["name"].endswith("-scripts")
    ]
    assert sorted((o["kind"], o["metadata"]["name"]) for o in extra) == [
        ("ConfigMap", f"{publish[0]['metadata']['name']}-card"),
        ("Secret", "hf-token"),
        ("Secret", "hf-write-token"),
    ]
    for obj in extra:
        validate_core(obj)
