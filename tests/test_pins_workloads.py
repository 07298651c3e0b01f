"""Every field of the step objects that GKE, the JobSet controller, Pathways and MaxText depend on, pinned
against named expectations (xpk's and gcluster's Pathways JobSet, the tutorial), and every pair of fields
that must agree cross-checked. Pure: the builders only, no mock runtime (fast enough for mutation runs)."""

from __future__ import annotations

import copy
import dataclasses
import urllib.parse

import pytest

from core.layout import compile_cache
from core.models import Model
from core.names import SETUP_FAILURE_EXIT
from core.settings import ModelSettings
from infra.gcp.gke_spec import CPU_TAINT, TPU_TAINT, PoolSite, cpu_pool_args, tpu_pool_args
from infra.k8s.manifests import scratch_storage_class, token_secret_manifest
from tests.lifecycle_walk import settings
from tests.pure_plan import per_mutant_cache
from workloads.container import checkpoint_scan
from workloads.specs import step_specs as steps
from workloads.specs.commands import OPTIMIZER_PATCH
from workloads.specs.step_specs import compile_cache_key, plan_workflow

pytestmark = pytest.mark.pure

PROD = settings("prod", [])
DEV = settings("dev", [])
TWO_SLICES = settings(
    "prod",
    ["tpu-rl:tpu.slices=2", "tpu-rl:training.iciExpertParallelism=1", "tpu-rl:training.rolloutTensorParallelism=32"],
)
COORDINATOR = {"fieldRef": {"fieldPath": "metadata.labels['jobset.sigs.k8s.io/coordinator']"}}
TUTORIAL_ENV = [
    {"name": "FLAGS_pathways_enforce_subset_devices_form_subslice", "value": "false"},
    {"name": "GRPC_DNS_RESOLVER", "value": "native"},
]
ABSL = {"name": "ABSL_FLAGS", "value": "--pathways_pipe_unreachable_timeout=60s"}
HF_TOKEN = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}
CPU_TOLERATION = {"key": "tpu-rl/pool", "operator": "Equal", "value": "cpu-np", "effect": "NoSchedule"}
TPU_TOLERATION = {"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}
HOST_NETWORK = {"hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet"}
# The head's grace covers the script's work after train_rl died of SIGTERM (no handler: the copies of the log
# and side file); the workers keep Kubernetes' default, as xpk, pathways-job and Cluster Toolkit do.
HEAD_GRACE, WORKER_GRACE = 120, 30
SHARED_TMP = [{"name": "shared-tmp", "hostPath": {"path": "/tmp", "type": "DirectoryOrCreate"}}]
"""The workers' /tmp: the node's (xpk, pathways-job and Cluster Toolkit mount it on every worker)."""
HEAD_TMP = [{"name": "shared-tmp", "emptyDir": {}}]
"""The head's /tmp: its own volume (no tool shares the node's /tmp across the head's containers)."""
TMP_MOUNT = [{"name": "shared-tmp", "mountPath": "/tmp"}]
SCRIPTS_MOUNT = [{"name": "scripts", "mountPath": "/tpu-rl", "readOnly": True}]
"""The step's scripts: its ConfigMap, read-only (the container runs /bin/bash /tpu-rl/run.sh)."""


def scripts_volume(step):
    """The step's ConfigMap of scripts as its pod mounts it: named after the step, files read-only (0444)."""
    return [{"name": "scripts", "configMap": {"name": f"{step.name}-scripts", "defaultMode": 0o444}}]


def jobs(s):
    """The steps of ``s``; the example stacks' (``PROD``, ``DEV``) built once per process (and mutant), which the
    tests only read (a test that changes a manifest changes its own copy)."""
    if s is PROD or s is DEV:
        return _example_jobs("prod" if s is PROD else "dev")
    return plan_workflow(s)


@per_mutant_cache
def _example_jobs(stack: str):
    return plan_workflow(PROD if stack == "prod" else DEV)


def head_and_workers(jobset):
    head, worker = jobset["spec"]["replicatedJobs"]
    return head, worker


def pod_labels(step):
    """The step's labels, as its pods carry them (the JobSet's own, without the Kueue queue)."""
    return {k: v for k, v in step.manifest["metadata"]["labels"].items() if k != "kueue.x-k8s.io/queue-name"}


def cpu_job(step):
    """The only replicated Job of a CPU step's JobSet: its Job spec."""
    (job,) = step.manifest["spec"]["replicatedJobs"]
    return job["template"]["spec"]


def containers(pod):
    return {c["name"]: c for c in pod.get("initContainers", []) + pod["containers"]}


def field_env(name, path):
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


# ---------------------------------------------------------------------------------------------
# The Pathways JobSet (xpk pathways_workload_create.yaml.j2; gcluster pathways_jobset.tmpl)


def test_jobset_top_level_is_gclusters_pathways_shape():
    train = jobs(PROD).train
    spec = train.manifest["spec"]
    assert train.manifest["apiVersion"] == "jobset.x-k8s.io/v1alpha2" and train.manifest["kind"] == "JobSet"
    assert train.manifest["metadata"] == {
        "name": train.name,
        "namespace": "tpu-rl",
        "labels": {
            "app.kubernetes.io/name": "tpu-rl",
            "app.kubernetes.io/instance": "tpu-rl-prod",
            "app.kubernetes.io/component": "train",
            "tpu-rl/step-id": train.step_id,
            "kueue.x-k8s.io/queue-name": "tpu-rl",
        },
        "annotations": {"pulumi.com/skipAwait": "true", "pulumi.com/patchForce": "true"},
    }
    # The subdomain (the headless Service's name) is rl-<hash>: JobSet's default, the JobSet's own name, makes
    # the coordinator label <jobset>-pathways-head-0-0.<jobset> 73 characters (workloads.specs.derived).
    assert spec["network"] == {
        "enableDNSHostnames": True,
        "publishNotReadyAddresses": True,
        "subdomain": f"rl-{train.step_id}",
    }
    assert spec["coordinator"] == {"replicatedJob": "pathways-head", "jobIndex": 0, "podIndex": 0}
    assert spec["startupPolicy"] == {"startupPolicyOrder": "InOrder"}, "the head (resource manager) starts first"
    assert spec["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["pathways-head"]}
    assert spec["failurePolicy"] == {
        "maxRestarts": 1,
        "restartStrategy": "Recreate",
        # JobSet 0.10.1 failure_policy.go: rules in order, each against every failed Job; no match restarts.
        "rules": [
            {"name": "restartOnDisruption", "action": "RestartJobSet", "onJobFailureReasons": ["BackoffLimitExceeded"]},
            # The restart drill's exit (77) in the Job controller's FailJob message (kubernetes pod_failure_policy.go
            # matchPodFailurePolicy): restarted without counting (restartJobSetAndIgnoreMaxRestartsActionApplier).
            {
                "name": "restartDrill",
                "action": "RestartJobSetAndIgnoreMaxRestarts",
                "onJobFailureReasons": ["PodFailurePolicy"],
                "onJobFailureMessagePatterns": ["with exit code 77 matching FailJob rule"],
                "targetReplicatedJobs": ["pathways-head"],
            },
            {"name": "failOnWorkloadExit", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]},
            {"name": "failOnDeadline", "action": "FailJobSet", "onJobFailureReasons": ["DeadlineExceeded"]},
        ],
    }
    assert "ttlSecondsAfterFinished" not in spec and "suspend" not in spec


def test_pathways_head_job_and_pod():
    head, _ = head_and_workers(jobs(PROD).train.manifest)
    assert head["name"] == "pathways-head" and head["replicas"] == 1
    assert head["template"]["metadata"] == {
        "annotations": {"alpha.jobset.sigs.k8s.io/exclusive-topology": "kubernetes.io/hostname"}
    }
    job = head["template"]["spec"]
    assert {k: v for k, v in job.items() if k != "template"} == {
        "backoffLimit": 0,
        "completionMode": "Indexed",
        "completions": 1,
        "parallelism": 1,
        "activeDeadlineSeconds": 24 * 3600,
        # A disruption, or the trainer dead of a lost slice (exit 75) or ended as stalled (76), counts against
        # backoffLimit 0 (BackoffLimitExceeded: restart); any other exit of the trainer fails the Job
        # (PodFailurePolicy: the JobSet fails). Disruptions first: a disrupted pod exits 143.
        "podFailurePolicy": {
            "rules": [
                {"action": "Count", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
                {
                    "action": "Count",
                    "onExitCodes": {"containerName": "workload-container", "operator": "In", "values": [75, 76]},
                },
                {
                    "action": "FailJob",
                    "onExitCodes": {"containerName": "workload-container", "operator": "NotIn", "values": [0]},
                },
            ]
        },
    }
    pod = job["template"]["spec"]
    head_network = {**HOST_NETWORK, "terminationGracePeriodSeconds": HEAD_GRACE}
    assert {k: pod[k] for k in head_network} == head_network
    assert pod["restartPolicy"] == "Never"
    assert pod["nodeSelector"] == {"cloud.google.com/gke-nodepool": "cpu-np"}
    assert pod["tolerations"] == [CPU_TOLERATION]
    assert pod["volumes"] == HEAD_TMP + scripts_volume(jobs(PROD).train)
    assert [c["name"] for c in pod["initContainers"]] == ["pathways-proxy", "pathways-rm"]
    assert [c["name"] for c in pod["containers"]] == ["workload-container"]
    assert job["template"]["metadata"]["labels"]["tpu-rl/step-id"] == jobs(PROD).train.step_id


def test_proxy_and_resource_manager_are_native_sidecars_with_xpks_settings():
    head, _ = head_and_workers(jobs(PROD).train.manifest)
    c = containers(head["template"]["spec"]["template"]["spec"])
    scratch = f"--gcs_scratch_location={compile_cache(PROD.bucket_name, 'gemma4-26b', compile_cache_key(PROD))}"
    assert c["pathways-proxy"] == {
        "name": "pathways-proxy",
        "image": PROD.images.pathways_proxy,
        "restartPolicy": "Always",
        "args": ["--server_port=29000", "--resource_manager_address=$(PATHWAYS_HEAD):29001", scratch],
        "env": [{"name": "PATHWAYS_HEAD", "valueFrom": COORDINATOR}, ABSL, *TUTORIAL_ENV],
        "ports": [{"containerPort": 29000, "protocol": "TCP"}],
        "resources": {"limits": {"cpu": "16", "memory": "100Gi"}},
    }
    assert c["pathways-rm"] == {
        "name": "pathways-rm",
        "image": PROD.images.pathways_server,
        "restartPolicy": "Always",
        "args": [
            "--server_port=29001",
            scratch,
            "--node_type=resource_manager",
            "--instance_count=1",
            "--instance_type=tpuv6e:4x8",
        ],
        "env": [
            field_env("REPLICATED_JOB_NAME", "metadata.annotations['jobset.sigs.k8s.io/replicatedjob-name']"),
            field_env("JOBSET_NAME", "metadata.annotations['jobset.sigs.k8s.io/jobset-name']"),
            {"name": "HOST_ADDRESS", "valueFrom": COORDINATOR},
            {"name": "TPU_SKIP_MDS_QUERY", "value": "true"},
            ABSL,
            *TUTORIAL_ENV,
        ],
        "ports": [{"containerPort": 29001, "protocol": "TCP"}, {"containerPort": 29002, "protocol": "TCP"}],
        "resources": {"limits": {"cpu": "8", "memory": "32Gi"}},
        "volumeMounts": TMP_MOUNT,
    }


def test_workload_container_talks_to_the_proxy_on_loopback():
    train = jobs(PROD).train
    head, _ = head_and_workers(train.manifest)
    workload = containers(head["template"]["spec"]["template"]["spec"])["workload-container"]
    assert workload["image"] == PROD.images.maxtext
    assert "securityContext" not in workload, "not privileged: the head has no TPU devices (pathways-job, gcluster)"
    assert workload["command"] == ["/bin/bash", "/tpu-rl/run.sh"] and "args" not in workload
    assert workload["env"] == [
        {"name": "PATHWAYS_HEAD", "valueFrom": COORDINATOR},
        {"name": "JAX_PLATFORMS", "value": "proxy,cpu"},
        {"name": "XCLOUD_ENVIRONMENT", "value": "GCP"},
        {"name": "JAX_BACKEND_TARGET", "value": "grpc://127.0.0.1:29000"},
        {"name": "ENABLE_PATHWAYS_PERSISTENCE", "value": "1"},
        {"name": "TPU_RL_STALL_SECONDS", "value": "7200"},  # tpu-rl:workflow.stallTimeout, 2h
        {"name": "TPU_RL_RESTART_DRILL", "value": "false"},  # tpu-rl:workflow.restartDrill
        {"name": "TPU_RL_SLICE_WAIT_SECONDS", "value": "16200"},  # tpu-rl:kueue.recoveryTimeout, 4h30m
        # JobSet's labels on its pods (v0.10.1 labelAndAnnotateObject): the attempt's workers, for its wait and judge
        field_env("TPU_RL_JOBSET_UID", "metadata.labels['jobset.sigs.k8s.io/jobset-uid']"),
        field_env("TPU_RL_RESTART_ATTEMPT", "metadata.labels['jobset.sigs.k8s.io/restart-attempt']"),
        {"name": "VLLM_ENABLE_V1_MULTIPROCESSING", "value": "0"},
        field_env("VLLM_HOST_IP", "status.podIP"),
        HF_TOKEN,
        ABSL,
        *TUTORIAL_ENV,
    ]
    assert workload["resources"] == {
        "requests": {"cpu": "8", "memory": "64Gi"},
        "limits": {"cpu": "24", "memory": "100Gi"},
    }
    assert workload["volumeMounts"] == TMP_MOUNT + SCRIPTS_MOUNT


@pytest.mark.parametrize(
    ("s", "hosts", "slices", "chips_per_vm", "topology"),
    [
        (PROD, 8, 1, 4, "4x8"),
        (DEV, 2, 1, 4, "2x4"),
        (TWO_SLICES, 8, 2, 4, "4x8"),
    ],
    ids=["prod", "dev", "two-slices"],
)
def test_workers_one_pod_per_tpu_vm_of_every_slice(request, s, hosts, slices, chips_per_vm, topology):
    _, worker = head_and_workers(jobs(s).train.manifest)
    assert worker["name"] == "worker" and worker["replicas"] == slices
    assert worker["template"]["metadata"] == {
        "annotations": {"alpha.jobset.sigs.k8s.io/exclusive-topology": "cloud.google.com/gke-nodepool"}
    }
    job = worker["template"]["spec"]
    assert {k: v for k, v in job.items() if k != "template"} == {
        "backoffLimit": hosts * 4,
        "completionMode": "Indexed",
        "completions": hosts,
        "parallelism": hosts,
    }
    # No gke-tpu-slice-topology annotation: xpk sets it for super- and sub-slicing only (TPU7x's dynamic slicing).
    assert job["template"]["metadata"] == {"labels": pod_labels(jobs(s).train)}, "the step's labels reach every pod"
    pod = job["template"]["spec"]
    assert {k: pod[k] for k in HOST_NETWORK} == HOST_NETWORK
    assert pod["terminationGracePeriodSeconds"] == WORKER_GRACE, "Kubernetes' default: the workers hold no state"
    assert pod["restartPolicy"] == "OnFailure"
    assert pod["nodeSelector"] == {
        "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
        "cloud.google.com/gke-tpu-topology": topology,
    }
    assert pod["tolerations"] == [TPU_TOLERATION] and pod["volumes"] == SHARED_TMP
    (container,) = pod["containers"]
    assert container == {
        "name": "pathways-worker",
        "image": s.images.pathways_server,
        "args": [
            "--server_port=29005",
            "--resource_manager_address=$(PATHWAYS_HEAD):29001",
            f"--gcs_scratch_location={compile_cache(s.bucket_name, s.model.spec.name, compile_cache_key(s))}",
        ],
        "env": [
            {"name": "XCLOUD_ENVIRONMENT", "value": "GCP"},
            {"name": "MEGASCALE_GRPC_ENABLE_XOR_TRACER", "value": "false"},
            field_env("MEGASCALE_NUM_SLICES", "metadata.labels['jobset.sigs.k8s.io/replicatedjob-replicas']"),
            field_env("JOBSET_NAME", "metadata.annotations['jobset.sigs.k8s.io/jobset-name']"),
            field_env("REPLICATED_JOB_NAME", "metadata.annotations['jobset.sigs.k8s.io/replicatedjob-name']"),
            field_env("MEGASCALE_SLICE_ID", "metadata.labels['jobset.sigs.k8s.io/job-index']"),
            {"name": "PATHWAYS_HEAD", "valueFrom": COORDINATOR},
            {"name": "MEGASCALE_COORDINATOR_ADDRESS", "valueFrom": COORDINATOR},
            ABSL,
            *TUTORIAL_ENV,
        ],
        "ports": [{"containerPort": p, "protocol": "TCP"} for p in (29005, 29006, 8471, 8080)],
        # A floor of cpu and memory beside the chips: not BestEffort (core/pathways.py WORKER_REQUESTS)
        "resources": {"requests": {"cpu": "8", "memory": "64Gi"}, "limits": {"google.com/tpu": str(chips_per_vm)}},
        "volumeMounts": TMP_MOUNT,
    }
    assert "serviceAccountName" not in pod, "the workers keep the namespace's default account, granted nothing"


# ---------------------------------------------------------------------------------------------
# Pairs that must agree


def _port(arg_list, flag):
    return int(next(a for a in arg_list if a.startswith(flag)).rsplit(":", 1)[-1].split("=")[-1])


@pytest.mark.parametrize("s", [PROD, DEV, TWO_SLICES])
def test_every_port_a_client_uses_is_the_port_its_server_listens_on(s):
    head, worker = head_and_workers(jobs(s).train.manifest)
    c = containers(head["template"]["spec"]["template"]["spec"])
    proxy, rm, workload = c["pathways-proxy"], c["pathways-rm"], c["workload-container"]
    (worker_container,) = worker["template"]["spec"]["template"]["spec"]["containers"]
    target = next(e["value"] for e in workload["env"] if e["name"] == "JAX_BACKEND_TARGET")
    proxy_port = _port(proxy["args"], "--server_port=")
    assert int(target.rsplit(":", 1)[1]) == proxy_port == proxy["ports"][0]["containerPort"]
    rm_port = _port(rm["args"], "--server_port=")
    assert rm_port == rm["ports"][0]["containerPort"]
    for client in (proxy, worker_container):
        assert _port(client["args"], "--resource_manager_address=") == rm_port
    worker_port = _port(worker_container["args"], "--server_port=")
    assert worker_port == worker_container["ports"][0]["containerPort"]
    assert len({proxy_port, rm_port, worker_port}) == 3, "hostNetwork: the head's ports must not collide"


@pytest.mark.parametrize("s", [PROD, DEV, TWO_SLICES])
def test_the_multislice_environment_matches_the_slice_count(s):
    head, worker = head_and_workers(jobs(s).train.manifest)
    rm = containers(head["template"]["spec"]["template"]["spec"])["pathways-rm"]
    assert f"--instance_count={s.tpu.slices}" in rm["args"] and worker["replicas"] == s.tpu.slices
    assert f"--instance_type={s.slice.pathways_instance_type}" in rm["args"]
    (container,) = worker["template"]["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    # JobSet labels each worker pod with its replicated job's replica count and its job index.
    assert env["MEGASCALE_NUM_SLICES"]["valueFrom"]["fieldRef"]["fieldPath"].endswith("replicatedjob-replicas']")
    assert env["MEGASCALE_SLICE_ID"]["valueFrom"]["fieldRef"]["fieldPath"].endswith("job-index']")
    tpus = int(container["resources"]["limits"]["google.com/tpu"])
    assert tpus * worker["template"]["spec"]["completions"] * worker["replicas"] == s.total_chips


@pytest.mark.parametrize("s", [PROD, DEV])
def test_tolerations_match_the_taints_and_selectors_match_the_pools(s):
    pool_names = {"cpu": cpu_pool_args(PoolSite.of(s), s.cpu_pool, "sa")["name"]}
    tpu_pool = tpu_pool_args(PoolSite.of(s), "tpu-x", s.slice, s.tpu, "sa")
    effect = {"NO_SCHEDULE": "NoSchedule"}
    plan = jobs(s)
    head, worker = head_and_workers(plan.train.manifest)
    head_pod = head["template"]["spec"]["template"]["spec"]
    worker_pod = worker["template"]["spec"]["template"]["spec"]
    for pod in (head_pod, *(cpu_job(step)["template"]["spec"] for step in (plan.convert, plan.export))):
        assert pod["nodeSelector"] == {"cloud.google.com/gke-nodepool": pool_names["cpu"]}
        (toleration,) = pod["tolerations"]
        assert (toleration["key"], toleration["value"], toleration["effect"]) == (
            CPU_TAINT["key"],
            CPU_TAINT["value"],
            effect[CPU_TAINT["effect"]],
        )
    (toleration,) = worker_pod["tolerations"]
    assert (toleration["key"], toleration["operator"], toleration["effect"]) == (
        TPU_TAINT["key"],
        "Exists",
        effect[TPU_TAINT["effect"]],
    )
    assert worker_pod["nodeSelector"] == tpu_pool["node_config"]["labels"]


def test_the_token_secret_is_what_the_pods_reference_and_no_pod_claims_a_disk():
    secret = token_secret_manifest("tpu-rl", {}, "x")
    plan = jobs(PROD)
    for step in (plan.convert, plan.export):
        pod = cpu_job(step)["template"]["spec"]
        tokens = [e for e in pod["containers"][0]["env"] if e["name"] == "HF_TOKEN"]
        assert set(pod["volumes"][0]) == {"name", "emptyDir"}, "an emptyDir: no claim, no disk outlives the pod"
        if step is plan.export:
            assert tokens == [], "the export reads nothing from the Hub: no token"
            continue
        ref = tokens[0]["valueFrom"]["secretKeyRef"]
        assert ref["name"] == secret["metadata"]["name"] and ref["key"] in secret["stringData"]
    assert scratch_storage_class("pd-balanced", {})["metadata"]["name"] == "tpu-rl-scratch", "kept one release"


def test_every_setup_failure_fails_its_job_at_once():
    """Exit 3 (a setup check) is one of the non-zero exits every step's Job fails on at once."""
    plan = jobs(PROD)
    head, _ = head_and_workers(plan.train.manifest)
    rules = [head["template"]["spec"]["podFailurePolicy"]["rules"][2]]
    rules += [cpu_job(s)["podFailurePolicy"]["rules"][1] for s in (plan.convert, plan.export)]
    for rule, container in zip(rules, ("workload-container", "convert", "export"), strict=True):
        assert rule == {
            "action": "FailJob",
            "onExitCodes": {"containerName": container, "operator": "NotIn", "values": [0]},
        }
        assert SETUP_FAILURE_EXIT not in rule["onExitCodes"]["values"]
    assert (
        checkpoint_scan.NOTHING_TO_EXPORT == SETUP_FAILURE_EXIT and f"sys.exit({SETUP_FAILURE_EXIT})" in OPTIMIZER_PATCH
    )


# ---------------------------------------------------------------------------------------------
# The CPU steps: single-pod JobSets on cpu-np


@pytest.mark.parametrize(
    ("step", "scratch", "memory", "limit"),
    [
        ("convert", 124, "168Gi", "168Gi"),
        ("export", 72, "168Gi", "168Gi"),
    ],
)
def test_cpu_jobsets(step, scratch, memory, limit):
    built = getattr(jobs(PROD), step)
    jobset = built.manifest
    assert jobset["apiVersion"] == "jobset.x-k8s.io/v1alpha2" and jobset["kind"] == "JobSet"
    assert jobset["metadata"] == {
        "name": built.name,
        "namespace": "tpu-rl",
        "labels": {
            "app.kubernetes.io/name": "tpu-rl",
            "app.kubernetes.io/instance": "tpu-rl-prod",
            "app.kubernetes.io/component": step,
            "tpu-rl/step-id": built.step_id,
            "kueue.x-k8s.io/queue-name": "tpu-rl",
        },
        "annotations": {"pulumi.com/skipAwait": "true", "pulumi.com/patchForce": "true"},
    }
    # One pod: no headless Service (jobset_controller.go createHeadlessSvcIfNecessary); neither the JobSet
    # nor the Job retries: a failure of the step is deterministic, a disruption re-creates the pod.
    assert {k: v for k, v in jobset["spec"].items() if k != "replicatedJobs"} == {
        "network": {"enableDNSHostnames": False},
        "failurePolicy": {"maxRestarts": 0},
    }
    (replicated,) = jobset["spec"]["replicatedJobs"]
    assert {k: v for k, v in replicated.items() if k != "template"} == {"name": step, "replicas": 1}
    assert list(replicated["template"]) == ["spec"]
    spec = cpu_job(built)
    assert {k: v for k, v in spec.items() if k != "template"} == {
        "backoffLimit": 0,
        "completionMode": "Indexed",
        "completions": 1,
        "parallelism": 1,
        "activeDeadlineSeconds": 4 * 3600,
        "podFailurePolicy": {
            "rules": [
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
                {"action": "FailJob", "onExitCodes": {"containerName": step, "operator": "NotIn", "values": [0]}},
            ]
        },
    }
    labels = pod_labels(built)
    assert spec["template"]["metadata"] == {"labels": labels}
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["terminationGracePeriodSeconds"] == 30
    # Named as the step's own Google account (<clusterName>-<step>, unique in the project), so no other
    # stack's Workload Identity principal is this one.
    assert pod["serviceAccountName"] == f"tpu-rl-prod-{step}", "Workload Identity: the step's own GCS identity"
    assert pod["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    (container,) = pod["containers"]
    assert container["name"] == step and container["image"] == PROD.images.maxtext
    # Pod Security "restricted" but runAsNonRoot: the MaxText image runs as root (no USER in its Dockerfile).
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    # The conversion reads the Hub (its token from the Secret); the export reads GCS only: no token, the Hub switched
    # off (huggingface_hub 2.4.0 constants.is_offline_mode: every request raises OfflineModeIsEnabled).
    hub = [HF_TOKEN] if step == "convert" else []
    offline = [{"name": "HF_HUB_OFFLINE", "value": "1"}] if step == "export" else []
    assert container["env"] == [
        *hub,
        {"name": "HF_HOME", "value": "/scratch/huggingface"},
        {"name": "HF_HUB_DISABLE_PROGRESS_BARS", "value": "1"},
        *offline,
    ]
    assert container["resources"] == {"requests": {"cpu": "16", "memory": memory}, "limits": {"memory": limit}}
    assert container["command"] == ["/bin/bash", "/tpu-rl/run.sh"] and "args" not in container
    assert container["volumeMounts"] == [{"name": "scratch", "mountPath": "/scratch"}, *SCRIPTS_MOUNT]
    # The scratch is an emptyDir on cpu-np's boot disk (workloads/specs/step_manifests.py scratch_volume): torn down
    # with the pod, never a claimed disk that a finished Job's kept pod would hold.
    assert labels and pod["volumes"] == [
        {"name": "scratch", "emptyDir": {"sizeLimit": f"{scratch}Gi"}},
        *scripts_volume(built),
    ]


def test_cpu_steps_are_sized_by_the_model():
    dev = jobs(DEV)
    pod = cpu_job(dev.convert)["template"]["spec"]
    # 3 x the 16 GiB of bf16 weights + 8 GiB (core.models.step_memory_gib); request = limit
    assert pod["containers"][0]["resources"] == {
        "requests": {"cpu": "16", "memory": "56Gi"},
        "limits": {"memory": "56Gi"},
    }
    raised = jobs(settings("dev", ["tpu-rl:workflow.stepMemoryGib=100"]))
    assert cpu_job(raised.export)["template"]["spec"]["containers"][0]["resources"]["limits"] == {"memory": "100Gi"}
    assert pod["volumes"][0]["emptyDir"]["sizeLimit"] == "52Gi"


# ---------------------------------------------------------------------------------------------
# Identities, names, paths, timeouts (workloads/specs/step_specs.py)


def test_names_paths_and_logs():
    plan = jobs(PROD)
    context = "gke_my-tpu-prod-project_us-east5_tpu-rl-prod"  # gke_<project>_<region>_<cluster>, as get-credentials
    for step in plan.steps:
        assert step.name == f"gemma4-26b-{step.step}-{step.step_id}" and len(step.step_id) == 10
        assert step.output_uri == f"gs://my-tpu-prod-project-tpu-rl-prod/gemma4-26b/{step.step}/{step.step_id}/"
        assert step.manifest["metadata"]["labels"]["tpu-rl/step-id"] == step.step_id
        assert step.name in step.console_logs_url and "project=my-tpu-prod-project" in step.console_logs_url
    assert plan.convert.artifact_uri == plan.convert.output_uri + "0/items/"
    assert plan.train.artifact_uri == plan.train.output_uri + "rl/checkpoints/actor/"
    assert plan.export.artifact_uri == plan.export.output_uri
    assert (plan.convert.input_uri, plan.train.input_uri, plan.export.input_uri) == (
        None,
        plan.convert.artifact_uri,
        plan.train.artifact_uri,
    )
    # JobSet names its Jobs <jobset>-<replicatedJob>-<index> (placement.go GenJobName); the Job controller
    # labels their pods job-name=<job>.
    for step, container in ((plan.convert, "convert"), (plan.export, "export")):
        job = f"{step.name}-{step.step}-0"
        assert step.logs_command == (
            f"kubectl --context {context} logs -n tpu-rl -l job-name={job} -c {container} --tail=200 -f"
        )
    assert plan.train.logs_command == (
        f"kubectl --context {context} logs -n tpu-rl -l job-name={plan.train.name}-pathways-head-0 "
        "-c workload-container --tail=200 -f"
    ), "the stack's cluster: the shell's current context may be another stack's"
    assert {step.kind for step in plan.steps} == {"JobSet"}
    assert [step.manifest["spec"]["replicatedJobs"][0]["name"] for step in (plan.convert, plan.export)] == [
        "convert",
        "export",
    ]
    annotations = ('metadata.annotations["tpu-rl/input"]', 'metadata.annotations["tpu-rl/retry-of"]')
    stall = "spec.replicatedJobs[0].template.spec.template.spec.containers[0].env[5].value"
    drill = "spec.replicatedJobs[0].template.spec.template.spec.containers[0].env[6].value"
    wait = "spec.replicatedJobs[0].template.spec.template.spec.containers[0].env[7].value"
    account = "spec.replicatedJobs[0].template.spec.template.spec.serviceAccountName"
    for step in plan.steps:
        assert step.ignore_changes == (
            "spec.failurePolicy.maxRestarts",
            "spec.replicatedJobs[0].template.spec.activeDeadlineSeconds",
            # Who a step runs as (a CPU step's account, the training head's): kept on an existing JobSet.
            *((stall, drill, wait, account) if step.step == "train" else (account,)),
            *annotations,
            'metadata.labels["kueue.x-k8s.io/queue-name"]',
        )
    assert "activeDeadlineSeconds" in cpu_job(plan.convert), "the path ignoreChanges names exists"
    head_pod = plan.train.manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert head_pod["containers"][0]["env"][5] == {"name": "TPU_RL_STALL_SECONDS", "value": "7200"}, stall
    assert head_pod["containers"][0]["env"][6] == {"name": "TPU_RL_RESTART_DRILL", "value": "false"}, drill
    assert head_pod["containers"][0]["env"][7] == {"name": "TPU_RL_SLICE_WAIT_SECONDS", "value": "16200"}, wait
    timeouts = jobs(settings("prod", ["tpu-rl:workflow.timeouts.convert=9h"]))
    assert timeouts.convert.name == plan.convert.name and cpu_job(timeouts.convert)["activeDeadlineSeconds"] == 9 * 3600


def test_the_identity_covers_the_object_the_cluster_and_the_bucket_but_not_operational_fields():
    base = jobs(PROD)
    moved = jobs(settings("prod", ["tpu-rl:clusterName=other"]))
    assert all(a.step_id != b.step_id for a, b in zip(base.steps, moved.steps, strict=True))
    bucket = jobs(settings("prod", ["tpu-rl:bucketName=another-bucket"]))
    assert all(a.step_id != b.step_id for a, b in zip(base.steps, bucket.steps, strict=True))
    region = jobs(settings("prod", ["gcp:region=us-central2", "gcp:zone=us-central2-b", "tpu-rl:bucketName=b-123"]))
    same_bucket = jobs(settings("prod", ["tpu-rl:bucketName=b-123"]))
    assert all(a.step_id != b.step_id for a, b in zip(region.steps, same_bucket.steps, strict=True)), "cluster"
    pathways = jobs(
        settings("prod", ["tpu-rl:images.pathwaysProxy=us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server:1"])
    )
    assert pathways.convert.step_id == base.convert.step_id and pathways.train.step_id != base.train.step_id
    timeouts = jobs(
        settings(
            "prod",
            [
                "tpu-rl:workflow.timeouts.train=30h",
                "tpu-rl:workflow.maxRestarts=3",
                "tpu-rl:workflow.stallTimeout=45m",
                "tpu-rl:workflow.restartDrill=true",
            ],
        )
    )
    assert [s.step_id for s in timeouts.steps] == [s.step_id for s in base.steps]
    head = timeouts.train.manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert {"name": "TPU_RL_STALL_SECONDS", "value": "2700"} in head["containers"][0]["env"]
    assert {"name": "TPU_RL_RESTART_DRILL", "value": "true"} in head["containers"][0]["env"]
    # Every attempt's deadline: the first, three restarts and the drill's restart, which maxRestarts does not count.
    assert (
        timeouts.train.manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["activeDeadlineSeconds"] == 30 * 3600
    )
    assert timeouts.train.await_seconds == 5 * (30 * 3600 + 900)
    assert base.train.await_seconds == 2 * (24 * 3600 + 900)


def test_identity_ignores_annotations_and_exactly_the_operational_paths():
    manifest = jobs(PROD).train.manifest
    other = dataclasses.replace(PROD)
    base = steps.identity(other, manifest)
    changed = {**manifest, "metadata": {**manifest["metadata"], "annotations": {"x": "y"}}}
    assert steps.identity(other, changed) == base
    spec = dict(manifest["spec"])
    spec["failurePolicy"] = {**spec["failurePolicy"], "maxRestarts": 5}
    assert steps.identity(other, {**manifest, "spec": spec}) == base
    spec["failurePolicy"] = {**spec["failurePolicy"], "restartStrategy": "BlockingRecreate"}
    assert steps.identity(other, {**manifest, "spec": spec}) != base
    assert steps.OPERATIONAL_PATHS == (
        "spec.failurePolicy.maxRestarts",
        "spec.replicatedJobs[0].template.spec.activeDeadlineSeconds",
    )
    stall = steps.stall_path(manifest)
    head = copy.deepcopy(manifest)
    head["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["env"][5]["value"] = "9"
    assert steps.identity(other, head) != base, "without the stall path, the bound is part of the identity"
    operational = (*steps.OPERATIONAL_PATHS, stall)
    assert steps.identity(other, head, operational) == steps.identity(other, manifest, operational)
    drill = steps.stall_path(manifest, "TPU_RL_RESTART_DRILL")
    assert drill == stall.replace("env[5]", "env[6]")
    drilled = copy.deepcopy(manifest)
    drilled["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["env"][6]["value"] = (
        "true"
    )
    assert steps.identity(other, drilled, operational) != steps.identity(other, manifest, operational)
    both = (*operational, drill)
    assert steps.identity(other, drilled, both) == steps.identity(other, manifest, both), "the drill is operational"


def test_a_cpu_steps_service_account_is_hashed_by_its_step_and_kept_on_an_existing_object():
    """Each CPU step's Kubernetes service account is named as its Google account (``<clusterName>-<step>``), in
    earlier versions ``tpu-rl-<step>``. Who a step runs as is not what it computes, and the cluster and the step are in
    the hash already: the identity hashes the account as ``tpu-rl-<step>``, its name before, so the rename kept
    every step's name (these, and ``STEP_NAMES``) and re-ran nothing; an existing JobSet keeps its account
    (``ignoreChanges``: JobSet v0.10.1's webhook refuses any change to ``spec.replicatedJobs``)."""
    everything = plan_workflow(
        settings("prod", ["tpu-rl:publish.repo=me/model", "tpu-rl:workflow.steps.evaluate=true"])
    )
    assert [s.name for s in everything] == [
        *STEP_NAMES["prod"],
        "gemma4-26b-evaluate-562bf2bc67",
        "gemma4-26b-publish-c11ad15825",
    ], "the names of STEP_NAMES' version, whatever account each step runs as"
    assert steps.ACCOUNT_PATH == "spec.replicatedJobs[0].template.spec.template.spec.serviceAccountName"
    for step in everything:
        pod = step.manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        if step.step == "train":
            # The head's own account: it reads its pods (its GCS access is its node's: hostNetwork).
            assert pod["serviceAccountName"] == "tpu-rl-prod-train-head" and pod["automountServiceAccountToken"]
            assert steps.ACCOUNT_PATH in step.ignore_changes
            continue
        assert pod["serviceAccountName"] == f"tpu-rl-prod-{step.step}"
        assert steps.ACCOUNT_PATH in step.ignore_changes
        assert steps.hashed_account(step.step) == f"tpu-rl-{step.step}"
        renamed = copy.deepcopy(step.manifest)
        renamed["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["serviceAccountName"] = "other"
        as_hashed = steps.identity(PROD, step.manifest, step=step.step)
        assert steps.identity(PROD, renamed, step=step.step) == as_hashed
        assert steps.identity(PROD, renamed) != steps.identity(PROD, step.manifest), "without its step, as it is"


def test_the_identity_covers_the_objects_name_and_labels():
    manifest = jobs(PROD).convert.manifest
    base = steps.identity(PROD, manifest)
    for field, value in (("labels", {**manifest["metadata"]["labels"], "x": "y"}), ("name", "other")):
        changed = {**manifest, "metadata": {**manifest["metadata"], field: value}}
        assert steps.identity(PROD, changed) != base, field


# A step's name is its identity: a change here re-runs that step (and the ones after it) for every user
# on their next `pulumi up`. Update these deliberately, with the reason in the commit message. The mutation run
# checks them too: in its tree the one product file a step ships, core/hf_model.py, is inlined as written
# (tests/conftest.py), so a mutant that changes what a step runs renames it and fails here.
STEP_NAMES = {
    # What each step's identity covers: its JobSet and its ConfigMap's data (scripts and programs: the image's MaxText
    # check, base_snapshot.py's Hub-hashed cache reads, training's launcher, exit judge, stall watchdog and restart
    # drill, the export's completion), with each CPU step's account hashed by its step (steps.hashed_account).
    # docs/upgrades.md "Upgrading tpu-rl" says which version renamed which steps.
    "dev": ["gemma4-e4b-convert-f3aea0590f", "gemma4-e4b-train-b15ce3fb3f", "gemma4-e4b-export-4e2b186f17"],
    "prod": ["gemma4-26b-convert-f6a03c1a76", "gemma4-26b-train-1e060b6f4e", "gemma4-26b-export-8b0e9eef51"],
}
ONE_READ = {
    "dev": ["gemma4-e4b-convert-f3aea0590f", "gemma4-e4b-train-087d42ea64", "gemma4-e4b-export-bf5f7e7540"],
    "prod": ["gemma4-26b-convert-f6a03c1a76", "gemma4-26b-train-55497c3ce1", "gemma4-26b-export-59d60e62dc"],
}
"""The names of a stack that sets tpu-rl:training.loadCheckpointOnlyOnce to true (MaxText's default, false, is
tpu-rl's: docs/first-run.md "The first training run's path"): training and the steps after it differ from
STEP_NAMES, the conversion is the same."""


@pytest.mark.parametrize("stack", sorted(STEP_NAMES))
def test_the_example_stacks_step_names(stack):
    assert [step.name for step in jobs(settings(stack, [])).steps] == STEP_NAMES[stack]


@pytest.mark.parametrize("stack", sorted(ONE_READ))
def test_reading_the_checkpoint_once_renames_training_and_after_never_the_conversion(stack):
    """MaxText's default (false) leaves the key out of the argv, and setting it false names nothing new; true puts it
    in: training and the steps after it have their own names, the conversion keeps its (``ONE_READ``), and so do the
    evaluation and the publication after them."""
    assert [step.name for step in jobs(settings(stack, ["tpu-rl:training.loadCheckpointOnlyOnce=false"])).steps] == (
        STEP_NAMES[stack]
    )
    once = settings(stack, ["tpu-rl:training.loadCheckpointOnlyOnce=true"])
    assert [step.name for step in jobs(once).steps] == ONE_READ[stack]
    assert ONE_READ[stack][0] == STEP_NAMES[stack][0] and ONE_READ[stack][1:] != STEP_NAMES[stack][1:]
    if stack == "prod":
        every = ["tpu-rl:publish.repo=me/model", "tpu-rl:workflow.steps.evaluate=true"]
        names = [
            s.name for s in plan_workflow(settings("prod", [*every, "tpu-rl:training.loadCheckpointOnlyOnce=true"]))
        ]
        assert names[3:] == ["gemma4-26b-evaluate-4b6893a6c8", "gemma4-26b-publish-552e1c6166"]


def test_the_cloud_logging_links():
    plan = jobs(PROD)
    base = "https://console.cloud.google.com/logs/query;query="
    scope = (
        'resource.type="k8s_container"\nresource.labels.project_id="my-tpu-prod-project"\n'
        'resource.labels.cluster_name="tpu-rl-prod"\nresource.labels.namespace_name="tpu-rl"\n'
    )
    convert = scope + f'resource.labels.pod_name:"{plan.convert.name}-convert-0"\n'
    convert += 'resource.labels.container_name="convert"'
    train = scope + f'resource.labels.pod_name:"{plan.train.name}-pathways-head-0"\n'
    train += 'resource.labels.container_name="workload-container"'
    for step, query in ((plan.convert, convert), (plan.train, train)):
        assert step.console_logs_url == base + urllib.parse.quote(query, safe="") + "?project=my-tpu-prod-project"
        assert "/" not in step.console_logs_url.split(";query=")[1].split("?")[0], "the query is one path segment"


def test_step_hash_is_stable_and_short():
    assert steps.step_hash({"a": 1, "b": [1, 2]}) == steps.step_hash({"b": [1, 2], "a": 1})
    assert steps.step_hash({"a": 1}) != steps.step_hash({"a": 2})
    assert steps.step_hash({"a": 1}) == "015abd7f5c"
    assert steps.step_hash({"b": [1, 2], "a": 1}) == "8baa731984", "sorted keys, compact separators"


def _with_model_name(s, length):
    name = "m" * length
    return dataclasses.replace(s, model=ModelSettings(dataclasses.replace(s.model.spec, name=name), "main"))


@pytest.mark.parametrize("version", ["0.10.1", "0.12.0"])
def test_a_model_name_too_long_for_what_the_controllers_derive_is_refused_naming_the_key(version):
    """The name is <model>-train-<10 hex> and the coordinator label <name>-pathways-head-0-0.rl-<10 hex>: 63
    characters at a 14-character model name. One more and the stack is refused before anything is created,
    naming tpu-rl:model.name and the derived value (JobSet 0.12.0's webhook refuses the JobSet; 0.10.1 accepts
    it and the API server refuses every child Job)."""
    from core.config import ConfigError

    s = dataclasses.replace(PROD, workflow=dataclasses.replace(PROD.workflow, jobset_version=version))
    fits = jobs(_with_model_name(s, 14)).train
    assert len(fits.name) == 31
    with pytest.raises(ConfigError) as refused:
        jobs(_with_model_name(s, 15))
    text = str(refused.value)
    assert text.startswith(f'tpu-rl:model.name = "{"m" * 15}" is invalid: the train step\'s JobSet m')
    assert f"could not run on JobSet {version}: " in text and "jobset.sigs.k8s.io/coordinator" in text
    assert "(64 characters): must be no more than 63 bytes" in text
    assert ("Job (labelAndAnnotateObject)" in text) == (version == "0.10.1"), "0.12.0: the webhook's own check"
    assert isinstance(Model, type)


def test_without_removes_exactly_the_given_paths():
    manifest = {"spec": {"a": 1, "b": [{"c": 2, "d": 3}]}, "kind": "X"}
    assert steps._without(manifest, ("spec.a", "spec.b[0].c")) == {"spec": {"b": [{"d": 3}]}, "kind": "X"}
    assert manifest == {"spec": {"a": 1, "b": [{"c": 2, "d": 3}]}, "kind": "X"}, "a copy"
    assert steps._without(manifest, ("spec.missing",)) == manifest


def test_the_identity_of_an_object_without_labels():
    unlabelled = copy.deepcopy(jobs(PROD).convert.manifest)
    del unlabelled["metadata"]["labels"]
    empty = copy.deepcopy(unlabelled)
    empty["metadata"]["labels"] = {}
    assert steps.identity(PROD, unlabelled) == steps.identity(PROD, empty)


@pytest.mark.parametrize("s", [PROD, DEV, TWO_SLICES])
def test_the_training_head_mounts_its_accounts_token_and_the_workers_none(s):
    """The head reads the pods of its namespace through its own account (``infra.k8s.manifests.head_access``); the
    TPU workers run as the namespace's default account, and a pod's setting wins over its account's."""
    pods = {
        job["name"]: (
            job["template"]["spec"]["template"]["spec"].get("serviceAccountName"),
            job["template"]["spec"]["template"]["spec"]["automountServiceAccountToken"],
        )
        for job in plan_workflow(s).train.manifest["spec"]["replicatedJobs"]
    }
    assert pods == {"pathways-head": (f"{s.cluster_name}-train-head", True), "worker": (None, False)}
