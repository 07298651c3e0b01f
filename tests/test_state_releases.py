"""`make up`'s look at the stack's state before `pulumi up`: the Helm releases a `pulumi stack export`
holds (``tools.state_export.releases_in_state``), the cluster it holds (``state_cluster``), the release a destroy
whose cluster delete failed left installed while the state lost it (``stranded_release``, reading Helm's storage in
the loopback cluster through the real reader), and ``python -m tools.state releases`` as the Makefile runs it,
against a `pulumi` on PATH that prints an export."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from infra.k8s.manifests import helm_release_problem
from tests import fake_kube
from tests.conftest import plan_of
from tests.fake_kube import FakeCluster, fake_cluster
from tests.scenario import EXPORT, auth_plugin, credential, helm_secret, unprotected, with_cluster
from tools import state, state_export
from tools.stack_files import ROOT

BOTH = state_export.platform_releases(True)
CTX = "gke_acme-tpu_us-east5_tpu-rl-prod"
"""The kubeconfig context of the stack's cluster (``Settings.kube_context``), which a line's command names."""


# ---------------------------------------------------------------------------------------------
# The export


@pytest.mark.pure
def test_the_releases_of_a_real_export_are_those_it_holds_and_those_with_a_create_pending():
    assert state_export.releases_in_state(EXPORT) == ["jobset", "kueue"], "kueue's create is pending: counted as held"
    document = json.loads(EXPORT)
    document["deployment"].pop("pending_operations")
    assert state_export.releases_in_state(json.dumps(document)) == ["jobset"]
    document["version"] = 4  # DeploymentSchemaVersionLatest: the same DeploymentV3, with features
    document["features"] = ["refreshBeforeUpdate"]
    assert state_export.releases_in_state(json.dumps(document)) == ["jobset"]


@pytest.mark.pure
def test_a_new_stack_holds_no_release_and_a_pending_update_or_delete_is_not_a_create():
    """diy CreateStack saves an empty deployment: the export's ``deployment`` is null."""
    assert state_export.releases_in_state('{\n    "version": 3,\n    "deployment": null\n}\n') == []
    document = json.loads(EXPORT)
    (operation,) = document["deployment"]["pending_operations"]
    operation["type"] = "updating"  # the resource is in `resources` too when it is an update's
    assert state_export.releases_in_state(json.dumps(document)) == ["jobset"]


@pytest.mark.pure
def test_an_export_this_cannot_read_is_one_line_and_never_a_guess():
    document = json.loads(EXPORT)
    release = document["deployment"]["resources"][3]
    release["inputs"]["name"] = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270"}
    release["outputs"]["name"] = release["inputs"]["name"]
    cases = {
        "": "gave no JSON",
        "error: no stack named 'dev' found\n": "gave no JSON",
        '{"version": 5, "deployment": {}}': "schema version 5, not 3 or 4",
        '{"version": 3, "deployment": []}': "not an object",
        json.dumps(document): "Helm release urn:pulumi:prod::tpu-rl::tpu-rl:k8s:KubernetesPlatform$kubernetes:helm.sh"
        "/v3:Release::jobset has no name this can read",
    }
    for export, message in cases.items():
        with pytest.raises(state_export.StateError, match=message.replace("$", r"\$")) as caught:
            state_export.releases_in_state(export)
        assert "\n" not in str(caught.value)


@pytest.mark.pure
def test_the_cluster_is_read_from_its_outputs_unless_the_export_hides_them():
    assert state_export.state_cluster(EXPORT) == ("34.162.10.20", "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==")
    document = json.loads(EXPORT)
    cluster = document["deployment"]["resources"][1]
    cluster["outputs"]["masterAuth"]["clusterCaCertificate"] = {
        "4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270",
        "ciphertext": "v1:x",
    }
    assert state_export.state_cluster(json.dumps(document)) is None, "a secret: not readable without --show-secrets"
    document["deployment"]["resources"].remove(cluster)
    assert state_export.state_cluster(json.dumps(document)) is None
    assert state_export.state_cluster('{"version": 3, "deployment": null}') is None


# ---------------------------------------------------------------------------------------------
# The release a failed destroy left (pure: a reader that answers from a dict)


class Storage:
    """Helm's storage as ``live.ClusterReader.helm_release`` answers it; records the kubeconfig and each read."""

    def __init__(self, newest: dict[tuple[str, str], tuple[int, str]]) -> None:
        self.newest = newest
        self.kubeconfigs: list[str] = []
        self.reads: list[tuple[str, str]] = []
        self.closed = False

    def __call__(self, kubeconfig: str) -> Storage:
        self.kubeconfigs.append(kubeconfig)
        return self

    def helm_release(self, namespace: str, name: str) -> tuple[int, str] | None:
        self.reads.append((namespace, name))
        return self.newest.get((namespace, name))

    def close(self) -> None:
        self.closed = True


@pytest.mark.pure
def test_a_release_the_state_lost_while_the_cluster_keeps_it_is_the_one_line():
    """A destroy whose cluster delete failed (the cluster unprotected, being deleted): finish the destroy."""
    export = unprotected(with_cluster(EXPORT, "34.162.10.20", "Q0E=", releases=()))
    storage = Storage({("jobset-system", "jobset"): (1, "deployed"), ("kueue-system", "kueue"): (1, "deployed")})
    line = state_export.stranded_release("prod", export, [], BOTH, read=storage, context=CTX)
    assert line == helm_release_problem(
        "jobset", "jobset-system", (1, "deployed"), in_state=frozenset(), stack="prod", context=CTX
    )
    assert line is not None and line.endswith(": make destroy STACK=prod")
    assert storage.reads == [("jobset-system", "jobset")], "the first release found stops it"
    assert storage.closed
    (kubeconfig,) = storage.kubeconfigs
    assert "server: https://34.162.10.20" in kubeconfig and "certificate-authority-data: Q0E=" in kubeconfig
    assert "gke-gcloud-auth-plugin" in kubeconfig, "the program's kubeconfig (infra.k8s.kubeconfig), ADC"
    storage = Storage({("kueue-system", "kueue"): (2, "failed")})
    line = state_export.stranded_release("prod", export, ["jobset"], BOTH, read=storage, context=CTX)
    assert line is not None and line.startswith("Helm release kueue-system/kueue is failed in the cluster (revision 2)")


@pytest.mark.pure
def test_a_release_a_protected_stacks_destroy_dropped_names_its_helm_uninstall():
    """The cluster is protected, so `make destroy` is refused and no destroy will delete it: the line names the one
    command that clears the release, with its name and namespace (a state written before the releases' guards)."""
    export = with_cluster(EXPORT, "34.162.10.20", "Q0E=", releases=("jobset",))
    assert state_export.cluster_protected(export) and not state_export.cluster_protected(unprotected(export))
    storage = Storage({("jobset-system", "jobset"): (1, "deployed"), ("kueue-system", "kueue"): (3, "deployed")})
    line = state_export.stranded_release("prod", export, ["jobset"], BOTH, read=storage, context=CTX)
    assert line == (
        "Helm release kueue-system/kueue is deployed in the cluster (revision 3) but not in stack prod's state: a "
        "destroy dropped it from the state (it is deleted with the cluster) while the cluster, protected, stays, and "
        "Helm refuses to install it again. Uninstall it, then `make up` again (it installs it anew): helm "
        f"--kube-context {CTX} uninstall kueue -n kueue-system"
    )
    assert "make destroy" not in line


@pytest.mark.pure
def test_the_keys_a_state_holds_are_named_as_the_provider_names_them():
    """``keys_in_state``: each ``gcp:kms/cryptoKey:CryptoKey`` of the export by ``{keyRing}/cryptoKeys/{name}``, one
    with a create pending included; none in a new stack's export."""
    ring = "projects/acme-tpu/locations/us-east5/keyRings/tpu-rl-prod-keys"
    document = json.loads(EXPORT)
    inputs = {"keyRing": ring, "name": "gke-secrets", "purpose": "ENCRYPT_DECRYPT"}
    key: dict[str, Any] = {
        "urn": "urn:pulumi:prod::tpu-rl::tpu-rl:gcp:SecretsKey$gcp:kms/cryptoKey:CryptoKey::secrets-key",
        "custom": True,
        "id": f"{ring}/cryptoKeys/gke-secrets",
        "type": "gcp:kms/cryptoKey:CryptoKey",
        "inputs": inputs,
        "outputs": {"keyRing": ring, "name": "gke-secrets"},
    }
    document["deployment"]["resources"].append(key)
    assert state_export.keys_in_state(json.dumps(document)) == [f"{ring}/cryptoKeys/gke-secrets"]
    document["deployment"]["resources"].pop()
    other = {**key, "inputs": {**inputs, "name": "other"}}
    document["deployment"]["pending_operations"].append({"resource": other, "type": "creating"})
    assert state_export.keys_in_state(json.dumps(document)) == [f"{ring}/cryptoKeys/other"]
    assert state_export.keys_in_state(EXPORT) == []
    assert state_export.keys_in_state('{"version": 3, "deployment": null}') == []


@pytest.mark.pure
def test_nothing_is_read_or_stopped_when_no_release_can_be_lost():
    export = with_cluster(EXPORT, "34.162.10.20", "Q0E=", releases=("jobset", "kueue"))
    storage = Storage({("jobset-system", "jobset"): (1, "deployed")})
    assert state_export.stranded_release("prod", export, ["jobset", "kueue"], BOTH, read=storage, context=CTX) is None
    assert storage.kubeconfigs == [], "the state holds every release: no read"
    no_cluster = json.loads(export)
    no_cluster["deployment"]["resources"] = [
        r for r in no_cluster["deployment"]["resources"] if r["type"] != state_export.CLUSTER
    ]
    assert state_export.stranded_release("prod", json.dumps(no_cluster), [], BOTH, read=storage, context=CTX) is None
    assert storage.kubeconfigs == [], "no cluster in the state (a new stack, a finished destroy): nothing to read"
    assert (
        state_export.stranded_release(
            "prod", export, ["jobset"], state_export.platform_releases(False), read=storage, context=CTX
        )
        is None
    )
    assert storage.kubeconfigs == [], "kueue.install false: a Kueue of the user's own is not the program's"
    empty = Storage({})
    assert state_export.stranded_release("prod", export, [], BOTH, read=empty, context=CTX) is None, (
        "an `up` failed before the releases"
    )
    assert empty.reads == [("jobset-system", "jobset"), ("kueue-system", "kueue")]


def test_the_program_installs_the_releases_make_up_looks_for():
    """``platform_releases`` names what ``KubernetesPlatform`` registers: the offline plan's Helm releases (prod's
    plans, which other files plan too: its own installs Kueue)."""
    for kueue_install, plan in ((True, plan_of("prod")), (False, plan_of("prod", "tpu-rl:kueue.enabled=false"))):
        registered = sorted(
            (str(r["inputs"]["name"]), str(r["inputs"]["namespace"]))
            for r in plan.resources
            if r["type"] == state_export.HELM_RELEASE
        )
        assert registered == sorted(state_export.platform_releases(kueue_install)), kueue_install


# ---------------------------------------------------------------------------------------------
# `python -m tools.state releases` as `make up` runs it: a `pulumi` on PATH, the loopback cluster


@pytest.fixture
def cluster(monkeypatch, tmp_path):
    monkeypatch.setitem(fake_kube.CORE, "secrets", "Secret")
    with fake_cluster() as running:
        body = f"test \"$1\" = --use_application_default_credentials || exit 9\necho '{credential(running.token)}'\n"
        auth_plugin(tmp_path, monkeypatch, body)
        yield running


def fake_cli(tmp_path: Path, export: str | None) -> dict[str, str]:
    """A `pulumi` on PATH that prints ``export`` (None: fails as a missing stack); the environment it needs."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    (tmp_path / "export.json").write_text(export or "")
    fake = folder / "pulumi"
    answer = 'cat "$EXPORT"' if export is not None else "echo \"error: no stack named '$4' found\" >&2; exit 255"
    fake.write_text(f'#!/bin/sh\necho "$*" >> "$PULUMI_LOG"\n{answer}\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return {
        "PATH": f"{folder}:{os.environ['PATH']}",
        "EXPORT": str(tmp_path / "export.json"),
        "PULUMI_LOG": str(tmp_path / "pulumi.log"),
    }


def releases(tmp_path: Path, export: str | None, *, stack: str = "dev") -> subprocess.CompletedProcess[str]:
    """``python -m tools.state releases`` in a process of its own, as the Makefile runs it."""
    env: dict[str, Any] = {**os.environ, **fake_cli(tmp_path, export)}
    return subprocess.run(
        [sys.executable, "-m", "tools.state", "releases", "--stack", stack],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def releases_here(tmp_path, monkeypatch, capsys) -> Callable[..., subprocess.CompletedProcess[str]]:
    """The same command's ``main`` run in this process, its exit status and its output as ``releases`` gives them:
    the process boundary has its test (``test_make_ups_look_prints_the_releases_the_state_holds``); the others pay
    no interpreter start and import of the tools each."""

    def run(export: str | None, *, stack: str = "dev") -> subprocess.CompletedProcess[str]:
        for name, value in fake_cli(tmp_path, export).items():
            monkeypatch.setenv(name, value)
        capsys.readouterr()
        argv = ["releases", "--stack", stack]
        code = state.main(argv)
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(argv, code, out, err)

    return run


def test_make_ups_look_prints_the_releases_the_state_holds(tmp_path, cluster: FakeCluster):
    done = releases(tmp_path, with_cluster(EXPORT, cluster.endpoint, cluster.ca_data, ("jobset", "kueue")))
    assert (done.returncode, done.stdout, done.stderr) == (0, "jobset,kueue\n", "")
    assert (tmp_path / "pulumi.log").read_text() == "stack export --stack dev\n"
    assert cluster.requests == [], "the state holds both: the cluster is not read"


def test_a_new_stacks_state_holds_no_release(releases_here):
    done = releases_here('{\n    "version": 3,\n    "deployment": null\n}\n')
    assert (done.returncode, done.stdout, done.stderr) == (0, "\n", ""), "a new stack: set, empty"


@pytest.mark.slow
def test_make_ups_look_stops_at_a_release_the_failed_destroy_left_in_the_cluster(tmp_path, cluster: FakeCluster):
    cluster.core[("secrets", "jobset-system")] = [helm_secret("jobset", "jobset-system", 1, "deployed")]
    done = releases(tmp_path, unprotected(with_cluster(EXPORT, cluster.endpoint, cluster.ca_data, ())))
    line = helm_release_problem(
        "jobset", "jobset-system", (1, "deployed"), in_state=frozenset(), stack="dev", context=CTX
    )
    assert (done.returncode, done.stdout, done.stderr) == (1, "", f"error: {line}\n")
    assert [p.split("?")[0] for p in cluster.requests] == ["/api/v1/namespaces/jobset-system/secrets"]
    del cluster.core[("secrets", "jobset-system")]
    done = releases(tmp_path, with_cluster(EXPORT, cluster.endpoint, cluster.ca_data, ()))
    assert (done.returncode, done.stdout, done.stderr) == (0, "\n", ""), "nothing installed: `up` installs them"


def test_make_ups_look_goes_on_with_a_warning_when_it_cannot_read(releases_here, cluster: FakeCluster):
    done = releases_here(None)
    assert done.returncode == 3 and done.stdout == ""
    assert done.stderr == (
        "warning: `pulumi stack export` of stack dev failed: error: no stack named 'dev' found; `pulumi up` goes on "
        "without comparing the cluster's Helm releases with the state\n"
    )
    unreachable = with_cluster(EXPORT, "127.0.0.1:9", cluster.ca_data, ())
    done = releases_here(unreachable)
    assert done.returncode == 0 and done.stdout == "\n", "the program reads the cluster again"
    (warning,) = done.stderr.splitlines()
    assert warning.startswith("warning: cannot read the cluster's Helm releases (") and "reads them again" in warning


def test_a_stack_name_that_is_not_one_is_refused_before_the_cli_is_run(tmp_path, releases_here):
    done = releases_here(EXPORT, stack="dev;rm")
    assert done.returncode == 2 and "is not a stack name" in done.stderr
    assert not (tmp_path / "pulumi.log").exists()


def test_the_export_is_bounded(tmp_path, monkeypatch):
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "pulumi").write_text("#!/bin/sh\nexec sleep 30\n")
    (folder / "pulumi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    with pytest.raises(state_export.StateError, match=r"took more than 0 s"):
        state_export.export_state("dev", timeout=0.05)
