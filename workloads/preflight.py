"""Preflight: can the token read the model? (gated licence accepted, revision exists), through ``huggingface_hub``.

Two calls of the Hub client, as a download would make them: ``HfApi.model_info`` (the revision -> its
commit) and ``get_hf_file_metadata`` of ``config.json`` (what the licence gate guards). Bounds:

- the client ``huggingface_hub`` uses comes from our ``set_client_factory`` factory: connect and read
  timeouts, at most 5 redirects, and a transport that reads every reply through the one bounded read
  (``core.bounded``, ``infra.transports.capped_transport``: compressed and inflated, a gzip bomb stops at the cap);
- each call runs under ``core.deadline`` (the ``hub`` budget, retries with backoff on 429/5xx/dropped
  connections included), so a server that drips its status line or headers cannot hold `pulumi up`.

Errors are the Hub client's own (``GatedRepoError``, ``RevisionNotFoundError``, ...), each turned into one
line that names the endpoint and never contains the token. What a check reads of a reply is parsed inside its call,
into typed values (``workloads.hub_replies``): a field of another shape is one line naming the request and the field
(exit 2), as a reply the client itself cannot read is.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

from core import deadline
from core.boundary import BoundaryError
from core.bounded import ACCEPT_ENCODING, Cap, ReplyEncodingError, ReplyTooLargeError
from core.errors import BadInputError, TpuRlError, UnavailableError
from core.hf_model import Tensor
from core.redact import scrub
from workloads.hub_replies import Account, ModelReply, account, header_reply, model_reply

DEFAULT_ENDPOINT = "https://huggingface.co"
MAX_BODY_BYTES = 2 * 1024 * 1024
"""The largest Hub reply the token checks read, received or inflated (``core.bounded``)."""
FIX = "check HF_ENDPOINT or a proxy in the way"
"""What a reply past its cap tells the operator to check."""
MAX_REDIRECTS = 5
COMMIT = re.compile(r"[0-9a-f]{40}")
READ_KEY = "tpu-rl:hfToken"
WRITE_KEY = "tpu-rl:hfWriteToken"
T = TypeVar("T")


class HubError(TpuRlError):
    """A Hub check did not pass; nothing has been created. What the callers catch."""


class PreflightError(HubError, BadInputError):
    """The workflow cannot succeed with this token, model or endpoint: what was given must change (exit 2)."""


class HubUnavailableError(HubError, UnavailableError):
    """The Hub did not answer usefully (no answer in time, 429, a 5xx, unreachable): retry later (exit 1)."""


def _endpoint(endpoint: str | None) -> str:
    url = (endpoint or DEFAULT_ENDPOINT).rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PreflightError(
            f"HF_ENDPOINT = {json.dumps(scrub(url, limit=80))} is invalid: expected an http(s) URL of a Hub"
        )
    return url


# ---------------------------------------------------------------------------------------------
# The bounded client huggingface_hub uses (httpx2: its supported transport and client hooks)


def _client_factory(budget: deadline.Budget, cap: int = MAX_BODY_BYTES) -> Callable[[], Any]:
    """What ``set_client_factory`` takes: an ``httpx2.Client`` whose transport reads every reply through the one
    bounded read (``infra.transports.capped_transport``: ``cap`` bytes received and inflated; a one-range read,
    ``parse_safetensors_file_metadata``'s, at most its range)."""
    import httpx2

    from infra.transports import capped_transport

    def factory() -> Any:
        return httpx2.Client(
            transport=capped_transport(Cap(cap, FIX)),
            follow_redirects=True,
            max_redirects=MAX_REDIRECTS,
            timeout=httpx2.Timeout(budget.read, connect=budget.connect),
            headers={"Accept-Encoding": ACCEPT_ENCODING},
        )

    return factory


# ---------------------------------------------------------------------------------------------
# The check


def _cause(err: BaseException) -> BaseException:
    """The Hub error behind ``LocalEntryNotFoundError``, which ``hf_hub_download`` raises for a failed HEAD
    (a 500, a dropped connection) when no local copy exists."""
    from huggingface_hub.errors import LocalEntryNotFoundError

    while isinstance(err, LocalEntryNotFoundError) and err.__cause__ is not None:
        err = err.__cause__
    return err


def _transient(err: Exception) -> float | None:
    """Seconds before another try (0: the default backoff) for 429, 5xx and dropped connections."""
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError

    err = _cause(err)  # type: ignore[assignment]

    if isinstance(err, HfHubHTTPError) and err.response is not None:
        status = err.response.status_code
        if status == 429 or status >= 500:
            try:
                return min(max(float(err.response.headers.get("Retry-After", 0)), 0.0), 60.0)
            except ValueError:
                return 0.0
        return None
    if isinstance(err, (httpx2.RemoteProtocolError, httpx2.ReadError, httpx2.WriteError)):
        return 0.0
    return None


@dataclass(frozen=True)
class HubRepo:
    """Which kind of Hub repository a preflight reads, for its lines: the page of its licence and the key that sets
    its revision."""

    kind: str
    """``model`` or ``dataset``."""
    revision_key: str

    def page(self, repo: str) -> str:
        return f"https://huggingface.co/{repo}" if self.kind == "model" else f"https://huggingface.co/datasets/{repo}"


MODEL = HubRepo("model", "tpu-rl:model.revision")
DATASET = HubRepo("dataset", "tpu-rl:training.datasetRevision")


def _describe(
    err: Exception,
    repo: str,
    revision: str,
    token: str,
    host: str,
    what: str,
    entry: str = "config.json",
    key: str = READ_KEY,
    kind: HubRepo = MODEL,
) -> HubError:
    """One line for a failed call, as the Hub client classified it (``hf_raise_for_status``); ``entry`` is the
    file the call reads (named when the revision lacks it), ``key`` the token's config key, ``kind`` the kind of
    repository. What was given must change (``PreflightError``, exit 2) or a retry may cure it
    (``HubUnavailableError``, exit 1)."""
    err = _cause(err)  # type: ignore[assignment]
    return _refusal(err, repo, revision, entry, key, kind) or _reply_failure(err, repo, token, host, what)


def _refusal(err: Exception, repo: str, revision: str, entry: str, key: str, kind: HubRepo) -> PreflightError | None:
    """What the Hub refused, by the client's classes: a licence, a revision, a file, a repository the token cannot
    see."""
    from huggingface_hub import errors

    if isinstance(err, errors.GatedRepoError):
        return PreflightError(
            f"tpu-rl:hfToken cannot download {repo}: the {kind.kind} is gated and this token's account has not "
            f"accepted its licence; accept it at {kind.page(repo)} and retry"
        )
    if isinstance(err, errors.RevisionNotFoundError):
        return PreflightError(f"{kind.revision_key} {json.dumps(scrub(revision, limit=100))} does not exist in {repo}")
    if isinstance(err, errors.RemoteEntryNotFoundError) and kind is DATASET:
        return PreflightError(
            f"the dataset {repo}@{scrub(revision, limit=100)} lists {scrub(entry, limit=200)} but the Hub has no such "
            f"file; retry, or pin {kind.revision_key} to a commit"
        )
    if isinstance(err, errors.RepositoryNotFoundError) and kind is DATASET:
        return PreflightError(
            f"{key} cannot see the dataset {repo} (tpu-rl:training.dataset): it does not exist on this Hub or is "
            "private to an account the token is not of; check HF_ENDPOINT"
        )
    if isinstance(err, errors.RemoteEntryNotFoundError):
        if entry != "config.json":
            return PreflightError(f"{repo}@{scrub(revision, limit=100)} has no {entry}, which its files name")
        return PreflightError(
            f"{repo}@{scrub(revision, limit=100)} has no config.json: it is not a model repository tpu-rl can convert"
        )
    if isinstance(err, errors.RepositoryNotFoundError):
        return PreflightError(
            f"{key} cannot see {repo}: the repository does not exist or the token is invalid "
            "(use a token from https://huggingface.co/settings/tokens)"
        )
    if isinstance(err, errors.HfHubHTTPError) and err.response is not None and err.response.status_code == 401:
        return PreflightError(f"{key} was rejected by Hugging Face (401): set a valid token")
    return None


def _reply_failure(err: Exception, repo: str, token: str, host: str, what: str) -> HubError:
    """A reply the client could not use, or none: its status, its size or encoding, the transport's error."""
    import httpx2
    from huggingface_hub import errors

    if isinstance(err, errors.HfHubHTTPError) and err.response is not None:
        status = err.response.status_code
        if status == 429:
            return HubUnavailableError(
                f"the Hub at {host} kept answering 429 (too many requests) for {what}; retry later"
            )
        detail = scrub(err.response.headers.get("X-Error-Message", "") or err.response.reason_phrase or "", token)
        failed = f"Hugging Face preflight for {repo} at {host} failed (HTTP {status}{': ' if detail else ''}{detail})"
        return HubUnavailableError(f"{failed}; retry later") if status >= 500 else PreflightError(failed)
    if isinstance(err, ReplyTooLargeError):  # the one bounded read's line, naming the request (core.bounded)
        return PreflightError(str(err) if str(err).startswith(what) else f"{what}: {err}")
    if isinstance(err, ReplyEncodingError):
        return PreflightError(f"the Hub at {host} answered {what} with a body it cannot read ({err}); {FIX}")
    if isinstance(err, httpx2.TooManyRedirects):
        return PreflightError(f"the Hub at {host} redirected more than {MAX_REDIRECTS} times for {what}")
    if isinstance(err, httpx2.TimeoutException):
        return HubUnavailableError(
            f"the Hub at {host} did not answer {what} in time ({type(err).__name__}); retry, or check the network or "
            "HF_ENDPOINT"
        )
    if isinstance(err, httpx2.ConnectError) and "SSL" in str(err):
        return PreflightError(f"TLS with the Hub at {host} failed for {what}; check HF_ENDPOINT or the proxy")
    if isinstance(err, (httpx2.HTTPError, OSError)):
        return HubUnavailableError(
            f"cannot reach the Hub at {host} for {what} ({type(err).__name__}); retry, or check the network, a proxy "
            "or HF_ENDPOINT"
        )
    if isinstance(err, BoundaryError):  # a field the check reads, of another shape (``hub_replies.SHAPE``)
        return PreflightError(f"the Hub at {host} answered {what} with {err}; {FIX}")
    if isinstance(err, RecursionError):  # the client's own parse of a reply nested past Python's limit
        return PreflightError(f"the Hub at {host} answered {what} with JSON nested too deeply; {FIX}")
    if isinstance(err, (ValueError, TypeError, KeyError, AttributeError)):  # not the JSON the client expects
        return PreflightError(f"the Hub at {host} answered {what} with something unexpected; check HF_ENDPOINT")
    failed = f"Hugging Face preflight for {repo} at {host} failed ({type(err).__name__})"
    return HubUnavailableError(f"{failed}; retry later")


def _bounded_calls(
    budget: deadline.Budget,
    url: str,
    repo: str,
    revision: str,
    token: str,
    key: str = READ_KEY,
    kind: HubRepo = MODEL,
) -> Callable[..., Any]:
    """``bounded(what, call, entry=...)``: one Hub call, retried on 429/5xx/dropped connections, within what is
    left of ``budget`` from now on by the wall clock; every failure becomes one ``PreflightError`` line."""
    from huggingface_hub import close_session

    host = scrub(urlsplit(url).netloc, limit=100)
    ends = time.monotonic() + budget.total

    def bounded(what: str, call: Callable[[], T], entry: str = "config.json") -> T:
        left = budget.within(ends - time.monotonic())
        try:
            return deadline.retrying(
                lambda seconds: deadline.call(call, seconds, cancel=close_session), left, wait_for=_transient
            )
        except deadline.DeadlineExceededError:
            raise HubUnavailableError(
                f"the Hub at {host} did not finish answering {what} within {budget.total:.0f} s; retry, or check the "
                "network or HF_ENDPOINT"
            ) from None
        except Exception as err:  # noqa: BLE001 (every failure becomes one line)
            raise _describe(err, repo, revision, token, host, what, entry, key, kind) from None

    return bounded


@dataclass(frozen=True)
class BaseModel:
    """What the preflight learned of the base model at the revision."""

    commit: str
    """The commit the revision resolves to ("" when the Hub did not name one)."""
    license: str | None
    """The licence its card declares (``license:`` in its front matter), None when it declares none."""


def _license(info: ModelReply) -> str | None:
    """The licence a model's card declares (``cardData.license``, else a ``license:`` tag)."""
    if isinstance(info.license, str) and info.license:
        return info.license
    tags = [t for t in info.tags or [] if t.startswith("license:")]
    return tags[0].removeprefix("license:") or None if tags else None


def check_model_access(
    repo: str, revision: str, token: str, endpoint: str | None = None, *, budget: deadline.Budget | None = None
) -> BaseModel:
    """Return the commit the revision resolves to and the licence its card declares; raise ``PreflightError``
    (one line) otherwise."""
    from huggingface_hub import HfApi, close_session, get_hf_file_metadata, hf_hub_url, set_client_factory

    # The Hub client's shared session comes from this factory from now on in this process (the program
    # and the tools make no other Hub calls).

    budget = budget or deadline.BUDGETS["hub"]
    url = _endpoint(endpoint)
    set_client_factory(_client_factory(budget))
    api = HfApi(endpoint=url, token=token, library_name="tpu-rl")
    shown = quote(scrub(revision, limit=100), safe="")
    bounded = _bounded_calls(budget, url, repo, revision, token)

    try:
        info = bounded(
            f"GET {url}/api/models/{repo}/revision/{shown}",
            lambda: model_reply(api.model_info(repo, revision=revision, timeout=budget.read)),
        )
        sha = info.sha or ""
        license = _license(info)
        config = hf_hub_url(repo, "config.json", revision=revision, endpoint=url)
        bounded(
            f"HEAD {url}/{repo}/resolve/{shown}/config.json",
            lambda: get_hf_file_metadata(config, token=token, timeout=budget.read),
        )
    finally:
        close_session()  # the next user of huggingface_hub in this process gets a fresh client
    return BaseModel(sha if COMMIT.fullmatch(sha) else "", license)


def check_dataset_access(
    repo: str,
    revision: str,
    patterns: tuple[str, ...],
    token: str,
    endpoint: str | None = None,
    *,
    budget: deadline.Budget | None = None,
) -> str:
    """The commit ``revision`` of the dataset ``repo`` resolves to, once the revision exists, each pattern training
    stages matches a file of it (``fnmatch``, as ``stage_dataset.py`` matches them) and the token may
    download the first (a gated dataset's terms); ``PreflightError`` (one line) otherwise. Before any resource: a
    revision that does not exist would otherwise fail the training pod after its slice was up."""
    from huggingface_hub import HfApi, close_session, get_hf_file_metadata, hf_hub_url, set_client_factory

    from workloads.container.base_snapshot import RefusedError, matching, selected

    budget = budget or deadline.BUDGETS["hub"]
    url = _endpoint(endpoint)
    set_client_factory(_client_factory(budget))
    api = HfApi(endpoint=url, token=token, library_name="tpu-rl")
    shown = quote(scrub(revision, limit=100), safe="")
    bounded = _bounded_calls(budget, url, repo, revision, token, kind=DATASET)
    try:
        info = bounded(
            f"GET {url}/api/datasets/{repo}/revision/{shown}",
            lambda: api.dataset_info(repo, revision=revision, timeout=budget.read),
        )
        # Training's own selection (``base_snapshot.selected``): plain paths of the repository, by fnmatch.
        names = {s.rfilename: 0 for s in info.siblings or [] if isinstance(s.rfilename, str)}
        try:
            selected(names, patterns, f"{repo}@{scrub(revision, limit=100)}")
        except RefusedError as err:
            raise PreflightError(f"the {err}, which training stages: pick another {DATASET.revision_key}") from None
        first = min(matching(names, patterns[0]), default="") if patterns else ""  # the first pattern's first file
        found_sha = getattr(info, "sha", None)
        sha = found_sha if isinstance(found_sha, str) and COMMIT.fullmatch(found_sha) else ""
        at = sha or revision  # the commit listed, so a branch that moves meanwhile cannot lose the file
        if first:  # gated terms guard every file of a repository: one HEAD says
            file = hf_hub_url(repo, first, repo_type="dataset", revision=at, endpoint=url)
            bounded(
                f"HEAD {url}/datasets/{repo}/resolve/{quote(at, safe='')}/{first}",
                lambda: get_hf_file_metadata(file, token=token, timeout=budget.read),
                entry=first,
            )
    finally:
        close_session()
    return sha


# ---------------------------------------------------------------------------------------------
# The base model's layout, for the export check (``core.hf_model.compare``)

MAX_METADATA_BYTES = 64 * 1024 * 1024
"""The largest reply the metadata read takes (an index, a shard's header, config.json)."""


def base_model_layout(
    repo: str, revision: str, token: str, endpoint: str | None = None, *, budget: deadline.Budget | None = None
) -> Any:
    """The base model's ``config.json``, index and every shard's safetensors header at ``revision``, read
    with the Hub client (``hf_hub_download`` into a temporary folder, ``parse_safetensors_file_metadata``:
    ranged reads of each header, never the weights); ``PreflightError`` (one line) otherwise."""
    import tempfile
    from pathlib import Path

    from huggingface_hub import HfApi, close_session, set_client_factory

    from core.hf_model import INDEX_FILE, SINGLE_FILE, ModelFormatError, ModelLayout, parse_config, parse_index

    budget = budget or deadline.BUDGETS["hub-model"]
    url = _endpoint(endpoint)
    set_client_factory(_client_factory(budget, MAX_METADATA_BYTES))
    api = HfApi(endpoint=url, token=token, library_name="tpu-rl")
    shown = quote(scrub(revision, limit=100), safe="")
    bounded = _bounded_calls(budget, url, repo, revision, token)

    def download(name: str, folder: str) -> bytes:
        path = bounded(
            f"GET {url}/{repo}/resolve/{shown}/{name}",
            lambda: api.hf_hub_download(repo, name, revision=revision, local_dir=folder, etag_timeout=budget.read),
            name,
        )
        return Path(path).read_bytes()

    def header(name: str) -> dict[str, Tensor]:
        found: dict[str, Tensor] = bounded(
            f"the safetensors header of {repo}@{shown}/{name}",
            lambda: header_reply(
                api.parse_safetensors_file_metadata(repo, name, revision=revision, timeout=budget.read)
            ),
            name,
        )
        return found

    try:
        with tempfile.TemporaryDirectory(prefix="tpu-rl-base-") as folder:
            config = parse_config(download("config.json", folder))
            files = bounded(
                f"GET {url}/api/models/{repo}/revision/{shown}",
                lambda: {
                    f.rfilename
                    for f in model_reply(api.model_info(repo, revision=revision, timeout=budget.read)).siblings or []
                },
            )
            if INDEX_FILE in files:
                weight_map = parse_index(download(INDEX_FILE, folder))
            elif SINGLE_FILE in files:
                weight_map = {}
            else:
                raise PreflightError(f"{repo}@{scrub(revision, limit=100)} has no safetensors weights to compare with")
            tensors: dict[str, Tensor] = {}
            for shard in sorted(set(weight_map.values()) or {SINGLE_FILE}):
                for name, tensor in header(shard).items():
                    tensors[name] = tensor
                    weight_map.setdefault(name, shard)
    except ModelFormatError as err:  # the Hub's files are not what the formats say
        raise PreflightError(f"the base model {repo}@{scrub(revision, limit=100)}: {err}") from None
    finally:
        close_session()
    return ModelLayout(config, tensors, weight_map)


# ---------------------------------------------------------------------------------------------
# The publication: can the write token publish to the repository? (``tpu-rl:publish``)

WRITE_ROLES = ("write", "admin")
"""Organization roles that may write to any of its repositories (a ``contributor`` may create repositories
and write to those only: https://huggingface.co/docs/hub/organizations-security)."""


def token_denial(who: Account, repo: str, exists: bool) -> str | None:
    """Why the token ``who`` describes (``/api/whoami-v2``, ``account``) cannot publish to ``repo`` (None: it can as
    far as its account says; an existing repository is then asked, ``auth-check/write``).

    Classic tokens have ``role`` read or write; a fine-grained token (``fineGrained``) must also hold
    ``repo.write`` scoped to the namespace, or, for an existing repository, to the repository itself."""
    namespace = repo.split("/", 1)[0]
    access = who.auth.access_token
    role = access.role if access else None
    user = scrub(str(who.name), limit=60)
    if role == "read":
        return f"{WRITE_KEY} is a read token: publishing needs a write token (https://huggingface.co/settings/tokens)"
    orgs = {o.name: o.role_in_org for o in who.orgs or []}
    if namespace != who.name:
        if namespace not in orgs:
            return f"{WRITE_KEY} belongs to {user}, who is not a member of {namespace}"
        org_role = orgs[namespace]
        # A contributor may create repositories and write to those it created: whoami cannot say who created an
        # existing one, so the Hub's own answer decides (auth-check/write, after this).
        if org_role not in (*WRITE_ROLES, "contributor"):
            return (
                f"{WRITE_KEY} belongs to {user}, whose role in {namespace} is {scrub(str(org_role), limit=20)}: "
                "publishing needs write or admin (or contributor, for repositories of its own)"
            )
    if role == "fineGrained":
        scoped = access.fine_grained.scoped if access and access.fine_grained else None
        for grant in scoped or []:
            entity = grant.entity
            if "repo.write" not in (grant.permissions or []):
                continue
            if entity.type in ("user", "org") and entity.name == namespace:
                return None
            if exists and entity.type == "model" and entity.name == repo:
                return None
        return (
            f"{WRITE_KEY} is a fine-grained token without write access to {namespace}'s repositories "
            "(repo.write): add it in the token's settings"
        )
    return None


def check_publish_access(
    repo: str, private: bool, token: str, endpoint: str | None = None, *, budget: deadline.Budget | None = None
) -> str:
    """Whether the write token can publish to ``repo`` (as the step will: create it if missing, write a branch);
    one ``PreflightError`` line otherwise. Returns what was found (``created on first publish`` or the
    repository's visibility)."""
    from huggingface_hub import HfApi, close_session, set_client_factory

    budget = budget or deadline.BUDGETS["hub"]
    url = _endpoint(endpoint)
    set_client_factory(_client_factory(budget))
    api = HfApi(endpoint=url, token=token, library_name="tpu-rl")
    bounded = _bounded_calls(budget, url, repo, "main", token, WRITE_KEY)
    try:
        who = bounded(f"GET {url}/api/whoami-v2", lambda: account(api.whoami()))
        info = bounded(f"GET {url}/api/models/{repo}", lambda: _or_none(lambda: model_reply(api.model_info(repo))))
        denial = token_denial(who, repo, exists=info is not None)
        if denial:
            raise PreflightError(f"{denial}; tpu-rl:publish.repo is {repo}")
        if info is None:
            return "created private on first publish" if private else "created public on first publish"
        if private and not info.private:
            raise PreflightError(
                f"tpu-rl:publish.repo {repo} exists and is public, and tpu-rl:publish.private is true: make the "
                "repository private or set tpu-rl:publish.private false"
            )
        try:
            bounded(
                f"GET {url}/api/models/{repo}/auth-check/write",
                lambda: api.auth_check(repo, repo_type="model", write=True),
            )
        except PreflightError as err:
            raise PreflightError(f"{WRITE_KEY} cannot write to {repo} ({err})") from None
        return "exists, private" if info.private else "exists, public"
    finally:
        close_session()


def _or_none(call: Callable[[], T]) -> T | None:
    """``call()``, or None when the repository does not exist (or the token cannot see it: the publish step
    then creates it, and fails with the Hub's reason if it cannot)."""
    from huggingface_hub.errors import RepositoryNotFoundError

    try:
        return call()
    except RepositoryNotFoundError:
        return None


def published_revision(
    repo: str, branch: str, token: str, endpoint: str | None = None, *, budget: deadline.Budget | None = None
) -> tuple[str, dict[str, int | None]] | None:
    """The commit ``branch`` of ``repo`` points at and its files with their sizes (``model_info`` with the
    files' metadata), read with the write token; None when the Hub says the branch or the repository does not
    exist (deleted since it was published); one ``PreflightError`` line when it cannot say."""
    from huggingface_hub import HfApi, close_session, set_client_factory
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    budget = budget or deadline.BUDGETS["hub"]
    url = _endpoint(endpoint)
    set_client_factory(_client_factory(budget, MAX_METADATA_BYTES))
    api = HfApi(endpoint=url, token=token, library_name="tpu-rl")
    bounded = _bounded_calls(budget, url, repo, branch, token, WRITE_KEY)

    def read() -> ModelReply | None:
        try:
            return model_reply(api.model_info(repo, revision=branch, files_metadata=True, timeout=budget.read))
        except (RevisionNotFoundError, RepositoryNotFoundError):
            return None  # a definite answer: nothing is published there

    try:
        info = bounded(f"GET {url}/api/models/{repo}/revision/{quote(branch, safe='')}", read)
    finally:
        close_session()
    if info is None:
        return None
    sha = info.sha
    if sha is None or not COMMIT.fullmatch(sha):
        raise PreflightError(f"the Hub at {url} named no commit for {repo}@{branch}")
    files = {f.rfilename: f.size for f in info.siblings or []}
    return sha, files
