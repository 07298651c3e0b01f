"""`make state-move` (tools/state_move.py): a stack in a shared backend and key, or with its key in the shared key
ring of earlier versions, moved into its own bucket and a key in a ring of its own, each Pulumi command given its
backend, against tests/fake_pulumi.py keeping stacks where the diy backend does (folders here; tests/test_state_make.py
runs it on fake-gcs-server through `make`); then the state's grants taken off the old key, on the loopback Cloud KMS
of tests/fake_state_apis.py."""

from __future__ import annotations

import json
import os

import pytest

from tests.fake_pulumi import calls, install
from tests.fake_state_apis import FakeStateApis, fake_state_apis
from tests.scenario import EXPORT
from tests.stack_homes import KEY, RING_KEY, SHARED, cli_file, repo
from tools import state
from tools.state_home import read_stack_file
from tools.state_move import urns

OPS = "user:ops@acme.example"
DEPLOY = "serviceAccount:deploy-prod@acme-tpu.iam.gserviceaccount.com"
PREVIEW = "serviceAccount:preview-prod@acme-tpu.iam.gserviceaccount.com"
AUDITOR = "group:security@acme.example"


@pytest.fixture
def kms(monkeypatch):
    """The loopback Cloud KMS with prod's key in the shared ring as the version before made it (its label, the
    state's roles granted to the operator, the deploy and preview accounts, and an auditor's grant of its own) and
    prod's key in its own ring as `make state-bucket` made it (the operator alone so far)."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import kms_v1

    with fake_state_apis() as fake:
        fake.services = dict.fromkeys(fake.services, "ENABLED")
        for key in (RING_KEY.format("prod"), KEY.format("prod")):
            fake.keys[key] = {"name": key, "purpose": "ENCRYPT_DECRYPT", "labels": {"tpu-rl-stack": "prod"}}
        fake.key_policies[RING_KEY.format("prod")] = [
            {"role": "roles/cloudkms.cryptoKeyEncrypterDecrypter", "members": [OPS, DEPLOY]},
            {"role": "roles/cloudkms.cryptoKeyDecrypter", "members": [PREVIEW]},
            {"role": "roles/cloudkms.cryptoKeyDecrypter", "members": [AUDITOR], "condition": AUDIT_HOURS},
            {"role": "roles/cloudkms.viewer", "members": [AUDITOR]},
        ]
        fake.key_policies[KEY.format("prod")] = [
            {"role": "roles/cloudkms.cryptoKeyEncrypterDecrypter", "members": [OPS]}
        ]
        client = kms_v1.KeyManagementServiceClient(
            transport="rest", credentials=AnonymousCredentials(), client_options={"api_endpoint": fake.url}
        )
        monkeypatch.setattr("tools.state_move._kms", lambda: client)
        yield fake


AUDIT_HOURS = {"title": "audit", "expression": 'request.time < timestamp("2027-01-01T00:00:00Z")'}


@pytest.fixture
def world(tmp_path, monkeypatch, kms):
    """Stacks dev and prod sharing the project's old key; prod's checkpoint in the old shared folder, its home
    recorded as a folder of its own; the fake CLI on PATH, run in the checkout."""
    old, new = tmp_path / "old", tmp_path / "new"
    root = repo(
        tmp_path,
        dev=cli_file(provider=SHARED),
        prod=cli_file(provider=SHARED, protect=True, config={"tpu-rl:stateBackend": f"file://{new}"}),
    )
    (old / ".pulumi" / "stacks" / "tpu-rl").mkdir(parents=True)
    (old / ".pulumi" / "stacks" / "tpu-rl" / "prod.json").write_text(EXPORT)
    install(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("PULUMI_LOG", str(tmp_path / "pulumi.log"))
    monkeypatch.setenv("PULUMI_HOME", str(tmp_path / "no-login"))
    monkeypatch.delenv("PULUMI_BACKEND_URL", raising=False)
    monkeypatch.chdir(root)
    return root, f"file://{old}", f"file://{new}"


def move(root, source: str) -> int:
    return state.main(["move", "--stack", "prod", "--from", source, "--root", str(root)])


def test_a_stack_in_a_shared_backend_and_key_is_moved_into_its_own(world, tmp_path, capsys):
    root, old, new = world
    assert move(root, old) == 0, capsys.readouterr().err
    made = [(" ".join(c["argv"][:2]), c["backend"]) for c in calls(tmp_path / "pulumi.log")]
    assert made == [
        ("stack export", old),
        ("stack init", new),
        ("stack import", new),
        ("stack export", new),
        ("stack change-secrets-provider", new),
        ("stack rm", old),
    ]
    init = calls(tmp_path / "pulumi.log")[1]["argv"]
    assert init == ["stack", "init", "prod", f"--secrets-provider={SHARED}"], "the file's key: its data key is kept"
    assert json.loads((tmp_path / "new" / ".pulumi/stacks/tpu-rl/prod.json").read_text()) == json.loads(EXPORT)
    assert not (tmp_path / "old" / ".pulumi/stacks/tpu-rl/prod.json").exists(), "no second copy to update"
    assert read_stack_file("prod", root).secrets_provider == f"gcpkms://{KEY.format('prod')}"
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"copied stack prod from {old} to {new} ({len(urns(EXPORT, old))} resources)"
    assert out[-1].startswith(f"stack prod lives in {new}, its secrets encrypted by gcpkms://{KEY.format('prod')}:")
    assert "rotate the secrets every holder of the old key could read" in out[-1]
    assert out[-2] == (
        f"the key {SHARED.removeprefix('gcpkms://')}: left as it is, the project's shared key of earlier versions, "
        "which other stacks may still use; once none does, take its grants away (gcloud kms keys "
        "remove-iam-policy-binding)"
    )
    (tmp_path / "pulumi.log").write_text("")
    assert move(root, old) == 0 and calls(tmp_path / "pulumi.log") == [], "run again: nothing left to do"


def test_a_stack_whose_key_is_in_the_shared_ring_gets_one_in_its_own_and_the_old_keys_grants_go(
    world, tmp_path, capsys, kms: FakeStateApis
):
    """Prod in its own home already, its key the one the version before gave it in the ring every stack's key shared:
    only the key moves, the CLI writes the file's new provider, and the state's grants leave the old key, every
    other binding left and named."""
    root, old, new = world
    (tmp_path / "new" / ".pulumi/stacks/tpu-rl").mkdir(parents=True)
    (tmp_path / "new" / ".pulumi/stacks/tpu-rl/prod.json").write_text(EXPORT)
    (tmp_path / "old" / ".pulumi/stacks/tpu-rl/prod.json").unlink()
    home = {"tpu-rl:stateBackend": new}
    (root / "Pulumi.prod.yaml").write_text(
        cli_file(provider=f"gcpkms://{RING_KEY.format('prod')}", protect=True, config=home)
    )
    assert state.main(["select", "--stack", "prod", "--root", str(root)]) == 2, "protected: refused until it moves"
    assert "make state-bucket STACK=prod, then make state-move STACK=prod" in capsys.readouterr().err
    assert move(root, old) == 0, capsys.readouterr().err
    assert [(" ".join(c["argv"][:2]), c["backend"]) for c in calls(tmp_path / "pulumi.log")] == [
        ("stack change-secrets-provider", new)
    ]
    assert read_stack_file("prod", root).secrets_provider == f"gcpkms://{KEY.format('prod')}"
    out = capsys.readouterr().out.splitlines()
    was = RING_KEY.format("prod")
    assert out[:-1] == [
        f"re-encrypted stack prod's secrets (its file's and its state's) with gcpkms://{KEY.format('prod')}",
        f"the key {was}: removed roles/cloudkms.cryptoKeyEncrypterDecrypter: {DEPLOY}, {OPS} (stack prod's old key)",
        f"the key {was}: removed roles/cloudkms.cryptoKeyDecrypter: {PREVIEW} (stack prod's old key)",
        f"the key {KEY.format('prod')}: {DEPLOY}, {PREVIEW} hold no role on it: if they still run stack prod's "
        "commands, grant them with make state-bucket STACK=prod MEMBERS=... or READERS=...",
        f"the key {was}: left roles/cloudkms.cryptoKeyDecrypter: {AUDITOR} (conditioned) (not a grant of make "
        "state-bucket)",
        f"the key {was}: left roles/cloudkms.viewer: {AUDITOR} (not a grant of make state-bucket)",
    ]
    assert kms.key_policies[was] == [
        {"role": "roles/cloudkms.cryptoKeyDecrypter", "members": [AUDITOR], "condition": AUDIT_HOURS},
        {"role": "roles/cloudkms.viewer", "members": [AUDITOR]},
    ]
    assert state.main(["select", "--stack", "prod", "--root", str(root)]) == 0
    assert capsys.readouterr().out.splitlines()[1] == f"gcpkms://{KEY.format('prod')}"
    assert move(root, old) == 0, "run again: nothing to move, nothing to remove"
    assert [line for line in capsys.readouterr().out.splitlines() if "removed" in line] == []


def test_a_move_that_stopped_half_way_goes_on_from_where_it_stopped(world, tmp_path, capsys, monkeypatch):
    root, old, new = world
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    (tmp_path / "new" / ".pulumi/stacks/tpu-rl").mkdir(parents=True)
    (tmp_path / "new" / ".pulumi/stacks/tpu-rl/prod.json").write_text(EXPORT)  # copied, not yet re-keyed
    assert move(root, old) == 0, capsys.readouterr().err
    made = [(" ".join(c["argv"][:2]), c["backend"]) for c in calls(tmp_path / "pulumi.log")]
    assert made == [
        ("stack export", old),
        ("stack export", new),
        ("stack change-secrets-provider", new),
        ("stack rm", old),
    ]
    assert f"stack prod was already copied to {new}" in capsys.readouterr().out


def test_a_stack_in_both_with_different_resources_is_left_alone(world, tmp_path, capsys):
    root, old, new = world
    (tmp_path / "new" / ".pulumi/stacks/tpu-rl").mkdir(parents=True)
    (tmp_path / "new" / ".pulumi/stacks/tpu-rl/prod.json").write_text('{"version": 3, "deployment": null}')
    assert move(root, old) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: stack prod is in both {old} (") and "with different resources" in line
    assert [c["argv"][1] for c in calls(tmp_path / "pulumi.log")] == ["export", "export"], "nothing changed"


def test_a_locked_stack_or_a_home_given_as_its_source_is_not_moved(world, tmp_path, capsys):
    root, old, new = world
    lock = tmp_path / "old" / ".pulumi/locks/organization/tpu-rl/prod"
    lock.mkdir(parents=True)
    (lock / "0b1d.json").write_text('{"pid": 7, "username": "ops", "hostname": "ci", "timestamp": "t"}')
    assert move(root, old) == 1
    assert f"stack prod is locked in {old}" in capsys.readouterr().err
    assert move(root, new) == 2
    assert "is no backend to move stack prod from" in capsys.readouterr().err
    assert calls(tmp_path / "pulumi.log") == []
