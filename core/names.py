"""Names and values that two sides of the platform must agree on (pool <-> pod, Secret <-> env)."""

from __future__ import annotations

PROJECT = "tpu-rl"
"""The Pulumi project and the namespace of its configuration keys."""

SYSTEM_POOL = "system"
CPU_POOL = "cpu-np"
"""The CPU pool: Pathways head, conversion and export (Cluster Toolkit and gcluster look for this name)."""

NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
TPU_ACCELERATOR_LABEL = "cloud.google.com/gke-tpu-accelerator"
TPU_TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"

TPU_TAINT_KEY = "google.com/tpu"
TPU_TAINT_VALUE = "present"
CPU_TAINT_KEY = "tpu-rl/pool"
CPU_TAINT_VALUE = CPU_POOL
"""Keeps everything but our CPU steps (and DaemonSets, which tolerate all taints) off cpu-np, so the
autoscaler can remove a 64-vCPU node once a step ends."""


def step_account(cluster: str, step: str) -> str:
    """A CPU step's own Google service account id, ``<clusterName>-<step>`` (``infra.gcp.naming``): it may touch only
    the bucket prefixes the step uses (``infra.gcp.access``). An account id is 6-30 characters and unique within the
    project (IAM refuses a second account of the same id): ``tpu-rl:clusterName`` holds at most 20 characters, so a
    step's name at most 9 (``tests/test_platform.py`` checks every step's)."""
    return f"{cluster}-{step}"


def head_ksa(cluster: str) -> str:
    """The Kubernetes service account of the training's Pathways head: ``<clusterName>-train-head``. It maps to no
    Google account (the head runs on the host network, as its node's account); its one grant is to read the pods of
    the workflow's namespace (``infra.k8s.manifests.head_access``), so the training script can wait for its slice's
    workers and judge a lost slice by them (``workloads/container/slice_state.py``). The cluster's name makes it the
    stack's own, as ``step_ksa`` does for the steps' accounts."""
    return f"{cluster}-train-head"


def step_ksa(cluster: str, step: str) -> str:
    """The Kubernetes service account of a CPU step's pods, bound by Workload Identity to the step's own Google
    account and named as it (``step_account``).

    The binding's principal, ``PROJECT.svc.id.goog[NAMESPACE/KSA]``, names the project's one identity pool and no
    cluster: a name every stack shares in one namespace (such as ``tpu-rl-<step>``) would let a pod of one
    stack's cluster act as another stack's account. The account id is unique within the project, so a
    principal named by it is one stack's whatever ``tpu-rl:namespace`` is. The name is a DNS-1123 subdomain
    (at most 253 characters; the id is lowercase letters, digits and hyphens, a letter first, at most 30)."""
    return step_account(cluster, step)


def workload_member(project: str, namespace: str, ksa: str) -> str:
    """The IAM member a Kubernetes service account is to Workload Identity, a principal of the project's one
    identity pool (``step_ksa``): ``serviceAccount:PROJECT.svc.id.goog[NAMESPACE/KSA]``. The program grants each CPU
    step's member ``roles/iam.workloadIdentityUser`` on the step's Google account (``infra.gcp.cluster``); the access
    audit counts the same members as the stack's own (``tools.audit``)."""
    return f"serviceAccount:{project}.svc.id.goog[{namespace}/{ksa}]"


HF_SECRET = "hf-token"
HF_SECRET_KEY = "token"
HF_WRITE_SECRET = "hf-write-token"
"""The publication's write token (``tpu-rl:hfWriteToken``): only the publish step's container reads it."""
HUB_URL = "https://huggingface.co"
"""Where a published repository is (``hubRepoUrl``; ``HF_ENDPOINT`` points the program's own reads elsewhere)."""
PUBLISH_ENV = ("TPU_RL_PUBLISH_REPO", "TPU_RL_PUBLISH_BRANCH", "TPU_RL_PUBLISH_PRIVATE")
"""What the publish step publishes where, as its container's environment (``workloads/container/publish_hub.py``
reads it; the policy pack's private-publish check reads it from the manifest)."""
SCRATCH_STORAGE_CLASS = "tpu-rl-scratch"
"""StorageClass of the CPU steps' scratch volumes; its disk type follows cpu-np's machine family."""

COMPONENT_LABEL = "app.kubernetes.io/component"
"""A step's pods carry their step's name here (``workloads.specs.step_manifests.labels``); the NetworkPolicy
selects the training pods by it."""
WORKLOAD_IDENTITY_ANNOTATION = "iam.gke.io/gcp-service-account"
"""On a Kubernetes service account: the Google account it acts as (GKE Workload Identity)."""

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
"""The label that puts a JobSet in a Kueue LocalQueue (Kueue ``constants.QueueLabel``)."""
LOCAL_QUEUE = "tpu-rl"
"""The stack's LocalQueue (in the workflow namespace) and ClusterQueue, when tpu-rl installs Kueue."""
CLUSTER_QUEUE = "tpu-rl"
TPU_FLAVOR = "tpu-rl-tpu-slice"
"""ResourceFlavor of the TPU slice pool(s): the workers' node selector."""
CPU_FLAVOR = "tpu-rl-cpu-np"
"""ResourceFlavor of cpu-np: the Pathways head's and the CPU steps' node selector."""

SETUP_FAILURE_EXIT = 3
"""Exit code of a step script that fails for a reason a retry cannot fix (image changed, nothing to
export); like every other non-zero exit, the Jobs' podFailurePolicy fails the step at once."""
SLICE_DOWN_EXIT = 75
"""Exit code of the training script when train_rl died of a lost TPU slice (EX_TEMPFAIL): the head's
podFailurePolicy counts it as a disruption, so the JobSet restarts instead of failing."""
STALLED_EXIT = 76
"""Exit code of the training script when its watchdog ended a train_rl whose log stopped growing for
``tpu-rl:workflow.stallTimeout``: counted as a disruption too (the JobSet restarts it from its checkpoint)."""
DRILL_EXIT = 77
"""Exit code of the training script when the restart drill ended its attempt after the run's first committed
checkpoint (``tpu-rl:workflow.restartDrill``): the head's podFailurePolicy fails its Job (``FailJob``), and the
JobSet's ``restartDrill`` rule, which matches that exit code in the Job's failure message, restarts it without
counting against ``maxRestarts`` (``RestartJobSetAndIgnoreMaxRestarts``)."""
SLICE_WAIT_EXIT = 78
"""Exit code of the training script when its slice's workers were not all Ready within the attempt's recovery budget
(``tpu-rl:kueue.recoveryTimeout``, ``workloads/container/slice_state.py wait``): like any exit but the disruptions',
the head's podFailurePolicy fails the Job and the JobSet at once; the next `pulumi up` retries the step."""

IMAGE_STREAMING_API = "containerfilesystem.googleapis.com"
"""The Container File System API, which GKE Image streaming (cpu-np, ``infra.gcp.gke_spec``) needs
enabled in the project (the Image streaming page's Requirements)."""
REQUIRED_APIS = (
    "cloudresourcemanager.googleapis.com",  # project-level IAM members (gcp.projects.IAMMember)
    "compute.googleapis.com",
    "container.googleapis.com",
    IMAGE_STREAMING_API,
    "iam.googleapis.com",
    "iamcredentials.googleapis.com",
    "logging.googleapis.com",
    "monitoring.googleapis.com",
    "storage.googleapis.com",
)
"""The Google Cloud APIs the stack enables (``infra.gcp.apis``) and the capacity check reads."""
KMS_API = "cloudkms.googleapis.com"
"""Enabled as well when the stack encrypts Secrets with a Cloud KMS key (``tpu-rl:gke.secretsEncryptionKey``)."""

RETRY_ANNOTATION = "tpu-rl/retry-of"
"""The annotation a retried step carries: the failed run's UID (``workloads.observe.live_state``)."""
ADOPTED = "/adopted"
"""The suffix of the retry marker of a run adopted by a create (``workloads.observe.live_state``)."""

KEYS_IN_STATE = "TPU_RL_KEYS_IN_STATE"
"""The environment variable through which ``make up`` tells the program the ids of the Cloud KMS keys the stack's
state holds (``tools.state_export.keys_in_state``, from ``pulumi stack export``; ``program.world.InState.keys``):
comma-separated; empty: none; unset: unknown (a `pulumi up` run by hand), and the capacity check decides by the key's
labels and the clusters that use it (``infra.gcp.capacity.keys``)."""
