"""Run the real program under Pulumi's mock runtime and capture what `pulumi up` would register.

No CLI, no cloud, no network: the mock monitor records every RegisterResource
request (inputs and options) and returns plausible outputs for the few values
the program reads back (cluster endpoint, service account emails).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from google.protobuf import json_format
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from infra.plan import fast_imports

fast_imports.install()

ROOT = Path(__file__).resolve().parents[2]

SECRET = "[secret]"
_SECRET_SIG_KEY = "4dabf18193072939515e22adb298388d"
_SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
FAKE_CA = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCm9mZmxpbmUtcGxhbgotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg=="


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
    replacement_triggers: dict[str, Any] = field(default_factory=dict, repr=False)
    """Resource name -> its ``replacement_trigger`` option, where one is set."""
    logs: list[tuple[str, str]] = field(default_factory=list, repr=False)
    """(level, message) of what the program logged through ``pulumi.log`` (warnings, infos)."""

    def warnings(self) -> list[str]:
        return [message for level, message in self.logs if level == "WARNING"]

    def to_json(self) -> dict[str, Any]:
        return {"stack": self.stack, "resources": self.resources, "outputs": self.outputs}

    def find(self, type_: str, name: str | None = None) -> list[dict[str, Any]]:
        """Resources of a type token (and name, when given)."""
        return [r for r in self.resources if r["type"] == type_ and (name is None or r["name"] == name)]

    def one(self, type_: str, name: str | None = None) -> dict[str, Any]:
        found = self.find(type_, name)
        if len(found) != 1:
            raise AssertionError(f"expected one {type_} {name or ''}, found {len(found)}")
        return found[0]

    def kubernetes_objects(self) -> list[dict[str, Any]]:
        """Inputs of every Kubernetes object (not providers, not Helm releases), as manifests."""
        return [r["inputs"] for r in self.resources if is_kubernetes_object(r["type"])]


def is_kubernetes_object(type_: str) -> bool:
    """A Kubernetes object (``kubernetes:<group/version>:<Kind>``), not a Helm release or a provider."""
    return type_.startswith("kubernetes:") and not type_.startswith("kubernetes:helm.sh/")


def _unwrap(value: Any, redact: bool) -> Any:
    """Turn engine property values into plain data; secrets become ``[secret]`` when ``redact``."""
    if isinstance(value, dict):
        if value.get(_SECRET_SIG_KEY) == _SECRET_SIG:
            return _redact(_unwrap(value.get("value"), False)) if redact else _unwrap(value.get("value"), False)
        return {k: _unwrap(v, redact) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap(v, redact) for v in value]
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


class _Mocks(pulumi_mocks.Mocks):
    """Echo inputs back, plus the outputs the program reads."""

    def __init__(self, status_for: Callable[[str, dict], dict | None] | None) -> None:
        self.status_for = status_for

    def new_resource(self, args: pulumi_mocks.MockResourceArgs) -> tuple[str, dict]:
        state = dict(args.inputs)
        if args.typ == "gcp:container/cluster:Cluster":
            state["endpoint"] = "127.0.0.1:9"  # loopback discard port: nothing offline may reach a cluster
            state["masterAuth"] = {**state.get("masterAuth", {}), "clusterCaCertificate": FAKE_CA}
        elif args.typ == "gcp:serviceaccount/account:Account":
            email = f"{state['accountId']}@{state.get('project', 'project')}.iam.gserviceaccount.com"
            state.update(email=email, name=f"projects/{state.get('project')}/serviceAccounts/{email}")
        elif args.typ == "gcp:storage/bucket:Bucket":
            state["url"] = f"gs://{state['name']}"
        if self.status_for is not None:
            status = self.status_for(args.typ, state)
            if status is not None:
                state["status"] = status
        return f"{args.name}-id", state

    def call(self, args: pulumi_mocks.MockCallArgs) -> tuple[dict, list]:
        if args.token == "gcp:container/getEngineVersions:getEngineVersions":
            # A plausible answer: the prefix's newest patch on every channel (the plan shows the prefix).
            version = f"{args.args.get('versionPrefix') or '1.35.'}0-gke.0"
            channels = {c: version for c in ("RAPID", "REGULAR", "STABLE", "EXTENDED")}
            return {"latestMasterVersion": version, "releaseChannelLatestVersion": channels}, []
        return {}, []


class _Recorder(pulumi_mocks.MockMonitor):
    """Keeps every RegisterResource request so options and dependencies can be inspected."""

    def __init__(self, mocks: pulumi_mocks.Mocks) -> None:
        super().__init__(mocks)
        self.requests: list[Any] = []

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self.requests.append((response.urn, request))
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
    }


def run_program(
    program: Callable[[], Any],
    stack: str,
    config: dict[str, str],
    secret_keys: set[str] | frozenset[str] = frozenset(),
    *,
    project: str = "tpu-rl",
    preview: bool = False,
    status_for: Callable[[str, dict], dict | None] | None = None,
    raise_errors: bool = True,
) -> Plan:
    """Run ``program`` under mocks with ``config`` (full key -> string) and return the Plan.

    ``status_for(type, inputs)`` may return a ``status`` for a resource (e.g. a failed JobSet).
    Each call runs in a fresh context, so repeated runs in one process do not share state.
    Exceptions raised by the program propagate, or with ``raise_errors=False`` are returned
    in ``Plan.error`` together with what was registered before the failure.
    """
    return contextvars.Context().run(
        _run_isolated, program, stack, config, frozenset(secret_keys), project, preview, status_for, raise_errors
    )


def _quiet_program_errors(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """A program error is reported once (raised or in ``Plan.error``), not again per pending Output."""
    if isinstance(context.get("exception"), pulumi.RunError):
        return
    loop.default_exception_handler(context)


class _Capture(logging.Handler):
    """Keeps what the program logs through ``pulumi.log`` (the mock engine's logger)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record.levelname, record.getMessage()))


def _run_isolated(
    program: Callable[[], Any],
    stack: str,
    config: dict[str, str],
    secret_keys: frozenset[str],
    project: str,
    preview: bool,
    status_for: Callable[[str, dict], dict | None] | None,
    raise_errors: bool,
) -> Plan:
    recorder = _Recorder(_Mocks(status_for))
    capture = _Capture()
    logger = logging.getLogger(f"tpu-rl.plan.{id(capture)}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(capture)
    # Outputs still pending from an earlier run (e.g. one that failed) live in a process-wide set.
    pulumi.runtime.settings.SETTINGS.outputs.clear()
    asyncio.get_event_loop().set_exception_handler(_quiet_program_errors)
    pulumi.runtime.set_mocks(
        recorder.mocks, project=project, stack=stack, preview=preview, logger=logger, monitor=recorder
    )
    pulumi.runtime.set_all_config(dict(config), sorted(secret_keys))
    outputs: dict[str, Any] = {}

    async def collect() -> None:
        root = pulumi.runtime.settings.get_root_resource()
        for name, value in sorted(getattr(root, "outputs", {}).items()):
            output = pulumi.Output.from_input(value)
            resolved = await output.future()
            outputs[name] = SECRET if await output.is_secret() else _unwrap(resolved, True)

    async def body() -> None:
        program()

    error: BaseException | None = None
    try:
        _sync_await(run_pulumi_func(body))
        _sync_await(run_pulumi_func(collect))
    except Exception as err:  # noqa: BLE001 (returned to the caller when asked)
        if raise_errors:
            raise
        error = err

    resources = []
    raw_inputs: dict[str, dict[str, Any]] = {}
    triggers: dict[str, Any] = {}
    for _urn, request in recorder.requests:
        if request.HasField("replacement_trigger"):
            triggers[request.name] = _unwrap(json_format.MessageToDict(request.replacement_trigger), False)
        inputs = pulumi.runtime.rpc.deserialize_properties(request.object, keep_unknowns=True)
        name = request.name
        resources.append(
            {"type": request.type, "name": name, "inputs": _unwrap(inputs, True), "options": _options(request)}
        )
        raw_inputs[name] = _unwrap(inputs, False)
    resources.sort(key=lambda r: (r["type"], r["name"]))
    return Plan(
        stack=stack,
        resources=resources,
        outputs=outputs,
        raw_inputs=raw_inputs,
        error=error,
        replacement_triggers=triggers,
        logs=capture.records,
    )
