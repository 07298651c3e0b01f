"""`make state-bucket` (tools/state_bucket.py) and the permission check before each command (tools/state_access.py),
with the official storage, Cloud KMS, Service Usage and Resource Manager clients on a loopback server that speaks
their REST API (tests/fake_state_apis.py): a fresh project with both APIs off; the stack's key in a ring of its own;
the bucket's and the key's IAM policies set, read back and checked; the project's convenience members removed; another
stack's bucket or key, another project's bucket, a bucket this account may not read and a folder home in a bucket
that holds anything else refused with nothing changed."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tests.fake_state_apis import clients, default_bucket_policy, fake_state_apis
from tests.stack_homes import RING_KEY, SHARED
from tools import state_access, state_bucket
from tools.state_export import StateError
from tools.state_home import Home, StateRefusedError

pytestmark = pytest.mark.usefixtures("google_clients")

BUCKET = "acme-tpu-pulumi-state-prod"
KEY = "projects/acme-tpu/locations/global/keyRings/pulumi-state-prod/cryptoKeys/state"
RING = "projects/acme-tpu/locations/global/keyRings/pulumi-state-prod"
NUMBER = "123456789012"
"""The project's number, as Resource Manager's projects.get and the buckets it made name it."""
HOME = Home("prod", f"gs://{BUCKET}", "default", f"gcpkms://{KEY}", False, "acme-tpu", "us-east5")
OPS = "user:ops@acme.example"
DEPLOY = "serviceAccount:deploy-prod@acme-tpu.iam.gserviceaccount.com"
PREVIEW = "serviceAccount:preview-prod@acme-tpu.iam.gserviceaccount.com"


def policy(bindings: list[dict]) -> dict[str, set[str]]:
    """A policy's bindings as role -> members; a role in two bindings fails (one binding per role)."""
    roles = [b["role"] for b in bindings]
    assert len(roles) == len(set(roles)), roles
    return {b["role"]: set(b["members"]) for b in bindings}


@pytest.fixture
def apis():
    with fake_state_apis() as fake:
        yield fake


def create(fake, home: Home = HOME, **kwargs):
    storage, kms, services = clients(fake)
    kwargs.setdefault("writers", (OPS, DEPLOY))
    kwargs.setdefault("readers", (PREVIEW,))
    kwargs.setdefault("project_number", NUMBER)
    return state_bucket.create(home, storage=storage, kms=kms, services=services, **kwargs)


def changes(fake) -> list[str]:
    return [r for r in fake.requests if not r.startswith("GET ")]


def test_a_fresh_project_gets_its_apis_the_bucket_the_key_and_a_policy_of_named_members_only(apis):
    lines = create(apis)
    assert apis.services == {"storage.googleapis.com": "ENABLED", "cloudkms.googleapis.com": "ENABLED"}
    bucket = apis.buckets[BUCKET]
    assert bucket["versioning"] == {"enabled": True} and bucket["location"] == "US-EAST5"
    assert bucket["iamConfiguration"]["uniformBucketLevelAccess"]["enabled"] is True
    assert bucket["iamConfiguration"]["publicAccessPrevention"] == "enforced"
    assert bucket["labels"] == {"purpose": "pulumi-state", "tpu-rl-stack": "prod"}
    assert apis.keys[KEY]["labels"] == {"purpose": "pulumi-state", "tpu-rl-stack": "prod"}
    assert "rotationPeriod" not in apis.keys[KEY], "no rotation: each version bills"
    assert policy(apis.bucket_policies[BUCKET]) == {
        "roles/storage.objectUser": {OPS, DEPLOY},
        "roles/storage.objectViewer": {PREVIEW},
    }, "the convenience members Cloud Storage gave the new bucket are gone"
    assert policy(apis.key_policies[KEY]) == {
        "roles/cloudkms.cryptoKeyEncrypterDecrypter": {OPS, DEPLOY},
        "roles/cloudkms.cryptoKeyDecrypter": {PREVIEW},
    }
    assert lines == [
        "enabled storage.googleapis.com in project acme-tpu",
        "enabled cloudkms.googleapis.com in project acme-tpu",
        f"created gs://{BUCKET} in us-east5 (versioned, uniform access, public access prevented)",
        f"created the key ring {RING}",
        f"created the key {KEY} (no rotation: each version bills)",
        f"gs://{BUCKET}: removed projectEditor:123456789012, projectOwner:123456789012, projectViewer:123456789012 "
        "(project convenience or public members)",
        f"gs://{BUCKET}: roles/storage.objectUser: {DEPLOY}, {OPS}",
        f"gs://{BUCKET}: roles/storage.objectViewer: {PREVIEW}",
        f"the key {KEY}: roles/cloudkms.cryptoKeyEncrypterDecrypter: {DEPLOY}, {OPS}",
        f"the key {KEY}: roles/cloudkms.cryptoKeyDecrypter: {PREVIEW}",
        f"state: gs://{BUCKET}  secrets: gcpkms://{KEY}",
    ]


def test_run_again_it_keeps_the_members_named_before_and_removes_public_and_convenience_ones(apis):
    create(apis)
    apis.bucket_policies[BUCKET] += [
        *default_bucket_policy("123456789012"),
        {"role": "roles/storage.objectViewer", "members": ["allUsers", "user:auditor@acme.example"]},
    ]
    apis.key_policies[KEY].append({"role": "roles/cloudkms.cryptoKeyDecrypter", "members": ["allAuthenticatedUsers"]})
    lines = create(apis, writers=(OPS,), readers=())
    assert policy(apis.bucket_policies[BUCKET]) == {
        "roles/storage.objectUser": {OPS, DEPLOY},
        "roles/storage.objectViewer": {PREVIEW, "user:auditor@acme.example"},
    }, "one binding per role"
    assert policy(apis.key_policies[KEY])["roles/cloudkms.cryptoKeyDecrypter"] == {PREVIEW}
    assert f"gs://{BUCKET}: removed allUsers, projectEditor:123456789012, projectOwner:123456789012, " in "\n".join(
        lines
    )
    assert lines[:2] == [
        f"gs://{BUCKET} exists; versioning, uniform access, public access prevention and its label set",
        f"the key {KEY} exists; its label set",
    ]


def test_a_policy_the_server_did_not_apply_is_caught_by_the_read_back(apis):
    create(apis)
    apis.bucket_policies[BUCKET] += default_bucket_policy("123456789012")
    apis.unapplied = True
    with pytest.raises(StateError, match=r"read back from gs://acme-tpu-pulumi-state-prod still grants roles/storage"):
        create(apis)


def test_another_stacks_bucket_or_key_is_refused_with_nothing_changed(apis):
    create(apis, Home("dev", f"gs://{BUCKET}", "default", f"gcpkms://{KEY}", False, "acme-tpu", "us-east5"))
    made = len(changes(apis))
    with pytest.raises(
        StateRefusedError, match=rf"gs://{BUCKET} is stack dev's state bucket \(its label tpu-rl-stack\)"
    ):
        create(apis)
    apis.buckets[BUCKET]["labels"] = {}
    with pytest.raises(StateRefusedError, match=rf"the key {KEY} is stack dev's \(its label tpu-rl-stack\)"):
        create(apis)
    assert len(changes(apis)) == made, "no bucket, key or policy was changed"


def test_a_bucket_holding_another_stacks_state_is_refused(apis):
    """The project's shared bucket of earlier versions, recorded as prod's home while dev's state is still there."""
    shared = Home("prod", "gs://acme-tpu-pulumi-state", "recorded", f"gcpkms://{KEY}", False, "acme-tpu", "us-east5")
    create(apis, Home("qa", "gs://acme-tpu-pulumi-state", "default", "", True, "acme-tpu", "us-east5"))
    apis.buckets["acme-tpu-pulumi-state"]["labels"] = {}
    apis.objects["acme-tpu-pulumi-state"] = [".pulumi/stacks/tpu-rl/prod.json", ".pulumi/stacks/tpu-rl/dev.json.gz"]
    with pytest.raises(StateRefusedError) as caught:
        create(apis, shared)
    assert str(caught.value).startswith(
        "gs://acme-tpu-pulumi-state (the project's shared bucket of earlier versions) holds the state of stack dev too"
    )


@pytest.mark.parametrize("earlier", [SHARED, f"gcpkms://{RING_KEY.format('prod')}"], ids=["shared-key", "shared-ring"])
def test_a_key_of_earlier_versions_is_replaced_by_one_in_a_ring_of_the_stacks_own_and_the_move_is_named(apis, earlier):
    """The project's shared key, or the stack's key in the ring every stack's key shared: `make state-bucket` makes
    and grants the stack's own ring and key, never the old one, and names the move."""
    home = Home("prod", f"gs://{BUCKET}", "default", earlier, False, "acme-tpu", "us-east5")
    lines = create(apis, home)
    assert list(apis.keys) == [KEY] and list(apis.rings) == [RING], "a ring of its own, nothing in the shared one"
    assert (
        lines[-1]
        == f"stack prod's secrets are still encrypted by {earlier}: make state-move STACK=prod moves them to {KEY}"
    )


# ---------------------------------------------------------------------------------------------
# Only what is the stack's


def test_a_bucket_of_the_name_in_another_project_is_refused_with_nothing_changed(apis):
    """Bucket names are global and this one is predictable: the bucket's projectNumber against the project's."""
    create(apis)
    made = len(changes(apis))
    apis.buckets[BUCKET]["projectNumber"] = "999999999999"
    with pytest.raises(StateRefusedError) as caught:
        create(apis)
    assert str(caught.value).startswith(
        f"gs://{BUCKET} is the bucket of another project (number 999999999999, not project acme-tpu's {NUMBER}): "
        "bucket names are global and this one is predictable, so it is never adopted; name one of the project's own: "
        "make state-bucket STACK=prod STATE_BACKEND=gs://<bucket>"
    )
    with pytest.raises(StateError, match=r"^cannot tell whether gs://\S+ is project acme-tpu's: the project's number"):
        create(apis, project_number=None)
    assert len(changes(apis)) == made, "no setting, key or policy was changed"


def test_a_bucket_this_account_may_not_read_is_one_line_saying_it_cannot_tell(apis):
    apis.services = dict.fromkeys(apis.services, "ENABLED")
    apis.forbidden.add(BUCKET)
    with pytest.raises(StateError) as caught:
        create(apis)
    assert not isinstance(caught.value, StateRefusedError), "a grant may cure it: exit 1"
    line = str(caught.value)
    assert line.startswith(f"cannot tell whether gs://{BUCKET} is stack prod's: this account may not read the bucket")
    assert "if it is project acme-tpu's, grant the account roles/storage.admin there and run it again" in line
    assert changes(apis) == [], "nothing made"


def test_a_folder_home_in_a_bucket_that_holds_anything_else_is_refused(apis):
    """The grants are on the bucket: a folder home is the stack's only in a bucket that holds nothing else."""
    home = Home("prod", "gs://acme-state/tpu-rl/prod", "recorded", f"gcpkms://{KEY}", False, "acme-tpu", "us-east5")
    create(apis, home)
    apis.objects["acme-state"] = ["tpu-rl/prod/.pulumi/meta.yaml", "tpu-rl/prod/.pulumi/stacks/tpu-rl/prod.json"]
    assert (
        create(apis, home)[0]
        == "gs://acme-state exists; versioning, uniform access, public access prevention and its label set"
    )
    for stray, named in [
        ("tpu-rl/dev/.pulumi/meta.yaml", "gs://acme-state/tpu-rl/dev/"),
        ("datasets/train.jsonl", "gs://acme-state/datasets/"),
        ("README.md", "gs://acme-state/README.md"),
        ("tpu-rl/notes.txt", "gs://acme-state/tpu-rl/notes.txt"),
    ]:
        apis.objects["acme-state"].append(stray)
        made = len(changes(apis))
        with pytest.raises(StateRefusedError) as caught:
            create(apis, home)
        assert str(caught.value).startswith(
            f"gs://acme-state holds {named}, outside stack prod's folder tpu-rl/prod/: the grants on the bucket would "
            "reach it"
        )
        assert str(caught.value).endswith("name one of the project's own in Pulumi.prod.yaml (tpu-rl:stateBackend)")
        assert len(changes(apis)) == made
        apis.objects["acme-state"].remove(stray)


def test_a_home_that_is_no_bucket_and_no_named_account_are_refused(apis):
    with pytest.raises(StateRefusedError, match="not in a bucket"):
        create(apis, Home("dev", "https://api.pulumi.com", "recorded", "", False, "acme-tpu", "us-east5"))
    with pytest.raises(StateRefusedError, match="MEMBERS=user:YOU@example.com"):
        create(apis, writers=())
    assert apis.requests == []


# ---------------------------------------------------------------------------------------------
# The caller's own access, after the grants and before every command


def test_the_grants_are_waited_for_while_iam_propagates_bounded(apis):
    create(apis)
    storage, kms, _ = clients(apis)
    now = [0.0]
    apis.held_after = 4  # two rounds of a test on the bucket and one on the key
    state_bucket.wait_for_access(
        HOME, storage, kms, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s)
    )
    assert now[0] == 2 * state_bucket.WAIT_SECONDS
    apis.held = set()
    with pytest.raises(StateError, match="run make state-bucket again to check"):
        state_bucket.wait_for_access(
            HOME, storage, kms, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s)
        )
    assert now[0] <= 2 * state_bucket.WAIT_SECONDS + state_bucket.PROPAGATION_SECONDS


def test_the_check_names_what_the_command_lacks_on_the_bucket_and_the_key(apis):
    create(apis)
    storage, kms, _ = clients(apis)
    apis.held = {"storage.objects.get", "storage.objects.list", "cloudkms.cryptoKeyVersions.useToDecrypt"}
    assert state_access.check(HOME, "read", storage=storage, kms=kms) is None, "a preview reads and decrypts"
    line = state_access.check(HOME, "write", storage=storage, kms=kms)
    assert line == (
        f"the account running `make` lacks storage.objects.create, storage.objects.delete on gs://{BUCKET} "
        f"(roles/storage.objectUser); cloudkms.cryptoKeyVersions.useToEncrypt on the key {KEY} "
        "(roles/cloudkms.cryptoKeyEncrypterDecrypter), which stack prod's commands need: whoever administers the "
        "state grants them with `make state-bucket STACK=prod MEMBERS=user:YOU` (or gcloud, "
        "docs/permissions.md#each-stacks-state)"
    )


def test_a_missing_bucket_or_key_or_a_disabled_api_names_make_state_bucket(apis):
    storage, kms, _ = clients(apis)
    apis.services["storage.googleapis.com"] = "ENABLED"
    with pytest.raises(StateError, match=r"gs://acme-tpu-pulumi-state-prod does not exist: create it with `make state"):
        state_access.check(HOME, "write", storage=storage, kms=kms)
    create(apis)
    apis.services["cloudkms.googleapis.com"] = "DISABLED"
    with pytest.raises(StateError, match=r"the Cloud KMS API is off .*make state-bucket STACK=prod"):
        state_access.check(HOME, "write", storage=storage, kms=kms)


# ---------------------------------------------------------------------------------------------
# Who runs it, and who is named


def jwt(claims: dict) -> str:
    def part(value: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2ln"


def test_the_caller_is_its_service_accounts_email_or_its_id_tokens():
    from google.auth.credentials import AnonymousCredentials
    from google.oauth2 import credentials, service_account

    info = {
        "type": "service_account",
        "client_email": "deploy-prod@acme-tpu.iam.gserviceaccount.com",
        "token_uri": "https://oauth2.googleapis.com/token",
        "private_key": "",
    }
    account = service_account.Credentials(None, info["client_email"], info["token_uri"])
    assert state_bucket.caller_of(account) == DEPLOY
    user = credentials.Credentials("ya29.token", id_token=jwt({"email": "ops@acme.example", "email_verified": True}))
    assert state_bucket.caller_of(user) == OPS
    assert state_bucket.caller_of(credentials.Credentials("ya29.token")) is None, "no ID token: MEMBERS names it"
    assert state_bucket.caller_of(AnonymousCredentials()) is None


@pytest.mark.parametrize("member", ["allUsers", "allAuthenticatedUsers", "projectViewer:acme-tpu", "ops@acme.example"])
def test_members_are_accounts_groups_domains_or_principals_never_project_or_public_ones(member):
    assert state_bucket.parse_members(f" {OPS}, {DEPLOY},{OPS} ", "MEMBERS") == (OPS, DEPLOY)
    with pytest.raises(StateRefusedError, match="project and public members are never granted a stack's state"):
        state_bucket.parse_members(f"{OPS},{member}", "READERS")


def test_the_project_permissions_make_state_bucket_needs_are_named_with_their_roles():
    assert state_bucket.setup_missing("acme-tpu", [p for g in state_bucket.STATE_SETUP for p in g.permissions]) is None
    line = state_bucket.setup_missing("acme-tpu", ["storage.buckets.create"])
    assert line is not None and line.startswith(
        "the account running `make state-bucket` lacks, in project acme-tpu: roles/serviceusage.serviceUsageAdmin: "
        "serviceusage.services.enable, serviceusage.services.get; roles/browser: resourcemanager.projects.get; "
        "roles/storage.admin: storage.buckets.get,"
    )
    assert "roles/cloudkms.admin: cloudkms.keyRings.create" in line


def test_the_permissions_page_lists_what_the_state_tools_test_and_grant():
    """docs/permissions.md "Each stack's state": a row per grant of ``STATE_SETUP``, ``STATE_WRITE`` and
    ``STATE_READ``, each with every permission tested, and the per-stack CI grants naming those roles."""
    from infra.gcp.permissions import STATE_READ, STATE_SETUP, STATE_WRITE
    from tools.stack_files import ROOT

    page = (ROOT / "docs" / "permissions.md").read_text().split("## Each stack's state\n", 1)[1]
    rows = [line for line in page.splitlines() if line.startswith("| ")]
    grants: list[Any] = [*STATE_SETUP, *STATE_WRITE, *STATE_READ]
    for grant in grants:
        (row,) = [r for r in rows if f"| `{grant.role}` |" in r and all(f"`{p}`" in r for p in grant.permissions)]
        assert grant.why in row or not hasattr(grant, "on"), row
    ci = [r for r in rows if r.startswith("| `preview-") or r.startswith("| `deploy-")]
    assert len(ci) == 4 and all(r.count("nothing") == 1 for r in ci), "each CI account on its own stack alone"


def test_make_state_bucket_names_the_caller_records_the_home_and_stops_on_missing_project_permissions(
    apis, tmp_path, monkeypatch, capsys
):
    """`python -m tools.state create` as `make state-bucket` runs it, for prod still on the shared key of earlier
    versions: the caller (from its ID token) is granted, the home recorded in the stack file; without the project
    permissions it needs, one line and nothing made."""
    from google.oauth2 import credentials

    from tests.fake_state_apis import admin_clients
    from tests.stack_homes import SHARED, cli_file, repo
    from tools import state

    root = repo(tmp_path, dev=cli_file(provider=SHARED), prod=cli_file(provider=SHARED, protect=True))
    user = credentials.Credentials("ya29.token", id_token=jwt({"email": "ops@acme.example"}))
    monkeypatch.setattr(state, "_credentials", lambda: user)
    monkeypatch.setattr(state, "_admin_clients", lambda credentials, project: admin_clients(apis))
    apis.project_held = {"storage.buckets.create"}
    argv = ["create", "--stack", "prod", "--root", str(root), "--readers", PREVIEW]
    assert state.main(argv) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: the account running `make state-bucket` lacks, in project acme-tpu: ")
    assert apis.buckets == {} and apis.keys == {} and "POST" not in " ".join(apis.requests[1:])
    apis.project_held = None
    assert state.main([*argv, "--members", DEPLOY]) == 0
    out = capsys.readouterr().out.splitlines()
    assert f"gs://{BUCKET}: roles/storage.objectUser: {DEPLOY}, {OPS}" in out
    assert out[-3:] == [
        f"stack prod's secrets are still encrypted by {SHARED}: make state-move STACK=prod moves them to {KEY}",
        f"recorded tpu-rl:stateBackend: gs://{BUCKET} in Pulumi.prod.yaml: commit it, so that every clone and CI job "
        "finds the state there",
        f"recorded tpu-rl:access.members {OPS}, {DEPLOY}; tpu-rl:access.readers {PREVIEW} in Pulumi.prod.yaml: commit "
        "it, so that the access audit of `make up STACK=prod` counts them as the stack's own "
        "(docs/audit.md#the-stacks-own-list)",
    ], "a stack on the shared key gets its own, the first step of its move"
    assert (
        (root / "Pulumi.prod.yaml")
        .read_text()
        .endswith(
            f"  tpu-rl:stateBackend: gs://{BUCKET}\n"
            f"  tpu-rl:access:\n    members:\n      - {OPS}\n      - {DEPLOY}\n    readers:\n      - {PREVIEW}\n"
        )
    )


def test_make_state_bucket_grants_the_stack_files_access_and_records_only_who_it_does_not_name(
    apis, tmp_path, monkeypatch, capsys
):
    """The members and readers tpu-rl:access names are granted with the caller and MEMBERS=/READERS=; those it names
    already are not recorded again (in any case), the others are appended to its lists, every other line kept."""
    from google.oauth2 import credentials

    from tests.fake_state_apis import admin_clients
    from tests.stack_homes import access_lines, cli_file, repo
    from tools import state

    ci = "principalSet://iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/github/attribute.x/y"
    text = cli_file(protect=True) + access_lines((OPS.upper().replace("USER:", "user:"), DEPLOY), (PREVIEW,))
    root = repo(tmp_path, prod=text)
    user = credentials.Credentials("ya29.token", id_token=jwt({"email": "ops@acme.example"}))
    monkeypatch.setattr(state, "_credentials", lambda: user)
    monkeypatch.setattr(state, "_admin_clients", lambda credentials, project: admin_clients(apis))
    assert state.main(["create", "--stack", "prod", "--root", str(root), "--members", ci]) == 0
    granted = policy(apis.bucket_policies[BUCKET])
    assert granted["roles/storage.objectUser"] >= {OPS, OPS.upper().replace("USER:", "user:"), DEPLOY, ci}
    assert granted["roles/storage.objectViewer"] == {PREVIEW}
    assert capsys.readouterr().out.splitlines()[-1].startswith(f"recorded tpu-rl:access.members {ci} in ")
    assert (root / "Pulumi.prod.yaml").read_text() == text.replace(
        f"      - {DEPLOY}\n", f"      - {DEPLOY}\n      - {ci}\n"
    ) + ("  tpu-rl:stateBackend: gs://acme-tpu-pulumi-state-prod\n")
    before = (root / "Pulumi.prod.yaml").read_text()
    assert state.main(["create", "--stack", "prod", "--root", str(root), "--members", ci]) == 0
    assert not capsys.readouterr().out.splitlines()[-1].startswith("recorded ")
    assert (root / "Pulumi.prod.yaml").read_text() == before


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            "config:\n  gcp:project: acme-tpu  # mine\n",
            "config:\n  gcp:project: acme-tpu  # mine\n  tpu-rl:access:\n    members:\n      - user:b@acme.example\n",
        ),
        (
            "config:\n  tpu-rl:access:\n    readers:\n      - user:r@acme.example\n  tpu-rl:protect: true\n",
            "config:\n  tpu-rl:access:\n    readers:\n      - user:r@acme.example\n    members:\n"
            "      - user:b@acme.example\n  tpu-rl:protect: true\n",
        ),
        (  # a list at its key's indent, and a comment after it, kept where they are
            "config:\n  tpu-rl:access:\n    members:\n    - user:a@acme.example\n    # ops\n  tpu-rl:protect: true\n",
            "config:\n  tpu-rl:access:\n    members:\n    - user:a@acme.example\n    - user:b@acme.example\n    # ops\n"
            "  tpu-rl:protect: true\n",
        ),
    ],
    ids=["no-access", "other-field", "indentless-list"],
)
def test_a_member_is_appended_where_pulumi_config_set_would_and_nothing_else_changes(before, after):
    from tools.stack_access import with_access

    assert with_access(before, "Pulumi.prod.yaml", "members", ("user:b@acme.example",)) == after


def test_make_state_bucket_refuses_a_stack_files_access_it_cannot_read_before_anything_is_made(
    apis, tmp_path, monkeypatch, capsys
):
    from tests.stack_homes import cli_file, repo
    from tools import state

    text = cli_file(protect=True) + '  tpu-rl:access:\n    members:\n      - allUsers\n    readers: "x"\n'
    root = repo(tmp_path, prod=text)
    monkeypatch.setattr(state, "_credentials", lambda: pytest.fail("a client was made"))
    assert state.main(["create", "--stack", "prod", "--root", str(root)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" = ")[0] for line in lines] == [
        "error: tpu-rl:access.members[0]",
        "error: tpu-rl:access.readers",
    ], "every problem of the key at once, each one line"
    assert apis.requests == [] and (root / "Pulumi.prod.yaml").read_text() == text
