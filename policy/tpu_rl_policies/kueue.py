"""Kueue: a step its queue can never admit waits until `pulumi up` gives up, the slice idle meanwhile
(``kueue-queue-fits``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import EnforcementLevel, Severity, StackValidationArgs, StackValidationPolicy

from core.errors import TpuRlError
from core.requests import pod_requests, quantity

from .pods import _asks_tpu, _name, kind_of, pods
from .properties import _l, _m, judging, unseen
from .resources import CLUSTER_QUEUE, DEPLOYMENT, LOCAL_QUEUE, RESOURCE_FLAVOR, Report, Resource, _guarded_stack

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"

KUEUE_KINDS = ("JobSet", "Job")
"""What tpu-rl's Kueue manages (``infra/k8s/kueue.py`` FRAMEWORKS): JobSets and batch Jobs."""


class _MalformedError(TpuRlError):
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


PodSet = tuple[str, int, dict[str, float], dict[str, Any], list[Any]]
"""(pod set, pods, requests of one pod, node selector, tolerations)."""


def _pod_sets(kind: str, props: Mapping[str, Any]) -> list[PodSet]:
    """Kueue's pod sets of a JobSet (a replicated Job's pods are ``replicas x min(parallelism, completions)``,
    ``jobset_controller.go``) or a Job (``main``)."""
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
        sets.append((str(name), count, asked, _m(pod.get("nodeSelector")), _l(pod.get("tolerations"))))
    return sets


def _tolerates(tolerations: list[Any], taint: Mapping[Any, Any]) -> bool:
    """Whether a pod with ``tolerations`` tolerates ``taint`` (Kubernetes ``Toleration.ToleratesTaint``: an empty
    effect matches every effect, an empty key with ``Exists`` every taint; ``Exists`` any value, ``Equal`` the same)."""
    for toleration in tolerations:
        toleration = _m(toleration)
        if toleration.get("effect") not in (None, "", taint.get("effect")):
            continue
        exists = toleration.get("operator") == "Exists"
        if toleration.get("key") in (None, "") and exists:
            return True
        if toleration.get("key") == taint.get("key") and (exists or toleration.get("value") == taint.get("value")):
            return True
    return False


def _fits(flavor: Mapping[Any, Any], selector: Mapping[str, Any], tolerations: list[Any]) -> bool:
    """Whether Kueue may give a pod set ``flavor`` (v0.17.8 ``flavorassigner.go`` ``checkFlavorForPodSets``): it
    tolerates each of the flavor's ``NoSchedule``/``NoExecute`` taints, and its node selector does not contradict the
    flavor's node labels on the flavor's own keys (``flavorSelector``)."""
    spec = _m(flavor.get("spec"))
    taints = [_m(t) for t in _l(spec.get("nodeTaints")) if _m(t).get("effect") in ("NoSchedule", "NoExecute")]
    if not all(_tolerates(tolerations, taint) for taint in taints):
        return False
    labels = _m(spec.get("nodeLabels"))
    return not any(key in selector and selector[key] != value for key, value in labels.items())


def _queue_problems(
    kind: str,
    workload: Mapping[str, Any],
    queue: Mapping[str, Any],
    flavors: Mapping[Any, Any],
    namespaces: Mapping[str, Any],
) -> list[str]:
    """Why Kueue could never admit ``workload`` from ``queue`` (Kueue flavorassigner.go: per requested
    resource, the group that covers it; a flavor whose taints the pods do not tolerate or whose node labels contradict
    the pod's selector is skipped (``_fits``); the pod set's total must fit a flavor's nominal quota)."""
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
    problems: list[str] = []
    groups = [_m(g) for g in _l(spec.get("resourceGroups"))]
    for pod_set, count, asked, selector, tolerations in _pod_sets(kind, workload):
        where = f"{kind} {name} ({pod_set})"
        touched: dict[int, list[str]] = {}
        for resource in sorted(asked, key=lambda r: (r in ("cpu", "memory"), r)):  # a pod set's chips first
            index = next((i for i, g in enumerate(groups) if resource in _l(g.get("coveredResources"))), None)
            if index is None:
                problems.append(f"{where} asks for {resource}, which ClusterQueue {cq_name} does not cover")
            else:
                touched.setdefault(index, []).append(resource)
        for index, resources in touched.items():
            need = {resource: asked[resource] * count for resource in resources}
            problems += _group_problems(where, cq_name, groups[index], need, flavors, selector, tolerations)
    return problems


def _group_problems(  # noqa: PLR0913 (the pod set, its queue's group and what it asks)
    where: str,
    cq_name: Any,
    group: Mapping[str, Any],
    need: Mapping[str, float],
    flavors: Mapping[Any, Any],
    selector: Mapping[str, Any],
    tolerations: list[Any],
) -> list[str]:
    """Why no flavor of one resource group admits a pod set that needs ``need`` of its resources: Kueue gives a pod
    set one flavor per group, the first that fits it (``_fits``) with quota for all it asks (``flavorassigner.go``
    ``findFlavorForPodSets``). One line: the first resource (chips before cpu and memory) that no fitting flavor
    offers enough of, or, when each is offered but by different flavors, that none offers all."""
    problems: list[str] = []
    offers: list[dict[str, float]] = []
    for flavor in _l(group.get("flavors")):
        flavor = _m(flavor)
        if not _fits(_m(flavors.get(flavor.get("name"))), selector, tolerations):
            continue  # its nodes are not the ones the pods ask for, or may run on
        offered = {}
        for resource in need:
            quota = next((_m(r) for r in _l(flavor.get("resources")) if _m(r).get("name") == resource), {})
            nominal = quota.get("nominalQuota", "0")
            if unseen(nominal):
                offered[resource] = 0.0  # not known yet: judged at `up`, never passed here
                continue
            try:
                offered[resource] = quantity(nominal)
            except ValueError:
                offered[resource] = 0.0
                problems.append(
                    f"ClusterQueue {cq_name}: the nominalQuota of {resource} on flavor {flavor.get('name')} is not "
                    "a Kubernetes quantity"
                )
        offers.append(offered)
    if any(all(offered[r] >= amount for r, amount in need.items()) for offered in offers):
        return problems
    for resource, amount in need.items():
        best = max((offered[resource] for offered in offers), default=0.0)
        if amount > best:
            return [
                *problems,
                f"{where} asks for {_shown(resource, amount)} {resource} but ClusterQueue {cq_name} offers at most "
                f"{_shown(resource, best)} on a "
                "flavor its pods fit",
            ]
    return [*problems, f"{where} asks for {', '.join(need)} that no one flavor of ClusterQueue {cq_name} offers all of"]


BINARY_UNITS = (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
"""The binary suffixes of a Kubernetes quantity, largest first."""


def _shown(resource: str, amount: float) -> str:
    """``amount`` of ``resource`` as a person reads it: bytes (memory, ephemeral storage, huge pages) in the largest
    binary unit that holds them whole (1073741824 is ``1Gi``), anything else as the number (32, 0.5)."""
    whole = amount == int(amount)
    if whole and (resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-")):
        for suffix, size in BINARY_UNITS:
            if amount >= size and amount % size == 0:
                return f"{int(amount) // size}{suffix}"
    return f"{int(amount)}" if whole else f"{amount:g}"


METADATA_NAME = "kubernetes.io/metadata.name"
MANAGED_BY = {"JobSet": "jobset.sigs.k8s.io/jobset-controller", "Job": "kubernetes.io/job-controller"}
"""The controller that runs each kind Kueue manages for tpu-rl: its default (``spec.managedBy`` unset)."""


def _own_queues(resources: list[Resource], report: Report) -> None:
    """A ClusterQueue admits the stack's namespace only: its selector is exactly the namespace's name label (``{}``
    selects every namespace, another label whatever namespaces carry it); none selects no namespace."""
    wanted = {"matchLabels": {METADATA_NAME: DEPLOYMENT.namespace()}}
    for r in resources:
        if r.resource_type != CLUSTER_QUEUE:
            continue
        with judging():
            selector = _m(r.props.get("spec")).get("namespaceSelector")
            if not unseen(selector) and selector is not None and selector != wanted:
                report(
                    f"ClusterQueue {_name(r)} selects namespaces by {selector!s}, not the stack's namespace only "
                    f"({wanted}): pods of other namespaces would take the slice's quota",
                    r.urn,
                )


def _controller(kind: str, r: Resource, report: Report) -> None:
    managed_by = _m(r.props.get("spec")).get("managedBy")
    if not unseen(managed_by) and managed_by not in (None, MANAGED_BY[kind]):
        report(
            f"{kind} {_name(r)} is managed by {managed_by}, not the {kind} controller: another controller runs its "
            "pods where neither Kueue nor the pack sees them; remove spec.managedBy",
            r.urn,
        )


def _queue_fits(args: StackValidationArgs, resources: list[Resource], report: Report) -> None:
    _own_queues(resources, report)
    judged = []
    for r in resources:
        kind = kind_of(r.resource_type)
        if kind not in KUEUE_KINDS:
            continue
        with judging():
            _controller(kind, r, report)
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
        if kind is None or kind in KUEUE_KINDS:
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
        "Every step is queued and run by its kind's own controller, and its queue can admit it (namespace, covered "
        "resources, flavors, quota); a ClusterQueue admits the stack's namespace only; quantities are quantities."
    ),
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep the queues tpu-rl renders (tpu-rl:kueue), or size the ClusterQueue to the slice.",
    validate=_guarded_stack(_queue_fits),
)
