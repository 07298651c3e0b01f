"""Cluster hardening on the planned stacks: Secrets encrypted with a Cloud KMS key, node accounts with
GKE's node role, bucket access bounded to each step's prefixes, the firewall and the NetworkPolicies on the
Pathways ports the JobSet uses, flow logs, versioning in prod."""

from __future__ import annotations

import re

import pytest

from core.layout import PATHWAYS_SCRATCH
from core.pathways import PORTS
from infra.gcp.access import BucketGrant, bucket_grants, hub_cache_grants
from tests.conftest import one, plan_of, step_resources
from tools.plan.offline import PROJECT_NUMBER

CLUSTER = "gcp:container/cluster:Cluster"
BUCKET_IAM = "gcp:storage/bucketIAMMember:BucketIAMMember"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
KEY_NAME = "projects/my-tpu-prod-project/locations/us-east5/keyRings/tpu-rl-prod-keys/cryptoKeys/gke-secrets"


# ---------------------------------------------------------------------------------------------
# Secrets encrypted at rest (CIS GKE 5.3.1)


def test_prod_encrypts_secrets_with_a_key_it_creates_in_the_clusters_region(prod_plan):
    ring = one(prod_plan, "gcp:kms/keyRing:KeyRing", "key-ring")
    assert ring["inputs"] == {"name": "tpu-rl-prod-keys", "project": "my-tpu-prod-project", "location": "us-east5"}
    key = one(prod_plan, "gcp:kms/cryptoKey:CryptoKey", "secrets-key")
    assert key["inputs"]["name"] == "gke-secrets" and key["inputs"]["purpose"] == "ENCRYPT_DECRYPT"
    # DELETE: a destroy schedules every version for destruction and turns rotation off (terraform-provider-google
    # resourceKMSCryptoKeyDelete), so nothing of the key bills after the stack is gone; the cluster that used it goes
    # first (it depends on the key through the grant).
    assert key["inputs"]["deletionPolicy"] == "DELETE", "destroy schedules the versions for destruction"
    assert key["inputs"]["rotationPeriod"] == "7776000s", "90 days"
    assert key["options"]["protect"] is False, "removing the key from a stack must not fail"
    grant_resource = one(prod_plan, "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember", "gke-agent-key-user")
    assert grant_resource["options"]["retainOnDelete"] is False, "the stack's own key's grant is its alone: deleted"
    grant = grant_resource["inputs"]
    assert grant == {
        "cryptoKeyId": KEY_NAME,
        "role": "roles/cloudkms.cryptoKeyEncrypterDecrypter",
        "member": f"serviceAccount:service-{PROJECT_NUMBER}@container-engine-robot.iam.gserviceaccount.com",
    }
    cluster = one(prod_plan, CLUSTER)
    assert cluster["inputs"]["databaseEncryption"] == {"state": "ENCRYPTED", "keyName": KEY_NAME}
    assert "gke-agent-key-user" in cluster["options"]["dependsOn"], "GKE checks its access to the key at creation"
    grant_deps = one(prod_plan, "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember")["options"]["dependsOn"]
    assert {"secrets-key", "gke-service-agent"} <= set(grant_deps), "the key and GKE's service agent exist first"
    agent = one(prod_plan, "gcp:projects/serviceIdentity:ServiceIdentity", "gke-service-agent")["inputs"]
    assert agent == {"project": "my-tpu-prod-project", "service": "container.googleapis.com"}
    assert "cloudkms" in cluster["options"]["dependsOn"]
    assert "cloudkms.googleapis.com" in {s["inputs"]["service"] for s in prod_plan.find("gcp:projects/service:Service")}


@pytest.mark.slow
def test_a_key_of_its_own_is_used_and_granted_but_not_created():
    own = "projects/security-project/locations/us-east5/keyRings/gke/cryptoKeys/secrets"
    plan = plan_of("prod", f"tpu-rl:gke.secretsEncryptionKey={own}")
    assert plan.find("gcp:kms/keyRing:KeyRing") == [] and plan.find("gcp:kms/cryptoKey:CryptoKey") == []
    assert one(plan, CLUSTER)["inputs"]["databaseEncryption"] == {"state": "ENCRYPTED", "keyName": own}
    grant = one(plan, "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember")
    assert grant["inputs"]["cryptoKeyId"] == own
    # The member is the project's GKE service agent: every stack of the project given this key registers the same
    # binding, and the provider's delete would remove it from all of them (resourceIamMemberDelete).
    assert grant["options"]["retainOnDelete"] is True, "a destroy never deletes a binding other stacks hold"


def test_dev_keeps_gkes_default_encryption_and_enables_no_kms_api(dev_plan):
    # Sent explicitly: removing a key from a stack decrypts the Secrets before the key's grant is deleted.
    assert one(dev_plan, CLUSTER)["inputs"]["databaseEncryption"] == {"state": "DECRYPTED"}
    assert [r for r in dev_plan.resources if r["type"].startswith("gcp:kms/")] == []
    assert "cloudkms.googleapis.com" not in {
        s["inputs"]["service"] for s in dev_plan.find("gcp:projects/service:Service")
    }


# ---------------------------------------------------------------------------------------------
# Least privilege


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_nodes_get_gkes_node_role_and_no_registry_reader_for_public_images(stack):
    plan = plan_of(stack)
    grants = {(r["name"], r["inputs"]["role"]) for r in plan.find("gcp:projects/iAMMember:IAMMember")}
    assert grants == {
        (f"{n}-container.defaultNodeServiceAccount", "roles/container.defaultNodeServiceAccount")
        for n in ("system", "cpu", "tpu")
    }


@pytest.mark.slow
def test_a_registry_of_ones_own_gives_the_nodes_registry_read_access():
    mirror = "us-docker.pkg.dev/my-project/mirror"
    plan = plan_of(
        "prod",
        f'tpu-rl:images.registries=["{mirror}", "us-docker.pkg.dev/cloud-tpu-v2-images"]',
        f"tpu-rl:images.maxtext={mirror}/tpu_post_training:0.2.5",
    )
    readers = {
        r["name"] for r in plan.find("gcp:projects/iAMMember:IAMMember") if "artifactregistry" in r["inputs"]["role"]
    }
    assert readers == {f"{n}-artifactregistry.reader" for n in ("system", "cpu", "tpu")}


def _prefixes(grant: dict) -> list[str]:
    condition = grant["inputs"].get("condition")
    if condition is None:
        return []
    return re.findall(
        r'resource\.name\.startsWith\("projects/_/buckets/[^/]+/objects/([^"]*)"\)', condition["expression"]
    )


def _access(plan) -> dict[tuple[str, str], list[str]]:
    return {
        (g["name"].split("-bucket-")[0], g["inputs"]["role"].split(".")[-1]): _prefixes(g)
        for g in plan.find(BUCKET_IAM)
    }


def test_each_identity_reads_and_writes_only_under_its_steps_prefixes(prod_plan):
    m = "gemma4-26b"
    assert _access(prod_plan) == {
        ("convert", "legacyBucketReader"): [],
        ("convert", "objectUser"): [f"{m}/convert/"],
        ("export", "legacyBucketReader"): [],
        ("export", "objectUser"): [f"{m}/export/"],
        ("export", "objectViewer"): [f"{m}/train/", f"{m}/convert/"],
        ("publish", "legacyBucketReader"): [],
        ("publish", "objectUser"): [f"{m}/publish/"],
        ("publish", "objectViewer"): [f"{m}/export/"],
        ("cpu", "legacyBucketReader"): [],
        ("cpu", "objectUser"): [f"{m}/train/", "pathways"],
        ("cpu", "objectViewer"): [f"{m}/convert/"],
        ("tpu", "legacyBucketReader"): [],
        ("tpu", "objectUser"): [f"{m}/train/", "pathways"],
        ("tpu", "objectViewer"): [f"{m}/convert/"],
    }, "no step writes another's output; the publication reads the export only"
    condition = one(prod_plan, BUCKET_IAM, "export-bucket-objectViewer")["inputs"]["condition"]
    assert condition["expression"] == (
        'resource.name.startsWith("projects/_/buckets/my-tpu-prod-project-tpu-rl-prod/objects/gemma4-26b/train/") || '
        'resource.name.startsWith("projects/_/buckets/my-tpu-prod-project-tpu-rl-prod/objects/gemma4-26b/convert/")'
    )
    assert condition["title"] and len(condition["title"]) <= 100, "IAM's limit on a condition title"
    # Turning the publication on changes no IAM (its step never races the grants' propagation).
    assert _access(plan_of("prod", "tpu-rl:publish.repo=acme/gemma4-grpo")) == _access(prod_plan)


@pytest.mark.pure
def test_the_grants_as_built():
    grants = {(g.holder, g.role): g.prefixes for g in bucket_grants("m")}
    assert grants == {
        ("convert", "roles/storage.legacyBucketReader"): (),
        ("convert", "roles/storage.objectUser"): ("m/convert/",),
        ("export", "roles/storage.legacyBucketReader"): (),
        ("export", "roles/storage.objectUser"): ("m/export/",),
        ("export", "roles/storage.objectViewer"): ("m/train/", "m/convert/"),
        ("publish", "roles/storage.legacyBucketReader"): (),
        ("publish", "roles/storage.objectUser"): ("m/publish/",),
        ("publish", "roles/storage.objectViewer"): ("m/export/",),
        ("cpu", "roles/storage.legacyBucketReader"): (),
        ("cpu", "roles/storage.objectUser"): ("m/train/", "pathways"),
        ("cpu", "roles/storage.objectViewer"): ("m/convert/",),
        ("tpu", "roles/storage.legacyBucketReader"): (),
        ("tpu", "roles/storage.objectUser"): ("m/train/", "pathways"),
        ("tpu", "roles/storage.objectViewer"): ("m/convert/",),
    }
    assert len(bucket_grants("m")) == len(grants), "one grant per identity and role"
    grant = BucketGrant("cpu", "roles/storage.objectUser", ("m/train/", "pathways"))
    assert grant.resource_name == "cpu-bucket-objectUser"
    assert grant.condition("b") == {
        "title": "cpu objectUser prefixes",
        "description": "tpu-rl: only under m/train/, pathways",
        "expression": 'resource.name.startsWith("projects/_/buckets/b/objects/m/train/") || '
        'resource.name.startsWith("projects/_/buckets/b/objects/pathways")',
    }
    assert BucketGrant("cpu", "roles/storage.legacyBucketReader", ()).condition("b") is None


def test_a_shared_hub_cache_has_one_writer_and_readers_that_cannot_write():
    """``tpu-rl:model.hubCache``: only the writer stack's conversion (``tpu-rl:model.hubCacheWriter``)
    may create, replace or delete an object of the shared folder; in every other stack the conversion and the export
    get ``objectViewer`` (``storage.objects.get`` and ``list``, no ``create`` or ``delete``: "Storage Object Viewer",
    https://cloud.google.com/storage/docs/access-control/iam-roles), each bounded to the folder by a condition the
    policy pack accepts; nobody else gets anything there."""
    from infra.gcp.access import HUB_CACHE_WRITE_ROLES
    from tests.iam_conditions import covers

    writer, reader = hub_cache_grants("hub/", writes=True), hub_cache_grants("hub/", writes=False)
    assert [(g.holder, g.role, g.prefixes, g.resource_name) for g in writer] == [
        ("convert", "roles/storage.objectUser", ("hub/",), "convert-hubcache-objectUser"),
        ("export", "roles/storage.objectViewer", ("hub/",), "export-hubcache-objectViewer"),
    ]
    assert [(g.holder, g.role, g.prefixes, g.resource_name) for g in reader] == [
        ("convert", "roles/storage.objectViewer", ("hub/",), "convert-hubcache-objectViewer"),
        ("export", "roles/storage.objectViewer", ("hub/",), "export-hubcache-objectViewer"),
    ]
    entry = "hub/google/gemma-4-26b-a4b-it/0123456789abcdef0123456789abcdef01234567/model-00001-of-00002.safetensors"
    writes = {
        stack: sorted(g.holder for g in grants if g.role in HUB_CACHE_WRITE_ROLES and covers(g, "shared-hub", entry))
        for stack, grants in (("writer", writer), ("reader", reader))
    }
    assert writes == {"writer": ["convert"], "reader": []}, "one writer: a reader's identities cannot plant a file"
    assert all(covers(g, "shared-hub", entry) and not covers(g, "shared-hub", "other/x") for g in writer + reader)
    condition = writer[0].condition("shared-hub")
    assert condition is not None and condition["expression"] == (
        'resource.name.startsWith("projects/_/buckets/shared-hub/objects/hub/")'
    )


def test_a_reader_keeps_what_it_fetches_in_its_own_bucket():
    """A reader's conversion fetches what the shared cache lacks (or holds wrong) into the stack's own cache, which its
    identity may write (``<model>/convert/``), and no other identity of the stack may."""
    from infra.gcp.access import HUB_CACHE_WRITE_ROLES
    from tests.iam_conditions import covers

    own = "m/convert/hub/google/gemma-4-26b-a4b-it/0123456789abcdef0123456789abcdef01234567/config.json"
    writers = [
        g.holder for g in bucket_grants("m") if g.role in HUB_CACHE_WRITE_ROLES and g.prefixes and covers(g, "b", own)
    ]
    assert writers == ["convert"]


@pytest.mark.slow
def test_a_stack_sharing_a_hub_cache_renames_no_step_and_points_its_conversion_at_it(prod_plan):
    """The same steps (names) as the stack's own cache, writer or reader; the writer's conversion writes and reads the
    shared folder, a reader's reads it and writes its own ``<model>/convert/hub/``; the export names no cache (it reads
    the objects its conversion's record names); the grants are registered on the shared bucket, waited for like the
    others."""
    own_cache = "gs://my-tpu-prod-project-tpu-rl-prod/gemma4-26b/convert/hub/"
    for writer, convert_role in (("prod", "objectUser"), ("dev", "objectViewer")):
        shared = plan_of(
            "prod", "tpu-rl:model.hubCache=gs://shared-hub/tpu-rl/hub/", f"tpu-rl:model.hubCacheWriter={writer}"
        )
        assert {s: r["name"] for s, r in step_resources(shared).items()} == {
            s: r["name"] for s, r in step_resources(prod_plan).items()
        }, "where the cache is, and who writes it, names no step"
        assert shared.outputs["hubCache"] == "gs://shared-hub/tpu-rl/hub/"
        members = {r["name"]: r["inputs"] for r in shared.find(BUCKET_IAM) if "-hubcache-" in r["name"]}
        assert {name: (m["bucket"], m["role"], _prefixes({"inputs": m})) for name, m in members.items()} == {
            f"convert-hubcache-{convert_role}": ("shared-hub", f"roles/storage.{convert_role}", ["tpu-rl/hub/"]),
            "export-hubcache-objectViewer": ("shared-hub", "roles/storage.objectViewer", ["tpu-rl/hub/"]),
        }
        name = step_resources(shared)["convert"]["name"]
        script = one(shared, "kubernetes:core/v1:ConfigMap", f"{name}-scripts")["inputs"]["data"]["run.sh"]
        written = "gs://shared-hub/tpu-rl/hub/" if writer == "prod" else own_cache
        snapshot = next(line for line in script.splitlines() if " snapshot " in line)
        assert snapshot.endswith(f" {written} /scratch/base-model gs://shared-hub/tpu-rl/hub/)"), snapshot
        export = step_resources(shared)["export"]["name"]
        exported = one(shared, "kubernetes:core/v1:ConfigMap", f"{export}-scripts")["inputs"]["data"]["run.sh"]
        assert "/hub/" not in exported, "the export reads its conversion's verified objects, no cache root"


@pytest.mark.parametrize(
    "stack,overrides", [("dev", ()), ("prod", ()), ("prod", ("tpu-rl:publish.repo=acme/gemma4-grpo",))]
)
def test_the_prefixes_cover_where_each_step_really_writes_and_reads(stack, overrides):
    """The pair that must agree: the grants' prefixes and every step folder a step's object names (its own output,
    which it writes; the outputs of the steps it reads) and the Pathways scratch (a step outside its prefixes
    fails with 403 on its first write). The CPU steps run as their own identities; training's pods as the
    nodes' (hostNetwork)."""
    plan = plan_of(stack, *overrides)
    access = _access(plan)
    bucket = one(plan, "gcp:storage/bucket:Bucket")["inputs"]["name"]
    steps = step_resources(plan)
    assert set(steps) == {"convert", "train", "export", *(("publish",) if overrides else ())}

    def objects(uri: str) -> str:
        assert uri.startswith(f"gs://{bucket}/")
        return uri[len(f"gs://{bucket}/") :]

    def step_text(resource: dict) -> str:
        """A step's JobSet and the scripts its pods run (its ``<step>-scripts`` ConfigMap): where its object names
        are."""
        scripts = one(plan, "kubernetes:core/v1:ConfigMap", f"{resource['name']}-scripts")
        return str(resource["inputs"]) + str(scripts["inputs"]["data"])

    for step, resource in steps.items():
        holders = ["cpu", "tpu"] if step == "train" else [step]
        text = step_text(resource)
        folders = set(re.findall(rf"gs://{re.escape(bucket)}/[^\s'\"]*?/(\w+)/[0-9a-f]{{10}}/", text))
        assert step in folders, step
        for uri in set(re.findall(rf"gs://{re.escape(bucket)}/[^\s'\"]*?/\w+/[0-9a-f]{{10}}/", text)):
            owner = uri.rstrip("/").split("/")[-2]
            for holder in holders:
                granted = access[(holder, "objectUser")] + (access.get((holder, "objectViewer")) or [])
                if owner == step:
                    assert any(objects(uri).startswith(p) for p in access[(holder, "objectUser")]), (holder, uri)
                else:
                    assert any(objects(uri).startswith(p) for p in granted), (holder, "reads", uri)
                    assert not any(objects(uri).startswith(p) for p in access[(holder, "objectUser")]), (
                        holder,
                        "may not write another step's output",
                        uri,
                    )
    train_text = step_text(steps["train"])
    assert f"--gcs_scratch_location=gs://{bucket}/{PATHWAYS_SCRATCH}" in train_text
    for holder in ("cpu", "tpu"):
        # The scratch's own name too: a GCS mkdir looks the folder up as the object "pathways" first.
        assert PATHWAYS_SCRATCH.rstrip("/") in access[(holder, "objectUser")], "the proxy, RM, workers' scratch"
    export_text = step_text(steps["export"])
    assert re.search(rf"gs://{re.escape(bucket)}/[^\s'\"]*convert/[0-9a-f]{{10}}/", export_text), (
        "the export reads the base's files the conversion recorded"
    )


# ---------------------------------------------------------------------------------------------
# Network


def _jobset_ports(plan) -> set[int]:
    train = step_resources(plan)["train"]["inputs"]
    return {
        port["containerPort"]
        for job in train["spec"]["replicatedJobs"]
        for container in [
            *job["template"]["spec"]["template"]["spec"].get("initContainers", []),
            *job["template"]["spec"]["template"]["spec"]["containers"],
        ]
        for port in container.get("ports", [])
    }


def test_the_firewall_opens_the_pathways_ports_between_nodes_only(prod_plan):
    rule = one(prod_plan, "gcp:compute/firewall:Firewall", "internal")["inputs"]
    assert rule["sourceRanges"] == ["192.168.0.0/18"], "the nodes' range: the head and workers use hostNetwork"
    assert rule["direction"] == "INGRESS"
    (tcp,) = [a for a in rule["allows"] if a["protocol"] == "tcp"]
    assert {int(p) for p in tcp["ports"]} == set(PORTS) == _jobset_ports(prod_plan)
    assert {a["protocol"] for a in rule["allows"]} == {"tcp", "icmp"}, "no UDP, no other TCP port"


def test_the_subnet_logs_its_flows(dev_plan):
    subnet = one(dev_plan, "gcp:compute/subnetwork:Subnetwork")["inputs"]
    assert subnet["logConfig"] == {
        "aggregationInterval": "INTERVAL_5_SEC",
        "flowSampling": 0.5,
        "metadata": "INCLUDE_ALL_METADATA",
    }


def test_network_policies_deny_ingress_but_the_pathways_ports_between_training_pods(prod_plan):
    policies = {p["name"]: p["inputs"] for p in prod_plan.find(NETWORK_POLICY)}
    deny = policies["network-policy-default-deny-ingress"]
    assert deny["metadata"]["namespace"] == "tpu-rl"
    assert deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"]}, "every pod, no ingress rule"
    allow = policies["network-policy-pathways-between-training-pods"]["spec"]
    (rule,) = allow["ingress"]
    assert rule["from"] == [{"podSelector": allow["podSelector"]}], "only from the training's own pods"
    assert {p["port"] for p in rule["ports"]} == set(PORTS) and {p["protocol"] for p in rule["ports"]} == {"TCP"}
    steps = step_resources(prod_plan)
    selector = allow["podSelector"]["matchLabels"]

    def pod_labels(step: str) -> list[dict]:
        jobs = steps[step]["inputs"]["spec"]["replicatedJobs"]
        return [job["template"]["spec"]["template"]["metadata"]["labels"] for job in jobs]

    assert all(selector.items() <= labels.items() for labels in pod_labels("train")), "head and workers selected"
    assert not any(selector.items() <= labels.items() for s in ("convert", "export") for labels in pod_labels(s))
    for step in steps.values():
        assert {"network-policy-default-deny-ingress", "network-policy-pathways-between-training-pods"} <= set(
            step["options"]["dependsOn"]
        ), "no step pod runs before the policies"


def test_the_evaluation_reaches_names_its_token_and_cloud_storage_only():
    """The evaluation runs the exported model; its pods reach the cluster's DNS, the node's link-local
    services on their ports only (the GKE metadata server's token, the DNS cache) and HTTPS outside the cluster, the
    VPC and the link-local range, nothing else."""
    plan = plan_of("prod", "tpu-rl:workflow.steps.evaluate=true")
    egress = one(plan, NETWORK_POLICY, "network-policy-evaluation-egress")["inputs"]["spec"]
    assert egress["policyTypes"] == ["Egress"]
    selector = egress["podSelector"]

    def selected(labels: dict) -> bool:
        (expression,) = selector["matchExpressions"]
        named = labels.get(expression["key"]) in expression["values"]
        return selector["matchLabels"].items() <= labels.items() and named

    steps = step_resources(plan)
    for step, resource in steps.items():
        labels = [
            j["template"]["spec"]["template"]["metadata"]["labels"]
            for j in resource["inputs"]["spec"]["replicatedJobs"]
        ]
        assert all(selected(pod) for pod in labels) == (step == "evaluate"), step
    dns, *link_local, https = egress["egress"]
    assert dns["to"][0]["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}}
    assert {(p["protocol"], p["port"]) for p in dns["ports"]} == {("UDP", 53), ("TCP", 53)}
    assert {
        (rule["to"][0]["ipBlock"]["cidr"], p["protocol"], p["port"]) for rule in link_local for p in rule["ports"]
    } == {
        ("169.254.169.254/32", "TCP", 80),
        ("169.254.169.252/32", "TCP", 988),
        ("169.254.20.10/32", "UDP", 53),
        ("169.254.20.10/32", "TCP", 53),
    }, "the metadata server and the DNS cache, each on its ports (tests/test_pod_tokens_and_egress.py)"
    assert https["ports"] == [{"protocol": "TCP", "port": 443}]
    block = https["to"][0]["ipBlock"]
    assert block["cidr"] == "0.0.0.0/0"
    assert {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16"} <= set(block["except"])
    assert "network-policy-evaluation-egress" in steps["evaluate"]["options"]["dependsOn"], "no pod before the policy"


# ---------------------------------------------------------------------------------------------
# Bucket versioning


def test_prod_keeps_noncurrent_versions_for_a_week_and_dev_keeps_none(dev_plan, prod_plan):
    prod = one(prod_plan, "gcp:storage/bucket:Bucket")["inputs"]
    assert prod["versioning"] == {"enabled": True}
    assert prod["lifecycleRules"] == [
        {"action": {"type": "Delete"}, "condition": {"daysSinceNoncurrentTime": 7, "withState": "ARCHIVED"}}
    ]
    dev = one(dev_plan, "gcp:storage/bucket:Bucket")["inputs"]
    assert dev["versioning"] == {"enabled": False}, "sent: turning versioning off is an update GCS applies"
    assert dev["lifecycleRules"] == prod["lifecycleRules"], "the rule stays: versions made before are deleted too"
