"""Run the real program under Pulumi's mock runtime and capture what `pulumi up` would register.

No CLI, no cloud, no network. Only the SDK's public testing API is used: ``pulumi.runtime.set_mocks``
with a ``Mocks`` and a ``MockMonitor`` subclass (the ``monitor=`` argument) that keeps every
``RegisterResource`` request (its options are not in ``MockResourceArgs``), ``set_all_config``, and
``pulumi.runtime.test``, which runs the program and waits for every registration and pending Output.
The mocks return plausible outputs for the few values the program reads back (cluster endpoint,
service account emails); a caller may answer for some resources itself (``outputs_for``).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from google.protobuf import json_format
from pulumi.runtime import mocks as pulumi_mocks

ROOT = Path(__file__).resolve().parents[2]

SECRET = "[secret]"
SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
"""How a secret value travels between the SDK and the engine: ``{SIG_KEY: SECRET_SIG, "value": v}``
(pulumi ``sdk/go/common/resource/sig/sig.go``: ``Key`` and ``Secret``; part of the wire protocol, so
every SDK version uses the same constants)."""
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
"""The wire value of an unknown (``sig.go``'s ``UnknownStringValue``); an output the mocks return as this
is unknown to the program, in a preview as in an update."""
FAKE_CA = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCm9mZmxpbmUtcGxhbgotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg=="


@dataclass(frozen=True)
class Registration:
    """One ``RegisterResource`` request: what the program asked for, options included."""

    type: str
    name: str
    inputs: dict[str, Any]
    """As the SDK sends them (secrets as signature-wrapped values; ``plain()`` unwraps them)."""
    request: Any
    """The raw ``RegisterResourceRequest`` (options: ``ignoreChanges``, ``customTimeouts``, ...)."""

    @property
    def trigger(self) -> Any:
        """The ``replacement_trigger`` option (None when the program set none)."""
        if not self.request.HasField("replacement_trigger"):
            return None
        return plain(json_format.MessageToDict(self.request.replacement_trigger), redact=False)


@dataclass
class Plan:
    """What the program registered: resources (inputs + options) and stack outputs."""

    stack: str
    resources: list[dict[str, Any]]
    outputs: dict[str, Any]
    raw_inputs: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    """Resource name -> inputs with secrets unwrapped (for tests that look for leaks)."""
    error: BaseException | None = None
    """What the program raised, when run with ``raise_errors=False``."""
    logs: list[tuple[str, str]] = field(default_factory=list, repr=False)
    """(level, message) of what the program logged through ``pulumi.log`` (warnings, infos)."""
    urns: dict[str, str] = field(default_factory=dict, repr=False)
    """Resource name -> the URN the mock monitor gave it (the parent chain of types, then the name)."""
    wire: dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=dict, repr=False)
    """(type, name) -> (inputs, outputs) as they crossed the wire (``json_format.MessageToDict`` of the request's
    and the reply's Struct): every number a float, a secret ``{SIG_KEY: SECRET_SIG, "value": v}`` where the program
    made it, an unknown the string ``UNKNOWN``. What the engine holds for the resource, before a provider's Check
    (``tests/analyzer.py`` hands it to the policy pack as the engine does)."""

    def warnings(self) -> list[str]:
        return [message for level, message in self.logs if level == "WARNING"]

    def to_json(self) -> dict[str, Any]:
        return {"stack": self.stack, "resources": self.resources, "outputs": self.outputs}

    def find(self, type_: str, name: str | None = None) -> list[dict[str, Any]]:
        """Resources of a type token (and name, when given)."""
        return [r for r in self.resources if r["type"] == type_ and (name is None or r["name"] == name)]

    def kubernetes_objects(self) -> list[dict[str, Any]]:
        """Inputs of every Kubernetes object (not providers, not Helm releases), as manifests."""
        return [r["inputs"] for r in self.resources if is_kubernetes_object(r["type"])]


def is_kubernetes_object(type_: str) -> bool:
    """A Kubernetes object (``kubernetes:<group/version>:<Kind>``), not a Helm release or a provider."""
    return type_.startswith("kubernetes:") and not type_.startswith("kubernetes:helm.sh/")


def plain(value: Any, redact: bool) -> Any:
    """Engine property values as plain data; secrets become ``[secret]`` (every leaf) when ``redact``."""
    if isinstance(value, dict):
        if value.get(SECRET_SIG_KEY) == SECRET_SIG:
            inner = plain(value.get("value"), False)
            return _redact(inner) if redact else inner
        return {k: plain(v, redact) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v, redact) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _redact(value: Any) -> Any:
    """Hide every leaf of a secret value, keeping the shape (a Secret's keys stay visible)."""
    if isinstance(value, dict):
        return {k: _redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v) for v in value]
    return SECRET


OutputsFor = Callable[[Registration], "dict[str, Any] | None"]

COMPUTED: dict[str, tuple[str, ...]] = {
    "gcp:container/cluster:Cluster": ("endpoint", "masterAuth"),
    "gcp:serviceaccount/account:Account": ("email", "name", "member"),
    "gcp:storage/bucket:Bucket": ("url",),
    "gcp:artifactregistry/repository:Repository": ("name",),
}
"""Outputs a provider computes that the program reads back, by type (unknown in a first preview, with every id;
``new_resource`` fills them otherwise)."""


PROJECT_NUMBER = "123456789012"
"""The project number the offline plan answers ``gcp.organizations.get_project`` with."""


class _Mocks(pulumi_mocks.Mocks):
    """Echo inputs back, plus the outputs the program reads; ``outputs_for`` may answer instead."""

    def __init__(self, outputs_for: OutputsFor | None, unknown_outputs: bool = False) -> None:
        self.outputs_for = outputs_for
        self.unknown_outputs = unknown_outputs
        """A preview of a stack with nothing created yet: what a provider computes (ids, emails, endpoints,
        URLs) is unknown, as a Create in preview returns it (pulumi-terraform-bridge and pulumi-kubernetes
        return the inputs; the engine marks the rest unknown)."""
        self.registrations: list[Registration] = []
        self.local = threading.local()
        """``current``: the request this thread is registering (the SDK registers from a thread pool;
        the recorder sets it, new_resource sees only its inputs)."""

    def new_resource(self, args: pulumi_mocks.MockResourceArgs) -> tuple[str, dict]:
        registration = Registration(args.typ, args.name, dict(args.inputs), self.local.current)
        self.registrations.append(registration)
        if self.outputs_for is not None:
            answer = self.outputs_for(registration)
            if answer is not None:
                return f"{args.name}-id", answer
        state = dict(args.inputs)
        if self.unknown_outputs:
            for key in COMPUTED.get(args.typ, ()):
                state[key] = UNKNOWN
            return "", state
        if args.typ == "gcp:container/cluster:Cluster":
            state["endpoint"] = "127.0.0.1:9"  # loopback discard port: nothing offline may reach a cluster
            state["masterAuth"] = {**state.get("masterAuth", {}), "clusterCaCertificate": FAKE_CA}
        elif args.typ == "gcp:serviceaccount/account:Account":
            email = f"{state['accountId']}@{state.get('project', 'project')}.iam.gserviceaccount.com"
            state.update(email=email, name=f"projects/{state.get('project')}/serviceAccounts/{email}")
        elif args.typ == "gcp:storage/bucket:Bucket":
            state["url"] = f"gs://{state['name']}"
        elif args.typ == "gcp:artifactregistry/repository:Repository":
            # The provider's `name` is the repository's full name (terraform-provider-google
            # artifact_registry_repository: "projects/p1/locations/us-central1/repositories/repo1").
            state["name"] = (
                f"projects/{state.get('project')}/locations/{state.get('location')}/repositories/{state['repositoryId']}"
            )
        return f"{args.name}-id", state

    def call(self, args: pulumi_mocks.MockCallArgs) -> tuple[dict, list]:
        if args.token == "gcp:container/getEngineVersions:getEngineVersions":
            # A plausible answer: the prefix's newest patch on every channel (the plan shows the prefix).
            version = f"{args.args.get('versionPrefix') or '1.35.'}0-gke.0"
            channels = {c: version for c in ("RAPID", "REGULAR", "STABLE", "EXTENDED")}
            return {"latestMasterVersion": version, "releaseChannelLatestVersion": channels}, []
        if args.token == "gcp:organizations/getProject:getProject":
            return {"projectId": args.args.get("projectId"), "number": PROJECT_NUMBER}, []
        return {}, []


class _Recorder(pulumi_mocks.MockMonitor):
    """Hands every RegisterResource request to the mocks, so options and dependencies can be inspected."""

    mocks: _Mocks

    def __init__(self, mocks: _Mocks) -> None:
        super().__init__(mocks)
        self.urns: dict[str, str] = {}
        self.wire: dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any]]] = {}

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        self.mocks.local.current = request
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self.urns[request.name] = response.urn
            self.wire[(request.type, request.name)] = (
                json_format.MessageToDict(request.object),
                json_format.MessageToDict(response.object),
            )
        return response


def _urn_name(urn: str) -> str:
    return urn.split("::")[-1]


def _provider_name(ref: str) -> str | None:
    return _urn_name(ref.split("::", 1)[1].rsplit("::", 1)[0]) if ref else None


def _options(request: Any) -> dict[str, Any]:
    timeouts = request.customTimeouts
    custom = {k: getattr(timeouts, k) for k in ("create", "update", "delete") if getattr(timeouts, k)}
    return {
        "dependsOn": sorted({_urn_name(u) for u in request.dependencies}),
        "parent": _urn_name(request.parent) if request.parent else None,
        "provider": _provider_name(request.provider),
        "protect": bool(request.protect) if request.HasField("protect") else False,
        "customTimeouts": custom or None,
        "replaceOnChanges": list(request.replaceOnChanges),
        "deleteBeforeReplace": bool(request.deleteBeforeReplace),
        "ignoreChanges": list(request.ignoreChanges),
        "deletedWith": _urn_name(request.deletedWith) if request.deletedWith else None,
        "retainOnDelete": bool(request.retainOnDelete) if request.HasField("retainOnDelete") else False,
        "aliases": [json_format.MessageToDict(alias) for alias in request.aliases],
    }


def run_program(
    program: Callable[[], Any],
    stack: str,
    config: dict[str, str],
    secret_keys: set[str] | frozenset[str] = frozenset(),
    *,
    project: str = "tpu-rl",
    preview: bool = False,
    unknown_outputs: bool = False,
    outputs_for: OutputsFor | None = None,
    raise_errors: bool = True,
) -> Plan:
    """Run ``program`` under mocks with ``config`` (full key -> string) and return the Plan.

    ``outputs_for(registration)`` may return the outputs of a resource (e.g. a failed JobSet's
    status) or raise (the registration fails, as a failed create does). Each call runs in a fresh
    context, so repeated runs in one process do not share state. Exceptions raised by the program
    propagate, or with ``raise_errors=False`` are returned in ``Plan.error`` together with what was
    registered before the failure.
    """
    return contextvars.Context().run(
        _run_isolated,
        program,
        stack,
        config,
        frozenset(secret_keys),
        project,
        preview,
        unknown_outputs,
        outputs_for,
        raise_errors,
    )


def _quiet_program_errors(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """A program error is reported once (raised or in ``Plan.error``), not again for every pending Output
    or registration that failed with it ("Future exception was never retrieved")."""
    if isinstance(context.get("exception"), pulumi.RunError) or "never retrieved" in str(context.get("message")):
        return
    loop.default_exception_handler(context)


class _Capture(logging.Handler):
    """Keeps what the program logs through ``pulumi.log`` (the mock engine's logger), info and above: the SDK's own
    debug lines (one per registration, no program's) are dropped before a record is made."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record.levelname, record.getMessage()))


def _stack_outputs(into: dict[str, Any]) -> pulumi.Output[Any]:
    """An Output that resolves once every stack output is known, filling ``into`` (secrets hidden)."""
    root = pulumi.runtime.get_root_resource()
    parts: list[pulumi.Output[None]] = []
    for name, value in sorted((getattr(root, "outputs", None) or {}).items()):
        output = pulumi.Output.from_input(value)
        into[name] = None  # unknown (a preview) stays None

        async def resolve(resolved: Any, name: str = name, output: pulumi.Output[Any] = output) -> None:
            into[name] = SECRET if await output.is_secret() else plain(resolved, True)

        parts.append(output.apply(resolve))
    return pulumi.Output.all(*parts)


def _run_isolated(
    program: Callable[[], Any],
    stack: str,
    config: dict[str, str],
    secret_keys: frozenset[str],
    project: str,
    preview: bool,
    unknown_outputs: bool,
    outputs_for: OutputsFor | None,
    raise_errors: bool,
) -> Plan:
    recorder = _Recorder(_Mocks(outputs_for, unknown_outputs))
    capture = _Capture()
    logger = logging.getLogger(f"tpu-rl.plan.{id(capture)}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(capture)
    pulumi.runtime.set_mocks(
        recorder.mocks, project=project, stack=stack, preview=preview, logger=logger, monitor=recorder
    )
    pulumi.runtime.set_all_config(dict(config), sorted(secret_keys))
    outputs: dict[str, Any] = {}

    def body() -> pulumi.Output[Any]:
        asyncio.get_event_loop().set_exception_handler(_quiet_program_errors)
        program()
        return _stack_outputs(outputs)

    error: BaseException | None = None
    try:
        pulumi.runtime.test(body)()
    except Exception as err:  # noqa: BLE001 (returned to the caller when asked)
        if raise_errors:
            raise
        error = err

    resources = []
    raw_inputs: dict[str, dict[str, Any]] = {}
    for registration in recorder.mocks.registrations:
        options = {**_options(registration.request), "replacementTrigger": registration.trigger}
        resources.append(
            {
                "type": registration.type,
                "name": registration.name,
                "inputs": plain(registration.inputs, True),
                "options": options,
            }
        )
        raw_inputs[registration.name] = plain(registration.inputs, False)
    resources.sort(key=lambda r: (r["type"], r["name"]))
    return Plan(
        stack=stack,
        resources=resources,
        outputs=outputs,
        raw_inputs=raw_inputs,
        error=error,
        logs=capture.records,
        urns=dict(recorder.urns),
        wire=dict(recorder.wire),
    )
