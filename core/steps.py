"""The step catalogue's facts: one entry per step of the workflow with everything the program knows about it
besides how its JobSet is built (plain data; ``workloads.specs.step_specs.SPECS`` holds each step's builder).

An entry (``StepFacts`` in ``STEPS``) says when a stack runs the step (``switch``), its deadline's default and
description (``tpu-rl:workflow.timeouts.<name>``), the kind of output it leaves (how that output is verified,
shown by ``tools.status`` and reported: ``Output``), whose outputs it reads and under which identity (the
bucket prefixes it may touch, ``infra.gcp.access``), its roles (what it does with the Hub cache, whether it holds
the Hub write token), how much scratch disk it needs and what the estimate assumes for it. The configuration
(``core.config.schema``), the identities and grants, the estimate, the artifact checks, the status, the report and
the policy pack read these entries; no code branches on a step's name, nor binds one to a name of its own
(``tests/test_step_roles.py``). A new step is
an entry here, its builder in ``workloads.specs.step_specs`` and its container program (docs/architecture.md
"Catalogues").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Literal

from core.knobs import KnobValue
from core.models import Model

StepName = Literal["convert", "train", "export", "evaluate", "publish"]
"""A step of the workflow (a closed set mypy checks): the keys of ``STEPS``."""
Output = Literal["maxtext-checkpoint", "checkpoints", "hf-model", "hub-record", "record"]
"""What a step leaves at its artifact URI, which says how its output is verified (``workloads.observe.artifacts``
``CHECKS``): a MaxText checkpoint and the base's record (the conversion), step folders of checkpoints
(training), a Hugging Face model folder (the export), the record of a Hub branch and commit (the publication),
or a step record (``core.records.StepRecord``: a titled table the status, the report and the model card show)."""
Identity = Literal["always", "when-run", "nodes"]
"""Who a step runs as: ``always``, a Google service account of its own that every stack has (turning the step on
later changes no IAM, so its first run never races IAM propagation); ``when-run``, one of its own that only a
stack running the step has (its Kubernetes service account waits for its grants to propagate,
``program.stack``); ``nodes``, the node pools' accounts (pods with ``hostNetwork``: Pathways)."""


class HubCache(StrEnum):
    """What a step does with the Hub cache, the base model's files as fetched from the Hub, one entry per commit
    (``core.layout.hub_cache``; a shared one: ``tpu-rl:model.hubCache``)."""

    FILLS = "fills"
    """It fetches from the Hub what the cache lacks and keeps it there: the cache lies under its own prefix, and in
    the one stack that writes a shared cache (``tpu-rl:model.hubCacheWriter``) its identity writes that one; in
    every other stack it only reads the shared one. One step of the catalogue fills it (``HUB_CACHE_FILLER``)."""
    READS = "reads"
    """It reads the cache, never the Hub, and writes nothing there."""


@dataclass(frozen=True)
class StepFacts:
    """One step: every fact the program knows about it outside its builder (the catalogue entry)."""

    name: StepName
    """In its objects' names, its output path ``<model>/<name>/<hash>/`` and its configuration keys."""
    noun: str
    """What messages call it (``conversion``)."""
    timeout: str
    """The default of ``tpu-rl:workflow.timeouts.<name>``: the deadline of each attempt."""
    timeout_doc: str
    """That key's description (docs/configuration.md)."""
    output: Output
    """What it leaves at its artifact URI."""
    reads: tuple[StepName, ...] = ()
    """The steps whose outputs its identity may read (it writes only its own)."""
    identity: Identity = "always"
    hub_cache: HubCache | None = None
    """What its identity does with the Hub cache (``infra.gcp.access.hub_cache_grants``); None: nothing, and it is
    granted nothing on a shared one."""
    write_token: bool = False
    """Its container reads the Hub write token (``core.names.HF_WRITE_SECRET``), which can push to and delete the
    stack's model repositories; the policy pack refuses it to every other container."""
    switch: str | None = None
    """The configuration key that turns it on (its value true or non-empty; None: every workflow runs it). An
    optional step runs only while the workflow does."""
    switch_doc: str | None = None
    """When set, ``switch`` is a boolean key of the step's own (default false) described so; None: the key is
    declared elsewhere in the schema (``tpu-rl:publish.repo``)."""
    scratch_copies: int = 1
    """Copies of the model's bf16 weights its scratch disk holds (``scratch_gib``)."""
    hours: Callable[[Model], float] | None = None
    """The wall-clock hours the estimate assumes for it on cpu-np; None: not estimated (a short step)."""
    holds_tpu: bool = False
    """It runs on the TPU slice: the estimate prices it with the training model (``core.estimate``)."""
    storage_only: bool = False
    """Its pods reach only names, their token and Cloud Storage (``infra.k8s.manifests`` ``EVALUATION_EGRESS``): it
    runs what an earlier step produced (the exported model) and needs nothing else."""
    refusals: Callable[[Mapping[str, KnobValue], Mapping[str, str]], list[Refusal]] | None = None
    """What of the training's knobs and ``extraArgs`` the step could never finish with, in a stack that runs it
    (``core.config.rules`` refuses each, with the key to change)."""


Refusal = tuple[str, object, str]
"""A configuration the step cannot finish with: the key under ``tpu-rl:`` to change, its value, why and the fix."""


def _convert_hours(model: Model) -> float:
    return model.convert_hours


def _export_hours(model: Model) -> float:
    return model.export_hours


def _evaluate_hours(model: Model) -> float:
    return model.evaluate_hours


def _publish_hours(model: Model) -> float:
    return model.publish_hours


TEMPLATE_TOKENS: Final[dict[str, str]] = {
    "reasoning_start": "<reasoning>",
    "reasoning_end": "</reasoning>",
    "solution_start": "<answer>",
    "solution_end": "</answer>",
}
"""The data template's tokens, MaxText rl.yml's ``<name>_token`` defaults: training prompts with them
(``training.extraArgs`` may set each), and the evaluation asks for its answer between the two ``solution`` ones
(``template_tokens``)."""
EVALUATE_MAX_NEW_TOKENS: Final = 4096
"""The most new tokens the evaluation generates for one question (``workloads/container/evaluate_export.py``
``MAX_NEW_TOKENS`` refuses more): it generates as many as training, ``max_target_length - max_prefill_predict_length``,
so the configuration refuses a longer generation while the evaluation is on."""
EVALUATE_MAX_MARKER: Final = 100
"""The longest answer marker the evaluation takes (``evaluate_export.py`` ``MAX_MARKER``)."""


def template_tokens(extra_args: Mapping[str, str]) -> dict[str, str]:
    """The data template's tokens a run prompts with (``TEMPLATE_TOKENS``, each overridden by ``<name>_token`` of
    ``training.extraArgs``), by name."""
    return {name: extra_args.get(f"{name}_token", default) for name, default in TEMPLATE_TOKENS.items()}


def _evaluation_refusals(knobs: Mapping[str, KnobValue], extra_args: Mapping[str, str]) -> list[Refusal]:
    """What the evaluation's program refuses (its spec's bounds, equal answer markers): with the evaluation on, the
    publication waits for its record, so either would hold the run after hours of training. A start marker inside
    the end marker is read as MaxText 0.2.5's RL evaluation reads it (start, the shortest text, end), which finds
    the answer."""
    refused: list[Refusal] = []
    evaluation = "the evaluation (tpu-rl:workflow.steps.evaluate)"
    target, prefill = int(knobs["max_target_length"]), int(knobs["max_prefill_predict_length"])
    if target - prefill > EVALUATE_MAX_NEW_TOKENS:
        refused.append(
            (
                "training.maxTargetLength",
                target,
                f"{evaluation} generates as many new tokens as training, maxTargetLength - maxPrefillPredictLength "
                f"({target} - {prefill} = {target - prefill}), and at most {EVALUATE_MAX_NEW_TOKENS}; use at most "
                f"{prefill + EVALUATE_MAX_NEW_TOKENS} or turn the evaluation off",
            )
        )
    tokens = template_tokens(extra_args)
    start, end = tokens["solution_start"], tokens["solution_end"]
    for name, marker in (("solution_start", start), ("solution_end", end)):
        if len(marker) > EVALUATE_MAX_MARKER:
            refused.append(
                (
                    f"training.extraArgs.{name}_token",
                    marker,
                    f"{evaluation} takes answer markers of at most {EVALUATE_MAX_MARKER} characters, not "
                    f"{len(marker)}; use a shorter one or turn the evaluation off",
                )
            )
    if start == end:
        refused.append(
            (
                "training.extraArgs.solution_start_token",
                start,
                f'{evaluation} needs an answer end marker other than its start marker "{start}" (its program stops '
                "with exit 3 on equal ones, after training); use different start and end markers",
            )
        )
    return refused


STEPS: Final[dict[StepName, StepFacts]] = {
    "convert": StepFacts(
        "convert",
        "conversion",
        "4h",
        "deadline of the conversion",
        "maxtext-checkpoint",
        hub_cache=HubCache.FILLS,
        scratch_copies=2,  # the Hugging Face download and the MaxText checkpoint written from it
        hours=_convert_hours,
    ),
    "train": StepFacts(
        "train",
        "training",
        "24h",
        "deadline of each training attempt",
        "checkpoints",
        reads=("convert",),
        identity="nodes",
        scratch_copies=0,
        holds_tpu=True,
    ),
    "export": StepFacts(
        "export",
        "export",
        "4h",
        "deadline of the export",
        "hf-model",
        reads=("train", "convert"),  # the checkpoint it exports; the base's files at the converted commit
        hub_cache=HubCache.READS,  # the base's other tensors, from the objects the conversion hashed
        hours=_export_hours,
    ),
    "evaluate": StepFacts(
        "evaluate",
        "evaluation",
        "3h",
        "deadline of the evaluation (tpu-rl:workflow.steps.evaluate)",
        "record",
        reads=("export",),
        identity="when-run",  # off by default: a stack that never evaluates has no identity for it
        switch="tpu-rl:workflow.steps.evaluate",
        switch_doc="after the export, load the exported model with transformers on cpu-np and answer five held-out "
        "GSM8K test questions as training prompts them, graded as MaxText 0.2.5's RL evaluation grades them; the "
        "answers are in the `steps` output, the report and the model card (off: no evaluation step, no identity for "
        "it)",
        storage_only=True,
        refusals=_evaluation_refusals,
        hours=_evaluate_hours,
    ),
    "publish": StepFacts(
        "publish",
        "publication",
        "4h",
        "deadline of the publication (tpu-rl:publish.repo)",
        "hub-record",
        reads=("export",),
        write_token=True,
        switch="tpu-rl:publish.repo",
        hours=_publish_hours,
    ),
}
"""Every step in the order it runs, by name: each reads only steps before it."""
REQUIRED: Final[tuple[StepName, ...]] = tuple(name for name, facts in STEPS.items() if facts.switch is None)
"""The steps every workflow runs."""


def _the_one(role: str, holders: Iterable[StepName]) -> StepName:
    """The one step of the catalogue that has ``role``."""
    found = tuple(holders)
    if len(found) != 1:
        raise ValueError(f"the step catalogue needs exactly one step that {role}, not {found}")
    return found[0]


HUB_CACHE_FILLER: Final[StepName] = _the_one(
    "fills the Hub cache", (name for name, facts in STEPS.items() if facts.hub_cache is HubCache.FILLS)
)
"""The step whose identity fills the Hub cache, under whose prefix it lies (``HubCache.FILLS``)."""
TPU_HOLDER: Final[StepName] = _the_one(
    "runs on the TPU slice", (name for name, facts in STEPS.items() if facts.holds_tpu)
)
"""The step whose pods are the Pathways head and workers on the TPU slice (``StepFacts.holds_tpu``)."""

SCRATCH_SLACK_GIB = 20
"""Room on a CPU step's scratch beyond the weights it holds (Hugging Face's cache index, a partial download)."""


def scratch_gib(model: Model, step: StepName) -> int:
    """A CPU step's scratch (``HF_HOME``, a work folder; an ``emptyDir`` on cpu-np's boot disk): its
    ``scratch_copies`` of the weights plus ``SCRATCH_SLACK_GIB``."""
    return model.weights_gib * STEPS[step].scratch_copies + SCRATCH_SLACK_GIB
