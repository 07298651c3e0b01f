"""A Kueue or JobSet webhook that is Ready but not yet reachable: `up` waits for it, bounded, before the first
Kueue object and the first JobSet (pulumi-kubernetes does not retry a create a webhook failed: v4.32.0
``await.go`` ``Creation`` retries NotFound and NoMatch only). The wait is a server-side dry-run create of the
real manifest (``dryRun=All`` runs every admission webhook and stores nothing) through the real client, against
the loopback API server answering as the real one does when it cannot call a webhook
(``tests.fake_kube.webhook_unreachable``), on a fake clock."""

from __future__ import annotations

import pytest

from infra.k8s import live
from infra.k8s.kueue import tpu_flavor
from tests.fake_kube import cutting_handshakes, webhook_unreachable
from tests.lifecycle_walk import settings
from tests.scenario import names

FLAVORS = "/apis/kueue.x-k8s.io/v1beta2/resourceflavors?dryRun=All"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/tpu-rl/jobsets?dryRun=All"


@pytest.fixture
def clock(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(live, "webhook_clock", lambda: now[0])
    monkeypatch.setattr(live, "webhook_sleep", lambda seconds: now.__setitem__(0, now[0] + seconds))
    return now


def flavor() -> dict:
    return tpu_flavor(settings("prod", []), {"app.kubernetes.io/name": "tpu-rl"})


def test_the_unreachable_answer_is_the_api_servers():
    body = webhook_unreachable("resourceflavors")
    assert (body["code"], body["reason"]) == (500, "InternalError")
    assert body["message"] == (
        'Internal error occurred: failed calling webhook "mresourceflavor.kb.io": failed to call webhook: Post '
        '"https://kueue-webhook-service.kueue-system.svc:443/mutate-kueue-x-k8s-io-v1beta2-resourceflavor?timeout=10s"'
        ": dial tcp 10.52.0.14:443: connect: connection refused"
    )
    assert body["details"]["causes"] == [{"message": body["message"].removeprefix("Internal error occurred: ")}]


def test_a_webhook_refused_three_times_is_waited_for(cluster, clock):
    cluster.unreachable["resourceflavors"] = (3, "connection refused")
    reader = live.ClusterReader(cluster.kubeconfig())
    assert reader.wait_admitted(flavor()) == 3
    assert clock[0] == 3 * live.WEBHOOK_POLL and cluster.posts == [FLAVORS] * 4
    assert cluster.get("ResourceFlavor", "", "tpu-rl-tpu-slice") is None, "a dry run stores nothing"


def test_a_handshake_cut_short_is_waited_for_and_an_untrusted_certificate_is_not(cluster, clock):
    """A dry-run create whose TLS handshake was cut short (EOF: the client raises ``ApiException`` status 0) tries
    again after the poll; a certificate the kubeconfig does not trust is the TLS line at once, not 'HTTP 0'."""
    with cutting_handshakes(cluster, cut=1) as relay:
        assert live.ClusterReader(relay.kubeconfig).wait_admitted(flavor()) == 1
    assert clock[0] == live.WEBHOOK_POLL and cluster.posts == [FLAVORS]
    untrusted = cluster.kubeconfig()
    del untrusted["clusters"][0]["cluster"]["certificate-authority-data"]
    with pytest.raises(live.ClusterReadError, match=r"^TLS with the cluster at .* failed \(certificate: "):
        live.ClusterReader(untrusted).wait_admitted(flavor())
    assert clock[0] == live.WEBHOOK_POLL


def test_an_object_that_exists_was_admitted(cluster, clock):
    """409 AlreadyExists comes from storage, after every admission webhook answered."""
    cluster.put(flavor())
    live.ClusterReader(cluster.kubeconfig()).wait_admitted(flavor())
    assert clock[0] == 0


@pytest.mark.slow
def test_the_bound_stops_the_wait_with_the_webhook_its_namespace_and_the_fix(cluster, clock):
    cluster.unreachable["resourceflavors"] = (10**6, "no endpoints")
    with pytest.raises(live.ClusterReadError) as caught:
        live.ClusterReader(cluster.kubeconfig()).wait_admitted(flavor(), bound=60)
    message = str(caught.value)
    assert message.startswith(
        "the admission webhook mresourceflavor.kb.io did not admit a dry-run create of ResourceFlavor tpu-rl-tpu-slice "
        "within 60 s (13 tries; last: Internal error occurred: failed calling webhook"
    )
    assert 'no endpoints available for service "kueue-webhook-service"' in message
    assert message.endswith(
        "check `kubectl --context test get pods,endpoints -n kueue-system` (Service kueue-webhook-service), then run "
        "`make up STACK=<stack>` again"
    ), "the command names the cluster the kubeconfig read names (its current-context)"
    assert "\n" not in message and clock[0] == 60


def test_a_refusal_that_no_wait_changes_fails_at_once(cluster, clock, monkeypatch):
    reader = live.ClusterReader(cluster.kubeconfig())
    cluster.token = "another-token"
    with pytest.raises(live.ClusterReadError, match=r"refused the dry-run create of ResourceFlavor .* \(HTTP 401\)"):
        reader.wait_admitted(flavor())
    assert clock[0] == 0


# `pulumi up` (the engine of tests/engine.py, the loopback cluster, fake-gcs-server)


@pytest.mark.slow
def test_up_waits_for_the_kueue_webhook_before_the_first_flavor(stack, clock):
    stack.cluster.unreachable["resourceflavors"] = (4, "connection refused")
    first = stack.up()
    assert first.error is None, first.error
    assert stack.cluster.posts.count(FLAVORS) == 5 and clock[0] == 4 * live.WEBHOOK_POLL
    assert first.actions == {name: "create" for name in names(stack).values()}


@pytest.mark.slow
def test_up_waits_for_the_jobset_webhook_before_the_first_step(stack, clock):
    stack.cluster.unreachable["jobsets"] = (2, "no endpoints")
    first = stack.up()
    assert first.error is None, first.error
    assert stack.cluster.posts.count(JOBSETS) == 3 and clock[0] == 2 * live.WEBHOOK_POLL
    again = stack.up()
    assert again.error is None and stack.cluster.posts.count(JOBSETS) == 4, "the step exists: 409, admitted"
    # A preview never probes (nor does the offline plan: live=False, test_lifecycle.py).
    stack.cluster.unreachable["resourceflavors"] = (10**6, "connection refused")
    assert stack.preview().error is None and stack.cluster.posts.count(JOBSETS) == 4


@pytest.mark.slow
def test_a_webhook_never_reachable_stops_up_at_the_bound_before_what_it_admits(stack, clock):
    """The issue's case: Kueue's webhook on the first ResourceFlavor create. (The JobSet webhook's bound is the
    same wait: ``test_the_bound_stops_the_wait_with_the_webhook_its_namespace_and_the_fix``.)"""
    stack.cluster.unreachable["resourceflavors"] = (10**6, "connection refused")
    failed = stack.up()
    assert str(failed.error).startswith(
        "the admission webhook mresourceflavor.kb.io did not admit a dry-run create of ResourceFlavor tpu-rl-tpu-slice "
        f"within {live.WEBHOOK_BOUND:g} s"
    )
    assert str(failed.error).endswith(f"then run `make up STACK={stack.name}` again") and clock[0] == live.WEBHOOK_BOUND
    kinds = {r.type.split(":")[-1] for r in stack.state.values()}
    assert not kinds & {"ResourceFlavor", "ClusterQueue", "LocalQueue", "JobSet"}, "nothing it admits was created"
    assert failed.actions == {}
