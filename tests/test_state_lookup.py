"""Before `pulumi stack init`: the backends the project knows and whether one holds the stack (tools/state_lookup.py),
read where the diy backend writes a checkpoint (pulumi/pulumi pkg/backend/diy/store.go: the project-scoped
``.pulumi/stacks/<project>/<stack>.json[.gz|.zst]`` and the legacy ``.pulumi/stacks/<stack>.json``), in
fake-gcs-server and in a folder; Pulumi Cloud through `pulumi stack ls --json`, in every organization; every backend
the CLI's credentials file names, as the CLI writes it (sdk/go/common/workspace/creds.go ``Credentials``), or the
current login from `pulumi whoami --json` when the file is encrypted; and `tools.state new`'s one line."""

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
    with pytest.raises(StateError) as caught:
        state_lookup.listed("gs://acme-prod-state", Refusing(exceptions.ServiceUnavailable("down")))
    assert str(caught.value) == "GCS answered HTTP 503 for listing gs://acme-prod-state/.pulumi/stacks/; retry later"
    assert caught.value.exit_code == 1, "a retry may cure it"
    with pytest.raises(StateError) as caught:
        state_lookup.listed("gs://acme-prod-state", Refusing(exceptions.Unauthorized("expired")))
    assert str(caught.value).startswith("GCS refused listing gs://acme-prod-state/.pulumi/stacks/ (HTTP 401")
    assert caught.value.exit_code == 2, "the credentials must change"
    with pytest.raises(StateError, match="no Google credentials") as caught:
        state_lookup.listed("gs://acme-prod-state", None)
    assert caught.value.exit_code == 2


def no_run(*args, **kwargs):
    raise AssertionError("no pulumi command: the credentials file names every login")


def test_the_known_backends_are_the_other_homes_the_shared_bucket_every_login_and_the_old_folder(tmp_path):
    """Every URL the credentials file keys (``current``, ``accessTokens``, ``accounts``): `pulumi login gs://...`
    and the other self-managed logins store theirs with an empty token (diy backend.go ``Login``), and a Pulumi Cloud
    login without a token or refresh token is none the CLI can use."""
    cloud = {"tpu-rl:stateBackend": "https://api.pulumi.com", "tpu-rl:stateOrganization": "acme"}
    root = repo(
        tmp_path,
        dev=cli_file(),
        prod=cli_file(config={"tpu-rl:stateBackend": "gs://acme-prod-state"}),
        qa=cli_file(config=cloud),
    )
    (root / ".pulumi-state" / ".pulumi").mkdir(parents=True)
    home = tmp_path / "pulumi-home"
    home.mkdir()
    tokens = {
        "https://api.pulumi.com": "pul-1",
        "https://pulumi.acme.example": "pul-2",
        "file://~": "",
        "gs://acme-old-state": "",
        "s3://acme-state?region=us-east-1": "",
        "https://logged-out.example": "",
    }
    accounts = {
        "azblob://acme-state": {},
        "https://refreshing.example": {"refreshToken": "pul-r", "organizations": ["acme"]},
        "https://gone.example": {"username": "ops"},
    }
    (home / "credentials.json").write_text(
        json.dumps({"current": "gs://acme-current", "accessTokens": tokens, "accounts": accounts})
    )
    lookup = state_lookup.known(decide("dev", root), root, {"PULUMI_HOME": str(home)}, no_run)
    login = f"where the Pulumi CLI is logged in ({home / 'credentials.json'})"
    assert [(k.url, k.why) for k in lookup.backends] == [
        ("gs://acme-prod-state", "stack prod's state home (Pulumi.prod.yaml)"),
        ("https://api.pulumi.com", "stack qa's state home (Pulumi.qa.yaml)"),
        ("gs://acme-tpu-pulumi-state", "the project's shared state bucket of earlier versions"),
        ("gs://acme-current", login),
        ("https://pulumi.acme.example", login),
        ("file://~", login),
        ("gs://acme-old-state", login),
        ("s3://acme-state?region=us-east-1", login),
        ("azblob://acme-state", login),
        ("https://refreshing.example", login),
        (f"file://{root.resolve() / '.pulumi-state'}", ".pulumi-state/ in this checkout, an earlier default"),
    ]
    assert lookup.warnings == lookup.failures == []
    folder = tmp_path / "credentials-path"
    folder.mkdir()
    (folder / "credentials.json").write_text(json.dumps({"accessTokens": {"gs://from-credentials-path": ""}}))
    env = {"PULUMI_CREDENTIALS_PATH": str(folder), "PULUMI_HOME": str(home), "PULUMI_ACCESS_TOKEN": "pul-x"}
    assert state_lookup.logins(env, no_run) == (
        [
            ("https://api.pulumi.com", "Pulumi Cloud, PULUMI_ACCESS_TOKEN being set"),
            ("gs://from-credentials-path", f"where the Pulumi CLI is logged in ({folder / 'credentials.json'})"),
        ],
        [],
        [],
    ), "creds.go getCredsFilePath: PULUMI_CREDENTIALS_PATH first"


ENVELOPE = {"$pulumiSecureStore": 1, "backend": "keychain", "algo": "aes-256-gcm", "nonce": "bm9uY2U=", "data": "eA=="}
"""A credentials file the CLI encrypted (securestore envelope.go ``Seal``: the marker, the backend, the ciphertext)."""


@pytest.mark.parametrize("text", [json.dumps(ENVELOPE, indent=4), "{not json"], ids=["encrypted", "unparsed"])
def test_a_credentials_file_that_cannot_be_read_names_the_current_login_from_whoami(tmp_path, text):
    (tmp_path / "credentials.json").write_text(text)
    env = {"PULUMI_HOME": str(tmp_path), "PULUMI_BACKEND_URL": "gs://the-stacks-home"}

    def whoami(argv, env, **kwargs):
        assert argv == ["pulumi", "whoami", "--json"] and "PULUMI_BACKEND_URL" not in env, "the CLI's own login"
        assert kwargs["timeout"] == state_lookup.CLOUD_TIMEOUT
        return subprocess.CompletedProcess(argv, 0, json.dumps({"user": "ops", "url": "gs://acme-old-state"}), "")

    urls, warnings, failures = state_lookup.logins(env, whoami)
    assert urls == [("gs://acme-old-state", "the Pulumi CLI's current login (pulumi whoami)")] and failures == []
    (warning,) = warnings
    said = "is encrypted by the Pulumi CLI" if text.startswith("{\n") else "does not parse"
    assert warning.startswith(f"warning: {tmp_path / 'credentials.json'} {said}: only the CLI's current login, ")
    assert "look in any other backend you logged in to yourself" in warning

    def failing(argv, env, **kwargs):
        return subprocess.CompletedProcess(argv, 255, "", "error: could not read the credential store\n")

    assert state_lookup.logins(env, failing) == (
        [],
        [],
        [
            f"{tmp_path / 'credentials.json'} {said}, and `pulumi whoami` did not name the current login: error: could "
            "not read the credential store"
        ],
    )


def test_an_s3_or_azblob_login_cannot_be_looked_in_and_says_so_in_one_line(tmp_path):
    """No client for them here: never passed over in silence."""
    root = repo(tmp_path, dev=cli_file(project="my-tpu-dev-project", config={"tpu-rl:stateBackend": "file:///srv/dev"}))
    (tmp_path / "credentials.json").write_text(json.dumps({"current": "s3://acme-state", "accessTokens": {}}))
    home = decide("dev", root)
    lookup = state_lookup.known(home, root, {"PULUMI_HOME": str(tmp_path)}, no_run)
    found, failures = state_lookup.found_elsewhere(home, lookup, None, no_run)
    assert found is None
    assert failures == [
        f"s3://acme-state (where the Pulumi CLI is logged in ({tmp_path / 'credentials.json'})): this project installs "
        "no S3 client, so it cannot tell whether the backend holds the stack: look yourself "
        "(PULUMI_BACKEND_URL=s3://acme-state pulumi stack ls), then log out of it if it holds none (pulumi logout "
        "s3://acme-state)"
    ]


def test_a_cloud_homes_stack_in_another_organization_of_that_cloud_is_found(tmp_path, monkeypatch):
    """A teammate whose default organization is another made ``prod`` there: found before a second is made in the
    recorded one (`pulumi stack select prod` failed there)."""
    monkeypatch.setenv("PULUMI_HOME", str(tmp_path / "no-login"))
    cloud = {"tpu-rl:stateBackend": "https://api.pulumi.com", "tpu-rl:stateOrganization": "acme"}
    root = repo(tmp_path, prod=cli_file(project="my-tpu-prod-project", config=cloud))  # no shared bucket to ask
    home = decide("prod", root)

    def listing(names):
        def run(argv, env, **kwargs):
            assert (
                env["PULUMI_BACKEND_URL"] == "https://api.pulumi.com" and env["PULUMI_DEFAULT_ORGANIZATION"] == "acme"
            )
            return subprocess.CompletedProcess(argv, 0, json.dumps([{"name": n} for n in names]), "")

        return run

    lookup = state_lookup.known(home, root, {}, no_run)
    assert state_lookup.found_elsewhere(home, lookup, None, listing(["dev", "other/dev"])) == (None, [])
    found, _ = state_lookup.found_elsewhere(home, lookup, None, listing(["dev", "ops-team/prod"]))
    assert found is not None and found.why == "Pulumi Cloud, in the organization ops-team and not acme"
    assert found.fix.startswith("if that is the stack, record its organization instead (tpu-rl:stateOrganization: ")


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
        "creates everything again beside the first: move it to a bucket and key of its own (make state-bucket "
        "STACK=prod, then make state-move STACK=prod) (docs/state.md#where-the-state-lives)"
    )
    assert (root / "Pulumi.prod.yaml").read_text() == before
    assert state.main(["new", "--stack", "dev", "--root", str(root)]) == 1, "dev's own bucket is not made yet"
    assert capsys.readouterr().err == (
        "error: stack dev's state bucket gs://acme-tpu-pulumi-state-dev does not exist: create it, with its key, once: "
        "make state-bucket STACK=dev\n"
    )
    gcs.create_bucket("acme-tpu-pulumi-state-dev")
    assert state.main(["new", "--stack", "dev", "--root", str(root)]) == 0


def test_new_cannot_tell_whether_a_bucket_it_may_neither_get_nor_list_exists(tmp_path, capsys, monkeypatch):
    """Cloud Storage answers 403 for a bucket whether or not it exists: two 403s are one line, exit 1, and `pulumi
    stack init` does not run."""
    from tests.fake_state_apis import clients, fake_state_apis

    monkeypatch.setenv("PULUMI_HOME", str(tmp_path / "no-login"))
    root = repo(tmp_path, dev=cli_file())
    with fake_state_apis() as fake:
        fake.services["storage.googleapis.com"] = "ENABLED"
        fake.forbidden.add("acme-tpu-pulumi-state-dev")
        monkeypatch.setattr(state, "_storage", lambda: clients(fake)[0])
        assert state.main(["new", "--stack", "dev", "--root", str(root)]) == 1
        assert fake.requests[-2:] == [
            "GET /storage/v1/b/acme-tpu-pulumi-state-dev",
            "GET /storage/v1/b/acme-tpu-pulumi-state-dev/o",
        ]
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: cannot tell whether stack dev's state bucket gs://acme-tpu-pulumi-state-dev exists:")


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
        "error: cannot tell whether stack dev already exists elsewhere: https://api.pulumi.com (Pulumi Cloud, "
        "PULUMI_ACCESS_TOKEN being set): `pulumi stack ls` at https://api.pulumi.com did not answer:"
    )
    assert line.endswith("(or log out of a backend the stack cannot be in: pulumi logout <url>)")


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
