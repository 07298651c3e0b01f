"""A typed JobSet resource that exposes ``status``, and the check that turns a failed run into an error."""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi_kubernetes import _utilities as k8s_utilities

from workloads.manifests import API_JOBSET


class JobSetFailedError(Exception):
    """The JobSet reached ``terminalState: Failed``."""


class JobSet(pulumi.CustomResource):
    """``jobset.x-k8s.io/v1alpha2`` JobSet with ``status`` declared as an output, as generated SDKs do.

    ``pulumi_kubernetes.apiextensions.CustomResource`` drops properties it did not send
    (pulumi/pulumi-kubernetes#1836), so a program could not see why a JobSet ended.
    """

    status: pulumi.Output[dict[str, Any] | None]

    def __init__(
        self, resource_name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions | None = None
    ) -> None:
        props = {
            "apiVersion": API_JOBSET,
            "kind": "JobSet",
            "metadata": manifest["metadata"],
            "spec": manifest["spec"],
            "status": None,
        }
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=k8s_utilities.get_version()))
        super().__init__(f"kubernetes:{API_JOBSET}:JobSet", resource_name, props, opts)


def check_jobset_status(status: dict[str, Any] | None, namespace: str, name: str, logs_command: str) -> str:
    """Return the terminal state; raise ``JobSetFailedError`` naming the JobSet, the reason and the logs command."""
    state = (status or {}).get("terminalState") or ""
    if state != "Failed":
        return state
    conditions = (status or {}).get("conditions") or []
    failed = next((c for c in conditions if c.get("type") == "Failed" and c.get("status") == "True"), {})
    reason = failed.get("reason") or "Failed"
    message = failed.get("message") or "no message in the JobSet's Failed condition"
    raise JobSetFailedError(
        f"JobSet {namespace}/{name} failed ({reason}): {message}. Read the training logs with: {logs_command}"
    )
