"""Small stacks for ``pod-bindings``, judged through pulumi-policy's analyzer as the engine runs it: the type tokens,
an object of the stack, and each finding with the resource it is shown on."""

from __future__ import annotations

import importlib
from typing import Any

from tests import analyzer

pod_bindings = importlib.import_module("policy.tpu_rl_policies.pod_bindings").pod_bindings
JOB = "kubernetes:batch/v1:Job"
ACCOUNT = "kubernetes:core/v1:ServiceAccount"
NAMESPACE = "kubernetes:core/v1:Namespace"
CLAIM = "kubernetes:core/v1:PersistentVolumeClaim"
VOLUME = "kubernetes:core/v1:PersistentVolume"
CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
FIX = "run it as its step's own Kubernetes service account, in the stack's namespace (infra/k8s)"
"""The fix the policy names for a pod's account."""
FROM = "claim from a class the stack declares"
"""The fix the policy names for a claim's volume."""


def urn(type_: str, name: str) -> str:
    return f"urn:pulumi:prod::tpu-rl::{type_}::{name}"


def k8s(type_: str, name: str, body: dict[str, Any] | None = None, namespace: Any = "tpu-rl") -> analyzer.Resource:
    """A Kubernetes object named ``name`` (in ``namespace``; None: unset)."""
    metadata = {"name": name, **({} if namespace is None else {"namespace": namespace})}
    return analyzer.Resource(type_, name, urn(type_, name), {"metadata": metadata, **(body or {})})


def findings(
    *resources: analyzer.Resource, preview: bool = False, config: dict[str, str] | None = None
) -> list[analyzer.Finding]:
    """The findings of ``pod-bindings`` on a stack of ``resources``, at a preview or at ``pulumi up``, with the stack's
    configuration ``config`` (as ``ConfigureStack`` sends it)."""
    pack = analyzer.Pack(
        {"all": "mandatory"}, dry_run=preview, policies=[pod_bindings], stack="prod", stack_config=config
    )
    return pack.analyze_stack(list(resources))


def judged(*resources: analyzer.Resource, **kwargs: Any) -> list[tuple[str, str]]:
    """(message, URN) of each finding: what an operator reads, and the resource it is shown on."""
    return [(f.message, f.urn) for f in findings(*resources, **kwargs)]
