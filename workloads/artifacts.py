"""Confirm each step's outputs exist in GCS before the next step starts (google-cloud-storage)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from fnmatch import fnmatch
from typing import TYPE_CHECKING

from workloads.checkpoint_scan import PARAMS_DIR, complete_steps, started_steps

if TYPE_CHECKING:  # imported lazily: the offline plan never talks to GCS
    from google.cloud import storage

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")
LISTING_LIMIT = 100_000


class ArtifactMissingError(Exception):
    """A step finished but its output is not where the next step will read it."""


@dataclass(frozen=True)
class FinalCheckpoint:
    """The newest complete actor checkpoint of a training run."""

    step: int
    uri: str
    """``<root><step>/model_params/``: what the export reads."""
    incomplete: tuple[int, ...]
    """Step directories that exist without a finished save (e.g. a save cut short by a failure)."""


def split_uri(uri: str) -> tuple[str, str]:
    """``gs://bucket/a/b/`` -> (``bucket``, ``a/b/``)."""
    if not uri.startswith("gs://"):
        raise ValueError(f"not a gs:// URI: {uri}")
    bucket, _, prefix = uri[5:].partition("/")
    return bucket, prefix


def storage_client() -> storage.Client:
    """A client from Application Default Credentials, or the access token Pulumi's gcp provider may use."""
    from google.cloud import storage

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        return storage.Client.create_anonymous_client()
    token = os.environ.get("GOOGLE_OAUTH_ACCESS_TOKEN")
    if token:
        from google.oauth2.credentials import Credentials

        return storage.Client(credentials=Credentials(token), project=os.environ.get("GOOGLE_CLOUD_PROJECT"))
    return storage.Client()


def object_names(client: storage.Client, uri: str, limit: int = LISTING_LIMIT) -> list[str]:
    """Object names under ``uri``, relative to it."""
    bucket, prefix = split_uri(uri)
    return [blob.name[len(prefix) :] for blob in client.list_blobs(bucket, prefix=prefix, max_results=limit)]


def check_converted(client: storage.Client, items_uri: str) -> None:
    """The MaxText checkpoint ``<base>/0/items/`` exists and is not empty."""
    if not object_names(client, items_uri, 50):
        raise ArtifactMissingError(f"conversion finished but {items_uri} is empty: no MaxText checkpoint to train from")


def final_checkpoint(client: storage.Client, actor_uri: str) -> FinalCheckpoint:
    """The newest complete step under ``.../checkpoints/actor/`` (found, not computed)."""
    names = object_names(client, actor_uri)
    complete = complete_steps(names)
    if not complete:
        raise ArtifactMissingError(
            f"training finished but no complete checkpoint was found under {actor_uri} (searched for "
            "<step>/commit_success.txt with <step>/model_params/): check the training logs"
        )
    last = complete[-1]
    incomplete = tuple(s for s in started_steps(names) if s not in complete)
    return FinalCheckpoint(last, f"{actor_uri}{last}/{PARAMS_DIR}", incomplete)


def short_run_warning(found: FinalCheckpoint, expected: int, prefill: int) -> str | None:
    """Why the last step is below the configured one, when it is (None otherwise)."""
    if found.step >= expected:
        return None
    return (
        f"training ended at step {found.step}, not {expected}: MaxText drops prompts longer than "
        f"maxPrefillPredictLength ({prefill} tokens) before batching with drop_remainder, so the dataset "
        f"gave fewer full batches; exporting step {found.step} ({found.uri}). Raise "
        "tpu-rl:training.maxPrefillPredictLength or numBatches if you need every step"
    )


def check_exported(client: storage.Client, hf_uri: str) -> None:
    """An HF model directory: ``config.json``, at least one ``*.safetensors`` and tokenizer files."""
    names = set(object_names(client, hf_uri))
    missing = []
    if "config.json" not in names:
        missing.append("config.json")
    if not any(fnmatch(n, "*.safetensors") for n in names):
        missing.append("*.safetensors")
    if not names & set(TOKENIZER_FILES):
        missing.append("tokenizer files (" + " or ".join(TOKENIZER_FILES) + ")")
    if missing:
        raise ArtifactMissingError(f"export finished but {hf_uri} lacks {', '.join(missing)}")
