"""What the engine does with the state on its first error, in the engine model (``tests.engine``): it cancels the
deployment. A step already running finishes and is written to the state; none starts after it (pulumi/pulumi v3.259.0
``pkg/resource/deploy/step_executor.go`` ``cancelDueToError``: ``se.cancel()`` unless ``--continue-on-error``, a
protect refusal excepted; ``executeChain`` checks the cancelled context before each step; ``deployment_executor.go``
``Execute`` returns on ``ctx.Done()``, and ``performPostSteps`` runs no later antichain of deletes). docs/destroy.md
"Destroy" and docs/state.md "A Helm release left pending" say what follows: a release's destroy guard is
best-effort, and `make up`'s look at the state against Helm's storage (``tools.state releases``) is what stops a
stranded release."""

from __future__ import annotations

import pytest

from tests.engine import CLUSTER, HELM_RELEASE
from tests.scenario import before_up, serve_helm
from tools.stack_files import ROOT

# The slow tier (`make test-slow`): each test runs the program against loopback servers, seconds apiece.
pytestmark = pytest.mark.slow

GUARD = "tpu-rl:lifecycle:DestroyGuard"


@pytest.fixture
def stack(stack, monkeypatch):
    """The scenario stack (``tests/conftest.py``) whose Helm storage the loopback cluster serves."""
    return serve_helm(stack, monkeypatch)


def test_a_first_up_that_fails_while_a_release_installs_leaves_it_without_its_guard(stack, monkeypatch):
    """Prod's first `up`: the TPU pool's create fails while JobSet's Helm install runs. The install finishes and the
    state holds the release, but its guard (``tpu-rl-protect-release-jobset``, registered once the install returns)
    never gets a step, and neither does Kueue's release (it waits for JobSet's). So a destroy without a preview drops
    the release (``deletedWith`` the cluster, whose delete is planned) while the protected cluster keeps it installed:
    the guard is best-effort, and `make up` names the release's uninstall before `pulumi up`."""
    stack.fail_create = ("tpu-pool-0", "Error waiting for creating GKE NodePool: the reservation is gone", ())
    stack.fail_during = "jobset"
    first = stack.up()
    stack.fail_create, stack.fail_during = None, ""
    assert "creating tpu-pool-0: Error waiting for creating GKE NodePool" in str(first.error)
    assert [r.inputs["name"] for r in stack.state.values() if r.type == HELM_RELEASE] == ["jobset"]
    assert not [r.name for r in stack.state.values() if r.type == GUARD and r.dependencies], "no guard on anything"
    assert stack.helm[("jobset-system", "jobset")] == (1, "deployed")

    destroyed = stack.destroy(skip_preview=True)  # pulumi destroy --skip-preview, by hand: make destroy refuses
    outcome = {u.rsplit("::", 1)[-1]: what for u, what in destroyed.outcomes.items()}
    assert outcome["jobset"] == "dropped" and outcome["cluster"] == "refused"
    assert before_up(stack, monkeypatch) == (
        "Helm release jobset-system/jobset is deployed in the cluster (revision 1) but not in stack prod's state: a "
        "destroy dropped it from the state (it is deleted with the cluster) while the cluster, protected, stays, and "
        "Helm refuses to install it again. Uninstall it, then `make up` again (it installs it anew): helm "
        "--kube-context gke_my-tpu-prod-project_us-east5_tpu-rl-prod uninstall jobset -n jobset-system"
    )


def test_a_destroy_stops_at_its_first_failed_delete(stack):
    """Dev's cluster delete fails (GKE's deletion protection; a GKE error is the same): the deletes scheduled before
    it have run, the Kubernetes objects ``deletedWith`` it among them (dropped), and no delete of a later antichain
    runs, whether or not it depends on the cluster. The second destroy, once the cause is fixed, finishes."""
    stack.stack_file = ROOT / "Pulumi.dev.yaml"
    assert stack.up().error is None
    cluster = stack.urn(CLUSTER, "cluster")
    stack.state[cluster].inputs["deletionProtection"] = True
    rounds = stack.schedule(list(stack.state))
    failing = next(i for i, chain in enumerate(rounds) if cluster in chain)
    destroyed = stack.destroy(skip_preview=True)
    assert destroyed.errors == [
        "Cannot destroy cluster because deletion_protection is set to true. Set it to false to proceed with cluster "
        "deletion."
    ]
    later = [urn for chain in rounds[failing + 1 :] for urn in chain]
    assert later and all(destroyed.outcomes[urn] == "cancelled" for urn in later)
    assert all(urn in stack.state for urn in later), "cancelled: still in the state"
    untouched = [urn for urn in later if urn not in stack.dependencies_of(cluster)]
    assert untouched, "some of what the cancellation kept is no dependency of the cluster (the old model deleted it)"
    assert {destroyed.outcomes[u] for chain in rounds[: failing + 1] for u in chain} <= {"deleted", "dropped", "failed"}
    stack.state[cluster].inputs["deletionProtection"] = False
    finished = stack.destroy(skip_preview=True)
    assert finished.errors == [] and stack.state == {}
