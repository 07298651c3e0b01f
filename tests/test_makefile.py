"""The Makefile's state handling, locks, the state's Helm releases before `pulumi up`, `make help` and `make logs`, as
`make` runs them in a checkout of its own (tests/fake_pulumi.py ``checkout``: its stack files are the copy's) against
a `pulumi` on PATH that records its argv and the ``PULUMI_BACKEND_URL`` it was given, and answers `stack select` and
`stack export` as told (no Pulumi CLI, no cloud; the loopback API server for a cluster). tests/test_state_make.py
runs the state's homes end to end."""

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
from tests.fake_pulumi import CLEAN, checkout
from tests.lifecycle_walk import settings
from tests.scenario import EXPORT, auth_plugin, credential, helm_secret, unprotected, with_cluster
from tools import state_locks
from tools.stack_files import ROOT
from workloads.container.tpu_rl_watch import alive

MAKE = shutil.which("make")
pytestmark = pytest.mark.skipif(MAKE is None, reason="make is not installed")

FAKE_PULUMI = """#!/bin/sh
echo "$*" >> "$PULUMI_LOG"
echo "${PULUMI_BACKEND_URL-unset}" >> "$PULUMI_LOG.backend"
case "$1" in
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
      echo "$pins" > "$PULUMI_LOG.pins"
      keys=unset; [ -n "${TPU_RL_KEYS_IN_STATE+set}" ] && keys="set:$TPU_RL_KEYS_IN_STATE"
      echo "$keys" > "$PULUMI_LOG.keys" ;;
esac
exit 0
"""
UP = "up --stack dev --policy-pack policy --policy-pack-config policy/config/dev.json"
"""`make up`'s `pulumi up`: with the policy pack and the stack's policy config."""
NEW_STACK = '{\n    "version": 3,\n    "deployment": null\n}'
"""What `pulumi stack export` prints for a stack no update has written yet (diy CreateStack: an empty deployment)."""


def make(tmp_path: Path, *args: str, selects: bool = True, export: str = NEW_STACK, **env: str):
    """`make ARGS` in the test's checkout; the run and the fake CLI's calls (each also in ``backends(tmp_path)``)."""
    assert MAKE is not None
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    pulumi = folder / "pulumi"
    pulumi.write_text(FAKE_PULUMI)
    pulumi.chmod(pulumi.stat().st_mode | stat.S_IEXEC)
    root = tmp_path / "checkout"
    if not root.exists():
        checkout(tmp_path)
    log = tmp_path / "pulumi.log"
    log.write_text("")
    (tmp_path / "pulumi.log.backend").write_text("")
    environment = {k: v for k, v in os.environ.items() if k not in CLEAN}
    environment.update(
        PATH=f"{folder}:{os.environ['PATH']}",
        PULUMI_LOG=str(log),
        SELECTS="1" if selects else "",
        EXPORT=export,
        EXPORT_ERROR="no stack named 'dev' found",
        PULUMI_HOME=str(tmp_path / "pulumi-home"),  # no credentials file: no Pulumi Cloud login
        **env,
    )
    done = subprocess.run(
        [MAKE, "--no-print-directory", "-o", ".venv/.installed", "-o", "policy/venv/.installed", *args],
        cwd=root,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done, log.read_text().splitlines()


def backends(tmp_path: Path) -> list[str]:
    """The ``PULUMI_BACKEND_URL`` each call of the last `make` was given (``unset``: none)."""
    return (tmp_path / "pulumi.log.backend").read_text().splitlines()


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


@pytest.mark.slow
@pytest.mark.slow  # make: some 0.8 s
def test_a_file_backend_inside_the_checkout_is_refused_in_one_line_naming_the_override(tmp_path):
    inside = f"file://{tmp_path / 'checkout' / '.pulumi-state'}"
    for env in ({"STATE_BACKEND": inside}, {"STATE_BACKEND": inside, "PULUMI_BACKEND_URL": inside}):
        done, calls = make(tmp_path, "up", "STACK=dev", selects=True, **env)
        assert done.returncode == 2
        (line,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert "inside this checkout" in line and "LOCAL_STATE=1" in line and "make state-bucket" in line, line
        assert calls == [], "nothing runs"
    done, calls = make(tmp_path, "up", "STACK=dev", "LOCAL_STATE=1", STATE_BACKEND=inside)
    assert done.returncode == 0, done.stderr
    assert calls == ["stack select dev", "stack export --stack dev", UP]
    assert backends(tmp_path) == [inside] * 3, "every pulumi command is given the stack's home, and no login runs"


@pytest.mark.slow
def test_the_default_needs_the_projects_id_and_the_example_placeholder_is_refused(tmp_path):
    """Nothing recorded, nothing set: the stack's bucket is named after gcp:project, so the placeholder stops here."""
    done, calls = make(tmp_path, "up", "STACK=dev")
    assert done.returncode == 2
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert line == (
        "error: Pulumi.dev.yaml has no gcp:project of yours (unset, or the example's placeholder): set your project id "
        "in the file first; the stack's state bucket is named after it"
    )
    assert calls == []


@pytest.mark.slow
def test_make_up_selects_and_runs_up_in_the_stacks_home_and_yes_only_when_asked(tmp_path):
    url = f"file://{tmp_path / 'state'}"  # outside the checkout: allowed when asked for
    done, calls = make(tmp_path, "up", "STACK=dev", STATE_BACKEND=url)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", "no warning on the way"
    assert calls == ["stack select dev", "stack export --stack dev", UP]
    assert backends(tmp_path) == [url] * 3
    assert done.stdout.splitlines()[0] == (
        f"recorded tpu-rl:stateBackend: {url} in Pulumi.dev.yaml: commit it, so that every clone and CI job finds "
        "the state there"
    )
    done, calls = make(tmp_path, "up", "STACK=dev", "YES=1")
    assert done.returncode == 0 and done.stdout == "", "recorded: STATE_BACKEND is not needed again"
    assert (
        calls[-1]
        == "up --stack dev --yes --non-interactive --policy-pack policy --policy-pack-config policy/config/dev.json"
    )
    assert backends(tmp_path) == [url] * 3


# ---------------------------------------------------------------------------------------------
# The state's Helm releases, before `pulumi up` (tools/state.py `releases`)


@pytest.mark.slow
@pytest.mark.slow
def test_make_up_hands_pulumi_up_the_releases_the_state_holds(tmp_path):
    """``TPU_RL_RELEASES_IN_STATE`` as `pulumi up` sees it: the export's releases (a pending create counts), empty
    for a new stack, unset (with one warning, and `up` still runs) when the state cannot be read."""
    url = f"file://{tmp_path / 'state'}"
    seen = tmp_path / "pulumi.log.releases"
    done, calls = make(tmp_path, "up", "STACK=dev", STATE_BACKEND=url, export=EXPORT)
    assert done.returncode == 0, done.stderr
    assert calls[-2:] == ["stack export --stack dev", UP]
    assert seen.read_text() == "set:jobset,kueue\n"
    done, _ = make(tmp_path, "up", "STACK=dev", STATE_BACKEND=url)
    assert done.returncode == 0 and done.stderr == "" and seen.read_text() == "set:\n", "a new stack: none"
    done, calls = make(tmp_path, "up", "STACK=dev", STATE_BACKEND=url, export="")
    assert done.returncode == 0 and calls[-1] == UP and seen.read_text() == "unset\n"
    assert done.stderr == (
        "warning: `pulumi stack export` of stack dev failed: error: no stack named 'dev' found; `pulumi up` goes on "
        "without comparing the cluster's Helm releases with the state\n"
    )
    done, _ = make(tmp_path, "up", "STACK=dev", STATE_BACKEND=url, TPU_RL_RELEASES_IN_STATE="stale", export="")
    assert seen.read_text() == "unset\n", "a value left in the environment is not taken for the state's"


@pytest.mark.slow
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
    done, calls = make(tmp_path, "up", "STACK=dev", STATE_BACKEND=url, export=export)
    assert done.returncode != 0
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert line == "error: " + str(
        helm_release_problem(
            "jobset",
            "jobset-system",
            (1, "deployed"),
            in_state=frozenset(),
            stack="dev",
            context=settings("dev", []).kube_context,
        )
    )
    assert line.endswith(": make destroy STACK=dev")
    assert calls[-1] == "stack export --stack dev" and not (tmp_path / "pulumi.log.releases").exists()


@pytest.mark.slow
@pytest.mark.slow  # make: some 0.8 s
def test_a_new_stack_is_created_with_the_secrets_provider_asked_for(tmp_path):
    path = checkout(tmp_path) / "Pulumi.dev.yaml"  # no permission check (tests/test_state_bucket.py has its own)
    path.write_text(path.read_text().replace("  tpu-rl:workflow:\n", "  tpu-rl:workflow:\n    capacityCheck: false\n"))
    done, calls = make(
        tmp_path,
        "stack",
        "STACK=dev",
        "SECRETS_PROVIDER=gcpkms://projects/p/locations/global/keyRings/r/cryptoKeys/k",
        STATE_BACKEND="gs://acme-state",
        selects=False,
    )
    assert done.returncode == 0, done.stderr
    assert calls[-1] == "stack init dev --secrets-provider=gcpkms://projects/p/locations/global/keyRings/r/cryptoKeys/k"
    assert backends(tmp_path) == ["gs://acme-state"] * 2


# ---------------------------------------------------------------------------------------------
# Locks a killed `pulumi` leaves


@pytest.mark.slow
def test_make_up_names_a_stale_lock_and_make_unlock_before_the_cli_meets_it(tmp_path):
    backend = tmp_path / "state"
    url = f"file://{backend}"
    path = write_lock(backend, "prod", pid=4242, hostname="laptop-of-ops")
    done, calls = make(tmp_path, "up", "STACK=prod", "ALLOW_PASSPHRASE=1", STATE_BACKEND=url)
    assert done.returncode != 0
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert line == (
        "error: stack prod is locked by ops@laptop-of-ops (pid 4242) since 2026-12-01T08:00:00Z "
        f"({url}/.pulumi/locks/organization/tpu-rl/prod/{path.name}): if that `pulumi` no longer runs (a closed "
        "laptop, a cancelled CI job), clear the lock with `make unlock STACK=prod` and run `make up` again; the "
        "running step is adopted, not restarted (docs/state.md#a-locked-stack)"
    )
    assert not [c for c in calls if c.startswith("up")], "the CLI was never asked to update"
    for target in ("destroy", "refresh"):
        done, calls = make(tmp_path, target, "STACK=prod", "ALLOW_PASSPHRASE=1", STATE_BACKEND=url)
        assert done.returncode != 0 and "make unlock STACK=prod" in done.stderr
        assert not [c for c in calls if c.startswith(target)]


@pytest.mark.slow
def test_make_unlock_refuses_while_the_locks_process_runs_here_and_otherwise_runs_pulumi_cancel(tmp_path):
    backend = tmp_path / "state"
    url = f"file://{backend}"
    live = write_lock(backend, "dev", pid=os.getpid(), hostname=socket.gethostname())
    done, calls = make(tmp_path, "unlock", "STACK=dev", STATE_BACKEND=url)
    assert done.returncode != 0
    assert "still running on this machine" in done.stderr and "cancel" not in " ".join(calls)
    live.unlink()
    write_lock(backend, "dev", pid=dead_pid(), hostname=socket.gethostname())
    done, calls = make(tmp_path, "unlock", "STACK=dev", STATE_BACKEND=url)
    assert done.returncode == 0, done.stderr
    assert "clearing the lock of ops@" in done.stdout
    assert calls[-1] == "cancel --stack dev --yes"


def test_a_lock_of_a_dead_process_on_this_machine_is_called_so():
    lock = state_locks.Lock(url="u", pid=dead_pid(), username="ops", hostname="here", timestamp="t")
    (line,) = state_locks.lock_lines("dev", [lock], "here", alive)
    assert "whose process is gone" in line and "make unlock STACK=dev" in line


def test_no_lock_no_line_and_a_lock_of_another_stack_is_not_ours(tmp_path):
    backend = tmp_path / "state"
    write_lock(backend, "prod", pid=1, hostname="x")
    assert state_locks.read_locks(f"file://{backend}", "dev") == []
    cloud = state_locks.read_locks("https://api.pulumi.com", "dev")
    assert cloud == [], "Pulumi Cloud's own message names pulumi cancel"


def test_a_lock_file_that_is_not_pulumis_is_named_without_being_trusted(tmp_path):
    backend = tmp_path / "state"
    path = write_lock(backend, "dev", pid=1, hostname="x")
    path.write_bytes(b"\x1b[2Jnot json")
    (lock,) = state_locks.read_locks(f"file://{backend}", "dev")
    assert (lock.pid, lock.username, lock.hostname) == (None, "?", "?")


def test_the_locks_in_a_gcs_backend_are_read_where_the_cli_writes_them(gcs):
    gcs.create_bucket("acme-pulumi-state")
    bucket = gcs.bucket("acme-pulumi-state")
    content = {"pid": 7, "username": "runner", "hostname": "fv-az123", "timestamp": "2026-12-01T08:00:00Z"}
    bucket.blob(".pulumi/locks/organization/tpu-rl/prod/9f.json").upload_from_string(json.dumps(content))
    bucket.blob(".pulumi/locks/organization/tpu-rl/prod-eu/1.json").upload_from_string(json.dumps(content))
    bucket.blob(".pulumi/stacks/tpu-rl/prod.json").upload_from_string("{}")
    (lock,) = state_locks.read_locks("gs://acme-pulumi-state", "prod")
    assert lock == state_locks.Lock(
        url="gs://acme-pulumi-state/.pulumi/locks/organization/tpu-rl/prod/9f.json",
        pid=7,
        username="runner",
        hostname="fv-az123",
        timestamp="2026-12-01T08:00:00Z",
    )
    assert state_locks.read_locks("gs://acme-pulumi-state", "dev") == []
    with pytest.raises(state_locks.StateError, match="make state-bucket"):
        state_locks.read_locks("gs://no-such-state", "prod")


def test_the_lock_path_is_the_clis():
    """pkg/backend/diy/lock.go: ``stackLockDir`` = ``.pulumi/locks`` (workspace.BookkeepingDir, LockDir) + the
    fully qualified name with "/" kept (fsutil.QnamePath); backend.go ``FullyQualifiedName`` =
    ``organization/<project>/<stack>`` for a project-scoped stack."""
    assert state_locks.lock_prefix("prod") == ".pulumi/locks/organization/tpu-rl/prod/"


# ---------------------------------------------------------------------------------------------
# help, logs


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.slow
def test_make_up_hands_pulumi_up_the_image_pins_and_keys_the_state_holds_and_runs_the_pack(tmp_path):
    """``TPU_RL_IMAGES_IN_STATE`` and ``TPU_RL_KEYS_IN_STATE`` as `pulumi up` sees them: the digests of the state's
    ``images`` output and the Cloud KMS keys it holds (none for a new stack, unset when the state cannot be read); the
    pack on unless ``NO_POLICY=1``."""
    url = f"file://{tmp_path / 'state'}"
    tag, digest = "us-docker.pkg.dev/p/r/image:1", "sha256:" + "c" * 64
    stack = {"urn": "urn:pulumi:dev::tpu-rl::pulumi:pulumi:Stack::tpu-rl-dev", "type": "pulumi:pulumi:Stack"}
    outputs = {
        "images": {"maxtext": {"configured": tag, "image": f"us-docker.pkg.dev/p/r/image@{digest}", "digest": digest}}
    }
    ring = "projects/p/locations/us-east5/keyRings/tpu-rl-dev"
    key = {
        "urn": "urn:pulumi:dev::tpu-rl::gcp:kms/cryptoKey:CryptoKey::secrets",
        "type": "gcp:kms/cryptoKey:CryptoKey",
        "inputs": {"keyRing": ring, "name": "gke-secrets"},
    }
    export = json.dumps({"version": 3, "deployment": {"resources": [{**stack, "outputs": outputs}, key]}})
    pins, keys = tmp_path / "pulumi.log.pins", tmp_path / "pulumi.log.keys"
    done, calls = make(tmp_path, "up", "STACK=dev", STATE_BACKEND=url, export=export)
    assert done.returncode == 0, done.stderr
    assert json.loads(pins.read_text().removeprefix("set:")) == {tag: digest} and calls[-1] == UP
    assert keys.read_text() == f"set:{ring}/cryptoKeys/gke-secrets\n"
    done, _ = make(tmp_path, "up", "STACK=dev", STATE_BACKEND=url)
    assert pins.read_text() == "set:{}\n" and keys.read_text() == "set:\n", "a new stack: none"
    done, calls = make(tmp_path, "up", "STACK=dev", "NO_POLICY=1", STATE_BACKEND=url, export="")
    assert pins.read_text() == "unset\n" and keys.read_text() == "unset\n" and calls[-1] == "up --stack dev"
    done, calls = make(tmp_path, "preview", "STACK=dev", STATE_BACKEND=url, export=export)
    assert done.returncode == 0, done.stderr
    assert calls[-1] == "preview --stack dev --diff", calls[-1]
    assert json.loads(pins.read_text().removeprefix("set:")) == {tag: digest}, "make preview previews as up runs"
