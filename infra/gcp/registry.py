"""The digest a registry gives an image's tag, read at ``up`` through the Docker Registry HTTP API V2 (no Pulumi).

Why this protocol and client: it is what the nodes' containerd resolves a tag with, so the digest pinned is the one
a node would pull; every registry speaks it (Artifact Registry, and any other of ``tpu-rl:images.registries``); and
its client is ``requests`` with ``google-auth``, both in the locks already (``google-cloud-artifact-registry``
answers for Artifact Registry only, and is not). The calls (the distribution spec, "Pulling manifests" and
"Token authentication", https://distribution.github.io/distribution/spec/api/ and .../spec/auth/token/):

- ``HEAD /v2/<name>/manifests/<tag>`` with ``Accept`` naming the image index, manifest list and manifest media types:
  the answer's ``Docker-Content-Digest`` is the digest (a registry that leaves it out is asked with ``GET``, and the
  digest is the sha256 of the manifest's bytes, which is what a digest is);
- a ``401`` with ``WWW-Authenticate: Bearer realm=...,service=...,scope=...`` is answered by the token endpoint it
  names: anonymously (Google's public TPU image repositories are readable by anyone), or, when it is an Artifact
  Registry host's own (``*-docker.pkg.dev``), with the deployer's Application Default Credentials as Artifact
  Registry's access-token login (user ``oauth2accesstoken``,
  https://cloud.google.com/artifact-registry/docs/docker/authentication), so a private repository reads too. No
  credential goes to any other host.

Every read is bounded by the wall clock (``BUDGET``: the connect, each read, retries on 429, 5xx and dropped
connections, all within the total) and every failure is one ``RegistryError`` line naming the image and the fix.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from core import deadline
from core.errors import BAD_INPUT, TpuRlError
from core.images import DIGEST, ImageRef, parse
from core.inputs import InputError, parse_json
from core.redact import scrub
from infra.client_errors import client_errors, exit_code_of

BUDGET = deadline.BUDGETS["registry"]
MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
)
"""What the manifest request accepts: an index or list first (a multi-platform image's digest is its index's, the
one containerd resolves the tag to), then a single manifest."""
MAX_MANIFEST_BYTES = 4 << 20
"""The distribution spec's limit on a manifest a registry must accept (4 MiB); more is not a manifest."""
MAX_TOKEN_BYTES = 1 << 16
GOOGLE_USER = "oauth2accesstoken"
GOOGLE_HOST = re.compile(r"([a-z0-9-]+-)?docker\.pkg\.dev")
"""Artifact Registry's Docker hosts: the only ones a Google access token is sent to."""
CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


class RegistryError(TpuRlError):
    """One line: which image's digest could not be read, and why."""


class _TransientError(TpuRlError):
    """A 429, a 5xx, a dropped connection or a request that timed out: worth another try within the budget."""

    def __init__(self, text: str, wait: float = 0.0, timed_out: bool = False) -> None:
        super().__init__(text)
        self.wait = wait
        self.timed_out = timed_out
        """A request that got no answer in time: the last try's, when it ends the budget, is the budget's line."""


def resolve_digest(
    image: str,
    *,
    key: str = "images",
    budget: deadline.Budget = BUDGET,
    endpoint: str | None = None,
    token: Callable[[], str | None] | None = None,
    sleep: Callable[[float], object] = time.sleep,
) -> str:
    """The digest of ``image`` (``sha256:<64 hex>``): its own pin if it has one (no call), else the registry's
    answer for its tag. ``key`` names the setting in messages (``tpu-rl:images.maxtext``); ``endpoint`` replaces
    ``https://<host>`` (a test's loopback registry); ``token`` gives a Google access token for an Artifact Registry
    host (default: Application Default Credentials, when there are any); ``sleep`` waits between tries."""
    ref = parse(image)
    if ref.digest:
        return ref.digest
    import requests

    base = endpoint or f"https://{ref.host}"
    google = token if token is not None else _adc_token
    session = requests.Session()
    session.headers["User-Agent"] = "tpu-rl"
    ends = time.monotonic() + budget.total
    where = f"tpu-rl:{key} ({scrub(image, limit=200)})"
    late = (
        f"{where}: {ref.host} did not give the tag's digest within {budget.total:.0f} s; check the network, or "
        "pin the image by digest (@sha256:...)"
    )

    def attempt(seconds: float) -> str:
        left = budget.within(seconds)
        return deadline.call(lambda: _read(session, base, ref, left, google), left.total, cancel=session.close)

    try:
        return deadline.retrying(
            attempt,
            budget.within(ends - time.monotonic()),
            wait_for=lambda err: err.wait if isinstance(err, _TransientError) else None,
            sleep=sleep,
        )
    except deadline.DeadlineExceededError:
        raise RegistryError(late) from None
    except RegistryError as err:
        raise RegistryError(f"{where}: {err}", exit_code=err.exit_code) from None
    except _TransientError as err:
        # A hanging registry ends the last try by its read timeout or by the budget's bound, whichever fires
        # first (both end together): either way it is the budget's line.
        if err.timed_out:
            raise RegistryError(late) from None
        raise RegistryError(f"{where}: {err}; retry later, or pin the image by digest (@sha256:...)") from None
    except client_errors(ValueError) as err:  # ValueError: a reply that is not what the registry API sends
        raise RegistryError(
            f"{where}: cannot reach {ref.host} ({type(err).__name__}); check the network or a proxy, or retry later",
            exit_code=exit_code_of(err),
        ) from None
    finally:
        session.close()


def _adc_token() -> str | None:
    """An access token of the Application Default Credentials, or None without any (then: anonymous)."""
    import google.auth
    import google.auth.exceptions
    import google.auth.transport.requests

    try:
        credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
        credentials.refresh(google.auth.transport.requests.Request())
    except google.auth.exceptions.GoogleAuthError:
        return None
    return str(credentials.token) if credentials.token else None


def _timeouts(budget: deadline.Budget) -> tuple[float, float]:
    return (budget.connect, budget.read)


def _read(session: Any, base: str, ref: ImageRef, budget: deadline.Budget, google: Callable[[], str | None]) -> str:
    """One try: the manifest's digest, after the token dance if the registry asks for one."""
    import requests

    url = f"{base}/v2/{ref.name}/manifests/{ref.reference}"
    headers = {"Accept": ", ".join(MANIFEST_TYPES)}
    try:
        answer = session.head(url, headers=headers, timeout=_timeouts(budget), allow_redirects=True)
        if answer.status_code == 401:
            headers["Authorization"] = f"Bearer {_bearer(session, ref, answer, budget, google)}"
            answer = session.head(url, headers=headers, timeout=_timeouts(budget), allow_redirects=True)
        _check(answer, ref)
        found = answer.headers.get("Docker-Content-Digest", "").strip()
        if found:
            if not DIGEST.fullmatch(found):
                raise RegistryError(f"{ref.host} answered a digest that is not sha256:<64 hex> ({scrub(found)})")
            return found
        # No digest header (the spec's "should"): the digest of the manifest's bytes is the digest.
        with session.get(url, headers=headers, timeout=_timeouts(budget), stream=True) as body:
            _check(body, ref)
            content = body.raw.read(MAX_MANIFEST_BYTES + 1, decode_content=True)
        if len(content) > MAX_MANIFEST_BYTES:
            raise RegistryError(f"{ref.host} sent a manifest over {MAX_MANIFEST_BYTES} bytes")
        return "sha256:" + hashlib.sha256(content).hexdigest()
    except requests.Timeout as err:  # a ConnectTimeout is a ConnectionError too: it is a timeout first
        raise _TransientError(f"{ref.host} did not answer ({type(err).__name__})", timed_out=True) from None
    except requests.ConnectionError as err:
        raise _TransientError(f"{ref.host} dropped the connection ({type(err).__name__})") from None


def _check(answer: Any, ref: ImageRef) -> None:
    """Raise for an answer that is not the manifest."""
    status = answer.status_code
    if status == 200:
        return
    if status == 429 or status >= 500:
        raise _TransientError(f"{ref.host} answered HTTP {status}", _retry_after(answer))
    if status == 404:
        raise RegistryError(
            f"{ref.host} has no tag {ref.reference!r} of {ref.name} (HTTP 404); check the image and its tag",
            exit_code=BAD_INPUT,
        )
    if status in (401, 403):
        raise RegistryError(
            f"{ref.host} refused to read {ref.name} (HTTP {status}); the deployer's credentials need read access "
            "(roles/artifactregistry.reader on an Artifact Registry repository)",
            exit_code=BAD_INPUT,
        )
    raise RegistryError(f"{ref.host} answered HTTP {status} for the manifest of {ref.name}")


def _retry_after(answer: Any) -> float:
    try:
        return max(0.0, float(answer.headers.get("Retry-After", "0")))
    except ValueError:
        return 0.0


def _bearer(session: Any, ref: ImageRef, answer: Any, budget: deadline.Budget, google: Callable[[], str | None]) -> str:
    """The registry's token for pulling ``ref`` (``WWW-Authenticate: Bearer realm,service,scope``)."""
    challenge = answer.headers.get("WWW-Authenticate", "")
    scheme, _, params = challenge.partition(" ")
    fields = dict(CHALLENGE.findall(params))
    realm = fields.get("realm", "")
    if scheme.lower() != "bearer" or not realm:
        raise RegistryError(f"{ref.host} asked for credentials this client does not use ({scrub(scheme) or 'none'})")
    same_host = urlsplit(realm).netloc == urlsplit(answer.url).netloc
    if not same_host and urlsplit(realm).scheme != "https":
        raise RegistryError(f"{ref.host} sent its token request to another host without TLS; refused")
    query = {k: v for k, v in (("service", fields.get("service")), ("scope", fields.get("scope"))) if v}
    query.setdefault("scope", f"repository:{ref.name}:pull")
    auth = None
    if same_host and GOOGLE_HOST.fullmatch(ref.host):
        # Artifact Registry's own token endpoint: the deployer's access token, so a private repository reads too.
        access = google()
        auth = (GOOGLE_USER, access) if access else None
    reply = session.get(realm, params=query, auth=auth, timeout=_timeouts(budget), stream=True)
    with reply:
        _check(reply, ref)
        raw = reply.raw.read(MAX_TOKEN_BYTES + 1, decode_content=True)
    if len(raw) > MAX_TOKEN_BYTES:
        raise RegistryError(f"{ref.host} sent a token over {MAX_TOKEN_BYTES} bytes")
    try:
        value = parse_json(raw, "the token reply")
        token = value.get("token") or value.get("access_token")
    except (InputError, AttributeError):
        token = None
    if not isinstance(token, str) or not token:
        raise RegistryError(f"{ref.host} answered the token request without a token")
    return token
