"""Helpers of the scenario tests (``test_scenarios.py``, ``test_scenario_hanging_plugin.py``, ``test_lifecycle_*``): a
``gke-gcloud-auth-plugin`` on PATH, its credential, the steps' names and live objects of a ``tests.engine.Stack``,
Helm's storage in the loopback cluster, and the stack's state as `pulumi stack export` prints it with what `make up`
does with it before `pulumi up` (``exported``, ``before_up``). Their fixtures (``cluster``, ``stack``) are in
``tests/conftest.py``; the program they run reads the loopback cluster with the real reader (``tests.engine``)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Sequence
from typing import Any

from tests import fake_kube
from tests.conftest import JOBSET, one
from tests.engine import CLUSTER, HELM_RELEASE, Stack
from tools.plan.offline import Plan
from tools.stack_files import ROOT

STEPS = ("convert", "train", "export")
EXPORT = (ROOT / "tests" / "data" / "stack-export.json").read_text()
"""A `pulumi stack export` of a stack whose Kueue install was in flight when its runner was killed, as the CLI writes
it (pulumi v3.259.0 pkg/cmd/pulumi/stack/stack_export.go: ``apitype.UntypedDeployment``, indented by four spaces;
sdk/go/common/apitype/core.go ``DeploymentV3``, ``ResourceV3``, ``OperationV2`` by their JSON names; a secret as
the engine serializes it, its signature key and ciphertext)."""


def with_cluster(export: str, endpoint: str, ca: str, releases: tuple[str, ...] = ()) -> str:
    """``export`` whose cluster has these outputs and whose state holds only ``releases`` (none pending: Kueue's
    pending create made a resource)."""
    document = json.loads(export)
    deployment = document["deployment"]
    pending = [operation["resource"] for operation in deployment.pop("pending_operations", [])]
    kept = []
    for resource in [*deployment["resources"], *({**r, "id": "kueue-system/kueue"} for r in pending)]:
        if resource["type"] == CLUSTER:
            resource["outputs"]["endpoint"] = endpoint
            resource["outputs"]["masterAuth"]["clusterCaCertificate"] = ca
        if resource["type"] != HELM_RELEASE or resource["inputs"]["name"] in releases:
            kept.append(resource)
    deployment["resources"] = kept
    return json.dumps(document, indent=4)


def unprotected(export: str) -> str:
    """``export`` with nothing protected (a stack with ``tpu-rl:protect: false``, as dev): a release its destroy dropped
    is cleared by finishing the destroy (``infra.k8s.manifests.helm_release_problem``)."""
    document = json.loads(export)
    for resource in document["deployment"]["resources"]:
        resource.pop("protect", None)
    return json.dumps(document, indent=4)


def auth_plugin(tmp_path, monkeypatch, body: str) -> None:
    """``gke-gcloud-auth-plugin`` on PATH, as the program's kubeconfig runs it."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    plugin = folder / "gke-gcloud-auth-plugin"
    plugin.write_text("#!/bin/sh\n" + body)
    plugin.chmod(plugin.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")


def credential(token: str) -> str:
    status = {"expirationTimestamp": "2099-01-01T00:00:00Z", "token": token}
    return json.dumps(
        {"kind": "ExecCredential", "apiVersion": "client.authentication.k8s.io/v1beta1", "status": status}
    )


def names(stack: Stack, overrides: Sequence[str] = ()) -> dict[str, str]:
    return {s.step: s.name for s in stack.steps(overrides).steps}


def live(stack: Stack, step: str, overrides: Sequence[str] = ()) -> dict[str, Any]:
    built = {s.step: s for s in stack.steps(overrides).steps}[step]
    obj = stack.cluster.get(built.kind, "tpu-rl", built.name)
    assert obj is not None, f"{step}'s {built.kind} {built.name} is not in the cluster"
    return obj


def trigger(plan: Plan, name: str) -> Any:
    """The ``replacement_trigger`` the program gave the step's JobSet ``name`` (None: none)."""
    return one(plan, JOBSET, name)["options"]["replacementTrigger"]


def helm_secret(name: str, namespace: str, version: int, status: str) -> dict[str, Any]:
    """One revision's Secret as Helm's secrets driver writes it (helm v3.20.2 ``pkg/storage/driver/secrets.go``
    ``newSecretsObject``: labelled ``owner=helm``, ``name``, ``status``, ``version``)."""
    labels = {"owner": "helm", "name": name, "status": status, "version": str(version), "modifiedAt": "1"}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "helm.sh/release.v1",
        "metadata": {"name": f"sh.helm.release.v1.{name}.v{version}", "namespace": namespace, "labels": labels},
        "data": {"release": "H4sI"},
    }


class HelmStorage(dict[tuple[str, str], tuple[int, str]]):
    """``Stack.helm`` (``(namespace, release) -> (newest revision, status)``) kept in the loopback cluster as Helm
    keeps it: each revision a Secret (the older ones ``superseded``), which the program's reader lists
    (``infra.k8s.live.ClusterReader.helm_release``). Every write of the model goes through here."""

    def __init__(self, cluster: fake_kube.FakeCluster, *args: Any) -> None:
        super().__init__(*args)
        self.cluster = cluster
        self._sync()

    def _sync(self) -> None:
        with self.cluster.lock:
            for key in [k for k in self.cluster.core if k[0] == "secrets"]:
                del self.cluster.core[key]
            for (namespace, name), (newest, status) in self.items():
                revisions = [helm_secret(name, namespace, v, "superseded") for v in range(1, newest)]
                secrets = self.cluster.core.setdefault(("secrets", namespace), [])
                secrets += [*revisions, helm_secret(name, namespace, newest, status)]

    def __setitem__(self, key: tuple[str, str], value: tuple[int, str]) -> None:
        super().__setitem__(key, value)
        self._sync()

    def __delitem__(self, key: tuple[str, str]) -> None:
        super().__delitem__(key)
        self._sync()

    def pop(self, key: tuple[str, str], *default: Any) -> Any:
        found = super().pop(key, *default)
        self._sync()
        return found

    def clear(self) -> None:
        super().clear()
        self._sync()


def serve_helm(stack: Stack, monkeypatch: Any) -> Stack:
    """``stack`` whose Helm storage the loopback API server serves as Secrets (``/api/v1/namespaces/<ns>/secrets``)."""
    monkeypatch.setitem(fake_kube.CORE, "secrets", "Secret")
    stack.helm = HelmStorage(stack.cluster, stack.helm)
    return stack


def exported(stack: Stack) -> str:
    """The engine model's state as `pulumi stack export --stack <stack>` prints it: the backend's
    ``apitype.UntypedDeployment`` (pulumi v3.259.0 ``pkg/cmd/pulumi/stack/stack_export.go``: a JSON encoder indenting
    by four spaces) of a ``DeploymentV3`` (sdk/go/common/apitype/core.go: ``ResourceV3``'s fields by their JSON
    names, empty ones left out as ``omitempty`` does; a pending create is an ``OperationV2`` of type ``creating``).
    The model keys a pending Helm release create by its URN, a step's by its name."""

    def resource(urn: str, type_: str, custom: bool, inputs: dict[str, Any], outputs: dict[str, Any], **more: Any):
        fields = {"urn": urn, "custom": custom, "id": f"{urn.rsplit('::', 1)[-1]}-id" if custom else "", "type": type_}
        fields.update(inputs=inputs, outputs=outputs, **more)
        return {k: v for k, v in fields.items() if v or k in ("urn", "custom", "type")}

    resources = [
        resource(
            r.urn,
            r.type,
            r.custom,
            r.inputs,
            r.outputs,
            parent=r.parent,
            protect=r.protect,
            dependencies=list(r.dependencies),
            provider=f"{r.provider}::04da6b54-80e4-46f7-96ec-b56ff0331ba9" if r.provider else "",
            propertyDependencies={k: list(v) for k, v in r.property_deps.items()},
            deletedWith=r.deleted_with,
        )
        for r in stack.state.values()
    ]
    pending = []
    for key, inputs in stack.pending_creates.items():
        if key.startswith("urn:"):
            urn, type_ = key, key.split("::")[2].split("$")[-1]
        else:
            type_ = f"kubernetes:{inputs.get('apiVersion')}:{inputs.get('kind')}"
            urn = f"urn:pulumi:{stack.name}::tpu-rl::{type_}::{key}"
        pending.append({"resource": resource(urn, type_, True, inputs, {}), "type": "creating"})
    manifest = {"time": "2026-12-04T09:00:00.000000000Z", "magic": "", "version": "v3.259.0"}
    deployment: dict[str, Any] = {"manifest": manifest, "secrets_providers": {"type": "passphrase", "state": {}}}
    if resources:
        deployment["resources"] = resources
    if pending:
        deployment["pending_operations"] = pending
    deployment["metadata"] = {}
    return json.dumps({"version": 3, "deployment": deployment}, indent=4, default=str)


def releases_env(stack: Stack, monkeypatch: Any) -> str:
    """``TPU_RL_RELEASES_IN_STATE`` as `make up` sets it for `pulumi up` (the Makefile's ``up``): the Helm releases
    ``tools.state`` reads in the model's export; the value set."""
    from infra.k8s.manifests import RELEASES_IN_STATE
    from tools.state_export import releases_in_state

    value = ",".join(releases_in_state(exported(stack)))
    monkeypatch.setenv(RELEASES_IN_STATE, value)
    return value


def before_up(stack: Stack, monkeypatch: Any) -> str | None:
    """What `make up` does before `pulumi up` (``tools.state releases``) on the model's export: the line it stops with,
    having read Helm's storage in the loopback cluster through the kubeconfig the state's cluster outputs make (None:
    it goes on, with ``TPU_RL_RELEASES_IN_STATE`` set: ``releases_env``)."""
    from tools.state_export import platform_releases, releases_in_state, stranded_release

    export = exported(stack)
    held = releases_in_state(export)
    loaded = stack.loaded()
    releases = platform_releases(loaded.kueue.install)
    problem = stranded_release(stack.name, export, held, releases, context=loaded.kube_context)
    if problem is None:
        releases_env(stack, monkeypatch)
    return problem
