"""Kueue: a step its queue can never admit waits until `pulumi up` gives up, the slice idle meanwhile
(``kueue-queue-fits``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import EnforcementLevel, Severity, StackValidationArgs, StackValidationPolicy

from core.errors import TpuRlError
from core.requests import pod_requests, quantity

from .pods import NOT_WORKLOADS, _asks_tpu, _name, kind_of, pods
from .properties import _l, _m, unseen
from .resources import CLUSTER_QUEUE, LOCAL_QUEUE, RESOURCE_FLAVOR, Report, Resource, _guarded_stack

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"

KUEUE_KINDS = ("JobSet", "Job")
"""What tpu-rl's Kueue manages (``infra/k8s/kueue.py`` FRAMEWORKS): JobSets and batch Jobs."""


class _MalformedError(TpuRlError, ValueError):
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
