"""The model catalogue: one entry per model the workflow converts, trains and exports, with everything the
program knows about it.

An entry (``Model`` in ``MODELS``) holds its names (tpu-rl's, the Hub repository's, MaxText's ``model_name``),
the size of its bf16 weights, from which the CPU steps' memory (``step_memory_gib``) and scratch
(``core.steps.scratch_gib``) and cpu-np's boot disk check are derived, and the durations the cost model assumes for it
(``core.estimate``). No code branches on a model's name: a new model is one entry here, and the config rules,
the plan and the estimate follow (docs/architecture.md "Catalogues"; ``tests/test_catalogue_entries.py`` adds
one to prove it). The export's layout (``core.hf_model``: the language model under ``model.language_model.``
in BF16, the rest copied from the base) is MaxText's (0.2.4's and 0.2.5's) for every Gemma 4 checkpoint, so it is not an
entry's; a model of another family would need it as a field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Model:
    """One model: every fact the program knows about it (the catalogue entry)."""

    name: str
    """tpu-rl's short name (``tpu-rl:model.name``; the first part of every step's name and output path)."""
    hf_repo: str
    """The Hugging Face repository the conversion reads and the export is compared with."""
    maxtext_name: str
    """MaxText's ``model_name`` (``to_maxtext``, ``train_rl``, ``to_huggingface``, vLLM's ``maxtext_config``)."""
    weights_gib: int
    """Size of the bf16 safetensors download (HF_HOME scratch and the CPU steps' memory are sized from it)."""
    convert_hours: float
    """Assumed wall-clock hours of the conversion: download the bf16 weights, transform, save the MaxText
    checkpoint (one CPU node)."""
    export_hours: float
    """Assumed wall-clock hours of the export: restore the RL checkpoint on CPU and write safetensors to GCS."""
    train_seconds_per_sample: float
    """Assumed seconds per generated sample (prompt x generation) of ``core.estimate.REFERENCE_TARGET_LENGTH``
    tokens on a ``core.estimate.REFERENCE_CHIPS``-chip slice: rollout, reshard, update. The estimate scales it
    with the target length and inversely with the chips."""
    evaluate_hours: float = 1.0
    """Assumed wall-clock hours of the evaluation (``tpu-rl:workflow.steps.evaluate``): read the export from Cloud
    Storage, load it with transformers on one cpu-np node and generate the answers to five questions on CPU (up to
    ``core.steps.EVALUATE_MAX_NEW_TOKENS`` tokens each; its deadline is 3 h)."""
    publish_hours: float = 0.5
    """Assumed wall-clock hours of the publication (``tpu-rl:publish.repo``): copy the verified export from Cloud
    Storage and upload it to the Hub."""


MODELS: dict[str, Model] = {
    "gemma4-26b": Model(
        name="gemma4-26b",
        hf_repo="google/gemma-4-26b-a4b-it",
        maxtext_name="gemma4-26b",
        weights_gib=52,
        convert_hours=1.0,
        export_hours=0.75,
        train_seconds_per_sample=6.0,
        evaluate_hours=1.5,  # a 26B mixture of experts (4B active) generating on 64 vCPUs
        publish_hours=0.5,  # 52 GiB to the Hub
    ),
    "gemma4-e4b": Model(
        name="gemma4-e4b",
        hf_repo="google/gemma-4-E4B-it",
        maxtext_name="gemma4-e4b",
        weights_gib=16,
        convert_hours=0.3,
        export_hours=0.25,
        train_seconds_per_sample=1.5,
        evaluate_hours=0.5,
        publish_hours=0.25,
    ),
}
"""tpu-rl's name -> the model's entry (a key is its entry's ``name``)."""


def model_for_maxtext(maxtext_name: str) -> Model | None:
    """The entry whose MaxText ``model_name`` is ``maxtext_name`` (what a training command names), or None."""
    return next((m for m in MODELS.values() if m.maxtext_name == maxtext_name), None)


WEIGHT_COPIES = 3
"""Copies of the bf16 weights the conversion and the export hold at their peak. Conversion (MaxText
``to_maxtext``) keeps the Hugging Face weights it loaded and the MaxText tree it builds from them, and while
it stacks the per-layer (and per-expert) tensors into that tree a transient third copy of the layer in
hand can reach the size of the stacked parameter; export (``to_huggingface``) is the mirror image: the
Orbax checkpoint's weights, the Hugging Face state dict built from them and the same transient."""
RUNTIME_GIB = 8
"""Python, JAX, transformers and the safetensors write buffers."""


def step_memory_gib(model: Model) -> int:
    """Memory (request = limit) of the conversion and the export of ``model``: ``WEIGHT_COPIES`` copies of
    its bf16 weights plus ``RUNTIME_GIB``, rounded up to 8 GiB. The tutorial ran both on a 720 GB TPU host
    with no limit; a limit is needed on a shared cpu-np node, and request = limit keeps the step from
    being the pod the kernel kills when the node runs short (gemma4-26b: 168 GiB on a 256 GB n4-standard-64,
    where the Pathways head, which runs between them, is not scheduled at the same time)."""
    return math.ceil((WEIGHT_COPIES * model.weights_gib + RUNTIME_GIB) / 8) * 8


def boot_disk_allocatable_gib(disk_gb: int) -> float:
    """What GKE lets pods use of a node's boot disk ("Plan GKE Standard node sizes", local ephemeral storage): the
    filesystem (about 94.25 % of the disk) less the 10 % eviction threshold and the system reservation, the least
    of 50 % of the disk, 6 GiB + 35 % of it and 100 GiB (the page's 100 GB node: 43.83 GiB allocatable)."""
    return 0.9425 * disk_gb * 0.9 - min(0.5 * disk_gb, 6 + 0.35 * disk_gb, 100)


DEFAULT_MODEL = "gemma4-26b"
