"""What a pod binds to outside itself, judged against what the stack declares (``pod-bindings``): the namespace it runs
in, the Kubernetes service account it runs as (and so the API token it holds), and the persistent volumes it claims.
A resource policy sees one object; these need the stack's ServiceAccounts, Namespaces, claims, volumes and classes."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from pulumi_policy import EnforcementLevel, Severity, StackValidationArgs, StackValidationPolicy

from .pods import Pod, _name, kind_of, pods
from .properties import Unseen, _l, _m, judging, unseen
from .resources import (
    CLAIM,
    DEPLOYMENT,
    NAMESPACE,
    PERSISTENT_VOLUME,
    STORAGE_CLASS,
    Report,
    Resource,
    _guarded_stack,
)

SERVICE_ACCOUNT = "kubernetes:core/v1:ServiceAccount"
STATIC_PROVISIONER = "kubernetes.io/no-provisioner"
"""A class whose claims bind only volumes made beforehand (local volumes among them): what they bind is the cluster's,
not the stack's."""
FIX_ACCOUNT = "run it as its step's own Kubernetes service account, in the stack's namespace (infra/k8s)"


@dataclass
class Declared:
    """What the stack declares that a pod may bind to."""

    namespaces: set[Any] = field(default_factory=set)
    accounts: set[tuple[Any, Any]] = field(default_factory=set)
    """(namespace, name) of each ServiceAccount."""
    claims: dict[tuple[Any, Any], tuple[dict[str, Any], str]] = field(default_factory=dict)
    """(namespace, name) -> the claim's spec and URN."""
    volumes: set[Any] = field(default_factory=set)
    """Names of the PersistentVolumes the stack declares (each judged itself, ``least-privilege-pods``)."""
    classes: dict[Any, Any] = field(default_factory=dict)
    """StorageClass name -> its provisioner."""
    pending: list[Unseen] = field(default_factory=list)
    """Names of the stack's ServiceAccounts not known yet: a pod's account may be one of them."""


def _declared(resources: list[Resource]) -> Declared:
    """What the stack declares; its namespace is also the one its configuration names (``tpu-rl:namespace``, as the
    engine sends it, or its default), which the program may use without creating it."""
    declared = Declared(namespaces={DEPLOYMENT.namespace()})
    for r in resources:
        metadata = _m(r.props.get("metadata"))
        name, namespace = metadata.get("name"), metadata.get("namespace")
        if r.resource_type == NAMESPACE:
            declared.namespaces.add(name)
        elif r.resource_type == SERVICE_ACCOUNT:
            if isinstance(name, Unseen) or isinstance(namespace, Unseen):
                field = "name" if isinstance(name, Unseen) else "namespace"
                declared.pending.append(Unseen(f"ServiceAccount {r.name}: metadata.{field}"))
            else:
                declared.accounts.add((namespace, name))
        elif r.resource_type == CLAIM:
            declared.claims[(namespace, name)] = (_m(r.props.get("spec")), r.urn)
        elif r.resource_type == PERSISTENT_VOLUME:
            declared.volumes.add(name)
        elif r.resource_type == STORAGE_CLASS:
            declared.classes[name] = r.props.get("provisioner")
    return declared


def _pod_bindings(args: StackValidationArgs, resources: list[Resource], report: Report) -> None:
    declared = _declared(resources)
    users: dict[tuple[Any, Any], set[str]] = defaultdict(set)
    labels = {r.urn: f"{kind_of(r.resource_type)} {_name(r)}" for r in resources}
    for r in resources:
        if kind_of(r.resource_type) is None:
            continue

        def say(message: str, urn: str | None = r.urn, label: str = labels[r.urn]) -> None:
            report(f"{label}: {message}", urn)

        for pod in pods(r.resource_type, r.props):
            if pod.whole:
                with judging():
                    _judge_pod(pod, declared, users, r.urn, say)
    for (namespace, name), urns in users.items():
        if len(urns) > 1:
            for urn in sorted(urns):
                others = ", ".join(labels[u] for u in sorted(urns) if u != urn)
                report(
                    f"{labels[urn]}: service account {namespace}/{name} is also the account of {others}: each "
                    "workload runs as a service account of its own, so that one step's rights are not another's",
                    urn,
                )
    for (namespace, name), (spec, urn) in declared.claims.items():
        with judging():
            for problem in _claim_problems(spec, declared):
                report(f"PersistentVolumeClaim {namespace}/{name} {problem}", urn)


def _judge_pod(pod: Pod, declared: Declared, users: dict[tuple[Any, Any], set[str]], urn: str, say: Report) -> None:
    spec, namespace = pod.spec, pod.namespace
    if namespace not in declared.namespaces:
        stack = ", ".join(sorted(str(n) for n in declared.namespaces))  # never empty: the configured or default one
        say(
            f"pod {pod.where} runs in namespace {namespace or '(unset: the provider default)'}, not the stack's "
            f"({stack}): its service account and Secrets there are outside the stack's review; set "
            "metadata.namespace to tpu-rl:namespace"
        )
    names = list(dict.fromkeys(n for n in (spec.get("serviceAccountName"), spec.get("serviceAccount")) if n))
    for name in names:
        if name == "default":
            continue
        if (namespace, name) in declared.accounts:
            users[(namespace, name)].add(urn)
            continue
        for pending in declared.pending:
            unseen(pending)  # perhaps that account: judged at `pulumi up`
        say(
            f"pod {pod.where} runs as service account {namespace}/{name}, which the stack does not declare: "
            f"{FIX_ACCOUNT}"
        )
    if pod.origin in ("api", "shape") and all(name == "default" for name in names):
        _default_account(pod, say)
    for volume in _l(spec.get("volumes")):
        volume = _m(volume)
        _judge_claim_volume(pod, volume, declared, say)


def _default_account(pod: Pod, say: Report) -> None:
    """A pod of the namespace's ``default`` account holds no API token: not mounted (``automountServiceAccountToken:
    false`` on the pod, since the account is the cluster's), none projected."""
    automount = pod.spec.get("automountServiceAccountToken")
    if automount is not False:
        shown = "unset" if automount is None else str(automount).lower()
        say(
            f"pod {pod.where} runs as the namespace's default service account with its API token mounted "
            f"(automountServiceAccountToken: {shown}): set automountServiceAccountToken: false on the pod, or "
            f"{FIX_ACCOUNT}"
        )
    for volume in _l(pod.spec.get("volumes")):
        for source in _l(_m(_m(volume).get("projected")).get("sources")):
            if "serviceAccountToken" in _m(source):
                say(
                    f"pod {pod.where}: volume {_m(volume).get('name')} projects a token of the default service "
                    f"account: remove it, or {FIX_ACCOUNT}"
                )


def _judge_claim_volume(pod: Pod, volume: dict[str, Any], declared: Declared, say: Report) -> None:
    name = volume.get("name")
    if "persistentVolumeClaim" in volume:
        claim = _m(volume.get("persistentVolumeClaim")).get("claimName")
        if claim is None:
            say(
                f"pod {pod.where}: volume {name} names no claim (persistentVolumeClaim.claimName): name a claim the "
                f"stack declares in namespace {pod.namespace}"
            )
        elif (pod.namespace, claim) not in declared.claims:
            say(
                f"pod {pod.where}: volume {name} claims {claim}, which the stack does not declare in namespace "
                f"{pod.namespace}: it may be bound to any volume of the cluster, the node's disk among them; declare "
                "the claim in the stack"
            )
    if "ephemeral" in volume:
        spec = _m(_m(_m(volume.get("ephemeral")).get("volumeClaimTemplate")).get("spec"))
        for problem in _claim_problems(spec, declared):
            say(f"pod {pod.where}: volume {name}'s claim {problem}")


def _claim_problems(spec: dict[str, Any], declared: Declared) -> list[str]:
    """What a claim may bind that the stack does not judge: a volume it names (``volumeName``) that the stack does
    not declare, a class the stack does not declare, or one of volumes made beforehand (``storageClassName: ""``,
    ``kubernetes.io/no-provisioner``). A volume the stack declares is judged itself (``least-privilege-pods``)."""
    volume, storage_class = spec.get("volumeName"), spec.get("storageClassName")
    fix = "claim from a class the stack declares"
    if volume:
        if volume in declared.volumes:
            return []
        return [f"binds PersistentVolume {volume}, which the stack does not declare: declare the volume, or {fix}"]
    if storage_class is None:
        return []  # the cluster's default class (GKE's: Persistent Disk)
    if storage_class == "":
        empty = 'binds whichever volume without a class the cluster has (storageClassName: "")'
        return [f"{empty}, the node's disk among them: {fix}"]
    if storage_class not in declared.classes:
        unknown = "which the stack does not declare (a class of local volumes binds the node's disk)"
        return [f"claims from StorageClass {storage_class}, {unknown}: {fix}"]
    if declared.classes[storage_class] == STATIC_PROVISIONER:
        beforehand = f"whose volumes are made beforehand ({STATIC_PROVISIONER}: local volumes among them)"
        return [f"claims from StorageClass {storage_class}, {beforehand}: claim from a class with a provisioner"]
    return []


pod_bindings = StackValidationPolicy(
    name="pod-bindings",
    description=(
        "Every pod runs in the stack's namespace as a Kubernetes service account the stack declares for it alone "
        "(or the default account without an API token), and claims only volumes the stack judges."
    ),
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "Keep the pods of workloads/specs/step_manifests.py: each step's own service account (infra/k8s), the TPU "
        "workers as default with automountServiceAccountToken: false, no persistent volume."
    ),
    validate=_guarded_stack(_pod_bindings),
)
