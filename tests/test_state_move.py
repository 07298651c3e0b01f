"""`make state-move` (tools/state_move.py): a stack in a shared backend and key moved into its own, each Pulumi command
given its backend, against tests/fake_pulumi.py keeping stacks where the diy backend does (folders here;
tests/test_state_make.py runs it on fake-gcs-server through `make`)."""

from __future__ import annotations

import json
import os

import pytest

from tests.fake_pulumi import calls, install
from tests.scenario import EXPORT
from tests.stack_homes import KEY, SHARED, cli_file, repo
from tools import state
from tools.state_home import read_stack_file
from tools.state_move import urns


@pytest.fixture
def world(tmp_path, monkeypatch):
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
    (tmp_path / "pulumi.log").write_text("")
    assert move(root, old) == 0 and calls(tmp_path / "pulumi.log") == [], "run again: nothing left to do"


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
