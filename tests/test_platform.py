"""The GCP platform in the dev and prod plans: pools, IAM, bucket, cluster, provider, dependencies."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from core.names import step_account, step_ksa
from core.steps import STEPS
from infra.gcp.identities import NODE_PROJECT_ROLES
from tests.conftest import one, plan_of, step_resources
from tools.plan import main as plan_main

POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"


def tpu_pools(plan):
    return sorted((r for r in plan.find(POOL) if r["name"].startswith("tpu-pool")), key=lambda r: r["name"])


def common_tpu_pool_checks(pool, machine, topology, zone="us-east5-b"):
    inputs = pool["inputs"]
    node = inputs["nodeConfig"]
    assert node["machineType"] == machine
    assert inputs["nodeLocations"] == [zone], "a slice lives in exactly one zone"
    assert node["taints"] == [{"key": "google.com/tpu", "value": "present", "effect": "NO_SCHEDULE"}]
    assert node["labels"]["cloud.google.com/gke-tpu-accelerator"] == "tpu-v6e-slice"
    assert node["labels"]["cloud.google.com/gke-tpu-topology"] == topology
    assert node["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
    assert node["serviceAccount"].startswith("tpu-rl-")
    assert pool["options"]["deleteBeforeReplace"] is True


def test_reservation_pool_is_static_on_the_specific_reservation(prod_plan):
    (pool,) = tpu_pools(prod_plan)
    common_tpu_pool_checks(pool, "ct6e-standard-4t", "4x8")
    inputs = pool["inputs"]
    assert inputs["nodeCount"] == 8
    assert "autoscaling" not in inputs
    assert inputs["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "4x8"}
    assert inputs["nodeConfig"]["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["projects/my-tpu-prod-project/reservations/my-v6e-32-reservation"],
    }
    assert not inputs["nodeConfig"].get("spot") and not inputs["nodeConfig"].get("flexStart")
    assert pool["options"]["protect"] is True


@pytest.mark.parametrize("capacity", ["spot", "flex-start", "on-demand"])
@pytest.mark.slow
def test_autoscaled_pools_scale_between_zero_and_one_slice(capacity):
    (pool,) = tpu_pools(plan_of("dev", f"tpu-rl:tpu.capacity={capacity}"))
    common_tpu_pool_checks(pool, "ct6e-standard-4t", "2x4")
    inputs = pool["inputs"]
    assert "nodeCount" not in inputs
    assert inputs["autoscaling"]["minNodeCount"] == 0
    assert inputs["autoscaling"]["maxNodeCount"] == 2, "a whole 2x4 slice is 2 hosts"
    assert inputs["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "2x4"}
    node = inputs["nodeConfig"]
    assert node["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert node.get("spot", False) == (capacity == "spot")
    assert node.get("flexStart", False) == (capacity == "flex-start")
    if capacity == "flex-start":
        assert inputs["autoscaling"]["locationPolicy"] == "ANY"
        assert inputs["management"]["autoRepair"] is False


@pytest.mark.slow
def test_two_slices_get_two_identical_pools():
    pools = tpu_pools(
        plan_of(
            "prod",
            "tpu-rl:tpu.slices=2",
            "tpu-rl:training.iciExpertParallelism=1",
            "tpu-rl:training.rolloutTensorParallelism=32",
        )
    )
    assert [p["inputs"]["name"] for p in pools] == ["tpu-v6e-4x8-0", "tpu-v6e-4x8-1"]
    for pool in pools:
        common_tpu_pool_checks(pool, "ct6e-standard-4t", "4x8")
        assert pool["inputs"]["nodeCount"] == 8


def test_set_overrides_a_nested_key_like_config_set_path():
    (pool,) = tpu_pools(plan_of("prod", "tpu-rl:tpu.topology=4x4"))
    assert pool["inputs"]["placementPolicy"]["tpuTopology"] == "4x4"
    assert pool["inputs"]["nodeCount"] == 4


@pytest.mark.slow
def test_single_host_pool_has_no_topology():
    (pool,) = tpu_pools(
        plan_of("dev", "tpu-rl:tpu.machineType=ct6e-standard-8t", "tpu-rl:training.rolloutTensorParallelism=4")
    )
    assert "placementPolicy" not in pool["inputs"]
    assert pool["inputs"]["autoscaling"]["maxNodeCount"] == 1


def test_cpu_and_system_pools(dev_plan, prod_plan):
    cpu = one(prod_plan, POOL, "cpu-pool")["inputs"]
    assert cpu["name"] == "cpu-np"
    assert cpu["nodeConfig"]["machineType"] == "n4-standard-64"
    assert cpu["nodeConfig"]["diskType"] == "hyperdisk-balanced", "N4 has no Persistent Disk"
    assert cpu["autoscaling"] == {"minNodeCount": 0, "maxNodeCount": 4}
    assert cpu["nodeConfig"]["diskSizeGb"] >= 200, "conversion downloads ~52 GB"
    system = one(prod_plan, POOL, "system-pool")["inputs"]
    assert system["nodeConfig"]["machineType"] == "e2-standard-8"
    assert system["nodeLocations"] == ["us-east5-b"]
    assert one(dev_plan, POOL, "system-pool")["inputs"]["autoscaling"]["minNodeCount"] == 1


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_iam_is_least_privilege(stack):
    plan = plan_of(stack)
    project_roles = {r["inputs"]["role"] for r in plan.find("gcp:projects/iAMMember:IAMMember")}
    assert project_roles == set(NODE_PROJECT_ROLES)
    forbidden = {
        "roles/storage.admin",
        "roles/owner",
        "roles/editor",
        "roles/container.admin",
        "roles/iam.serviceAccountUser",
    }
    assert not project_roles & forbidden
    bucket_grants = plan.find("gcp:storage/bucketIAMMember:BucketIAMMember")
    assert {r["inputs"]["role"] for r in bucket_grants} == {
        "roles/storage.objectUser",
        "roles/storage.objectViewer",
        "roles/storage.legacyBucketReader",
    }
    for grant in bucket_grants:
        condition = grant["inputs"].get("condition")
        assert (condition is None) == (grant["inputs"]["role"] == "roles/storage.legacyBucketReader"), grant["name"]
    holders = {r["inputs"]["member"].split(":")[1].split("@")[0] for r in bucket_grants}
    cluster = one(plan, CLUSTER)["inputs"]["name"]
    assert holders == {f"{cluster}-{n}" for n in ("cpu-np", "tpu-np", "convert", "export", "publish")}, (
        "system nodes get no bucket access; each CPU step has its own identity, the publication's in every stack"
    )
    assert all(r["inputs"]["bucket"] == one(plan, "gcp:storage/bucket:Bucket")["inputs"]["name"] for r in bucket_grants)
    project = one(plan, CLUSTER)["inputs"]["project"]
    for step in ("convert", "export", "publish"):
        wi = one(plan, "gcp:serviceaccount/iAMMember:IAMMember", f"{step}-workload-identity")["inputs"]
        assert wi["role"] == "roles/iam.workloadIdentityUser"
        # The KSA is named as the Google account (<clusterName>-<step>), which no other stack has.
        assert wi["member"] == f"serviceAccount:{project}.svc.id.goog[tpu-rl/{cluster}-{step}]", "only its own KSA"
        assert f"/serviceAccounts/{cluster}-{step}@" in wi["serviceAccountId"], "binds the step's own Google account"
    published = step_resources(plan_of(stack, "tpu-rl:publish.repo=acme/m"))
    for step in ("convert", "export", "publish"):
        pod = published[step]["inputs"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
        assert pod["spec"]["serviceAccountName"] == f"{cluster}-{step}", "the step's pods run as its own KSA"


WORKLOAD_IDENTITY_USER = "roles/iam.workloadIdentityUser"
SHARED_PROJECT = (
    "gcp:project=shared-tpu-project",
    "tpu-rl:namespace=rl-runs",
    "tpu-rl:publish.repo=acme/m",
    "tpu-rl:workflow.steps.evaluate=true",
)
"""Two stacks in one project and one namespace, every CPU step on."""


def workload_identities(plan) -> dict[str, tuple[str, str]]:
    """CPU step -> (the Workload Identity principal its Google account lets act as it, that account)."""
    found = {}
    for r in plan.find("gcp:serviceaccount/iAMMember:IAMMember"):
        if r["inputs"]["role"] == WORKLOAD_IDENTITY_USER:
            account = r["inputs"]["serviceAccountId"].rsplit("/", 1)[1]
            found[r["name"].removesuffix("-workload-identity")] = (r["inputs"]["member"], account)
    return found


def kubernetes_accounts(plan) -> dict[str, tuple[str, str]]:
    """CPU step -> (its ServiceAccount object's namespace/name, the Google account it maps to): the accounts mapped to
    a Google account (the training head's maps to none)."""
    return {
        r["name"].removesuffix("-ksa"): (
            f"{r['inputs']['metadata']['namespace']}/{r['inputs']['metadata']['name']}",
            r["inputs"]["metadata"]["annotations"]["iam.gke.io/gcp-service-account"],
        )
        for r in plan.find("kubernetes:core/v1:ServiceAccount")
        if "iam.gke.io/gcp-service-account" in r["inputs"]["metadata"].get("annotations", {})
    }


def pod_accounts(plan, *, train: bool = False) -> dict[str, str]:
    """Step -> namespace/serviceAccountName of its pods (the CPU steps'; with ``train``, the training head's too)."""
    found = {}
    for step, r in step_resources(plan).items():
        for rjob in r["inputs"]["spec"]["replicatedJobs"]:
            pod = rjob["template"]["spec"]["template"]["spec"]
            if "serviceAccountName" in pod and (train or step != "train"):
                found[step] = f"{r['inputs']['metadata']['namespace']}/{pod['serviceAccountName']}"
    return found


def test_two_stacks_in_one_project_and_namespace_share_no_workload_identity_principal():
    """The project's identity pool PROJECT.svc.id.goog is one, and a principal names a namespace and a
    KSA, no cluster. With KSAs named alike in both stacks, a pod of dev's cluster could act as prod's accounts. Each
    KSA is named as its Google account (unique in the project), so the principals are disjoint whatever the
    namespace, and each step's pods run as the KSA its own account is bound to."""
    plans = {stack: plan_of(stack, *SHARED_PROJECT) for stack in ("dev", "prod")}
    principals, ksas, pods = {}, {}, {}
    for stack, plan in plans.items():
        assert one(plan, CLUSTER)["inputs"]["project"] == "shared-tpu-project"
        bound, accounts, running = workload_identities(plan), kubernetes_accounts(plan), pod_accounts(plan)
        assert set(bound) == set(accounts) == set(running) == {"convert", "export", "evaluate", "publish"}, stack
        for step, (member, google) in bound.items():
            ksa, annotated = accounts[step]
            assert ksa.startswith("rl-runs/") and running[step] == ksa, f"{stack} {step}: its pods run as its KSA"
            assert member == f"serviceAccount:shared-tpu-project.svc.id.goog[{ksa}]", f"{stack} {step}"
            assert annotated == google, f"{stack} {step}: the KSA maps to the account that trusts it"
            assert ksa.split("/")[1] == google.split("@")[0], "named as its Google account"
        principals[stack] = {member for member, _ in bound.values()}
        ksas[stack] = {ksa for ksa, _ in accounts.values()}
        pods[stack] = set(running.values())
    assert not principals["dev"] & principals["prod"], "no principal of one stack is trusted by the other's accounts"
    assert not ksas["dev"] & ksas["prod"] and not pods["dev"] & pods["prod"]


@pytest.mark.pure
def test_every_step_account_and_its_ksa_fit_their_limits_whatever_the_cluster_name():
    """An account id is 6-30 characters, a lowercase letter first (IAM); the KSA named as it is a DNS-1123
    subdomain (at most 253). ``tpu-rl:clusterName`` is 1-20 characters."""
    own = [name for name, facts in STEPS.items() if facts.identity != "nodes"]
    assert own == ["convert", "export", "evaluate", "publish"]
    for cluster in ("a", "abcdefghijklmnopqrst"):
        for step in own:
            account = step_account(cluster, step)
            assert re.fullmatch(r"[a-z][-a-z0-9]{4,28}[a-z0-9]", account), account
            assert step_ksa(cluster, step) == account
            assert len(account) <= 253 and re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", account)


@pytest.mark.slow
def test_service_account_ids_fit_the_30_character_limit():
    plan = plan_of("dev", "tpu-rl:clusterName=abcdefghijklmnopqrst")
    ids = [r["inputs"]["accountId"] for r in plan.find("gcp:serviceaccount/account:Account")]
    assert len(ids) == 6 and "abcdefghijklmnopqrst-publish" in ids and all(6 <= len(i) <= 30 for i in ids)
    ksas = {r["inputs"]["metadata"]["name"] for r in plan.find("kubernetes:core/v1:ServiceAccount")}
    mapped = {f"abcdefghijklmnopqrst-{step}" for step in ("convert", "export", "publish")}
    assert ksas == {*mapped, "abcdefghijklmnopqrst-train-head"} and mapped <= set(ids), "the head's maps to none"


def test_bucket_security(dev_plan, prod_plan):
    for plan, force, protect in ((dev_plan, True, False), (prod_plan, False, True)):
        bucket = one(plan, "gcp:storage/bucket:Bucket")
        inputs = bucket["inputs"]
        assert inputs["uniformBucketLevelAccess"] is True
        assert inputs["publicAccessPrevention"] == "enforced"
        assert inputs["softDeletePolicy"]["retentionDurationSeconds"] >= 7 * 24 * 3600
        assert inputs["forceDestroy"] is force
        assert bucket["options"]["protect"] is protect
        assert inputs["labels"]["app"] == "tpu-rl"


def test_cluster_security(dev_plan, prod_plan):
    for plan, protect, networks in ((dev_plan, False, ["0.0.0.0/0"]), (prod_plan, True, ["203.0.113.0/24"])):
        cluster = one(plan, CLUSTER)
        c = cluster["inputs"]
        assert c["location"] == "us-east5" and c["nodeLocations"] == ["us-east5-b"]
        assert c["removeDefaultNodePool"] is True
        assert c["releaseChannel"] == {"channel": "REGULAR"}
        assert c["workloadIdentityConfig"]["workloadPool"] == f"{c['project']}.svc.id.goog"
        assert c["privateClusterConfig"]["enablePrivateNodes"] is True
        assert c["privateClusterConfig"]["enablePrivateEndpoint"] is False
        assert [b["cidrBlock"] for b in c["masterAuthorizedNetworksConfig"]["cidrBlocks"]] == networks
        assert c["enableShieldedNodes"] is True
        assert c["datapathProvider"] == "ADVANCED_DATAPATH"
        assert c["addonsConfig"]["gcsFuseCsiDriverConfig"]["enabled"] is True
        assert c["deletionProtection"] is protect
        assert cluster["options"]["protect"] is protect
        assert cluster["options"]["customTimeouts"]["create"] == "60m"
        assert c["resourceLabels"]["cluster"] == c["name"]


def test_network_has_nat_and_pod_ranges(dev_plan):
    subnet = one(dev_plan, "gcp:compute/subnetwork:Subnetwork")["inputs"]
    assert {r["rangeName"] for r in subnet["secondaryIpRanges"]} == {"pods", "services"}
    nat = one(dev_plan, "gcp:compute/routerNat:RouterNat")["inputs"]
    assert nat["sourceSubnetworkIpRangesToNat"] == "ALL_SUBNETWORKS_ALL_IP_RANGES"
    services = dev_plan.find("gcp:projects/service:Service")
    assert {s["inputs"]["service"] for s in services} >= {"container.googleapis.com", "compute.googleapis.com"}
    assert all(s["inputs"]["disableOnDestroy"] is False for s in services)


def test_kubernetes_provider_uses_exec_plugin_and_stable_identifier(dev_plan):
    provider = one(dev_plan, "pulumi:providers:kubernetes", "gke")
    assert provider["inputs"]["kubeconfig"] == "[secret]"
    assert provider["inputs"]["clusterIdentifier"] == "my-tpu-dev-project/us-east5/tpu-rl-dev"
    kubeconfig = yaml.safe_load(dev_plan.raw_inputs["gke"]["kubeconfig"])
    user = kubeconfig["users"][0]["user"]
    assert user["exec"]["command"] == "gke-gcloud-auth-plugin"
    assert "token" not in user
    assert kubeconfig["clusters"][0]["cluster"]["server"].startswith("https://")
    assert dev_plan.outputs["kubeconfig"] == "[secret]"


def test_dependencies(dev_plan):
    apis = {r["name"] for r in dev_plan.find("gcp:projects/service:Service")}
    cluster = one(dev_plan, CLUSTER)
    assert apis <= set(cluster["options"]["dependsOn"])
    for pool in dev_plan.find(POOL):
        assert "tpu-container.defaultNodeServiceAccount" in pool["options"]["dependsOn"]
        assert "cluster" in pool["options"]["dependsOn"]
    provider = one(dev_plan, "pulumi:providers:kubernetes", "gke")
    assert {"system-pool", "cpu-pool"} <= set(provider["options"]["dependsOn"])
    assert "tpu-pool-0" not in provider["options"]["dependsOn"], "conversion need not wait for the TPU slice"
    steps = step_resources(dev_plan)
    assert "tpu-pool-0" in steps["train"]["options"]["dependsOn"]
    assert "tpu-pool-0" not in steps["convert"]["options"]["dependsOn"], "conversion runs while the slice comes up"
    for step in ("convert", "export"):
        wi = one(dev_plan, "gcp:serviceaccount/iAMMember:IAMMember", f"{step}-workload-identity")
        assert "cluster" in wi["options"]["dependsOn"], "the identity pool exists once the cluster does"
        ksa = one(dev_plan, "kubernetes:core/v1:ServiceAccount", f"{step}-ksa")["options"]["dependsOn"]
        assert {f"{step}-workload-identity", f"{step}-bucket-objectUser", "namespace"} <= set(ksa)


def test_outputs(prod_plan):
    out = prod_plan.outputs
    assert out["clusterName"] == "tpu-rl-prod" and out["clusterLocation"] == "us-east5"
    assert out["bucketUrl"] == "gs://my-tpu-prod-project-tpu-rl-prod"
    assert out["hubCache"] == "gs://my-tpu-prod-project-tpu-rl-prod/gemma4-26b/convert/hub/", "the stack's own"
    assert out["nodePools"] == ["system", "cpu-np", "tpu-v6e-4x8-0"]
    assert out["getCredentialsCommand"] == (
        "gcloud container clusters get-credentials tpu-rl-prod --location us-east5 --project my-tpu-prod-project"
    )


@pytest.mark.slow
def test_cli_writes_plan_json_and_is_deterministic(tmp_path, capsys):
    for name in ("a", "b"):
        assert plan_main(["--stack", "dev", "--out", str(tmp_path / name)]) == 0
    out = capsys.readouterr().out
    assert "gcp:container/cluster:Cluster" in out and "resources in stack dev" in out
    a = (tmp_path / "a" / "plan.json").read_text()
    assert a == (tmp_path / "b" / "plan.json").read_text()
    plan = json.loads(a)
    assert plan["stack"] == "dev" and plan["outputs"]["clusterName"] == "tpu-rl-dev"
    resource = plan["resources"][0]
    assert set(resource) == {"type", "name", "inputs", "options"}
    assert set(resource["options"]) == {
        "dependsOn",
        "parent",
        "provider",
        "protect",
        "customTimeouts",
        "replaceOnChanges",
        "deleteBeforeReplace",
        "ignoreChanges",
        "deletedWith",
        "retainOnDelete",
        "aliases",
        "replacementTrigger",
    }
    assert plan["resources"] == sorted(plan["resources"], key=lambda r: (r["type"], r["name"]))
    assert (tmp_path / "a" / "manifests").is_dir()


def test_config_file_option(tmp_path):
    stack = tmp_path / "custom.yaml"
    stack.write_text(
        yaml.safe_dump(
            {
                "config": {
                    "gcp:project": "custom-proj-1",
                    "gcp:region": "europe-west4",
                    "gcp:zone": "europe-west4-a",
                    "tpu-rl:tpu": {"capacity": "spot"},
                    "tpu-rl:workflow": {"enabled": False},
                }
            }
        )
    )
    assert plan_main(["--config-file", str(stack), "--out", str(tmp_path / "out")]) == 0
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    pools = [r for r in plan["resources"] if r["name"].startswith("tpu-pool")]
    assert pools[0]["inputs"]["autoscaling"]["maxNodeCount"] == 8


@pytest.mark.parametrize(("stack", "protect"), [("dev", False), ("prod", True)])
def test_the_destroy_guards_are_protected_with_the_stack_and_together_depend_on_every_resource(stack, protect):
    """infra.k8s.platform.DestroyGuard: one on the platform, depending on no step; one on each Helm release alone
    (``release_guard``); and as many as the catalogue has steps, one on each planned step's object and one on its
    ConfigMap of scripts, in the plan's order (the rest on nothing), each protected exactly while
    tpu-rl:protect is; every resource is a transitive dependency of a guard (dependency_graph.go DependenciesOf:
    depends-on, parent)."""
    plan = plan_of(stack)
    guards = {r["name"]: r for r in plan.find("tpu-rl:lifecycle:DestroyGuard")}
    numbered = [f"tpu-rl-protect-step-{i}" for i in range(1, len(STEPS) + 1)]
    scripts = [f"tpu-rl-protect-scripts-{i}" for i in range(1, len(STEPS) + 1)]
    releases = ["tpu-rl-protect-release-jobset", "tpu-rl-protect-release-kueue"]
    assert set(guards) == {"tpu-rl-protect", *releases, *numbered, *scripts}
    assert [guards[n]["options"]["dependsOn"] for n in releases] == [["jobset"], ["kueue"]], "the release alone"
    assert all(g["options"]["protect"] is protect for g in guards.values())
    objects = step_resources(plan)
    in_order = [objects[step]["name"] for step in STEPS if step in objects]
    assert [guards[n]["options"]["dependsOn"] for n in numbered] == [in_order[i : i + 1] for i in range(len(numbered))]
    # Each step's ConfigMap of scripts is created long before its JobSet: a guard of its own.
    maps = [f"{name}-scripts" for name in in_order]
    assert [guards[n]["options"]["dependsOn"] for n in scripts] == [maps[i : i + 1] for i in range(len(scripts))]
    assert not {o["name"] for o in objects.values()} & set(guards["tpu-rl-protect"]["options"]["dependsOn"])
    edges = {r["name"]: {*r["options"]["dependsOn"], r["options"].get("parent")} - {None} for r in plan.resources}
    covered: set[str] = set()
    todo = [d for g in guards.values() for d in g["options"]["dependsOn"]]
    while todo:
        name = todo.pop()
        if name not in covered:
            covered.add(name)
            todo.extend(edges.get(name, ()))
    custom = {r["name"] for r in plan.resources if not r["type"].startswith("tpu-rl:")}
    assert custom <= covered, sorted(custom - covered)


@pytest.mark.slow
def test_kueues_guard_stays_when_kueue_is_not_installed():
    """Turning ``tpu-rl:kueue.enabled`` off deletes Kueue's release at the end of `up`: its guard stays registered,
    guarding nothing, so the engine never has to delete a protected guard (``step.go`` ``DeleteStep.Apply`` refuses
    one)."""
    plan = plan_of("prod", "tpu-rl:kueue.enabled=false")
    guard = one(plan, "tpu-rl:lifecycle:DestroyGuard", "tpu-rl-protect-release-kueue")
    assert guard["options"]["dependsOn"] == [] and guard["options"]["protect"] is True
    assert not plan.find("kubernetes:helm.sh/v3:Release", "kueue")


def test_no_cpu_step_pod_gets_a_kubernetes_api_token():
    """The CPU steps never call the API server, and Workload Identity does not need the token in the pod
    (the GKE metadata server asks for the account's token itself). Their accounts say no token
    (``automountServiceAccountToken: false``), and their pods leave it to the account (a pod's setting would win)."""
    plan = plan_of("prod", "tpu-rl:publish.repo=acme/x", "tpu-rl:workflow.steps.evaluate=true")
    accounts = plan.find("kubernetes:core/v1:ServiceAccount")
    assert {r["name"] for r in accounts} == {
        "convert-ksa",
        "export-ksa",
        "evaluate-ksa",
        "publish-ksa",
        "train-head-serviceaccount",
    }
    assert all(r["inputs"]["automountServiceAccountToken"] is False for r in accounts)
    for step, r in step_resources(plan).items():
        for rjob in r["inputs"]["spec"]["replicatedJobs"]:
            pod = rjob["template"]["spec"]["template"]["spec"]
            if (step, rjob["name"]) == ("train", "pathways-head"):
                assert pod["automountServiceAccountToken"] is True, "the head reads its pods: its pod mounts the token"
                continue
            if (step, rjob["name"]) == ("train", "worker"):
                assert pod["automountServiceAccountToken"] is False, "the workers run as default, which gets none"
                continue
            assert "automountServiceAccountToken" not in pod, step


def test_the_training_head_may_read_its_namespaces_pods_and_nothing_else():
    """The head's account (``core.names.head_ksa``) is bound to one Role in the workflow namespace: get and list of
    pods. No other binding names it, it maps to no Google account, and each stack's is its own."""
    for stack in ("dev", "prod"):
        plan = plan_of(stack, *SHARED_PROJECT)
        (account,) = [
            r for r in plan.find("kubernetes:core/v1:ServiceAccount") if r["name"] == "train-head-serviceaccount"
        ]
        meta = account["inputs"]["metadata"]
        assert meta["name"] == f"tpu-rl-{stack}-train-head" and "annotations" not in meta, "no Workload Identity"
        (role,) = plan.find("kubernetes:rbac.authorization.k8s.io/v1:Role")
        assert role["inputs"]["metadata"]["namespace"] == meta["namespace"] == "rl-runs"
        assert role["inputs"]["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
        (binding,) = plan.find("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding")
        assert binding["inputs"]["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": role["inputs"]["metadata"]["name"],
        }
        assert binding["inputs"]["subjects"] == [
            {"kind": "ServiceAccount", "name": meta["name"], "namespace": meta["namespace"]}
        ]
        assert pod_accounts(plan, train=True)["train"] == f"rl-runs/{meta['name']}"
