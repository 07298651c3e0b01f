"""A Helm release an interrupted install, upgrade or uninstall left pending, or a destroy whose cluster delete failed
dropped from the state: what the reader finds in Helm's storage (its Secrets' labels, read through
the real client against the loopback API server) and the one line that names the one command to clear it
(``infra.k8s.manifests.helm_release_problem``)."""

from __future__ import annotations

import pytest

from infra.k8s import live
from infra.k8s.manifests import PENDING_FIXES, RELEASES_IN_STATE, helm_release_problem, releases_in_state
from tests import fake_kube
from tests.fake_kube import FakeCluster, fake_cluster
from tests.scenario import helm_secret
from tools.stack_files import ROOT

FAST = live.Budgets.default()
CTX = "gke_acme-tpu_us-east5_tpu-rl-prod"
"""The stack's cluster's kubeconfig context, which every command of a line names."""


@pytest.fixture
def cluster(monkeypatch):
    monkeypatch.setitem(fake_kube.CORE, "secrets", "Secret")  # the loopback server lists Secrets too
    with fake_cluster() as running:
        yield running


def revision(name: str, version: int, status: str, namespace: str = "kueue-system") -> dict:
    """A revision's Secret as Helm's secrets driver writes it (``tests.scenario.helm_secret``)."""
    return helm_secret(name, namespace, version, status)


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
    assert helm_release_problem("jobset", "jobset-system", None, context=CTX) is None, (
        "none yet: the install creates it"
    )
    for status in ("deployed", "failed", "superseded", "uninstalled", "unknown"):
        assert helm_release_problem("jobset", "jobset-system", (3, status), context=CTX) is None, status


@pytest.mark.pure
def test_a_killed_install_is_one_line_naming_the_uninstall():
    assert helm_release_problem("jobset", "jobset-system", (1, "pending-install"), stack="prod", context=CTX) == (
        "Helm release jobset-system/jobset is pending-install (revision 1), left by an interrupted helm operation, "
        "and Helm refuses every install or upgrade until it is cleared. Run, then `make up STACK=prod` again: "
        f"helm --kube-context {CTX} uninstall jobset -n jobset-system"
    )


@pytest.mark.pure
@pytest.mark.parametrize(("status", "fix"), sorted(PENDING_FIXES.items()))
def test_every_pending_status_names_its_one_command(status, fix):
    problem = helm_release_problem("kueue", "kueue-system", (4, status), context=CTX)
    assert problem is not None and "\n" not in problem
    assert problem.endswith(f": helm --kube-context {CTX} {fix} kueue -n kueue-system")
    assert fix == ("uninstall" if status in ("pending-install", "uninstalling") else "rollback")


# -- a release the state does not hold (a destroy whose cluster delete failed) ----------------------------------------


@pytest.mark.pure
def test_a_release_installed_but_not_in_the_state_is_one_line_naming_the_destroy_to_finish():
    """helm install.go availableName refuses any revision of the name (helm_release.go helmCreate leaves replace
    false), so a release the state lost is stopped in every status a destroy can leave it in."""
    line = helm_release_problem(
        "kueue", "kueue-system", (3, "deployed"), in_state=frozenset({"jobset"}), stack="prod", context=CTX
    )
    assert line == (
        "Helm release kueue-system/kueue is deployed in the cluster (revision 3) but not in stack prod's state: a "
        "destroy whose cluster delete failed dropped it from the state (it is deleted with the cluster) while it stays "
        "installed, and Helm refuses to install it again. Fix what failed the cluster's delete, then finish the "
        "destroy and `make up` again: make destroy STACK=prod"
    )
    for status in ("deployed", "failed", "superseded", "uninstalled", "unknown"):
        problem = helm_release_problem(
            "jobset", "jobset-system", (2, status), in_state=frozenset(), stack="dev", context=CTX
        )
        assert problem is not None and problem.endswith(": make destroy STACK=dev") and "\n" not in problem, status


@pytest.mark.pure
def test_the_state_is_compared_only_when_known_and_a_pending_status_keeps_its_own_command():
    deployed = (1, "deployed")
    assert helm_release_problem("kueue", "kueue-system", deployed, in_state=None, stack="dev", context=CTX) is None, (
        "unknown"
    )
    held = frozenset({"jobset", "kueue"})
    assert helm_release_problem("kueue", "kueue-system", deployed, in_state=held, stack="dev", context=CTX) is None
    assert (
        helm_release_problem("kueue", "kueue-system", None, in_state=frozenset(), stack="dev", context=CTX) is None
    ), "not installed (a new stack, or an `up` that failed before the release): the install goes on"
    pending = helm_release_problem(
        "jobset", "jobset-system", (1, "pending-install"), in_state=frozenset(), stack="dev", context=CTX
    )
    assert pending == helm_release_problem("jobset", "jobset-system", (1, "pending-install"), stack="dev", context=CTX)
    assert pending is not None and pending.endswith(f": helm --kube-context {CTX} uninstall jobset -n jobset-system")


@pytest.mark.pure
def test_the_variable_make_up_sets_is_read_as_the_names_it_lists():
    assert releases_in_state(None) is None, "unset: unknown (a `pulumi up` run by hand)"
    assert releases_in_state("") == frozenset(), "empty: the state holds none"
    assert releases_in_state("jobset,kueue") == frozenset({"jobset", "kueue"})
    assert releases_in_state(" kueue ,") == frozenset({"kueue"})
    assert RELEASES_IN_STATE in (ROOT / "Makefile").read_text(), "the name make up sets"
