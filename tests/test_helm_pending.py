"""A Helm release an interrupted install, upgrade or uninstall left pending (issue 38 item 2): what the reader finds
in Helm's storage (its Secrets' labels, read through the real client against the loopback API server) and the one
line that names the one command to clear it (``infra.k8s.manifests.helm_release_problem``)."""

from __future__ import annotations

import pytest

from infra.k8s import live
from infra.k8s.manifests import PENDING_FIXES, helm_release_problem
from tests import fake_kube
from tests.fake_kube import FakeCluster, fake_cluster

FAST = live.Budgets.default()


@pytest.fixture(autouse=True)
def no_live_cluster():
    """This module tests the real reader (overrides the conftest stub), against loopback only."""


@pytest.fixture
def cluster(monkeypatch):
    monkeypatch.setitem(fake_kube.CORE, "secrets", "Secret")  # the loopback server lists Secrets too
    with fake_cluster() as running:
        yield running


def revision(name: str, version: int, status: str, namespace: str = "kueue-system") -> dict:
    """A revision's Secret as Helm's secrets driver writes it (helm v3.20.2 ``pkg/storage/driver/secrets.go``)."""
    labels = {"owner": "helm", "name": name, "status": status, "version": str(version), "modifiedAt": "1"}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "helm.sh/release.v1",
        "metadata": {"name": f"sh.helm.release.v1.{name}.v{version}", "namespace": namespace, "labels": labels},
        "data": {"release": "H4sI"},
    }


def test_the_reader_finds_the_newest_revision_of_that_release_only(cluster: FakeCluster):
    cluster.core[("secrets", "kueue-system")] = [
        revision("kueue", 1, "superseded"),
        revision("kueue", 10, "pending-upgrade"),
        revision("kueue", 2, "superseded"),
        revision("other", 11, "deployed"),
        {**revision("kueue", 12, "deployed"), "metadata": {"name": "not-helm", "labels": {"name": "kueue"}}},
    ]
    reader = live.ClusterReader(cluster.kubeconfig(), FAST)
    assert reader.helm_release("kueue-system", "kueue") == (10, "pending-upgrade"), "by number, not by text"
    assert reader.helm_release("kueue-system", "jobset") is None
    assert reader.helm_release("jobset-system", "kueue") is None
    assert "labelSelector=owner%3Dhelm%2Cname%3Dkueue" in cluster.requests[-3]


@pytest.mark.pure
def test_a_release_helm_can_install_or_upgrade_is_no_problem():
    assert helm_release_problem("jobset", "jobset-system", None) is None, "none yet: the install creates it"
    for status in ("deployed", "failed", "superseded", "uninstalled", "unknown"):
        assert helm_release_problem("jobset", "jobset-system", (3, status)) is None, status


@pytest.mark.pure
def test_a_killed_install_is_one_line_naming_the_uninstall():
    assert helm_release_problem("jobset", "jobset-system", (1, "pending-install")) == (
        "Helm release jobset-system/jobset is pending-install (revision 1), left by an interrupted helm operation, "
        "and Helm refuses every install or upgrade until it is cleared. Run, then `pulumi up` again: "
        "helm uninstall jobset -n jobset-system"
    )


@pytest.mark.pure
@pytest.mark.parametrize(("status", "fix"), sorted(PENDING_FIXES.items()))
def test_every_pending_status_names_its_one_command(status, fix):
    problem = helm_release_problem("kueue", "kueue-system", (4, status))
    assert problem is not None and "\n" not in problem
    assert problem.endswith(f": helm {fix} kueue -n kueue-system")
    assert fix == ("uninstall" if status in ("pending-install", "uninstalling") else "rollback")
