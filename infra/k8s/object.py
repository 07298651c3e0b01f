"""Register a Kubernetes object straight from its manifest (the dicts the pure builders return)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi


def type_token(api_version: str, kind: str) -> str:
    """``batch/v1`` + ``Job`` -> ``kubernetes:batch/v1:Job``; core ``v1`` -> ``kubernetes:core/v1:...``."""
    group_version = api_version if "/" in api_version else f"core/{api_version}"
    return f"kubernetes:{group_version}:{kind}"


class KubernetesObject(pulumi.CustomResource):
    """Any Kubernetes object, with ``status`` declared as an output property (as generated SDKs do).

    The provider applies its built-in await logic by type (a ``batch/v1`` Job waits for
    ``Complete`` and fails fast on ``Failed``) or the ``pulumi.com/waitFor`` annotation.
    ``pulumi_kubernetes.apiextensions.CustomResource`` drops ``status``
    (pulumi/pulumi-kubernetes#1836); this class keeps it, so the program can read why a run ended.
    """

    status: pulumi.Output[Any]

    def __init__(
        self, resource_name: str, manifest: Mapping[str, Any], opts: pulumi.ResourceOptions | None = None
    ) -> None:
        api_version, kind = manifest["apiVersion"], manifest["kind"]
        props = {**manifest, "status": None}
        secret_outputs = ["data", "stringData"] if (api_version, kind) == ("v1", "Secret") else None
        # Every object is registered with an explicit provider (infra.gcp.cluster), whose own version selects
        # the plugin: no version option is needed here.
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=secret_outputs))
        super().__init__(type_token(api_version, kind), resource_name, props, opts)
