"""Preflight: can the token read the model? (gated licence accepted, revision exists). Bounded HTTP.

The same two calls the Hub client makes (``HfApi.model_info`` and ``get_hf_file_metadata``), made with
httpx directly so every wait is bounded: connect and read timeouts, at most 5 redirects, a size cap and a
total deadline checked while the body streams in (a server that drips bytes cannot hold `pulumi up`).
Errors are classified as ``huggingface_hub.utils.hf_raise_for_status`` does (``X-Error-Code``), and
every message is one line, names the endpoint and never contains the token.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

import httpx

from core.redact import scrub

DEFAULT_ENDPOINT = "https://huggingface.co"
MAX_BODY_BYTES = 2 * 1024 * 1024
MAX_REDIRECTS = 5


class PreflightError(Exception):
    """The workflow cannot succeed with this token and model; nothing has been created."""


@dataclass(frozen=True)
class Budget:
    """Time limits of the preflight, in seconds."""

    connect: float = 5.0
    read: float = 10.0
    total: float = 30.0


def _endpoint(endpoint: str | None) -> str:
    url = (endpoint or DEFAULT_ENDPOINT).rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PreflightError(f"HF_ENDPOINT = {json.dumps(url[:80])} is invalid: expected an http(s) URL of a Hub")
    return url


class _Session:
    def __init__(self, endpoint: str, token: str, budget: Budget) -> None:
        self.endpoint = endpoint
        self.host = urlsplit(endpoint).netloc
        self.token = token
        self.deadline = time.monotonic() + budget.total
        self.budget = budget
        self.client = httpx.Client(
            timeout=httpx.Timeout(budget.read, connect=budget.connect),
            follow_redirects=True,
            max_redirects=MAX_REDIRECTS,
            headers={"Authorization": f"Bearer {token}", "User-Agent": "tpu-rl-preflight"},
            trust_env=False,
        )

    def request(self, method: str, path: str) -> tuple[httpx.Response, bytes]:
        what = f"{method} {self.endpoint}{path.split('?')[0]}"
        try:
            with self.client.stream(method, self.endpoint + path) as response:
                body = bytearray()
                for chunk in response.iter_raw():
                    body += chunk
                    if len(body) > MAX_BODY_BYTES:
                        raise PreflightError(f"the Hub at {self.host} sent more than {MAX_BODY_BYTES} bytes for {what}")
                    if time.monotonic() > self.deadline:
                        raise PreflightError(
                            f"the Hub at {self.host} did not finish answering {what} within {self.budget.total:.0f} s"
                        )
                return response, bytes(body)
        except PreflightError:
            raise
        except httpx.TooManyRedirects:
            raise PreflightError(
                f"the Hub at {self.host} redirected more than {MAX_REDIRECTS} times for {what}"
            ) from None
        except httpx.TimeoutException as err:
            raise PreflightError(
                f"the Hub at {self.host} did not answer {what} in time ({type(err).__name__}); check the network "
                "or HF_ENDPOINT"
            ) from None
        except (httpx.HTTPError, OSError) as err:
            raise PreflightError(
                f"cannot reach the Hub at {self.host} for {what} ({type(err).__name__}); check the network, a "
                "proxy or HF_ENDPOINT"
            ) from None

    def close(self) -> None:
        self.client.close()


def _classify(response: httpx.Response, repo: str, revision: str, token: str, host: str) -> None:
    """Raise ``PreflightError`` for an error response, as the Hub client would classify it."""
    status = response.status_code
    if status < 400:
        return
    code = response.headers.get("X-Error-Code", "")
    licence = f"https://huggingface.co/{repo}"
    if code == "GatedRepo":
        raise PreflightError(
            f"tpu-rl:hfToken cannot download {repo}: the model is gated and this token's account has not "
            f"accepted its licence; accept it at {licence} and retry"
        )
    if code == "RevisionNotFound":
        raise PreflightError(f"tpu-rl:model.revision {revision!r} does not exist in {repo}")
    if code == "EntryNotFound":
        raise PreflightError(f"{repo}@{revision} has no config.json: it is not a model repository tpu-rl can convert")
    if code == "RepoNotFound" or status == 404:
        raise PreflightError(
            f"tpu-rl:hfToken cannot see {repo}: the repository does not exist or the token is invalid "
            "(use a read token from https://huggingface.co/settings/tokens)"
        )
    if status == 401:
        raise PreflightError("tpu-rl:hfToken was rejected by Hugging Face (401): set a valid read token")
    detail = scrub(response.headers.get("X-Error-Message", "") or response.reason_phrase or "", token)
    raise PreflightError(
        f"Hugging Face preflight for {repo} at {host} failed (HTTP {status}{': ' if detail else ''}{detail})"
    )


def check_model_access(
    repo: str, revision: str, token: str, endpoint: str | None = None, *, budget: Budget = Budget()
) -> str:
    """Return the commit the revision resolves to; raise ``PreflightError`` (one line) otherwise."""
    session = _Session(_endpoint(endpoint), token, budget)
    try:
        rev = quote(revision, safe="")
        response, body = session.request("GET", f"/api/models/{repo}/revision/{rev}")
        _classify(response, repo, revision, token, session.host)
        try:
            info = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise PreflightError(
                f"the Hub at {session.host} answered the model info of {repo} with something that is not JSON; "
                "check HF_ENDPOINT"
            ) from None
        if not isinstance(info, dict) or not isinstance(info.get("sha", ""), str):
            raise PreflightError(
                f"the Hub at {session.host} answered the model info of {repo} with an unexpected shape"
            )
        response, _ = session.request("HEAD", f"/{repo}/resolve/{rev}/config.json")
        _classify(response, repo, revision, token, session.host)
        return str(info.get("sha") or "")
    finally:
        session.close()
