"""Manifests of the platform's Kubernetes objects (plain dicts, no Pulumi)."""

from __future__ import annotations

from typing import Any

from core.names import HF_SECRET, HF_SECRET_KEY, SCRATCH_STORAGE_CLASS

POD_SECURITY = {
    "pod-security.kubernetes.io/enforce": "privileged",
    "pod-security.kubernetes.io/enforce-version": "latest",
    "pod-security.kubernetes.io/audit": "baseline",
    "pod-security.kubernetes.io/audit-version": "latest",
}
"""Pod Security Admission, stated rather than left to the cluster's default: the Pathways head runs
privileged on the host network with a host path (xpk's and gcluster's head pod), so the namespace enforces
``privileged``; every pod beyond ``baseline`` (the head and the TPU workers) is recorded in the audit log."""


def namespace_manifest(name: str, labels: dict[str, str]) -> dict[str, Any]:
    """The workflow's namespace, with its Pod Security Admission levels (``POD_SECURITY``)."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {**labels, **POD_SECURITY}}}


def service_account_manifest(namespace: str, name: str, labels: dict[str, str], gsa_email: Any) -> dict[str, Any]:
    """The workload's KSA, bound to its Google service account by Workload Identity."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": {"iam.gke.io/gcp-service-account": gsa_email},
        },
    }


def token_secret_manifest(namespace: str, labels: dict[str, str], token: Any) -> dict[str, Any]:
    """The Hugging Face token Secret; containers read it through ``secretKeyRef`` only."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": HF_SECRET, "namespace": namespace, "labels": labels},
        "type": "Opaque",
        "stringData": {HF_SECRET_KEY: token},
    }


def scratch_storage_class(disk_type: str, labels: dict[str, str]) -> dict[str, Any]:
    """The CPU steps' scratch disks, of the type cpu-np's machine family takes (PD or Hyperdisk).

    GKE's ``standard-rwo`` is PD-balanced, which N4/C4 nodes cannot attach.
    """
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": SCRATCH_STORAGE_CLASS, "labels": labels},
        "provisioner": "pd.csi.storage.gke.io",
        "parameters": {"type": disk_type},
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Delete",
        "allowVolumeExpansion": True,
    }
