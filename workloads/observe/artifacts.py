"""Each step's outputs in GCS, checked before the next step starts (google-cloud-storage, bounded).

Every GCS operation gets the ``gcs`` budget of ``core.deadline``: the library's own ``timeout``
(connect, read) and ``retry`` (its retry deadline) per request, and a wall-clock bound on the whole
operation (every page of a listing included), so a server that stalls, drips or pages forever ends
in one line.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from pydantic import AfterValidator, Field, StringConstraints

from core import deadline
from core.boundary import BoundaryError, Model, Text, parse
from core.bounded import Cap, ReplyEncodingError, ReplyTooLargeError
from core.errors import BAD_INPUT, FAILED, TpuRlError
from core.inputs import InputError, parse_json
from core.layout import BASE_FILES, CONVERTED, DATASET_RECORD, SOURCE_RECORD, STAGED_DATASET
from core.redact import scrub
from infra.client_errors import RETRY, client_errors, described
from workloads.container.checkpoint_scan import PARAMS_DIR, ListingTooLongError, newest_complete_step, split_uri

if TYPE_CHECKING:  # imported lazily: the offline plan never talks to GCS
    from google.cloud import storage

    from core.records import StepRecord
    from core.steps import Output

MAX_SHOWN = 5
"""Problems of one output named in the error (then how many more)."""
MAX_LISTED = 10_000
"""Objects a listing of one folder may return (an exported model has a few dozen)."""
MAX_REPLY_BYTES = 8 * 1024 * 1024
"""The largest JSON reply of GCS read, received or inflated (``core.bounded``): a listing page holds at most 1000
objects' metadata, about 1 KB each."""
REPLY_CAP = Cap(MAX_REPLY_BYTES, "check STORAGE_EMULATOR_HOST or a proxy in the way")
T = TypeVar("T")


class ArtifactMissingError(TpuRlError):
    """A step finished but its output is not where the next step will read it."""


class StorageError(TpuRlError):
    """GCS could not be read within the budget (one line)."""


@dataclass(frozen=True)
class FinalCheckpoint:
    """The newest complete actor checkpoint of a training run."""

    step: int
    uri: str
    """``<root><step>/model_params/``: what the export reads."""
    incomplete: tuple[int, ...]
    """Newer step folders without a finished save (e.g. a save cut short by a failure)."""


def storage_client() -> storage.Client:
    """A client from Application Default Credentials, or the access token Pulumi's gcp provider may use; every
    JSON API reply through the one bounded read (``capped``)."""
    from google.cloud import storage

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        return capped(storage.Client.create_anonymous_client())
    token = os.environ.get("GOOGLE_OAUTH_ACCESS_TOKEN")
    if token:
        from google.oauth2.credentials import Credentials

        return capped(storage.Client(credentials=Credentials(token), project=os.environ.get("GOOGLE_CLOUD_PROJECT")))
    return capped(storage.Client())


def capped(client: storage.Client) -> storage.Client:
    """``client`` with ``MAX_REPLY_BYTES`` on every reply of its session (``infra.transports.cap_session``): the
    session google-cloud-core's ``Client._http`` builds (google-auth's ``AuthorizedSession``, a ``requests.Session``;
    ``google/cloud/client/__init__.py``), which every JSON API call and media download of google-cloud-storage goes
    through. The JSON replies (listings, metadata) are read through the cap; a media download (``stream=True``) is
    bounded by its reader, ``core.bounded.read_object``."""
    from infra.transports import cap_session, no_background_fetches

    no_background_fetches()
    cap_session(client._http, REPLY_CAP)
    return client


def open_client() -> storage.Client:
    """``storage_client()``, or ``StorageError`` (one line) when there are no usable credentials."""
    try:
        return storage_client()
    except client_errors(ValueError) as err:  # ValueError: a bad STORAGE_EMULATOR_HOST
        line, code = describe(err, "opening a client")
        raise StorageError(f"cannot open GCS: {line}", exit_code=code) from None


def transient(err: Exception) -> bool:
    """What a storage request retries: 408, 429 and 5xx answers and dropped connections, as the library's
    own ``DEFAULT_RETRY`` does, but not a TLS failure (an untrusted certificate does not heal by waiting)."""
    import http.client

    from google.api_core import exceptions as api
    from requests import exceptions as requests_errors

    if isinstance(err, requests_errors.SSLError):
        return False
    if isinstance(err, api.GoogleAPICallError):
        return err.code in (408, 429, 500, 502, 503, 504)
    return isinstance(
        err,
        requests_errors.ConnectionError
        | requests_errors.ChunkedEncodingError
        | requests_errors.Timeout
        | ConnectionError
        | http.client.HTTPException,
    )


def call_options(budget: deadline.Budget | None = None) -> dict[str, Any]:
    """``timeout`` and ``retry`` for every storage request (the library's own hooks). The retries end one read before
    the wall clock's bound (``bounded``, at ``budget.total``), so that answers that kept failing (429s, 5xx) are
    named as such by the library's ``RetryError``, not as a call that did not finish in time."""
    from google.cloud.storage.retry import DEFAULT_RETRY

    budget = budget or deadline.BUDGETS["gcs"]
    retry = DEFAULT_RETRY.with_predicate(transient).with_timeout(max(budget.total - budget.read, budget.read))
    return {"timeout": (budget.connect, budget.read), "retry": retry}


def describe(err: Exception, what: str) -> tuple[str, int]:
    """One line for a failed GCS operation (the library's exceptions, the transport's, a bad reply) and its exit code
    (``infra.client_errors``: 2 where what was given must change, 1 where a retry may cure it)."""
    from google.api_core import exceptions as api

    if isinstance(err, ReplyTooLargeError):  # the one bounded read's line (core.bounded; read_object names what)
        return (str(err) if str(err).startswith(what) else f"{what}: {err}"), BAD_INPUT
    if isinstance(err, ReplyEncodingError):
        return f"GCS answered {what} with a body it cannot read ({err})", BAD_INPUT
    if isinstance(err, api.Unauthorized | api.Forbidden):
        return (
            f"GCS refused {what} (HTTP {err.code}): the identity needs storage.objects.list and .get on the "
            "bucket (run `gcloud auth application-default login`)"
        ), BAD_INPUT
    if isinstance(err, api.NotFound):
        return f"GCS found nothing for {what} (HTTP 404): does the bucket exist?", BAD_INPUT
    if isinstance(err, client_errors()):
        return described(err, what, "GCS")
    if isinstance(err, ValueError):  # JSON that does not parse (requests' JSONDecodeError included)
        return f"GCS answered {what} with something that is not the JSON it sends", BAD_INPUT
    return f"GCS failed for {what} ({type(err).__name__}: {scrub(str(err), limit=100)})", FAILED


def storage_error(err: Exception, what: str) -> StorageError:
    """``err`` as one ``StorageError`` line with its exit code (``describe``)."""
    line, code = describe(err, what)
    return StorageError(line, exit_code=code)


def bounded(
    client: Any, what: str, operation: Callable[[dict[str, Any]], T], budget: deadline.Budget | None = None
) -> T:
    """``operation(call_options)`` within the ``gcs`` budget by the wall clock; any failure but a missing
    artifact becomes ``StorageError`` (one line)."""
    budget = budget or deadline.BUDGETS["gcs"]
    try:
        return deadline.call(lambda: operation(call_options(budget)), budget.total, cancel=client.close)
    except deadline.DeadlineExceededError:
        late = f"GCS did not finish {what} within {budget.total:g} s; check the network, or {RETRY}"
        raise StorageError(late) from None
    except ArtifactMissingError:
        raise
    except ListingTooLongError as err:
        raise StorageError(str(err)) from None
    except client_errors(ValueError, ReplyTooLargeError, ReplyEncodingError) as err:  # ValueError: not GCS's JSON
        raise storage_error(err, what) from None


def object_names(client: Any, uri: str, limit: int = MAX_LISTED, **call: Any) -> list[str]:
    """Object names under ``uri``, relative to it (at most ``limit``: more is refused, not cut)."""
    bucket, prefix = split_uri(uri)
    names = [
        blob.name[len(prefix) :] for blob in client.list_blobs(bucket, prefix=prefix, max_results=limit + 1, **call)
    ]
    if len(names) > limit:
        raise ArtifactMissingError(f"{uri} holds more than {limit} objects; expected a model folder")
    return names


def converted_problem(client: Any, items_uri: str, **call: Any) -> str | None:
    """Why the conversion's output is not usable (None: it is): the MaxText checkpoint ``<output>0/items/``, the
    record of the commit it converted (``<output>source.json``) and the base's files it names (``<output>base/``,
    what training and the export read)."""
    bucket, prefix = split_uri(items_uri)
    if not any(True for _ in client.list_blobs(bucket, prefix=prefix, max_results=1, **call)):
        return f"conversion finished but {items_uri} is empty: no MaxText checkpoint to train from"
    output = items_uri.removesuffix(CONVERTED)
    record = source_record(client, output, **call)
    if record is None:
        return f"conversion finished but {output}{SOURCE_RECORD} is missing or is not the record of a conversion"
    present = set(object_names(client, output + BASE_FILES, limit=1000, **call))
    missing = [name for name in record.files if name not in present]
    if missing:
        return f"conversion finished but {output}{BASE_FILES} lacks {first_of(missing)} of the base's files"
    return None


def _plain_name(name: str) -> str:
    """A file name of the repository's top folder (``core.hf_model.name_problem``), as the record's writer
    copied it; anything else (a path, a URL) is not a conversion's record."""
    from core.hf_model import name_problem

    problem = name_problem(name)
    if problem is not None:
        raise ValueError(problem)
    return name


class SourceRecord(Model):
    """What the conversion converted (``<output>source.json``, ``workloads/container/base_snapshot.py``): read from GCS,
    parsed here."""

    repo: Text
    revision: Text
    commit: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40}$")]
    files: list[Annotated[Text, AfterValidator(_plain_name)]] = Field(max_length=1000)


def source_record(client: Any, output_uri: str, **call: Any) -> SourceRecord | None:
    """The conversion's record, None when it is missing or is not one."""
    from google.api_core.exceptions import NotFound

    from core.bounded import read_object

    bucket, name = split_uri(output_uri + SOURCE_RECORD)
    try:
        what = f"reading {output_uri}{SOURCE_RECORD}"
        data = read_object(client.bucket(bucket).blob(name), MAX_RECORD_BYTES, what, **call)
    except NotFound:
        return None
    try:
        return parse(SourceRecord, parse_json(data, SOURCE_RECORD), f"{output_uri}{SOURCE_RECORD}")
    except (InputError, BoundaryError):
        return None


class DatasetRecord(Model):
    """What a training run staged of its dataset (``<output>dataset/dataset.json``,
    ``workloads/container/base_snapshot.py`` ``stage_dataset``): read from GCS, parsed here."""

    repo: Text
    revision: Text
    commit: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{40}$")]


def dataset_record(client: Any, output_uri: str, **call: Any) -> DatasetRecord | None:
    """A training run's dataset record, None when it is missing (a dataset loaded by name, a run of an earlier
    version) or is not one."""
    from google.api_core.exceptions import NotFound

    from core.bounded import read_object

    uri = f"{output_uri}{STAGED_DATASET}{DATASET_RECORD}"
    bucket, name = split_uri(uri)
    try:
        data = read_object(client.bucket(bucket).blob(name), MAX_RECORD_BYTES, f"reading {uri}", **call)
    except NotFound:
        return None
    try:
        return parse(DatasetRecord, parse_json(data, uri), uri)
    except (InputError, BoundaryError):
        return None


def final_checkpoint(client: Any, actor_uri: str, **call: Any) -> FinalCheckpoint | None:
    """The newest complete step under ``.../checkpoints/actor/`` (found, not computed), None if none."""
    step, incomplete = newest_complete_step(client, actor_uri, **call)
    if step is None:
        return None
    return FinalCheckpoint(step, f"{actor_uri}{step}/{PARAMS_DIR}", tuple(incomplete))


def no_checkpoint(actor_uri: str) -> str:
    return (
        f"training finished but no complete checkpoint was found under {actor_uri} (searched for "
        "<step>/commit_success.txt with a non-empty <step>/model_params/): check the training logs"
    )


def exported_problem(client: Any, hf_uri: str, **call: Any) -> str | None:
    """What makes an exported folder unloadable (``workloads.observe.exported``: missing files, a shard the index
    names but GCS lacks, a shard cut short, an index that disagrees with the headers), None when it is whole.
    A completed export with such a problem is run again by the next `up`."""
    from workloads.observe.exported import read_exported

    return incomplete_export(hf_uri, read_exported(client, hf_uri, **call).problems)


def incomplete_export(hf_uri: str, problems: list[str]) -> str | None:
    """The line for an export with these problems (None: none)."""
    return f"export finished but {hf_uri} is incomplete: {first_of(problems)}" if problems else None


def first_of(lines: list[str]) -> str:
    """The first ``MAX_SHOWN`` lines joined by "; ", then how many more there are."""
    more = f" (and {len(lines) - MAX_SHOWN} more)" if len(lines) > MAX_SHOWN else ""
    return "; ".join(lines[:MAX_SHOWN]) + more


def _checkpoints_problem(client: Any, actor_uri: str, **call: Any) -> str | None:
    return None if final_checkpoint(client, actor_uri, **call) else no_checkpoint(actor_uri)


def _record_problem(client: Any, record_uri: str, **call: Any) -> str | None:
    return None if published_record(client, record_uri, **call) else no_record(record_uri)


def _step_record_problem(client: Any, record_uri: str, **call: Any) -> str | None:
    return None if step_record(client, record_uri, **call) else no_step_record(record_uri)


CHECKS: dict[Output, Callable[..., str | None]] = {
    "maxtext-checkpoint": converted_problem,
    "checkpoints": _checkpoints_problem,
    "hf-model": exported_problem,
    "hub-record": _record_problem,
    "record": _step_record_problem,
}
"""How each kind of output (``Step.output``) is verified: ``check(client, artifact_uri, **call)``, why it is not
usable or None."""


def step_problem(client: Any, output: Output, artifact_uri: str, **call: Any) -> str | None:
    """Why a completed step's output (of kind ``output``) is not usable, None when it is."""
    return CHECKS[output](client, artifact_uri, **call)


MAX_RECORD_BYTES = 64 * 1024


def published_record(client: Any, record_uri: str, **call: Any) -> dict[str, Any] | None:
    """The publish step's record (``published.json``: repo, branch, commit), None when it is missing or is
    not one (the step did not finish publishing)."""
    from google.api_core.exceptions import NotFound

    bucket, name = split_uri(record_uri)
    blob = client.bucket(bucket).blob(name)
    from core.bounded import read_object

    try:
        data = read_object(blob, MAX_RECORD_BYTES, f"reading {record_uri}", 0, MAX_RECORD_BYTES - 1, **call)
    except NotFound:
        return None
    try:
        record = parse_json(data, record_uri)
    except InputError:
        return None
    if not isinstance(record, dict) or not all(isinstance(record.get(k), str) for k in ("repo", "branch", "commit")):
        return None
    return record


def no_record(record_uri: str) -> str:
    return f"publish finished but {record_uri} is missing or unreadable: the upload did not complete"


def short_run_warning(found: FinalCheckpoint, expected: int, prefill: int) -> str | None:
    """Why the last step is below the configured one, when it is (None otherwise)."""
    if found.step >= expected:
        return None
    return (
        f"training ended at step {found.step}, not {expected}: MaxText drops prompts longer than "
        f"maxPrefillPredictLength ({prefill} tokens) before batching with drop_remainder, so the dataset "
        f"gave fewer full batches; exporting step {found.step} ({found.uri}). Raise "
        "tpu-rl:training.maxPrefillPredictLength if you need every step"
    )


def step_record(client: Any, record_uri: str, **call: Any) -> StepRecord | None:
    """A step's record (``core.records``), None when it is missing or is not one (the step did not finish)."""
    from google.api_core.exceptions import NotFound

    from core.bounded import read_object
    from core.records import MAX_RECORD_BYTES as LIMIT
    from core.records import parse_record

    bucket, name = split_uri(record_uri)
    try:
        data = read_object(client.bucket(bucket).blob(name), LIMIT, f"reading {record_uri}", 0, LIMIT - 1, **call)
    except NotFound:
        return None
    return parse_record(data)


def no_step_record(record_uri: str) -> str:
    return f"the step finished but its record {record_uri} is missing or is not a step record"
