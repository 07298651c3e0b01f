"""Kubernetes platform on the cluster: JobSet controller, Kueue and the stack's queues, workload namespace,
service account, the token Secrets."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import pulumi
import pulumi_kubernetes as k8s

from core.errors import BAD_INPUT
from core.names import HF_WRITE_SECRET
from infra.k8s import credentials, fit, kueue, live
from infra.k8s.kueue import KueueObjects
from infra.k8s.manifests import (
    JOBSET_CHART,
    JOBSET_CRD,
    JOBSET_NAMESPACE,
    head_access,
    helm_release_problem,
    jobset_crd_problem,
    namespace_manifest,
    network_policies,
    releases_in_state,
    scratch_storage_class,
    service_account_manifest,
    token_secret_manifest,
)
from infra.k8s.object import KubernetesObject
from infra.stop import StopError, log_warn, stop
from infra.threads import in_daemon_thread

__all__ = ["JOBSET_CHART", "JOBSET_NAMESPACE", "ClusterReads", "DestroyGuard", "KubernetesPlatform", "PlatformArgs"]
T = TypeVar("T")
R = TypeVar("R", bound=pulumi.Resource)


@dataclass(frozen=True)
class ClusterReads:
    """How the platform reads the live cluster: a reader (``connect``) of the cluster's kubeconfig (secret), once
    it is known. Given in `pulumi up` and a preview; the offline plan gives none and reads nothing."""

    kubeconfig: pulumi.Output[str]
    connect: live.Connect
    """A reader of the cluster from its kubeconfig (``infra.k8s.live.ClusterReader`` in a real run)."""
    releases: str | None
    """The Helm releases the stack's state holds, as `make up` handed them over (``RELEASES_IN_STATE``'s text; None:
    not handed over, e.g. `pulumi up` run by hand)."""


@dataclass(frozen=True)
class PlatformArgs:
    """What the Kubernetes platform is built on, and nothing else (each manifest from ``infra.k8s.manifests`` and
    ``infra.k8s.kueue``, filled by the program from the settings)."""

    protect: bool
    """``tpu-rl:protect``: the Helm releases' destroy guards are protected."""
    labels: dict[str, str]
    """Every object's labels (``infra.k8s.manifests.platform_labels``)."""
    namespace: str
    """The workflow's namespace."""
    kube_context: str
    """The cluster's kubeconfig context (``Settings.kube_context``), which the commands the checks print name."""
    scratch_disk_type: str
    """The CPU pool's disk type: the scratch StorageClass's."""
    jobset_version: str
    """JobSet's chart version."""
    kueue: KueueObjects | None
    """The stack's Kueue (None: the cluster's own, nothing installed)."""
    local_queue: str | None
    """The LocalQueue the steps are queued to (an output, whoever installs Kueue; None: not queued)."""
    accounts: Mapping[str, str]
    """CPU step -> its Kubernetes service account name (``Names.ksas``)."""
    provider: k8s.Provider
    """The cluster's Kubernetes provider."""
    cluster: pulumi.Resource | None
    """The stack's GKE cluster: every object here is deleted with it (None: an existing cluster, where `pulumi destroy`
    deletes each object itself and nothing else)."""
    step_sa_emails: Mapping[str, pulumi.Input[str]]
    """CPU step -> the Google service account its Kubernetes service account maps to (a step missing: none, its pods
    run as their node's identity)."""
    workload_grants: Sequence[pulumi.Resource]
    """Their Workload Identity bindings and bucket grants (the service accounts wait for them)."""
    hf_token: pulumi.Output[str] | None
    """The Hugging Face token (secret), or None when the workflow is off."""
    hf_write_token: pulumi.Output[str] | None = None
    """The publication's write token (secret), or None without ``tpu-rl:publish.repo``: a Secret of its own,
    which only the publish step's container references."""
    reads: ClusterReads | None = None
    """The cluster's reads: in `pulumi up` the JobSet CRD and Helm's storage before each chart changes and the
    webhooks before the first Kueue object and the first JobSet, in a preview the JobSet CRD; None (the offline
    plan): no check."""
    first_jobset: Mapping[str, Any] | None = None
    """The workflow's first step's JobSet (None without the workflow): dry-run created before any step is."""
    existing: fit.Needs | None = None
    """An existing cluster (``tpu-rl:existingCluster``): no controller is installed (JobSet and Kueue are the
    cluster's), and `up` and a preview check the cluster has what the steps need (``infra.k8s.fit``) before the
    namespace is created; None: the stack's own cluster."""
    head_account: str | None = None
    """The training head's Kubernetes service account (``core.names.head_ksa``; None without the workflow): made
    with its Role and RoleBinding (``infra.k8s.manifests.head_access``), which every step waits for."""


class KubernetesPlatform(pulumi.ComponentResource):
    """Everything the workflow's objects need before they can be created.

    Every resource is ``deleted_with`` the cluster: destroying the cluster removes them, so ``pulumi destroy``
    does not wait on finalizers, run state or an unreachable API server. (That is also why a protected stack
    needs ``DestroyGuard``: ``deletedWith`` drops them from the state when the cluster's delete is only planned.)
    Nothing here claims a disk, a load balancer or an address (the steps' scratch is an ``emptyDir``:
    ``workloads.specs.step_manifests.scratch_volume``), so the cluster's deletion leaves nothing billed behind.

    In `pulumi up` (``PlatformArgs.reads``) three things the engine and the provider would not wait for are
    checked: the cluster's JobSet CRD serves the chart version before the release changes
    (``infra.k8s.manifests.jobset_crd_problem``; a preview checks it too), no Helm operation of a release is left
    pending before its install or upgrade, nor installed while the stack's state does not hold it (what ``make up``
    passes in ``TPU_RL_RELEASES_IN_STATE``: ``infra.k8s.manifests.helm_release_problem``), and the Kueue and JobSet
    webhooks admit a dry run before the first Kueue object and the first step
    (``infra.k8s.live.ClusterReader.wait_admitted``).
    """

    jobset: k8s.helm.v3.Release | None
    """JobSet's release (None on an existing cluster: its own JobSet)."""
    kueue: k8s.helm.v3.Release | None
    guards: list[DestroyGuard]
    """Each Helm release's destroy guard (``release_guard``): JobSet's, then Kueue's."""
    queues: list[KubernetesObject]
    """ResourceFlavors, ClusterQueue and LocalQueue (empty when Kueue is not ours)."""
    namespace: KubernetesObject
    network_policies: list[KubernetesObject]
    """Default-deny ingress in the workflow namespace, and the Pathways ports between the training's pods."""
    service_accounts: dict[str, KubernetesObject]
    storage_class: KubernetesObject | None
    hf_secret: KubernetesObject | None
    hf_write_secret: KubernetesObject | None
    head_access: list[KubernetesObject]
    """The training head's service account, its Role and RoleBinding (empty without the workflow)."""

    def __init__(self, name: str, args: PlatformArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tpu-rl:k8s:KubernetesPlatform", name, None, opts)
        provider, cluster = args.provider, args.cluster
        child = pulumi.ResourceOptions(parent=self, provider=provider, deleted_with=cluster)
        self._reads = args.reads
        self._checks = args.reads is not None and not pulumi.runtime.is_dry_run()
        self._reader: live.ClusterReader | None = None
        self._checking = threading.Lock()
        # The Helm releases the stack's state holds, as `make up` read them (None: unknown, e.g. `pulumi up` by hand).
        self._in_state = releases_in_state(args.reads.releases) if args.reads is not None and self._checks else None
        self._stack = pulumi.get_stack()
        self._guarded = args.protect  # tpu-rl:protect (not the SDK's own _protect)
        self._context = args.kube_context
        self.jobset = None
        fitted: list[pulumi.Input[pulumi.Resource]] = []
        if args.existing is None:
            self.jobset = self._install_jobset(self._jobset_version(args, provider), child)
        elif args.reads is not None:
            needs = args.existing
            fitted.append(self._after(provider.id, lambda reader: self._fits(reader, needs, provider)))
        # Each release is guarded from its create on (``release_guard``), not only once the platform is; registered
        # on an existing cluster too (guarding nothing), so that no guard is ever deleted by a change of cluster.
        self.guards = [DestroyGuard(release_guard("jobset"), args.protect, [r for r in [self.jobset] if r])]
        labels = args.labels
        self.namespace = KubernetesObject(
            "namespace",
            namespace_manifest(args.namespace, labels),
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=fitted)),
        )
        # No step claims a disk any more (their scratch is an emptyDir); the class stays so that the `up` which
        # replaces the steps of earlier versions deletes their claims' disks with their class in place (an existing
        # cluster never had them: no class there). StorageClass parameters are immutable: a new disk type replaces it.
        self.storage_class = None
        if args.existing is None:
            self.storage_class = KubernetesObject(
                "scratch-storage-class",
                scratch_storage_class(args.scratch_disk_type, labels),
                opts=pulumi.ResourceOptions.merge(
                    child, pulumi.ResourceOptions(replace_on_changes=["parameters"], delete_before_replace=True)
                ),
            )
        in_namespace = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[self.namespace]))
        self.service_accounts = self._service_accounts(args, labels, in_namespace)
        self.head_access = [
            KubernetesObject(f"train-head-{obj['kind'].lower()}", obj, opts=in_namespace)
            for obj in (head_access(args.namespace, args.head_account, labels) if args.head_account else [])
        ]
        self.network_policies = [
            KubernetesObject(f"network-policy-{policy['metadata']['name']}", policy, opts=in_namespace)
            for policy in network_policies(args.namespace, labels)
        ]
        self.kueue = None
        self.queues = []
        if args.kueue is not None:
            self._install_kueue(args.kueue, child)
        # Registered whether or not Kueue is installed (then guarding nothing), so turning it off never deletes a
        # protected guard.
        self.guards.append(
            DestroyGuard(release_guard("kueue"), args.protect, [self.kueue] if self.kueue is not None else [])
        )
        self.hf_secret, self.hf_write_secret = self._token_secrets(args, labels, in_namespace)
        self.register_outputs(
            {
                "namespace": args.namespace,
                "jobsetVersion": args.jobset_version,
                "kueueVersion": args.kueue.version if args.kueue is not None else None,
                "localQueue": args.local_queue,
            }
        )

    def _jobset_version(self, args: PlatformArgs, provider: k8s.Provider) -> pulumi.Input[str]:
        """JobSet's chart version, once the checks allow it: at `up`, once the cluster's CRD serves it
        (docs/upgrades.md "Upgrading JobSet or Kueue") and Helm's storage has no operation of it pending
        (docs/state.md "A Helm release left pending"), so a refusal stops `up` before the chart changes; at a
        preview, the CRD check alone."""
        wanted = args.jobset_version
        if self._checks:
            return self._after(
                provider.id,
                lambda reader: self._helm_free(
                    reader, JOBSET_NAMESPACE, "jobset", self._jobset_crd(reader, wanted, self._context, self._stack)
                ),
            )
        if args.reads is not None:
            # A preview refuses an older CRD too (when the cluster exists: an unknown provider ID runs no check). When
            # it cannot read the cluster, one warning says so: the workflow's, which reads the same cluster
            # (workloads.reader.LiveReader: once per preview), or, without the workflow, this check's. Helm's
            # storage is read by `up` only, which is where a release is installed or upgraded.
            warn = args.first_jobset is None
            return self._after(
                provider.id,
                lambda reader: self._jobset_crd(reader, wanted, self._context, self._stack, preview=True, warn=warn),
            )
        return wanted

    @staticmethod
    def _install_jobset(version: pulumi.Input[str], child: pulumi.ResourceOptions) -> k8s.helm.v3.Release:
        """Helm v3 Release (not Chart v4, which cannot preview a cluster that does not exist yet); it waits until the
        controller and its webhook are ready."""
        return k8s.helm.v3.Release(
            "jobset",
            name="jobset",
            chart=JOBSET_CHART,
            version=version,
            namespace=JOBSET_NAMESPACE,
            create_namespace=True,
            atomic=True,
            timeout=900,
            opts=child,
        )

    @staticmethod
    def _service_accounts(
        args: PlatformArgs, labels: dict[str, str], in_namespace: pulumi.ResourceOptions
    ) -> dict[str, KubernetesObject]:
        """Each step's Kubernetes service account. Pods of these accounts write to the bucket as soon as they run:
        each waits for the Workload Identity bindings and the bucket grants."""
        return {
            step: KubernetesObject(
                f"{step}-ksa",
                service_account_manifest(args.namespace, ksa, labels, args.step_sa_emails.get(step)),
                opts=pulumi.ResourceOptions.merge(
                    in_namespace,
                    pulumi.ResourceOptions(depends_on=list(args.workload_grants)),
                ),
            )
            for step, ksa in args.accounts.items()
        }

    def _token_secrets(
        self, args: PlatformArgs, labels: dict[str, str], in_namespace: pulumi.ResourceOptions
    ) -> tuple[KubernetesObject | None, KubernetesObject | None]:
        """The Hub tokens' Secrets (the read token's, the publication's write token's), each only when configured."""
        namespace = args.namespace
        read = write = None
        if args.hf_token is not None:
            # Every step waits for this Secret (``ready``): once the JobSet and Kueue webhooks admit a dry run of
            # the first step's JobSet, so no step's create meets a webhook not yet reachable.
            admitted = self._jobsets_admitted(args.first_jobset)
            read = KubernetesObject(
                "hf-token",
                token_secret_manifest(namespace, labels, pulumi.Output.secret(args.hf_token)),
                opts=in_namespace
                if admitted is None
                else pulumi.ResourceOptions.merge(in_namespace, pulumi.ResourceOptions(depends_on=[admitted])),
            )
        if args.hf_write_token is not None:
            write = KubernetesObject(
                "hf-write-token",
                token_secret_manifest(namespace, labels, pulumi.Output.secret(args.hf_write_token), HF_WRITE_SECRET),
                opts=in_namespace,
            )
        return read, write

    def _install_kueue(self, objects: KueueObjects, child: pulumi.ResourceOptions) -> None:
        """Kueue's chart (after JobSet's, so its JobSet integration starts with the CRD in place), then the
        flavors and queues (after the chart: its CRDs and webhooks); on an existing cluster (no JobSet release of
        the stack's), the flavors and queues only, on the cluster's own Kueue."""
        if self.jobset is None:
            self._kueue_queues(objects, child, [self.namespace])
            return
        version: pulumi.Input[str] = objects.version
        if self._checks:
            # Read once JobSet's release is in place (Kueue's waits for it anyway): a pending Kueue release stops
            # `up` before its install or upgrade.
            wanted = objects.version
            version = self._after(
                self.jobset.id, lambda reader: self._helm_free(reader, kueue.NAMESPACE, "kueue", wanted)
            )
        self.kueue = k8s.helm.v3.Release(
            "kueue",
            name="kueue",
            chart=kueue.CHART,
            version=version,
            namespace=kueue.NAMESPACE,
            create_namespace=True,
            atomic=True,
            timeout=900,
            values=objects.helm_values,
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[self.jobset])),
        )
        tpu_flavor = objects.tpu_flavor
        chart: list[pulumi.Input[pulumi.Resource]] = [self.kueue]
        if self._checks:
            # Ready is not reachable: Helm's wait sees the webhook's pod Ready before its Service's endpoints are
            # programmed, and the provider does not retry a create a webhook failed (infra.k8s.live WEBHOOK_BOUND).
            release = self.kueue
            chart.append(self._after(release.id, lambda reader: self._admitted(reader, tpu_flavor, release)))
        self._kueue_queues(objects, child, chart)

    def _kueue_queues(
        self, objects: KueueObjects, child: pulumi.ResourceOptions, after: list[pulumi.Input[pulumi.Resource]]
    ) -> None:
        """The stack's ResourceFlavors, ClusterQueue and LocalQueue, after ``after`` (Kueue's chart, its webhook)."""
        tpu_flavor = objects.tpu_flavor
        after_chart = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=after))
        flavors = [
            KubernetesObject("kueue-tpu-flavor", tpu_flavor, opts=after_chart),
            KubernetesObject("kueue-cpu-flavor", objects.cpu_flavor, opts=after_chart),
        ]
        cluster_queue = KubernetesObject(
            "kueue-cluster-queue",
            objects.cluster_queue,
            opts=pulumi.ResourceOptions.merge(after_chart, pulumi.ResourceOptions(depends_on=flavors)),
        )
        local_queue = KubernetesObject(
            "kueue-local-queue",
            objects.local_queue,
            opts=pulumi.ResourceOptions.merge(
                after_chart, pulumi.ResourceOptions(depends_on=[cluster_queue, self.namespace])
            ),
        )
        self.queues = [*flavors, cluster_queue, local_queue]

    # -- the checks of `pulumi up` and preview (live) ------------------------------------------------------------

    def _after(self, when: pulumi.Output[Any], check: Callable[[live.ClusterReader], T]) -> pulumi.Output[T]:
        """``check(reader)`` once ``when`` and the kubeconfig resolve, in a thread (it may wait, bounded)."""
        reads = self._reads
        assert reads is not None  # only with live reads

        def run(values: list[Any]) -> asyncio.Future[T]:
            if self._reader is None:
                credentials.load_client()  # on the loop's thread: two threads importing the client at once can deadlock
                self._reader = reads.connect(values[0])
            reader = self._reader

            def checked() -> T:
                with self._checking:  # one reader, one check at a time
                    return check(reader)

            return in_daemon_thread(checked, "tpu-rl-platform-check")

        return pulumi.Output.all(reads.kubeconfig, when).apply(run)

    @staticmethod
    def _jobset_crd(
        reader: live.ClusterReader, version: str, context: str, stack: str, *, preview: bool = False, warn: bool = True
    ) -> str:
        """The chart version, once the cluster's JobSet CRD serves it (``jobset_crd_problem``). A preview that
        cannot read the cluster (this machine cannot reach it, or it is not up yet) goes on, with a warning when
        ``warn``: `up` checks again before the chart changes."""
        try:
            problem = jobset_crd_problem(reader.crd(JOBSET_CRD), version, context, stack)
        except live.ClusterReadError as err:
            if preview:
                if not warn:
                    return version
                log_warn(
                    f"the preview did not check the cluster's JobSet CRD for JobSet {version} ({err}); `pulumi up` "
                    "checks it before the chart changes"
                )
                return version
            raise stop(err, f"cannot read the JobSet CRD before installing JobSet {version}: ") from None
        if problem:
            raise StopError(problem, BAD_INPUT)  # the operator runs the command it names
        return version

    @staticmethod
    def _fits(reader: live.ClusterReader, needs: fit.Needs, value: R) -> R:
        """``value``, once the existing cluster has what the steps need (``infra.k8s.fit``): every problem one line,
        `up` and a preview stop on them; each note said. A preview that cannot read the cluster goes on with a
        warning (`up` reads it again)."""
        try:
            found = fit.fit(reader.facts(needs.claimed), needs)
        except live.ClusterReadError as err:
            if pulumi.runtime.is_dry_run():
                log_warn(f"the preview did not check the existing cluster ({err}); `pulumi up` checks it first")
                return value
            raise stop(err, "cannot read the existing cluster before creating anything in it: ") from None
        for note in found.notes:
            log_warn(f"existing cluster: {note}")
        if found.problems:
            raise StopError("\n".join(f"existing cluster: {line}" for line in found.problems), BAD_INPUT)
        return value

    def _helm_free(self, reader: live.ClusterReader, namespace: str, name: str, value: T) -> T:
        """``value``, once Helm's storage holds no pending operation of the release ``namespace/name``, and no
        revision of it at all when the stack's state does not hold it (``helm_release_problem``: one line naming the
        one command that clears it)."""
        try:
            newest = reader.helm_release(namespace, name)
            problem = helm_release_problem(
                name,
                namespace,
                newest,
                in_state=self._in_state,
                stack=self._stack,
                protected=self._guarded,
                context=self._context,
            )
        except live.ClusterReadError as err:
            raise stop(err, f"cannot read Helm release {namespace}/{name} before installing it: ") from None
        if problem:
            raise StopError(problem, BAD_INPUT)  # the operator runs the command it names
        return value

    def _admitted(self, reader: live.ClusterReader, manifest: Mapping[str, Any], resource: R) -> R:
        """``resource`` once the API server admits a dry-run create of ``manifest`` (its webhooks answer)."""
        try:
            reader.wait_admitted(dict(manifest), stack=self._stack)
        except live.ClusterReadError as err:
            raise stop(err) from None
        return resource

    def _jobsets_admitted(self, manifest: Mapping[str, Any] | None) -> pulumi.Output[KubernetesObject] | None:
        """The namespace, once the JobSet webhook (and Kueue's, which mutates a queued JobSet) admit a dry run of
        the first step's JobSet; None without checks or steps."""
        if not self._checks or manifest is None:
            return None
        after = [r.id for r in (self.jobset, self.namespace, self.kueue) if r is not None]
        namespace = self.namespace
        return self._after(pulumi.Output.all(*after), lambda reader: self._admitted(reader, manifest, namespace))

    @property
    def ready(self) -> list[pulumi.Resource]:
        """What a workflow object must wait for."""
        return [
            r
            for r in (
                self.jobset,
                self.kueue,
                *self.queues,
                self.namespace,
                *self.network_policies,
                self.storage_class,
                *self.service_accounts.values(),
                *self.head_access,
                self.hf_secret,
                self.hf_write_secret,
            )
            if r is not None
        ]


def release_guard(release: str) -> str:
    """The name of the destroy guard of the platform's Helm release ``release`` (``jobset``, ``kueue``).

    A guard on the whole platform is registered only once every part of it is (the SDK resolves a ``depends_on`` on
    a component to its children's URNs, each known once its registration returns: ``pulumi/runtime/rpc.py``
    ``_add_dependency``), so a first `up` that fails inside the platform (the TPU pool, a Kueue queue, the token
    Secret) leaves the releases unguarded; ``pulumi destroy --skip-preview`` then drops them from the state
    (``deletedWith`` the cluster, whose delete is planned: ``step.go`` ``DeleteStep.Apply``, ``isDeletedWith``)
    while the protected cluster stays with them installed, and Helm refuses to install them again. A guard that
    depends on the release alone is registered as soon as the release's create returns."""
    return f"tpu-rl-protect-release-{release}"


class DestroyGuard(pulumi.ComponentResource):
    """A protected component that depends on what it guards, protected while ``tpu-rl:protect`` is true.

    ``pulumi destroy --skip-preview`` has no preview to stop at a protected resource, and the engine deletes in
    reverse dependency order (``step_generator.go`` ``ScheduleDeletes``: antichains, reversed), so without guards it
    drops every object ``deletedWith`` the cluster from the state (``step.go`` ``DeleteStep.Apply``:
    ``isDeletedWith`` is true of a delete that is only planned) and deletes the unprotected resources around the
    protected ones before it meets them. ``ScheduleDeletes`` takes, round by round, the condemned resources with no
    condemned dependencies and reverses the rounds, so a guard's antichain comes before the antichains of everything
    it depends on (the first antichain holds the deepest step's guard), and its delete is refused
    (``deleteProtectedError``, before any other check of ``DeleteStep.Apply``); the executor then skips every
    transitive dependency of a step that failed (``deployment_executor.go`` ``performPostSteps``: ``erroredDeps``; a
    protect error is recorded, ``step_executor.go`` ``cancelDueToError``). The stack registers one
    guard on the platform (every resource but the steps), once the platform is, and one per step on the step's
    object, as soon as it is created: together they depend on every resource, so nothing is deleted or dropped,
    whatever happened to the steps (a guard registered last, on everything, is never registered by an `up` that a
    step fails). A component: no cloud object, no provider call, never replaced with what it depends on
    (``calculateDependentReplacements``: "Neither component nor external resources require replacement"). Each is
    always registered, unprotected once ``tpu-rl:protect`` is false, so that the `up` which unprotects the stack can
    let a later destroy delete it."""

    def __init__(self, name: str, protect: bool, resources: Sequence[pulumi.Resource]) -> None:
        super().__init__(
            "tpu-rl:lifecycle:DestroyGuard",
            name,
            None,
            pulumi.ResourceOptions(protect=protect, depends_on=list(resources)),
        )
        self.register_outputs({"protect": protect})
