"""Confirm each step's outputs exist in GCS before the next step starts (google-cloud-storage)."""

from __future__ import annotations

import os
from fnmatch import fnmatch
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported lazily: the offline plan never talks to GCS
    from google.cloud import storage

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")


class ArtifactMissingError(Exception):
    """A step finished but its output is not where the next step will read it."""


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


def _names(client: storage.Client, uri: str, limit: int = 2000) -> list[str]:
    bucket, prefix = split_uri(uri)
    return [blob.name[len(prefix) :] for blob in client.list_blobs(bucket, prefix=prefix, max_results=limit)]


def check_converted(client: storage.Client, items_uri: str) -> None:
    """The MaxText checkpoint ``<base>/0/items/`` exists and is not empty."""
    names = _names(client, items_uri, 50)
    if not names:
        raise ArtifactMissingError(f"conversion finished but {items_uri} is empty: no MaxText checkpoint to train from")


def check_trained(client: storage.Client, params_uri: str) -> None:
    """The final actor checkpoint ``.../checkpoints/actor/<step>/model_params/`` exists."""
    names = _names(client, params_uri, 50)
    if not names:
        raise ArtifactMissingError(
            f"training finished but {params_uri} is empty: the final checkpoint was not written "
            "(check num_batches, checkpoint_period and the training logs)"
        )


def check_exported(client: storage.Client, hf_uri: str) -> None:
    """An HF model directory: ``config.json``, at least one ``*.safetensors`` and tokenizer files."""
    names = set(_names(client, hf_uri))
    missing = []
    if "config.json" not in names:
        missing.append("config.json")
    if not any(fnmatch(n, "*.safetensors") for n in names):
        missing.append("*.safetensors")
    if not names & set(TOKENIZER_FILES):
        missing.append("tokenizer files (" + " or ".join(TOKENIZER_FILES) + ")")
    if missing:
        raise ArtifactMissingError(f"export finished but {hf_uri} lacks {', '.join(missing)}")
