"""Each stack's state home through `make`, end to end: a checkout of its own (tests/fake_pulumi.py ``checkout``), the
example stack files in one Google project, tests/fake_pulumi.py on PATH keeping each stack where the diy backend
keeps it (fake-gcs-server here), and the tools reading the same objects. Every pulumi command is given its stack's
``PULUMI_BACKEND_URL`` and no `pulumi login` runs; dev and prod get different buckets and keys; a stack another
backend holds is refused before `stack init`; a passphrase is refused for prod; a stack in the project's shared
bucket is moved into its own. The permission check before each command has its own tests (tests/test_state_bucket.py):
these stacks turn it off with ``tpu-rl:workflow.capacityCheck: false``, which fake-gcs-server could not answer."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fake_pulumi import CLEAN, calls, checkout, install
from tests.scenario import EXPORT

MAKE = shutil.which("make")
pytestmark = [pytest.mark.skipif(MAKE is None, reason="make is not installed"), pytest.mark.slow]
PROJECT = "acme-tpu"
SHARED_KEY = f"gcpkms://projects/{PROJECT}/locations/global/keyRings/pulumi-state/cryptoKeys/pulumi-secrets"


def own_key(stack: str) -> str:
    """The stack's own key, in a ring of its own."""
    return f"gcpkms://projects/{PROJECT}/locations/global/keyRings/pulumi-state-{stack}/cryptoKeys/state"


@pytest.fixture
def stacks(tmp_path):
    """The checkout, its dev and prod stacks in one project and the fake CLI on PATH."""
    root = checkout(tmp_path)
    for stack in ("dev", "prod"):
        path = root / f"Pulumi.{stack}.yaml"
        text = path.read_text().replace(f"my-tpu-{stack}-project", PROJECT)
        path.write_text(text.replace("  tpu-rl:workflow:\n", "  tpu-rl:workflow:\n    capacityCheck: false\n"))
    install(tmp_path / "bin")
    return root


@pytest.fixture
def repo(stacks, gcs):
    """``stacks`` with fake-gcs-server (``gcs``), where the fake CLI keeps the stacks of gs:// homes."""
    return stacks


def make(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    assert MAKE is not None
    environment = {k: v for k, v in os.environ.items() if k not in CLEAN or k == "STORAGE_EMULATOR_HOST"}
    tmp = root.parent
    environment.update(
        PATH=f"{tmp / 'bin'}:{os.environ['PATH']}",
        PULUMI_LOG=str(tmp / "pulumi.log"),
        PULUMI_HOME=str(tmp / "pulumi-home"),
        FAKE_CLOUD=str(tmp / "cloud"),
        **env,
    )
    command = [MAKE, "--no-print-directory", "-o", ".venv/.installed", "-o", "policy/venv/.installed", *args]
    return subprocess.run(command, cwd=root, env=environment, capture_output=True, text=True, timeout=120, check=False)


def made(root: Path) -> list[tuple[str, str | None]]:
    """Each pulumi call of the test so far: its first words and the backend it was given."""
    return [(" ".join(c["argv"][:3]), c["backend"]) for c in calls(root.parent / "pulumi.log")]


def errors(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("error:")]


@pytest.mark.slow
def test_dev_and_prod_in_one_project_live_apart_and_every_command_is_given_its_home(repo, gcs):
    for stack in ("dev", "prod"):
        gcs.create_bucket(f"{PROJECT}-pulumi-state-{stack}")  # as `make state-bucket` makes them
    for stack in ("dev", "prod"):
        done = make(repo, "stack", f"STACK={stack}")
        assert done.returncode == 0, done.stderr
        assert (
            f"recorded tpu-rl:stateBackend: gs://{PROJECT}-pulumi-state-{stack} in Pulumi.{stack}.yaml" in done.stdout
        )
    done = make(repo, "up", "STACK=prod", "YES=1")
    assert done.returncode == 0, done.stderr
    dev, prod = f"gs://{PROJECT}-pulumi-state-dev", f"gs://{PROJECT}-pulumi-state-prod"
    assert made(repo) == [
        ("stack select dev", dev),
        ("stack init dev", dev),
        ("stack select prod", prod),
        ("stack init prod", prod),
        ("stack select prod", prod),
        ("stack export --stack", prod),
        ("up --stack prod", prod),
    ], "no login, and each command in its own stack's home"
    inits = [c["argv"] for c in calls(repo.parent / "pulumi.log") if c["argv"][:2] == ["stack", "init"]]
    assert inits == [
        ["stack", "init", "dev", f"--secrets-provider={own_key('dev')}"],
        ["stack", "init", "prod", f"--secrets-provider={own_key('prod')}"],
    ]
    for stack in ("dev", "prod"):
        blobs = [b.name for b in gcs.list_blobs(f"{PROJECT}-pulumi-state-{stack}")]
        assert blobs == [f".pulumi/stacks/tpu-rl/{stack}.json"]
        text = (repo / f"Pulumi.{stack}.yaml").read_text()
        assert text.startswith(f"secretsprovider: {own_key(stack)}\n")
        assert f"\n  tpu-rl:stateBackend: gs://{PROJECT}-pulumi-state-{stack}\n" in text, "after the config's last key"


def test_a_stack_another_stacks_home_holds_is_refused_before_stack_init(tmp_path):
    """Folders for homes (no Google library is loaded): prod's home holds a stack dev, dev's own home is empty."""
    root = checkout(tmp_path)
    install(tmp_path / "bin")
    for stack in ("dev", "prod"):
        path = root / f"Pulumi.{stack}.yaml"
        path.write_text(path.read_text() + f"  tpu-rl:stateBackend: file://{tmp_path / stack}\n")
    (tmp_path / "prod" / ".pulumi/stacks/tpu-rl").mkdir(parents=True)
    (tmp_path / "prod" / ".pulumi/stacks/tpu-rl/dev.json").write_text(EXPORT)
    before = (root / "Pulumi.dev.yaml").read_text()
    done = make(root, "stack", "STACK=dev")
    assert done.returncode == 2
    (line,) = errors(done)
    assert line.startswith(
        f"error: stack dev already exists in file://{tmp_path / 'prod'}, stack prod's state home (Pulumi.prod.yaml); "
        f"creating it again in file://{tmp_path / 'dev'} would make a second, empty stack"
    )
    assert line.endswith(
        f"make state-move STACK=dev FROM=file://{tmp_path / 'prod'} (docs/state.md#where-the-state-lives)"
    )
    assert made(root) == [("stack select dev", f"file://{tmp_path / 'dev'}")], "no stack init"
    assert (root / "Pulumi.dev.yaml").read_text() == before, "nothing written"


@pytest.mark.slow
def test_a_stack_in_the_projects_shared_bucket_is_never_created_again_empty(repo, gcs):
    gcs.create_bucket(f"{PROJECT}-pulumi-state-prod")
    gcs.create_bucket(f"{PROJECT}-pulumi-state")
    gcs.bucket(f"{PROJECT}-pulumi-state").blob(".pulumi/stacks/tpu-rl/prod.json").upload_from_string(EXPORT)
    before = (repo / "Pulumi.prod.yaml").read_text()
    done = make(repo, "up", "STACK=prod")
    assert done.returncode == 2
    (line,) = errors(done)
    assert line.startswith(f"error: stack prod already exists in gs://{PROJECT}-pulumi-state, the project's shared")
    assert "(make state-bucket STACK=prod, then make state-move STACK=prod)" in line
    assert made(repo) == [("stack select prod", f"gs://{PROJECT}-pulumi-state-prod")], "no stack init"
    assert (repo / "Pulumi.prod.yaml").read_text() == before, "nothing written"


def test_a_passphrase_and_a_disagreeing_backend_url_are_refused_before_any_pulumi_command(stacks, tmp_path):
    repo = stacks  # refused before any state is read: no bucket, no emulator
    done = make(repo, "up", "STACK=prod", f"STATE_BACKEND=file://{tmp_path / 'state'}")
    assert done.returncode == 2
    (line,) = errors(done)
    assert line.startswith("error: stack prod is protected (tpu-rl:protect: true) and its secrets would be encrypted")
    done = make(repo, "preview", "STACK=dev", PULUMI_BACKEND_URL="https://api.pulumi.com")
    assert done.returncode == 2
    (line,) = errors(done)
    assert line.startswith("error: PULUMI_BACKEND_URL is https://api.pulumi.com, but stack dev's state lives in gs://")
    assert made(repo) == []


@pytest.mark.slow
def test_a_stack_in_the_shared_bucket_and_key_moves_into_its_own(repo, gcs):
    """Earlier versions gave dev and prod one bucket and one key: prod is refused until it is moved."""
    gcs.create_bucket(f"{PROJECT}-pulumi-state")
    gcs.create_bucket(f"{PROJECT}-pulumi-state-prod")
    gcs.bucket(f"{PROJECT}-pulumi-state").blob(".pulumi/stacks/tpu-rl/prod.json").upload_from_string(EXPORT)
    for stack in ("dev", "prod"):
        path = repo / f"Pulumi.{stack}.yaml"
        path.write_text(f"secretsprovider: {SHARED_KEY}\nencryptedkey: CiQAiRhd\n" + path.read_text())
    done = make(repo, "up", "STACK=prod")
    assert done.returncode == 2 and "make state-move STACK=prod" in errors(done)[0]
    done = make(repo, "state-move", "STACK=prod")
    (line,) = errors(done)  # no Cloud KMS here: the move is done, the old key's grants are not looked at
    assert done.returncode != 0 and line.startswith(  # the tool's 1, make's own 2
        f"error: stack prod moved, but its old key projects/{PROJECT}/locations/global/keyRings/pulumi-state/"
        "cryptoKeys/tpu-rl-prod could not be read to take the state's grants off it ("
    )
    assert line.endswith("run make state-move STACK=prod again (docs/state.md#moving-a-stack-to-a-home-of-its-own)")
    shared, own = f"gs://{PROJECT}-pulumi-state", f"gs://{PROJECT}-pulumi-state-prod"
    assert made(repo) == [
        ("stack export --stack", shared),
        ("stack init prod", own),
        ("stack import --stack", own),
        ("stack export --stack", own),
        ("stack change-secrets-provider --stack", own),
        ("stack rm prod", shared),
    ]
    assert [b.name for b in gcs.list_blobs(f"{PROJECT}-pulumi-state")] == []
    text = (repo / "Pulumi.prod.yaml").read_text()
    assert text.startswith(f"secretsprovider: {own_key('prod')}\n") and f"\n  tpu-rl:stateBackend: {own}\n" in text
    done = make(repo, "up", "STACK=prod")
    assert done.returncode == 0, done.stderr
    assert made(repo)[-1] == ("up --stack prod", own)


CLOUD_PULUMI = """#!/bin/sh
echo "$* | ${PULUMI_BACKEND_URL-unset} | ${PULUMI_DEFAULT_ORGANIZATION-unset}" >> "$PULUMI_LOG"
case "$1 $2" in
  "stack select") [ -f "$CLOUD_STACKS/$PULUMI_DEFAULT_ORGANIZATION-$3" ] || exit 255 ;;
  "stack init") touch "$CLOUD_STACKS/$PULUMI_DEFAULT_ORGANIZATION-$3" ;;
  "stack ls") echo "${CLOUD_LISTED:-[]}" ;;
  "stack export") echo '{"version": 3, "deployment": null}' ;;
esac
exit 0
"""
"""A `pulumi` that keeps Pulumi Cloud stacks by organization: the one ``PULUMI_DEFAULT_ORGANIZATION`` names (a name
without one resolves there: pkg/backend/httpstate/backend.go ``ParseStackReference``); ``stack ls`` prints
``$CLOUD_LISTED``."""


@pytest.mark.slow  # some 1.2 s of make and a fake CLI
def test_a_cloud_home_records_its_organization_and_every_command_is_given_it(tmp_path):
    """`make stack` with STATE_ORG: the stack is created in that organization and both keys recorded; every later
    command gets it as PULUMI_DEFAULT_ORGANIZATION; a Cloud home without one is refused before any pulumi runs, and a
    prod of another organization (a teammate's default) is found before a second is made."""
    root = checkout(tmp_path)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "pulumi").write_text(CLOUD_PULUMI)
    (tmp_path / "bin" / "pulumi").chmod(0o755)
    (tmp_path / "cloud").mkdir()
    cloud = {"CLOUD_STACKS": str(tmp_path / "cloud")}
    done = make(root, "stack", "STACK=prod", "STATE_BACKEND=https://api.pulumi.com", **cloud)
    assert done.returncode != 0 and errors(done)[0].startswith(
        "error: stack prod's state home https://api.pulumi.com names no organization"
    )
    assert not (tmp_path / "pulumi.log").exists(), "refused before any pulumi command"
    listed = '[{"name": "ops-team/prod"}, {"name": "ops-team/dev"}]'
    args = ("stack", "STACK=prod", "STATE_BACKEND=https://api.pulumi.com", "STATE_ORG=acme")
    done = make(root, *args, CLOUD_LISTED=listed, **cloud)
    (line,) = errors(done)
    assert line.startswith(
        "error: stack prod already exists in https://api.pulumi.com, Pulumi Cloud, in the organization ops-team and "
        "not acme;"
    )
    assert (
        not list((tmp_path / "cloud").iterdir())
        and "\n  tpu-rl:stateBackend" not in (root / "Pulumi.prod.yaml").read_text()
    )
    (tmp_path / "pulumi.log").unlink()
    done = make(root, *args, CLOUD_LISTED='[{"name": "ops-team/dev"}]', **cloud)
    assert done.returncode == 0, done.stderr
    recorded = "\n  tpu-rl:stateBackend: https://api.pulumi.com\n  tpu-rl:stateOrganization: acme\n"
    assert recorded in (root / "Pulumi.prod.yaml").read_text(), "after the config block's last key"
    done = make(root, "preview", "STACK=prod", **cloud)
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "pulumi.log").read_text().splitlines()
    assert [line.split(" | ", 1)[1] for line in lines] == ["https://api.pulumi.com | acme"] * len(lines)
    assert [line.split(" | ")[0].split()[:2] for line in lines] == [
        ["stack", "select"],
        ["stack", "ls"],  # prod in another organization? (ops-team's dev is another stack)
        ["stack", "init"],
        ["stack", "select"],
        ["stack", "export"],
        ["preview", "--stack"],
    ]
    assert (tmp_path / "cloud" / "acme-prod").exists()
    environment = {k: v for k, v in os.environ.items() if k not in CLEAN}
    environment.update(PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}", PULUMI_LOG=str(tmp_path / "pulumi.log"))
    command = [
        sys.executable,
        "-m",
        "tools.tpu_rl",
        "pulumi",
        "--stack",
        "prod",
        "--",
        "config",
        "set",
        "tpu-rl:x",
        "1",
    ]
    done = subprocess.run(command, cwd=root, env=environment, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    last = (tmp_path / "pulumi.log").read_text().splitlines()[-1]
    assert last == "config set tpu-rl:x 1 --stack prod | https://api.pulumi.com | acme", "tpu-rl pulumi too"


@pytest.mark.slow
def test_a_stack_file_recording_the_shared_bucket_is_refused_and_moved_to_a_bucket_of_its_own(repo, gcs):
    """A stack file that records the project's shared bucket of earlier versions as its home: refused for every
    command; `make state-move` moves the stack to its own bucket and rewrites that one line of the file."""
    gcs.create_bucket(f"{PROJECT}-pulumi-state")
    gcs.create_bucket(f"{PROJECT}-pulumi-state-prod")
    gcs.bucket(f"{PROJECT}-pulumi-state").blob(".pulumi/stacks/tpu-rl/prod.json").upload_from_string(EXPORT)
    path = repo / "Pulumi.prod.yaml"
    path.write_text(
        f"secretsprovider: {own_key('prod')}\n{path.read_text()}"
        f"  tpu-rl:stateBackend: gs://{PROJECT}-pulumi-state  # old\n"
    )
    done = make(repo, "up", "STACK=prod")
    (line,) = errors(done)
    assert line.startswith(f"error: stack prod's state home gs://{PROJECT}-pulumi-state (recorded in Pulumi.prod.yaml)")
    assert made(repo) == []
    make(repo, "state-move", "STACK=prod")  # the old key's grants: no Cloud KMS here (its own test: test_state_move)
    shared, own = f"gs://{PROJECT}-pulumi-state", f"gs://{PROJECT}-pulumi-state-prod"
    assert made(repo)[:4] == [
        ("stack export --stack", shared),
        ("stack init prod", own),
        ("stack import --stack", own),
        ("stack export --stack", own),
    ]
    assert path.read_text().endswith(f"  tpu-rl:stateBackend: {own}  # old\n"), "that line rewritten, its comment kept"
    done = make(repo, "up", "STACK=prod")
    assert done.returncode == 0, done.stderr
    assert made(repo)[-1] == ("up --stack prod", own)
