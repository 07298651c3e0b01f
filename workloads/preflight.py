"""Preflight: can the token read the model? (gated licence accepted, revision exists). huggingface_hub."""

from __future__ import annotations

from huggingface_hub import HfApi, get_hf_file_metadata, hf_hub_url
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)


class PreflightError(Exception):
    """The workflow cannot succeed with this token and model; nothing has been created."""


def check_model_access(repo: str, revision: str, token: str, endpoint: str | None = None) -> str:
    """Return the commit the revision resolves to; raise ``PreflightError`` with what to do otherwise."""
    api = HfApi(endpoint=endpoint, token=token)
    licence = f"https://huggingface.co/{repo}"
    try:
        info = api.model_info(repo, revision=revision, token=token)
        url = hf_hub_url(repo, "config.json", revision=revision, endpoint=endpoint)
        get_hf_file_metadata(url, token=token)
    except GatedRepoError:
        raise PreflightError(
            f"tpu-rl:hfToken cannot download {repo}: the model is gated and this token's account has not "
            f"accepted its licence; accept it at {licence} and retry"
        ) from None
    except RevisionNotFoundError:
        raise PreflightError(f"tpu-rl:model.revision {revision!r} does not exist in {repo}") from None
    except RepositoryNotFoundError:
        raise PreflightError(
            f"tpu-rl:hfToken cannot see {repo}: the repository does not exist or the token is invalid "
            "(use a read token from https://huggingface.co/settings/tokens)"
        ) from None
    except HfHubHTTPError as err:
        status = err.response.status_code if err.response is not None else "?"
        if status == 401:
            raise PreflightError("tpu-rl:hfToken was rejected by Hugging Face (401): set a valid read token") from None
        raise PreflightError(f"Hugging Face preflight for {repo} failed (HTTP {status}): {err}") from None
    return info.sha or ""
