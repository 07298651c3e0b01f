"""The smallest card's facts the model card tests start from (``dataclasses.replace`` changes what a test
needs): one step, one image, no run summary."""

from __future__ import annotations

from core.tpu import Capacity
from workloads.specs.model_card import CardFacts

FACTS = CardFacts(
    repo="acme/gemma4-grpo",
    branch="tpu-rl-0f1e2d3c4b",
    base_repo="google/gemma-4-26b-a4b-it",
    base_revision="main",
    base_commit="0123456789abcdef0123456789abcdef01234567",
    model_name="gemma4-26b",
    dataset="openmathinstruct2",
    dataset_ids=("nvidia/OpenMathInstruct-2",),
    config_diff=[{"key": "tpu-rl:training.numBatches", "value": 10, "tutorial": 50}],
    images={"maxtext": "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training:0.2.4"},
    image_digests={},
    summary=None,
    usd_per_chip_hour=2.7,
    capacity=Capacity.SPOT,
    chips=8,
    reward_image=None,
    steps={"train": "train-0f1e2d3c4b"},
    export_uri="gs://my-bucket/gemma4-26b/export/9a8b7c6d5e/",
    base_license="gemma",
)
