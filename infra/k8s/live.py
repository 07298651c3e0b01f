"""Bounded reads of live JobSets, Kueue Workloads, pods and events through the official Kubernetes client.

What the program decides on leaves the reader typed (``infra.k8s.live_objects``): a step's JobSet, its Kueue
Workloads, its pods, the namespace's pod events and JobSets, each parsed once where it is read; an object of another
shape is a read that failed (``ClusterReadError``, one line).

The program reads its steps' live objects before registering them (did a run fail, is one still
going?), and `make status` reads them to show a run. How a read stays bounded and one line:

- the kubeconfig is parsed with limits and its shape checked before the client's loader
  (``kubernetes.config.load_kube_config_from_dict``) sees it;
- its exec plugin (``gke-gcloud-auth-plugin``) runs within the ``auth-plugin`` budget of ``core.deadline``,
  killed with what it started when the budget ends (``infra.k8s.credentials.run_plugin``; the loader itself would
  log the plugin's error and go on without credentials), and the token it prints is handed to the loader;
- each read goes through ``CustomObjectsApi`` (a JobSet is ``/apis/jobset.x-k8s.io/v1alpha2/...``), or
  ``CoreV1Api`` for a step's pods and their events, with
  ``_request_timeout=(connect, read)``, retried with backoff on 429 (``Retry-After``), 5xx and dropped
  connections (a TLS handshake the server cut short included; a certificate it cannot trust is not), all
  within the ``cluster-read`` budget measured by the wall clock (``core.deadline.call``);
- once a reader has failed (the plugin hangs, the cluster is unreachable, access is refused), every
  later read of the same reader fails at once with the same line: a preview with a hanging plugin
  waits once, not once per step.
"""

from __future__ import annotations

import copy
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from core import deadline
from core.boundary import BoundaryError
from core.bounded import Cap, ReplyEncodingError
from core.errors import BAD_INPUT, TpuRlError
from core.inputs import InputError, parse_json
from core.printed_commands import ANY_STACK, kubectl, make_target
from core.redact import scrub
from infra.k8s import fit, live_objects
from infra.k8s.credentials import (
    ClusterReadError,
    _as_files,
    _credential,
    check_kubeconfig,
    parse_kubeconfig,
)
from infra.k8s.live_objects import JOB_UID_LABEL, JOBSET_API, JOBSET_LABEL, WORKLOAD_API, Event, JobSet, Pod, Workload
from infra.k8s.manifests import JOBSET_CRD
from infra.k8s.read_errors import DROPPED, described, speaks_plain_http, tls_error, tls_line
from infra.transports import read_response

MAX_BODY_BYTES = 8 * 1024 * 1024
"""The largest answer read, received or inflated (``core.bounded``): a page of 500 pods is ~5 MB."""
CAP = Cap(MAX_BODY_BYTES, "check the kubeconfig's server or a proxy in the way")
DRAINED = Cap(MAX_BODY_BYTES, CAP.fix, cut=True)
"""A dry-run create's answer, read only to free the connection: the first ``MAX_BODY_BYTES``, the rest left."""
MAX_PAGES = 20
PAGE_SIZE = 500
RESOURCES = {
    "JobSet": ("jobset.x-k8s.io", "v1alpha2", "jobsets"),
    "Workload": ("kueue.x-k8s.io", "v1beta2", "workloads"),
    "ResourceFlavor": ("kueue.x-k8s.io", "v1beta2", "resourceflavors"),
    "ClusterQueue": ("kueue.x-k8s.io", "v1beta2", "clusterqueues"),
    "CustomResourceDefinition": ("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
}
"""Kind -> (API group, version, plural): the paths the reader can read (and dry-run create)."""
CLUSTER_SCOPED = frozenset({"ResourceFlavor", "ClusterQueue", "CustomResourceDefinition"})
WEBHOOK_BOUND = 300.0
"""How long `pulumi up` waits for an admission webhook that is Ready but not yet reachable (its Service has no endpoints
yet, or they are not programmed, or its certificate is not yet injected), wall clock. Under ``failurePolicy: Fail``
(every Kueue and JobSet webhook tpu-rl meets) a create the API server could not call such a webhook for fails with
``apierrors.NewInternalError`` (HTTP 500, "Internal error occurred: failed calling webhook %q: failed to call
webhook: Post ...: dial tcp ...: connect: connection refused"; kubernetes/apiserver
``pkg/admission/plugin/webhook/{mutating,validating}/dispatcher.go``, ``pkg/util/webhook/error.go``
``ErrCallingWebhook``; kubernetes-sigs/kueue#12008, #7650). pulumi-kubernetes retries a create only on NotFound and
NoMatch (v4.32.0 ``await.go`` ``Creation``: ``retrier.Do(apierrors.IsNotFound, meta.IsNoMatchError)``), so without
this wait such a create fails the `up`."""
WEBHOOK_POLL = 5.0
webhook_clock: Callable[[], float] = time.monotonic
webhook_sleep: Callable[[float], object] = time.sleep
"""The webhook wait's clock and pause (tests give it a fake clock)."""
retry_clock: Callable[[], float] = time.monotonic
retry_sleep: Callable[[float], object] = time.sleep
"""The clock of a read's tries and the pause between them (``core.deadline.retrying``; tests take the pauses at
once on a clock they move on)."""
Objects = list[dict[str, Any]]
"""A list of live objects (an alias: inside ``ClusterReader`` the name ``list`` is its method)."""
Workloads = list[Workload]
Pods = list[Pod]
Events = list[Event]
JobSets = list[JobSet]
"""The typed lists the reader returns (aliases, as ``Objects``)."""
T = TypeVar("T")


class _NotAdmittedYetError(TpuRlError):
    """A dry-run create the API server could not admit yet (a webhook it could not call, a 5xx or 429, a type
    not served yet, a dropped connection): the webhook wait tries again."""


@dataclass(frozen=True)
class Budgets:
    """The reader's limits (``core.deadline.BUDGETS`` by default; tests pass smaller ones)."""

    auth: deadline.Budget
    read: deadline.Budget

    @staticmethod
    def default() -> Budgets:
        return Budgets(deadline.BUDGETS["auth-plugin"], deadline.BUDGETS["cluster-read"])


# ---------------------------------------------------------------------------------------------
# The reader


def _retry_after(headers: Any) -> float:
    try:
        return min(max(float((headers or {}).get("Retry-After", 0)), 0.0), 60.0)
    except (TypeError, ValueError):
        return 0.0


class _Apis:
    """The client's API groups a read may use: custom objects (JobSets, Workloads) and the core group
    (``.core``: pods and events)."""

    def __init__(self, client: Any) -> None:
        from kubernetes.client.api.core_v1_api import CoreV1Api
        from kubernetes.client.api.custom_objects_api import CustomObjectsApi

        self.custom = CustomObjectsApi(client)
        self.core = CoreV1Api(client)


class ClusterReader:
    """Reads JobSets (and their Kueue Workloads, pods and events) of one cluster, each read bounded; after a
    failure it only repeats it."""

    def __init__(self, kubeconfig: dict[str, Any] | str, budgets: Budgets | None = None) -> None:
        self._kubeconfig = kubeconfig
        self.budgets = budgets or Budgets.default()
        self._client: Any = None
        self.broken: ClusterReadError | None = None
        self.where = "(unknown server)"
        self._server = ""
        """The cluster's server URL, as the kubeconfig gives it."""
        self._proxied = False
        """The client reaches the server through a proxy (the kubeconfig's ``proxy-url``)."""
        self._plain: bool | None = None
        """Whether the server answered plain HTTP at its https:// address (None: not asked)."""
        self.context = "gke_<project>_<region>_<cluster>"
        """The kubeconfig context read (its ``current-context``, the stack's ``Settings.kube_context`` in the
        program's): the cluster a printed command names."""

    # -- public reads --------------------------------------------------------------------------

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The live object, or None when it does not exist."""
        group, version, plural = self._resource(api_version, kind)
        path = f"/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}"

        def request(api: Any, timeout: tuple[float, float]) -> Any:
            return api.custom.get_namespaced_custom_object(
                group, version, namespace, plural, name, _preload_content=False, _request_timeout=timeout
            )

        return self._read(path, request, missing_ok=True)

    def list(self, api_version: str, kind: str, namespace: str, label_selector: str) -> Objects:
        """The objects matching a label selector (every page; none when the collection does not exist): a kind of
        ``RESOURCES``, ``v1`` ``Secret`` (``CoreV1Api.list_namespaced_secret``: Helm's storage), or ``v1`` ``Node``
        (cluster-scoped, ``namespace`` unused: ``nodes``)."""
        if (api_version, kind) == ("v1", "Node"):
            return self.nodes(label_selector)
        if (api_version, kind) == ("v1", "Secret"):
            return self._pages(
                f"/api/v1/namespaces/{namespace}/secrets",
                lambda api: api.core.list_namespaced_secret,
                (namespace,),
                label_selector=label_selector,
            )
        group, version, plural = self._resource(api_version, kind)
        return self._pages(
            f"/apis/{group}/{version}/namespaces/{namespace}/{plural}",
            lambda api: api.custom.list_namespaced_custom_object,
            (group, version, namespace, plural),
            label_selector=label_selector,
        )

    def pods(self, namespace: str, label_selector: str) -> Objects:
        """The pods matching a label selector (``CoreV1Api.list_namespaced_pod``, every page)."""
        return self._pages(
            f"/api/v1/namespaces/{namespace}/pods",
            lambda api: api.core.list_namespaced_pod,
            (namespace,),
            label_selector=label_selector,
        )

    def events(self, namespace: str, field_selector: str) -> Objects:
        """The events matching a field selector, e.g. ``involvedObject.kind=Pod`` (``list_namespaced_event``)."""
        return self._pages(
            f"/api/v1/namespaces/{namespace}/events",
            lambda api: api.core.list_namespaced_event,
            (namespace,),
            field_selector=field_selector,
        )

    def nodes(self, label_selector: str) -> Objects:
        """The nodes matching a label selector, e.g. the slice's (``CoreV1Api.list_node``, every page)."""
        return self._pages("/api/v1/nodes", lambda api: api.core.list_node, (), label_selector=label_selector)

    # -- typed reads: what the program decides on, parsed here once (``infra.k8s.live_objects``) ---------------

    def jobset(self, namespace: str, name: str) -> JobSet | None:
        """A step's JobSet (None: it does not exist)."""
        raw = self.get(JOBSET_API, "JobSet", namespace, name)
        return None if raw is None else _parsed(live_objects.jobset, raw, f"JobSet {namespace}/{name}")

    def step_workloads(self, namespace: str, name: str, uid: str) -> Workloads:
        """The Kueue Workloads of JobSet ``name``, selected by its UID (the Workload's name carries a hash,
        ``workload_names.go``)."""
        listed = self.list(WORKLOAD_API, "Workload", namespace, f"{JOB_UID_LABEL}={uid}")
        return _parsed(live_objects.workloads, listed, f"the Kueue Workloads of JobSet {namespace}/{name}")

    def step_pods(self, namespace: str, jobset: str) -> Pods:
        """The pods of a step's JobSet (the JobSet controller labels them with its name)."""
        listed = self.pods(namespace, f"{JOBSET_LABEL}={jobset}")
        return _parsed(live_objects.pods, listed, f"the pods of JobSet {namespace}/{jobset}")

    def pod_events(self, namespace: str) -> Events:
        """The namespace's pod events."""
        listed = self.events(namespace, "involvedObject.kind=Pod")
        return _parsed(live_objects.events, listed, f"the pod events of {namespace}")

    def jobsets(self, namespace: str, selector: str) -> JobSets:
        """The JobSets of ``namespace`` that ``selector`` selects."""
        listed = self.list(JOBSET_API, "JobSet", namespace, selector)
        return _parsed(live_objects.jobsets, listed, f"the JobSets of {namespace}")

    def helm_release(self, namespace: str, name: str) -> tuple[int, str] | None:
        """The newest revision of the Helm release ``name`` in ``namespace`` and its status, as Helm's storage
        records them (None: no release). Helm's default driver keeps each revision in a Secret labelled
        ``owner=helm``, ``name``, ``status`` and ``version`` (helm v3.20.2 ``pkg/storage/driver/secrets.go``
        ``newSecretsObject``); only the labels are read."""
        found = self.list("v1", "Secret", namespace, f"owner=helm,name={name}")
        revisions: list[tuple[int, str]] = []
        for item in found:
            labels = (item.get("metadata") or {}).get("labels") or {}
            version, status = str(labels.get("version", "")), labels.get("status")
            if version.isdigit() and isinstance(status, str):
                revisions.append((int(version), status))
        return max(revisions) if revisions else None

    def crd(self, name: str) -> dict[str, Any] | None:
        """A CustomResourceDefinition (None when it is not installed)."""
        return self.cluster_object("CustomResourceDefinition", name)

    def cluster_object(self, kind: str, name: str) -> dict[str, Any] | None:
        """A cluster-scoped object of ``RESOURCES``, or a ``Namespace`` (None when it does not exist)."""
        if kind == "Namespace":

            def namespace(api: Any, timeout: tuple[float, float]) -> Any:
                return api.core.read_namespace(name, _preload_content=False, _request_timeout=timeout)

            return self._read(f"/api/v1/namespaces/{name}", namespace, missing_ok=True)
        group, version, plural = RESOURCES[kind]

        def request(api: Any, timeout: tuple[float, float]) -> Any:
            return api.custom.get_cluster_custom_object(
                group, version, plural, name, _preload_content=False, _request_timeout=timeout
            )

        return self._read(f"/apis/{group}/{version}/{plural}/{name}", request, missing_ok=True)

    def facts(self, claimed: tuple[tuple[str, str], ...] = ()) -> fit.ClusterFacts:
        """What an existing cluster's checks read (``infra.k8s.fit``): every node, JobSet's and Kueue's CRDs, and the
        instance label of each ``claimed`` object (kind, name) that exists (a Kueue kind only where Kueue is)."""
        nodes = tuple(fit.node_of(raw) for raw in self.nodes("") if isinstance(raw, dict))
        kueue = self.crd(fit.KUEUE_WORKLOAD_CRD)
        owners: dict[tuple[str, str], str] = {}
        for kind, name in claimed:
            found = self.cluster_object(kind, name) if kind == "Namespace" or kueue is not None else None
            if found is not None:
                owners[(kind, name)] = fit.instance_of(found)
        return fit.ClusterFacts(nodes, self.crd(JOBSET_CRD), kueue, owners)

    def dry_run_create(self, manifest: dict[str, Any]) -> None:
        """Create ``manifest`` with ``dryRun=All``: the API server runs every admission webhook and stores
        nothing. Returns when it was admitted, or it exists (409 AlreadyExists comes after admission: the
        webhooks answered). Raises ``_NotAdmittedYetError`` when the answer may change, ``ClusterReadError`` when it
        cannot (a refusal, access denied)."""
        import urllib3
        from kubernetes.client.exceptions import ApiException

        kind, metadata = manifest["kind"], manifest["metadata"]
        group, version, plural = self._resource(manifest["apiVersion"], kind)
        namespace = None if kind in CLUSTER_SCOPED else metadata["namespace"]
        what = f"{kind} {metadata['name']}" if namespace is None else f"{kind} {namespace}/{metadata['name']}"
        api = self._api()
        budget = self.budgets.read
        timeout = (budget.connect, budget.read)

        def call() -> None:
            options = {"dry_run": "All", "_preload_content": False, "_request_timeout": timeout}
            if namespace is None:
                response = api.custom.create_cluster_custom_object(group, version, plural, manifest, **options)
            else:
                response = api.custom.create_namespaced_custom_object(
                    group, version, namespace, plural, manifest, **options
                )
            # Read to its end (an unread answer spoils the pooled connection), within the cap: the body is not used.
            read_response(response, DRAINED, f"the dry-run create of {what} at {self.where}")

        try:
            deadline.call(call, budget.total, cancel=self.close)
        except deadline.DeadlineExceededError:
            raise _NotAdmittedYetError(f"no answer within {budget.total:g} s") from None
        except ApiException as err:
            status = err.status or 0
            message = _status_message(err.body)
            if status == 409:
                return
            tls = tls_error(err)  # status 0: the client's wrapping of urllib3's SSLError (kubernetes ``rest.py``)
            if isinstance(tls, DROPPED):
                raise _NotAdmittedYetError("the TLS handshake was cut short") from None
            if tls is not None:
                raise tls_line(self.where, tls) from None
            if status in (404, 429) or status >= 500:
                raise _NotAdmittedYetError(message or f"HTTP {status}") from None
            fix = (
                ": the identity running `pulumi` needs container.developer and a fresh login"
                if status in (401, 403)
                else f": {message}"
            )
            raise ClusterReadError(
                f"the cluster at {self.where} refused the dry-run create of {what} (HTTP {status}){fix}"
            ) from None
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise _NotAdmittedYetError(f"{type(err).__name__} from the API server") from None
        except ReplyEncodingError as err:
            raise ClusterReadError(
                f"the cluster at {self.where} answered the dry-run create of {what} with a body it cannot read ({err})"
            ) from None

    def wait_admitted(self, manifest: dict[str, Any], bound: float = WEBHOOK_BOUND, *, stack: str = ANY_STACK) -> int:
        """Dry-run create ``manifest`` until the API server admits it (its webhooks answer), at most ``bound``
        seconds of wall clock (``webhook_clock``), every ``WEBHOOK_POLL``; returns how many tries it refused.
        When the bound is hit, one line names the webhook, its Service's namespace and the fix."""
        ends = webhook_clock() + bound
        refused = 0
        while True:
            try:
                self.dry_run_create(manifest)
                return refused
            except _NotAdmittedYetError as err:
                last = str(err)
            refused += 1
            if webhook_clock() + WEBHOOK_POLL > ends:
                raise ClusterReadError(_not_admitted(manifest, bound, refused, last, self.context, stack))
            webhook_sleep(WEBHOOK_POLL)

    def _pages(
        self, path: str, method: Callable[[_Apis], Callable[..., Any]], args: tuple[str, ...], **selector: str
    ) -> Objects:
        """Every page of a list (``method`` of the client's API groups, called with ``args`` and the
        selector), within one budget for them all."""
        items: Objects = []
        token = ""
        ends = time.monotonic() + self.budgets.read.total
        for _ in range(MAX_PAGES):

            def request(api: _Apis, timeout: tuple[float, float], token: str = token) -> Any:
                return method(api)(
                    *args,
                    **selector,
                    limit=PAGE_SIZE,
                    _continue=token or None,
                    _preload_content=False,
                    _request_timeout=timeout,
                )

            page = self._read(path, request, missing_ok=True, ends=ends) or {}
            entries = page.get("items") or []
            if not isinstance(entries, list):
                raise self._fail(ClusterReadError(f"the list at {path} on {self.where} has no items array"))
            items += [item for item in entries if isinstance(item, dict)]
            token = str((page.get("metadata") or {}).get("continue") or "")
            if not token:
                return items
        raise self._fail(ClusterReadError(f"the list at {path} on {self.where} has more than {MAX_PAGES} pages"))

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    # -- internals -----------------------------------------------------------------------------

    @staticmethod
    def _resource(api_version: str, kind: str) -> tuple[str, str, str]:
        group, version, plural = RESOURCES[kind]
        if api_version != f"{group}/{version}":
            raise ValueError(f"{kind} is read as {group}/{version}, not {api_version}")
        return group, version, plural

    def _fail(self, err: ClusterReadError) -> ClusterReadError:
        self.broken = err
        return err

    def _api(self) -> _Apis:
        if self.broken is not None:
            raise self.broken
        if self._client is None:
            try:
                config = (
                    parse_kubeconfig(self._kubeconfig)
                    if isinstance(self._kubeconfig, str)
                    else check_kubeconfig(self._kubeconfig)
                )
                cluster = config["clusters"][0]["cluster"]
                self._server, self._proxied = cluster["server"], bool(cluster.get("proxy-url"))
                self.where = scrub(self._server.split("://", 1)[-1], limit=100)
                self.context = scrub(config["current-context"], limit=200)
                self._client = self._connect(config)
            except ClusterReadError as err:
                raise self._fail(err) from None
        return _Apis(self._client)

    def _connect(self, config: dict[str, Any]) -> Any:
        from kubernetes.client import ApiClient, Configuration
        from kubernetes.config.config_exception import ConfigException
        from kubernetes.config.kube_config import load_kube_config_from_dict

        config = copy.deepcopy(config)
        config["users"][0]["user"] = _credential(config, self.budgets.auth)
        _as_files(config)
        configuration = Configuration()
        try:
            load_kube_config_from_dict(config, client_configuration=configuration, persist_config=False)
        except (ConfigException, ValueError, TypeError, KeyError, OSError) as err:
            raise ClusterReadError(
                f"the kubeconfig is not usable: {scrub(str(err), limit=120)}", exit_code=BAD_INPUT
            ) from None
        configuration.retries = False  # retries are ours (bounded); urllib3 would retry connects on its own
        return ApiClient(configuration)

    def _read(
        self,
        path: str,
        request: Callable[[Any, tuple[float, float]], Any],
        *,
        missing_ok: bool,
        ends: float | None = None,
    ) -> dict[str, Any] | None:
        """One request (retried within the budget); ``ends``: the wall-clock end of a larger read (a list)."""
        api = self._api()
        budget = self.budgets.read
        if ends is not None:
            budget = budget.within(ends - time.monotonic())
        timeout = (budget.connect, budget.read)

        def attempt(left: float) -> dict[str, Any] | None:
            def call() -> dict[str, Any] | None:
                body = read_response(request(api, timeout), CAP, f"GET {self.where}{path}")
                try:
                    document = parse_json(body, f"the cluster's answer to {path}")
                except InputError as err:
                    raise ClusterReadError(f"{err} (cluster at {self.where})") from None
                if not isinstance(document, dict):
                    raise ClusterReadError(
                        f"the cluster at {self.where} answered {path} with JSON that is not an object"
                    )
                return document

            return deadline.call(call, left, cancel=self.close)

        try:
            return deadline.retrying(attempt, budget, wait_for=self._transient, clock=retry_clock, sleep=retry_sleep)
        except ClusterReadError as err:
            raise self._fail(err) from None
        except deadline.DeadlineExceededError:
            total = self.budgets.read.total
            raise self._fail(
                ClusterReadError(f"the cluster at {self.where} did not answer {path} within {total:g} s")
            ) from None
        except Exception as err:
            if missing_ok and getattr(err, "status", None) == 404:
                return None
            raise self._fail(self._describe(err, path)) from None

    def _transient(self, err: Exception) -> float | None:
        """Seconds to wait before retrying (0 = the default backoff), or None when retrying cannot help."""
        import urllib3
        from kubernetes.client.exceptions import ApiException

        if self._answers_plain_http(err):
            return None
        if isinstance(tls_error(err), DROPPED):  # the connection ended mid-handshake, as a reset does
            return 0.0
        if isinstance(err, ApiException):
            if err.status == 429 or (err.status or 0) >= 500:
                return _retry_after(err.headers)
            return None
        if isinstance(err, urllib3.exceptions.ProtocolError):  # reset or closed mid-answer
            return 0.0
        return None

    def _describe(self, err: Exception, path: str) -> ClusterReadError:
        if self._answers_plain_http(err):
            return ClusterReadError(
                f"the cluster at {self.where} answers plain HTTP, not TLS: the kubeconfig's https:// server is not an "
                "API server's address (another service's port?), or the kubeconfig is not current",
                exit_code=BAD_INPUT,
            )
        return described(err, path, self.where, self.budgets.read.read)

    def _answers_plain_http(self, err: Exception) -> bool:
        """Whether ``err`` is a TLS connection that was reset or answered with what is not TLS (not one closed
        mid-handshake, ``DROPPED``, which a plain HTTP server that answered does not do) by a server that answers a
        plain HTTP request at the same address, asked once.

        A plain HTTP server answers the TLS ClientHello with its 400 and closes, the rest of the hello often unread,
        which resets the connection: the client reads either the 400 (a TLS record it cannot parse) or the reset
        first (a handshake cut short, which a retry may cure), as the race between the two goes. Asking the server
        in plain HTTP gives the same answer every run."""
        import urllib3

        cause = tls_error(err)
        failed = cause is not None and not isinstance(cause, (ssl.SSLCertVerificationError, *DROPPED))
        failed |= isinstance(err, (urllib3.exceptions.ProtocolError, ConnectionResetError))
        if not failed or not self._server.startswith("https://") or self._proxied:
            return False
        if self._plain is None:
            self._plain = speaks_plain_http(self._server, self.budgets.read.connect)
        return self._plain


def _parsed(parse: Callable[[Any, str], T], raw: Any, source: str) -> T:
    """``parse(raw, source)``; an object of another shape is a read that failed (``ClusterReadError``, one line, exit 2
    as ``BoundaryError`` says: a retry reads the same object), as an unreadable one is: the wait and `make status`
    report it, and nothing past the reader re-checks it."""
    try:
        return parse(raw, source)
    except BoundaryError as err:
        raise ClusterReadError(str(err), exit_code=err.exit_code) from None


Connect = Callable[[str], ClusterReader]
"""A reader of a cluster from its kubeconfig's text: ``ClusterReader`` itself in a real run (``program.world``), a
double in the tests. The program reads the cluster only through the one it is given."""


def _status_message(body: Any) -> str:
    """The ``message`` of an API server's ``Status`` body (bytes or text), scrubbed to one line."""
    try:
        document = parse_json(body if isinstance(body, bytes) else str(body or "").encode(), "the cluster's answer")
    except InputError:
        return scrub(str(body or ""), limit=300)
    message = document.get("message") if isinstance(document, dict) else None
    return scrub(str(message or ""), limit=300)


def _not_admitted(manifest: dict[str, Any], bound: float, refused: int, last: str, context: str, stack: str) -> str:
    """The line when the webhook wait's bound is hit: the webhook the API server could not call and the
    namespace of its Service, when its answer names them (``Post "https://<service>.<namespace>.svc:443/..."``), and
    the command that shows them in the cluster of kubeconfig ``context``."""
    import re

    kind, name = manifest["kind"], manifest["metadata"]["name"]
    webhook = re.search(r'failed calling webhook \\?"([^"\\]+)', last)
    service = re.search(r"https://([a-z0-9-]+)\.([a-z0-9-]+)\.svc", last)
    who = f"the admission webhook {webhook.group(1)}" if webhook else "the API server's admission webhooks"
    check = (
        f"`{kubectl(context, 'get', 'pods,endpoints', '-n', service.group(2))}` (Service {service.group(1)})"
        if service
        else f"`{kubectl(context, 'get', 'validatingwebhookconfigurations,mutatingwebhookconfigurations')}`"
    )
    return (
        f"{who} did not admit a dry-run create of {kind} {name} within {bound:g} s ({refused} tries; last: "
        f"{last}): check {check}, then run `{make_target('up', stack)}` again"
    )
