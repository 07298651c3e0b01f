"""Pods, wherever they are: the pod specs of a built-in workload kind at its API paths (matched by its full type
token), and anywhere else in any object what a pod is made of (a pod spec's shape, a container, an Argo
``podSpecPatch``, pod fields outside a pod spec), and the images a resource of any other provider runs; every
container of them."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from core.requests import quantity

from .properties import Unseen, _l, _m, plain, unseen
from .resources import Resource

TPU_RESOURCE = "google.com/tpu"

KUBERNETES_TYPE = re.compile(r"kubernetes:(?P<group>[A-Za-z0-9.-]+)/(?P<version>[A-Za-z0-9]+):(?P<kind>[A-Za-z0-9]+)")
WORKLOAD_KINDS: dict[str, frozenset[str]] = {
    "core": frozenset(("Pod", "PodTemplate", "ReplicationController")),
    "apps": frozenset(("Deployment", "DaemonSet", "StatefulSet", "ReplicaSet")),
    "extensions": frozenset(("Deployment", "DaemonSet", "ReplicaSet")),
    "batch": frozenset(("Job", "CronJob")),
    "jobset.x-k8s.io": frozenset(("JobSet",)),
}
"""The built-in workload kinds by API group (and JobSet's): a kind of the same name in another group is a custom kind,
judged by what it carries, never as the built-in one."""
TEMPLATED_KINDS = frozenset(("Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "ReplicationController", "Job"))
"""Kinds whose pods are ``spec.template`` (apps/v1, core/v1 ReplicationController, batch/v1 Job)."""
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
NOT_WORKLOADS = frozenset(
    (
        "kubernetes:core/v1:ConfigMap",
        "kubernetes:core/v1:Secret",
        "kubernetes:helm.sh/v3:Release",
        "kubernetes:helm.sh/v3:Chart",
        "kubernetes:helm.sh/v4:Chart",
        "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition",
        "kubernetes:apiextensions.k8s.io/v1beta1:CustomResourceDefinition",
    )
)
"""Type tokens (their ``...List`` and ``...Patch`` forms too) never searched for pods: a ConfigMap's or Secret's data,
a Helm release's values (``reviewed-helm-charts`` judges them), a CRD's schema. Matched whole: a custom kind named
``Release`` or ``Chart`` in another group is searched like any other."""
POD_FIELDS = frozenset(("hostNetwork", "hostPID", "hostIPC", "volumes", "serviceAccountName", "serviceAccount"))
"""Fields of a pod spec that give a pod the node's namespaces, volumes or an identity, wherever a custom kind puts
them (an Argo Workflow's ``spec`` or template, a Tekton ``podTemplate``)."""
WATCHED = (*CONTAINER_LISTS, *POD_FIELDS, "image", "podSpecPatch", "securityContext")
"""Keys whose value, not known yet, may hide a pod's part: noted as read (``resources._judged``)."""
IMAGE_KEYS = frozenset(("image", "imageUri", "imageUrl", "containerImage"))
"""Keys that name an image in a resource of another provider (Cloud Run ``image``, Batch and Vertex AI
``imageUri``...)."""
CONTAINER_TEXT = re.compile(r"image\w*['\"]?\s*[:=]", re.IGNORECASE)
"""Text that may declare a container (a Compute instance's ``gce-container-declaration``, an ECS container
definition): parsed as YAML or JSON and searched for images."""
MAX_TEXT = 100_000
MAX_DEPTH = 64


def kind_of(resource_type: str) -> str | None:
    """The Kubernetes kind of a ``kubernetes:<group>/<version>:<Kind>`` type token (a ``...Patch`` patches
    its kind), or None for a resource that is not a Kubernetes object. A name to show: which kind it is, by its group,
    is ``workload_kind``'s."""
    if not resource_type.startswith("kubernetes:"):
        return None
    kind = resource_type.rpartition(":")[2]
    return kind.removesuffix("Patch") or kind


def _base_type(resource_type: str) -> str:
    """A type token without its kind's ``Patch`` or ``List`` suffix (``kubernetes:core/v1:ConfigMapPatch`` ->
    ``...:ConfigMap``)."""
    head, _, kind = resource_type.rpartition(":")
    kind = kind.removesuffix("Patch") or kind
    kind = kind.removesuffix("List") or kind
    return f"{head}:{kind}"


def workload_kind(resource_type: str) -> str | None:
    """The built-in workload kind of a type token (``Pod``, ``Deployment``, ``Job``, ``JobSet``...; a ``...Patch``
    patches its kind; ``PodList`` for a list of one), by its group and kind: ``kubernetes:evil.io/v1:Job`` is a custom
    kind, None."""
    parts = KUBERNETES_TYPE.fullmatch(resource_type)
    if parts is None:
        return None
    kind = parts["kind"].removesuffix("Patch") or parts["kind"]
    return kind if kind.removesuffix("List") in WORKLOAD_KINDS.get(parts["group"], ()) else None


@dataclass(frozen=True)
class Pod:
    """A pod spec found in a resource, with the metadata its pods get."""

    where: str
    """Where it is: the replicated Job of a JobSet, or the path of the template."""
    spec: dict[str, Any]
    metadata: dict[str, Any]
    coordinator: bool = False
    """The JobSet's ``spec.coordinator.replicatedJob`` (tpu-rl's Pathways head)."""
    origin: str = "api"
    """What it is: ``api``, a pod spec at an API path of a built-in workload kind; ``shape``, a mapping shaped like a
    pod spec (a ``containers`` list) elsewhere; ``stray``, a mapping with an image outside any pod spec, judged as a pod
    of that one container; ``patch``, an Argo ``podSpecPatch`` (YAML or JSON text) read as the pod spec it merges in;
    ``unread``, a ``podSpecPatch`` this pack cannot read as one; ``part``, pod fields (host namespaces, volumes, a
    service account) outside any pod spec; ``foreign``, an image a resource of another provider runs, judged as a pod of
    that one container."""
    namespace: Any = None
    """The namespace its pods run in: its object's ``metadata.namespace`` (None: unset, the provider's default)."""

    @property
    def placed(self) -> bool:
        """Whether the pack knows where its pods get their namespace, account and host access: a built-in kind's
        pod spec."""
        return self.origin == "api"

    @property
    def whole(self) -> bool:
        """Whether it holds a pod's own fields (not a lone container, an unread patch or another provider's image)."""
        return self.origin in ("api", "shape", "patch", "part")


def pods(resource_type: str, props: Mapping[str, Any]) -> list[Pod]:
    """Every pod of a resource of any kind (plain props): a built-in workload kind's pod specs at its API paths (Pod
    ``spec``, PodTemplate ``template``, the apps/v1 kinds, ReplicationController and Job ``spec.template``, CronJob
    ``spec.jobTemplate.spec.template``, JobSet ``spec.replicatedJobs[].template.spec.template``, a ``...List``'s
    ``items``); then, anywhere else in the object, what a pod is made of (``Pod.origin``); in a resource of another
    provider, every image it names."""
    if _base_type(resource_type) in NOT_WORKLOADS:
        return []
    obj = _m(props)
    if not resource_type.startswith("kubernetes:"):
        return _foreign(obj)
    parts = KUBERNETES_TYPE.fullmatch(resource_type)
    group_version = f"{parts['group']}/{parts['version']}" if parts else ""
    namespace = _m(obj.get("metadata")).get("namespace")
    known = _pods_of(workload_kind(resource_type), group_version, obj, "", namespace)
    found: list[Pod] = []
    _embedded(obj, "", None, {id(p.spec) for p in known}, namespace, found, 0)
    return known + found


def _template(template: Any, where: str, namespace: Any) -> list[Pod]:
    t = _m(template)
    spec = t.get("spec")
    return [Pod(where, spec, _m(t.get("metadata")), namespace=namespace)] if isinstance(spec, dict) else []


def _pods_of(kind: str | None, group_version: str, obj: dict[str, Any], prefix: str, namespace: Any) -> list[Pod]:
    spec = _m(obj.get("spec"))
    if kind == "Pod":
        has_spec = isinstance(obj.get("spec"), dict)
        return [Pod(f"{prefix}spec", spec, _m(obj.get("metadata")), namespace=namespace)] if has_spec else []
    if kind == "PodTemplate":
        return _template(obj.get("template"), f"{prefix}template", namespace)
    if kind in TEMPLATED_KINDS:
        return _template(spec.get("template"), f"{prefix}spec.template", namespace)
    if kind == "CronJob":
        job = _m(_m(spec.get("jobTemplate")).get("spec"))
        return _template(job.get("template"), f"{prefix}spec.jobTemplate.spec.template", namespace)
    if kind == "JobSet":
        coordinator = _m(spec.get("coordinator")).get("replicatedJob")
        found: list[Pod] = []
        for index, job in enumerate(_l(spec.get("replicatedJobs"))):
            name = _m(job).get("name")
            where = f"{prefix}{name}" if isinstance(name, str) else f"{prefix}spec.replicatedJobs[{index}]"
            head = coordinator is not None and name == coordinator
            for pod in _template(_m(_m(_m(job).get("template")).get("spec")).get("template"), where, namespace):
                found.append(Pod(pod.where, pod.spec, pod.metadata, head, namespace=namespace))
        return found
    if kind is not None and kind.endswith("List"):
        return _items(kind, group_version, obj, prefix, namespace)
    return []


def _items(kind: str, group_version: str, obj: dict[str, Any], prefix: str, namespace: Any) -> list[Pod]:
    """The pods of a ``...List``'s items, each of the kind its ``apiVersion`` and ``kind`` name (the list's own kind
    where it names none)."""
    found = []
    for index, item in enumerate(_l(obj.get("items"))):
        item = _m(item)
        item_kind, api = item.get("kind"), item.get("apiVersion")
        if isinstance(item_kind, str):
            version = api if isinstance(api, str) else group_version
            kind_here = workload_kind(f"kubernetes:{version if '/' in version else f'core/{version}'}:{item_kind}")
        else:
            kind_here = kind.removesuffix("List")
        item_namespace = _m(item.get("metadata")).get("namespace") or namespace
        found += _pods_of(kind_here, group_version, item, f"{prefix}items[{index}].", item_namespace)
    return found


def _embedded(
    node: Any, path: str, parent: dict[str, Any] | None, held: set[int], namespace: Any, found: list[Pod], depth: int
) -> None:
    """What a pod is made of anywhere in ``node`` outside the pod specs ``held`` (``Pod.origin``), into ``found``."""
    if depth > MAX_DEPTH:
        return
    if isinstance(node, list):
        for index, item in enumerate(node):
            _embedded(item, f"{path}[{index}]", None, held, namespace, found, depth + 1)
        return
    if not isinstance(node, dict) or id(node) in held:
        return
    here = path or "(root)"
    for key in WATCHED:
        if key in node:
            unseen(node[key])  # not known yet: it may be a pod's part
    if isinstance(node.get("containers"), list):
        found.append(Pod(here, node, _m((parent or {}).get("metadata")), origin="shape", namespace=namespace))
        held |= {id(c) for c in pod_containers(node)}
    elif "image" in node:
        found.append(Pod(here, {"containers": [node]}, {}, origin="stray", namespace=namespace))
    elif POD_FIELDS & node.keys() or "securityContext" in node and "containers" not in node:
        found.append(Pod(here, node, {}, origin="part", namespace=namespace))
    patch = node.get("podSpecPatch")
    if isinstance(patch, str):
        spec = _patch_spec(patch)
        where = f"{path}.podSpecPatch" if path else "podSpecPatch"
        origin = "unread" if spec is None else "patch"
        found.append(Pod(where, spec or {}, {}, origin=origin, namespace=namespace))
    for key, value in node.items():
        _embedded(value, f"{path}.{key}" if path else str(key), node, held, namespace, found, depth + 1)


def _parsed(text: str) -> Any:
    """YAML or JSON text as plain values; None when it is not that, too long, or uses anchors and aliases (a few lines
    of aliases expand to more than any pod holds)."""
    if len(text) > MAX_TEXT:
        return None
    try:
        if any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(text, Loader=yaml.SafeLoader)):
            return None
        return plain(yaml.safe_load(text))
    except (yaml.YAMLError, ValueError, TypeError, RecursionError):
        return None


def _patch_spec(text: str) -> dict[str, Any] | None:
    """The pod spec a ``podSpecPatch`` merges into its pod (Argo: YAML or JSON); None when it is not one."""
    spec = _parsed(text)
    return spec if isinstance(spec, dict) else None


def _foreign(obj: dict[str, Any]) -> list[Pod]:
    """The images a resource of another provider runs (Cloud Run, Batch, a Compute instance's container declaration,
    a Docker container...), each judged as a pod of that one container."""
    return [
        Pod(where, {"containers": [{"name": where, "image": image}]}, {}, origin="foreign")
        for where, image in _foreign_images(obj, "", 0)
    ]


def _foreign_images(node: Any, path: str, depth: int) -> Iterator[tuple[str, Any]]:
    if depth > MAX_DEPTH:
        # Deeper than the pack reads (``plain`` made it an Unseen; a parsed text's is still a value): it may name an
        # image, so it is noted as read (a preview's advisory, "cannot judge" at `pulumi up`), never passed over.
        if isinstance(node, (dict, list, Unseen)):
            unseen(node if isinstance(node, Unseen) else Unseen(f"{path} (nested more than {MAX_DEPTH} levels)"))
        return
    if isinstance(node, list):
        for index, item in enumerate(node):
            yield from _foreign_images(item, f"{path}[{index}]", depth + 1)
    elif isinstance(node, dict):
        for key, value in node.items():
            here = f"{path}.{key}" if path else str(key)
            if key in IMAGE_KEYS and not isinstance(value, (dict, list)):
                yield here, value
            elif isinstance(value, str) and CONTAINER_TEXT.search(value):
                yield from _foreign_images(_parsed(value), here, depth + 1)
            else:
                yield from _foreign_images(value, here, depth + 1)


def unplaced(resource_type: str, props: Mapping[str, Any]) -> list[Pod]:
    """The pods of a resource the pack cannot place (plain props): containers, pod specs and patches outside a built-in
    workload kind's API paths (a custom kind's, whose pods get their namespace, account and host access where the pack
    does not see), and every image of a resource of another provider."""
    return [p for p in pods(resource_type, props) if p.origin not in ("api", "part")]


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


def _name(resource: Resource) -> str:
    name = _m(resource.props.get("metadata")).get("name")
    return name if isinstance(name, str) else resource.name


def _namespace(props: Mapping[str, Any]) -> str | None:
    namespace = _m(props.get("metadata")).get("namespace")
    return namespace if isinstance(namespace, str) else None


def host_storage(node: Any, path: str, judged: set[int], depth: int) -> Iterator[tuple[str, str, Any]]:
    """Every node path an object names outside the pod volumes judged as such: a ``hostPath`` (a PersistentVolume's,
    a template's), or a ``local`` volume's ``path`` (a local PersistentVolume)."""
    if depth > 64 or id(node) in judged:
        return
    if isinstance(node, list):
        for index, item in enumerate(node):
            yield from host_storage(item, f"{path}[{index}]", judged, depth + 1)
    elif isinstance(node, dict):
        for key, value in node.items():
            here = f"{path}.{key}" if path else str(key)
            if key == "hostPath" and value is not None:
                yield here, "hostPath", _m(value).get("path")
            elif key == "local" and isinstance(value, dict) and "path" in value:
                yield here, "local", value.get("path")
            else:
                yield from host_storage(value, here, judged, depth + 1)
