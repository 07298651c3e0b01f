"""What each step's wiring (``workloads.wiring``) reads of the configuration, one typed value per step
(``TrainInputs``, ``ExportInputs``, ``PublishInputs``), filled from the settings and the plan by ``step_inputs``:
the workflow component takes these, never the whole settings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.settings import Settings
from workloads.specs.model_card import CardFacts, card_setting, hub_datasets
from workloads.specs.step_specs import Step, Workflow


@dataclass(frozen=True)
class TrainInputs:
    """What training's wiring reads of the configuration."""

    queued: bool
    """The steps are queued to Kueue (``tpu-rl:kueue.queue``): else training checks no other run holds the slice."""
    final_step: int
    """The step the run ends at (``tpu-rl:training.numBatches``...): the offline plan's final checkpoint."""
    prefill: int
    """``max_prefill_predict_length``: what a run too short to judge is measured by."""
    chips: int
    """The slice's chips: the summary's chip-hours."""


@dataclass(frozen=True)
class ExportInputs:
    """What the export's wiring reads of the configuration."""

    verify: bool
    """``tpu-rl:workflow.verifyExport``: compare the export with the base model on the Hub."""
    base_repo: str
    """The base model's repository and configured revision."""
    base_revision: str


@dataclass(frozen=True)
class PublishInputs:
    """What the publication's wiring reads of the configuration."""

    repo: str
    """``tpu-rl:publish.repo``."""
    card_metadata: dict[str, Any]
    """The model card ConfigMap's metadata (``card_config.card_metadata``)."""
    card: CardFacts
    """The card's facts known before the run (``_card`` adds what the run found: the base's commit, the image
    digests, the summary and curve, the dataset's commit, the records)."""
    staged_repo: str | None
    """The Hub dataset whose files training staged (None: loaded by name)."""


@dataclass(frozen=True)
class StepInputs:
    """What the steps' wirings read of the configuration, by step (``step_inputs``)."""

    train: TrainInputs
    export: ExportInputs
    publish: PublishInputs | None
    """None without ``tpu-rl:publish.repo``."""


def step_inputs(
    settings: Settings, plan: Workflow, config_diff: Sequence[dict[str, Any]] = (), base_license: str | None = None
) -> StepInputs:
    """The steps' inputs from the settings and the plan (``config_diff`` and ``base_license``: the card's)."""
    model = settings.model
    publish = None
    if plan.publish is not None:
        publish = _publish_inputs(settings, plan, plan.publish, config_diff, base_license)
    return StepInputs(
        train=TrainInputs(
            queued=bool(settings.kueue.queue),
            final_step=settings.training.final_step,
            prefill=int(settings.training.knobs["max_prefill_predict_length"]),
            chips=settings.total_chips,
        ),
        export=ExportInputs(settings.workflow.verify_export, model.spec.hf_repo, model.revision),
        publish=publish,
    )


def _publish_inputs(
    settings: Settings, plan: Workflow, step: Step, config_diff: Sequence[dict[str, Any]], base_license: str | None
) -> PublishInputs:
    from core.estimate import estimate_for
    from core.knobs import DATASETS
    from workloads.specs.card_config import card_metadata
    from workloads.specs.commands import staged_dataset
    from workloads.specs.step_specs import branch_of, card_name

    dataset = DATASETS[settings.training.dataset]
    staged = staged_dataset(dataset, "")[1]  # the repository whose files training staged, at the recorded commit
    card = CardFacts(
        repo=settings.publish.repo or "",
        branch=branch_of(step.step_id),
        base_repo=settings.model.spec.hf_repo,
        base_revision=settings.model.revision,
        base_commit=None,
        model_name=settings.model.spec.name,
        dataset=settings.training.dataset,
        dataset_ids=hub_datasets(settings.training.dataset),
        dataset_revision=settings.training.dataset_revision,
        config_diff=[d for d in config_diff if card_setting(d["key"])],
        images={
            "maxtext": settings.images.maxtext,
            "pathwaysServer": settings.images.pathways_server,
            "pathwaysProxy": settings.images.pathways_proxy,
        },
        image_digests={},
        summary=None,
        usd_per_chip_hour=estimate_for(settings).usd_per_chip_hour,
        capacity=settings.tpu.capacity,
        chips=settings.total_chips,
        reward_image=None,
        steps={s.step: s.name for s in plan.steps},
        # A public card does not name the bucket: its default name holds the project's id.
        export_uri=plan.export.artifact_uri if settings.publish.private else "",
        base_license=base_license,
        private=settings.publish.private,
    )
    return PublishInputs(
        repo=settings.publish.repo or "",
        card_metadata=card_metadata(settings, card_name(step.name), step.step_id),
        card=card,
        staged_repo=staged[0] if staged else None,
    )
