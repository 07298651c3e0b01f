"""``grant-targets`` as an allow-list: on each target only the roles the program's steps need, to the accounts that
need them, object roles under the folders their steps use (read from the IAM condition), custom roles by their
permissions, a shared Hub cache only where the base branch's policy config names it; and ``stack-principals``' Workload
Identity pool. Each refusal beside its near miss, at ``pulumi up`` and at a preview (unknowns)."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from infra.gcp.access import READER_ROLE, REGISTRY_READER_ROLE, SERVICE_USAGE_ROLE, WRITER_ROLE, bucket_grants
from infra.gcp.identities import NODE_PROJECT_ROLES, REGISTRY_READER
from tests import analyzer
from tests.conftest import plan_of
from tests.example_stacks import STACKS
from tests.grant_cases import (
    ACCOUNT_IAM,
    BUCKET,
    BUCKET_IAM,
    MIRROR,
    NODE,
    PRINCIPAL,
    PROJECT,
    REPO_IAM,
    STEP,
    _plan,
    grant,
    judge,
    messages,
    under,
)
from tools.plan.offline import UNKNOWN

pytestmark = pytest.mark.pure

policies = importlib.import_module("policy.tpu_rl_policies")
targets = policies.targets
PRINCIPALS = analyzer.pack_policy("stack-principals")
CUSTOM = "gcp:projects/iAMCustomRole:IAMCustomRole"
ACCOUNT = "gcp:serviceaccount/account:Account"
FOLDER_IAM = "gcp:storage/managedFolderIamMember:ManagedFolderIamMember"
HUB = ("tpu-rl:model.hubCache=gs://shared-hub/hub/", "tpu-rl:model.hubCacheWriter=prod")
CACHES = {"hubCaches": ["gs://shared-hub/hub/"], "writtenHubCaches": ["gs://shared-hub/hub/"]}
VARIANTS = {**STACKS, "prod-hub-writer": ("prod", *HUB), "dev-hub-reader": ("dev", *HUB)}


def _config(stack: str) -> dict[str, Any]:
    written = CACHES["writtenHubCaches"] if stack == "prod" else []
    return {"grant-targets": {"enforcementLevel": "mandatory", **CACHES, "writtenHubCaches": written}}


def _granted(plan: Any) -> set[tuple[str, str, str, tuple[str, ...]]]:
    """(target, holder, role, prefixes) of every grant a plan makes to one of its accounts."""
    holders = {}
    for r in plan.resources:
        if r["type"] == ACCOUNT:
            email = f"serviceAccount:{r['inputs']['accountId']}@{r['inputs']['project']}.iam.gserviceaccount.com"
            holders[email] = r["name"].removesuffix("-sa")
    kinds = {"gcp:projects/iAMMember:IAMMember": "project", BUCKET_IAM: "bucket", REPO_IAM: "repository"}
    found = set()
    for r in plan.resources:
        member, kind = r["inputs"].get("member"), kinds.get(r["type"])
        if kind is None or member not in holders:
            continue
        if kind == "bucket" and "-hubcache-" in r["name"]:
            kind = "cache"
        parsed = policies.grants.condition_prefixes(r["inputs"].get("condition"))
        found.add((kind, holders[member], r["inputs"]["role"], parsed[1] if parsed else ()))
    return found


@pytest.mark.slow  # eight plans of the program, about 6 s
@pytest.mark.program
def test_the_tables_are_what_the_programs_plans_grant():
    """Every (target, account, role) the program grants in any example stack is in ``GRANTS``, and every entry is
    granted by one; the object roles' prefixes are ``infra.gcp.access``'s."""
    granted = set().union(*(_granted(plan_of(*args)) for args in VARIANTS.values()))
    table = {
        (t, h, role) for t, by_holder in targets.GRANTS.items() for h, roles in by_holder.items() for role in roles
    }
    registry = {("project", h, REGISTRY_READER) for h in ("system", "cpu", "tpu")}  # a private registry's stacks
    assert {(t, h, role) for t, h, role, _ in granted} | registry == table
    assert (
        frozenset((*NODE_PROJECT_ROLES, REGISTRY_READER, REGISTRY_READER_ROLE, SERVICE_USAGE_ROLE))
        == (targets.ROLES_ON["project"])
    )
    for grant_ in bucket_grants("gemma4-26b", ("convert", "train", "export", "evaluate", "publish")):
        if grant_.prefixes:
            assert set(grant_.prefixes) == targets._folders(grant_.holder, grant_.role, frozenset(("gemma4-26b",)))
    assert (WRITER_ROLE, READER_ROLE) == (targets.WRITER, targets.READER)


@pytest.mark.program
def test_the_account_suffixes_are_the_programs_names():
    """An account is told by its id, ``<clusterName>-<suffix>``: the suffixes are the program's names."""
    suffixes = {holder: suffix for suffix, holder in policies.grants.ACCOUNT_SUFFIXES.items()}
    accounts = {
        r["name"].removesuffix("-sa"): r["inputs"]["accountId"]
        for r in plan_of("prod").resources
        if r["type"] == ACCOUNT
    }
    assert {"system", "cpu", "tpu", "convert", "export", "publish"} <= set(accounts)
    assert all(account_id == f"tpu-rl-prod-{suffixes.get(h, h)}" for h, account_id in accounts.items()), accounts
    cluster = policies.grants._holder
    assert {h: cluster(a, {"tpu-rl-prod", "tpu-rl"}) for h, a in accounts.items()} == {h: h for h in accounts}


@pytest.mark.program
@pytest.mark.parametrize(
    "variant", [pytest.param(v, marks=() if v in ("dev", "prod") else pytest.mark.slow) for v in VARIANTS]
)  # the example stacks in the fast tier, each other variant (a plan more) in the slow one
@pytest.mark.parametrize("preview", [False, True], ids=["up", "preview"])
def test_the_programs_own_grants_pass(variant, preview):
    args = VARIANTS[variant]
    plan = analyzer.first_preview(*args) if preview else plan_of(*args)
    chosen = [p for p in policies.POLICIES if p.name in ("grant-targets", "stack-principals", "no-broad-rbac")]
    pack = analyzer.Pack(
        {"all": "mandatory", **_config(args[0])},
        dry_run=preview,
        policies=chosen,
        stack=args[0],
        stack_config=analyzer.engine_config(*args),
    )
    found = pack.analyze_stack(analyzer.resources(plan, preview=preview, stack_view=True))
    assert [f for f in found if not f.unjudged] == []
    assert all(f.level == "advisory" for f in found) and (preview or found == [])


READS = under(BUCKET, "gemma4-26b/train/", "gemma4-26b/convert/")
"""What the export's account reads in the stack's bucket (its near miss)."""


@pytest.mark.parametrize(
    ("condition", "words"),
    [
        (READS, None),
        ({"expression": READS["expression"].replace(" || ", "  ||\n ")}, None),
        ({"expression": "true"}, "bounded by no condition the pack reads"),
        (None, "bounded by no condition the pack reads"),
        (under(BUCKET, "gemma4-26b/"), "under my-tpu-prod-project-tpu-rl-prod/gemma4-26b/: outside the folders"),
        (under(BUCKET, ""), "bounded by no condition the pack reads"),
        (under(BUCKET, "gemma4-26b/export/"), "gemma4-26b/export/: outside the folders its step uses"),
        (under(BUCKET, "gemma4-26b/train"), "gemma4-26b/train: outside the folders"),
        (under("other-bucket", "gemma4-26b/train/"), "other-bucket/gemma4-26b/train/: outside"),
        ({"expression": READS["expression"] + " || true"}, "bounded by no condition the pack reads"),
        ({"expression": READS["expression"].replace(" || ", " && ")}, "bounded by no condition the pack reads"),
        ({"expression": f"!({READS['expression']})"}, "bounded by no condition the pack reads"),
        (
            {"expression": READS["expression"] + ' || resource.name.startsWith("projects/_/buckets/x/objects/a/")'},
            "bounded by no condition the pack reads",
        ),
    ],
)
def test_an_object_roles_condition_is_read_into_its_steps_folders(condition, words):
    found = messages(_plan(grant(BUCKET_IAM, bucket=BUCKET, role=READER_ROLE, condition=condition)))
    assert found == [] if words is None else (len(found) == 1 and words in found[0]), found


def test_a_writer_writes_its_own_steps_folder_only():
    assert (
        messages(
            _plan(grant(BUCKET_IAM, bucket=BUCKET, role=WRITER_ROLE, condition=under(BUCKET, "gemma4-26b/export/")))
        )
        == []
    )
    (found,) = messages(
        _plan(grant(BUCKET_IAM, bucket=BUCKET, role=WRITER_ROLE, condition=under(BUCKET, "gemma4-26b/publish/")))
    )
    assert "gemma4-26b/publish/: outside the folders its step uses" in found
    node = grant(
        BUCKET_IAM, NODE, bucket=BUCKET, role=WRITER_ROLE, condition=under(BUCKET, "pathways", "gemma4-26b/train/")
    )
    assert messages(_plan(node)) == []


@pytest.mark.parametrize(
    ("role", "words"),
    [
        ("roles/storage.legacyBucketReader", None),
        ("roles/storage.legacyBucketWriter", "roles/storage.legacyBucketWriter on a bucket: the steps need"),
        ("roles/storage.legacyBucketOwner", "roles/storage.legacyBucketOwner on a bucket"),
        ("roles/storage.admin", "roles/storage.admin on a bucket"),
        ("roles/storage.objectAdmin", "roles/storage.objectAdmin on a bucket"),
        ("roles/storage.objectCreator", "roles/storage.objectCreator on a bucket"),
    ],
)
def test_only_the_steps_roles_on_the_stacks_bucket(role, words):
    found = messages(_plan(grant(BUCKET_IAM, bucket=BUCKET, role=role, condition=READS)))
    assert found == [] if words is None else (len(found) == 1 and words in found[0]), found


def _custom(role_id: str, *permissions: str) -> tuple[str, str, dict[str, Any]]:
    return (
        CUSTOM,
        role_id,
        {"project": PROJECT, "roleId": role_id, "title": role_id, "permissions": list(permissions)},
    )


@pytest.mark.parametrize(
    ("permissions", "condition", "words"),
    [
        (("storage.objects.get", "storage.objects.list"), READS, None),
        (("storage.buckets.get",), None, None),
        (("storage.objects.get", "storage.objects.list"), None, "bounded by no condition the pack reads"),
        (("storage.objects.get", "storage.buckets.setIamPolicy"), READS, "holds storage.buckets.setIamPolicy, which"),
        (("storage.objects.create",), READS, "outside the folders its step uses"),
    ],
)
def test_a_custom_role_is_judged_by_its_permissions(permissions, condition, words):
    role = f"projects/{PROJECT}/roles/reader"
    plan = _plan(_custom("reader", *permissions), grant(BUCKET_IAM, bucket=BUCKET, role=role, condition=condition))
    found = messages(plan)
    assert found == [] if words is None else (len(found) == 1 and words in found[0]), found


@pytest.mark.parametrize("role", [f"projects/{PROJECT}/roles/undeclared", "organizations/123/roles/reader"])
def test_a_custom_role_the_stack_does_not_declare_is_refused(role):
    (found,) = messages(
        _plan(_custom("reader", "storage.objects.get"), grant(BUCKET_IAM, bucket=BUCKET, role=role, condition=READS))
    )
    assert f"the custom role {role} is not one the stack declares" in found


def test_no_grant_on_a_managed_folder():
    found = messages(_plan(grant(FOLDER_IAM, bucket=BUCKET, managedFolder="f/", role="roles/storage.admin")))
    assert len(found) == 1 and "grant on a storage ManagedFolder resource" in found[0], found


@pytest.mark.parametrize(
    ("member", "role", "words"),
    [
        (PRINCIPAL, "roles/iam.workloadIdentityUser", None),
        (STEP, "roles/iam.workloadIdentityUser", "not a Kubernetes service account's Workload Identity principal"),
        (PRINCIPAL, "roles/iam.serviceAccountUser", "lets its members act as or administer it"),
    ],
)
def test_workload_identity_user_only_to_a_workload_principal(member, role, words):
    account = f"projects/{PROJECT}/serviceAccounts/tpu-rl-prod-export@{PROJECT}.iam.gserviceaccount.com"
    found = messages(_plan(grant(ACCOUNT_IAM, member, serviceAccountId=account, role=role)))
    assert found == [] if words is None else (len(found) == 1 and words in found[0]), found


def test_a_workload_principal_holds_no_other_grant():
    (found,) = messages(_plan(grant(BUCKET_IAM, PRINCIPAL, bucket=BUCKET, role=READER_ROLE, condition=READS)))
    assert "a Kubernetes service account's principal: only its step's Google account holds grants" in found


@pytest.mark.parametrize(
    ("pool", "refused"),
    [(PROJECT, False), ("other-project", True), (f"{PROJECT}x", True), ("my-tpu-dev-project", True)],
)
def test_workload_identity_from_the_stacks_own_pool_only(pool, refused):
    account = f"projects/{PROJECT}/serviceAccounts/tpu-rl-prod-export@{PROJECT}.iam.gserviceaccount.com"
    member = f"serviceAccount:{pool}.svc.id.goog[tpu-rl/tpu-rl-prod-export]"
    plan = _plan(grant(ACCOUNT_IAM, member, serviceAccountId=account, role="roles/iam.workloadIdentityUser"))
    pack = analyzer.Pack(
        {"all": "mandatory"}, policies=[PRINCIPALS], stack="prod", stack_config=analyzer.engine_config("prod")
    )
    found = [f.message for f in pack.analyze_stack(analyzer.resources(plan, preview=False, stack_view=True))]
    assert found == ([] if not refused else [found[0]]) and (
        not refused or f"the identity pool {pool}.svc.id.goog" in found[0]
    )


@pytest.mark.parametrize(
    ("bucket", "config", "role", "words"),
    [
        ("shared-hub", {"hubCaches": ["gs://shared-hub/hub/"]}, READER_ROLE, None),
        ("shared-hub", {}, READER_ROLE, "nor a shared Hub cache the policy config names"),
        ("shared-hub", {"hubCaches": ["gs://shared-hub/other/"]}, READER_ROLE, "shared-hub/hub/: outside the folders"),
        (
            f"{PROJECT}-tpu-rl-dev",
            {"hubCaches": [f"gs://{PROJECT}-tpu-rl-dev/hub/"]},
            READER_ROLE,
            "named as a stack's artifacts bucket",
        ),
        (
            f"{PROJECT}-tpu-rl",
            {"hubCaches": [f"gs://{PROJECT}-tpu-rl/hub/"]},
            READER_ROLE,
            "named as a stack's artifacts bucket",
        ),
        (
            f"{PROJECT}-pulumi-state-dev",
            {"hubCaches": [f"gs://{PROJECT}-pulumi-state-dev/hub/"]},
            READER_ROLE,
            "a Pulumi state bucket",
        ),
    ],
)
def test_a_cache_only_where_the_base_branchs_policy_config_names_it(bucket, config, role, words):
    plan = _plan(grant(BUCKET_IAM, bucket=bucket, role=role, condition=under(bucket, "hub/")))
    found = messages(plan, *HUB, config={"grant-targets": {"enforcementLevel": "mandatory", **config}})
    assert found == [] if words is None else (len(found) == 1 and words in found[0]), found


@pytest.mark.parametrize(("written", "refused"), [(True, False), (False, True)])
def test_the_cache_is_written_only_where_the_policy_config_says_so(written, refused):
    convert = f"serviceAccount:tpu-rl-prod-convert@{PROJECT}.iam.gserviceaccount.com"
    plan = _plan(
        grant(BUCKET_IAM, convert, bucket="shared-hub", role=WRITER_ROLE, condition=under("shared-hub", "hub/"))
    )
    config = {"hubCaches": ["gs://shared-hub/hub/"], "writtenHubCaches": ["gs://shared-hub/hub/"] if written else []}
    found = messages(plan, *HUB, config={"grant-targets": {"enforcementLevel": "mandatory", **config}})
    assert found == ([] if not refused else found) and (not refused or "outside the folders its step uses" in found[0])


@pytest.mark.parametrize(
    ("role", "unjudged"), [("roles/artifactregistry.reader", True), ("roles/artifactregistry.writer", False)]
)
def test_a_grant_on_a_repository_not_known_at_a_preview(role, unjudged):
    """The repository's name is an output of the mirror: at a preview the reader's grant is judged at `up`, a
    writer's is refused at once (on any repository)."""
    plan = _plan(MIRROR, grant(REPO_IAM, NODE, project=PROJECT, location="us-east5", repository=UNKNOWN, role=role))
    found = judge(plan, preview=True)
    assert [f.level for f in found if f.unjudged] == ["advisory"] and ".repository" in found[-1].message, found
    refused = [f.message for f in found if not f.unjudged and f.level == "mandatory"]
    assert refused == ([] if unjudged else [refused[0]]) and all("makes a writer" in m for m in refused), found
    up = judge(plan)
    assert any("cannot judge" in f.message and f.level == "mandatory" for f in up), up


@pytest.mark.parametrize("field", ["member", "condition"])
def test_an_unknown_member_or_condition_is_never_passed(field):
    bad = grant(BUCKET_IAM, bucket=BUCKET, role=READER_ROLE, condition=under(BUCKET, "gemma4-26b/"))
    bad[2][field] = UNKNOWN if field == "member" else {"expression": UNKNOWN}
    (preview,) = judge(_plan(bad), preview=True)
    assert preview.unjudged and preview.level == "advisory" and f"hostile: .{field}" in preview.message, preview
    up = judge(_plan(bad))
    assert any(f.level == "mandatory" and "cannot judge" in f.message for f in up), up
