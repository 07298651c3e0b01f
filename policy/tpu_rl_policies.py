"""tpu-rl guardrails: TPU- and ML-aware CrossGuard policies (importable; ``__main__.py`` builds the pack).

Every policy has a name, a one-line description, a severity and a remediation in its
messages. Enforcement levels come from the policy config files (``config/<stack>.json``).

The policies judge the pod wherever it is: ``pods`` finds every pod spec of a resource of any kind by the
API paths of that kind (Pod, PodTemplate, Deployment, DaemonSet, StatefulSet, ReplicaSet,
ReplicationController, Job, CronJob, JobSet, their ``List`` forms, and any other object by the shape of a pod
spec), and every container list of it (``containers``, ``initContainers``, ``ephemeralContainers``). A Helm
release renders objects the pack cannot see: only the charts tpu-rl installs are allowed
(``reviewed-helm-charts``). Environment variables from the stack's own ConfigMaps and Secrets are resolved as
the kubelet resolves them before a policy reads them (``container_env``), and so are the files a container runs
from a ConfigMap volume (``Mounts``: tpu-rl's steps run ``bash /tpu-rl/run.sh`` from their own ConfigMap). A
hostile or malformed shape is a finding or ignored, never a traceback: each policy reads plain copies of the props
(an unknown preview value is ``UNKNOWN``) and a failure inside one is reported as a finding (``_guarded``).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import ipaddress
import itertools
import re
import shlex
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

import yaml
from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
    proxy,
)
from pulumi_policy.policy import _PolicyAnalyzerServicer
from pulumi_policy.proxy import UnknownValueError

# The pack lives beside the program and shares its TPU catalogue, cost model and token shapes (plain modules).
from core.config.schema import IMAGE_REGISTRIES, JOBSET_VERSIONS, KUEUE_VERSIONS
from core.estimate import TrainingRun, estimate_run
from core.models import model_for_maxtext
from core.names import COMPONENT_LABEL, HF_WRITE_SECRET, PUBLISH, PUBLISH_ENV
from core.redact import HF_TOKEN
from core.requests import pod_requests, quantity
from core.tpu import CATALOGUE, Capacity, SliceShape, TpuVersionName, resolve_slice

NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
BUCKET = "gcp:storage/bucket:Bucket"
BUCKET_IAM = ("gcp:storage/bucketIAMMember:BucketIAMMember", "gcp:storage/bucketIAMBinding:BucketIAMBinding")
OBJECT_ROLES = ("roles/storage.objectUser", "roles/storage.objectViewer", "roles/storage.objectCreator")
"""Object roles a bucket grant must bound to prefixes (``infra.gcp.access``)."""
WHOLE_BUCKET_ROLES = ("roles/storage.objectAdmin", "roles/storage.admin", "roles/storage.legacyBucketOwner")
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
JOB = "kubernetes:batch/v1:Job"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
SECRET = "kubernetes:core/v1:Secret"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
LOCAL_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"
CLUSTER_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
RESOURCE_FLAVOR = "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"
NAMESPACE = "kubernetes:core/v1:Namespace"
REFERENCED = frozenset((CONFIG_MAP, SECRET, LOCAL_QUEUE, CLUSTER_QUEUE, RESOURCE_FLAVOR, NAMESPACE))
"""Objects a stack policy reads to judge another (a container's ConfigMaps and Secrets; a step's queues, flavors
and namespace): a finding on that other object may rest on their values."""
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
TPU_RESOURCE = "google.com/tpu"
PROJECT_IAM = (
    "gcp:projects/iAMMember:IAMMember",
    "gcp:projects/iAMBinding:IAMBinding",
)

KINDS: dict[re.Pattern[str], str] = {
    HF_TOKEN: "a Hugging Face token",
    re.compile(r"(?i)\bhf_access_token=(?!\s*$)\S+"): "hf_access_token=...",
    re.compile(r"\b[A-Z][A-Z0-9_]*_(TOKEN|KEY|SECRET|PASSWORD)=\S+"): "a *_TOKEN/KEY/SECRET/PASSWORD= assignment",
    re.compile(r"(?i)--(hf-)?token[= ]\S+"): "a --token flag",
}
"""What each secret pattern finds, as a policy message names it (never the text it matched)."""
TOKEN_PATTERNS = tuple(KINDS)
SECRET_ENV_NAME = re.compile(r"(?i)(TOKEN|SECRET|PASSWORD|API_?KEY|ACCESS_KEY)")


class Report(Protocol):
    """The callback the SDK passes a validation: ``report(message, urn=None)`` (the urn is optional, and
    ignored for a resource validation)."""

    def __call__(self, message: str, urn: str | None = None) -> None: ...


# ---------------------------------------------------------------------------------------------
# Plain props: what every policy reads


class _Unknown:
    """A value this policy cannot see: what a container gets only at run time (a ``fieldRef``), an object the stack
    does not declare (``UNKNOWN``), or a value the engine does not know yet (``Unseen``)."""

    def __repr__(self) -> str:
        return "(not known during preview)"

    __str__ = __repr__


UNKNOWN: Any = _Unknown()


class Unseen(_Unknown):
    """A value the engine does not know yet, at its property path: at a preview, an output of a resource not created
    yet (the engine sends a sentinel string; ``rpc.go`` ``marshalUnknownProperty``).

    Reading it to decide anything (its truth, an equality, a membership, its text, its items) notes it, so a policy
    never passes it as an empty or harmless value: a policy that noted one says what it could not see (``_judged``:
    advisory at a preview, a finding at ``pulumi up``, where the engine knows every value). It is neither equal nor
    unequal to anything (``==`` and ``!=`` are both false): a check either way is noted, and decides nothing."""

    def __init__(self, path: str, owner: tuple[str, str] | None = None) -> None:
        self.path = path
        self.owner = owner
        """(URN, type) of the resource it is a value of, in a stack validation (None: the resource judged)."""

    def __bool__(self) -> bool:
        _note(self)
        return False

    def __eq__(self, other: object) -> bool:
        _note(self)
        return False

    def __ne__(self, other: object) -> bool:
        _note(self)
        return False

    def __hash__(self) -> int:  # a lookup in a set or a mapping: a membership decided on it
        _note(self)
        return id(self)

    def __str__(self) -> str:
        _note(self)
        return "(not known during preview)"

    __repr__ = __str__

    def __iter__(self) -> Iterator[Any]:
        _note(self)
        return iter(())

    def __len__(self) -> int:
        _note(self)
        return 0

    def __contains__(self, item: object) -> bool:
        _note(self)
        return False


_UNSEEN: ContextVar[list[tuple[Unseen, tuple[int, ...]]] | None] = ContextVar("tpu_rl_unseen", default=None)
"""The unknown values the running validation read, each with the scope it was read in (``_judged`` sets it up)."""
_SCOPE: ContextVar[tuple[int, ...]] = ContextVar("tpu_rl_scope", default=())
_SCOPES = itertools.count(1)


def _note(value: Unseen) -> None:
    seen = _UNSEEN.get()
    if seen is not None:
        seen.append((value, _SCOPE.get()))


@contextlib.contextmanager
def judging() -> Iterator[None]:
    """A part of a check judged on its own (one container, one object's metadata): a finding reported inside it
    rests only on the unknown values read inside it or around it before, not on those of a part judged before it."""
    token = _SCOPE.set((*_SCOPE.get(), next(_SCOPES)))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def unseen(value: Any) -> bool:
    """Whether ``value`` is one the engine does not know yet (noted as read)."""
    if isinstance(value, Unseen):
        _note(value)
        return True
    return False


_UNKNOWN_SENTINELS = frozenset(
    (
        proxy.UNKNOWN_BOOLEAN_VALUE,
        proxy.UNKNOWN_NUMBER_VALUE,
        proxy.UNKNOWN_STRING_VALUE,
        proxy.UNKNOWN_ARRAY_VALUE,
        proxy.UNKNOWN_ASSET_VALUE,
        proxy.UNKNOWN_ARCHIVE_VALUE,
        proxy.UNKNOWN_OBJECT_VALUE,
    )
)
"""``pulumi_policy.proxy``'s markers of unknown values (a raw, unproxied props dict carries them as strings)."""
_UNKNOWN_STRING = proxy.UNKNOWN_STRING_VALUE
_MAX_DEPTH = 64


def _key_path(path: str, key: Any) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}"


def plain(value: Any, depth: int = 0, path: str = "", owner: tuple[str, str] | None = None) -> Any:
    """A plain copy of analyzer props: read-only proxies become ``dict`` and ``list``; every value the preview does not
    know becomes an ``Unseen`` at its path (the proxies raise on reading one, which would stop the whole policy with an
    advisory "can't run during preview": a mandatory policy silently off for the values it had not read yet); a
    number that is whole becomes an ``int`` (the engine sends every number as a double and pulumi-policy reads it
    with ``json_format.MessageToDict``: ``parallelism: 1`` arrives as ``1.0``, still a count)."""
    if depth > _MAX_DEPTH:
        return Unseen(f"{path} (nested more than {_MAX_DEPTH} levels)", owner)
    if isinstance(value, str):
        return Unseen(path or ".", owner) if value in _UNKNOWN_SENTINELS else value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for key in list(value):
            try:
                item = value[key]
            except UnknownValueError:
                item = _UNKNOWN_STRING
            out[key] = plain(item, depth + 1, _key_path(path, key), owner)
        return out
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        items: list[Any] = []
        for index in range(len(value)):
            try:
                item = value[index]
            except UnknownValueError:
                item = _UNKNOWN_STRING
            items.append(plain(item, depth + 1, _key_path(path, index), owner))
        return items
    return value


def _config(args: ResourceValidationArgs | StackValidationArgs) -> dict[str, Any]:
    """The policy's config as plain values (the engine sends it as a Struct: ``256`` arrives as ``256.0``)."""
    config = plain(args.get_config())
    return config if isinstance(config, dict) else {}


def _m(value: Any) -> dict[Any, Any]:
    """``value`` if it is a mapping, else an empty one (a list where a mapping belongs reads as nothing; an unknown one
    is noted as read)."""
    unseen(value)
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    unseen(value)
    return value if isinstance(value, list) else []


def _yaml(value: Any) -> str:
    """A manifest value as the manifest spells it (``true``, not Python's ``True``)."""
    return "true" if value is True else "false" if value is False else str(value)


def _on(value: Any) -> bool:
    """A boolean field that is set to anything but false (``true`` or malformed); one not known yet is noted, not
    judged (``_judged``)."""
    return not unseen(value) and value is not None and value is not False


@dataclass(frozen=True)
class Resource:
    """A stack resource with plain props (``PolicyResource`` as the stack validations read it)."""

    resource_type: str
    props: dict[str, Any]
    urn: str
    name: str
    protect: bool = False


def _resources(resources: Sequence[Any]) -> list[Resource]:
    out = []
    for r in resources:
        name = str(getattr(r, "name", ""))
        type_ = str(r.resource_type)
        urn = str(getattr(r, "urn", ""))
        props = plain(r.props, path=f"{type_.rsplit(':', 1)[-1]} {name}: ", owner=(urn, type_))
        opts = getattr(r, "opts", None)
        out.append(
            Resource(
                type_,
                props if isinstance(props, dict) else {},
                urn,
                name,
                bool(getattr(opts, "protect", False)),
            )
        )
    return out


@dataclass
class Deployment:
    """What the engine says of the deployment the pack analyses: ``dry_run`` (a preview) from
    ``ConfigureStack`` (``analyzer_plugin.go`` ``NewPolicyAnalyzer``; ``None`` until the engine says)."""

    dry_run: bool | None = None


DEPLOYMENT = Deployment()


class Analyzer(_PolicyAnalyzerServicer):
    """pulumi-policy's analyzer, which also keeps whether the engine runs a preview (pulumi-policy 1.21 reads only the
    stack's tags from ``ConfigureStack``; the engine has sent ``dry_run`` there since pulumi 3.19x, #20565).
    ``policy/__main__.py`` has ``PolicyPack`` build this one."""

    def ConfigureStack(self, request: Any, context: Any) -> Any:  # noqa: N802 (the gRPC method's name)
        DEPLOYMENT.dry_run = bool(request.dry_run)
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


# ---------------------------------------------------------------------------------------------
# Pods, wherever they are

TEMPLATED_KINDS = frozenset(("Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "ReplicationController", "Job"))
"""Kinds whose pods are ``spec.template`` (apps/v1, core/v1 ReplicationController, batch/v1 Job)."""
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
NOT_WORKLOADS = frozenset(("Release", "Chart", "ConfigMap", "Secret", "CustomResourceDefinition"))
"""Kinds never searched for pod shapes (a chart's values or a ConfigMap's data are not pods)."""


def kind_of(resource_type: str) -> str | None:
    """The Kubernetes kind of a ``kubernetes:<group>/<version>:<Kind>`` type token (a ``...Patch`` patches
    its kind), or None for a resource that is not a Kubernetes object."""
    if not resource_type.startswith("kubernetes:"):
        return None
    kind = resource_type.rsplit(":", 1)[-1]
    return kind.removesuffix("Patch") or kind


@dataclass(frozen=True)
class Pod:
    """A pod spec found in a resource, with the metadata its pods get."""

    where: str
    """Where it is: the replicated Job of a JobSet, or the API path of the template."""
    spec: dict[str, Any]
    metadata: dict[str, Any]
    coordinator: bool = False
    """The JobSet's ``spec.coordinator.replicatedJob`` (tpu-rl's Pathways head)."""


def pods(resource_type: str, props: Mapping[str, Any]) -> list[Pod]:
    """Every pod spec of a resource of any kind (plain props): Pod ``spec``, PodTemplate ``template``, the
    apps/v1 kinds, ReplicationController and Job ``spec.template``, CronJob ``spec.jobTemplate.spec.template``,
    JobSet ``spec.replicatedJobs[].template.spec.template``, a ``...List``'s ``items``, and in any other object
    every mapping shaped like a pod spec (a ``containers`` list: LeaderWorkerSet, RayCluster, ...)."""
    kind = kind_of(resource_type)
    if kind is None or kind in NOT_WORKLOADS:
        return []
    return _pods_of(kind, _m(props), "")


def _template(template: Any, where: str) -> list[Pod]:
    t = _m(template)
    spec = t.get("spec")
    return [Pod(where, spec, _m(t.get("metadata")))] if isinstance(spec, dict) else []


def _pods_of(kind: str, obj: dict[str, Any], prefix: str) -> list[Pod]:
    spec = _m(obj.get("spec"))
    if kind == "Pod":
        return [Pod(f"{prefix}spec", spec, _m(obj.get("metadata")))] if isinstance(obj.get("spec"), dict) else []
    if kind == "PodTemplate":
        return _template(obj.get("template"), f"{prefix}template")
    if kind in TEMPLATED_KINDS:
        return _template(spec.get("template"), f"{prefix}spec.template")
    if kind == "CronJob":
        job = _m(_m(spec.get("jobTemplate")).get("spec"))
        return _template(job.get("template"), f"{prefix}spec.jobTemplate.spec.template")
    if kind == "JobSet":
        coordinator = _m(spec.get("coordinator")).get("replicatedJob")
        found = []
        for index, job in enumerate(_l(spec.get("replicatedJobs"))):
            name = _m(job).get("name")
            where = f"{prefix}{name}" if isinstance(name, str) else f"{prefix}spec.replicatedJobs[{index}]"
            for pod in _template(_m(_m(_m(job).get("template")).get("spec")).get("template"), where):
                found.append(Pod(pod.where, pod.spec, pod.metadata, coordinator is not None and name == coordinator))
        return found
    if kind.endswith("List") and isinstance(obj.get("items"), list):
        found = []
        for index, item in enumerate(_l(obj.get("items"))):
            item_kind = _m(item).get("kind")
            found += _pods_of(
                item_kind if isinstance(item_kind, str) else kind[: -len("List")], _m(item), f"{prefix}items[{index}]."
            )
        return found
    return list(_pod_shapes(obj, prefix.rstrip(".") or "", None))


def _pod_shapes(obj: Any, path: str, parent: dict[str, Any] | None) -> Iterator[Pod]:
    """Mappings shaped like a pod spec (a ``containers`` list) anywhere in an object of another kind."""
    if isinstance(obj, dict):
        if isinstance(obj.get("containers"), list):
            yield Pod(path or "(root)", obj, _m((parent or {}).get("metadata")))
            return
        for key, value in obj.items():
            yield from _pod_shapes(value, f"{path}.{key}" if path else str(key), obj)
    elif isinstance(obj, list):
        for index, value in enumerate(obj):
            yield from _pod_shapes(value, f"{path}[{index}]", None)


def pod_containers(spec: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every container of a pod spec: containers, init containers (native sidecars among them) and ephemeral
    containers (``kubectl debug`` adds these to a running pod; a manifest may carry them too)."""
    for key in CONTAINER_LISTS:
        for container in _l(spec.get(key)):
            if not unseen(container) and isinstance(container, dict):
                yield container


def containers(obj: Any) -> Iterator[Mapping[str, Any]]:
    """Every container, init container and ephemeral container anywhere in a manifest (proxies or plain)."""
    if isinstance(obj, Mapping):
        for key in CONTAINER_LISTS:
            entries = obj.get(key)
            if isinstance(entries, Sequence) and not isinstance(entries, str):
                for container in entries:
                    if isinstance(container, Mapping):
                        yield container
        for value in obj.values():
            yield from containers(value)
    elif isinstance(obj, Sequence) and not isinstance(obj, str):
        for value in obj:
            yield from containers(value)


def command_text(spec: Any) -> str:
    """The words of every container's command and args in `spec`, joined by spaces: what the revision policy
    searches, whether it is argv or a shell script."""
    words = []
    for c in containers(spec):
        for key in ("command", "args"):
            entries = c.get(key)
            if isinstance(entries, Sequence) and not isinstance(entries, str):
                words += [str(word) for word in entries]
    return " ".join(words)


def _asks_tpu(spec: Mapping[str, Any], *, malformed: bool) -> bool:
    """Whether a pod spec has a container that asks for TPU chips (a request or a limit above zero); a value
    that is not a quantity counts as ``malformed`` says (True where asking costs money, False where it would
    exempt the pod from a rule)."""
    for container in pod_containers(spec):
        resources = _m(container.get("resources"))
        for part in ("limits", "requests"):
            amounts = _m(resources.get(part))
            if TPU_RESOURCE not in amounts or unseen(amounts[TPU_RESOURCE]):
                continue
            try:
                if quantity(amounts[TPU_RESOURCE]) > 0:
                    return True
            except ValueError:
                if malformed:
                    return True
    return False


def requests_tpu(obj: Any) -> bool:
    """Whether a manifest part (a spec, a pod spec; plain) has a container that asks for TPU chips."""
    return any(_asks_tpu({"containers": [dict(c)]}, malformed=True) for c in containers(plain(obj)))


def _name(resource: Resource) -> str:
    name = _m(resource.props.get("metadata")).get("name")
    return name if isinstance(name, str) else resource.name


def _namespace(props: Mapping[str, Any]) -> str | None:
    namespace = _m(props.get("metadata")).get("namespace")
    return namespace if isinstance(namespace, str) else None


# ---------------------------------------------------------------------------------------------
# Environment variables, as the kubelet makes them (pkg/kubelet/kubelet_pods.go makeEnvironmentVariables)


@dataclass(frozen=True)
class EnvValue:
    """One environment variable of a container: its value (``UNKNOWN`` where the policy cannot see it), where it
    comes from (``ConfigMap x``, ``Secret y``, ``literal``, ``fieldRef``...), and of which kind."""

    value: Any
    source: str
    kind: str
    """``literal``, ``ConfigMap``, ``Secret`` or ``runtime`` (fieldRef, resourceFieldRef, fileKeyRef)."""
    from_env_from: bool = False


@dataclass
class ContainerEnv:
    values: dict[str, EnvValue] = field(default_factory=dict)
    unseen: list[str] = field(default_factory=list)
    """``envFrom`` sources this stack does not declare: any variable may come from them."""


class StackObjects:
    """The stack's ConfigMaps and Secrets by kind, name and namespace, with their data as text."""

    def __init__(self, resources: Sequence[Resource]) -> None:
        self._objects: dict[tuple[str, str], list[tuple[str | None, Any]]] = {}
        for r in resources:
            if r.resource_type not in (CONFIG_MAP, SECRET):
                continue
            name = _m(r.props.get("metadata")).get("name")
            if not isinstance(name, str):
                continue
            kind = "ConfigMap" if r.resource_type == CONFIG_MAP else "Secret"
            data = _config_map_data(r.props) if kind == "ConfigMap" else _secret_data(r.props)
            self._objects.setdefault((kind, name), []).append((_namespace(r.props), data))

    def find(self, kind: str, name: Any, namespace: str | None) -> Any:
        """The data of the one object of this kind and name in the namespace (an ``Unseen`` where which keys it
        holds is not known yet), or None (not in the stack, or more than one that could be it)."""
        if not isinstance(name, str):
            return None
        candidates = [
            data
            for ns, data in self._objects.get((kind, name), [])
            if ns is None or namespace is None or ns == namespace
        ]
        return candidates[0] if len(candidates) == 1 else None


def _config_map_data(props: Mapping[str, Any]) -> Any:
    """What a ConfigMap gives the environment: ``data`` (``binaryData`` never reaches env); an ``Unseen`` (noted
    when a container reads it) where the data is not known yet, and each value not known yet stays one."""
    data = props.get("data")
    if isinstance(data, Unseen):
        return data
    return {str(k): v if isinstance(v, (str, Unseen)) else UNKNOWN for k, v in _m(data).items()}


def _secret_data(props: Mapping[str, Any]) -> Any:
    """A Secret's values as text: ``data`` decoded from base64, ``stringData`` over it (the API server merges
    it in on write); an ``Unseen`` where either is not known yet (any key may come from it)."""
    for part in ("data", "stringData"):
        if isinstance(props.get(part), Unseen):
            return props[part]
    out: dict[str, Any] = {}
    for key, value in _m(props.get("data")).items():
        if isinstance(value, Unseen):
            out[str(key)] = value
            continue
        try:
            out[str(key)] = base64.b64decode(value, validate=True).decode("utf-8", "replace")
        except (binascii.Error, TypeError, ValueError):
            out[str(key)] = UNKNOWN
    for key, value in _m(props.get("stringData")).items():
        out[str(key)] = value if isinstance(value, (str, Unseen)) else UNKNOWN
    return out


def expand(text: str, env: Mapping[str, EnvValue], *, keep_unknown: bool = False) -> Any:
    """Kubernetes' ``$(VAR)`` expansion (``third_party/forked/golang/expansion``): ``$(NAME)`` becomes the value
    of an already defined variable, ``$$`` is one ``$``, anything else stays as written. A reference to a
    variable the policy cannot see makes the whole value ``UNKNOWN``, or stays ``$(NAME)`` with
    ``keep_unknown`` (a command's words: the run-time value is nothing this policy could read anyway)."""
    out: list[str] = []
    cursor = 0
    while cursor < len(text):
        char = text[cursor]
        if char != "$" or cursor + 1 >= len(text):
            out.append(char)
            cursor += 1
            continue
        following = text[cursor + 1]
        if following == "$":
            out.append("$")
            cursor += 2
        elif following == "(":
            close = text.find(")", cursor + 2)
            if close < 0:
                out.append("$(")
                cursor += 2
                continue
            name = text[cursor + 2 : close]
            known = env.get(name)
            if known is None:
                out.append(f"$({name})")
            elif isinstance(known.value, str):
                out.append(known.value)
            elif unseen(known.value) and not keep_unknown:
                return known.value
            elif keep_unknown:
                out.append(f"$({name})")
            else:
                return UNKNOWN
            cursor = close + 1
        else:
            out.append("$" + following)
            cursor += 2
    return "".join(out)


def container_env(container: Mapping[str, Any], namespace: str | None, objects: StackObjects) -> ContainerEnv:
    """A container's environment: ``envFrom`` sources in order (a later one wins, each with its prefix), then
    ``env`` entries in order (a later one wins; a value expands the ``$(VAR)`` defined before it; a
    ``configMapKeyRef``/``secretKeyRef`` reads the stack's object, a key it lacks leaves the variable unset)."""
    env = ContainerEnv()
    for source in _l(container.get("envFrom")):
        source = _m(source)
        prefix = source.get("prefix") if isinstance(source.get("prefix"), str) else ""
        for kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
            if key not in source:
                continue
            name = _m(source.get(key)).get("name")
            data = objects.find(kind, name, namespace)
            if data is None or unseen(data):
                env.unseen.append(f"{kind} {name}")
                continue
            for var, value in data.items():
                env.values[f"{prefix}{var}"] = EnvValue(value, f"{kind} {name}", kind, from_env_from=True)
    for entry in _l(container.get("env")):
        entry = _m(entry)
        name = entry.get("name")
        if not isinstance(name, str):
            continue
        value_from = entry.get("valueFrom")
        if value_from is None:
            value = entry.get("value", "")
            if isinstance(value, str):
                text = expand(value, env.values)
            else:
                text = value if isinstance(value, _Unknown) else str(value)
            env.values[name] = EnvValue(text, "literal", "literal")
            continue
        value_from = _m(value_from)
        for kind, key in (("ConfigMap", "configMapKeyRef"), ("Secret", "secretKeyRef")):
            if key not in value_from:
                continue
            ref = _m(value_from.get(key))
            data = objects.find(kind, ref.get("name"), namespace)
            source, data_key = f"{kind} {ref.get('name')}", ref.get("key")
            if data is None:
                env.values[name] = EnvValue(UNKNOWN, f"{source}, which this stack does not declare", kind)
            elif isinstance(data, Unseen):
                env.values[name] = EnvValue(data, source, kind)
            elif isinstance(data_key, str) and data_key in data:
                env.values[name] = EnvValue(data[data_key], source, kind)
            # A key the object lacks: an optional reference sets nothing (an earlier value stays), any other
            # keeps the container from starting.
            break
        else:
            env.values[name] = EnvValue(UNKNOWN, "a value the pod gets at run time", "runtime")
    return env


# ---------------------------------------------------------------------------------------------
# Files from ConfigMap volumes, as the kubelet mounts them (pkg/volume/configmap: each key a file named by the key,
# or by its ``items`` path; a ``subPath`` mount shows one file or folder of the volume)


@dataclass(frozen=True)
class MountedFile:
    """A file a container sees at ``path`` from a ConfigMap volume: its text (an ``Unseen`` where the ConfigMap's
    data is not known yet, ``UNKNOWN`` where this policy cannot read it: a ConfigMap the stack does not declare, a
    key it lacks, a value that is not text) and where it comes from."""

    path: str
    text: Any
    source: str


class Mounts:
    """The ConfigMap volumes a container mounts (``configMap`` volumes and the ``configMap`` sources of ``projected``
    ones), to read the files its command names."""

    def __init__(self, spec: Mapping[str, Any], container: Mapping[str, Any], namespace: str | None, objects: Any):
        self._objects = objects
        self._namespace = namespace
        volumes = {v.get("name"): v for v in (_m(v) for v in _l(spec.get("volumes"))) if isinstance(v.get("name"), str)}
        self._mounts: list[tuple[str, str, list[dict[str, Any]]]] = []
        for mount in _l(container.get("volumeMounts")):
            mount = _m(mount)
            where, name = mount.get("mountPath"), mount.get("name")
            if unseen(where) or unseen(name) or not isinstance(where, str) or name not in volumes:
                continue
            volume = volumes[name]
            sources = [_m(volume.get("configMap"))] if "configMap" in volume else []
            sources += [_m(_m(src).get("configMap")) for src in _l(_m(volume.get("projected")).get("sources"))]
            sources = [src for src in sources if src]
            if sources:
                sub = mount.get("subPath")
                self._mounts.append((where.rstrip("/") or "/", sub.strip("/") if isinstance(sub, str) else "", sources))

    def file(self, path: Any) -> MountedFile | None:
        """The file at ``path`` if it is inside a ConfigMap mount (None: it is not; a file of the image or another
        volume)."""
        if not isinstance(path, str) or not path.startswith("/"):
            return None
        for where, sub, sources in self._mounts:
            if path != where and not path.startswith(where.rstrip("/") + "/"):
                continue
            relative = "/".join(part for part in (sub, path[len(where) :].strip("/")) if part)
            for source in sources:
                found = self._in(source, relative)
                if found is not None:
                    return MountedFile(path, *found)
            return MountedFile(path, UNKNOWN, f"a volume of ConfigMap {sources[0].get('name')} without that file")
        return None

    def _in(self, source: Mapping[str, Any], relative: str) -> tuple[Any, str] | None:
        name = source.get("name")
        if unseen(name):
            return name, "a ConfigMap whose name is not known yet"
        data = self._objects.find("ConfigMap", name, self._namespace)
        label = f"ConfigMap {name}"
        if data is None:
            return UNKNOWN, f"{label}, which this stack does not declare"
        if isinstance(data, Unseen):
            return data, label
        items = _l(source.get("items")) if source.get("items") is not None else None
        key: Any = relative
        if items is not None:
            paths = {_m(i).get("path"): _m(i).get("key") for i in items}
            if relative not in paths:
                return None
            key = paths[relative]
        if key not in data:
            return None
        value = data[key]
        return (value if isinstance(value, (str, Unseen)) else UNKNOWN), f"{label} key {key}"

    def run_files(self, words: Sequence[Any]) -> list[MountedFile]:
        """The files of these mounts a command runs: each of its words that is one (``bash /tpu-rl/run.sh``), and
        each path named in the text of those (the programs a script runs)."""
        found: dict[str, MountedFile] = {}
        for word in words:
            mounted = self.file(word)
            if mounted is not None:
                found.setdefault(mounted.path, mounted)
        for mounted in list(found.values()):
            if isinstance(mounted.text, str):
                for named in _PATH_WORD.findall(mounted.text):
                    inner = self.file(named)
                    if inner is not None:
                        found.setdefault(inner.path, inner)
        return list(found.values())


_PATH_WORD = re.compile(r"/[A-Za-z0-9_./-]+")


# ---------------------------------------------------------------------------------------------
# Secrets

SECRETS_FIX = "pass secrets as env valueFrom.secretKeyRef (MaxText reads HF_TOKEN from the environment)"


def _secret_kind(text: Any) -> str | None:
    """What kind of secret material ``text`` holds (a policy message names the kind, never the text)."""
    if unseen(text) or not isinstance(text, str):
        return None
    return next((KINDS[pattern] for pattern in TOKEN_PATTERNS if pattern.search(text)), None)


def _metadata_secrets(metadata: Mapping[str, Any], where: str, report: Callable[[str], None]) -> None:
    """Labels and annotations are readable by anyone who may list the object (and land in logs and events)."""
    for field_name in ("labels", "annotations"):
        for key, value in _m(metadata.get(field_name)).items():
            kind = _secret_kind(value)
            if kind:
                report(f"{where}{field_name[:-1]} {key} contains secret material ({kind}); {SECRETS_FIX}")


def _container_secrets(
    container: Mapping[str, Any], env: ContainerEnv, report: Callable[[str], None], files: Sequence[MountedFile] = ()
) -> None:
    name = container.get("name", "?")
    for field_name in ("command", "args"):
        for word in _l(container.get(field_name)):
            kind = _secret_kind(str(word))
            if kind:
                # What kind, never what: PR comments carry policy messages, so no part of it is shown.
                report(f"container {name}: {field_name} contains secret material ({kind}); {SECRETS_FIX}")
    for entry in _l(container.get("env")):
        entry = _m(entry)
        value = entry.get("value")
        if value is not None and (
            SECRET_ENV_NAME.search(str(entry.get("name") or "")) or _secret_kind(str(value)) is not None
        ):
            report(f"container {name}: env {entry.get('name')} has a literal value; {SECRETS_FIX}")
        if entry.get("name") == "HF_TOKEN" and "secretKeyRef" not in _m(entry.get("valueFrom")):
            report(f"container {name}: HF_TOKEN must come from a secretKeyRef; {SECRETS_FIX}")
    # The scripts and programs it runs from a ConfigMap volume: what its command would carry as arguments.
    for mounted in files:
        kind = _secret_kind(mounted.text)
        if kind:
            report(
                f"container {name}: {mounted.path} ({mounted.source}) contains secret material ({kind}); {SECRETS_FIX}"
            )
    # What the ConfigMaps the container reads give it (a ConfigMap is plain text to anyone who may read it).
    for var, value in env.values.items():
        if value.kind != "ConfigMap":
            continue
        if var == "HF_TOKEN":
            if value.from_env_from:
                report(f"container {name}: HF_TOKEN must come from a secretKeyRef; {SECRETS_FIX}")
        elif SECRET_ENV_NAME.search(var) or _secret_kind(value.value) is not None:
            report(f"container {name}: env {var} comes from {value.source}, which is not a Secret; {SECRETS_FIX}")


def _no_secrets(args: StackValidationArgs, resources: list[Resource], report: Report) -> None:
    objects = StackObjects(resources)
    for r in resources:
        if kind_of(r.resource_type) is None:
            continue

        def say(message: str, urn: str = r.urn) -> None:
            report(message, urn)

        with judging():
            metadata = _m(r.props.get("metadata"))
            _metadata_secrets(metadata, "", say)
        namespace = _namespace(r.props)
        for pod in pods(r.resource_type, r.props):
            if pod.metadata is not metadata:  # a Pod's own metadata is its pod's
                with judging():
                    _metadata_secrets(pod.metadata, f"pod {pod.where}: ", say)
            for container in pod_containers(pod.spec):
                with judging():
                    env = container_env(container, namespace, objects)
                    files = Mounts(pod.spec, container, namespace, objects).run_files(_command_words(container, env))
                    _container_secrets(container, env, say, files)


no_secrets_in_workloads = StackValidationPolicy(
    name="no-secrets-in-workloads",
    description=(
        "No tokens or keys in container args, command or env values, in labels or annotations, in the scripts a "
        "container runs from a ConfigMap volume, or in the ConfigMaps a container reads; HF_TOKEN comes from a Secret."
    ),
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Store the token as a Pulumi secret and reference the Kubernetes Secret with secretKeyRef.",
    validate=_guarded_stack(_no_secrets),
)


# ---------------------------------------------------------------------------------------------
# TPU node pools


def _tpu_pool(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    if args.resource_type != NODE_POOL:
        return
    node = _m(props.get("nodeConfig"))
    found = _machine(node.get("machineType"))
    if found is None:
        return
    version, machine = found
    placement = _m(props.get("placementPolicy"))
    topology = placement.get("tpuTopology") or _m(node.get("labels")).get("cloud.google.com/gke-tpu-topology")
    topology = topology or machine.single_host_topology
    if topology not in machine.topologies:
        report(
            f"{machine.name} cannot form topology {topology}; valid: {', '.join(machine.topologies)}. "
            "Fix tpu-rl:tpu.topology."
        )
        return
    shape = resolve_slice(version, machine.name, topology)
    if shape.multi_host:
        if placement.get("type") != "COMPACT" or placement.get("tpuTopology") != topology:
            report(f"multi-host slice {topology} needs placementPolicy {{type: COMPACT, tpuTopology: {topology}}}")
    elif placement.get("tpuTopology"):
        report("a single-host TPU pool must not set placementPolicy.tpuTopology (GKE rejects it)")
    zones = _l(props.get("nodeLocations"))
    if len(zones) != 1:
        report(f"a TPU slice lives in exactly one zone; nodeLocations has {len(zones)}: set gcp:zone")
    autoscaling = props.get("autoscaling")
    reservation = _m(node.get("reservationAffinity"))
    affinity = reservation.get("consumeReservationType", "UNSPECIFIED")
    preemptible = bool(node.get("spot") or node.get("flexStart"))
    if autoscaling:
        autoscaling = _m(autoscaling)
        top = autoscaling.get("maxNodeCount", autoscaling.get("totalMaxNodeCount"))
        if top != shape.hosts:
            report(f"autoscaling max {top} must be one whole slice ({shape.hosts} hosts for {topology})")
        if autoscaling.get("minNodeCount", 0) not in (0, shape.hosts):
            report(f"autoscaling min must be 0 or {shape.hosts}: a partial slice cannot run")
        if affinity == "SPECIFIC_RESERVATION":
            report("an autoscaled pool must not consume a specific reservation; use capacity reservation (static)")
    else:
        if props.get("nodeCount") != shape.hosts:
            report(f"nodeCount {props.get('nodeCount')} must equal the slice's {shape.hosts} hosts")
        if affinity != "SPECIFIC_RESERVATION" or not reservation.get("values"):
            report("a static TPU pool (capacity reservation) needs a SPECIFIC_RESERVATION affinity with the name")
    if preemptible and affinity not in ("NO_RESERVATION", "UNSPECIFIED"):
        report("spot and flex-start capacity cannot consume a reservation: set reservationAffinity NO_RESERVATION")


tpu_node_pool_shape = ResourceValidationPolicy(
    name="tpu-node-pool-shape",
    description="TPU pools form a valid slice: topology, node count, COMPACT placement, one zone, capacity mode.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Fix tpu-rl:tpu (machineType, topology, capacity, reservation).",
    validate=_guarded_resource(_tpu_pool),
)


# ---------------------------------------------------------------------------------------------
# Cluster


METADATA_MODE = "GKE_METADATA"
"""The node metadata mode of Workload Identity: pods get their Kubernetes service account's Google identity from
the GKE metadata server, never the node's (GKE ``WorkloadMetadataConfig``)."""


def _control_plane(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    if args.resource_type == NODE_POOL:
        mode = _m(_m(props.get("nodeConfig")).get("workloadMetadataConfig")).get("mode")
        if not unseen(mode) and mode != METADATA_MODE:
            report(
                f"node pool metadata mode {mode or '(unset)'}: pods could read the node's own credentials from the "
                f"metadata server; set nodeConfig.workloadMetadataConfig.mode {METADATA_MODE}"
            )
        return
    if args.resource_type != CLUSTER:
        return
    node = props.get("nodeConfig")
    if node is not None and not unseen(node):
        mode = _m(_m(node).get("workloadMetadataConfig")).get("mode")
        if not unseen(mode) and mode not in (None, METADATA_MODE):
            report(f"the cluster's default node metadata mode is {mode}; set it {METADATA_MODE} or leave it unset")
    if _on(props.get("enableLegacyAbac")):
        report("legacy ABAC grants every service account broad access to the API: set enableLegacyAbac false")
    if not _m(props.get("privateClusterConfig")).get("enablePrivateNodes"):
        report("nodes must be private (privateClusterConfig.enablePrivateNodes); egress goes through Cloud NAT")
    if not _m(props.get("workloadIdentityConfig")).get("workloadPool"):
        report("Workload Identity must be enabled (workloadIdentityConfig.workloadPool = PROJECT.svc.id.goog)")
    if not unseen(props.get("enableShieldedNodes")) and props.get("enableShieldedNodes") is False:
        report("shielded nodes must be enabled (enableShieldedNodes: true)")


gke_control_plane = ResourceValidationPolicy(
    name="gke-private-cluster",
    description=(
        "GKE clusters have private nodes, Workload Identity and shielded nodes, no legacy ABAC; node pools use the GKE "
        "metadata server."
    ),
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep the cluster settings of infra/gcp/gke_spec.py.",
    validate=_guarded_resource(_control_plane),
)


# Ranges that are not public IPv4 (RFC 6890 special-purpose blocks): authorizing them opens nothing to
# the internet, so they do not count towards the public share.
NON_PUBLIC = tuple(
    ipaddress.IPv4Network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/3",
    )
)
PUBLIC_ADDRESSES = 2**32 - sum(n.num_addresses for n in ipaddress.collapse_addresses(NON_PUBLIC))


def _secrets_encryption(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    if args.resource_type != CLUSTER or not _config(args).get("required", False):
        return
    encryption = _m(props.get("databaseEncryption"))
    if encryption.get("state") != "ENCRYPTED" or not encryption.get("keyName"):
        report(
            "Secrets, the Hugging Face token among them, are stored without application-layer encryption: set "
            "tpu-rl:gke.secretsEncryptionKey (create, or a Cloud KMS key in gcp:region)"
        )


secrets_encryption = ResourceValidationPolicy(
    name="secrets-encryption",
    description="Where the stack's policy config requires it, GKE encrypts Secrets with a Cloud KMS key.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="pulumi config set --path tpu-rl:gke.secretsEncryptionKey create",
    config_schema=PolicyConfigSchema(properties={"required": {"type": "boolean", "default": False}}),
    validate=_guarded_resource(_secrets_encryption),
)


def parse_cidr(text: Any) -> ipaddress.IPv4Network | None:
    """Any CIDR spelling GKE might take (``a.b.c.d/n``, ``/00``, netmask form, host bits set), normalised."""
    value = str(text).strip()
    address, sep, prefix = value.partition("/")
    if not sep:
        prefix = "32"
    if prefix.isascii() and prefix.isdigit():
        prefix = str(int(prefix))
    try:
        network = ipaddress.ip_network(f"{address}/{prefix}", strict=False)
    except ValueError:
        return None
    return network if isinstance(network, ipaddress.IPv4Network) else None


def public_share(networks: list[ipaddress.IPv4Network]) -> float:
    """The share of the public IPv4 space the networks cover together (overlaps counted once)."""
    covered = 0
    for network in ipaddress.collapse_addresses(networks):
        # Two CIDR blocks are either disjoint or one contains the other.
        inside = [p if p.subnet_of(network) else network for p in NON_PUBLIC if p.overlaps(network)]
        private = sum(n.num_addresses for n in ipaddress.collapse_addresses(inside))
        covered += network.num_addresses - private
    return covered / PUBLIC_ADDRESSES


def _open_control_plane(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    if args.resource_type != CLUSTER:
        return
    config = _m(props.get("masterAuthorizedNetworksConfig"))
    policy_config = _config(args)
    widest = int(policy_config.get("minPrefixLength", 16))
    max_share = float(policy_config.get("maxPublicShare", 0.0001))
    fix = "set tpu-rl:authorizedNetworks to the networks you deploy from"
    networks = []
    for block in _l(config.get("cidrBlocks")):
        text = _m(block).get("cidrBlock")
        network = parse_cidr(text)
        if network is None:
            report(f"authorized network {text!r} is not an IPv4 CIDR this policy can judge; {fix}")
            continue
        networks.append(network)
        if network.prefixlen < widest and public_share([network]) > 0:
            report(f"authorized network {text} ({network}) is wider than /{widest}; {fix}")
    share = public_share(networks)
    if share > max_share:
        report(
            f"the authorized networks together cover {share:.4%} of the public IPv4 space (at most "
            f"{max_share:.4%} allowed); the control plane is open to the internet: {fix}"
        )
    if config.get("gcpPublicCidrsAccessEnabled"):
        report("gcpPublicCidrsAccessEnabled lets any Google Cloud IP reach the control plane: disable it")


no_open_control_plane = ResourceValidationPolicy(
    name="no-open-control-plane",
    description="The authorized networks of the GKE control plane cover only a small share of the public internet.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="pulumi config set --path 'tpu-rl:authorizedNetworks[0]' <your CIDR>",
    config_schema=PolicyConfigSchema(
        properties={
            "minPrefixLength": {"type": "integer", "default": 16},
            "maxPublicShare": {"type": "number", "default": 0.0001},
        }
    ),
    validate=_guarded_resource(_open_control_plane),
)


# ---------------------------------------------------------------------------------------------
# IAM and bucket

BROAD_ROLES = ("roles/storage.admin", "roles/owner", "roles/editor")


def _broad_iam(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    if args.resource_type in PROJECT_IAM and props.get("role") in BROAD_ROLES:
        report(
            f"project-level {props['role']} is too broad; grant roles/storage.objectUser on the bucket "
            "(gcp.storage.BucketIAMMember) or a narrower project role"
        )


no_broad_project_iam = ResourceValidationPolicy(
    name="no-broad-project-iam",
    description="No project-level roles/storage.admin, roles/owner or roles/editor grants.",
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Scope storage access to the artifacts bucket (see infra/gcp/identities.py).",
    validate=_guarded_resource(_broad_iam),
)


def _scoped_bucket_grants(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    if args.resource_type not in BUCKET_IAM:
        return
    role = props.get("role")
    if role in WHOLE_BUCKET_ROLES:
        report(f"bucket-level {role} manages the whole bucket; grant object roles on the step's prefixes")
    elif role in OBJECT_ROLES and not _m(props.get("condition")).get("expression"):
        report(
            f"{role} on the whole bucket lets one step's identity read or delete every run; bound it to the "
            "prefixes its step uses with an IAM condition (infra/gcp/access.py)"
        )


scoped_bucket_grants = ResourceValidationPolicy(
    name="scoped-bucket-grants",
    description="Object access on the bucket is bounded by IAM conditions to the prefixes each identity uses.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep the grants of infra/gcp/access.py: each identity's roles on its steps' prefixes.",
    validate=_guarded_resource(_scoped_bucket_grants),
)


def _bucket(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    if args.resource_type != BUCKET:
        return
    if not props.get("uniformBucketLevelAccess"):
        report("enable uniform bucket-level access (uniformBucketLevelAccess: true)")
    if props.get("publicAccessPrevention") != "enforced":
        report("enforce public access prevention (publicAccessPrevention: enforced)")
    soft_delete = _m(props.get("softDeletePolicy")).get("retentionDurationSeconds")
    if not soft_delete and not _m(props.get("versioning")).get("enabled"):
        report("keep deleted checkpoints recoverable: enable soft delete or versioning")


bucket_hardening = ResourceValidationPolicy(
    name="bucket-hardening",
    description="Buckets use uniform access, enforce public access prevention and keep deleted objects recoverable.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep the bucket settings of infra/gcp/storage.py.",
    validate=_guarded_resource(_bucket),
)


def _bucket_deletion(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    if args.resource_type != BUCKET:
        return
    if props.get("forceDestroy"):
        report("forceDestroy deletes every checkpoint on destroy: set tpu-rl:forceDestroy false")
    if not (args.opts and args.opts.protect):
        report("the artifacts bucket is not protected: set tpu-rl:protect true")
    if not _m(props.get("versioning")).get("enabled"):
        report(
            "bucket versioning is off: an overwritten checkpoint cannot be recovered, a deleted one for the "
            "soft-delete week only: set tpu-rl:bucketVersioning true"
        )


bucket_deletion_guard = ResourceValidationPolicy(
    name="bucket-deletion-guard",
    description="Finished runs' artifacts survive destroy and overwrites: no forceDestroy, protect on, versioning.",
    severity=Severity.MEDIUM,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "pulumi config set tpu-rl:protect true; pulumi config set tpu-rl:forceDestroy false; "
        "pulumi config set tpu-rl:bucketVersioning true"
    ),
    validate=_guarded_resource(_bucket_deletion),
)


# ---------------------------------------------------------------------------------------------
# Workloads


def _no_ttl(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    if args.resource_type not in (JOB, JOBSET):
        return
    spec = _m(props.get("spec"))
    inner = [spec] + [_m(_m(r).get("template")).get("spec") for r in _l(spec.get("replicatedJobs"))]
    if any("ttlSecondsAfterFinished" in _m(s) for s in inner):
        report(
            "ttlSecondsAfterFinished deletes the finished object; a later refresh re-creates it and re-runs the "
            "step: remove it"
        )


no_ttl_on_managed_jobs = ResourceValidationPolicy(
    name="no-ttl-on-managed-jobs",
    description="Pulumi-managed Jobs and JobSets have no ttlSecondsAfterFinished (a refresh would re-run them).",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Remove ttlSecondsAfterFinished; the stack keeps the objects until destroy.",
    validate=_guarded_resource(_no_ttl),
)


def _above(value: Any, cap: Any) -> bool:
    """A count that is missing, not a number, or above ``cap``."""
    return isinstance(value, bool) or not isinstance(value, (int, float)) or value > cap


def _bounded_retries(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    if args.resource_type not in (JOB, JOBSET):
        return
    config = _config(args)
    max_backoff, max_restarts = config.get("maxBackoffLimit", 256), config.get("maxRestarts", 3)
    spec = _m(props.get("spec"))
    jobs = (
        [("Job", spec)]
        if args.resource_type == JOB
        else [
            (_m(r).get("name", "?"), _m(_m(_m(r).get("template")).get("spec"))) for r in _l(spec.get("replicatedJobs"))
        ]
    )
    for name, job in jobs:
        backoff = job.get("backoffLimit")
        if _above(backoff, max_backoff):
            report(f"{name}: backoffLimit {backoff} is unbounded or above {max_backoff}: a TPU slice retries for hours")
    if args.resource_type == JOBSET:
        restarts = _m(spec.get("failurePolicy")).get("maxRestarts")
        if _above(restarts, max_restarts):
            report(
                f"failurePolicy.maxRestarts {restarts} is missing or above {max_restarts}: "
                "lower tpu-rl:workflow.maxRestarts"
            )


bounded_retries = ResourceValidationPolicy(
    name="bounded-retries",
    description="Jobs and JobSets retry a bounded number of times (backoffLimit, failurePolicy.maxRestarts).",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Lower tpu-rl:workflow.maxRestarts; keep backoffLimit explicit.",
    config_schema=PolicyConfigSchema(
        properties={
            "maxBackoffLimit": {"type": "integer", "default": 256},
            "maxRestarts": {"type": "integer", "default": 3},
        }
    ),
    validate=_guarded_resource(_bounded_retries),
)


def _all_containers(resource_type: str, props: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every container (init and ephemeral too) of every pod of a resource of any kind."""
    for pod in pods(resource_type, props):
        yield from pod_containers(pod.spec)


DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
"""A Docker tag (distribution/reference): what follows the last ``:`` of the last path component."""


def image_tag(image: str) -> str | None:
    """The tag of an image reference (None: untagged; ``registry:5000/name`` has no tag)."""
    last = image.split("@", 1)[0].rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def _shown(image: Any) -> str:
    return str(image) if image not in (None, "") else "(none)"


def _pinned_images(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    for container in _all_containers(args.resource_type, props):
        image = container.get("image")
        text = image if isinstance(image, str) else ""
        by_digest = DIGEST.search(text) is not None
        tag = image_tag(text) if "@" not in text else None
        # `latest` in any case: registries treat tags case-sensitively, so `:LATEST` is just as mutable.
        tagged = tag is not None and TAG.fullmatch(tag) is not None and tag.lower() != "latest"
        if not (by_digest or tagged):
            report(
                f"container {container.get('name')}: image {_shown(image)} is not pinned; use a version tag or a digest"
            )
        elif "/pathways/" in text and not by_digest:
            report(
                f"container {container.get('name')}: Pathways image {text} must be pinned by digest "
                "(it must match the client's JAX); set tpu-rl:images"
            )


pinned_images = ResourceValidationPolicy(
    name="pinned-images",
    description="No :latest (in any case) or untagged images; Pathways server and proxy images are pinned by digest.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Set tpu-rl:images to tags or @sha256 digests.",
    validate=_guarded_resource(_pinned_images),
)


def _trusted_registries(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    registries = tuple(str(r) for r in (_config(args).get("registries") or IMAGE_REGISTRIES))
    for container in _all_containers(args.resource_type, props):
        image = container.get("image")
        text = image if isinstance(image, str) else ""
        # An image without a registry host is Docker Hub's (docker.io/library/...): never a prefix match here.
        if not any(text.startswith(f"{registry}/") for registry in registries):
            report(
                f"container {container.get('name')}: image {_shown(image)} is not from a trusted registry "
                f"({', '.join(registries)}); it would run with the Hugging Face token and a bucket identity"
            )


trusted_registries = ResourceValidationPolicy(
    name="trusted-registries",
    description="Workload images come from the trusted registries only (Google's TPU image repositories).",
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Set tpu-rl:images to images of tpu-rl:images.registries; add a registry to the policy config.",
    config_schema=PolicyConfigSchema(
        properties={"registries": {"type": "array", "items": {"type": "string"}, "default": list(IMAGE_REGISTRIES)}}
    ),
    validate=_guarded_resource(_trusted_registries),
)


ALLOWED_CAPABILITIES = frozenset(("NET_BIND_SERVICE",))
HOST_NAMESPACES = {"hostPID": "process", "hostIPC": "IPC"}


def _least_privilege_pods(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    """Where tpu-rl uses the node, and nowhere else: the TPU workers (pods that ask for ``google.com/tpu``) have the
    host network and the node's ``/tmp``; the Pathways head (the coordinator of a JobSet with TPU workers) has the
    host network. No pod shares the node's process or IPC namespace; no container is privileged, adds a
    capability, may escalate its privileges or runs as a Windows host process."""
    found = pods(args.resource_type, props)
    if not found:
        return
    tpu_jobset = kind_of(args.resource_type) == "JobSet" and any(_asks_tpu(p.spec, malformed=False) for p in found)
    for pod in found:
        for container in pod_containers(pod.spec):
            name = container.get("name")
            context = _m(container.get("securityContext"))
            if _on(context.get("privileged")):
                report(
                    f"container {name} is privileged: root on the node, with the Hugging Face "
                    "token and a bucket identity; no Pathways or MaxText container needs it"
                )
            added = {str(c) for c in _l(_m(context.get("capabilities")).get("add"))}
            if added - ALLOWED_CAPABILITIES:
                report(f"container {name} adds capabilities: remove capabilities.add")
            if _on(context.get("allowPrivilegeEscalation")):
                report(
                    f"container {name} allows privilege escalation (allowPrivilegeEscalation: "
                    f"{_yaml(context.get('allowPrivilegeEscalation'))}): set it false"
                )
            if _on(_m(context.get("windowsOptions")).get("hostProcess")):
                report(f"container {name} runs as a host process (windowsOptions.hostProcess): remove it")
            if context.get("procMount") not in (None, "Default"):
                report(f"container {name} unmasks /proc (procMount: {context.get('procMount')}): remove it")
    for pod in found:
        spec = pod.spec
        tpu = _asks_tpu(spec, malformed=False)
        for key, namespace in HOST_NAMESPACES.items():
            if _on(spec.get(key)):
                report(
                    f"pod {pod.where} shares the node's {namespace} namespace ({key}: {_yaml(spec.get(key))}): it "
                    "can see the node's other pods, the Pathways workers and their tokens among them; no step needs it"
                )
        if _on(spec.get("hostNetwork")) and not (tpu or (pod.coordinator and tpu_jobset)):
            report(
                f"pod {pod.where} uses the node's network (hostNetwork: {_yaml(spec.get('hostNetwork'))}): only the "
                "Pathways head and the TPU workers do"
            )
        if _on(_m(_m(spec.get("securityContext")).get("windowsOptions")).get("hostProcess")):
            report(f"pod {pod.where} runs as a host process (windowsOptions.hostProcess): remove it")
        for volume in _l(spec.get("volumes")):
            volume = _m(volume)
            if volume.get("hostPath") is None:
                continue
            host_path = _m(volume.get("hostPath")).get("path")
            if host_path != "/tmp" or not tpu:
                report(
                    f"volume {volume.get('name')} mounts the node's {host_path}: only the Pathways workers on "
                    "TPU hosts mount a host path (/tmp)"
                )


least_privilege_pods = ResourceValidationPolicy(
    name="least-privilege-pods",
    description=(
        "No privileged container, added capability or privilege escalation; no host PID or IPC; the host network "
        "and a host path (/tmp) only where the Pathways head and TPU workers need them."
    ),
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep the pod specs of workloads/build/manifests.py (only the TPU workers mount /tmp).",
    validate=_guarded_resource(_least_privilege_pods),
)


HELM_CHARTS: dict[str, tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]] = {
    # chart: (versions, the value paths tpu-rl sets; "*" is any one key)
    "oci://registry.k8s.io/jobset/charts/jobset": (JOBSET_VERSIONS, ()),
    "oci://registry.k8s.io/kueue/charts/kueue": (
        KUEUE_VERSIONS,
        (("controllerManager", "nodeSelector", "*"), ("managerConfig", "controllerManagerConfigYaml")),
    ),
}
"""The Helm charts tpu-rl installs (``infra/k8s/platform.py`` JOBSET_CHART, ``infra/k8s/kueue.py`` CHART; a test
keeps them equal), at the versions the configuration accepts (``core.config.schema``)."""


def _value_paths(values: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    if unseen(values):
        return
    if isinstance(values, dict) and values:
        for key, value in values.items():
            yield from _value_paths(value, (*prefix, str(key)))
    elif prefix:
        yield prefix


def _reviewed_value(path: tuple[str, ...], allowed: Sequence[tuple[str, ...]]) -> bool:
    return any(
        len(path) == len(pattern) and all(p in ("*", part) for p, part in zip(pattern, path, strict=True))
        for pattern in allowed
    )


RENDERERS = re.compile(r"kubernetes:(helm\.sh/v\d+:Chart|yaml(/v\d+)?:Config(File|Group)|kustomize(/v\d+)?:Directory)")
"""Components that render Kubernetes objects from a chart, manifests or a kustomization (Helm v3 and v4 ``Chart``,
``yaml`` and ``yaml/v2`` ``ConfigFile``/``ConfigGroup``, ``kustomize`` ``Directory``): tpu-rl uses none of them."""


def _helm_charts(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    if RENDERERS.fullmatch(args.resource_type):
        report(
            f"{args.resource_type} {args.name} renders Kubernetes objects from a chart or from files, out of the "
            "review the stack's own objects get: tpu-rl installs charts only as the reviewed Helm releases "
            "(infra/k8s/platform.py) and registers every other object itself"
        )
        return
    if args.resource_type != HELM_RELEASE:
        return
    name = props.get("name") if isinstance(props.get("name"), str) else args.name
    chart, version = props.get("chart"), props.get("version")
    if unseen(chart):
        return
    allowed = HELM_CHARTS.get(chart) if isinstance(chart, str) else None
    if allowed is None:
        report(
            f"Helm release {name} installs chart {chart!r}, which is not one tpu-rl installs "
            f"({', '.join(HELM_CHARTS)}): "
            "the policy pack cannot see what a chart renders (its pods, images and RBAC), so only reviewed charts "
            "are allowed"
        )
        return
    versions, value_paths = allowed
    if version not in versions:
        report(
            f"Helm release {name}: {chart} version {version!r} is not one the stack's manifests are validated "
            f"against ({', '.join(versions)}); pin one of them"
        )
    if _m(props.get("repositoryOpts")).get("repo") is not None:
        report(f"Helm release {name}: repositoryOpts.repo fetches the chart from elsewhere; the OCI reference is all")
    for key in ("postrender", "valueYamlFiles"):
        if props.get(key) not in (None, "", []):
            report(
                f"Helm release {name}: {key} changes what the chart renders out of the policy pack's sight: remove it"
            )
    unreviewed = [".".join(p) for p in _value_paths(props.get("values")) if not _reviewed_value(p, value_paths)]
    if unreviewed:
        report(
            f"Helm release {name}: values {', '.join(unreviewed)} are not ones tpu-rl sets; a value can change the "
            "chart's images, privileges or webhooks"
        )


reviewed_helm_charts = ResourceValidationPolicy(
    name="reviewed-helm-charts",
    description=(
        "Helm releases install only the charts tpu-rl installs (JobSet, Kueue), at their versions and values; no "
        "other chart or manifest renderer."
    ),
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep the releases of infra/k8s/platform.py; add a chart to HELM_CHARTS after a review.",
    validate=_guarded_resource(_helm_charts),
)


def _unseen(value: EnvValue) -> str:
    """Where a value the policy cannot read comes from, as a message shows it."""
    return "(not known during preview)" if value.kind == "literal" else f"({value.source})"


def _private_publish(args: StackValidationArgs, resources: list[Resource], report: Report) -> None:
    """A container publishes when its environment (resolved: ``envFrom``, ``configMapKeyRef``, ``$(VAR)``) names a
    repository (``workloads/run/publish_hub.py`` reads ``core.names.PUBLISH_ENV``); it is private only when
    ``TPU_RL_PUBLISH_PRIVATE`` is exactly ``true``, as publish_hub.py reads it."""
    allowed = {str(repo) for repo in _l(_config(args).get("publicRepos"))}
    repo_env, _branch_env, private_env = PUBLISH_ENV
    objects = StackObjects(resources)
    for r in resources:
        namespace = _namespace(r.props)
        for pod in pods(r.resource_type, r.props):
            for container in pod_containers(pod.spec):
                env = container_env(container, namespace, objects)
                repo, private = env.values.get(repo_env), env.values.get(private_env)
                if repo is None and not env.unseen:
                    continue
                # A value from envFrom may be overridden by a later source this stack does not declare.
                if private is not None and private.value == "true" and not (private.from_env_from and env.unseen):
                    continue
                if repo is not None and repo.value in allowed and not (repo.from_env_from and env.unseen):
                    continue
                if repo is None:
                    report(
                        f"container {container.get('name')} takes its environment from {', '.join(env.unseen)}, "
                        f"which this stack does not declare: it may publish to the Hugging Face Hub ({repo_env}) "
                        f"as a public repository; declare the object in the stack or set {private_env}=true in "
                        "the container's env",
                        r.urn,
                    )
                    continue
                shown_repo = repo.value if isinstance(repo.value, str) else f"a repository {_unseen(repo)}"
                if private is None:
                    shown_private = "(unset)" if not env.unseen else f"(unset, unless {', '.join(env.unseen)} sets it)"
                else:
                    shown_private = private.value if isinstance(private.value, str) else _unseen(private)
                report(
                    f"publishes {shown_repo} to the Hugging Face Hub as a public repository "
                    f"({private_env}={shown_private}): a trained model goes public only when the stack says so in "
                    "two places, tpu-rl:publish.private false and this policy's publicRepos",
                    r.urn,
                )


private_publish = StackValidationPolicy(
    name="private-publish",
    description="A published model goes to a private Hub repository, unless the policy config lists the repository.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep tpu-rl:publish.private true, or list the repository in publicRepos (policy/config).",
    config_schema=PolicyConfigSchema(
        properties={"publicRepos": {"type": "array", "items": {"type": "string"}, "default": []}}
    ),
    validate=_guarded_stack(_private_publish),
)


def _model_revision(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    if args.resource_type not in (JOB, JOBSET, CONFIG_MAP):
        return
    if args.resource_type == CONFIG_MAP:
        # A step's script is a file of its ConfigMap (``bash /tpu-rl/run.sh``): this policy judges one resource, so
        # it reads the script where it is. Data not known yet (the model card's, at a preview) holds no step's
        # script: the program builds those before any resource exists.
        data = props.get("data")
        text = " ".join(v for v in data.values() if isinstance(v, str)) if isinstance(data, dict) else ""
    else:
        text = command_text(props.get("spec"))
    # tpu-rl's conversion resolves the revision once (base_snapshot.py snapshot REPO REVISION gs://...) and
    # converts the commit it printed (--revision="${commit}"); a hand-written Job passes --revision=REVISION.
    snapshot = re.search(r"\ssnapshot\s+'?[^\s'\"]+'?\s+'?([^\s'\"]+)'?\s+'?gs://", text)
    argv = re.search(r"--revision=(?!\$\{)([^\s\"']+)", text)
    match = snapshot or argv
    if match and not re.fullmatch(r"[0-9a-f]{40}", match.group(1)):
        report(
            f"model revision {match.group(1)!r} is a moving ref; pin a commit for reproducible runs "
            "(pulumi config set --path 'tpu-rl:model.revision' <commit>)"
        )


model_revision_pinned = ResourceValidationPolicy(
    name="model-revision-pinned",
    description="The Hugging Face model revision is pinned to a commit.",
    severity=Severity.LOW,
    enforcement_level=EnforcementLevel.ADVISORY,
    remediation_steps="Set tpu-rl:model.revision to the commit the preflight reports.",
    validate=_guarded_resource(_model_revision),
)


# ---------------------------------------------------------------------------------------------
# Identities: who may act as what, in Google Cloud and in the cluster

IAM_TYPE = re.compile(r"gcp:[a-zA-Z]+/[a-zA-Z]*[iI]AM(Member|Binding|Policy):[A-Za-z]*IAM(Member|Binding|Policy)")
"""Every IAM grant of the Google provider (``gcp:<module>/<x>IAMMember:<X>IAMMember``, ``...IAMBinding``,
``...IAMPolicy``): a project's, a bucket's, a service account's, a key's..."""
GKE_AGENT = re.compile(r"serviceAccount:service-[0-9]+@container-engine-robot\.iam\.gserviceaccount\.com")
"""The project's GKE service agent: the one principal outside the stack a grant may name, on the stack's Cloud KMS key
(it encrypts Secrets with it: ``infra/gcp/kms.py``)."""
KMS_KEY_IAM = "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember"
WORKLOAD_PRINCIPAL = re.compile(r"serviceAccount:([a-z0-9-:.]+)\.svc\.id\.goog\[([^/\]]+)/([^\]]+)\]")
ACCOUNT = "gcp:serviceaccount/account:Account"
SERVICE_ACCOUNT = "kubernetes:core/v1:ServiceAccount"


def _members(props: Mapping[str, Any]) -> list[Any]:
    """The principals an IAM resource grants to: ``member``, ``members``, or a policy document's bindings."""
    if "member" in props:
        return [props.get("member")]
    if "members" in props:
        return _l(props.get("members"))
    data = props.get("policyData")
    if unseen(data) or not isinstance(data, str):
        return []
    try:
        document = yaml.safe_load(data)
    except yaml.YAMLError:
        return ["(a policy document this pack cannot read)"]
    return [m for b in _l(_m(document).get("bindings")) for m in _l(_m(b).get("members"))]


def _iam_grants(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    """Grants name service accounts, never people, groups, domains, the public or federated identities; and they add
    a member, never replace a role's or a resource's members (an IAMBinding or IAMPolicy removes every grant the stack
    does not make, the project owners' among them)."""
    if not IAM_TYPE.fullmatch(args.resource_type):
        return
    kind = args.resource_type.rsplit(":", 1)[-1]
    if not kind.endswith("IAMMember"):
        report(
            f"{kind} replaces every other grant of its role or resource (authoritative); grant with the matching "
            "IAMMember, as infra/gcp/ does"
        )
    for member in _members(props):
        if unseen(member):
            continue
        if not isinstance(member, str) or not member.startswith("serviceAccount:"):
            report(
                f"{member!s} is not a service account: tpu-rl grants roles to its own service accounts only (a "
                "person, a group, a domain, allUsers or a federated identity would reach the stack's bucket, key or "
                "accounts)"
            )


iam_grants = ResourceValidationPolicy(
    name="iam-service-accounts-only",
    description="IAM grants name service accounts only, and add a member rather than replace a role's members.",
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep the grants of infra/gcp/access.py and infra/gcp/identities.py (IAMMember to accounts).",
    validate=_guarded_resource(_iam_grants),
)


def _own_principals(resources: list[Resource]) -> tuple[dict[str, str], set[tuple[str, str]]]:
    """The stack's own principals: its Google accounts (email -> account id) and its Kubernetes service accounts
    (namespace, name)."""
    emails: dict[str, str] = {}
    for r in resources:
        if r.resource_type != ACCOUNT:
            continue
        account_id, project, email = r.props.get("accountId"), r.props.get("project"), r.props.get("email")
        if isinstance(email, str):
            emails[email] = str(account_id)
        elif isinstance(account_id, str) and isinstance(project, str):
            emails[f"{account_id}@{project}.iam.gserviceaccount.com"] = account_id
    ksas = set()
    for r in resources:
        if r.resource_type == SERVICE_ACCOUNT:
            meta = _m(r.props.get("metadata"))
            ksas.add((str(meta.get("namespace")), str(meta.get("name"))))
    return emails, ksas


def _stack_principals(args: StackValidationArgs, resources: list[Resource], report: Report) -> None:
    accounts, ksas = _own_principals(resources)
    for r in resources:
        if not IAM_TYPE.fullmatch(r.resource_type):
            continue
        for member in _members(r.props):
            if unseen(member) or not isinstance(member, str) or not member.startswith("serviceAccount:"):
                continue  # not known yet, or not an account at all (iam-service-accounts-only)
            if r.resource_type == KMS_KEY_IAM and GKE_AGENT.fullmatch(member):
                continue
            principal = WORKLOAD_PRINCIPAL.fullmatch(member)
            if principal is None:
                if member.removeprefix("serviceAccount:") not in accounts:
                    report(
                        f"{r.name} grants {_m(r.props).get('role')} to {member}, which is not one of this stack's "
                        "accounts: another stack's or a person's account would reach this stack's resources",
                        r.urn,
                    )
                continue
            namespace, ksa = principal.group(2), principal.group(3)
            if (namespace, ksa) not in ksas:
                report(
                    f"{r.name} lets {namespace}/{ksa} act as a Google account, but this stack makes no such "
                    "Kubernetes service account: a pod of another cluster in the project could take the identity",
                    r.urn,
                )
                continue
            bound = r.props.get("serviceAccountId")
            if unseen(bound):
                continue
            account = accounts.get(str(bound).rsplit("/", 1)[-1])
            if account is not None and ksa != account:
                report(
                    f"{r.name} binds {namespace}/{ksa} to the account {account}: a Kubernetes service account is named "
                    "as the account it acts as, which IAM keeps unique in the project, so no stack's pod can take "
                    "another stack's identity (core.names.step_ksa)",
                    r.urn,
                )


stack_principals = StackValidationPolicy(
    name="stack-principals",
    description=(
        "IAM grants go to the stack's own accounts and Kubernetes service accounts, each named as the account it acts "
        "as (the project's GKE agent only on the stack's key)."
    ),
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep the identities of infra/gcp/identities.py and infra/gcp/cluster.py.",
    validate=_guarded_stack(_stack_principals),
)


def _write_token(args: StackValidationArgs, resources: list[Resource], report: Report) -> None:
    """Only the publication's container reads the Hub write token Secret (by env, envFrom or a volume)."""
    for r in resources:
        for pod in pods(r.resource_type, r.props):
            with judging():
                publication = _m(pod.metadata.get("labels")).get(COMPONENT_LABEL) == PUBLISH
                volumes = {
                    str(_m(v).get("name")): v for v in _l(pod.spec.get("volumes")) if _reads_secret(v, HF_WRITE_SECRET)
                }
                for container in pod_containers(pod.spec):
                    name = container.get("name")
                    env = _l(container.get("env"))
                    if publication and any(_m(e).get("name") == PUBLISH_ENV[0] for e in env):
                        continue
                    refs = [
                        f"env {_m(e).get('name')}"
                        for e in env
                        if _m(_m(_m(e).get("valueFrom")).get("secretKeyRef")).get("name") == HF_WRITE_SECRET
                    ]
                    refs += [
                        "envFrom"
                        for e in _l(container.get("envFrom"))
                        if _m(_m(e).get("secretRef")).get("name") == HF_WRITE_SECRET
                    ]
                    refs += [
                        f"volume {_m(m).get('name')}"
                        for m in _l(container.get("volumeMounts"))
                        if str(_m(m).get("name")) in volumes
                    ]
                    if refs:
                        report(
                            f"{kind_of(r.resource_type)} {_name(r)}: container {name} reads the Hub write token "
                            f"({', '.join(refs)}): only the publication's container may (it can push to, and delete, "
                            "the stack's model repositories)",
                            r.urn,
                        )


def _reads_secret(volume: Any, secret: str) -> bool:
    volume = _m(volume)
    if _m(volume.get("secret")).get("secretName") == secret:
        return True
    return any(_m(_m(s).get("secret")).get("name") == secret for s in _l(_m(volume.get("projected")).get("sources")))


hub_write_token_scope = StackValidationPolicy(
    name="hub-write-token-scope",
    description="Only the publication's container reads the Hugging Face write token.",
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Reference the write token Secret from the publish step only (workloads/build/steps.py).",
    validate=_guarded_stack(_write_token),
)


ADMIN_ROLES = frozenset(("cluster-admin", "admin", "edit"))
"""The built-in ClusterRoles that give a subject write access to most of a namespace or the cluster."""
ESCALATING_VERBS = frozenset(("escalate", "bind", "impersonate"))
"""Verbs that let a subject grant itself more (Kubernetes RBAC "privilege escalation prevention")."""
BROAD_GROUPS = frozenset(("system:anonymous", "system:unauthenticated", "system:authenticated"))
ROLES = ("Role", "ClusterRole")
BINDINGS = ("RoleBinding", "ClusterRoleBinding")


def _rbac(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    """No wildcard or escalating RBAC rule, no binding to the built-in admin roles or to everyone."""
    kind = kind_of(args.resource_type)
    name = _m(props.get("metadata")).get("name") or args.name
    if kind in ROLES:
        for index, rule in enumerate(_l(props.get("rules"))):
            rule = _m(rule)
            for field_name in ("apiGroups", "resources", "verbs", "nonResourceURLs"):
                values = [str(v) for v in _l(rule.get(field_name))]
                if "*" in values or (field_name == "resources" and any(v.endswith("/*") for v in values)):
                    report(f"{kind} {name} rule {index} grants every {field_name[:-1]} ('*'): list what it needs")
            verbs = {str(v) for v in _l(rule.get("verbs"))} & ESCALATING_VERBS
            if verbs:
                report(f"{kind} {name} rule {index} grants {', '.join(sorted(verbs))}: a way to any permission")
        if _m(props.get("aggregationRule")).get("clusterRoleSelectors"):
            report(f"{kind} {name} aggregates other roles (aggregationRule): list its rules instead")
    elif kind in BINDINGS:
        ref = _m(props.get("roleRef"))
        if ref.get("kind") == "ClusterRole" and ref.get("name") in ADMIN_ROLES:
            report(f"{kind} {name} binds the built-in {ref.get('name')} role: bind a role with the rules it needs")
        for subject in _l(props.get("subjects")):
            if _m(subject).get("kind") == "Group" and _m(subject).get("name") in BROAD_GROUPS:
                report(f"{kind} {name} binds {_m(subject).get('name')}: everyone who can reach the API server")


no_broad_rbac = ResourceValidationPolicy(
    name="no-broad-rbac",
    description="No RBAC rule with '*' or escalate, bind, impersonate; no binding to the admin roles or to everyone.",
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Give a workload a Role with the verbs and resources it uses; tpu-rl's steps need none.",
    validate=_guarded_resource(_rbac),
)


ADMISSION_KINDS = frozenset(
    (
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding",
    )
)


def _admission(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    kind = kind_of(args.resource_type)
    if kind in ADMISSION_KINDS:
        name = _m(props.get("metadata")).get("name") or args.name
        report(
            f"{kind} {name} sees or changes every object it matches, Secrets and pods among them: the stack installs "
            "admission control only through the reviewed charts (JobSet's and Kueue's webhooks)"
        )


no_admission_webhooks = ResourceValidationPolicy(
    name="no-admission-webhooks",
    description="The stack registers no admission webhook or admission policy of its own.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Remove the object; the reviewed Helm charts install the webhooks JobSet and Kueue need.",
    validate=_guarded_resource(_admission),
)


def _services(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    if kind_of(args.resource_type) != "Service":
        return
    spec = _m(props.get("spec"))
    name = _m(props.get("metadata")).get("name") or args.name
    kind = spec.get("type")
    if kind in ("LoadBalancer", "NodePort"):
        report(
            f"Service {name} of type {kind} opens its pods beyond the cluster (the Pathways proxy, a step's port): "
            "use a ClusterIP Service"
        )
    if _l(spec.get("externalIPs")):
        report(f"Service {name} sets externalIPs: its pods answer on addresses outside the cluster; remove them")


no_exposed_services = ResourceValidationPolicy(
    name="no-exposed-services",
    description="No Service of type LoadBalancer or NodePort, and none with externalIPs.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Use ClusterIP Services; reach the cluster from tpu-rl:authorizedNetworks.",
    validate=_guarded_resource(_services),
)


# ---------------------------------------------------------------------------------------------
# Labels and budget

LABEL_FIELDS = {BUCKET: ("labels",), CLUSTER: ("resourceLabels",), NODE_POOL: ("nodeConfig", "resourceLabels")}


def _labels(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    path = LABEL_FIELDS.get(args.resource_type)
    if path is None:
        return
    labels: Any = props
    for key in path:
        labels = _m(labels).get(key)
    required = _config(args).get("requiredLabels", ["app", "stack"])
    labels = _m(labels)
    missing = [k for k in required if k not in labels or unseen(labels[k])]
    if missing:
        report(f"missing cost-attribution labels {', '.join(missing)} on {'.'.join(path)}")


cost_attribution_labels = ResourceValidationPolicy(
    name="cost-attribution-labels",
    description="Labelable GCP resources carry the cost-attribution labels.",
    severity=Severity.LOW,
    enforcement_level=EnforcementLevel.ADVISORY,
    remediation_steps="Keep settings.labels on every labelable resource.",
    config_schema=PolicyConfigSchema(
        properties={"requiredLabels": {"type": "array", "items": {"type": "string"}, "default": ["app", "stack"]}}
    ),
    validate=_guarded_resource(_labels),
)


class EstimateInputError(ValueError):
    """A TPU workload does not carry a training command the estimate can read."""


TRAIN_RL = "maxtext.trainers.post_train.rl.train_rl"
TRAINER_MENTIONS = ("trainers.post_train.rl.train_rl", "post_train/rl/train_rl")
"""Text that names the trainer: a word holding it is a script to read (``bash -c``, ``eval``), or a finding."""
_SHELL_PUNCTUATION = "();<>|&\n"
_REDIRECTIONS = frozenset((">", ">>", "<", "<<", "<<<", ">&", "<&", "&>", "&>>", "<>", ">|", "<<-"))
_MAX_SCRIPT_DEPTH = 4


class _Lines:
    """A script for ``shlex`` whose comments end before their newline, so the newline still ends the command
    (shlex's own comment handling reads the newline too, gluing the next line onto the commented one)."""

    def __init__(self, text: str) -> None:
        self._text, self._at = text, 0

    def read(self, size: int = -1) -> str:
        end = len(self._text) if size < 0 else self._at + size
        out, self._at = self._text[self._at : end], min(end, len(self._text))
        return out

    def readline(self, size: int = -1) -> str:
        end = self._text.find("\n", self._at)
        end = len(self._text) if end < 0 else end
        out, self._at = self._text[self._at : end], end
        return out

    def close(self) -> None:
        pass


def shell_commands(script: str) -> list[list[str]]:
    """The simple commands of a bash script, each as its words (quotes removed, ``#`` comments and redirections
    with their targets dropped), split at ``;``, ``&``, ``|``, ``&&``, ``||``, parentheses and newlines; a
    backslash-newline continues the line. Raises ``ValueError`` on a script shlex cannot read (an open quote)."""
    lexer = shlex.shlex(_Lines(script.replace("\\\n", "")), posix=True, punctuation_chars=_SHELL_PUNCTUATION)
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    skip_next = False
    while (token := lexer.get_token()) is not None and token != lexer.eof:
        if token and all(c in _SHELL_PUNCTUATION for c in token):
            if token in _REDIRECTIONS or not any(c in ";&|()\n" for c in token):
                skip_next = True  # a redirection: its target is no argument
            else:
                commands.append([])
            continue
        if skip_next:
            skip_next = False
            continue
        commands[-1].append(token)
    return [command for command in commands if command]


def _trainer_argv(words: Sequence[str]) -> list[str] | None:
    """The arguments after ``-m maxtext...train_rl`` (or its script path) in one command's words."""
    for index, word in enumerate(words):
        if word == "-m" and index + 1 < len(words) and words[index + 1] == TRAIN_RL:
            return list(words[index + 2 :])
        if word == f"-m{TRAIN_RL}" or word.endswith("post_train/rl/train_rl.py"):
            return list(words[index + 1 :])
    return None


def trainer_invocations(words: Sequence[str], depth: int = 0) -> tuple[list[list[str]], bool]:
    """Every train_rl argv in a command's words and in the scripts they carry (``bash -c``, ``eval``, ``sh -c``),
    and whether any word names the trainer in a way this cannot read (then a hidden run may exist)."""
    found: list[list[str]] = []
    unread = False
    argv = _trainer_argv(words)
    if argv is not None:
        found.append(argv)
    for word in words:
        if not any(m in word for m in TRAINER_MENTIONS) or word == TRAIN_RL or word.endswith("/train_rl.py"):
            continue
        if word == f"-m{TRAIN_RL}":
            continue
        if depth >= _MAX_SCRIPT_DEPTH:
            unread = True
            continue
        try:
            commands = shell_commands(word)
        except ValueError:
            unread = True
            continue
        inside = False
        for command in commands:
            more, hidden = trainer_invocations(command, depth + 1)
            found += more
            inside = inside or bool(more)
            unread = unread or hidden
        unread = unread or not inside
    return found, unread


class _OmegaConfLoader(yaml.SafeLoader):
    """OmegaConf's YAML loader (``omegaconf._utils.get_yaml_loader``): YAML 1.1 scalars without timestamps, and
    floats without a dot (``1e3``)."""


_OmegaConfLoader.yaml_implicit_resolvers = {
    key: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_OmegaConfLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?[0-9][0-9_]*(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def _merge(node: dict[str, Any], key: str, value: Any) -> None:
    """``OmegaConf.update(cfg, key, value, merge=True)``: a dotted key nests, a mapping merges into a mapping."""
    *parents, last = key.split(".")
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    if isinstance(value, dict) and isinstance(node.get(last), dict):
        for k, v in value.items():
            _merge(node[last], str(k), v)
    else:
        node[last] = value


def maxtext_overrides(argv: Sequence[str]) -> dict[str, Any]:
    """What train_rl's pyconfig makes of its command-line overrides (MaxText 0.2.4 ``pyconfig``: a first argument
    ending in ``.yml`` is the config file; the rest is ``OmegaConf.from_cli``, i.e. ``from_dotlist``): each
    ``key=value`` in order, the value read as OmegaConf's YAML, a later key overriding an earlier one, dotted keys
    nested (``rl.num_generations``). absl takes ``-``-words as flags."""
    words = list(argv)
    if words and words[0].endswith(".yml"):
        words = words[1:]
    config: dict[str, Any] = {}
    for word in words:
        if word.startswith("-"):
            continue
        key, sep, text = word.partition("=")
        value: Any = None
        if sep:
            try:
                value = yaml.load(text, Loader=_OmegaConfLoader)  # noqa: S506 (a SafeLoader subclass)
            except yaml.YAMLError:
                value = text
        _merge(config, key, value)
    return config


def _positive_int(value: Any) -> int | None:
    """An int as MaxText's pydantic config takes one (an integral float or a digit string too), at least 1."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?[0-9]+\s*", value):
        value = int(value)
    return value if isinstance(value, int) and value >= 1 else None


RUN_KEYS = ("model_name", "num_batches", "batch_size", "rl.num_generations", "max_target_length")


def training_run(argv: Sequence[str], env: Mapping[str, EnvValue]) -> TrainingRun | str:
    """The run a train_rl argv makes, or why it cannot be read. A top-level key missing from the command line is
    read from its ``M_<KEY>`` environment variable, as pyconfig does (both set: pyconfig refuses to start)."""
    config = maxtext_overrides(argv)
    values: dict[str, Any] = {}
    for key in RUN_KEYS:
        node: Any = config
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is None and "." not in key:
            from_env = env.get(f"M_{key.upper()}")
            node = from_env.value if from_env is not None and isinstance(from_env.value, str) else None
        if key == "model_name":
            if not isinstance(node, str) or not node:
                return f"cannot read {key}="
            model = model_for_maxtext(node)
            if model is None:
                return f"model_name={node} has no cost model (core/models.py)"
            values[key] = model.name
            continue
        number = _positive_int(node)
        if number is None:
            return f"cannot read {key}= as a positive integer"
        values[key] = number
    return TrainingRun(
        model=values["model_name"],
        num_batches=values["num_batches"],
        batch_size=values["batch_size"],
        num_generations=values["rl.num_generations"],
        max_target_length=values["max_target_length"],
    )


def _command_words(container: Mapping[str, Any], env: ContainerEnv) -> list[str]:
    """A container's argv as the kubelet starts it: command then args, ``$(VAR)`` expanded."""
    words = []
    for key in ("command", "args"):
        for word in _l(container.get(key)):
            words.append(expand(word, env.values, keep_unknown=True) if isinstance(word, str) else str(word))
    return words


def _with_run_files(words: list[str], mounts: Mounts) -> tuple[list[str], list[MountedFile]]:
    """A command's words with each file it runs from a ConfigMap volume replaced by the file's text (``bash FILE``
    runs the lines ``bash -c TEXT`` would), and the files it names that this policy cannot read (an ``Unseen`` one
    is noted: judged at `pulumi up`)."""
    out: list[str] = []
    unknown: list[MountedFile] = []
    for word in words:
        mounted = mounts.file(word)
        if mounted is None:
            out.append(word)
        elif isinstance(mounted.text, str):
            out.append(mounted.text)
        else:
            if not unseen(mounted.text):
                unknown.append(mounted)
            out.append(word)
    return out, unknown


def _training_runs(resources: list[Resource]) -> tuple[list[tuple[str, TrainingRun]], list[str]]:
    """Every TPU workload's training runs (any resource whose pods ask for ``google.com/tpu``), and why one
    cannot be read."""
    objects = StackObjects(resources)
    runs: list[tuple[str, TrainingRun]] = []
    problems: list[str] = []
    for r in resources:
        found = pods(r.resource_type, r.props)
        if not any(_asks_tpu(p.spec, malformed=True) for p in found):
            continue
        label = f"{kind_of(r.resource_type)} {_name(r)}"
        namespace = _namespace(r.props)
        here: list[TrainingRun] = []
        unread = False
        for pod in found:
            for container in pod_containers(pod.spec):
                env = container_env(container, namespace, objects)
                words, unknown = _with_run_files(
                    _command_words(container, env), Mounts(pod.spec, container, namespace, objects)
                )
                problems += [
                    f"{label} runs {f.path} from {f.source}: this policy cannot read it, so no estimate"
                    for f in unknown
                ]
                invocations, hidden = trainer_invocations(words)
                unread = unread or hidden or bool(unknown)
                for argv in invocations:
                    run = training_run(argv, env.values)
                    if isinstance(run, str):
                        problems.append(f"{run} from the train_rl command of {label}, so no estimate")
                    else:
                        here.append(run)
        if unread and not any(label in p for p in problems):
            problems.append(f"{label} names the trainer in a command this policy cannot read, so no estimate of it")
        elif not here and not any(label in p for p in problems):
            problems.append(
                f"cannot find the train_rl command (python3 -m {TRAIN_RL} key=value ...) in {label}, whose pods "
                "ask for TPU chips, so no estimate"
            )
        runs += [(_name(r), run) for run in here]
    return runs, problems


def _pools(resources: list[Resource]) -> list[tuple[SliceShape, Capacity]]:
    pools = []
    for r in resources:
        if r.resource_type != NODE_POOL:
            continue
        node = _m(r.props.get("nodeConfig"))
        found = _machine(node.get("machineType"))
        if found is None:
            continue
        version, machine = found
        topology = _m(r.props.get("placementPolicy")).get("tpuTopology") or machine.single_host_topology
        if topology not in machine.topologies:
            continue
        capacity: Capacity
        if node.get("spot"):
            capacity = "spot"
        elif node.get("flexStart"):
            capacity = "flex-start"
        elif r.props.get("autoscaling"):
            capacity = "on-demand"
        else:
            capacity = "reservation"
        pools.append((resolve_slice(version, machine.name, topology), capacity))
    return pools


def _estimate(resources: list[Resource], runs: list[tuple[str, TrainingRun]]) -> dict[str, Any] | None:
    """The stack's estimate: the workflow with the first run, every further TPU run's training added."""
    pools = _pools(resources)
    if not pools:
        return None
    shape, capacity = pools[0]
    if not runs:  # provision only: no run, but a reserved slice still bills per day
        out = estimate_run(shape, len(pools), capacity, None).to_output()
    else:
        first = estimate_run(shape, len(pools), capacity, runs[0][1])
        more = sum(
            step.usd
            for _, run in runs[1:]
            for step in estimate_run(shape, len(pools), capacity, run).steps
            if step.step == "train"
        )
        out = first.to_output()
        out["totalUsd"] = round(first.total_usd + more, 2)
    out["runs"] = [name for name, _ in runs]
    return out


def stack_estimate(resources: Sequence[Any]) -> dict[str, Any] | None:
    """The cost estimate of a stack, from its TPU pools and every TPU workload's training command."""
    plain_resources = _resources(resources)
    runs, problems = _training_runs(plain_resources)
    if problems:
        raise EstimateInputError(problems[0])
    return _estimate(plain_resources, runs)


def _budget(args: StackValidationArgs, resources: list[Resource], report: Report) -> None:
    runs, problems = _training_runs(resources)
    for problem in problems:
        report(f"{problem}: the budget gate cannot judge this stack; keep the JobSet rendered by workloads/")
    estimate = _estimate(resources, runs)
    if estimate is None:
        return
    budget = float(_config(args).get("maxEstimatedUsd", 1000))
    if estimate["totalUsd"] > budget:
        report(
            f"estimated TPU cost of one run is ${estimate['totalUsd']:,.2f} ({estimate['capacity']}, "
            f"{estimate['chips']} chips), above maxEstimatedUsd ${budget:,.2f}: use a smaller slice, fewer "
            "numBatches or spot/flex-start capacity, or raise the budget in the policy config"
        )
    if estimate["idleUsdPerDay"] > float(_config(args).get("maxIdleUsdPerDay", 5000)):
        report(
            f"the reserved slice bills ${estimate['idleUsdPerDay']:,.2f} per day until `pulumi destroy`: "
            "destroy the stack after the run or use autoscaled capacity"
        )


tpu_budget = StackValidationPolicy(
    name="tpu-budget",
    description="The estimated TPU cost of one workflow run, every TPU workload's training included, is under budget.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Shrink the run or the slice, or raise maxEstimatedUsd in policy/config/<stack>.json.",
    config_schema=PolicyConfigSchema(
        properties={
            "maxEstimatedUsd": {"type": "number", "default": 1000},
            "maxIdleUsdPerDay": {"type": "number", "default": 5000},
        }
    ),
    validate=_guarded_stack(_budget),
)


# ---------------------------------------------------------------------------------------------
# Kueue: a step its queue can never admit waits until `pulumi up` gives up, the slice idle meanwhile

KUEUE_KINDS = ("JobSet", "Job")
"""What tpu-rl's Kueue manages (``infra/k8s/kueue.py`` FRAMEWORKS): JobSets and batch Jobs."""


class _MalformedError(ValueError):
    """A manifest value the API server would refuse (the message says which)."""


def _by_name(resources: list[Resource], type_: str) -> dict[str, dict[str, Any]]:
    return {str(_m(r.props.get("metadata")).get("name")): r.props for r in resources if r.resource_type == type_}


def _selects(selector: Any, labels: Mapping[Any, Any]) -> bool:
    """A label selector against labels (null selects nothing, {} everything: Kueue ClusterQueue)."""
    if selector is None:
        return False
    selector = _m(selector)
    if any(labels.get(key) != value for key, value in _m(selector.get("matchLabels")).items()):
        return False
    for term in _l(selector.get("matchExpressions")):
        term = _m(term)
        key, operator, values = term.get("key"), term.get("operator"), _l(term.get("values"))
        found = key in labels
        if not {
            "In": found and labels.get(key) in values,
            "NotIn": not found or labels.get(key) not in values,
            "Exists": found,
            "DoesNotExist": not found,
        }.get(str(operator), False):
            return False
    return True


def _count(value: Any, what: str) -> int:
    """A count as the API server takes one: a whole number, however the engine sent it (``1.0`` is 1)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _MalformedError(f"{what} {value!r} is not a count")
    return value


def _checked_requests(pod: Mapping[str, Any]) -> dict[str, float]:
    """What a pod asks the scheduler (``core.requests.pod_requests``), each quantity checked first."""
    clean: dict[str, Any] = {"containers": [], "initContainers": []}
    for key in clean:
        for container in _l(pod.get(key)):
            container = _m(container)
            resources = _m(container.get("resources"))
            parts = {}
            for part in ("requests", "limits"):
                amounts = {}
                for resource, value in _m(resources.get(part)).items():
                    if unseen(value):
                        continue
                    try:
                        amount = quantity(value)
                    except ValueError:
                        amount = -1.0
                    if amount < 0:
                        shown = str(value)[:40]
                        raise _MalformedError(
                            f"container {container.get('name')}: {part}.{resource} {shown!r} is not a Kubernetes "
                            "quantity the API server accepts"
                        )
                    amounts[str(resource)] = value
                parts[part] = amounts
            clean[key].append({"resources": parts, "restartPolicy": container.get("restartPolicy")})
    return pod_requests(clean)


def _pod_sets(kind: str, props: Mapping[str, Any]) -> list[tuple[str, int, dict[str, float], dict[str, Any]]]:
    """Kueue's pod sets (pod set, pods, requests of one pod, node selector) of a JobSet (a replicated Job's pods
    are ``replicas x min(parallelism, completions)``, ``jobset_controller.go``) or a Job (``main``)."""
    spec = _m(props.get("spec"))
    jobs = (
        [
            (_m(job).get("name"), _m(job).get("replicas", 1), _m(_m(_m(job).get("template")).get("spec")))
            for job in _l(spec.get("replicatedJobs"))
        ]
        if kind == "JobSet"
        else [("main", 1, spec)]
    )
    sets = []
    for name, replicas, job in jobs:
        parallelism = _count(job.get("parallelism", 1), f"{name}: parallelism")
        completions = _count(job.get("completions", parallelism), f"{name}: completions")
        count = _count(replicas, f"{name}: replicas") * min(parallelism, completions)
        pod = _m(_m(job.get("template")).get("spec"))
        try:
            asked = _checked_requests(pod)
        except _MalformedError as err:
            raise _MalformedError(f"{name}: {err}") from None
        sets.append((str(name), count, asked, _m(pod.get("nodeSelector"))))
    return sets


def _queue_problems(
    kind: str,
    workload: Mapping[str, Any],
    queue: Mapping[str, Any],
    flavors: Mapping[Any, Any],
    namespaces: Mapping[str, Any],
) -> list[str]:
    """Why Kueue could never admit ``workload`` from ``queue`` (Kueue flavorassigner.go: per requested
    resource, the group that covers it; a flavor whose node labels contradict the pod's selector is skipped;
    the pod set's total must fit a flavor's nominal quota)."""
    meta = _m(workload.get("metadata"))
    name, namespace = meta.get("name"), meta.get("namespace")
    cq_name = _m(queue.get("metadata")).get("name")
    spec = _m(queue.get("spec"))
    ns_labels = {
        **_m(_m(_m(namespaces.get(str(namespace))).get("metadata")).get("labels")),
        "kubernetes.io/metadata.name": str(namespace),  # every namespace carries its name as a label
    }
    if not _selects(spec.get("namespaceSelector"), ns_labels):
        return [f"ClusterQueue {cq_name} does not admit namespace {namespace} ({kind} {name})"]
    problems = []
    groups = [_m(g) for g in _l(spec.get("resourceGroups"))]
    for pod_set, count, asked, selector in _pod_sets(kind, workload):
        for resource, amount in asked.items():
            group = next((g for g in groups if resource in _l(g.get("coveredResources"))), None)
            if group is None:
                problems.append(
                    f"{kind} {name} ({pod_set}) asks for {resource}, which ClusterQueue {cq_name} does not cover"
                )
                continue
            best = 0.0
            for flavor in _l(group.get("flavors")):
                flavor = _m(flavor)
                labels = _m(_m(_m(flavors.get(flavor.get("name"))).get("spec")).get("nodeLabels"))
                if any(key in selector and selector[key] != value for key, value in labels.items()):
                    continue  # its nodes are not the ones the pods ask for
                quota = next((_m(r) for r in _l(flavor.get("resources")) if _m(r).get("name") == resource), {})
                nominal = quota.get("nominalQuota", "0")
                if unseen(nominal):
                    continue
                try:
                    best = max(best, quantity(nominal))
                except ValueError:
                    problems.append(
                        f"ClusterQueue {cq_name}: the nominalQuota of {resource} on flavor {flavor.get('name')} is "
                        "not a Kubernetes quantity"
                    )
            if amount * count > best:
                problems.append(
                    f"{kind} {name} ({pod_set}) asks for {amount * count:g} {resource} but ClusterQueue {cq_name} "
                    f"offers at most {best:g} on a flavor its pods fit"
                )
    return problems


def _queue_fits(args: StackValidationArgs, resources: list[Resource], report: Report) -> None:
    judged = []
    for r in resources:
        kind = kind_of(r.resource_type)
        if kind not in KUEUE_KINDS:
            continue
        try:
            _pod_sets(kind, r.props)
        except _MalformedError as err:
            report(f"{kind} {_name(r)}: {err}: the API server would refuse it", r.urn)
            continue
        judged.append((kind, r))
    locals_ = _by_name(resources, LOCAL_QUEUE)
    if not locals_:
        return
    clusters, flavors = _by_name(resources, CLUSTER_QUEUE), _by_name(resources, RESOURCE_FLAVOR)
    namespaces = _by_name(resources, "kubernetes:core/v1:Namespace")
    for r in resources:
        kind = kind_of(r.resource_type)
        if kind is None or kind in KUEUE_KINDS or kind in NOT_WORKLOADS:
            continue
        if any(_asks_tpu(p.spec, malformed=True) for p in pods(r.resource_type, r.props)):
            report(
                f"{kind} {_name(r)} asks for TPU chips, but tpu-rl's Kueue manages JobSets and Jobs only: its pods "
                "bypass the queue and compete with queued runs for the slice",
                r.urn,
            )
    for kind, r in judged:
        meta = _m(r.props.get("metadata"))
        queue_name = _m(meta.get("labels")).get(QUEUE_LABEL)
        if not queue_name:
            report(
                f"{kind} {meta.get('name')} names no LocalQueue ({QUEUE_LABEL}) while the stack has one: it "
                "bypasses Kueue and competes with queued runs for the slice",
                r.urn,
            )
            continue
        local = locals_.get(str(queue_name))
        if local is None:
            continue  # a queue managed elsewhere: not in this stack to judge
        queue = clusters.get(str(_m(local.get("spec")).get("clusterQueue")))
        if queue is None:
            continue
        for problem in _queue_problems(kind, r.props, queue, flavors, namespaces):
            report(f"{problem}: Kueue would never admit it; size the ClusterQueue to the pools (tpu-rl:kueue)", r.urn)


kueue_queue_fits = StackValidationPolicy(
    name="kueue-queue-fits",
    description=(
        "Every step is queued, and its queue can admit it (namespace, covered resources, flavors, quota); "
        "its quantities are Kubernetes quantities."
    ),
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep the queues tpu-rl renders (tpu-rl:kueue), or size the ClusterQueue to the slice.",
    validate=_guarded_stack(_queue_fits),
)


POLICIES = [
    no_secrets_in_workloads,
    tpu_node_pool_shape,
    gke_control_plane,
    no_open_control_plane,
    no_broad_project_iam,
    iam_grants,
    stack_principals,
    scoped_bucket_grants,
    secrets_encryption,
    bucket_hardening,
    bucket_deletion_guard,
    no_ttl_on_managed_jobs,
    bounded_retries,
    pinned_images,
    trusted_registries,
    least_privilege_pods,
    reviewed_helm_charts,
    private_publish,
    hub_write_token_scope,
    no_broad_rbac,
    no_admission_webhooks,
    no_exposed_services,
    model_revision_pinned,
    cost_attribution_labels,
    tpu_budget,
    kueue_queue_fits,
]
