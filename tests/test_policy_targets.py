"""``grant-targets``: where every grant of a stack lands, each rule at its boundary (the value just inside passes, the
one just outside is one line naming the grant, the rule and the fix), on the prod example's builders' plan as the
engine sends it to the pack with the stack's configuration (``ConfigureStack``)."""

from __future__ import annotations

import copy

import pytest

from infra.gcp.access import REGISTRY_READER_ROLE, SERVICE_USAGE_ROLE
from infra.gcp.identities import NODE_PROJECT_ROLES, REGISTRY_READER
from tests import analyzer
from tests.grant_cases import (
    ACCOUNT_IAM,
    AGENT,
    BUCKET,
    BUCKET_IAM,
    CACHE,
    CRYPTO_KEY,
    KEY,
    KEY_IAM,
    KEY_RING,
    MIRROR,
    NODE,
    PRINCIPAL,
    PROJECT,
    PROJECT_IAM,
    REPO_IAM,
    STEP,
    TARGETS,
    _plan,
    grant,
    judge,
    messages,
    policies,
    under,
)
from tools.plan.offline import UNKNOWN

pytestmark = pytest.mark.pure


def test_the_example_stacks_grants_all_land_on_their_own():
    assert messages(_plan()) == []
    assert messages(_plan(stack="dev"), stack="dev") == []
    assert messages(_plan(MIRROR, KEY_RING, CRYPTO_KEY)) == []


def test_the_allowed_project_roles_are_the_ones_the_program_grants():
    assert (
        frozenset((*NODE_PROJECT_ROLES, REGISTRY_READER, REGISTRY_READER_ROLE, SERVICE_USAGE_ROLE))
        == (policies.targets.ROLES_ON["project"])
    )


@pytest.mark.parametrize(
    ("role", "words"),
    [
        ("roles/container.defaultNodeServiceAccount", None),
        ("roles/serviceusage.serviceUsageConsumer", None),
        (
            "roles/storage.objectViewer",
            "project-level roles/storage.objectViewer to the stack's identities: it reaches",
        ),
        ("roles/storage.objectUser", "project-level roles/storage.objectUser"),
        ("roles/viewer", "project-level roles/viewer to the stack's identities: it reads every resource"),
        ("roles/browser", "it reads every resource"),
        ("roles/logging.viewer", "it reads every resource"),
        ("roles/artifactregistry.writer", "need only roles/artifactregistry.reader, roles/container"),
    ],
)
def test_project_roles(role, words):
    found = messages(_plan(grant(PROJECT_IAM, NODE, project=PROJECT, role=role)))
    if words is None:
        assert found == []
    else:
        (line,) = found
        assert line.startswith("hostile: project-level ") and words in line, line


def test_a_grant_in_another_project_is_refused():
    """The dev stack granting roles in prod's project (one project each): just inside, dev's own."""
    dev_project = analyzer.engine_config("dev")["gcp:project"]
    node = f"serviceAccount:tpu-rl-dev-cpu-np@{dev_project}.iam.gserviceaccount.com"
    inside = grant(PROJECT_IAM, node, project=dev_project, role="roles/container.defaultNodeServiceAccount")
    assert messages(_plan(inside, stack="dev"), stack="dev") == []
    outside = grant(PROJECT_IAM, node, project=PROJECT, role="roles/container.defaultNodeServiceAccount")
    (found,) = messages(_plan(outside, stack="dev"), stack="dev")
    assert found == (
        f"hostile: grants roles/container.defaultNodeServiceAccount in project {PROJECT}, not the stack's "
        f"({dev_project}): grant in gcp:project only"
    )


@pytest.mark.parametrize(
    ("bucket", "overrides", "words"),
    [
        (BUCKET, (), None),
        (f"gs://{BUCKET}", (), None),
        (f"{PROJECT}-pulumi-state-prod", (), "a Pulumi state bucket"),
        (f"{PROJECT}-pulumi-state-dev", (), "a Pulumi state bucket"),
        (f"{PROJECT}-pulumi-state", (), "a Pulumi state bucket"),
        ("team-states", ("tpu-rl:stateBackend=gs://team-states/tpu-rl",), "a Pulumi state bucket"),
        ("team-states", (), "neither the stack's bucket nor a shared Hub cache the policy config names"),
        (f"{PROJECT}-pulumi-stateless", (), "neither the stack's bucket nor a shared Hub cache"),
        (f"{PROJECT}-tpu-rl-dev", (), "neither the stack's bucket nor a shared Hub cache"),
        ("shared-hub", ("tpu-rl:model.hubCache=gs://shared-hub/hub/",), "neither the stack's bucket nor a shared"),
    ],
)
def test_bucket_targets(bucket, overrides, words):
    name = bucket.removeprefix("gs://")
    condition = under(name, "gemma4-26b/train/")
    found = messages(
        _plan(grant(BUCKET_IAM, bucket=bucket, role="roles/storage.objectViewer", condition=condition)), *overrides
    )
    if words is None:
        assert found == []
    else:
        (line,) = found
        assert line.startswith("hostile: grants on ") and words in line, line


@pytest.mark.parametrize(
    ("role", "words"),
    [
        ("roles/storage.objectViewer", None),
        ("roles/storage.objectUser", "roles/storage.objectUser on the cache shared-hub: its step does not use it"),
        ("roles/storage.objectAdmin", "roles/storage.objectAdmin on a bucket: the steps need"),
        ("roles/storage.legacyBucketReader", "roles/storage.legacyBucketReader on the stack's cache: it needs only"),
    ],
)
def test_the_shared_hub_caches_roles(role, words):
    """The export's account reads a cache the policy config names, under its folder, and does nothing else there."""
    plan = _plan(grant(BUCKET_IAM, bucket="shared-hub", role=role, condition=under("shared-hub", "hub/")))
    found = messages(plan, config=CACHE)
    assert found == [] if words is None else (len(found) == 1 and found[0].startswith(f"hostile: {words}")), found


def test_the_cache_declared_as_the_state_bucket_is_still_the_state_bucket():
    state = f"{PROJECT}-pulumi-state-prod"
    (found,) = messages(
        _plan(grant(BUCKET_IAM, bucket=state, role="roles/storage.objectViewer")),
        f"tpu-rl:model.hubCache=gs://{state}/hub/",
    )
    assert "a Pulumi state bucket" in found


def test_a_stack_bucket_named_as_a_state_bucket_is_refused():
    plan = copy.deepcopy(_plan())
    (bucket,) = [r for r in plan.resources if r["type"] == "gcp:storage/bucket:Bucket"]
    bucket["inputs"]["name"] = f"{PROJECT}-pulumi-state-prod"
    found = messages(plan)
    assert any(m.startswith("bucket: the stack's bucket is named as a Pulumi state bucket") for m in found), found


@pytest.mark.parametrize(
    ("key", "member", "role", "words"),
    [
        (KEY, AGENT, "roles/cloudkms.cryptoKeyEncrypterDecrypter", None),
        (KEY, STEP, "roles/cloudkms.cryptoKeyEncrypterDecrypter", "only GKE's service agent uses it"),
        (KEY, AGENT, "roles/cloudkms.admin", "service agent needs roles/cloudkms.cryptoKeyEncrypterDecrypter only"),
        (f"projects/{PROJECT}/locations/global/keyRings/pulumi-state/cryptoKeys/tpu-rl-prod", STEP,
         "roles/cloudkms.cryptoKeyEncrypterDecrypter", "a Pulumi state secrets key"),
        (f"projects/{PROJECT}/locations/us-east5/keyRings/tpu-rl-dev-keys/cryptoKeys/gke-secrets", AGENT,
         "roles/cloudkms.cryptoKeyEncrypterDecrypter", "not the stack's"),
    ],
)  # fmt: skip
def test_key_targets(key, member, role, words):
    found = messages(
        _plan(KEY_RING, CRYPTO_KEY, (KEY_IAM, "hostile", {"cryptoKeyId": key, "member": member, "role": role}))
    )
    assert found == [] if words is None else (len(found) == 1 and words in found[0]), found


def test_the_state_key_ring_in_any_location_is_the_states():
    assert policies.targets.is_state_key(f"projects/{PROJECT}/locations/us/keyRings/pulumi-state/cryptoKeys/x")
    assert not policies.targets.is_state_key(f"projects/{PROJECT}/locations/us/keyRings/pulumi-states/cryptoKeys/x")


@pytest.mark.parametrize(
    ("repository", "role", "words"),
    [
        ("tpu-rl-prod-cloud-tpu-images-maxtext-images", "roles/artifactregistry.reader", None),
        (f"projects/{PROJECT}/locations/us-east5/repositories/tpu-rl-prod-cloud-tpu-images-maxtext-images",
         "roles/artifactregistry.reader", None),
        ("tpu-rl-prod-cloud-tpu-images-maxtext-images", "roles/artifactregistry.writer", "makes a writer"),
        ("tpu-rl-prod-cloud-tpu-images-maxtext-images", "roles/artifactregistry.repoAdmin", "makes a writer"),
        ("tpu-rl-prod-cloud-tpu-images-maxtext-image", "roles/artifactregistry.reader", "not one of the stack's image"),
        (f"projects/{PROJECT}/locations/us-central1/repositories/tpu-rl-prod-cloud-tpu-images-maxtext-images",
         "roles/artifactregistry.reader", "not one of the stack's image mirrors"),
    ],
)  # fmt: skip
def test_repository_targets(repository, role, words):
    found = messages(
        _plan(MIRROR, grant(REPO_IAM, NODE, project=PROJECT, location="us-east5", repository=repository, role=role))
    )
    assert found == [] if words is None else (len(found) == 1 and words in found[0]), found


@pytest.mark.parametrize(
    ("account", "role", "words"),
    [
        (f"tpu-rl-prod-export@{PROJECT}.iam.gserviceaccount.com", "roles/iam.workloadIdentityUser", None),
        (f"tpu-rl-prod-export@{PROJECT}.iam.gserviceaccount.com", "roles/iam.serviceAccountTokenCreator", "act as"),
        (f"tpu-rl-dev-export@{PROJECT}.iam.gserviceaccount.com", "roles/iam.workloadIdentityUser", "not one of the"),
    ],
)
def test_account_targets(account, role, words):
    target = f"projects/{PROJECT}/serviceAccounts/{account}"
    found = messages(_plan(grant(ACCOUNT_IAM, PRINCIPAL, serviceAccountId=target, role=role)))
    assert found == [] if words is None else (len(found) == 1 and words in found[0]), found


@pytest.mark.parametrize(
    "type_",
    ["gcp:secretmanager/secretIamMember:SecretIamMember", "gcp:organizations/iAMMember:IAMMember",
     "gcp:storage/managedFolderIamMember:ManagedFolderIamMember"],
)  # fmt: skip
def test_a_grant_on_anything_else_is_refused(type_):
    found = messages(_plan(grant(type_, role="roles/secretmanager.secretAccessor", secretId="x")))
    assert len(found) == 1 and found[0].startswith("hostile: "), found
    assert type_.startswith("gcp:storage/") or "the stack grants on its project, bucket, key" in found[0]


def test_a_target_not_known_at_a_preview_is_judged_at_up():
    plan = _plan(grant(BUCKET_IAM, bucket=UNKNOWN, role="roles/storage.objectViewer"))
    (preview,) = judge(plan, preview=True)
    assert preview.unjudged and preview.level == "advisory" and "hostile: .bucket" in preview.message
    (up,) = judge(plan)
    assert up.level == "mandatory" and "cannot judge" in up.message and "hostile: .bucket" in up.message
    known = _plan(grant(BUCKET_IAM, bucket=f"{PROJECT}-pulumi-state-prod", role="roles/storage.objectViewer"))
    (seen,) = judge(known, preview=True)
    assert not seen.unjudged and seen.level == "mandatory" and "a Pulumi state bucket" in seen.message


def test_without_the_engines_configuration_the_clusters_project_is_the_stacks():
    plan = _plan(grant(PROJECT_IAM, NODE, project="prod-elsewhere", role="roles/container.defaultNodeServiceAccount"))
    pack = analyzer.Pack({"all": "mandatory"}, policies=[TARGETS], stack="prod")
    (found,) = pack.analyze_stack(analyzer.resources(plan, preview=False, stack_view=True))
    assert f"in project prod-elsewhere, not the stack's ({PROJECT})" in found.message


def test_the_pack_keeps_no_secret_of_the_configuration():
    analyzer.Pack({"all": "mandatory"}, policies=[TARGETS], stack_config={"tpu-rl:hfToken": "hf_x", "gcp:project": "p"},
                  secret_keys=["tpu-rl:hfToken"])  # fmt: skip
    assert policies.resources.DEPLOYMENT.config == {"gcp:project": "p"}
    assert policies.resources.DEPLOYMENT.setting("gcp:project") == "p"
