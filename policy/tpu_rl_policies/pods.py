"""Pods, wherever they are: every pod spec of a resource of any kind by the API paths of that kind, and every
container of it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.requests import quantity

from .properties import _l, _m, plain, unseen
from .resources import Resource

TPU_RESOURCE = "google.com/tpu"

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
    stray: bool = False
    """A mapping with an ``image`` outside any pod spec, judged as a pod of that one container."""


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
    shapes = list(_pod_shapes(obj, prefix.rstrip(".") or "", None))
    # Any other mapping with an ``image`` (an Argo ``template.container``, a Tekton ``steps[]`` entry...) is judged
    # as the one container of a pod (image, privilege, capabilities); ``known-workload-kinds`` refuses the object.
    held = {id(c) for pod in shapes for c in pod_containers(pod.spec)}
    strays = [Pod(where, {"containers": [c]}, {}, stray=True) for where, c in _images(obj, prefix.rstrip("."), held)]
    return shapes + strays


def _images(obj: Any, path: str, held: set[int]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every mapping with an ``image`` key in ``obj`` that is not one of the containers ``held``, with its path."""
    if isinstance(obj, dict):
        if id(obj) in held:
            return
        if "image" in obj:
            yield path or "(root)", obj
        for key, value in obj.items():
            yield from _images(value, f"{path}.{key}" if path else str(key), held)
    elif isinstance(obj, list):
        for index, value in enumerate(obj):
            yield from _images(value, f"{path}[{index}]", held)


def stray_images(resource_type: str, props: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The mappings with an ``image`` of a Kubernetes object that are no container of a pod spec the pack knows how
    to find (a kind's API paths, a ``containers`` list): what an unknown workload kind runs (plain props)."""
    kind = kind_of(resource_type)
    if kind is None or kind in NOT_WORKLOADS:
        return []
    obj = _m(props)
    known = [p for p in _pods_of(kind, obj, "") if not p.stray]
    held = {id(c) for pod in known for c in pod_containers(pod.spec)}
    return list(_images(obj, "", held))


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
