"""The platform's keys of the configuration's table (``core.config.schema.FIELDS``), in the order the reference
shows them: the project and its place, the cluster's and the bucket's names and protection, the state's home and who
is the stack's own, the workflow's namespace and the Hugging Face tokens, the TPU slice and its capacity, the node
pools and GKE. Their rules are ``core.config.cluster_rules`` and ``core.config.storage_rules``."""

from __future__ import annotations

from core.config.defaults import DEFAULT_EXCLUSION, default_topologies, default_topology
from core.config.fields import DERIVED, REQUIRED, Field
from core.config.fields import project_key as _key
from core.config.formats import (
    BUCKET_NAME,
    CLOCK,
    CLUSTER_NAME,
    DISK_IMAGE,
    HOLD,
    IAM_MEMBERS,
    KMS_KEY,
    KUBE_CONTEXT,
    MACHINE_TYPE,
    NAMESPACE,
    NETWORKS,
    PROJECT_ID,
    REGION,
    RESERVATION,
    STATE_BACKEND,
    STATE_ORGANIZATION,
    TOKEN,
    TPU_MACHINE_TYPE,
    VERSION_PREFIX,
    WORKLOAD_IDENTITY_POOL,
    WRITE_TOKEN,
    ZONE,
)
from core.config.values import Boolean, Integer, OneOf, Text
from core.tpu import CAPACITY_MODES, CATALOGUE, DEFAULT_VERSION, Capacity

RELEASE_CHANNELS = ("RAPID", "REGULAR", "STABLE", "EXTENDED")
EXCLUSION_SCOPES = ("NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES", "none")


_UNSET_FOR_EXISTING = (
    (_key("gke.versionPrefix"), ""),
    (_key("gke.secretsEncryptionKey"), ""),
    (_key("gke.holdUpgrades"), ""),
    (_key("cpuPool.bootDiskImage"), ""),
    (_key("images.mirror"), False),
)
"""What an existing cluster's keys need beside them: ``core.config.cluster_rules.CREATED_ONLY`` unset."""

PLATFORM_FIELDS: tuple[Field, ...] = (
    Field("gcp:project", PROJECT_ID, REQUIRED, "Google Cloud project", samples=("another-project",)),
    Field(
        "gcp:region",
        REGION,
        REQUIRED,
        "region of the cluster and bucket",
        samples=("us-central2",),
        companions=(("gcp:zone", "us-central2-b"),),
    ),
    Field("gcp:zone", ZONE, REQUIRED, "zone of every node pool (must be in gcp:region)", samples=("us-east5-a",)),
    Field(
        _key("clusterName"),
        CLUSTER_NAME,
        "tpu-rl",
        "GKE cluster name; every other name derives from it",
        samples=("tpu-rl-b",),
    ),
    Field(
        _key("bucketName"),
        BUCKET_NAME,
        DERIVED,
        "artifacts bucket; default `<gcp:project>-<clusterName>`",
        samples=("my-artifacts-bucket",),
    ),
    Field(
        _key("existingCluster.kubeContext"),
        KUBE_CONTEXT,
        "",
        "run the workflow on a cluster the stack does not create, reached through this kubeconfig context; the stack "
        "then creates no network, bucket, cluster or pool (tpu-rl:bucketName names an existing bucket), checks the "
        "cluster has what the steps need, and never changes what it did not create (docs/existing-cluster.md); "
        "empty = the stack's own cluster",
        samples=("gke_my-project_us-east5_gke-tpu-v6e",),
        companions=_UNSET_FOR_EXISTING,
    ),
    Field(
        _key("existingCluster.workloadIdentity"),
        Boolean(),
        True,
        "with existingCluster.kubeContext: the cluster is GKE with Workload Identity, so each CPU step gets a Google "
        "service account of its own in gcp:project, bound to its Kubernetes service account; false: the steps' pods "
        "run as their nodes' identity",
        companions=((_key("existingCluster.kubeContext"), "kind-tpu-rl"), *_UNSET_FOR_EXISTING),
    ),
    Field(
        _key("authorizedNetworks"),
        NETWORKS,
        ["0.0.0.0/0"],
        "CIDRs that may reach the control plane (at most 50, canonical a.b.c.d/n)",
        samples=(["198.51.100.7/32"],),
    ),
    Field(_key("protect"), Boolean(), False, "protect bucket, cluster and TPU pools; GKE deletion protection"),
    Field(_key("forceDestroy"), Boolean(), False, "let destroy delete a non-empty bucket"),
    Field(
        _key("sharedProject"),
        Boolean(),
        False,
        "accept a gcp:project another stack file names too (set in both): there each stack's deploy identity "
        'administers the other (docs/security.md "Two stacks in one project")',
    ),
    Field(
        _key("bucketVersioning"),
        Boolean(),
        False,
        "keep overwritten and deleted objects as noncurrent versions for 7 days (the prod example sets it)",
    ),
    Field(
        _key("stateBackend"),
        STATE_BACKEND,
        DERIVED,
        "where the stack's Pulumi state lives, read by `make` (tools/state.py) and never by the program: each "
        "command gets it as PULUMI_BACKEND_URL; default: a bucket of the stack's own, "
        "`gs://<gcp:project>-pulumi-state-<stack>`, which `make stack` records here",
        samples=("gs://acme-prod-pulumi-state", "https://api.pulumi.com"),
    ),
    Field(
        _key("stateOrganization"),
        STATE_ORGANIZATION,
        "",
        "the organization of a Pulumi Cloud state home, read by `make` (tools/state.py) and never by the program: "
        "every command gets it as PULUMI_DEFAULT_ORGANIZATION, so `prod` names one stack whoever runs it; required "
        "with an https:// tpu-rl:stateBackend",
        samples=("acme",),
    ),
    Field(
        _key("access.members"),
        IAM_MEMBERS,
        [],
        "who runs the stack's commands (operators, the deploy account, the CI principalSets that act as it), read by "
        "`make` and never by the program: `make state-bucket` grants them the state and records its MEMBERS= here, "
        "and the access audit counts them as the stack's own (docs/audit.md)",
        samples=(["user:ops@example.com", "serviceAccount:deploy-prod@my-project.iam.gserviceaccount.com"],),
    ),
    Field(
        _key("access.readers"),
        IAM_MEMBERS,
        [],
        "who only previews the stack (the preview account and its principalSet), read by `make`: `make state-bucket` "
        "grants them read access to the state and records its READERS= here; the access audit counts them as the "
        "stack's own",
        samples=(["serviceAccount:preview-prod@my-project.iam.gserviceaccount.com"],),
    ),
    Field(
        _key("access.workloadIdentityPool"),
        WORKLOAD_IDENTITY_POOL,
        "",
        "the Workload Identity pool the CI principals of access.members and access.readers come from, in the stack's "
        "own project, read by `make`: the access audit names whoever can rewrite it, and a pool in another stack's "
        "project; empty = none",
        samples=("projects/123456789012/locations/global/workloadIdentityPools/github",),
    ),
    Field(_key("namespace"), NAMESPACE, "tpu-rl", "Kubernetes namespace of the workflow", samples=("rl-runs",)),
    Field(
        _key("hfToken"),
        TOKEN,
        "",
        "Hugging Face read token (secret; required while the workflow is on)",
        samples=("hf_SAMPLEotherTOKENvalue0123456789",),
        secret=True,
    ),
    Field(
        _key("hfWriteToken"),
        WRITE_TOKEN,
        "",
        "Hugging Face write token of tpu-rl:publish.repo (secret; required with it, and only the publish step gets it)",
        samples=("hf_SAMPLEwriteTOKENvalue0123456789",),
        secret=True,
    ),
    # tpu
    Field(
        _key("tpu.version"),
        OneOf(CATALOGUE.keys()),
        DEFAULT_VERSION,
        "TPU generation",
        companions=((_key("tpu.machineType"), ""),),
    ),
    Field(
        _key("tpu.machineType"),
        TPU_MACHINE_TYPE,
        DERIVED,
        "TPU VM type; default: the version's 4-chip type",
        samples=("ct6e-standard-8t",),
        shown_default=CATALOGUE[DEFAULT_VERSION].default_machine_type,
        companions=((_key("tpu.topology"), "2x4"), (_key("training.iciExpertParallelism"), 1)),
    ),
    Field(
        _key("tpu.topology"),
        Text(r"[0-9]{1,2}(x[0-9]{1,2}){1,2}", "a topology such as 4x8 or 2x2x4"),
        DERIVED,
        f"slice topology; default {default_topologies()}",
        samples=("4x4", "2x4"),
        shown_default=default_topology(DEFAULT_VERSION),
    ),
    Field(
        _key("tpu.slices"),
        Integer(1, 64),
        1,
        "slices (one node pool each; Pathways multislice); a run uses 1, or 2 (experimental: its meshes are "
        "verified, no run yet) with the trainer on one slice and the samplers on the other as one replica "
        "(iciExpertParallelism 1, rolloutTensorParallelism x rolloutExpertParallelism the slice's chips)",
        companions=(
            (_key("tpu.topology"), "2x4"),
            (_key("training.iciExpertParallelism"), 1),
            (_key("training.rolloutTensorParallelism"), 8),
        ),
    ),
    Field(
        _key("tpu.capacity"),
        OneOf(CAPACITY_MODES),
        Capacity.RESERVATION.value,
        "how TPU capacity is obtained",
        companions=((_key("tpu.reservation"), ""),),
    ),
    Field(
        _key("tpu.reservation"),
        RESERVATION,
        DERIVED,
        "specific reservation (with capacity reservation only)",
        samples=("my-other-reservation",),
        companions=((_key("tpu.capacity"), Capacity.RESERVATION.value),),
    ),
    # pools
    Field(
        _key("systemPool.machineType"),
        MACHINE_TYPE,
        "e2-standard-8",
        "system pool machine type",
        samples=("e2-standard-16",),
    ),
    Field(_key("systemPool.minNodes"), Integer(1, 1000), 2, "system pool minimum nodes"),
    Field(_key("systemPool.maxNodes"), Integer(1, 1000), 10, "system pool maximum nodes"),
    Field(_key("systemPool.diskSizeGb"), Integer(50, 65536), 200, "system pool boot disk (GB)"),
    Field(
        _key("cpuPool.machineType"),
        MACHINE_TYPE,
        "n4-standard-64",
        "cpu-np machine type (Pathways head, CPU steps), Cluster Toolkit's",
        samples=("n2-standard-64", "n2-highmem-64"),
    ),
    Field(_key("cpuPool.minNodes"), Integer(0, 1000), 0, "cpu-np minimum nodes"),
    Field(_key("cpuPool.maxNodes"), Integer(1, 1000), 4, "cpu-np maximum nodes"),
    Field(_key("cpuPool.diskSizeGb"), Integer(50, 65536), 500, "cpu-np boot disk (GB)"),
    Field(
        _key("cpuPool.bootDiskImage"),
        DISK_IMAGE,
        "",
        "a disk image of gcp:project with the steps' images preloaded (gke-disk-image-builder), given to cpu-np's new "
        "nodes as a secondary boot disk (an image cache: the Pathways head's and the CPU steps' MaxText image); "
        "empty = none. Set at the pool's creation (an existing cpu-np keeps what it has)",
        samples=("tpu-rl-images-0-2-5",),
    ),
    # gke
    Field(_key("gke.releaseChannel"), OneOf(RELEASE_CHANNELS), "REGULAR", "GKE release channel"),
    Field(
        _key("gke.versionPrefix"),
        VERSION_PREFIX,
        "",
        "pin the control plane to the channel's newest version "
        'with this prefix (Cluster Toolkit pins "1.35.", and so does the prod example); at least "1.33." with Kueue '
        '(the oldest Kubernetes Kueue 0.17 is tested on) and "1.31.1-gke.2008000" (the scheduled-maintenance node '
        "label); empty = the channel default",
        samples=("1.35.", "1.34."),
    ),
    Field(
        _key("gke.maintenanceExclusion"),
        OneOf(EXCLUSION_SCOPES),
        DEFAULT_EXCLUSION,
        "standing maintenance exclusion until end of support: NO_MINOR_OR_NODE_UPGRADES (Cluster Toolkit's) keeps "
        "every node upgrade away from a running training (its slice and the Pathways head's cpu-np node), so node "
        "patches come in by a manual upgrade between runs; NO_MINOR_UPGRADES lets node and control-plane patches in "
        "(in the window), where one ends a running training attempt",
        samples=("NO_MINOR_UPGRADES", "none"),
    ),
    Field(
        _key("gke.holdUpgrades"),
        HOLD,
        "",
        "no upgrades at all between two UTC dates, at most 30 days (a NO_UPGRADES exclusion: set it for a "
        "long run, remove it after)",
        samples=("2026-12-01/2026-12-29",),
    ),
    Field(
        _key("gke.secretsEncryptionKey"),
        KMS_KEY,
        "",
        "Cloud KMS key for application-layer Secret encryption (CIS GKE 5.3.1): `create` (a key ring and key "
        "the stack creates in gcp:region) or projects/P/locations/REGION/keyRings/R/cryptoKeys/K; empty = none",
        samples=("create", "projects/another-project/locations/us-east5/keyRings/gke/cryptoKeys/secrets"),
    ),
    Field(_key("gke.maintenanceWindow"), CLOCK, "09:00", "daily maintenance window start (UTC)", samples=("03:00",)),
)
