"""Before `pulumi stack init`: the backends the project knows and whether one holds the stack (tools/state_lookup.py),
read where the diy backend writes a checkpoint (pulumi/pulumi pkg/backend/diy/store.go: the project-scoped
``.pulumi/stacks/<project>/<stack>.json[.gz|.zst]`` and the legacy ``.pulumi/stacks/<stack>.json``), in
fake-gcs-server and in a folder; Pulumi Cloud through `pulumi stack ls --json`; and `tools.state new`'s one line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.stack_homes import cli_file, repo
from tools import state, state_lookup
from tools.state_export import StateError
from tools.state_home import decide


@pytest.mark.parametrize(
    ("name", "found"),
    [
        (".pulumi/stacks/tpu-rl/prod.json", ("tpu-rl", "prod")),
        (".pulumi/stacks/tpu-rl/prod.json.gz", ("tpu-rl", "prod")),
        (".pulumi/stacks/tpu-rl/prod.json.zst", ("tpu-rl", "prod")),
        (".pulumi/stacks/prod.json", ("", "prod")),
        (".pulumi/stacks/other-project/prod.json", ("other-project", "prod")),
        (".pulumi/stacks/tpu-rl/prod.json.bak", None),
        (".pulumi/history/tpu-rl/prod/prod-1.history.json", None),
        (".pulumi/stacks/tpu-rl/prod/extra.json", None),
    ],
)
def test_a_checkpoint_is_named_as_the_diy_backend_writes_it(name, found):
    assert state_lookup.stack_of(name) == found
    assert state_lookup.holds([name], "prod") == (found is not None and found[0] in ("", "tpu-rl"))


def test_a_bucket_and_a_folder_are_read_where_the_cli_writes(gcs, tmp_path):
    bucket = gcs.bucket("acme-tpu-pulumi-state")
    gcs.create_bucket("acme-tpu-pulumi-state")
    bucket.blob(".pulumi/stacks/tpu-rl/prod.json").upload_from_string("{}")
    bucket.blob("team/.pulumi/stacks/tpu-rl/dev.json.gz").upload_from_string("x")
    bucket.blob(".pulumi/stacks/tpu-rl/qa.json.bak").upload_from_string("{}")
    assert state_lookup.holds_stack("gs://acme-tpu-pulumi-state", "prod", gcs)
    assert not state_lookup.holds_stack("gs://acme-tpu-pulumi-state", "qa", gcs), "a removed stack's backup"
    assert not state_lookup.holds_stack("gs://acme-tpu-pulumi-state", "dev", gcs)
    assert state_lookup.holds_stack("gs://acme-tpu-pulumi-state/team", "dev", gcs), "under the URL's folder"
    assert state_lookup.holds_stack("gs://no-such-bucket", "prod", gcs) is False
    folder = tmp_path / "state" / ".pulumi" / "stacks"
    (folder / "tpu-rl").mkdir(parents=True)
    (folder / "tpu-rl" / "dev.json").write_text("{}")
    assert state_lookup.holds_stack(f"file://{tmp_path / 'state'}", "dev", None)
    assert state_lookup.holds_stack(f"file://{tmp_path / 'none'}", "dev", None) is False


def test_a_bucket_this_account_may_not_read_is_skipped_and_other_failures_are_named():
    from google.api_core import exceptions

    class Refusing:
        def __init__(self, error: Exception) -> None:
            self.error = error

        def list_blobs(self, *args, **kwargs):
            raise self.error

    assert state_lookup.listed("gs://acme-prod-state", Refusing(exceptions.Forbidden("no"))) is None
    with pytest.raises(StateError, match="cannot list gs://acme-prod-state/.pulumi/stacks/: 503 down"):
        state_lookup.listed("gs://acme-prod-state", Refusing(exceptions.ServiceUnavailable("down")))
    with pytest.raises(StateError, match="no Google credentials"):
        state_lookup.listed("gs://acme-prod-state", None)


def test_the_known_backends_are_the_other_homes_the_shared_bucket_cloud_logins_and_the_old_folder(tmp_path):
    root = repo(
        tmp_path,
        dev=cli_file(),
        prod=cli_file(config={"tpu-rl:stateBackend": "gs://acme-prod-state"}),
        qa=cli_file(config={"tpu-rl:stateBackend": "https://api.pulumi.com"}),
    )
    (root / ".pulumi-state" / ".pulumi").mkdir(parents=True)
    home = tmp_path / "pulumi-home"
    home.mkdir()
    tokens = {"https://api.pulumi.com": "pul-1", "https://pulumi.acme.example": "pul-2", "file://~": ""}
    (home / "credentials.json").write_text(json.dumps({"current": "file://~", "accessTokens": tokens}))
    found = state_lookup.known(decide("dev", root), root, {"PULUMI_HOME": str(home)})
    assert [(k.url, k.why) for k in found] == [
        ("gs://acme-prod-state", "stack prod's state home (Pulumi.prod.yaml)"),
        ("https://api.pulumi.com", "stack qa's state home (Pulumi.qa.yaml)"),
        ("gs://acme-tpu-pulumi-state", "the project's shared state bucket of earlier versions"),
        ("https://pulumi.acme.example", "Pulumi Cloud, where the CLI is logged in"),
        (f"file://{root.resolve() / '.pulumi-state'}", ".pulumi-state/ in this checkout, an earlier default"),
    ]
    assert state_lookup.cloud_logins({"PULUMI_ACCESS_TOKEN": "pul-x", "HOME": str(tmp_path)}) == [
        "https://api.pulumi.com"
    ]


def test_pulumi_cloud_is_asked_with_stack_ls_and_its_failure_is_one_line():
    def answering(stdout: str, code: int = 0, stderr: str = ""):
        def run(argv, env, **kwargs):
            assert argv == ["pulumi", "stack", "ls", "--json"] and env["PULUMI_BACKEND_URL"] == "https://api.pulumi.com"
            assert kwargs["timeout"] == state_lookup.CLOUD_TIMEOUT
            return subprocess.CompletedProcess(argv, code, stdout, stderr)

        return run

    listing = json.dumps([{"name": "acme/prod", "current": False}, {"name": "dev", "current": True}])
    assert state_lookup.in_cloud("https://api.pulumi.com", "prod", answering(listing))
    assert state_lookup.in_cloud("https://api.pulumi.com", "dev", answering(listing))
    assert not state_lookup.in_cloud("https://api.pulumi.com", "qa", answering(listing))
    with pytest.raises(
        StateError, match=r"`pulumi stack ls` at https://api.pulumi.com failed: error: 401 Unauthorized"
    ):
        state_lookup.in_cloud("https://api.pulumi.com", "qa", answering("", 255, "error: 401\nUnauthorized"))


def test_new_refuses_a_stack_found_elsewhere_in_one_line_and_writes_nothing(gcs, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PULUMI_HOME", str(tmp_path / "no-login"))
    root = repo(tmp_path, dev=cli_file(), prod=cli_file(protect=True))
    gcs.create_bucket("acme-tpu-pulumi-state")
    gcs.bucket("acme-tpu-pulumi-state").blob(".pulumi/stacks/tpu-rl/prod.json").upload_from_string("{}")
    before = (root / "Pulumi.prod.yaml").read_text()
    assert state.main(["new", "--stack", "prod", "--root", str(root)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        "error: stack prod already exists in gs://acme-tpu-pulumi-state, the project's shared state bucket of earlier "
        "versions; creating it again in gs://acme-tpu-pulumi-state-prod would make a second, empty stack whose `up` "
        "creates everything again beside the first: record where it lives (make stack STACK=prod "
        "STATE_BACKEND=gs://acme-tpu-pulumi-state), or move it to its home (make state-move STACK=prod "
        "FROM=gs://acme-tpu-pulumi-state) (docs/state.md#where-the-state-lives)"
    )
    assert (root / "Pulumi.prod.yaml").read_text() == before
    assert state.main(["new", "--stack", "dev", "--root", str(root)]) == 1, "dev's own bucket is not made yet"
    assert capsys.readouterr().err == (
        "error: stack dev's state bucket gs://acme-tpu-pulumi-state-dev does not exist: create it, with its key, once: "
        "make state-bucket STACK=dev\n"
    )
    gcs.create_bucket("acme-tpu-pulumi-state-dev")
    assert state.main(["new", "--stack", "dev", "--root", str(root)]) == 0


def test_new_stops_when_a_known_backend_cannot_be_asked(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PULUMI_ACCESS_TOKEN", "pul-x")
    monkeypatch.setenv("PATH", str(tmp_path / "no-pulumi"))
    home = {"tpu-rl:stateBackend": f"file://{tmp_path / 'state'}"}
    root = repo(
        tmp_path, dev=cli_file(project="my-tpu-dev-project", config=home)
    )  # no project: no shared bucket to ask
    assert state.main(["new", "--stack", "dev", "--root", str(root)]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(
        "error: cannot tell whether stack dev already exists elsewhere: https://api.pulumi.com (Pulumi Cloud, where "
        "the CLI is logged in): `pulumi stack ls` at https://api.pulumi.com did not answer:"
    )
    assert line.endswith("(or log out of a Pulumi Cloud the stack cannot be in: pulumi logout <url>)")


def test_the_old_checkouts_folder_is_a_known_backend(tmp_path, capsys, monkeypatch):
    """A stack still in .pulumi-state/ (an earlier default) is never created again, empty, elsewhere."""
    monkeypatch.setenv("PULUMI_HOME", str(tmp_path / "no-login"))
    root = repo(tmp_path, prod=cli_file(config={"tpu-rl:stateBackend": f"file://{tmp_path / 'state'}"}))
    old = Path(root / ".pulumi-state" / ".pulumi" / "stacks" / "tpu-rl")
    old.mkdir(parents=True)
    (old / "prod.json").write_text("{}")
    assert state.main(["new", "--stack", "prod", "--root", str(root), "--allow-passphrase"]) == 2
    line = capsys.readouterr().err
    assert (
        ".pulumi-state/ in this checkout, an earlier default" in line
        and "make state-move STACK=prod FROM=file://" in line
    )
