"""Kubernetes manifests of the workflow's steps (plain dicts, no Pulumi).

Shapes follow Cluster Toolkit's ``gcluster job submit --pathways`` and xpk's Pathways
JobSet (``../shared/reference/cluster-toolkit.md`` §3, ``maxtext-pathways.md`` §3); the
CPU-only steps (the conversion, the export and the optional ones) are single-pod JobSets on ``cpu-np``
(never the TPU slice), so every step is one kind with one await rule, one status reader and one log selector. Ports,
labels, taints and names that another object must agree with are named constants, so tests can
cross-check each pair.
"""

from __future__ import annotations

from typing import Any

from core import pathways
from core.names import (
    COMPONENT_LABEL,
    CPU_POOL,
    CPU_TAINT_KEY,
    CPU_TAINT_VALUE,
    DRILL_EXIT,
    HF_SECRET,
    HF_SECRET_KEY,
    NODEPOOL_LABEL,
    QUEUE_LABEL,
    SLICE_DOWN_EXIT,
    STALLED_EXIT,
    TPU_ACCELERATOR_LABEL,
    TPU_TAINT_KEY,
    TPU_TOPOLOGY_LABEL,
    head_ksa,
    step_ksa,
)
from core.pathways import (
    PROXY_PORT,
    RESOURCE_MANAGER_EXTRA_PORT,
    RESOURCE_MANAGER_PORT,
    WORKER_EXTRA_PORTS,
    WORKER_PORT,
)
from core.settings import Settings
from workloads.container.slice_state import ATTEMPT_ENV, JOBSET_UID_ENV
from workloads.specs.commands import RUN_SCRIPT, SCRIPTS_DIR
from workloads.specs.train_script import DRILL_ENV, SLICE_WAIT_ENV, STALL_ENV

API_JOBSET = "jobset.x-k8s.io/v1alpha2"
WORKLOAD_CONTAINER = "workload-container"
HEAD_JOB = "pathways-head"
WORKER_JOB = "worker"
COORDINATOR_LABEL = "metadata.labels['jobset.sigs.k8s.io/coordinator']"
JOBSET_UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"
RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
"""JobSet's labels on every pod it makes (v0.10.1 ``jobset_controller.go`` ``labelAndAnnotateObject``): the
JobSet's UID, and the restart the pod belongs to (``status.restarts`` when its Job was made)."""
SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}
"""The provider returns once a step's JobSet is applied; the program waits for it (``workloads.observe.waiting``)."""

# The tutorial sets these on the workload, proxy, resource manager and worker containers.
TUTORIAL_ENV = (("FLAGS_pathways_enforce_subset_devices_form_subslice", "false"), ("GRPC_DNS_RESOLVER", "native"))
ABSL_FLAGS = "--pathways_pipe_unreachable_timeout=60s"
RM_ADDRESS = f"--resource_manager_address=$(PATHWAYS_HEAD):{RESOURCE_MANAGER_PORT}"  # the proxy's and workers'
HOST_NETWORK = {"hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet"}  # every Pathways pod's
EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"  # JobSet: each Job alone in its topology domain

HEAD_GRACE_SECONDS = 120
"""The Pathways head's termination grace period (a JobSet restart, the deadline, a drained node). train_rl
installs no SIGTERM handler (MaxText 0.2.4's and 0.2.5's train_rl, tunix c4ec573's learner and orbax's checkpoint
manager install none; orbax's ``reached_preemption`` is always False on the Pathways proxy), so it dies as soon as
the training script forwards SIGTERM, and an asynchronous checkpoint save in flight is abandoned: no grace
period lets it commit (its ``commit_success.txt`` is written by the dying process). What the grace covers is
the script's own work after that: stopping the watchdog and the log readers, copying the attempt's log (up
to tens of MB) and side file to GCS (a Python start and an upload each) and judging the exit (one more
start). Kubernetes' default 30 s, which xpk and gcluster keep for the head, is too short for that on a busy
node. The resume point is the last committed checkpoint (``training.checkpointPeriod``)."""
WORKER_GRACE_SECONDS = 30
"""The TPU workers' grace period: Kubernetes' default, as xpk, pathways-job and Cluster Toolkit leave it; the
Pathways server holds no state the run resumes from (GKE gives a spot or flex-start VM 15 s anyway)."""


def _pod_failed(container: str) -> dict[str, Any]:
    """Any non-zero exit of ``container`` (an exception, a bad flag, exit 3 from a setup check, an
    OOMKilled 137) fails its Job at once: a rerun would fail the same way."""
    return {"action": "FailJob", "onExitCodes": {"containerName": container, "operator": "NotIn", "values": [0]}}


DISRUPTED = {"type": "DisruptionTarget", "status": "True"}
"""The pod condition Kubernetes sets before it stops a pod for a reason outside it: preemption, eviction
(node pressure, API-initiated: a drain for an upgrade, repair or maintenance), a lost node's pods being
garbage-collected (``DeletionByPodGC``). Listed before the exit-code rule: a disrupted pod also exits non-zero
(143 after SIGTERM), and the Job controller applies the first rule that matches (``pod_failure_policy.go``
``matchPodFailurePolicy``)."""


def cpu_pod_failure_policy(step: str) -> dict[str, Any]:
    """A CPU step: a disrupted pod is re-created without counting (``Ignore``); any other failure of the
    step's container fails the Job, and so the JobSet, at once (``backoffLimit: 0``, ``maxRestarts: 0``)."""
    return {"rules": [{"action": "Ignore", "onPodConditions": [DISRUPTED]}, _pod_failed(step)]}


def head_pod_failure_policy() -> dict[str, Any]:
    """The Pathways head: a disruption counts against the Job's ``backoffLimit: 0`` (reason
    ``BackoffLimitExceeded``: the JobSet restarts, ``restartOnDisruption``): its own pod disrupted, the
    trainer stalled (the script's ``STALLED_EXIT``), or the trainer dead of a lost TPU slice (the script's
    ``SLICE_DOWN_EXIT``; the head's pod itself was fine, and
    the worker Jobs restart their pods in place, so no other Job fails first). Any other non-zero exit of
    the workload container fails the Job (reason ``PodFailurePolicy``: the JobSet fails,
    ``failOnWorkloadExit``)."""
    slice_down = {
        "action": "Count",
        "onExitCodes": {
            "containerName": WORKLOAD_CONTAINER,
            "operator": "In",
            "values": [SLICE_DOWN_EXIT, STALLED_EXIT],
        },
    }
    return {"rules": [{"action": "Count", "onPodConditions": [DISRUPTED]}, slice_down, _pod_failed(WORKLOAD_CONTAINER)]}


def train_failure_policy(max_restarts: int) -> dict[str, Any]:
    """The training JobSet's rules (JobSet 0.10.1 ``failure_policy.go``: rules are tried in order, each
    against every failed Job, ``findFirstFailedPolicyRuleAndJob``; no match restarts).

    1. ``restartOnDisruption``: a Job that failed ``BackoffLimitExceeded`` (the head disrupted, the trainer
       dead of a lost TPU slice, or a worker Job out of its in-place restarts) restarts the JobSet, counted
       against ``maxRestarts``. First, so that when Jobs failed both ways by the same reconcile, it is a
       restart.
    2. ``restartDrill``: the head exited ``DRILL_EXIT`` (the restart drill), in the Job's failure message: restart
       without counting against ``maxRestarts`` (docs/engine-behaviour.md "Training and its restarts")
    3. ``failOnWorkloadExit``: the head's Job failed by its pod failure policy (the trainer exited non-zero:
       an exception, an OOM, a bad flag, exit 3): fail at once, nothing is re-run.
    4. ``failOnDeadline``: the attempt's deadline is the bound; a restart would start a new deadline.
    """
    return {
        "maxRestarts": max_restarts,
        "restartStrategy": "Recreate",
        "rules": [
            {"name": "restartOnDisruption", "action": "RestartJobSet", "onJobFailureReasons": ["BackoffLimitExceeded"]},
            {
                "name": "restartDrill",
                "action": "RestartJobSetAndIgnoreMaxRestarts",
                "onJobFailureReasons": ["PodFailurePolicy"],
                "onJobFailureMessagePatterns": [f"with exit code {DRILL_EXIT} matching FailJob rule"],
                "targetReplicatedJobs": [HEAD_JOB],
            },
            {"name": "failOnWorkloadExit", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]},
            {"name": "failOnDeadline", "action": "FailJobSet", "onJobFailureReasons": ["DeadlineExceeded"]},
        ],
    }


STEP_COMMAND = ["/bin/bash", f"{SCRIPTS_DIR}/{RUN_SCRIPT}"]
"""Every step container's command: its script, a file of its ConfigMap (``scripts_config_map``), never an argument."""
SCRIPTS_VOLUME = "scripts"
SCRIPTS_MODE = 0o444
"""The scripts' files are read, never written or executed as files (bash reads ``run.sh``, python3 the programs);
the kubelet mounts a ConfigMap volume read-only whatever the mount says (since Kubernetes 1.10, CVE-2017-1002102)."""
CONFIG_MAP_MAX_BYTES = 1024 * 1024
"""What a ConfigMap may hold: its keys and values together (Kubernetes ``ValidateConfigMap``,
``pkg/apis/core/validation``: ``totalSize > core.MaxSecretSize``, 1 MiB)."""


def scripts_name(step_name: str) -> str:
    """The ConfigMap of a step's scripts: named after the step, whose name hashes its data
    (``workloads.specs.step_specs``), so a changed script is a new ConfigMap, never an edit under a running pod."""
    return f"{step_name}-scripts"


def scripts_config_map(settings: Settings, step: str, name: str, step_id: str, files: dict[str, str]) -> dict[str, Any]:
    """A step's scripts (``workloads.specs.commands.step_files``) as an immutable ConfigMap: the API server refuses
    any change to its data (Kubernetes "Immutable ConfigMaps"), and pulumi-kubernetes replaces an immutable
    ConfigMap whose data changed instead of updating it (``provider/pkg/provider/diff.go`` ``forceNewProperties``)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": settings.namespace, "labels": labels(settings, step, step_id)},
        "immutable": True,
        "data": dict(files),
    }


def scripts_volume(config_map: str) -> dict[str, Any]:
    return {"name": SCRIPTS_VOLUME, "configMap": {"name": config_map, "defaultMode": SCRIPTS_MODE}}


SCRIPTS_MOUNT = {"name": SCRIPTS_VOLUME, "mountPath": SCRIPTS_DIR, "readOnly": True}


def _env(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "value": value}


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def token_env(secret: str = HF_SECRET) -> dict[str, Any]:
    """``HF_TOKEN`` by reference to a token's Secret (the read token's, or the publication's write token's),
    never by value."""
    return {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": secret, "key": HF_SECRET_KEY}}}


def tutorial_env() -> list[dict[str, Any]]:
    return [_env(k, v) for k, v in TUTORIAL_ENV]


def cpu_toleration() -> dict[str, Any]:
    """Lets a pod onto cpu-np (the pool's taint keeps everything else off)."""
    return {"key": CPU_TAINT_KEY, "operator": "Equal", "value": CPU_TAINT_VALUE, "effect": "NoSchedule"}


def tpu_toleration() -> dict[str, Any]:
    return {"key": TPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}


def labels(settings: Settings, step: str, step_id: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "tpu-rl",
        "app.kubernetes.io/instance": settings.cluster_name,
        COMPONENT_LABEL: step,
        "tpu-rl/step-id": step_id,
    }


def jobset_labels(settings: Settings, step: str, step_id: str) -> dict[str, str]:
    """A step JobSet's own labels: the step's, and the LocalQueue Kueue admits it from (if any). Kueue's
    webhook suspends a labelled JobSet at creation and unsuspends it once admitted (Kueue
    ``jobframework.ApplyDefaultForSuspend``); the program never sets ``spec.suspend``."""
    queue = {QUEUE_LABEL: settings.kueue.queue} if settings.kueue.queue else {}
    return {**labels(settings, step, step_id), **queue}


def cpu_jobset(
    settings: Settings,
    *,
    name: str,
    step: str,
    step_id: str,
    scripts: str,
    scratch_gib: int,
    annotations: dict[str, Any],
    secret: str | None = HF_SECRET,
    memory_gib: int | None = None,
    env: tuple[dict[str, Any], ...] = (),
    config_map: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """A single-pod JobSet on ``cpu-np`` that runs the step's script from its ConfigMap ``scripts``
    (``STEP_COMMAND``), with the token from ``secret`` (None: no token, for a step that needs no Hub access) and
    HF_HOME on scratch; ``env`` added to the container's, ``config_map`` (name, path) mounted read-only (the
    publication's card).

    One replicated Job named after the step (Job ``<name>-<step>-0``, container ``<step>``). A failure of
    the step's container fails it at once (``cpu_pod_failure_policy``, ``backoffLimit: 0``, the JobSet's
    ``maxRestarts: 0``); a disrupted pod is re-created. Memory: request = limit =
    ``tpu-rl:workflow.stepMemoryGib`` (``core.models.step_memory_gib``).
    ``network.enableDNSHostnames: false``: one pod needs no headless Service.
    """
    memory = memory_gib or settings.workflow.step_memory_gib
    step_labels = labels(settings, step, step_id)
    return {
        "apiVersion": API_JOBSET,
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": settings.namespace,
            "labels": jobset_labels(settings, step, step_id),
            "annotations": annotations,
        },
        "spec": {
            "network": {"enableDNSHostnames": False},
            "failurePolicy": {"maxRestarts": 0},
            "replicatedJobs": [
                {
                    "name": step,
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "backoffLimit": 0,
                            "completionMode": "Indexed",
                            "completions": 1,
                            "parallelism": 1,
                            "activeDeadlineSeconds": settings.workflow.timeouts[step],
                            "podFailurePolicy": cpu_pod_failure_policy(step),
                            "template": {
                                "metadata": {"labels": step_labels},
                                "spec": _cpu_pod(settings, step, scripts, memory, scratch_gib, secret, env, config_map),
                            },
                        }
                    },
                }
            ],
        },
    }


CPU_STEP_SECURITY = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
"""The conversion's and the export's container: Pod Security ``restricted`` except ``runAsNonRoot`` (with
the pod's ``RuntimeDefault`` seccomp profile). The MaxText image runs as root (its Dockerfile sets no
``USER``; ``WORKDIR /deps``) and MaxText stages files under ``/tmp`` and ``$HOME``, so another user is not
proven to work; root without capabilities or privilege escalation cannot reach past its own files."""


def scratch_volume(scratch_gib: int) -> dict[str, Any]:
    """A CPU step's scratch (``HF_HOME``, the publication's work folder): an ``emptyDir`` on the node's boot
    disk, at most ``scratch_gib``. Never a claimed disk, so nothing billed outlives the pod's node:

    - a generic ephemeral volume makes a PersistentVolumeClaim, and so a Persistent Disk,
      that lives as long as the *Pod object* (Kubernetes "Ephemeral Volumes", "Lifecycle and
      PersistentVolumeClaim"); a finished Job keeps its Pods (Kubernetes "Jobs", "Job termination and
      cleanup") and a finished JobSet keeps its Jobs (JobSet v0.10.1 ``jobset_controller.go`` Reconcile
      deletes only active ones; tpu-rl sets no TTL), so a conversion's 124 GiB disk would stay billed until the
      step is replaced, and ``pulumi destroy``, which deletes no Kubernetes object (``deletedWith`` the
      cluster), would leave it to GKE, whose cluster deletion does not guarantee it ("Persistent disk volumes":
      ``gcloud container clusters delete``);
    - an ``emptyDir`` is torn down with the pod's volumes once the pod has terminated (kubelet
      ``kubelet.go`` ``SyncTerminatedPod``: ``WaitForUnmount``, then "Pod termination cleaned up volume
      paths"), goes with its node when cpu-np scales down, and is among what cluster deletion always
      removes ("Data stored in host hostPath and emptyDir volumes"). The boot disk is billed with the node
      either way.

    ``sizeLimit`` bounds it: a step that writes past it is evicted by the kubelet without a
    ``DisruptionTarget`` condition (``eviction_manager.go`` ``emptyDirLimitEviction`` calls ``evictPod`` with
    no condition), so its pod failure policy fails it once (``FailJob``) instead of re-creating it. It is not
    requested as ``ephemeral-storage``: Kueue 0.17.1 admits a pod set only if its ClusterQueue covers every
    resource it requests (``flavorassigner.go`` ``findFlavorForPodSets``: "resource %s unavailable in
    ClusterQueue"). cpu-np's boot disk (``tpu-rl:cpuPool.diskSizeGb``, 500 GB by default, 200 GB on dev)
    holds the largest scratch, 124 GiB for gemma4-26b's conversion, with GKE's system reservation and the
    images beside it."""
    return {"name": "scratch", "emptyDir": {"sizeLimit": f"{scratch_gib}Gi"}}


def _cpu_pod(
    settings: Settings,
    step: str,
    scripts: str,
    memory: int,
    scratch_gib: int,
    secret: str | None,
    env: tuple[dict[str, Any], ...],
    config_map: tuple[str, str] | None,
) -> dict[str, Any]:
    mounts: list[dict[str, Any]] = [{"name": "scratch", "mountPath": "/scratch"}]
    volumes: list[dict[str, Any]] = []
    if config_map:
        mounts.append({"name": "card", "mountPath": config_map[1], "readOnly": True})
        volumes.append({"name": "card", "configMap": {"name": config_map[0]}})
    return {
        "restartPolicy": "Never",
        "serviceAccountName": step_ksa(settings.cluster_name, step),
        "nodeSelector": {NODEPOOL_LABEL: CPU_POOL},
        "tolerations": [cpu_toleration()],
        "terminationGracePeriodSeconds": 30,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [
            {
                "name": step,
                "image": settings.images.maxtext,
                "command": list(STEP_COMMAND),
                "securityContext": CPU_STEP_SECURITY,
                "env": [
                    *([token_env(secret)] if secret else []),
                    _env("HF_HOME", "/scratch/huggingface"),
                    _env("HF_HUB_DISABLE_PROGRESS_BARS", "1"),
                    *env,
                ],
                "resources": {
                    "requests": {"cpu": "16", "memory": f"{memory}Gi"},
                    "limits": {"memory": f"{memory}Gi"},
                },
                "volumeMounts": [*mounts, dict(SCRIPTS_MOUNT)],
            }
        ],
        "volumes": [*volumes, scratch_volume(scratch_gib), scripts_volume(scripts)],
    }


SUBDOMAIN_PREFIX = "rl-"


def subdomain(step_id: str) -> str:
    """The training JobSet's subdomain, which is also its headless Service's name: ``rl-<step hash>``.

    JobSet's default is the JobSet's own name, which makes the coordinator label
    ``<jobset>-pathways-head-0-0.<jobset>`` 73 characters for ``gemma4-26b-train-<hash>``, and a label value
    holds 63 (``workloads.specs.derived``). The hash keeps it unique among the namespace's JobSets (a JobSet
    whose Service name is taken uses the other JobSet's Service, ``createHeadlessSvcIfNecessary``), and the
    prefix makes it a DNS-1035 label (a hash may start with a digit)."""
    return SUBDOMAIN_PREFIX + step_id


def _shared_tmp() -> dict[str, Any]:
    """The workers' ``/tmp``: the node's, as xpk, pathways-job and Cluster Toolkit mount it on every worker."""
    return {"name": "shared-tmp", "hostPath": {"path": "/tmp", "type": "DirectoryOrCreate"}}


def _head_tmp() -> dict[str, Any]:
    """The head's ``/tmp``: a volume of its own, shared by the resource manager and the workload container.

    The head needs no host path: the workload reaches the proxy over TCP, and no tool shares the node's
    ``/tmp`` across the head's containers (pathways-job mounts none, Cluster Toolkit the RM's only, xpk
    the workload's only); the script's logs need a writable ``/tmp``."""
    return {"name": "shared-tmp", "emptyDir": {}}


def _proxy(settings: Settings, scratch_uri: str) -> dict[str, Any]:
    """The head's Pathways proxy: a native sidecar (``restartPolicy: Always``), beside the workload for the pod's
    life."""
    return {
        "name": "pathways-proxy",
        "image": settings.images.pathways_proxy,
        "restartPolicy": "Always",
        "args": [f"--server_port={PROXY_PORT}", RM_ADDRESS, f"--gcs_scratch_location={scratch_uri}"],
        "env": [_field_env("PATHWAYS_HEAD", COORDINATOR_LABEL), _env("ABSL_FLAGS", ABSL_FLAGS), *tutorial_env()],
        "ports": [{"containerPort": PROXY_PORT, "protocol": "TCP"}],
        "resources": pathways.resources("proxy"),
    }


def _resource_manager(settings: Settings, scratch_uri: str) -> dict[str, Any]:
    """The head's Pathways resource manager, a native sidecar: one instance per TPU slice."""
    shape = settings.slice
    return {
        "name": "pathways-rm",
        "image": settings.images.pathways_server,
        "restartPolicy": "Always",
        "args": [
            f"--server_port={RESOURCE_MANAGER_PORT}",
            f"--gcs_scratch_location={scratch_uri}",
            "--node_type=resource_manager",
            f"--instance_count={settings.tpu.slices}",
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
        "ports": [
            {"containerPort": RESOURCE_MANAGER_PORT, "protocol": "TCP"},
            {"containerPort": RESOURCE_MANAGER_EXTRA_PORT, "protocol": "TCP"},
        ],
        "resources": pathways.resources("rm"),
        "volumeMounts": [{"name": "shared-tmp", "mountPath": "/tmp"}],
    }


def _workload(settings: Settings) -> dict[str, Any]:
    """The head's workload container: the step's script (``STEP_COMMAND``), JAX through the proxy on localhost; its
    JobSet's UID and restart attempt (JobSet's labels on every pod it makes) name the attempt's workers, which the
    script waits for and judges a lost slice by (``workloads/container/slice_state.py``)."""
    return {
        "name": WORKLOAD_CONTAINER,
        "image": settings.images.maxtext,
        "command": list(STEP_COMMAND),
        "env": [
            _field_env("PATHWAYS_HEAD", COORDINATOR_LABEL),
            _env("JAX_PLATFORMS", "proxy,cpu"),
            _env("XCLOUD_ENVIRONMENT", "GCP"),
            _env("JAX_BACKEND_TARGET", f"grpc://127.0.0.1:{PROXY_PORT}"),
            _env("ENABLE_PATHWAYS_PERSISTENCE", "1"),
            _env(STALL_ENV, str(settings.workflow.stall_timeout)),
            _env(DRILL_ENV, "true" if settings.workflow.restart_drill else "false"),
            _env(SLICE_WAIT_ENV, str(settings.kueue.recovery_timeout)),
            _field_env(JOBSET_UID_ENV, f"metadata.labels['{JOBSET_UID_LABEL}']"),
            _field_env(ATTEMPT_ENV, f"metadata.labels['{RESTART_ATTEMPT_LABEL}']"),
            _env("VLLM_ENABLE_V1_MULTIPROCESSING", "0"),
            _field_env("VLLM_HOST_IP", "status.podIP"),
            token_env(),
            _env("ABSL_FLAGS", ABSL_FLAGS),
            *tutorial_env(),
        ],
        "resources": pathways.resources("workload"),
        "volumeMounts": [{"name": "shared-tmp", "mountPath": "/tmp"}, dict(SCRIPTS_MOUNT)],
    }


def _worker(settings: Settings, scratch_uri: str) -> dict[str, Any]:
    """A TPU VM's Pathways worker: every chip of its host."""
    return {
        "name": "pathways-worker",
        "image": settings.images.pathways_server,
        "args": [f"--server_port={WORKER_PORT}", RM_ADDRESS, f"--gcs_scratch_location={scratch_uri}"],
        "env": [
            _env("XCLOUD_ENVIRONMENT", "GCP"),
            _env("MEGASCALE_GRPC_ENABLE_XOR_TRACER", "false"),
            _field_env("MEGASCALE_NUM_SLICES", "metadata.labels['jobset.sigs.k8s.io/replicatedjob-replicas']"),
            _field_env("JOBSET_NAME", "metadata.annotations['jobset.sigs.k8s.io/jobset-name']"),
            _field_env("REPLICATED_JOB_NAME", "metadata.annotations['jobset.sigs.k8s.io/replicatedjob-name']"),
            _field_env("MEGASCALE_SLICE_ID", "metadata.labels['jobset.sigs.k8s.io/job-index']"),
            _field_env("PATHWAYS_HEAD", COORDINATOR_LABEL),
            _field_env("MEGASCALE_COORDINATOR_ADDRESS", COORDINATOR_LABEL),
            _env("ABSL_FLAGS", ABSL_FLAGS),
            *tutorial_env(),
        ],
        "ports": [{"containerPort": p, "protocol": "TCP"} for p in (WORKER_PORT, *WORKER_EXTRA_PORTS)],
        "resources": {
            "requests": dict(pathways.WORKER_REQUESTS),
            "limits": {"google.com/tpu": str(settings.slice.chips_per_vm)},
        },
        "volumeMounts": [{"name": "shared-tmp", "mountPath": "/tmp"}],
    }


def _head_job(settings: Settings, step_labels: dict[str, str], scripts: str, scratch_uri: str) -> dict[str, Any]:
    """The head's replicated Job: one pod on cpu-np (the proxy and resource manager sidecars, the workload), on
    the node's network, alone on its node, failing by ``head_pod_failure_policy``. It runs as the head's own
    Kubernetes service account (``core.names.head_ksa``), whose token it mounts: its one grant reads the pods of its
    namespace (``infra.k8s.manifests.head_access``)."""
    pod = {
        **HOST_NETWORK,
        "serviceAccountName": head_ksa(settings.cluster_name),
        "automountServiceAccountToken": True,
        "terminationGracePeriodSeconds": HEAD_GRACE_SECONDS,
        "restartPolicy": "Never",
        "nodeSelector": {NODEPOOL_LABEL: CPU_POOL},
        "tolerations": [cpu_toleration()],
        "initContainers": [_proxy(settings, scratch_uri), _resource_manager(settings, scratch_uri)],
        "containers": [_workload(settings)],
        "volumes": [_head_tmp(), scripts_volume(scripts)],
    }
    job = {
        "backoffLimit": 0,
        "completionMode": "Indexed",
        "completions": 1,
        "parallelism": 1,
        "activeDeadlineSeconds": settings.workflow.timeouts["train"],
        "podFailurePolicy": head_pod_failure_policy(),
        "template": {"metadata": {"labels": step_labels}, "spec": pod},
    }
    template = {"metadata": {"annotations": {EXCLUSIVE: "kubernetes.io/hostname"}}, "spec": job}
    return {"name": HEAD_JOB, "replicas": 1, "template": template}


def _workers_job(settings: Settings, step_labels: dict[str, str], scratch_uri: str) -> dict[str, Any]:
    """The workers' replicated Job: one Job per slice (alone on its node pool), a pod per TPU VM, restarted in
    place (``backoffLimit``: four per host). No ``cloud.google.com/gke-tpu-slice-topology`` annotation: xpk sets it
    only for super-slicing and sub-slicing (``src/xpk/commands/workload.py``, ``create_tpu_slice_topology_annotation``
    under ``use_super_slicing``), Ironwood's (TPU7x) dynamic slicing; a v6e slice pool is chosen by its node labels.
    The pods mount no Kubernetes API token: the Pathways server calls no API, it gets its resource manager
    (``$(PATHWAYS_HEAD)``) and its slice from JobSet's labels by ``fieldRef``, as pathways-job builds it
    (google/pathways-job c0cc759 ``internal/controller/pathwaysjob_controller.go`` ``MakeWorkerJob``: no account, and
    its ``config/rbac`` binds only its controller; xpk and Cluster Toolkit set none, ``maxtext-pathways.md`` §3). The
    namespace's ``default`` account is granted nothing: a token would serve only a process that is not the server."""
    shape = settings.slice
    pod = {
        **HOST_NETWORK,
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": WORKER_GRACE_SECONDS,
        "restartPolicy": "OnFailure",
        "nodeSelector": {TPU_ACCELERATOR_LABEL: shape.gke_accelerator, TPU_TOPOLOGY_LABEL: shape.topology},
        "tolerations": [tpu_toleration()],
        "containers": [_worker(settings, scratch_uri)],
        "volumes": [_shared_tmp()],
    }
    job = {
        "backoffLimit": shape.hosts * 4,
        "completionMode": "Indexed",
        "completions": shape.hosts,
        "parallelism": shape.hosts,
        "template": {"metadata": {"labels": step_labels}, "spec": pod},
    }
    template = {"metadata": {"annotations": {EXCLUSIVE: NODEPOOL_LABEL}}, "spec": job}
    return {"name": WORKER_JOB, "replicas": settings.tpu.slices, "template": template}


def pathways_jobset(
    settings: Settings,
    *,
    name: str,
    step_id: str,
    scripts: str,
    scratch_uri: str,
    annotations: dict[str, Any],
) -> dict[str, Any]:
    """The GRPO run as a Pathways JobSet: head (proxy, resource manager, workload) on cpu-np, workers on TPU; the
    workload container runs the step's script from its ConfigMap ``scripts`` (``STEP_COMMAND``)."""
    step_labels = labels(settings, "train", step_id)
    return {
        "apiVersion": API_JOBSET,
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": settings.namespace,
            "labels": jobset_labels(settings, "train", step_id),
            "annotations": annotations,
        },
        "spec": {
            "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True, "subdomain": subdomain(step_id)},
            "coordinator": {"replicatedJob": HEAD_JOB, "jobIndex": 0, "podIndex": 0},
            "startupPolicy": {"startupPolicyOrder": "InOrder"},
            "successPolicy": {"operator": "All", "targetReplicatedJobs": [HEAD_JOB]},
            "failurePolicy": train_failure_policy(settings.workflow.max_restarts),
            "replicatedJobs": [
                _head_job(settings, step_labels, scripts, scratch_uri),
                _workers_job(settings, step_labels, scratch_uri),
            ],
        },
    }
