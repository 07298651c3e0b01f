"""``grant-targets`` on where a grant lands and who holds it, judged through pulumi-policy's own analyzer
(``tests/analyzer.py``) on small stacks built by hand (the bucket, a few of the stack's accounts), not the program's
plan:

- the bucket a bucket grant names, read from each form the provider takes (a name, ``gs://``, ``b/``,
  ``projects/_/buckets/``) by its first path segment;
- a grant on a bucket that is neither the stack's nor a shared Hub cache, on a cache named as a stack's artifacts
  bucket, on a stack bucket named as the recorded state home; a role no bucket takes; a role of an account's kind
  the account does not need (the node pool's account has no bucket role);
- the members of a ``...IAMBinding`` and of a policy document's bindings judged one by one: a Kubernetes principal
  named, then the next member still judged; a binding whose role is not judged does not end the judgement of the
  next; a member that is not text is no account;
- grants in the project: another project, the projects the stack knows (or none), a project role a step's account
  does not use;
- grants on a service account, by its full name or its email, and on a kind of resource the stack never grants on;
- the model the stack's folders are under, from ``tpu-rl:model``;
- at a preview, an unknown project, service account or member is left for ``pulumi up``.

Each finding is the exact line an operator reads, on the resource it is about."""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest
from pulumi.output import Unknown

from tests import analyzer
from tests.grant_cases import BUCKET, MODEL, PROJECT, STACK_CONFIG

pytestmark = pytest.mark.pure

policies = importlib.import_module("policy.tpu_rl_policies")
TARGETS = analyzer.pack_policy("grant-targets")
OTHER_MODEL = "gemma4-e4b"
BUCKET_MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
BUCKET_BINDING = "gcp:storage/bucketIAMBinding:BucketIAMBinding"
BUCKET_POLICY = "gcp:storage/bucketIAMPolicy:BucketIAMPolicy"
PROJECT_MEMBER = "gcp:projects/iAMMember:IAMMember"
PROJECT_POLICY = "gcp:projects/iAMPolicy:IAMPolicy"
ACCOUNT_MEMBER = "gcp:serviceaccount/iAMMember:IAMMember"
FOLDER_MEMBER = "gcp:storage/managedFolderIamMember:ManagedFolderIamMember"
BUCKET_READER = "roles/storage.legacyBucketReader"
READER = "roles/storage.objectViewer"
WRITER = "roles/storage.objectUser"
NODE_ROLE = "roles/container.defaultNodeServiceAccount"
REGISTRY_READER = "roles/artifactregistry.reader"
WORKLOAD_IDENTITY_USER = "roles/iam.workloadIdentityUser"
PRINCIPAL = f"serviceAccount:{PROJECT}.svc.id.goog[tpu-rl/export]"
EXPORT_EMAIL = f"tpu-rl-prod-export@{PROJECT}.iam.gserviceaccount.com"


def urn(type_: str, name: str) -> str:
    return f"urn:pulumi:prod::tpu-rl::{type_}::{name}"


GRANT_URN = urn(BUCKET_MEMBER, "grant")


def resource(type_: str, name: str, props: dict[str, Any]) -> analyzer.Resource:
    return analyzer.Resource(type_, name, urn(type_, name), props)


def member(holder: str) -> str:
    return f"serviceAccount:tpu-rl-prod-{holder}@{PROJECT}.iam.gserviceaccount.com"


def under(bucket: str, *prefixes: str) -> dict[str, str]:
    """An IAM condition as infra/gcp/access.py writes it."""
    terms = [f'resource.name.startsWith("projects/_/buckets/{bucket}/objects/{p}")' for p in prefixes]
    return {"title": "t", "expression": " || ".join(terms)}


def own_stack(bucket_name: str = BUCKET) -> list[analyzer.Resource]:
    """The stack's bucket and three of its accounts: a step's, the system node pool's, a CPU node pool's."""
    accounts = [
        resource("gcp:serviceaccount/account:Account", a, {"accountId": a, "project": PROJECT})
        for a in ("tpu-rl-prod-export", "tpu-rl-prod-sys-np", "tpu-rl-prod-cpu-np")
    ]
    bucket = {"name": bucket_name, "project": PROJECT, "location": "US-EAST5"}
    return [resource("gcp:storage/bucket:Bucket", "bucket", bucket), *accounts]


def findings(
    *grants: analyzer.Resource,
    stack_config: dict[str, str] | None = None,
    bucket_name: str = BUCKET,
    extra: tuple[analyzer.Resource, ...] = (),
    preview: bool = False,
    **config: list[str],
) -> list[tuple[str, str]]:
    """(message, URN) of each finding of grant-targets on the stack with ``grants``; every one mandatory and judged
    (at a preview, the one advisory "can't run policy" is shown as ``("unjudged", URN)``)."""
    pack = analyzer.Pack(
        {"all": "mandatory", "grant-targets": config},
        policies=[TARGETS],
        stack="prod",
        stack_config=STACK_CONFIG if stack_config is None else stack_config,
        dry_run=preview,
    )
    found = pack.analyze_stack([*own_stack(bucket_name), *extra, *grants])
    assert all(f.policy == "grant-targets" for f in found), found
    assert all(f.unjudged == (f.level == "advisory") for f in found), found
    assert all(f.level == "mandatory" for f in found if not f.unjudged), found
    return [("unjudged" if f.unjudged else f.message, f.urn) for f in found]


def bucket_grant(role: str, holder: str, condition: dict[str, str] | None = None, bucket: str = BUCKET) -> Any:
    inputs: dict[str, Any] = {"bucket": bucket, "role": role, "member": member(holder)}
    if condition is not None:
        inputs["condition"] = condition
    return analyzer.Resource(BUCKET_MEMBER, "grant", GRANT_URN, inputs)


def not_used(role: str, bucket: str = BUCKET) -> str:
    return f"grant: {role} on the bucket {bucket}: its step does not use it; remove the grant"


def outside(role: str, bucket: str, *prefixes: str, name: str = "grant") -> str:
    return (
        f"{name}: {role} on {bucket} under {', '.join(f'{bucket}/{p}' for p in prefixes)}: outside the folders its "
        "step uses; bound it to them (infra/gcp/access.py)"
    )


def neither(bucket: str) -> str:
    return (
        f"grant: grants on bucket {bucket}, which is neither the stack's bucket nor a shared Hub cache the policy "
        "config names (grant-targets hubCaches): another stack's or project's data: grant on the stack's own bucket"
    )


BUCKET_FORMS = [
    ("name", "{}"),
    ("gs-url", "gs://{}"),
    ("gs-url-slash", "gs://{}/"),
    ("gs-url-folders", "gs://{}/hub/x/"),
    ("json-api", "b/{}"),
    ("resource-name", "projects/_/buckets/{}"),
    ("object-name", "projects/_/buckets/{}/objects/x"),
]


@pytest.mark.parametrize("form", [f[1] for f in BUCKET_FORMS], ids=[f[0] for f in BUCKET_FORMS])
def test_a_bucket_grant_names_its_bucket_by_the_first_segment_of_any_form(form):
    """The system node pool's account holds no bucket role: the finding names the bucket read from the grant, the
    stack's in every form; another bucket in the same form is neither the stack's nor a cache."""
    assert findings(bucket_grant(WRITER, "sys-np", bucket=form.format(BUCKET))) == [(not_used(WRITER), GRANT_URN)]
    assert findings(bucket_grant(WRITER, "sys-np", bucket=form.format("other-data"))) == [
        (neither("other-data"), GRANT_URN)
    ]


def test_a_cache_named_as_a_stacks_artifacts_bucket_is_refused():
    """``<gcp:project>-<clusterName>``: another stack's artifacts, even where the policy config names it a cache."""
    other = f"{PROJECT}-tpu-rl-dev"
    grant = bucket_grant(READER, "export", under(other, "hub/"), bucket=other)
    assert findings(grant, hubCaches=[f"gs://{other}/hub/"]) == [
        (
            f"grant: grants on {other} as a shared Hub cache, but it is named as a stack's artifacts bucket "
            "(<gcp:project>-<clusterName>): another stack's outputs; keep the cache in a bucket of its own",
            GRANT_URN,
        )
    ]
    assert findings(grant, hubCaches=["gs://shared-hub/hub/"]) == [(neither(other), GRANT_URN)]


def test_a_stack_bucket_named_as_the_recorded_state_home_is_refused_on_the_bucket():
    """``tpu-rl:stateBackend`` names the state's bucket: the stack's bucket of that name is refused on the bucket's
    own URN (its grants would reach the state), and the grant on it too; another name passes."""
    config = {**STACK_CONFIG, "tpu-rl:stateBackend": "gs://team-state-home"}
    grant = bucket_grant(BUCKET_READER, "export", bucket="team-state-home")
    assert findings(grant, stack_config=config, bucket_name="team-state-home") == [
        (
            "bucket: the stack's bucket is named as a Pulumi state bucket (team-state-home): its grants would reach "
            "the state: name the bucket otherwise (tpu-rl:bucketName)",
            urn("gcp:storage/bucket:Bucket", "bucket"),
        ),
        (
            "grant: grants on team-state-home, a Pulumi state bucket: the state and its secrets are reached by the "
            "account that runs pulumi only (make state-bucket), never by a workload: remove the grant",
            GRANT_URN,
        ),
    ]
    assert findings(bucket_grant(BUCKET_READER, "export"), stack_config=config) == []


def test_a_role_no_bucket_takes_is_named_with_the_roles_a_bucket_takes():
    assert findings(bucket_grant("roles/storage.admin", "export")) == [
        (
            f"grant: roles/storage.admin on a bucket: the steps need {BUCKET_READER}, {WRITER}, {READER} only",
            GRANT_URN,
        )
    ]


def test_the_folders_are_the_configured_models():
    """``tpu-rl:model`` names the model whose folders the steps write: another model's folder is outside them."""
    assert findings(bucket_grant(WRITER, "export", under(BUCKET, f"{OTHER_MODEL}/export/"))) == [
        (outside(WRITER, BUCKET, f"{OTHER_MODEL}/export/"), GRANT_URN)
    ]
    assert findings(bucket_grant(WRITER, "export", under(BUCKET, f"{MODEL}/export/"))) == []


def test_every_member_of_a_binding_is_judged():
    """A ``...IAMBinding`` grants its role to each of its ``members``."""
    binding_urn = urn(BUCKET_BINDING, "binding")
    condition = under(BUCKET, f"{MODEL}/train/")
    binding = resource(
        BUCKET_BINDING,
        "binding",
        {"bucket": BUCKET, "role": WRITER, "members": [member("export")], "condition": condition},
    )
    assert findings(binding) == [(outside(WRITER, BUCKET, f"{MODEL}/train/", name="binding"), binding_urn)]


def test_a_kubernetes_principal_is_named_and_the_next_member_still_judged():
    binding_urn = urn(BUCKET_BINDING, "binding")
    condition = under(BUCKET, f"{MODEL}/train/")
    props = {"bucket": BUCKET, "role": WRITER, "members": [PRINCIPAL, member("export")], "condition": condition}
    assert findings(resource(BUCKET_BINDING, "binding", props)) == [
        (
            f"binding: {WRITER} to {PRINCIPAL}, a Kubernetes service account's principal: only its step's Google "
            "account holds grants; bind the Kubernetes service account to it with workloadIdentityUser",
            binding_urn,
        ),
        (outside(WRITER, BUCKET, f"{MODEL}/train/", name="binding"), binding_urn),
    ]


def test_a_binding_of_a_role_not_judged_does_not_end_the_next_bindings_judgement():
    """A policy document's first binding, of a role no bucket takes, is named; the second still judged for its
    holder."""
    document = {
        "bindings": [
            {"role": "roles/storage.admin", "members": [member("cpu-np")]},
            {"role": WRITER, "members": [member("export")], "condition": under(BUCKET, f"{MODEL}/train/")},
        ]
    }
    policy_urn = urn(BUCKET_POLICY, "policy")
    grant = resource(BUCKET_POLICY, "policy", {"bucket": BUCKET, "policyData": json.dumps(document)})
    assert findings(grant) == [
        (
            f"policy: roles/storage.admin on a bucket: the steps need {BUCKET_READER}, {WRITER}, {READER} only",
            policy_urn,
        ),
        (outside(WRITER, BUCKET, f"{MODEL}/train/", name="policy"), policy_urn),
    ]


def test_a_member_that_is_not_text_is_no_account():
    """A policy document's member that is no text holds nothing the pack judges (``stack-principals`` names it)."""
    document = {"bindings": [{"role": WRITER, "members": [7], "condition": under(BUCKET, f"{MODEL}/train/")}]}
    grant = resource(BUCKET_POLICY, "policy", {"bucket": BUCKET, "policyData": json.dumps(document)})
    assert findings(grant) == []


def project_policy(project: str, *roles: str) -> analyzer.Resource:
    document = {"bindings": [{"role": role, "members": [member("sys-np")]} for role in roles]}
    return resource(PROJECT_POLICY, "project", {"project": project, "policyData": json.dumps(document)})


def test_grants_in_another_project_are_named_with_the_stacks_project():
    assert findings(project_policy("other-project", NODE_ROLE, REGISTRY_READER)) == [
        (
            f"project: grants {NODE_ROLE}, {REGISTRY_READER} in project other-project, not the stack's ({PROJECT}): "
            "grant in gcp:project only",
            urn(PROJECT_POLICY, "project"),
        )
    ]
    assert findings(project_policy(PROJECT, NODE_ROLE, REGISTRY_READER)) == []


def test_with_no_gcp_project_the_stacks_projects_are_its_clusters():
    """No ``gcp:project`` from the engine: the stack's projects are its clusters' (every one named), else none."""
    clusters = tuple(
        resource("gcp:container/cluster:Cluster", f"c{i}", {"name": "tpu-rl-prod", "project": p})
        for i, p in enumerate(("proj-b", "proj-a"))
    )
    config = {k: v for k, v in STACK_CONFIG.items() if k != "gcp:project"}
    grant = project_policy("other-project", NODE_ROLE)
    message = "project: grants {} in project other-project, not the stack's ({}): grant in gcp:project only"
    assert findings(grant, stack_config=config, extra=clusters) == [
        (message.format(NODE_ROLE, "proj-a, proj-b"), urn(PROJECT_POLICY, "project"))
    ]
    assert findings(grant, stack_config=config) == [
        (message.format(NODE_ROLE, "none known"), urn(PROJECT_POLICY, "project"))
    ]


def test_a_project_role_a_steps_account_does_not_use_is_refused():
    grant = resource(PROJECT_MEMBER, "node-role", {"project": PROJECT, "role": NODE_ROLE, "member": member("export")})
    assert findings(grant) == [
        (
            f"node-role: {NODE_ROLE} on the project to the export account: its step does not use it; remove the grant",
            urn(PROJECT_MEMBER, "node-role"),
        )
    ]
    node = resource(PROJECT_MEMBER, "node-role", {"project": PROJECT, "role": NODE_ROLE, "member": member("cpu-np")})
    assert findings(node) == []


def account_grant(account: Any, principal: Any = PRINCIPAL) -> analyzer.Resource:
    props = {"serviceAccountId": account, "role": WORKLOAD_IDENTITY_USER, "member": principal}
    return resource(ACCOUNT_MEMBER, "wi", props)


@pytest.mark.parametrize(
    "account", [EXPORT_EMAIL, f"projects/{PROJECT}/serviceAccounts/{EXPORT_EMAIL}"], ids=["email", "full-name"]
)
def test_a_grant_on_the_stacks_account_is_read_by_its_email_or_full_name(account):
    assert findings(account_grant(account)) == []


@pytest.mark.parametrize(
    "account",
    [
        f"other@{PROJECT}.iam.gserviceaccount.com",
        f"projects/{PROJECT}/serviceAccounts/other@{PROJECT}.iam.gserviceaccount.com",
    ],
    ids=["email", "full-name"],
)
def test_a_grant_on_another_account_is_refused(account):
    assert findings(account_grant(account)) == [
        (
            f"wi: grants on the account other@{PROJECT}.iam.gserviceaccount.com, not one of the stack's: remove the "
            "grant",
            urn(ACCOUNT_MEMBER, "wi"),
        )
    ]


def test_a_grant_on_a_kind_the_stack_never_grants_on_is_refused():
    grant = resource(
        FOLDER_MEMBER, "folder", {"bucket": BUCKET, "managedFolder": "hub/", "role": READER, "member": member("export")}
    )
    assert findings(grant) == [
        (
            f"folder: a Member grant on a storage ManagedFolder resource ({FOLDER_MEMBER}): the stack grants on its "
            "project, bucket, key, image mirrors and accounts only: remove it",
            urn(FOLDER_MEMBER, "folder"),
        )
    ]


UNKNOWN_CASES = [
    # (id, the grant, the name and field not known)
    (
        "project",
        resource(PROJECT_MEMBER, "g", {"project": Unknown(), "role": NODE_ROLE, "member": member("sys-np")}),
        "g: .project",
    ),
    ("account", account_grant(Unknown()), "wi: .serviceAccountId"),
    ("member", account_grant(EXPORT_EMAIL, Unknown()), "wi: .member"),
]


@pytest.mark.parametrize(("grant", "field"), [c[1:] for c in UNKNOWN_CASES], ids=[c[0] for c in UNKNOWN_CASES])
def test_an_unknown_target_or_member_is_left_for_pulumi_up(grant, field):
    """At a preview, a project, account or member not known yet is not judged: pulumi-policy's advisory only, on the
    stack; at ``pulumi up`` one still unknown is the one finding, naming it."""
    assert findings(grant, preview=True) == [("unjudged", "")]
    assert findings(grant) == [
        (f"cannot judge IAMMember {field}: not known at `pulumi up`; give it a value the program knows", "")
    ]
