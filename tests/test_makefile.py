"""The Makefile's state handling, locks, the state's Helm releases before `pulumi up`, `make help` and `make logs`, as
`make` runs them against a `pulumi` on PATH that records its argv and answers `whoami --json`, `stack select` and
`stack export` as told (no Pulumi CLI, no cloud; the loopback API server for a cluster)."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import stat
import subprocess
from pathlib import Path

import pytest

from infra.k8s.manifests import helm_release_problem
from tests import fake_kube
from tests.scenario import EXPORT, auth_plugin, credential, helm_secret, unprotected, with_cluster
from tools import state
from tools.stack_files import ROOT

MAKE = shutil.which("make")
pytestmark = pytest.mark.skipif(MAKE is None, reason="make is not installed")

FAKE_PULUMI = """#!/bin/sh
echo "$*" >> "$PULUMI_LOG"
case "$1" in
  whoami) [ -n "$WHOAMI" ] && { echo "$WHOAMI"; exit 0; }; echo "error: not logged in" >&2; exit 255 ;;
  stack) [ "$2" = select ] && [ -z "$SELECTS" ] && exit 255
         if [ "$2" = export ]; then
           [ -n "$EXPORT" ] && { printf '%s\\n' "$EXPORT"; exit 0; }
           echo "error: $EXPORT_ERROR" >&2; exit 255
         fi
         exit 0 ;;
  config) echo "error: configuration key '$3' not found for stack" >&2; exit 255 ;;
  up|preview) seen=unset; [ -n "${TPU_RL_RELEASES_IN_STATE+set}" ] && seen="set:$TPU_RL_RELEASES_IN_STATE"
      echo "$seen" > "$PULUMI_LOG.releases"
      pins=unset; [ -n "${TPU_RL_IMAGES_IN_STATE+set}" ] && pins="set:$TPU_RL_IMAGES_IN_STATE"
      echo "$pins" > "$PULUMI_LOG.pins" ;;
esac
exit 0
"""
UP = "up --stack dev --policy-pack policy --policy-pack-config policy/config/dev.json"
"""`make up`'s `pulumi up`: with the policy pack and the stack's policy config."""
NEW_STACK = '{\n    "version": 3,\n    "deployment": null\n}'
"""What `pulumi stack export` prints for a stack no update has written yet (diy CreateStack: an empty deployment)."""
# The environment a user may have; the tests set what they need.
CLEAN: tuple[str, ...] = ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "PULUMI_BACKEND_URL", "STATE_BACKEND", "LOCAL_STATE")
CLEAN += ("YES", "PULUMI_ACCESS_TOKEN", "SECRETS_PROVIDER", "BUCKET", "STEP", "TPU_RL_RELEASES_IN_STATE", "NO_POLICY")
CLEAN += ("TPU_RL_IMAGES_IN_STATE",)


def make(tmp_path: Path, *args: str, whoami: str = "", selects: bool = True, export: str = NEW_STACK, **env: str):
    assert MAKE is not None
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    pulumi = folder / "pulumi"
    pulumi.write_text(FAKE_PULUMI)
    pulumi.chmod(pulumi.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "pulumi.log"
    log.write_text("")
    environment = {k: v for k, v in os.environ.items() if k not in CLEAN}
    environment.update(
        PATH=f"{folder}:{os.environ['PATH']}",
        PULUMI_LOG=str(log),
        WHOAMI=whoami,
        SELECTS="1" if selects else "",
        EXPORT=export,
        EXPORT_ERROR="no stack named 'dev' found",
        PULUMI_HOME=str(tmp_path / "pulumi-home"),  # no credentials file: not logged in unless `whoami` says so
        **env,
    )
    done = subprocess.run(
        [MAKE, "--no-print-directory", "-o", ".venv/.installed", "-o", "policy/venv/.installed", *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done, log.read_text().splitlines()


def whoami(url: str) -> str:
    return json.dumps({"user": "ops", "url": url})


def write_lock(backend: Path, stack: str, *, pid: int, hostname: str, name: str = "0b1d-lock") -> Path:
    """A lock file as the Pulumi CLI writes it (pkg/backend/diy/lock.go: ``Lock`` writes ``lockContent`` as JSON to
    ``.pulumi/locks/organization/<project>/<stack>/<lockID>.json``)."""
    folder = backend / ".pulumi" / "locks" / "organization" / "tpu-rl" / stack
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    content = {"pid": pid, "username": "ops", "hostname": hostname, "timestamp": "2026-12-01T08:00:00Z"}
    path.write_text(json.dumps(content))
    return path


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


# ---------------------------------------------------------------------------------------------
# Where the state lives


def test_a_file_backend_inside_the_checkout_is_refused_in_one_line_naming_the_override(tmp_path):
    inside = f"file://{ROOT / '.pulumi-state'}"
    for variable in ("PULUMI_BACKEND_URL", "STATE_BACKEND"):
        env: dict[str, str] = {variable: inside}
        done, calls = make(tmp_path, "up", "STACK=dev", whoami=whoami(inside), selects=True, **env)
        assert done.returncode != 0
        (line,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert "inside this checkout" in line and "LOCAL_STATE=1" in line and "make state-bucket" in line, line
        assert not [c for c in calls if c.startswith(("login", "stack", "up"))], calls
    done, calls = make(tmp_path, "up", "STACK=dev", "LOCAL_STATE=1", STATE_BACKEND=inside, whoami=whoami(inside))
    assert done.returncode == 0, done.stderr
    assert f"login {inside}" in calls and calls[-2:] == ["stack export --stack dev", UP]


def test_the_default_is_the_projects_bucket_and_the_example_placeholder_is_refused(tmp_path):
    """Not logged in, nothing set: the bucket is named after gcp:project, so the example's placeholder stops here."""
    done, calls = make(tmp_path, "up", "STACK=dev")
    assert done.returncode != 0
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert line == (
        "error: Pulumi.dev.yaml: gcp:project is the example's placeholder my-tpu-dev-project; set your project id in "
        "the file first"
    )
    assert not [c for c in calls if c.startswith(("login", "up"))]


def test_a_fresh_clone_finds_the_stack_in_the_bucket_and_a_new_stack_gets_the_kms_key(tmp_path):
    root = tmp_path / "clone"
    root.mkdir()
    (root / "Pulumi.team.yaml").write_text("config:\n  gcp:project: acme-tpu\n  gcp:region: europe-west4\n")
    choice = state.choose("team", env_url="", explicit="", current="", local_ok=False, root=root)
    assert choice == state.Choice(
        login="gs://acme-tpu-pulumi-state",
        backend="gs://acme-tpu-pulumi-state",
        secrets_provider="gcpkms://projects/acme-tpu/locations/global/keyRings/pulumi-state/cryptoKeys/pulumi-secrets",
    )
    # Another machine, or CI, with a file login of its own: the same bucket, since only the stack file decides.
    other = state.choose("team", env_url="", explicit="", current="file://~", local_ok=False, root=root)
    assert other == choice
    # Pulumi Cloud and the CLI's own override are kept as they are.
    cloud = state.choose("team", env_url="", explicit="", current="https://api.pulumi.com", local_ok=False, root=root)
    assert cloud == state.Choice(login="", backend="https://api.pulumi.com", secrets_provider="")
    env = state.choose("team", env_url="gs://elsewhere", explicit="", current="", local_ok=False, root=root)
    assert env.login == "" and env.backend == "gs://elsewhere"


def test_state_left_in_the_checkout_by_the_earlier_default_is_never_replaced_by_an_empty_stack(tmp_path):
    """A stack still in .pulumi-state/ would otherwise be created again, empty, in the bucket, and `up` would
    create a second cluster while the first keeps billing."""
    root = tmp_path / "old-clone"
    (root / ".pulumi-state" / ".pulumi" / "stacks" / "tpu-rl").mkdir(parents=True)
    (root / ".pulumi-state" / ".pulumi" / "stacks" / "tpu-rl" / "prod.json").write_text("{}")
    (root / "Pulumi.prod.yaml").write_text("config:\n  gcp:project: acme-tpu\n")
    with pytest.raises(state.StateError, match=r"moving-a-stack-out-of-the-checkout.*LOCAL_STATE=1"):
        state.choose("prod", env_url="", explicit="", current="", local_ok=False, root=root)
    kept = state.choose("prod", env_url="", explicit="", current="", local_ok=True, root=root)
    assert kept.backend == f"file://{root.resolve() / '.pulumi-state'}"


def test_make_up_logs_in_selects_and_runs_up_with_yes_only_when_asked(tmp_path):
    url = f"file://{tmp_path / 'state'}"  # outside the checkout: allowed when asked for
    done, calls = make(tmp_path, "up", "STACK=dev", STATE_BACKEND=url, whoami=whoami(url))
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", "no warning on the way"
    assert calls == [
        "whoami --json",
        f"login {url}",
        "stack select dev",
        "whoami --json",
        "stack export --stack dev",
        UP,
    ]
    done, calls = make(tmp_path, "up", "STACK=dev", "YES=1", STATE_BACKEND=url, whoami=whoami(url))
    assert (
        calls[-1]
        == "up --stack dev --yes --non-interactive --policy-pack policy --policy-pack-config policy/config/dev.json"
    )


# ---------------------------------------------------------------------------------------------
# The state's Helm releases, before `pulumi up` (tools/state.py `releases`)


@pytest.mark.slow
def test_make_up_hands_pulumi_up_the_releases_the_state_holds(tmp_path):
    """``TPU_RL_RELEASES_IN_STATE`` as `pulumi up` sees it: the export's releases (a pending create counts), empty
    for a new stack, unset (with one warning, and `up` still runs) when the state cannot be read."""
    url = f"file://{tmp_path / 'state'}"
    seen = tmp_path / "pulumi.log.releases"
    done, calls = make(tmp_path, "up", "STACK=dev", STATE_BACKEND=url, whoami=whoami(url), export=EXPORT)
    assert done.returncode == 0, done.stderr
    assert calls[-2:] == ["stack export --stack dev", UP]
    assert seen.read_text() == "set:jobset,kueue\n"
    done, _ = make(tmp_path, "up", "STACK=dev", STATE_BACKEND=url, whoami=whoami(url))
    assert done.returncode == 0 and done.stderr == "" and seen.read_text() == "set:\n", "a new stack: none"
    done, calls = make(tmp_path, "up", "STACK=dev", STATE_BACKEND=url, whoami=whoami(url), export="")
    assert done.returncode == 0 and calls[-1] == UP and seen.read_text() == "unset\n"
    assert done.stderr == (
        "warning: `pulumi stack export --stack dev` failed: error: no stack named 'dev' found; `pulumi up` goes on "
        "without comparing the cluster's Helm releases with the state\n"
    )
    done, _ = make(
        tmp_path, "up", "STACK=dev", STATE_BACKEND=url, whoami=whoami(url), TPU_RL_RELEASES_IN_STATE="stale", export=""
    )
    assert seen.read_text() == "unset\n", "a value left in the environment is not taken for the state's"


@pytest.mark.slow
def test_make_up_stops_before_pulumi_up_at_a_release_the_state_lost_while_the_cluster_keeps_it(
    tmp_path, cluster, monkeypatch
):
    """A destroy whose cluster delete failed: the state holds the cluster without the releases, Helm's storage in it
    holds JobSet's. One line naming the command, and the CLI is never asked to update."""
    monkeypatch.setitem(fake_kube.CORE, "secrets", "Secret")
    body = f"test \"$1\" = --use_application_default_credentials || exit 9\necho '{credential(cluster.token)}'\n"
    auth_plugin(tmp_path, monkeypatch, body)
    cluster.core[("secrets", "jobset-system")] = [helm_secret("jobset", "jobset-system", 1, "deployed")]
    url = f"file://{tmp_path / 'state'}"
    export = unprotected(with_cluster(EXPORT, cluster.endpoint, cluster.ca_data))
    done, calls = make(tmp_path, "up", "STACK=dev", STATE_BACKEND=url, whoami=whoami(url), export=export)
    assert done.returncode != 0
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert line == "error: " + str(
        helm_release_problem("jobset", "jobset-system", (1, "deployed"), in_state=frozenset(), stack="dev")
    )
    assert line.endswith(": make destroy STACK=dev")
    assert calls[-1] == "stack export --stack dev" and not (tmp_path / "pulumi.log.releases").exists()


def test_a_new_stack_is_created_with_the_secrets_provider_asked_for(tmp_path):
    done, calls = make(
        tmp_path,
        "stack",
        "STACK=dev",
        "SECRETS_PROVIDER=gcpkms://projects/p/locations/global/keyRings/r/cryptoKeys/k",
        STATE_BACKEND="gs://acme-state",
        whoami=whoami("gs://acme-state"),
        selects=False,
    )
    assert done.returncode == 0, done.stderr
    assert calls[-1] == "stack init dev --secrets-provider=gcpkms://projects/p/locations/global/keyRings/r/cryptoKeys/k"


# ---------------------------------------------------------------------------------------------
# Locks a killed `pulumi` leaves


def test_make_up_names_a_stale_lock_and_make_unlock_before_the_cli_meets_it(tmp_path):
    backend = tmp_path / "state"
    url = f"file://{backend}"
    path = write_lock(backend, "prod", pid=4242, hostname="laptop-of-ops")
    done, calls = make(tmp_path, "up", "STACK=prod", STATE_BACKEND=url, whoami=whoami(url))
    assert done.returncode != 0
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert line == (
        "error: stack prod is locked by ops@laptop-of-ops (pid 4242) since 2026-12-01T08:00:00Z "
        f"({url}/.pulumi/locks/organization/tpu-rl/prod/{path.name}): if that `pulumi` no longer runs (a closed "
        "laptop, a cancelled CI job), clear the lock with `make unlock STACK=prod` and run `make up` again; the "
        "running step is adopted, not restarted (docs/operations.md#a-locked-stack)"
    )
    assert not [c for c in calls if c.startswith("up")], "the CLI was never asked to update"
    for target in ("destroy", "refresh"):
        done, calls = make(tmp_path, target, "STACK=prod", STATE_BACKEND=url, whoami=whoami(url))
        assert done.returncode != 0 and "make unlock STACK=prod" in done.stderr
        assert not [c for c in calls if c.startswith(target)]


def test_make_unlock_refuses_while_the_locks_process_runs_here_and_otherwise_runs_pulumi_cancel(tmp_path):
    backend = tmp_path / "state"
    url = f"file://{backend}"
    live = write_lock(backend, "dev", pid=os.getpid(), hostname=socket.gethostname())
    done, calls = make(tmp_path, "unlock", "STACK=dev", STATE_BACKEND=url, whoami=whoami(url))
    assert done.returncode != 0
    assert "still running on this machine" in done.stderr and "cancel" not in " ".join(calls)
    live.unlink()
    write_lock(backend, "dev", pid=dead_pid(), hostname=socket.gethostname())
    done, calls = make(tmp_path, "unlock", "STACK=dev", STATE_BACKEND=url, whoami=whoami(url))
    assert done.returncode == 0, done.stderr
    assert "clearing the lock of ops@" in done.stdout
    assert calls[-1] == "cancel --stack dev --yes"


def test_a_lock_of_a_dead_process_on_this_machine_is_called_so():
    lock = state.Lock(url="u", pid=dead_pid(), username="ops", hostname="here", timestamp="t")
    (line,) = state.lock_lines("dev", [lock], "here", state._alive)
    assert "whose process is gone" in line and "make unlock STACK=dev" in line


def test_no_lock_no_line_and_a_lock_of_another_stack_is_not_ours(tmp_path):
    backend = tmp_path / "state"
    write_lock(backend, "prod", pid=1, hostname="x")
    assert state.read_locks(f"file://{backend}", "dev") == []
    assert state.read_locks("https://api.pulumi.com", "dev") == [], "Pulumi Cloud's own message names pulumi cancel"


def test_a_lock_file_that_is_not_pulumis_is_named_without_being_trusted(tmp_path):
    backend = tmp_path / "state"
    path = write_lock(backend, "dev", pid=1, hostname="x")
    path.write_bytes(b"\x1b[2Jnot json")
    (lock,) = state.read_locks(f"file://{backend}", "dev")
    assert (lock.pid, lock.username, lock.hostname) == (None, "?", "?")


def test_the_locks_in_a_gcs_backend_are_read_where_the_cli_writes_them(gcs):
    gcs.create_bucket("acme-pulumi-state")
    bucket = gcs.bucket("acme-pulumi-state")
    content = {"pid": 7, "username": "runner", "hostname": "fv-az123", "timestamp": "2026-12-01T08:00:00Z"}
    bucket.blob(".pulumi/locks/organization/tpu-rl/prod/9f.json").upload_from_string(json.dumps(content))
    bucket.blob(".pulumi/locks/organization/tpu-rl/prod-eu/1.json").upload_from_string(json.dumps(content))
    bucket.blob(".pulumi/stacks/tpu-rl/prod.json").upload_from_string("{}")
    (lock,) = state.read_locks("gs://acme-pulumi-state", "prod")
    assert lock == state.Lock(
        url="gs://acme-pulumi-state/.pulumi/locks/organization/tpu-rl/prod/9f.json",
        pid=7,
        username="runner",
        hostname="fv-az123",
        timestamp="2026-12-01T08:00:00Z",
    )
    assert state.read_locks("gs://acme-pulumi-state", "dev") == []
    with pytest.raises(state.StateError, match="make state-bucket"):
        state.read_locks("gs://no-such-state", "prod")


def test_the_lock_path_is_the_clis():
    """pkg/backend/diy/lock.go: ``stackLockDir`` = ``.pulumi/locks`` (workspace.BookkeepingDir, LockDir) + the
    fully qualified name with "/" kept (fsutil.QnamePath); backend.go ``FullyQualifiedName`` =
    ``organization/<project>/<stack>`` for a project-scoped stack."""
    assert state.lock_prefix("prod") == ".pulumi/locks/organization/tpu-rl/prod/"


# ---------------------------------------------------------------------------------------------
# The state bucket


class FakeKms:
    def __init__(self) -> None:
        self.made: list[str] = []

    def get_key_ring(self, name: str, timeout: float) -> None:
        from google.api_core import exceptions

        if name not in self.made:
            raise exceptions.NotFound(name)

    def get_crypto_key(self, name: str, timeout: float) -> None:
        self.get_key_ring(name, timeout)

    def create_key_ring(self, request: dict, timeout: float) -> None:
        self.made.append(f"{request['parent']}/keyRings/{request['key_ring_id']}")

    def create_crypto_key(self, request: dict, timeout: float) -> None:
        assert request["crypto_key"] == {"purpose": "ENCRYPT_DECRYPT"}, "no rotation period: each version bills"
        self.made.append(f"{request['parent']}/cryptoKeys/{request['crypto_key_id']}")


def test_make_state_bucket_creates_a_versioned_private_bucket_and_the_key_and_is_idempotent(gcs_folders):
    """On fake-gcs-server's memory backend (its filesystem backend refuses versioning)."""
    gcs = gcs_folders
    kms = FakeKms()
    lines = state.create("acme-tpu", "us-east5", "acme-tpu-pulumi-state", storage=gcs, kms=kms)
    assert lines[0].startswith("created gs://acme-tpu-pulumi-state in us-east5")
    assert kms.made == [
        "projects/acme-tpu/locations/global/keyRings/pulumi-state",
        "projects/acme-tpu/locations/global/keyRings/pulumi-state/cryptoKeys/pulumi-secrets",
    ]
    bucket = gcs.get_bucket("acme-tpu-pulumi-state")
    assert bucket.versioning_enabled is True  # the server keeps no iamConfiguration: the next test reads the request
    again = state.create("acme-tpu", "us-east5", "acme-tpu-pulumi-state", storage=gcs, kms=kms)
    assert again[0].startswith("gs://acme-tpu-pulumi-state exists") and len(kms.made) == 2


def test_the_bucket_settings_are_the_ones_asked_for():
    """What create() sends, read off the library's own bucket object (fake-gcs-server keeps only some of them)."""
    from google.cloud import storage

    bucket = storage.Client.create_anonymous_client().bucket("b")
    state._settings(bucket)
    resource = bucket._properties
    assert resource["versioning"] == {"enabled": True}
    assert resource["iamConfiguration"]["uniformBucketLevelAccess"]["enabled"] is True
    assert resource["iamConfiguration"]["publicAccessPrevention"] == "enforced"
    assert resource["lifecycle"]["rule"] == [
        {"action": {"type": "Delete"}, "condition": {"daysSinceNoncurrentTime": 90, "isLive": False}}
    ]


# ---------------------------------------------------------------------------------------------
# help, logs


def test_make_help_lists_every_target_a_user_runs(tmp_path):
    done, _ = make(tmp_path, "help")
    assert done.returncode == 0, done.stderr
    firsts = [line for line in done.stdout.splitlines() if not line.startswith(" ")]
    phony = re.search(r"^\.PHONY: (.*)$", (ROOT / "Makefile").read_text(), re.M)
    assert phony is not None
    internal = {"help", "venv", "dev-venv", "policy-venv"}
    listed = {line.split()[1] for line in done.stdout.splitlines() if line.startswith("make ")}
    assert listed == set(phony.group(1).split()) - internal
    assert firsts[:2] == [line for line in firsts if line.startswith(("make up ", "make test "))], (
        "the two set-up commands first"
    )


def test_make_logs_runs_the_logs_tool_and_names_a_missing_step(tmp_path):
    done = subprocess.run(
        [MAKE or "make", "--no-print-directory", "-n", "logs", "STACK=prod", "STEP=train"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if k not in CLEAN},
    )
    assert done.stdout.splitlines()[-1] == ".venv/bin/python -m tools.logs --stack prod --step train"
    done, _ = make(tmp_path, "logs", "STACK=prod")
    assert done.returncode != 0
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert line.startswith("error: name the step: make logs STACK=prod STEP=")


def test_no_target_passes_a_flag_that_bypasses_a_guard():
    text = (ROOT / "Makefile").read_text()
    recipes = [line for line in text.splitlines() if line.startswith("\t") and "pulumi " in line]
    for flag in ("--ignore-protect", "--target", "--exclude", "--skip-preview", "--refresh", "--run-program=true"):
        assert not [line for line in recipes if flag in line], flag
    for flag in ("--continue-on-error", "--remove", "--exclude-protected"):
        assert not [line for line in recipes if f"{flag} " in line or line.endswith(flag)], flag
    (destroy,) = [line for line in recipes if line.strip().startswith("pulumi destroy")]
    assert "--continue-on-error=false" in destroy, "the flag beats PULUMI_CONTINUE_ON_ERROR"


def test_a_cloud_login_is_kept_when_whoami_cannot_answer(tmp_path):
    """Pulumi Cloud unreachable: `whoami` fails, but the credentials file (or the token) still says Cloud, so the
    stack is never created again, empty, in the bucket."""
    assert state.current_url("", {"PULUMI_ACCESS_TOKEN": "pul-x"}) == "https://api.pulumi.com"
    (tmp_path / "credentials.json").write_text(json.dumps({"current": "https://api.pulumi.com", "accessTokens": {}}))
    assert state.current_url("", {"PULUMI_HOME": str(tmp_path)}) == "https://api.pulumi.com"
    (tmp_path / "credentials.json").write_text(json.dumps({"current": "file:///old"}))
    assert state.current_url("", {"PULUMI_HOME": str(tmp_path)}) == "", "a self-managed login is not kept"
    assert state.current_url(whoami("gs://b"), {}) == "gs://b"
    assert state.current_url("not json", {"PULUMI_HOME": str(tmp_path / "none")}) == ""


@pytest.mark.slow
def test_make_up_hands_pulumi_up_the_image_pins_the_state_holds_and_runs_the_pack(tmp_path):
    """``TPU_RL_IMAGES_IN_STATE`` as `pulumi up` sees it: the digests of the state's ``images`` output (none for a new
    stack, unset when the state cannot be read); the pack on unless ``NO_POLICY=1``."""
    url = f"file://{tmp_path / 'state'}"
    tag, digest = "us-docker.pkg.dev/p/r/image:1", "sha256:" + "c" * 64
    stack = {"urn": "urn:pulumi:dev::tpu-rl::pulumi:pulumi:Stack::tpu-rl-dev", "type": "pulumi:pulumi:Stack"}
    outputs = {
        "images": {"maxtext": {"configured": tag, "image": f"us-docker.pkg.dev/p/r/image@{digest}", "digest": digest}}
    }
    export = json.dumps({"version": 3, "deployment": {"resources": [{**stack, "outputs": outputs}]}})
    pins = tmp_path / "pulumi.log.pins"
    done, calls = make(tmp_path, "up", "STACK=dev", STATE_BACKEND=url, whoami=whoami(url), export=export)
    assert done.returncode == 0, done.stderr
    assert json.loads(pins.read_text().removeprefix("set:")) == {tag: digest} and calls[-1] == UP
    done, _ = make(tmp_path, "up", "STACK=dev", STATE_BACKEND=url, whoami=whoami(url))
    assert pins.read_text() == "set:{}\n", "a new stack: none"
    done, calls = make(tmp_path, "up", "STACK=dev", "NO_POLICY=1", STATE_BACKEND=url, whoami=whoami(url), export="")
    assert pins.read_text() == "unset\n" and calls[-1] == "up --stack dev"
    done, calls = make(tmp_path, "preview", "STACK=dev", STATE_BACKEND=url, whoami=whoami(url), export=export)
    assert done.returncode == 0, done.stderr
    assert calls[-1] == "preview --stack dev --diff", calls[-1]
    assert json.loads(pins.read_text().removeprefix("set:")) == {tag: digest}, "make preview previews as up runs"
