"""Model catalogue: the models the workflow knows how to convert, train and export."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Model:
    """A Hugging Face model and its MaxText name, with sizes for the CPU steps."""

    name: str
    hf_repo: str
    maxtext_name: str
    weights_gib: int
    """Size of the bf16 safetensors download (HF_HOME scratch and the CPU steps' memory are sized from it)."""


MODELS: dict[str, Model] = {
    "gemma4-26b": Model("gemma4-26b", "google/gemma-4-26b-a4b-it", "gemma4-26b", 52),
    "gemma4-e4b": Model("gemma4-e4b", "google/gemma-4-E4B-it", "gemma4-e4b", 16),
}

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


SCRATCH_SLACK_GIB = 20
"""Room on a CPU step's scratch beyond the weights it downloads (Hugging Face's cache index, a partial download)."""


def scratch_gib(model: Model, step: str) -> int:
    """A CPU step's scratch (``HF_HOME``, the publication's work folder; an ``emptyDir`` on cpu-np's boot disk):
    the conversion holds the Hugging Face download and the MaxText checkpoint it writes (two copies of the
    weights), the export and the publication one."""
    return model.weights_gib * (2 if step == "convert" else 1) + SCRATCH_SLACK_GIB


def boot_disk_allocatable_gib(disk_gb: int) -> float:
    """What GKE lets pods use of a node's boot disk ("Plan GKE Standard node sizes", local ephemeral storage): the
    filesystem (about 94.25 % of the disk) less the 10 % eviction threshold and the system reservation, the least
    of 50 % of the disk, 6 GiB + 35 % of it and 100 GiB (the page's 100 GB node: 43.83 GiB allocatable)."""
    return 0.9425 * disk_gb * 0.9 - min(0.5 * disk_gb, 6 + 0.35 * disk_gb, 100)


DEFAULT_MODEL = "gemma4-26b"
