"""Model catalogue: the models the workflow knows how to convert, train and export."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Model:
    """A Hugging Face model and its MaxText name, with sizes for the CPU steps."""

    name: str
    hf_repo: str
    maxtext_name: str
    weights_gib: int
    """Size of the bf16 safetensors download (HF_HOME scratch is sized from it)."""
    cpu_step_memory_gib: int
    """Host RAM the CPU-only conversion and export need (about one bf16 copy plus headroom)."""


MODELS: dict[str, Model] = {
    "gemma4-26b": Model("gemma4-26b", "google/gemma-4-26b-a4b-it", "gemma4-26b", 52, 128),
    "gemma4-e4b": Model("gemma4-e4b", "google/gemma-4-E4B-it", "gemma4-e4b", 16, 48),
}

DEFAULT_MODEL = "gemma4-26b"
