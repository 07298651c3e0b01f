"""The real engine on the local cluster: the Pulumi CLI built from its Go module, the local Python language host and
the Kubernetes provider built from theirs, a file backend with passphrase secrets. A small program of pulumi-kubernetes
objects goes up, previews with no change, changes, and is destroyed; what the cluster holds is read after each. Then
the project's own program, on the local cluster as an existing one (docs/existing-cluster.md), its workflow off: up,
an unchanged preview, destroy, and what it did not create still there, the project's policy pack run by the engine
(through the local host's RunPlugin); and its refusal of a cluster without the slice before anything is created."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.local_cluster import Running, local_cluster
from tools.local_cluster.build import build_all
from tools.local_cluster.components import COMPONENTS

pytestmark = pytest.mark.slow

__all__ = ["local_cluster"]

PROVIDER = next(c for c in COMPONENTS if c.name == "pulumi-kubernetes")
PROGRAM = """
import pulumi
import pulumi_kubernetes as k8s

config = pulumi.Config()
provider = k8s.Provider("local", kubeconfig=config.require("kubeconfig"))
options = pulumi.ResourceOptions(provider=provider)
namespace = k8s.core.v1.Namespace("ns", metadata={"name": "engine-smoke"}, opts=options)
k8s.core.v1.ConfigMap(
    "cm",
    metadata={"name": "settings", "namespace": namespace.metadata.name},
    data={"value": config.require("value")},
    opts=options,
)
pulumi.export("namespace", namespace.metadata.name)
"""


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory, local_cluster: Running) -> dict[str, Any]:
    bins = build_all(engine=True, out=sys.stderr)
    home = tmp_path_factory.mktemp("pulumi-home")
    path = os.pathsep.join([str(bins["pulumi"]), str(bins["pulumi-language-python"]), os.environ["PATH"]])
    env = {
        **os.environ,
        "PATH": path,
        "PULUMI_HOME": str(home),
        "PULUMI_BACKEND_URL": f"file://{tmp_path_factory.mktemp('state')}",
        "PULUMI_CONFIG_PASSPHRASE": "local",
        "PULUMI_SKIP_UPDATE_CHECK": "1",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
    }
    version = PROVIDER.pinned.removeprefix("v")
    provider = bins["pulumi-kubernetes"] / "pulumi-resource-kubernetes"
    pulumi = str(bins["pulumi"] / "pulumi")
    subprocess.run(
        [pulumi, "plugin", "install", "resource", "kubernetes", version, "--file", str(provider)],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    project = tmp_path_factory.mktemp("project")
    venv = Path(sys.executable).parent.parent
    (project / "Pulumi.yaml").write_text(
        f"name: engine-smoke\nruntime:\n  name: python\n  options:\n    virtualenv: {venv}\n"
    )
    (project / "__main__.py").write_text(PROGRAM)
    return {"pulumi": pulumi, "env": env, "cwd": project, "client": local_cluster.api, "cluster": local_cluster}


def _pulumi(engine: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [engine["pulumi"], *args, "--non-interactive"],
        cwd=engine["cwd"],
        env=engine["env"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    policies = done.stdout.find("Policies:")  # the pack's findings, before the outputs that would bury them
    assert done.returncode == 0, (done.stdout[policies : policies + 6000] if policies >= 0 else done.stdout[-3000:]) + (
        done.stderr[-3000:]
    )
    return done


def _value(engine: dict[str, Any]) -> str | None:
    from kubernetes import client as kube
    from kubernetes.client.exceptions import ApiException

    try:
        got = kube.CoreV1Api(engine["client"]).read_namespaced_config_map("settings", "engine-smoke")
    except ApiException as err:
        if err.status == 404:
            return None
        raise
    return dict(got.data)["value"]


def test_the_real_engine_ups_previews_changes_and_destroys_on_the_local_cluster(engine: dict[str, Any]) -> None:
    kubeconfig = engine["cluster"].layout.kubeconfig.read_text()
    _pulumi(engine, "stack", "init", "local", "--secrets-provider", "passphrase")
    _pulumi(engine, "config", "set", "--secret", "kubeconfig", kubeconfig)
    _pulumi(engine, "config", "set", "value", "one")
    up = _pulumi(engine, "up", "--yes")
    assert "+ 4 created" in up.stdout and _value(engine) == "one"  # the stack, the provider and the two objects
    _pulumi(engine, "preview", "--expect-no-changes")
    _pulumi(engine, "config", "set", "value", "two")
    changed = _pulumi(engine, "up", "--yes")
    # The provider replaces a ConfigMap whose data changes (ConfigMaps are immutable to it unless told otherwise).
    assert "+-1 replaced" in changed.stdout and _value(engine) == "two"
    _pulumi(engine, "destroy", "--yes")
    assert _value(engine) is None


ROOT = Path(__file__).resolve().parent.parent
LOCAL_STACK = [
    ("gcp:project", "tpu-rl-local"),
    ("gcp:region", "us-east5"),
    ("gcp:zone", "us-east5-b"),
    ("tpu-rl:clusterName", "tpu-rl-local"),
    ("tpu-rl:existingCluster.kubeContext", "tpu-rl-local"),
    ("tpu-rl:existingCluster.workloadIdentity", "false"),
    ("tpu-rl:tpu.capacity", "on-demand"),
    ("tpu-rl:workflow.enabled", "false"),
]
"""The project's program on the local cluster as an existing one, its workflow off: what `pulumi config set --path`
writes of these (the steps' containers need the part 6 stage that plays them)."""


@pytest.fixture(scope="module")
def program(engine: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The project's own program, run by the engine from a folder of its own (its Pulumi.yaml the project's, its
    ``main`` the checkout, its venv this one), the local cluster's kubeconfig as the operator's."""
    folder = tmp_path_factory.mktemp("program")
    project = (ROOT / "Pulumi.yaml").read_text()
    venv = Path(sys.executable).parent.parent
    project = project.replace("    virtualenv: venv\n", f"    virtualenv: {venv}\n", 1)
    (folder / "Pulumi.yaml").write_text(project.replace("name: tpu-rl\n", f"name: tpu-rl\nmain: {ROOT}\n", 1))
    env = {**engine["env"], "KUBECONFIG": str(engine["cluster"].layout.kubeconfig)}
    return {**engine, "cwd": folder, "env": env}


def _object(api: Any, where: tuple[str, str, str, str]) -> bool:
    """Whether the API server holds the object ``where`` (group/version, plural, namespace, name; core: ``v1``)."""
    from kubernetes import client as kube
    from kubernetes.client.exceptions import ApiException

    api_version, plural, namespace, name = where
    try:
        if api_version == "v1":
            kube.CoreV1Api(api).read_namespace(name) if plural == "namespaces" else kube.CoreV1Api(api).read_node(name)
        elif namespace:
            group, version = api_version.split("/")
            kube.CustomObjectsApi(api).get_namespaced_custom_object(group, version, namespace, plural, name)
        else:
            group, version = api_version.split("/")
            kube.CustomObjectsApi(api).get_cluster_custom_object(group, version, plural, name)
    except ApiException as err:
        if err.status == 404:
            return False
        raise
    return True


PACK = ("--policy-pack", str(ROOT / "policy"), "--policy-pack-config", str(ROOT / "policy" / "config" / "dev.json"))
"""The project's policy pack as `make up` runs it (its own venv, ``policy/venv``: `make test-slow` makes it), with the
dev stack's configuration: the engine itself runs it on every resource the program registers."""

OURS = (
    ("v1", "namespaces", "", "tpu-rl"),
    ("kueue.x-k8s.io/v1beta2", "clusterqueues", "", "tpu-rl"),
    ("kueue.x-k8s.io/v1beta2", "localqueues", "tpu-rl", "tpu-rl"),
)
THEIRS = (
    ("apiextensions.k8s.io/v1", "customresourcedefinitions", "", "jobsets.jobset.x-k8s.io"),
    ("apiextensions.k8s.io/v1", "customresourcedefinitions", "", "workloads.kueue.x-k8s.io"),
    ("apiextensions.k8s.io/v1", "customresourcedefinitions", "", "clusterqueues.kueue.x-k8s.io"),
)


def test_the_program_ups_on_an_existing_cluster_and_its_destroy_leaves_what_it_did_not_create(program) -> None:
    api = program["client"]
    _pulumi(program, "stack", "init", "local", "--secrets-provider", "passphrase")
    for key, value in LOCAL_STACK:
        _pulumi(program, "config", "set", "--path", key, value)
    up = _pulumi(program, "up", "--yes", "--skip-preview", *PACK)
    assert "✅ tpu-rl-guardrails@" in up.stdout, up.stdout[-3000:]  # the engine ran the pack, which passed it
    assert [path for path in OURS if not _object(api, path)] == [], up.stdout[-3000:]
    _pulumi(program, "preview", "--expect-no-changes", "--diff")
    _pulumi(program, "destroy", "--yes", "--skip-preview")
    assert [path for path in OURS if _object(api, path)] == []
    assert [path for path in THEIRS if not _object(api, path)] == []


def test_an_existing_cluster_without_the_slice_stops_up_before_anything_is_created(program) -> None:
    _pulumi(program, "stack", "init", "short", "--secrets-provider", "passphrase")
    for key, value in [*LOCAL_STACK, ("tpu-rl:tpu.slices", "2")]:
        _pulumi(program, "config", "set", "--path", key, value)
    done = subprocess.run(
        [program["pulumi"], "up", "--yes", "--skip-preview", "--non-interactive"],
        cwd=program["cwd"],
        env=program["env"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode != 0
    assert "existing cluster: the slice needs 16 TPU hosts" in done.stdout + done.stderr, done.stdout[-3000:]
    assert not _object(program["client"], OURS[0])
