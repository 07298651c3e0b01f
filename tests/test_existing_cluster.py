"""An existing cluster (``tpu-rl:existingCluster``, docs/existing-cluster.md): what the stack creates there and
nothing else, the kubeconfig it keeps of the context, and what it checks first (``infra.k8s.fit``), each line
reviewed word for word in tests/data/existing-cluster-messages.tsv (`TPU_RL_UPDATE_MESSAGES=1` rewrites it)."""

from __future__ import annotations

import base64
import dataclasses
import functools
import os
from pathlib import Path

import pytest
import yaml

from core.errors import BadInputError
from core.tpu import resolve_slice
from infra.k8s import fit
from infra.k8s.kubeconfig import context_kubeconfig
from tests.conftest import SENTINEL_TOKEN, plan_of, release_crd
from tests.world import AppliedCluster, fake_world
from tools.plan import plan_stack
from tools.stack_files import ROOT

GKE_CONTEXT = "tpu-rl:existingCluster.kubeContext=gke_acme-tpu_us-east5_gke-tpu-v6e"
LOCAL = ("tpu-rl:existingCluster.kubeContext=tpu-rl-local", "tpu-rl:existingCluster.workloadIdentity=false")
MESSAGES = Path(__file__).parent / "data" / "existing-cluster-messages.tsv"

WORKFLOW_KINDS = {
    "Namespace",
    "NetworkPolicy",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "Secret",
    "ConfigMap",
    "JobSet",
    "ResourceFlavor",
    "ClusterQueue",
    "LocalQueue",
}
"""docs/existing-cluster.md "What the stack creates there": the workflow's part, and no controller or class."""
STEP_IDENTITY_TYPES = {
    "gcp:serviceaccount/account:Account",
    "gcp:serviceaccount/iAMMember:IAMMember",
    "gcp:storage/bucketIAMMember:BucketIAMMember",
}


def _kinds(plan):
    return {r["type"].rsplit(":", 1)[1] for r in plan.resources if r["type"].startswith("kubernetes:")}


def _cloud_types(plan):
    return {r["type"] for r in plan.resources if r["type"].startswith("gcp:")}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_stack_creates_only_the_workflows_part_on_an_existing_gke_cluster(stack):
    unset = ["tpu-rl:gke.versionPrefix=", "tpu-rl:gke.secretsEncryptionKey="] if stack == "prod" else []
    plan = plan_of(stack, GKE_CONTEXT, *unset)
    assert _kinds(plan) <= WORKFLOW_KINDS and {"Namespace", "JobSet"} <= _kinds(plan)
    assert _cloud_types(plan) == STEP_IDENTITY_TYPES
    members = {r["inputs"]["member"] for r in plan.find("gcp:serviceaccount/iAMMember:IAMMember")}
    assert members and all(m.startswith(f"serviceAccount:my-tpu-{stack}-project.svc.id.goog[tpu-rl/") for m in members)
    # Deleted by destroy one by one, never with a cluster the stack does not own.
    assert not [r["name"] for r in plan.resources if r["options"]["deletedWith"]]
    (provider,) = plan.find("pulumi:providers:kubernetes")
    assert provider["inputs"]["clusterIdentifier"] == GKE_CONTEXT.split("=", 1)[1]
    assert (
        plan.outputs["nodePools"] == [] and plan.outputs["bucketUrl"] == f"gs://my-tpu-{stack}-project-tpu-rl-{stack}"
    )
    assert (
        (plan.outputs["getCredentialsCommand"])
        == "gcloud container clusters get-credentials gke-tpu-v6e --location us-east5 --project acme-tpu"
    )


def test_without_workload_identity_the_stack_creates_nothing_in_google_cloud():
    plan = plan_of("dev", *LOCAL)
    assert _cloud_types(plan) == set()
    accounts = [r["inputs"] for r in plan.find("kubernetes:core/v1:ServiceAccount")]
    assert accounts and not any("annotations" in a["metadata"] for a in accounts)
    steps = plan.outputs["steps"]
    assert all("consoleLogs" not in step and "--context tpu-rl-local " in step["logs"] for step in steps.values())
    assert plan.outputs["getCredentialsCommand"] == ""


def _write(path: Path, config: dict) -> Path:
    path.write_text(yaml.safe_dump(config))
    return path


def _config(context: str, cluster: str, user: str, server: str, **user_fields) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "contexts": [{"name": context, "context": {"cluster": cluster, "user": user}}],
        "clusters": [{"name": cluster, "cluster": {"server": server, "certificate-authority": "ca.crt"}}],
        "users": [{"name": user, "user": user_fields}],
    }


def test_the_kubeconfig_kept_is_the_context_alone_merged_as_kubectl_merges_and_its_files_inlined(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "ca.crt").write_bytes(b"CA-A")
    (tmp_path / "a" / "key.pem").write_bytes(b"KEY")
    first = _write(
        tmp_path / "a" / "config",
        _config(
            "local",
            "c1",
            "u1",
            "https://127.0.0.1:1",
            **{"client-key": "key.pem", "client-certificate-data": "Q0VSVA=="},
        ),
    )
    second = _write(
        tmp_path / "second",
        {
            **_config("local", "c2", "u2", "https://10.0.0.1"),
            "contexts": [
                {"name": "local", "context": {"cluster": "c2", "user": "u2"}},
                {"name": "other", "context": {"cluster": "c2", "user": "u2"}},
            ],
        },
    )
    kept = yaml.safe_load(context_kubeconfig("local", {"KUBECONFIG": f"{first}:{second}"}, tmp_path))
    assert kept["current-context"] == "local" and [c["name"] for c in kept["contexts"]] == ["local"]
    (cluster,) = kept["clusters"]
    assert cluster == {
        "name": "c1",
        "cluster": {"server": "https://127.0.0.1:1", "certificate-authority-data": base64.b64encode(b"CA-A").decode()},
    }
    (user,) = kept["users"]
    assert user["user"] == {"client-certificate-data": "Q0VSVA==", "client-key-data": base64.b64encode(b"KEY").decode()}


def _home(kubeconfig: dict, folder: Path) -> Path:
    """A home whose ~/.kube/config is ``kubeconfig``."""
    (folder / ".kube").mkdir(parents=True)
    _write(folder / ".kube" / "config", kubeconfig)
    return folder


@functools.cache
def _jobset_crd() -> dict:
    """JobSet 0.10.1's CRD as the cluster serves it (the vendored release's)."""
    return yaml.load(release_crd("jobset", "0.10.1", "jobsets").read_text(), Loader=yaml.CSafeLoader)


def _crd(*served: str) -> dict:
    return {"spec": {"versions": [{"name": v, "served": True} for v in served]}}


def _nodes(*, tpu_chips: int = 4, metadata: bool = True) -> tuple[fit.Node, ...]:
    """Cluster Toolkit's tutorial cluster at rest: two system nodes and the reserved 4x8 pool's eight hosts (cpu-np
    is scaled to zero)."""
    gke = {fit.METADATA_SERVER_LABEL: "true"} if metadata else {}
    tpu = {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice", "cloud.google.com/gke-tpu-topology": "4x8"}
    system = [fit.Node({"cloud.google.com/gke-nodepool": "system", **gke}, 0)] * 2
    hosts = [fit.Node({"cloud.google.com/gke-nodepool": "gke-tpu-v6e-pool", **tpu, **gke}, tpu_chips)] * 8
    return (*system, *hosts)


def cluster_toolkit() -> fit.ClusterFacts:
    """What the tutorial's blueprint makes (docs/existing-cluster.md "Cluster Toolkit's cluster"): JobSet 0.10.1,
    Kueue 0.17.1 (serving v1beta1 and v1beta2), Workload Identity, the static 4x8 pool."""
    return fit.ClusterFacts(nodes=_nodes(), jobset_crd=_jobset_crd(), kueue_crd=_crd("v1beta1", "v1beta2"))


PROD = fit.Needs(
    context="gke_acme-tpu_us-east5_gke-tpu-v6e",
    stack="ct",
    jobset_version="0.10.1",
    queued=True,
    shape=resolve_slice("v6e", "ct6e-standard-4t", "4x8"),
    slices=1,
    static_slice=True,
    workload_identity=True,
    instance="tpu-rl-ct",
    claimed=(("Namespace", "tpu-rl"), ("ClusterQueue", "tpu-rl")),
)


def test_cluster_toolkits_tutorial_cluster_fits_the_prod_stack_and_its_second_up():
    assert fit.fit(cluster_toolkit(), PROD) == fit.Fit((), ())
    ours = {name: "tpu-rl-ct" for name in PROD.claimed}
    assert fit.fit(dataclasses.replace(cluster_toolkit(), owners=ours), PROD) == fit.Fit((), ())


def _lines(tmp_path: Path) -> dict[str, str]:
    """Every refusal and note, by case."""
    lines = {}
    local = _config("local", "c1", "u1", "https://127.0.0.1:1")
    dangling = {**local, "contexts": [{"name": "dangling", "context": {"cluster": "c1", "user": "gone"}}]}
    for case, config, context in (("no-context", local, "gke_p_r_c"), ("no-user", dangling, "dangling")):
        with pytest.raises(BadInputError) as caught:
            context_kubeconfig(context, {}, _home(config, tmp_path / case))
        lines[f"kubeconfig-{case}"] = str(caught.value).replace(str(tmp_path), "<tmp>")
    ct = cluster_toolkit()
    problems = {
        "no-jobset": dataclasses.replace(ct, jobset_crd=None),
        "old-jobset": dataclasses.replace(ct, jobset_crd={"spec": {"versions": []}}),
        "no-kueue": dataclasses.replace(ct, kueue_crd=None),
        "old-kueue": dataclasses.replace(ct, kueue_crd=_crd("v1beta1")),
        "short-slice": dataclasses.replace(ct, nodes=ct.nodes[:7]),
        "other-chips": dataclasses.replace(ct, nodes=_nodes(tpu_chips=8)),
        "no-metadata-server": dataclasses.replace(ct, nodes=_nodes(metadata=False)),
        "another-stacks-namespace": dataclasses.replace(ct, owners={("Namespace", "tpu-rl"): "tpu-rl-dev"}),
        "a-clusterqueue-of-nobodys": dataclasses.replace(ct, owners={("ClusterQueue", "tpu-rl"): ""}),
    }
    for case, facts in problems.items():
        found = fit.fit(facts, PROD)
        assert len(found.problems) == 1 and not found.notes, (case, found)
        lines[f"fit-{case}"] = found.problems[0]
    scaled_to_zero = dataclasses.replace(ct, nodes=())
    autoscaled = fit.fit(scaled_to_zero, dataclasses.replace(PROD, static_slice=False, workload_identity=False))
    assert autoscaled.problems == () and len(autoscaled.notes) == 1
    lines["fit-autoscaled-none-up"] = autoscaled.notes[0]
    return lines


def test_every_refusal_is_one_line_and_the_reviewed_one(tmp_path):
    found = _lines(tmp_path)
    assert all("\n" not in text and "\t" not in text for text in found.values())
    if os.environ.get("TPU_RL_UPDATE_MESSAGES"):
        MESSAGES.write_text("".join(f"{case}\t{text}\n" for case, text in found.items()))
    assert found == dict(line.split("\t", 1) for line in MESSAGES.read_text().splitlines())


class ToolkitCluster(AppliedCluster):
    """The tutorial's cluster, as the reader would find it (``cluster_toolkit``), the slice short by ``SHORT`` hosts."""

    SHORT = 0

    def facts(self, claimed: tuple[tuple[str, str], ...] = ()) -> fit.ClusterFacts:
        found = cluster_toolkit()
        return dataclasses.replace(found, nodes=found.nodes[: len(found.nodes) - self.SHORT])


def _checked_up(short: int):
    """`up` of prod's platform on the tutorial's cluster, the capacity check one that fails the test if it runs."""

    def capacity(settings, *, held_keys=None):
        raise AssertionError("the capacity check ran for an existing cluster")

    ToolkitCluster.SHORT = short
    overrides = [
        "gcp:project=real-project-1",
        'tpu-rl:authorizedNetworks=["198.18.0.0/15"]',
        "tpu-rl:tpu.reservation=res-a",
        "tpu-rl:workflow.enabled=false",  # the platform alone: the steps' waits are the scenarios'
        "tpu-rl:gke.versionPrefix=",
        "tpu-rl:gke.secretsEncryptionKey=",
        GKE_CONTEXT,
    ]
    plan, _ = plan_stack(
        ROOT / "Pulumi.prod.yaml",
        overrides,
        world=functools.partial(fake_world, cluster=ToolkitCluster, capacity=capacity),
        preflight=True,
        secrets={"tpu-rl:hfToken": SENTINEL_TOKEN},
        raise_errors=False,
    )
    return plan


def test_up_on_an_existing_cluster_checks_the_cluster_and_not_the_projects_capacity():
    plan = _checked_up(short=0)
    assert plan.error is None and plan.find("kubernetes:core/v1:Namespace")


def test_a_cluster_short_of_the_slice_stops_up_before_any_of_its_objects():
    plan = _checked_up(short=1)
    assert str(plan.error).startswith("existing cluster: the slice needs 8 TPU hosts (1 x 4x8 tpu-v6e-slice, 4 chips")
    assert not [r for r in plan.resources if r["type"].startswith("kubernetes:") and "Namespace" in r["type"]]
