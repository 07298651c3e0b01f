"""Kubernetes manifests of the three steps (plain dicts, no Pulumi).

Shapes follow Cluster Toolkit's ``gcluster job submit --pathways`` and xpk's Pathways
JobSet; the CPU-only conversion and export are plain ``batch/v1`` Jobs on ``cpu-np``.
"""

from __future__ import annotations

from typing import Any

from core.names import CPU_POOL, HF_SECRET, HF_SECRET_KEY, WORKLOAD_KSA
from core.settings import Settings

API_JOBSET = "jobset.x-k8s.io/v1alpha2"
WORKLOAD_CONTAINER = "workload-container"
COORDINATOR_LABEL = "metadata.labels['jobset.sigs.k8s.io/coordinator']"
# The tutorial sets these on the workload, proxy, resource manager and worker containers.
TUTORIAL_ENV = (("FLAGS_pathways_enforce_subset_devices_form_subslice", "false"), ("GRPC_DNS_RESOLVER", "native"))
ABSL_FLAGS = "--pathways_pipe_unreachable_timeout=60s"
WAIT_FOR_TERMINAL = "jsonpath={.status.terminalState}"


def _env(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "value": value}


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def token_env() -> dict[str, Any]:
    """``HF_TOKEN`` by reference to the Secret, never by value."""
    return {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": HF_SECRET, "key": HF_SECRET_KEY}}}


def tutorial_env() -> list[dict[str, Any]]:
    return [_env(k, v) for k, v in TUTORIAL_ENV]


def labels(settings: Settings, step: str, step_id: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "tpu-rl",
        "app.kubernetes.io/instance": settings.cluster_name,
        "app.kubernetes.io/component": step,
        "tpu-rl/step-id": step_id,
    }


def cpu_job(
    settings: Settings,
    *,
    name: str,
    step: str,
    step_id: str,
    command: list[str],
    scratch_gib: int,
    annotations: dict[str, Any],
) -> dict[str, Any]:
    """A single-pod ``batch/v1`` Job on ``cpu-np`` with the token from the Secret and HF_HOME on scratch."""
    model = settings.model.spec
    memory = model.cpu_step_memory_gib
    step_labels = labels(settings, step, step_id)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": settings.namespace,
            "labels": step_labels,
            "annotations": annotations,
        },
        "spec": {
            "backoffLimit": settings.workflow.max_restarts,
            "completions": 1,
            "parallelism": 1,
            "activeDeadlineSeconds": settings.workflow.timeouts[step],
            "template": {
                "metadata": {"labels": step_labels},
                "spec": {
                    "restartPolicy": "Never",
                    "serviceAccountName": WORKLOAD_KSA,
                    "nodeSelector": {"cloud.google.com/gke-nodepool": CPU_POOL},
                    "terminationGracePeriodSeconds": 30,
                    "containers": [
                        {
                            "name": step,
                            "image": settings.images.maxtext,
                            "command": command,
                            "env": [
                                token_env(),
                                _env("HF_HOME", "/scratch/huggingface"),
                                _env("HF_HUB_DISABLE_PROGRESS_BARS", "1"),
                            ],
                            "resources": {
                                "requests": {"cpu": "16", "memory": f"{memory}Gi"},
                                "limits": {"memory": f"{int(memory * 1.25)}Gi"},
                            },
                            "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                        }
                    ],
                    "volumes": [
                        {
                            "name": "scratch",
                            "ephemeral": {
                                "volumeClaimTemplate": {
                                    "metadata": {"labels": step_labels},
                                    "spec": {
                                        "accessModes": ["ReadWriteOnce"],
                                        "storageClassName": "standard-rwo",
                                        "resources": {"requests": {"storage": f"{scratch_gib}Gi"}},
                                    },
                                }
                            },
                        }
                    ],
                },
            },
        },
    }


def _shared_tmp() -> dict[str, Any]:
    return {"name": "shared-tmp", "hostPath": {"path": "/tmp", "type": "DirectoryOrCreate"}}


def pathways_jobset(
    settings: Settings,
    *,
    name: str,
    step_id: str,
    command: list[str],
    scratch_uri: str,
    annotations: dict[str, Any],
) -> dict[str, Any]:
    """The GRPO run as a Pathways JobSet: head (proxy, resource manager, workload) on cpu-np, workers on TPU."""
    shape, slices = settings.slice, settings.tpu.slices
    step_labels = labels(settings, "train", step_id)
    head_env = _field_env("PATHWAYS_HEAD", COORDINATOR_LABEL)
    proxy = {
        "name": "pathways-proxy",
        "image": settings.images.pathways_proxy,
        "restartPolicy": "Always",
        "args": [
            "--server_port=29000",
            "--resource_manager_address=$(PATHWAYS_HEAD):29001",
            f"--gcs_scratch_location={scratch_uri}",
        ],
        "env": [head_env, _env("ABSL_FLAGS", ABSL_FLAGS), *tutorial_env()],
        "ports": [{"containerPort": 29000, "protocol": "TCP"}],
        "resources": {"limits": {"cpu": "16", "memory": "100Gi"}},
    }
    resource_manager = {
        "name": "pathways-rm",
        "image": settings.images.pathways_server,
        "restartPolicy": "Always",
        "args": [
            "--server_port=29001",
            f"--gcs_scratch_location={scratch_uri}",
            "--node_type=resource_manager",
            f"--instance_count={slices}",
            f"--instance_type={shape.pathways_instance_type}",
        ],
        "env": [
            _field_env("REPLICATED_JOB_NAME", "metadata.annotations['jobset.sigs.k8s.io/replicatedjob-name']"),
            _field_env("JOBSET_NAME", "metadata.annotations['jobset.sigs.k8s.io/jobset-name']"),
            _field_env("HOST_ADDRESS", COORDINATOR_LABEL),
            _env("TPU_SKIP_MDS_QUERY", "true"),
            _env("ABSL_FLAGS", ABSL_FLAGS),
            *tutorial_env(),
        ],
        "ports": [{"containerPort": 29001, "protocol": "TCP"}, {"containerPort": 29002, "protocol": "TCP"}],
        "resources": {"limits": {"cpu": "8", "memory": "32Gi"}},
        "volumeMounts": [{"name": "shared-tmp", "mountPath": "/tmp"}],
    }
    workload = {
        "name": WORKLOAD_CONTAINER,
        "image": settings.images.maxtext,
        "command": command,
        "securityContext": {"privileged": True},
        "env": [
            head_env,
            _env("JAX_PLATFORMS", "proxy,cpu"),
            _env("XCLOUD_ENVIRONMENT", "GCP"),
            _env("JAX_BACKEND_TARGET", "grpc://127.0.0.1:29000"),
            _env("ENABLE_PATHWAYS_PERSISTENCE", "1"),
            _env("VLLM_ENABLE_V1_MULTIPROCESSING", "0"),
            _field_env("VLLM_HOST_IP", "status.podIP"),
            token_env(),
            _env("ABSL_FLAGS", ABSL_FLAGS),
            *tutorial_env(),
        ],
        "resources": {"requests": {"cpu": "8", "memory": "64Gi"}, "limits": {"cpu": "24", "memory": "100Gi"}},
        "volumeMounts": [{"name": "shared-tmp", "mountPath": "/tmp"}],
    }
    worker = {
        "name": "pathways-worker",
        "image": settings.images.pathways_server,
        "args": [
            "--server_port=29005",
            "--resource_manager_address=$(PATHWAYS_HEAD):29001",
            f"--gcs_scratch_location={scratch_uri}",
        ],
        "env": [
            _env("XCLOUD_ENVIRONMENT", "GCP"),
            _env("MEGASCALE_GRPC_ENABLE_XOR_TRACER", "false"),
            _field_env("MEGASCALE_NUM_SLICES", "metadata.labels['jobset.sigs.k8s.io/replicatedjob-replicas']"),
            _field_env("JOBSET_NAME", "metadata.annotations['jobset.sigs.k8s.io/jobset-name']"),
            _field_env("REPLICATED_JOB_NAME", "metadata.annotations['jobset.sigs.k8s.io/replicatedjob-name']"),
            _field_env("MEGASCALE_SLICE_ID", "metadata.labels['jobset.sigs.k8s.io/job-index']"),
            head_env,
            _field_env("MEGASCALE_COORDINATOR_ADDRESS", COORDINATOR_LABEL),
            _env("ABSL_FLAGS", ABSL_FLAGS),
            *tutorial_env(),
        ],
        "ports": [{"containerPort": p, "protocol": "TCP"} for p in (29005, 29006, 8471, 8080)],
        "resources": {"limits": {"google.com/tpu": str(shape.chips_per_vm)}},
        "volumeMounts": [{"name": "shared-tmp", "mountPath": "/tmp"}],
    }
    host_pod = {"hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet", "terminationGracePeriodSeconds": 30}
    return {
        "apiVersion": API_JOBSET,
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": settings.namespace, "labels": step_labels, "annotations": annotations},
        "spec": {
            "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
            "coordinator": {"replicatedJob": "pathways-head", "jobIndex": 0, "podIndex": 0},
            "startupPolicy": {"startupPolicyOrder": "InOrder"},
            "successPolicy": {"operator": "All", "targetReplicatedJobs": ["pathways-head"]},
            "failurePolicy": {
                "maxRestarts": settings.workflow.max_restarts,
                "restartStrategy": "Recreate",
                "rules": [
                    {
                        "name": "failOnPodFailurePolicy",
                        "action": "FailJobSet",
                        "onJobFailureReasons": ["PodFailurePolicy"],
                    }
                ],
            },
            "replicatedJobs": [
                {
                    "name": "pathways-head",
                    "replicas": 1,
                    "template": {
                        "metadata": {
                            "annotations": {"alpha.jobset.sigs.k8s.io/exclusive-topology": "kubernetes.io/hostname"}
                        },
                        "spec": {
                            "backoffLimit": 0,
                            "completionMode": "Indexed",
                            "completions": 1,
                            "parallelism": 1,
                            "activeDeadlineSeconds": settings.workflow.timeouts["train"],
                            "template": {
                                "metadata": {"labels": step_labels},
                                "spec": {
                                    **host_pod,
                                    "restartPolicy": "Never",
                                    "nodeSelector": {"cloud.google.com/gke-nodepool": CPU_POOL},
                                    "initContainers": [proxy, resource_manager],
                                    "containers": [workload],
                                    "volumes": [_shared_tmp()],
                                },
                            },
                        },
                    },
                },
                {
                    "name": "worker",
                    "replicas": slices,
                    "template": {
                        "metadata": {
                            "annotations": {
                                "alpha.jobset.sigs.k8s.io/exclusive-topology": "cloud.google.com/gke-nodepool"
                            }
                        },
                        "spec": {
                            "backoffLimit": shape.hosts * 4,
                            "completionMode": "Indexed",
                            "completions": shape.hosts,
                            "parallelism": shape.hosts,
                            "template": {
                                "metadata": {
                                    "labels": step_labels,
                                    "annotations": {"cloud.google.com/gke-tpu-slice-topology": shape.topology},
                                },
                                "spec": {
                                    **host_pod,
                                    "restartPolicy": "OnFailure",
                                    "nodeSelector": {
                                        "cloud.google.com/gke-tpu-accelerator": shape.gke_accelerator,
                                        "cloud.google.com/gke-tpu-topology": shape.topology,
                                    },
                                    "tolerations": [
                                        {"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"}
                                    ],
                                    "containers": [worker],
                                    "volumes": [_shared_tmp()],
                                },
                            },
                        },
                    },
                },
            ],
        },
    }
