"""The stack's configuration as data: every key, its reader, default, samples and description.

One table drives parsing (``core.config.load``), the declarations in ``Pulumi.yaml`` (a test keeps them equal), the
configuration reference in docs/configuration.md and the invariance test that walks every key. A new setting is one
``Field`` here (its machinery: ``core.config.fields``) plus its use in the rules of its area (``core.config.rules``).
"""

from __future__ import annotations

from typing import Any

from core.config.defaults import DEFAULT_EXCLUSION, DISRUPTION_HOURS, default_topologies, default_topology
from core.config.fields import DERIVED, REQUIRED, Field, knob_field, reference_rows
from core.config.fields import project_key as _key
from core.config.formats import (
    BUCKET_NAME,
    CLOCK,
    CLUSTER_NAME,
    DISK_IMAGE,
    HOLD,
    HUB_CACHE,
    HUB_REPO,
    IMAGE,
    KMS_KEY,
    MACHINE_TYPE,
    MAXTEXT_ARGS,
    NAMESPACE,
    NETWORKS,
    PROJECT_ID,
    QUEUE_NAME,
    REGION,
    REGISTRIES,
    RESERVATION,
    REVISION,
    STACK_NAME,
    STATE_BACKEND,
    STATE_ORGANIZATION,
    TOKEN,
    TPU_MACHINE_TYPE,
    VERSION_PREFIX,
    WRITE_TOKEN,
    ZONE,
)
from core.config.values import Boolean, Duration, Integer, OneOf, Text
from core.controllers import JOBSET_VERSIONS, KUEUE_VERSIONS
from core.knobs import DATASETS, OPTIMIZERS, TRAINING_KNOBS
from core.maxtext_keys import MAXTEXT_VERSION
from core.models import DEFAULT_MODEL, MODELS, step_memory_gib
from core.names import PROJECT
from core.steps import STEPS
from core.tpu import CAPACITY_MODES, CATALOGUE, DEFAULT_VERSION, Capacity

RELEASE_CHANNELS = ("RAPID", "REGULAR", "STABLE", "EXTENDED")

DEFAULT_IMAGES = {
    "maxtext": "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training:0.2.5",
    # Digests pinned by MaxText's own v6e-32 Gemma 4 RL recipe.
    "pathwaysServer": "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server@sha256:"
    "d03068b39a8a2fab0621086ccb7c9445ce17ad34f1520159ca4ecd395346a162",
    "pathwaysProxy": "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server@sha256:"
    "6342a3cae2818d2f887d396e9ae4156b3316f79fef186d71ff16d535b44e1724",
}


IMAGE_REGISTRIES = ("us-docker.pkg.dev/cloud-tpu-images", "us-docker.pkg.dev/cloud-tpu-v2-images")
"""The default of ``tpu-rl:images.registries``: Google's TPU image repositories, which publish the tutorial's MaxText
and Pathways images (an image from anywhere else runs with the Hugging Face token and a read-write bucket identity)."""
EXCLUSION_SCOPES = ("NO_MINOR_UPGRADES", "NO_MINOR_OR_NODE_UPGRADES", "none")
MAXTEXT_CHECKS = ("refuse", "warn")
"""``tpu-rl:images.maxtextCheck`` (``workloads/container/maxtext_check.py`` ``MODES``)."""


FIELDS: tuple[Field, ...] = (
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
    # model and images
    Field(
        _key("model.name"),
        OneOf(MODELS.keys()),
        DEFAULT_MODEL,
        "model to post-train",
        companions=((_key("cpuPool.diskSizeGb"), 500),),  # the largest model's scratch needs 288 GB (dev has 200)
    ),
    Field(
        _key("model.revision"),
        REVISION,
        "main",
        "branch, tag or commit of the Hugging Face repository",
        samples=("0123456789abcdef0123456789abcdef01234567",),
    ),
    Field(
        _key("model.hubCache"),
        HUB_CACHE,
        "",
        "a Hub cache several stacks of the project share: the base model's files, fetched from the Hub once per model "
        "and commit (a bucket of your own in gcp:region, uniform bucket-level access; never the stack's bucket, "
        "which a destroy may empty); empty = the stack's own, under its bucket's <model>/convert/hub/",
        samples=("gs://another-project-tpu-rl-hub/hub/",),
        companions=((_key("model.hubCacheWriter"), "prod"),),
    ),
    Field(
        _key("model.hubCacheWriter"),
        STACK_NAME,
        "",
        "the one stack whose conversion writes model.hubCache (required with it, the same in every stack that shares "
        "it): the others only read it, and fetch what it lacks into their own cache",
        samples=("prod",),
        companions=((_key("model.hubCache"), "gs://another-project-tpu-rl-hub/hub/"),),
    ),
    Field(
        _key("images.registries"),
        REGISTRIES,
        list(IMAGE_REGISTRIES),
        "registries the images may come from (a repository path each; an image outside them is refused)",
        samples=(
            [
                "us-docker.pkg.dev/cloud-tpu-images",
                "us-docker.pkg.dev/cloud-tpu-v2-images",
                "europe-docker.pkg.dev/my-project/mirror",
            ],
        ),
    ),
    Field(
        _key("images.maxtext"),
        IMAGE,
        DEFAULT_IMAGES["maxtext"],
        f"MaxText post-training image (a tag that names another MaxText release than {MAXTEXT_VERSION} is refused "
        "unless images.maxtextCheck is warn)",
        samples=("us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training@sha256:" + "3" * 64,),
    ),
    Field(
        _key("images.maxtextCheck"),
        OneOf(MAXTEXT_CHECKS),
        "refuse",
        f"what a MaxText step does when its image's MaxText is not the files of the {MAXTEXT_VERSION} wheel the "
        "checks ran (workloads/container/maxtext_check.py, which names the image's own version): refuse stops it "
        "(exit 3) before it reads a weight; warn says so in one line and runs the image's MaxText unchecked (the "
        "way out when the official image itself differs), and lets a tag of another release through",
    ),
    Field(
        _key("images.pathwaysServer"),
        IMAGE,
        DEFAULT_IMAGES["pathwaysServer"],
        "Pathways server (RM and workers)",
        samples=("us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server@sha256:" + "1" * 64,),
    ),
    Field(
        _key("images.pathwaysProxy"),
        IMAGE,
        DEFAULT_IMAGES["pathwaysProxy"],
        "Pathways proxy",
        samples=("us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server@sha256:" + "2" * 64,),
    ),
    Field(
        _key("images.mirror"),
        Boolean(),
        False,
        "pull the images through Artifact Registry remote repositories of the stack's own, in its project and region "
        "(GKE Image streaming needs it for Google's public images; a new image location: the steps run again once)",
    ),
    # training
    *(knob_field(knob) for knob in TRAINING_KNOBS),
    Field(
        _key("training.optimizer"),
        OneOf(OPTIMIZERS),
        "adafactor",
        "adafactor (the tutorial's patch of utils_rl.py) or adamw (MaxText's default)",
    ),
    Field(_key("training.dataset"), OneOf(tuple(DATASETS)), "openmathinstruct2", "training dataset"),
    Field(
        _key("training.datasetRevision"),
        REVISION,
        "main",
        "branch, tag or commit of the dataset's Hugging Face repository (a commit pins what every run trains on)",
        samples=("0123456789abcdef0123456789abcdef01234567",),
    ),
    Field(
        _key("training.extraArgs"),
        MAXTEXT_ARGS,
        {},
        f"more MaxText `key: value` pairs (checked against {MAXTEXT_VERSION})",
        samples=({"eval_interval": 5},),
    ),
    # publish
    Field(
        _key("publish.repo"),
        HUB_REPO,
        "",
        "Hub model repository the verified export is uploaded to, on a branch `tpu-rl-<step hash>` with its "
        "model card (empty: no publication)",
        samples=("my-org/gemma4-grpo-v2",),
    ),
    Field(
        _key("publish.private"),
        Boolean(),
        True,
        "create the repository private, and refuse to publish to an existing public one; false publishes in "
        "the open (the policy pack's private-publish check must list the repository in publicRepos)",
    ),
    # workflow
    Field(_key("workflow.enabled"), Boolean(), True, "run the workflow (false = provision only)"),
    Field(_key("workflow.preflight"), Boolean(), True, "check the Hugging Face token before creating anything"),
    Field(
        _key("workflow.capacityCheck"),
        Boolean(),
        True,
        "check the reservation, the region's quotas and the APIs before creating anything",
    ),
    Field(
        _key("workflow.verifyExport"),
        Boolean(),
        True,
        "compare the exported model with the base model's Hub metadata (architecture, tensor names, shapes, BF16) "
        "before `up` succeeds (tpu-rl:publish.repo needs it)",
        companions=((_key("publish.repo"), ""),),
    ),
    Field(
        _key("workflow.maxRestarts"),
        Integer(0, 10),
        DERIVED,
        "JobSet restarts of a training run, one counted for each disruption (a lost slice, a maintenance event, a "
        "stalled attempt); default by capacity, reservation/on-demand 1, spot 3, flex-start 2, raised to one per "
        f"started {DISRUPTION_HOURS} h of the estimate's training; a value from 1 below that is refused, 0 fails the "
        "run at its first disruption (the tutorial's)",
    ),
    Field(
        _key("workflow.unschedulableTimeout"),
        Duration(60, 168 * 3600),
        DERIVED,
        "how long a step's pod may stay unschedulable (its pool cannot grow: stockout, quota, max size) before "
        "`pulumi up` fails with the scheduler's and autoscaler's reasons; default 15m, flex-start 1h",
        samples=("30m",),
    ),
    Field(
        _key("workflow.stepMemoryGib"),
        Integer(8, 4096),
        DERIVED,
        "memory (GiB, request = limit) of every CPU step but the publication (its own 32); default from the model: "
        "3 x its bf16 weights + 8, rounded up to 8 "
        f"({', '.join(f'{m.name} {step_memory_gib(m)}' for m in MODELS.values())})",
        samples=("200",),
    ),
    Field(
        _key("workflow.stallTimeout"),
        Duration(600, 168 * 3600),
        "2h",
        "how long a training attempt may run without training progress in train_rl's log (a new step, a stage of "
        "start-up or evaluation) before it is ended as stalled and restarted from its last checkpoint (counted "
        "against workflow.maxRestarts); the default is the 2 h MaxText's own Gemma 4 RL script allows vLLM's "
        "engine to start (compilation included), the longest quiet stage",
        samples=("45m",),
    ),
    Field(
        _key("workflow.restartDrill"),
        Boolean(),
        False,
        "the restart drill in a training run: once its first checkpoint is committed, a fresh attempt ends once and "
        "the JobSet restarts it on the same nodes (not counted against workflow.maxRestarts), so `make report` "
        "measures a warm restart's start-up against its goal; an attempt that resumes never repeats it, and it "
        "applies to a training created after it is set (docs/restart-drill.md)",
    ),
    # each step of the catalogue: its deadline, and the switch of an optional step that has one of its own
    *(
        Field(_key(f"workflow.timeouts.{s.name}"), Duration(60, 168 * 3600), s.timeout, s.timeout_doc)
        for s in STEPS.values()
    ),
    *(Field(s.switch, Boolean(), False, s.switch_doc) for s in STEPS.values() if s.switch and s.switch_doc),
    Field(
        _key("workflow.jobsetVersion"),
        OneOf(JOBSET_VERSIONS),
        "0.10.1",
        "JobSet Helm chart (Cluster Toolkit installs 0.10.1)",
        samples=("0.12.0",),
    ),
    # kueue
    Field(
        _key("kueue.enabled"),
        Boolean(),
        True,
        "install Kueue (as the tutorial's cluster has) with queues sized to the pools, and queue every step",
        companions=((_key("kueue.queue"), ""),),
    ),
    Field(
        _key("kueue.queue"),
        QUEUE_NAME,
        "",
        "an existing LocalQueue in the workflow namespace to queue the steps to (Kueue managed elsewhere; "
        "needs kueue.enabled false)",
        samples=("team-queue",),
        companions=((_key("kueue.enabled"), False),),
    ),
    Field(
        _key("kueue.version"),
        OneOf(KUEUE_VERSIONS),
        "0.17.8",
        "Kueue Helm chart (Cluster Toolkit installs 0.17.1; 0.17.8 is its line's newest patch)",
    ),
    Field(
        _key("kueue.podsReadyTimeout"),
        Duration(300, 168 * 3600),
        DERIVED,
        "how long an admitted step may take until all its pods are Ready (Kueue waitForPodsReady); then Kueue "
        "stops it and `pulumi up` fails; default 30m, flex-start 2h",
        samples=("45m",),
    ),
    Field(
        _key("kueue.recoveryTimeout"),
        Duration(300, 168 * 3600),
        DERIVED,
        "how long a running step's pods, once all Ready, may stay not Ready (a JobSet restart, a node repair) "
        "before Kueue stops it (Kueue waitForPodsReady.recoveryTimeout; a restart before they were all Ready stays "
        "on kueue.podsReadyTimeout from the first admission: Kueue v0.17.1 admittedNotReadyWorkload); default "
        'kueue.podsReadyTimeout + 4h (4h30m, flex-start 6h): a TPU host maintenance event, "up to a few hours" for '
        "a slice (Cloud TPU), outlasts a GKE node auto-repair (10 min NotReady, then up to 1 h for the drain)",
        samples=("3h",),
    ),
    Field(
        _key("kueue.admissionTimeout"),
        Duration(60, 168 * 3600),
        "15m",
        "how long `pulumi up` waits for Kueue to admit a step before it stops (the step stays queued)",
        samples=("1h",),
    ),
)

FIELDS_BY_KEY: dict[str, Field] = {f.key: f for f in FIELDS}
PROVIDER_KEYS = tuple(f.key for f in FIELDS if not f.key.startswith(f"{PROJECT}:"))
PROJECT_KEYS = tuple(dict.fromkeys(f.top.split(":", 1)[1] for f in FIELDS if f.key.startswith(f"{PROJECT}:")))
SECRET_KEYS = tuple(f.key for f in FIELDS if f.secret)
_BY_TOP = {top: tuple(f for f in FIELDS if f.top == top) for top in dict.fromkeys(f.top for f in FIELDS)}


def fields_of(top: str) -> list[Field]:
    """The fields stored under one stack-file key (``tpu-rl:tpu``)."""
    return list(_BY_TOP.get(top, ()))


def is_object(top: str) -> bool:
    """Whether a stack-file key holds an object of fields."""
    return any(f.path for f in _BY_TOP.get(top, ()))


def declared_default(top: str) -> Any:
    """What ``Pulumi.yaml`` declares as the default of a stack-file key (derived fields are omitted)."""
    fields = fields_of(top)
    if not is_object(top):
        return "" if fields[0].default is DERIVED else fields[0].default
    out: dict[str, Any] = {}
    for f in fields:
        default = f.shown_default if f.default is DERIVED else f.default
        if default is None or default is REQUIRED:
            continue
        cursor = out
        *parents, leaf = f.path.split(".")
        for part in parents:
            cursor = cursor.setdefault(part, {})
        cursor[leaf] = default
    return out


def reference_table() -> str:
    """docs/configuration.md's configuration reference: every key, its default and what is allowed."""
    return reference_rows(FIELDS)
