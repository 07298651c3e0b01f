"""The capacity check's bounded reads: the clients, every reply through a size cap, the retry and the wall-clock
budget (``core.deadline`` ``compute``), a reply's fields parsed with limits, and every way a read fails as one
``ReadFailedError`` line naming what was read and the API.

Every reply is parsed once, where it is read (each check's module parses its own reply into its frozen dataclass
with the field readers here); a reply of another shape (not JSON, a field of the wrong type, a number out of
range) is one line naming the API and the field, and every reply is read through the one bounded read
(``core.bounded``: ``MAX_REPLY_BYTES``, compressed and inflated alike; ``infra.transports``' requests adapter on
each client's session), so a gzip bomb costs at most the cap."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from core import deadline
from core.bounded import Cap, ReplyEncodingError, ReplyTooLargeError
from core.errors import TpuRlError
from core.hf_model import json_nesting
from core.redact import scrub
from infra.transports import cap_session, no_background_fetches

T = TypeVar("T")
MAX_REPLY_BYTES = 4 * 1024 * 1024
"""The largest reply read, before and after inflating (a region's or the project's quotas are ~20 KB, a page of 100
node VMs well under 1 MB)."""
FIX = "a Google API answers this in kilobytes: check for a proxy in the way"
"""What a reply past the cap tells the operator to check (``core.bounded.Cap``)."""
MAX_DEPTH = 64
"""The deepest JSON nesting read (the replies read here nest under 10 levels)."""
MAX_COUNT = 2**31 - 1
"""The largest count a reply may give (VMs, chips, a quota limit in chips)."""
MAX_AMOUNT = 2.0**63
"""The largest quota limit or usage a reply may give (Compute Engine writes "unlimited" as large numbers)."""


# ---------------------------------------------------------------------------------------------
# A reply's fields, read with limits: protobuf messages of the clients into the checks' dataclasses


class ReplyError(TpuRlError):
    """A reply of a shape the check does not read: one line naming the API and the field."""


def as_count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise ReplyError(f"{where} is {scrub(repr(value), limit=40)}, not a count")
    return value


def as_amount(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ReplyError(f"{where} is {scrub(repr(value), limit=40)}, not a number")
    if not 0 <= value <= MAX_AMOUNT:
        raise ReplyError(f"{where} is {value:g}, out of range")
    return float(value)


def as_text(value: Any, where: str, limit: int = 120) -> str:
    if not isinstance(value, str):
        raise ReplyError(f"{where} is {type(value).__name__}, not text")
    return scrub(value, limit=limit)


def as_enum(value: Any, where: str = "", *, required: bool = False) -> str:
    """An enum field's name; a value the client does not know (a newer API) as ``value N``. ``required``: the
    unset value (0, ``..._UNSPECIFIED``, which is also what the parser leaves for a string where an object is) is a
    ``ReplyError``."""
    if required and not value:
        raise ReplyError(f"{where} is missing")
    name = getattr(value, "name", None)
    return name if isinstance(name, str) else f"value {scrub(repr(value), limit=20)}"


def require_field(message: Any, name: str, where: str) -> None:
    """A field the check reads is in the reply. The protobuf JSON parser leaves a message field empty for a string
    where an object is (``ignore_unknown_fields``), and Compute's fields are ``optional``: absent is detectable."""
    if name not in message:
        raise ReplyError(f"{where} is missing")


def require_name(message: Any, name: str, field: str = "name") -> None:
    """The reply is of the object asked for (a reply of another object, or none, is not read as this one)."""
    value = getattr(message, field)
    if value != name:
        raise ReplyError(f"{field} is {scrub(repr(value), limit=80)}, not {name}")


def granted(body: bytes) -> list[str]:
    """Resource Manager's ``TestIamPermissionsResponse`` (``{"permissions": [...]}``; none held: ``{}``)."""
    reply = json.loads(body)
    permissions = reply.get("permissions", [])
    if not isinstance(permissions, list):
        raise ReplyError(f"permissions is {type(permissions).__name__}, not a list")
    return [as_text(p, f"permissions[{n}]", 100) for n, p in enumerate(permissions)]


def json_object(body: bytes) -> None:
    """A successful reply of a Google API is a JSON object (checked before the client's protobuf parser, which
    reads an array as an empty message and recurses on nesting): ``ReplyError`` otherwise."""
    if not body.lstrip()[:1] == b"{":
        raise ReplyError("not a JSON object")
    if json_nesting(body) > MAX_DEPTH:  # counted before any parse: the protobuf parser recurses on nesting
        raise ReplyError(f"JSON nested deeper than {MAX_DEPTH} levels")


def cap_replies(session: Any, cap: int = MAX_REPLY_BYTES) -> None:
    """Every reply of a client's REST session through the one bounded read (``infra.transports.cap_session``), a
    successful one a JSON object (``json_object``). The session is google-auth's ``AuthorizedSession`` (a
    ``requests.Session``) each client builds itself and takes no argument for: a GAPIC REST transport's
    ``client.transport._session`` (e.g. ``compute_v1/services/regions/transports/rest.py``:
    ``self._session = AuthorizedSession(...)``), google-cloud-storage's ``client._http`` (google-cloud-core's
    ``Client._http`` makes it on first use, ``google/cloud/client/__init__.py``)."""
    cap_session(session, Cap(cap, FIX), json_object)


class Clients:
    """The Compute Engine, Service Usage, Cloud Quotas and Cloud KMS clients, REST, Resource Manager's and GKE's one
    call each (``ProjectPermissions``, ``ProjectClusters``), and a Cloud Storage client (JSON API), every reply capped
    (tests point them at a loopback server)."""

    def __init__(self, **options: Any) -> None:
        from google.cloud import cloudquotas_v1, compute_v1, kms_v1, service_usage_v1, storage

        self.reservations = compute_v1.ReservationsClient(**options)
        self.regions = compute_v1.RegionsClient(**options)
        self.projects = compute_v1.ProjectsClient(**options)
        self.networks = compute_v1.NetworksClient(**options)
        self.instances = compute_v1.InstancesClient(**options)
        self.services = service_usage_v1.ServiceUsageClient(transport="rest", **options)
        self.quotas = cloudquotas_v1.CloudQuotasClient(transport="rest", **options)
        self.kms = kms_v1.KeyManagementServiceClient(transport="rest", **options)
        self.machine_types = compute_v1.MachineTypesClient(**options)
        self.accelerator_types = compute_v1.AcceleratorTypesClient(**options)
        self.disk_types = compute_v1.DiskTypesClient(**options)
        self.images = compute_v1.ImagesClient(**options)
        self.permissions = ProjectPermissions(**options)
        self.clusters = ProjectClusters(**options)
        for client in self.all():
            cap_replies(client.transport._session)
        # project=None: buckets.get names no project (the client would otherwise look one up, or fail without one).
        no_background_fetches()
        self.storage = storage.Client(project=None, **options)
        cap_replies(self.storage._http)

    def all(self) -> tuple[Any, ...]:
        """The clients with a ``transport`` (``storage`` has none: its session is ``storage._http``)."""
        return (
            self.reservations,
            self.regions,
            self.projects,
            self.networks,
            self.instances,
            self.services,
            self.quotas,
            self.kms,
            self.machine_types,
            self.accelerator_types,
            self.disk_types,
            self.images,
            self.permissions,
            self.clusters,
        )

    def close(self) -> None:
        for client in self.all():
            client.transport.close()
        self.storage.close()


class _OneCall:
    """One Google REST call of an API whose client library the project does not depend on, through google-auth's
    ``AuthorizedSession``: the session every google-cloud REST transport uses (``transport._session``), so the same
    credentials, the same capped adapter (``cap_replies``) and api_core's exceptions (``from_http_response``)."""

    ENDPOINT = ""

    def __init__(self, credentials: Any = None, client_options: Any = None, **_: Any) -> None:
        import google.auth
        from google.auth.transport.requests import AuthorizedSession

        if credentials is None:
            credentials, _project = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
        endpoint = (client_options or {}).get("api_endpoint") or self.ENDPOINT
        self.url = endpoint if "://" in endpoint else f"https://{endpoint}"
        self.transport = self
        self._session = AuthorizedSession(credentials)

    def close(self) -> None:
        self._session.close()


class ProjectPermissions(_OneCall):
    """Resource Manager's ``projects.testIamPermissions`` (v3, REST)."""

    ENDPOINT = "https://cloudresourcemanager.googleapis.com"

    def test(self, project: str, permissions: Iterable[str], options: dict[str, Any]) -> list[str]:
        """The permissions of ``permissions`` the caller holds on ``project`` (retried and bounded as every read)."""
        from google.api_core import exceptions as api

        def once() -> list[str]:
            response = self._session.post(
                f"{self.url}/v3/projects/{project}:testIamPermissions",
                json={"permissions": list(permissions)},
                timeout=options["timeout"],
            )
            if response.status_code >= 400:
                raise api.from_http_response(response)
            return granted(response.content)

        return options["retry"](once)()


class ProjectClusters(_OneCall):
    """GKE's ``projects.locations.clusters.list`` (v1, REST) over every location of a project (``locations/-``).
    The reply is GKE's JSON object (``ListClustersResponse``: ``clusters``, ``missingZones``), parsed by the check that
    reads it (``infra.gcp.capacity.keys.clusters_reply``)."""

    ENDPOINT = "https://container.googleapis.com"

    def list(self, project: str, options: dict[str, Any]) -> Any:
        """The clusters of ``project`` in every location (retried and bounded as every read)."""
        from google.api_core import exceptions as api

        def once() -> Any:
            response = self._session.get(
                f"{self.url}/v1/projects/{project}/locations/-/clusters", timeout=options["timeout"]
            )
            if response.status_code >= 400:
                raise api.from_http_response(response)
            return json.loads(response.content)

        return options["retry"](once)()


def make_clients() -> Clients:
    """Clients with Application Default Credentials (what the gcp provider uses too)."""
    return Clients()


def transient(err: Exception) -> bool:
    """What a read retries: 429, 5xx, Compute's 403 ``rateLimitExceeded``, a dropped connection or timeout."""
    from google.api_core import exceptions as api
    from requests import exceptions as requests_errors

    if isinstance(err, requests_errors.SSLError):
        return False
    if isinstance(err, api.Forbidden):
        return "rateLimitExceeded" in _reasons(err)
    if isinstance(err, api.GoogleAPICallError):
        return err.code in (429, 500, 502, 503, 504)
    return isinstance(err, requests_errors.ConnectionError | requests_errors.Timeout)


def _error_info(err: Any) -> dict[str, Any]:
    """The ``google.rpc.ErrorInfo`` of an error: over REST, api_core keeps it as the JSON dict in
    ``details`` (its ``reason``/``metadata`` properties expect the proto and fail on it)."""
    for detail in getattr(err, "details", None) or []:
        if isinstance(detail, dict) and detail.get("@type") == "type.googleapis.com/google.rpc.ErrorInfo":
            return detail
    return {}


def _reasons(err: Any) -> set[str]:
    """Compute's ``errors[].reason`` values and the ErrorInfo reason (``SERVICE_DISABLED``)."""
    reasons = {str(e.get("reason")) for e in getattr(err, "errors", None) or [] if isinstance(e, dict)}
    info = _error_info(err).get("reason")
    return reasons | {str(info)} if info else reasons


def _options(budget: deadline.Budget) -> dict[str, Any]:
    from google.api_core import retry

    return {
        # The clients take one number: requests applies it to the connect and to each read, and the retry
        # shortens it to what is left of the total (api_core ``TimeToDeadlineTimeout``).
        "timeout": budget.read,
        "retry": retry.Retry(initial=0.5, maximum=4.0, multiplier=2.0, timeout=budget.total, predicate=transient),
    }


class ReadFailedError(TpuRlError):
    """A read could not decide (no permission, no answer, a disabled API, an unreadable reply): one line."""


_PARSE_FIELD = re.compile(r"Failed to parse ([A-Za-z0-9_]+) field: ")
_PARSE_AT = re.compile(r" at [A-Za-z_][A-Za-z0-9_]*((?:\.[A-Za-z0-9_\[\]]+)*)\.*$")


def parse_failure(message: str) -> str:
    """What a protobuf JSON ``ParseError`` says (``json_format``), as ``<field>: <why>``: the field path it names
    (``... at Region.quotas[0].limit``, or the ``Failed to parse quotas field`` chain), or ``not JSON``."""
    if message.startswith("Failed to load JSON"):
        return "not JSON"
    fields = _PARSE_FIELD.findall(message)
    rest = _PARSE_FIELD.sub("", message).strip()
    at = _PARSE_AT.search(rest)
    path = (at.group(1).lstrip(".") if at else "") or ".".join(fields) or "a field"
    why = (rest[: at.start()] if at else rest).strip().rstrip(".")
    return f"{scrub(path, limit=80)}: {scrub(why, limit=80)}"


REPLY = "answered with a reply this check cannot read"
TOKEN_ENDPOINT = "cannot reach the token endpoint of the Google credentials"


def unreachable_token_endpoint(err: BaseException) -> str:
    """The clause for credentials whose token could not be fetched or refreshed for want of an answer
    (google-auth's ``TransportError``), naming the transport's own error."""
    cause = err.__cause__ or err.__context__
    return f"{TOKEN_ENDPOINT} ({type(cause or err).__name__}): check the network or a proxy, or retry later"


def bounded_read(
    what: str, source: str, call: Callable[[dict[str, Any]], T], clients: Clients, budget: deadline.Budget
) -> T:
    """One read through ``call(options)`` (the client call and its parse), bounded; every way it can fail is a
    ``ReadFailedError`` line naming ``what`` was read and the API (``source``), or the client's ``NotFound``."""
    from google.api_core import exceptions as api
    from google.auth import exceptions as auth
    from google.protobuf import json_format
    from requests import exceptions as requests_errors

    try:
        return deadline.call(lambda: call(_options(budget)), budget.total + 1.0, cancel=clients.close)
    except deadline.DeadlineExceededError:
        raise ReadFailedError(f"{what}: no answer within {budget.total:g} s") from None
    except api.NotFound:
        raise
    except api.Forbidden as err:
        reasons = _reasons(err)
        if "SERVICE_DISABLED" in reasons or "accessNotConfigured" in reasons:
            service = (_error_info(err).get("metadata") or {}).get("service", "the API")
            raise ReadFailedError(f"{what}: {scrub(str(service), limit=60)} is disabled") from None
        raise ReadFailedError(f"{what}: permission denied (HTTP 403)") from None
    except api.RetryError as err:
        raise ReadFailedError(f"{what}: no usable answer in time ({type(err.cause).__name__})") from None
    except api.GoogleAPICallError as err:
        raise ReadFailedError(f"{what}: HTTP {err.code}") from None
    except (auth.DefaultCredentialsError, auth.RefreshError):
        raise ReadFailedError(f"{what}: no usable Google credentials (gcloud auth application-default login)") from None
    except auth.TransportError as err:  # the credentials' token endpoint did not answer: a retry may cure it
        raise ReadFailedError(f"{what}: {unreachable_token_endpoint(err)}") from None
    except ReplyTooLargeError as err:
        raise ReadFailedError(f"{what}: {source}: {err}") from None
    except ReplyEncodingError as err:
        raise ReadFailedError(f"{what}: {source} {REPLY} ({err})") from None
    except ReplyError as err:
        raise ReadFailedError(f"{what}: {source} {REPLY} ({err})") from None
    except json_format.ParseError as err:
        raise ReadFailedError(f"{what}: {source} {REPLY} ({parse_failure(str(err))})") from None
    except requests_errors.RequestException as err:
        raise ReadFailedError(f"{what}: {type(err).__name__}") from None
    except (UnicodeError, ValueError, TypeError, AttributeError, KeyError, OverflowError) as err:
        # what the client's own parse raises besides ParseError (bytes that are not UTF-8, an enum it cannot map)
        raise ReadFailedError(f"{what}: {source} {REPLY} ({type(err).__name__})") from None
