"""``grant-targets`` on the object roles a grant gives in the stack's bucket and in a shared Hub cache, judged through
pulumi-policy's own analyzer (``tests/analyzer.py``: the policy config as the engine reconciles it, every schema
default filled in) on a small stack built by hand (the bucket, two step accounts, a node pool's account, a custom
role), not the program's plan:

- the folders each account may hold an object role under (``BUCKET_FOLDERS``): the Pathways scratch only to the node
  accounts' writer, never a step's or a reader, and never as a model's ``scratch`` step folder;
- a condition the pack cannot read, and every prefix outside those folders named;
- a role of another target, and a custom role the stack does not declare, named with the roles the target takes;
- a custom role judged as the narrowest allowed role holding all of its permissions (the role's own permissions
  exactly included), else named by its first three permissions no allowed role holds, or, where the allowed roles
  together hold them all, its first three;
- a shared Hub cache a stack reads (``hubCaches``) and one it writes (``writtenHubCaches``), the same folder in both
  written; an entry not of the ``gs://<bucket>/<folder>`` shape is refused by the engine before the pack runs.

Each finding is the exact line an operator reads, mandatory, on the grant's URN."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from core.errors import BadInputError
from policy import judge_preview
from tests import analyzer
from tests.grant_cases import BUCKET, MODEL, PROJECT, STACK_CONFIG

pytestmark = pytest.mark.pure

policies = importlib.import_module("policy.tpu_rl_policies")
TARGETS = analyzer.pack_policy("grant-targets")
CACHE = "shared-hub"
GRANT = "gcp:storage/bucketIAMMember:BucketIAMMember"
GRANT_URN = f"urn:pulumi:prod::tpu-rl::{GRANT}::grant"
BUCKET_READER = "roles/storage.legacyBucketReader"
READER = "roles/storage.objectViewer"
WRITER = "roles/storage.objectUser"
ALL_BUCKET_ROLES = f"{BUCKET_READER}, {WRITER}, {READER}"
CUSTOM = f"projects/{PROJECT}/roles/stepObjects"


def member(holder: str) -> str:
    return f"serviceAccount:tpu-rl-prod-{holder}@{PROJECT}.iam.gserviceaccount.com"


def resource(type_: str, name: str, props: dict[str, Any]) -> analyzer.Resource:
    return analyzer.Resource(type_, name, f"urn:pulumi:prod::tpu-rl::{type_}::{name}", props)


def account(account_id: str) -> analyzer.Resource:
    return resource("gcp:serviceaccount/account:Account", account_id, {"accountId": account_id, "project": PROJECT})


def under(bucket: str, *prefixes: str) -> dict[str, str]:
    """An IAM condition as infra/gcp/access.py writes it."""
    terms = [f'resource.name.startsWith("projects/_/buckets/{bucket}/objects/{p}")' for p in prefixes]
    return {"title": "t", "expression": " || ".join(terms)}


def found(
    role: str,
    holder: str,
    condition: dict[str, str] | None,
    *,
    bucket: str = BUCKET,
    permissions: list[str] | None = None,
    **config: list[str],
) -> list[str]:
    """The message of each finding at `pulumi up` on the stack with one grant of ``role`` on ``bucket`` to the
    ``holder``'s account under ``condition`` (``permissions``: those of the custom role the stack declares), the
    policy config ``config``; every finding mandatory, judged and on the grant."""
    stack = [
        resource("gcp:storage/bucket:Bucket", "bucket", {"name": BUCKET, "project": PROJECT, "location": "US-EAST5"}),
        account("tpu-rl-prod-export"),
        account("tpu-rl-prod-convert"),
        account("tpu-rl-prod-cpu-np"),
    ]
    if permissions is not None:
        custom = {"project": PROJECT, "roleId": "stepObjects", "title": "t", "permissions": permissions}
        stack.append(resource("gcp:projects/iAMCustomRole:IAMCustomRole", "custom", custom))
    inputs: dict[str, Any] = {"bucket": bucket, "role": role, "member": member(holder)}
    if condition is not None:
        inputs["condition"] = condition
    stack.append(analyzer.Resource(GRANT, "grant", GRANT_URN, inputs))
    pack = analyzer.Pack(
        {"all": "mandatory", "grant-targets": config}, policies=[TARGETS], stack="prod", stack_config=STACK_CONFIG
    )
    findings = pack.analyze_stack(stack)
    assert all(f.level == "mandatory" and not f.unjudged and f.urn == GRANT_URN for f in findings), findings
    return [f.message for f in findings]


def outside(role: str, bucket: str, *prefixes: str) -> str:
    return (
        f"grant: {role} on {bucket} under {', '.join(f'{bucket}/{p}' for p in prefixes)}: outside the folders its step "
        "uses; bound it to them (infra/gcp/access.py)"
    )


FOLDER_CASES = [
    # (id, role, holder, prefixes, the prefixes refused)
    ("node-writes-the-scratch", WRITER, "cpu-np", ("pathways",), ()),
    ("node-writes-its-step", WRITER, "cpu-np", (f"{MODEL}/train/", "pathways"), ()),
    ("step-writes-the-scratch", WRITER, "export", ("pathways",), ("pathways",)),
    ("node-reads-the-scratch", READER, "cpu-np", ("pathways",), ("pathways",)),
    ("node-writes-a-scratch-step-folder", WRITER, "cpu-np", (f"{MODEL}/scratch/",), (f"{MODEL}/scratch/",)),
    ("step-reads-what-it-reads", READER, "export", (f"{MODEL}/convert/", f"{MODEL}/train/"), ()),
    (
        "every-prefix-outside-named",
        WRITER,
        "export",
        (f"{MODEL}/train/", f"{MODEL}/export/", f"{MODEL}/convert/"),
        (f"{MODEL}/train/", f"{MODEL}/convert/"),
    ),
    ("another-model", WRITER, "export", ("gemma4-e4b/export/",), ("gemma4-e4b/export/",)),
]


@pytest.mark.parametrize(
    ("role", "holder", "prefixes", "refused"), [c[1:] for c in FOLDER_CASES], ids=[c[0] for c in FOLDER_CASES]
)
def test_an_object_role_is_held_only_under_the_holders_folders(role, holder, prefixes, refused):
    """The node accounts write the Pathways scratch (``pathways``) and the ``nodes`` step's folder; a step's account
    writes its own step's folder and reads those its step reads; every prefix outside them is named, in order."""
    expected = [outside(role, BUCKET, *refused)] if refused else []
    assert found(role, holder, under(BUCKET, *prefixes)) == expected


NO_CONDITION = (
    "is bounded by no condition the pack reads: bound it to the step's folders, "
    'resource.name.startsWith("projects/_/buckets/<bucket>/objects/<folder>") terms joined by || '
    "(infra/gcp/access.py)"
)


@pytest.mark.parametrize(
    "condition",
    [None, {"title": "t", "expression": "true"}],
    ids=["none", "always-true"],
)
def test_an_object_role_with_no_condition_the_pack_reads_is_refused(condition):
    assert found(READER, "export", condition) == [f"grant: {READER} on {BUCKET} {NO_CONDITION}"]


def test_the_bucket_reader_needs_no_condition():
    """``legacyBucketReader`` lists the bucket and reads its metadata, no object: it is bounded by no folder."""
    assert found(BUCKET_READER, "export", None) == []


def test_a_role_of_another_target_is_refused_with_the_roles_the_target_takes():
    """A cache takes the objects' reader and writer only, not the bucket reader the stack's bucket takes."""
    assert found(BUCKET_READER, "export", None, bucket=CACHE, hubCaches=[f"gs://{CACHE}/hub/"]) == [
        f"grant: {BUCKET_READER} on the stack's cache: it needs only {WRITER}, {READER} there; grant those"
    ]


def test_a_custom_role_the_stack_does_not_declare_is_refused():
    assert found(CUSTOM, "export", under(BUCKET, f"{MODEL}/export/")) == [
        f"grant: the custom role {CUSTOM} is not one the stack declares (gcp:projects/iAMCustomRole), so its "
        f"permissions cannot be judged: grant {ALL_BUCKET_ROLES}"
    ]


@pytest.mark.parametrize(
    ("permissions", "prefix"),
    [
        (["storage.buckets.get", "storage.objects.list"], None),
        (["storage.objects.list", "storage.folders.list", "storage.objects.get", "storage.folders.get"], "convert"),
        (["storage.objects.get"], "convert"),
        (["storage.objects.create", "storage.objects.get"], "export"),
    ],
    ids=["bucket-reader-exactly", "object-reader-exactly", "inside-the-reader", "inside-the-writer"],
)
def test_a_custom_role_is_judged_as_the_narrowest_role_holding_its_permissions(permissions, prefix):
    """A custom role holding exactly a predefined role's permissions, or fewer, is that role: the bucket reader needs
    no condition, the objects' reader and writer the export's folders."""
    condition = None if prefix is None else under(BUCKET, f"{MODEL}/{prefix}/")
    assert found(CUSTOM, "export", condition, permissions=permissions) == []


@pytest.mark.parametrize(
    ("permissions", "shown"),
    [
        (
            [
                "storage.objects.get",
                "storage.hmacKeys.create",
                "storage.buckets.setIamPolicy",
                "storage.objects.setIamPolicy",
                "storage.buckets.delete",
            ],
            "storage.buckets.delete, storage.buckets.setIamPolicy, storage.hmacKeys.create",
        ),
        (["storage.objects.get", "storage.buckets.delete"], "storage.buckets.delete"),
        (
            ["storage.objects.get", "storage.objects.delete", "storage.buckets.get", "storage.objects.create"],
            "storage.buckets.get, storage.objects.create, storage.objects.delete",
        ),
        (["storage.buckets.get", "storage.objects.create"], "storage.buckets.get, storage.objects.create"),
    ],
    ids=["first-three-no-role-holds", "one-no-role-holds", "first-three-of-no-one-role", "two-of-no-one-role"],
)
def test_a_custom_role_no_allowed_role_holds_is_named_by_its_permissions(permissions, shown):
    """Named by the first three (sorted) of its permissions that no role allowed on the bucket holds; where the
    allowed roles together hold them all but no one role does, by the first three of its own."""
    assert found(CUSTOM, "export", under(BUCKET, f"{MODEL}/export/"), permissions=permissions) == [
        f"grant: the custom role {CUSTOM} holds {shown}, which no role the stack needs on its bucket holds: grant "
        f"{ALL_BUCKET_ROLES}"
    ]


CACHE_CASES = [
    # (id, hubCaches, writtenHubCaches, the convert account's writer under hub/ refused)
    ("read-only", ["gs://shared-hub/hub/"], [], True),
    ("written", [], ["gs://shared-hub/hub/"], False),
    ("read-and-written", ["gs://shared-hub/hub/"], ["gs://shared-hub/hub/"], False),
    ("another-folder-written", ["gs://shared-hub/hub/"], ["gs://shared-hub/other/"], True),
]


@pytest.mark.parametrize(("read", "written", "refused"), [c[1:] for c in CACHE_CASES], ids=[c[0] for c in CACHE_CASES])
def test_a_cache_folder_is_written_only_where_the_policy_config_says_so(read, written, refused):
    """The conversion writes a cache folder only one the policy config lists as written (listed as read too, it is
    written); the export reads any cache folder listed."""
    config = {"hubCaches": read, "writtenHubCaches": written}
    expected = [outside(WRITER, CACHE, "hub/")] if refused else []
    assert found(WRITER, "convert", under(CACHE, "hub/"), bucket=CACHE, **config) == expected
    assert found(READER, "export", under(CACHE, "hub/"), bucket=CACHE, **config) == []


@pytest.mark.parametrize(
    "entry",
    ["shared-hub/hub/", "gs://shared-hub", "gs://shared-hub/", "gs:///hub/", "gs://Shared-Hub/hub/"],
    ids=["no-scheme", "no-folder", "empty-folder", "no-bucket", "upper-case-bucket"],
)
@pytest.mark.parametrize("key", ["hubCaches", "writtenHubCaches"])
def test_a_cache_entry_not_of_the_gs_bucket_folder_shape_is_refused_by_the_engine(key, entry):
    """The engine refuses a policy config its schema does not take before the pack runs (``ReconcilePolicyPackConfig``,
    ``policy/judge_preview.py`` ``reconciled``): every cache the pack reads names a bucket and a folder."""
    with pytest.raises(BadInputError, match=rf"grant-targets\.{key}\[0\]: .* does not match \^gs://"):
        judge_preview.reconciled([TARGETS], {"grant-targets": {key: [entry]}})
