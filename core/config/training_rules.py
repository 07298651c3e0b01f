"""The training knobs' rules among themselves: the micro-batch divides the batch, the prefill leaves the sampler a
token to generate, the device fractions give each side a share of the chips (the meshes over those chips are
``core.config.finish``'s)."""

from __future__ import annotations

from typing import Any

from core.config.fields import project_key as _k
from core.config.values import UNREADABLE, Problems, UnreadableError, Values, error
from core.knobs import TRAINING_KNOBS
from core.settings import TrainingSettings


def training_settings(v: Values) -> TrainingSettings:
    """``tpu-rl:training``: the knobs (each rule skipped where a knob it reads is itself invalid), the optimizer, the
    dataset and ``extraArgs``."""
    # `get` never raises: a rule skips only when a knob it reads is itself invalid (already reported).
    knobs = Values({knob.key: v.get(_k(f"training.{knob.field}")) for knob in TRAINING_KNOBS})
    problems = Problems()
    for rule in (_micro_batches, _prefill, _fractions):
        problems.run(rule, knobs)
    problems.check()
    if any(value is UNREADABLE for value in knobs.values()):
        raise UnreadableError("training")
    return TrainingSettings(
        dict(knobs),
        v[_k("training.optimizer")],
        v[_k("training.dataset")],
        v[_k("training.extraArgs")],
        v[_k("training.datasetRevision")],
    )


def _micro_batches(knobs: dict[str, Any]) -> None:
    batch, micro = int(knobs["batch_size"]), int(knobs["train_micro_batch_size"])
    if batch % micro:
        raise error(_k("training.trainMicroBatchSize"), micro, f"must divide batchSize ({batch})")


def _prefill(knobs: dict[str, Any]) -> None:
    if int(knobs["max_prefill_predict_length"]) >= int(knobs["max_target_length"]):
        raise error(
            _k("training.maxPrefillPredictLength"),
            knobs["max_prefill_predict_length"],
            f"must be below maxTargetLength ({knobs['max_target_length']})",
        )


def _fractions(knobs: dict[str, Any]) -> None:
    trainer, sampler = float(knobs["trainer_devices_fraction"]), float(knobs["sampler_devices_fraction"])
    if trainer <= 0:
        raise error(_k("training.trainerDevicesFraction"), trainer, "must be above 0")
    if sampler <= 0 or trainer + sampler > 1.0 + 1e-9:
        raise error(
            _k("training.samplerDevicesFraction"),
            sampler,
            f"must be above 0, and trainer and sampler fractions sum to at most 1 (trainer is {trainer})",
        )
