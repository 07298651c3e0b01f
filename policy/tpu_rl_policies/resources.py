"""The resources a policy judges (type tokens, plain ``Resource``), the analyzer that keeps whether the engine runs a
preview (``Analyzer``, ``DEPLOYMENT``), and how each check runs: judged (``_judged``) and guarded, so a hostile shape
is a finding and never a traceback (``_guarded_resource``, ``_guarded_stack``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    StackValidationArgs,
)
from pulumi_policy.policy import _PolicyAnalyzerServicer
from pulumi_policy.proxy import UnknownValueError

from core.config.schema import FIELDS
from core.tpu import CATALOGUE, TpuVersionName

from .properties import _SCOPE, _UNKNOWN_STRING, _UNSEEN, Unseen, plain, unseen

NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
BUCKET = "gcp:storage/bucket:Bucket"

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
JOB = "kubernetes:batch/v1:Job"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
SECRET = "kubernetes:core/v1:Secret"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
LOCAL_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"
CLUSTER_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
RESOURCE_FLAVOR = "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"
NAMESPACE = "kubernetes:core/v1:Namespace"
PERSISTENT_VOLUME = "kubernetes:core/v1:PersistentVolume"
CLAIM = "kubernetes:core/v1:PersistentVolumeClaim"
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
REFERENCED = frozenset(
    (
        CONFIG_MAP,
        SECRET,
        LOCAL_QUEUE,
        CLUSTER_QUEUE,
        RESOURCE_FLAVOR,
        NAMESPACE,
        PERSISTENT_VOLUME,
        CLAIM,
        STORAGE_CLASS,
    )
)
"""Objects a stack policy reads to judge another (a container's ConfigMaps and Secrets; a step's queues, flavors
and namespace; the claims, volumes and classes a pod's volume binds): a finding on that other object may rest on their
values."""


class Report(Protocol):
    """The callback the SDK passes a validation: ``report(message, urn=None)`` (the urn is optional, and
    ignored for a resource validation)."""

    def __call__(self, message: str, urn: str | None = None) -> None: ...


@dataclass(frozen=True)
class Resource:
    """A stack resource with plain props (``PolicyResource`` as the stack validations read it)."""

    resource_type: str
    props: dict[str, Any]
    urn: str
    name: str
    protect: bool = False


def _resources(resources: Sequence[Any]) -> list[Resource]:
    """The stack's resources (pulumi-policy's ``PolicyResource``: its type, props, URN, name and options) as plain
    ``Resource`` values."""
    out = []
    for r in resources:
        type_, urn, name = r.resource_type, r.urn, r.name
        props = plain(r.props, path=f"{type_.rpartition(':')[2]} {name}: ", owner=(urn, type_))
        out.append(Resource(type_, props if isinstance(props, dict) else {}, urn, name, bool(r.opts.protect)))
    return out


@dataclass
class Deployment:
    """What the engine says of the deployment the pack analyses, in ``ConfigureStack`` (pulumi/pulumi
    ``sdk/go/common/resource/plugin/analyzer_plugin.go`` ``NewPolicyAnalyzer``: ``Stack``, ``DryRun``, ``Config``, the
    stack's configuration as key -> text, an object's as its JSON, and ``ConfigSecretKeys``): ``dry_run`` (a preview;
    ``None`` until the engine says), the stack's configuration without the keys the engine marks secret, and those
    keys' values apart (``secret-holders`` finds them by content; no message names one)."""

    dry_run: bool | None = None
    config: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)

    def setting(self, key: str, path: str = "") -> Any:
        """A configuration value (``gcp:project``), or a field of an object value (``tpu-rl:model``, ``hubCache``);
        None when the engine sent none."""
        text = self.config.get(key)
        if text is None or not path:
            return text
        try:
            value = json.loads(text)
        except ValueError:
            return None
        return value.get(path) if isinstance(value, dict) else None

    def namespace(self) -> str:
        """The namespace the stack's steps run in: ``tpu-rl:namespace`` as the engine sends it, or its default."""
        configured = self.setting("tpu-rl:namespace")
        return configured if isinstance(configured, str) and configured else NAMESPACE_DEFAULT


NAMESPACE_DEFAULT = next(f.default for f in FIELDS if f.key == "tpu-rl:namespace")
DEPLOYMENT = Deployment()


class Analyzer(_PolicyAnalyzerServicer):
    """pulumi-policy's analyzer, which also keeps whether the engine runs a preview (pulumi-policy 1.21 reads only the
    stack's tags from ``ConfigureStack``; the engine has sent ``dry_run`` there since pulumi 3.19x, #20565).
    ``policy/__main__.py`` has ``PolicyPack`` build this one."""

    def ConfigureStack(self, request: Any, context: Any) -> Any:  # noqa: N802 (the gRPC method's name)
        DEPLOYMENT.dry_run = bool(request.dry_run)
        secret = set(request.config_secret_keys)
        DEPLOYMENT.config = {str(k): str(v) for k, v in request.config.items() if k not in secret}
        DEPLOYMENT.secrets = {str(k): str(v) for k, v in request.config.items() if k in secret and v}
        return super().ConfigureStack(request, context)


PACK_NAME = "tpu-rl-guardrails"
PACK_LEVEL = EnforcementLevel.MANDATORY


def servicer(policies: Sequence[Any]) -> Analyzer:
    """The analyzer ``PolicyPack(PACK_NAME, policies, PACK_LEVEL)`` serves (its version is the SDK's placeholder; the
    CLI reads PulumiPolicy.yaml's)."""
    return Analyzer(PACK_NAME, "0.0.1", list(policies), PACK_LEVEL)


_MAX_SHOWN = 3


def _judged(run: Callable[[Report], None], report: Report) -> None:
    """Run a policy's check, then answer for what it could not see.

    A finding reported before the check read any unknown value of its resource stands. Once it read one (``Unseen``),
    at a preview, where values of resources not created yet are unknown, it cannot judge them: the findings it
    reported afterwards on that resource (which may rest on the value; in a stack validation, a finding on another
    resource rests only on what it read of that resource and of the objects it refers to, ``REFERENCED``; a part
    judged on its own, ``judging``, only on what it read inside it or before it) and
    the unknown values it read become the advisory "can't run policy ... during preview" that pulumi-policy makes of
    ``UnknownValueError``, naming them; at ``pulumi up``, where the engine knows every value it sends, an unknown
    left is a finding at the policy's level, like the others."""
    seen: list[tuple[Unseen, tuple[int, ...]]] = []
    token = _UNSEEN.set(seen)
    held: list[tuple[str, str | None]] = []
    try:

        def rests_on_unseen(urn: str | None) -> bool:
            scope = _SCOPE.get()
            return any(
                where == scope[: len(where)]
                and (v.owner is None or urn is None or v.owner[0] == urn or v.owner[1] in REFERENCED)
                for v, where in seen
            )

        def collect(message: str, urn: str | None = None) -> None:
            if DEPLOYMENT.dry_run is not False and rests_on_unseen(urn):
                held.append((message, urn))
            else:
                report(message, urn)

        run(collect)
    finally:
        _UNSEEN.reset(token)
    if not seen:
        return
    paths = list(dict.fromkeys(v.path for v, _ in seen))
    shown = ", ".join(paths[:_MAX_SHOWN]) + (f" and {len(paths) - _MAX_SHOWN} more" if len(paths) > _MAX_SHOWN else "")
    if DEPLOYMENT.dry_run is False:
        report(f"cannot judge {shown}: not known at `pulumi up`; give it a value the program knows")
        return
    withheld = f"; reading them as unset it would report: {'; '.join(m for m, _ in held)}" if held else ""
    error = UnknownValueError(_UNKNOWN_STRING, [])
    error.message = f"{shown} not known until what they come from exists; judged at `pulumi up`{withheld}"
    raise error


def _guarded_resource(
    check: Callable[[ResourceValidationArgs, dict[str, Any], Report], None],
) -> Callable[[ResourceValidationArgs, ReportViolation], None]:
    """``check`` on the resource's plain props, judged (``_judged``); anything it raises on a hostile shape becomes a
    finding."""

    def validate(args: ResourceValidationArgs, report: Report) -> None:
        def run(say: Report) -> None:
            try:
                props = plain(args.props)
                check(args, props if isinstance(props, dict) else {}, say)
            except Exception as err:  # noqa: BLE001 (a malformed shape is a finding, never a traceback)
                say(f"cannot judge this {args.resource_type}: its shape is malformed ({type(err).__name__}); fix it")

        _judged(run, report)

    # pulumi_policy types the callback `ReportViolation = Callable[[str, Optional[str]], None]`, which makes the urn
    # required (a Callable cannot mark an argument optional), while every callback it passes is
    # `report_violation(message, urn=None)` and its docs call the urn optional. The alias is wrong, not `check`.
    return validate  # type: ignore[return-value]


def _guarded_stack(
    check: Callable[[StackValidationArgs, list[Resource], Report], None],
) -> Callable[[StackValidationArgs, ReportViolation], None]:
    """``check`` on the stack's resources with plain props, judged (``_judged``); a failure on a hostile shape becomes
    a finding."""

    def validate(args: StackValidationArgs, report: Report) -> None:
        def run(say: Report) -> None:
            try:
                check(args, _resources(args.resources), say)
            except Exception as err:  # noqa: BLE001 (a malformed shape is a finding, never a traceback)
                say(f"cannot judge this stack: a resource's shape is malformed ({type(err).__name__}); fix it")

        _judged(run, report)

    return validate  # type: ignore[return-value]


def _machine(machine_type: Any) -> tuple[TpuVersionName, Any] | None:
    if unseen(machine_type) or not isinstance(machine_type, str):
        return None
    for version in CATALOGUE.values():
        machine = version.machine(machine_type)
        if machine is not None:
            return version.name, machine
    return None
