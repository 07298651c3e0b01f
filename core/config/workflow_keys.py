"""The workflow's keys of the configuration's table (``core.config.schema.FIELDS``), in the order the reference
shows them, after the platform's (``core.config.platform_keys``): the model and the images the steps run, the
training knobs, the publication, the workflow's steps, deadlines and waits, the JobSet and Kueue charts that run and
queue the steps. Their rules are ``core.config.image_rules``, ``core.config.training_rules``,
``core.config.workflow_rules`` and ``core.config.kueue_rules``."""

from __future__ import annotations

from core.config.defaults import DISRUPTION_HOURS
from core.config.fields import DERIVED, Field, knob_field
from core.config.fields import project_key as _key
from core.config.formats import (
    HUB_CACHE,
    HUB_REPO,
    IMAGE,
    MAXTEXT_ARGS,
    QUEUE_NAME,
    REGISTRIES,
    REVISION,
    STACK_NAME,
)
from core.config.values import Boolean, Duration, Integer, OneOf
from core.controllers import JOBSET_VERSIONS, KUEUE_VERSIONS
from core.knobs import DATASETS, OPTIMIZERS, TRAINING_KNOBS
from core.maxtext_keys import MAXTEXT_VERSION
from core.models import DEFAULT_MODEL, MODELS, step_memory_gib
from core.steps import STEPS

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
MAXTEXT_CHECKS = ("refuse", "warn")
"""``tpu-rl:images.maxtextCheck`` (``workloads/container/maxtext_check.py`` ``MODES``)."""


WORKFLOW_FIELDS: tuple[Field, ...] = (
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
