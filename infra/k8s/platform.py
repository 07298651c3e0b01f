"""Kubernetes platform on the cluster: JobSet controller, Kueue and the stack's queues, workload namespace,
service account, the token Secrets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from core.names import HF_WRITE_SECRET
from core.settings import Settings
from infra.gcp.naming import Names
from infra.k8s import kueue
from infra.k8s.manifests import (
    namespace_manifest,
    network_policies,
    scratch_storage_class,
    service_account_manifest,
    token_secret_manifest,
)
from infra.k8s.object import KubernetesObject

JOBSET_CHART = "oci://registry.k8s.io/jobset/charts/jobset"
JOBSET_NAMESPACE = "jobset-system"


@dataclass(frozen=True)
class PlatformArgs:
    """What the Kubernetes platform is built on."""

    settings: Settings
    """The validated settings (the pure manifests of ``infra.k8s.manifests`` and ``infra.k8s.kueue``)."""
    names: Names
    """The workload's Kubernetes service account name."""
    provider: k8s.Provider
    """The cluster's Kubernetes provider."""
    cluster: pulumi.Resource
    """The GKE cluster: every object here is deleted with it."""
    workload_sa_email: pulumi.Input[str]
    """The Google service account the workload's Kubernetes service account maps to."""
    workload_grants: Sequence[pulumi.Resource]
    """Its Workload Identity binding and bucket grants (the service account waits for them)."""
    hf_token: pulumi.Output[str] | None
    """The Hugging Face token (secret), or None when the workflow is off."""
    hf_write_token: pulumi.Output[str] | None = None
    """The publication's write token (secret), or None without ``tpu-rl:publish.repo``: a Secret of its own,
    which only the publish step's container references."""


class KubernetesPlatform(pulumi.ComponentResource):
    """Everything the workflow's objects need before they can be created.

    Every resource is ``deleted_with`` the cluster: destroying the cluster removes them,
    so ``pulumi destroy`` does not wait on finalizers or an unreachable API server.
    """

    jobset: k8s.helm.v3.Release
    kueue: k8s.helm.v3.Release | None
    queues: list[KubernetesObject]
    """ResourceFlavors, ClusterQueue and LocalQueue (empty when Kueue is not ours)."""
    namespace: KubernetesObject
    network_policies: list[KubernetesObject]
    """Default-deny ingress in the workflow namespace, and the Pathways ports between the training's pods."""
    service_account: KubernetesObject
    storage_class: KubernetesObject
    hf_secret: KubernetesObject | None
    hf_write_secret: KubernetesObject | None

    def __init__(self, name: str, args: PlatformArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("tpu-rl:k8s:KubernetesPlatform", name, None, opts)
        settings, names, provider, cluster = args.settings, args.names, args.provider, args.cluster
        workload_sa_email, workload_grants, hf_token = args.workload_sa_email, args.workload_grants, args.hf_token
        child = pulumi.ResourceOptions(parent=self, provider=provider, deleted_with=cluster)
        # Helm v3 Release (not Chart v4, which cannot preview a cluster that does not exist yet);
        # it waits until the controller and its webhook are ready.
        self.jobset = k8s.helm.v3.Release(
            "jobset",
            name="jobset",
            chart=JOBSET_CHART,
            version=settings.workflow.jobset_version,
            namespace=JOBSET_NAMESPACE,
            create_namespace=True,
            atomic=True,
            timeout=900,
            opts=child,
        )
        labels = {"app.kubernetes.io/name": "tpu-rl", "app.kubernetes.io/instance": settings.cluster_name}
        self.namespace = KubernetesObject("namespace", namespace_manifest(settings.namespace, labels), opts=child)
        # StorageClass parameters are immutable: a new disk type replaces it (no volume outlives a step).
        self.storage_class = KubernetesObject(
            "scratch-storage-class",
            scratch_storage_class(settings.cpu_pool.disk_type, labels),
            opts=pulumi.ResourceOptions.merge(
                child, pulumi.ResourceOptions(replace_on_changes=["parameters"], delete_before_replace=True)
            ),
        )
        in_namespace = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[self.namespace]))
        # Pods of this account write to the bucket as soon as they run: wait for the Workload
        # Identity binding and the bucket grants.
        self.service_account = KubernetesObject(
            "workload-ksa",
            service_account_manifest(settings.namespace, names.ksa, labels, workload_sa_email),
            opts=pulumi.ResourceOptions.merge(in_namespace, pulumi.ResourceOptions(depends_on=workload_grants)),
        )
        self.network_policies = [
            KubernetesObject(f"network-policy-{policy['metadata']['name']}", policy, opts=in_namespace)
            for policy in network_policies(settings.namespace, labels)
        ]
        self.kueue = None
        self.queues = []
        if settings.kueue.install:
            self._install_kueue(settings, labels, child)
        self.hf_secret = None
        if hf_token is not None:
            self.hf_secret = KubernetesObject(
                "hf-token",
                token_secret_manifest(settings.namespace, labels, pulumi.Output.secret(hf_token)),
                opts=in_namespace,
            )
        self.hf_write_secret = None
        if args.hf_write_token is not None:
            self.hf_write_secret = KubernetesObject(
                "hf-write-token",
                token_secret_manifest(
                    settings.namespace, labels, pulumi.Output.secret(args.hf_write_token), HF_WRITE_SECRET
                ),
                opts=in_namespace,
            )
        self.register_outputs(
            {
                "namespace": settings.namespace,
                "jobsetVersion": settings.workflow.jobset_version,
                "kueueVersion": settings.kueue.version if settings.kueue.install else None,
                "localQueue": settings.kueue.queue,
            }
        )

    def _install_kueue(self, settings: Settings, labels: dict[str, str], child: pulumi.ResourceOptions) -> None:
        """Kueue's chart (after JobSet's, so its JobSet integration starts with the CRD in place), then the
        flavors and queues (after the chart: its CRDs and webhooks)."""
        self.kueue = k8s.helm.v3.Release(
            "kueue",
            name="kueue",
            chart=kueue.CHART,
            version=settings.kueue.version,
            namespace=kueue.NAMESPACE,
            create_namespace=True,
            atomic=True,
            timeout=900,
            values=kueue.helm_values(settings),
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[self.jobset])),
        )
        after_chart = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[self.kueue]))
        flavors = [
            KubernetesObject("kueue-tpu-flavor", kueue.tpu_flavor(settings, labels), opts=after_chart),
            KubernetesObject("kueue-cpu-flavor", kueue.cpu_flavor(labels), opts=after_chart),
        ]
        cluster_queue = KubernetesObject(
            "kueue-cluster-queue",
            kueue.cluster_queue(settings, labels),
            opts=pulumi.ResourceOptions.merge(after_chart, pulumi.ResourceOptions(depends_on=flavors)),
        )
        local_queue = KubernetesObject(
            "kueue-local-queue",
            kueue.local_queue(settings, labels),
            opts=pulumi.ResourceOptions.merge(
                after_chart, pulumi.ResourceOptions(depends_on=[cluster_queue, self.namespace])
            ),
        )
        self.queues = [*flavors, cluster_queue, local_queue]

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
                self.service_account,
                self.hf_secret,
                self.hf_write_secret,
            )
            if r is not None
        ]
