"""The local cluster's pure parts (``tools/local_cluster``): what it builds, the nodes it registers against what the
program's steps ask of a node, the webhooks it points at loopback, and a build that fails or is cached."""

from __future__ import annotations

import re
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from core.config.schema import FIELDS
from core.controllers import KUEUE_VERSIONS
from core.errors import TpuRlError
from tests.lifecycle_walk import settings
from tools.local_cluster import build, seed
from tools.local_cluster.components import COMPONENTS, Component
from workloads.specs.step_specs import plan_workflow

pytestmark = pytest.mark.pure

DEFAULTS = {f.key: f.default for f in FIELDS}


def _requires(go_mod: str) -> dict[str, str]:
    return dict(re.findall(r"^\s*(?:require\s+)?(\S+)\s+(v\S+)", go_mod, re.M))


@pytest.mark.parametrize("component", COMPONENTS, ids=lambda c: c.name)
def test_each_part_is_built_from_its_release_pinned_by_digest(component: Component) -> None:
    """A release's main package is a ``tool`` of the part's module; where the part's own ``main.go`` stands in for
    one, it is the module's package and says why."""
    go_mod = (component.go_dir / "go.mod").read_text()
    go_sum = (component.go_dir / "go.sum").read_text()
    own = [p for p in component.packages if p.startswith("tpu-rl.local/")]
    if own:
        assert own == [re.search(r"^module (\S+)", go_mod, re.M)[1]]  # type: ignore[index]
        assert (component.go_dir / "main.go").is_file() and component.why  # says why the release's is not built
    else:
        assert all(re.search(rf"^tool\s+\(?[^)]*{re.escape(p)}\b", go_mod, re.M | re.S) for p in component.packages)
    if not component.module.startswith("tpu-rl.local/"):
        assert _requires(go_mod)[component.module] == component.version
        assert f"{component.module} {component.version} h1:" in go_sum


def test_the_controllers_are_the_releases_the_stacks_install() -> None:
    by_name = {c.name: c for c in COMPONENTS}
    assert by_name["jobset"].version == f"v{DEFAULTS['tpu-rl:workflow.jobsetVersion']}"
    kueue = by_name["kueue"]
    assert kueue.version.removeprefix("v") in KUEUE_VERSIONS
    assert kueue.pinned in ("", f"v{DEFAULTS['tpu-rl:kueue.version']}")


def test_binaries_are_named_as_go_build_names_them() -> None:
    etcd = next(c for c in COMPONENTS if c.name == "etcd")
    assert etcd.binaries == ("server",)  # go.etcd.io/etcd/server/v3: the element before the major version
    assert next(c for c in COMPONENTS if c.name == "kubernetes").binaries == (
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    )


def _tolerates(tolerations: list[dict[str, Any]], taint: dict[str, str]) -> bool:
    """Kubernetes' rule (``k8s.io/api/core/v1`` ``Toleration.ToleratesTaint``)."""
    for t in tolerations:
        if t.get("effect") not in (None, "", taint["effect"]):
            continue
        if t.get("operator") == "Exists" and t.get("key") in (None, "", taint["key"]):
            return True
        if t.get("key") == taint["key"] and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def _fits(pod: dict[str, Any], node: dict[str, Any]) -> bool:
    labels = node["metadata"]["labels"]
    selected = all(labels.get(k) == v for k, v in (pod.get("nodeSelector") or {}).items())
    tolerated = all(_tolerates(pod.get("tolerations") or [], t) for t in node["spec"]["taints"])
    wants = {k: v for c in pod["containers"] for k, v in (c.get("resources", {}).get("limits") or {}).items()}
    has_chips = int(node["status"]["capacity"].get("google.com/tpu", "0")) >= int(wants.get("google.com/tpu", "0"))
    return selected and tolerated and has_chips


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_pod_of_the_steps_has_nodes_to_run_on_and_the_slice_is_whole(stack: str) -> None:
    stack_settings = settings(stack, [])
    nodes = seed.nodes(seed.Shape.of(stack_settings))
    plan = plan_workflow(stack_settings)
    for step in plan.steps:
        for rjob in step.manifest["spec"]["replicatedJobs"]:
            job = rjob["template"]["spec"]
            pod = job["template"]["spec"]
            fitting = [n["metadata"]["name"] for n in nodes if _fits(pod, n)]
            assert len(fitting) >= int(job.get("parallelism", 1)), (step.name, rjob["name"], fitting)
    tpu_hosts = [n for n in nodes if "google.com/tpu" in n["status"]["capacity"]]
    chips = sum(int(n["status"]["capacity"]["google.com/tpu"]) for n in tpu_hosts)
    assert chips == stack_settings.total_chips
    assert {n["metadata"]["labels"]["cloud.google.com/gke-tpu-topology"] for n in tpu_hosts} == {
        stack_settings.tpu.topology
    }


def test_the_default_cluster_is_the_tutorials_slice() -> None:
    """``make local-cluster`` alone: the tutorial's v6e-32 (4x8, eight ct6e-standard-4t hosts of four chips)."""
    tpu = [n for n in seed.nodes(seed.Shape()) if "google.com/tpu" in n["status"]["capacity"]]
    assert len(tpu) == 8 and {n["metadata"]["labels"]["node.kubernetes.io/instance-type"] for n in tpu} == {
        "ct6e-standard-4t"
    }


def test_webhooks_reach_the_controller_on_loopback_with_the_local_ca(tmp_path: Path) -> None:
    folder = tmp_path / "config/components/webhook"
    folder.mkdir(parents=True)
    hook = {"name": "mjobset.kb.io", "clientConfig": {"service": {"name": "webhook-service", "path": "/mutate"}}}
    doc = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration"}
    (folder / "manifests.yaml").write_text(yaml.safe_dump({**doc, "metadata": {"name": "m"}, "webhooks": [hook]}))
    (out,) = seed.webhooks(tmp_path, "jobset", 9443, b"PEM")
    assert out["metadata"]["name"] == "jobset-m"
    assert out["webhooks"][0]["clientConfig"] == {"url": "https://127.0.0.1:9443/mutate", "caBundle": "UEVN"}


def _fake_go(tmp_path: Path, script: str) -> str:
    go = tmp_path / "go"
    go.write_text(f"#!/bin/sh\n{script}\n")
    go.chmod(go.stat().st_mode | stat.S_IEXEC)
    return str(go)


def test_a_failed_build_is_one_line_naming_the_part(tmp_path: Path) -> None:
    go = _fake_go(tmp_path, 'echo "# k8s.io/x" >&2; echo "main.go:3: undefined: y" >&2; exit 1')
    part = next(c for c in COMPONENTS if c.name == "kwok")
    with pytest.raises(TpuRlError) as err:
        build.build(part, tmp_path / "cache", go)
    assert str(err.value) == ("local cluster: building kwok v0.7.0 (sigs.k8s.io/kwok) failed: main.go:3: undefined: y")
    assert not list((tmp_path / "cache" / "local-cluster").iterdir())  # no half-built folder stays


def test_a_built_part_is_reused_and_a_new_pin_builds_anew(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    # A go that "builds" by writing each binary into -o's folder, counting its calls.
    go = _fake_go(tmp_path, f'echo x >> {calls}; out=$5; for b in kwok; do echo bin > "$out/$b"; done')
    part = next(c for c in COMPONENTS if c.name == "kwok")
    first = build.build(part, tmp_path / "cache", go)
    assert build.build(part, tmp_path / "cache", go) == first
    assert calls.read_text().count("x") == 1 and (first / "kwok").read_text() == "bin\n"
    moved = Component(part.name, part.module, "v0.7.1", part.packages)
    assert build.build(moved, tmp_path / "cache", go) != first
    assert calls.read_text().count("x") == 2
    assert not first.exists()  # the earlier pin's folder is gone


def test_without_go_the_build_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(TpuRlError) as err:
        build.go_command()
    assert err.value.exit_code == 2 and "\n" not in str(err.value) and "Go" in str(err.value)
