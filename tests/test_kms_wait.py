"""The wait after the GKE service agent's grant on the Secrets key (``infra.gcp.kms.GrantPropagation``): its logic on
a fake clock, the dynamic provider's decisions (a new grant waits, a later `up` does not), how it is stored, and
under the mock runtime that the cluster waits for it."""

from __future__ import annotations

import base64

import dill
import pytest
from pulumi.dynamic.dynamic import serialize_provider

from infra.gcp import kms
from infra.gcp.kms import POLL_SECONDS, PROPAGATION_SECONDS, GrantPropagationProvider, wait_for_propagation
from tests.conftest import plan_of

WAIT = "pulumi-python:dynamic/kms:GrantPropagation"
OWN = "projects/security-project/locations/us-east5/keyRings/gke/cryptoKeys/secrets"
GRANT = (
    "projects/p/locations/us-east5/keyRings/r/cryptoKeys/k/roles/cloudkms.cryptoKeyEncrypterDecrypter/serviceAccount:a"
)


class FakeClock:
    """A clock that ``sleep`` advances; ``short`` makes every sleep wake that much early (a signal)."""

    def __init__(self, short: float = 0.0) -> None:
        self.now = 1000.0
        self.short = short
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += max(0.01, seconds - self.short)


@pytest.mark.pure
def test_the_wait_lasts_from_the_grants_to_the_bound_by_the_clock_in_short_steps():
    clock = FakeClock()
    line = wait_for_propagation(clock.now - 20.0, 420.0, f"the new grant {GRANT}", clock=clock, pause=clock.sleep)
    assert clock.now == 1400.0 and max(clock.sleeps) == POLL_SECONDS == 5.0, "what is left of the bound, 5 s at a time"
    assert line == (
        f"waited 420 s for the new grant {GRANT} to take effect (IAM: typically 2 minutes, potentially 7 or longer, "
        "https://cloud.google.com/iam/docs/access-change-propagation); if the cluster create still fails on a Cloud "
        "KMS permission, run `pulumi up` again"
    )


@pytest.mark.pure
def test_a_sleep_that_wakes_early_sleeps_again_and_the_wait_never_overruns():
    clock = FakeClock(short=4.0)
    wait_for_propagation(clock.now, 60.0, "x", clock=clock, pause=clock.sleep, step=15.0)
    assert 1060.0 <= clock.now < 1060.0 + 15.0, "the bound by the clock, not by the count of sleeps"
    clock = FakeClock()
    wait_for_propagation(clock.now, 3.0, "x", clock=clock, pause=clock.sleep)
    assert clock.sleeps == [3.0], "the last sleep is what is left, not a whole step"


@pytest.mark.pure
def test_a_later_up_or_an_old_record_waits_for_nothing():
    clock = FakeClock()
    assert wait_for_propagation(clock.now - 420.0, 420.0, "x", clock=clock, pause=clock.sleep) is None
    assert wait_for_propagation(None, 420.0, "x", clock=clock, pause=clock.sleep) is None, "no time recorded"
    assert clock.sleeps == []


@pytest.mark.pure
def test_an_interrupted_wait_ends_within_one_poll():
    """Ctrl-C: pulumi-language-python sends the program SIGINT and kills it 5 s later (tests/test_interrupt.py). The
    wait sleeps at most POLL_SECONDS at a time, in a daemon thread, so what interrupts a sleep ends it there."""
    clock = FakeClock()

    def interrupted(seconds: float) -> None:
        clock.sleep(seconds)
        if clock.now - 1000.0 >= 100.0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        wait_for_propagation(clock.now, 420.0, "x", clock=clock, pause=interrupted)
    assert 100.0 <= clock.now - 1000.0 <= 100.0 + POLL_SECONDS


@pytest.mark.pure
def test_a_new_grant_waits_again_and_a_removed_one_does_not():
    provider = GrantPropagationProvider()
    olds = {"grant": GRANT, "grants": [GRANT], "seconds": PROPAGATION_SECONDS, "since": 5.0}
    same = provider.diff(GRANT, olds, {"grant": GRANT, "grants": [GRANT], "seconds": PROPAGATION_SECONDS})
    assert same.changes is False and same.replaces == [], "a later `up`: no wait"
    longer = provider.diff(GRANT, olds, {"grant": GRANT, "grants": [GRANT], "seconds": 900.0})
    assert longer.changes is False, "a longer bound in a later version does not wait again for an old grant"
    other = GRANT.replace("/k/", "/k2/")
    new = provider.diff(GRANT, olds, {"grant": GRANT, "grants": [GRANT, other], "seconds": PROPAGATION_SECONDS})
    assert new.changes is True and new.replaces == ["grants"], "another key, role, member or condition: a new wait"
    gone = provider.diff(GRANT, {**olds, "grants": [GRANT, other]}, {"grant": GRANT, "grants": [GRANT]})
    assert gone.changes is True and gone.replaces == [], "a grant that went away: an update, nothing to wait for"
    assert provider.update(GRANT, {**olds, "grants": [GRANT, other]}, {"grants": [GRANT]}).outs == {
        "grants": [GRANT],
        "since": 5.0,
    }
    recorded_before = {"grant": GRANT, "seconds": PROPAGATION_SECONDS, "note": "waited"}
    assert provider.diff(GRANT, recorded_before, {"grant": GRANT, "grants": [GRANT]}).changes is False


def test_create_only_records_when_the_grants_were_made(monkeypatch):
    """The provider never waits: the engine waits for a provider's create when an update is cancelled, and the
    dynamic provider's Cancel does nothing (pulumi/dynamic/__main__.py)."""
    monkeypatch.setattr(kms, "now", lambda: 1234.5)
    monkeypatch.setattr(kms, "sleep", lambda _s: pytest.fail("the provider slept"))
    result = GrantPropagationProvider().create({"grant": GRANT, "grants": [GRANT], "seconds": 420})
    assert result.id == GRANT and result.outs == {"grant": GRANT, "grants": [GRANT], "seconds": 420, "since": 1234.5}


def test_the_provider_is_stored_by_reference_and_loads_from_the_project():
    """The state holds the pickled provider (``__provider``), which the dynamic provider process loads with
    dill: a class in an importable module is stored as its module and name. Renaming either breaks every
    stack that has the resource (its diff and its destroy load it): keep the name, or leave an alias."""
    pickled = base64.b64decode(serialize_provider(GrantPropagationProvider()))
    assert b"infra.gcp.kms" in pickled and b"GrantPropagationProvider" in pickled and len(pickled) < 200
    assert type(dill.loads(pickled)) is GrantPropagationProvider


def test_the_cluster_waits_for_a_new_grant_under_the_mock_runtime(prod_plan):
    wait = prod_plan.one(WAIT, "gke-agent-key-propagation")
    grant = prod_plan.one("gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember", "gke-agent-key-user")
    assert wait["inputs"]["grant"] == "gke-agent-key-user-id", "the grant's id (an output: the wait follows it)"
    assert wait["inputs"]["seconds"] == PROPAGATION_SECONDS
    assert "gke-agent-key-user" in wait["options"]["dependsOn"] and wait["options"]["parent"] == "secrets-key"
    assert grant["options"]["parent"] == "secrets-key"
    cluster = prod_plan.one("gcp:container/cluster:Cluster")
    assert {"gke-agent-key-propagation", "gke-agent-key-user"} <= set(cluster["options"]["dependsOn"])
    own = plan_of("prod", f"tpu-rl:gke.secretsEncryptionKey={OWN}")
    assert "gke-agent-key-propagation" in own.one("gcp:container/cluster:Cluster")["options"]["dependsOn"]


def test_no_key_no_wait(dev_plan):
    assert "gke-agent-key-propagation" not in {r["name"] for r in dev_plan.find(WAIT)}
    assert "gke-agent-key-propagation" not in dev_plan.one("gcp:container/cluster:Cluster")["options"]["dependsOn"]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_grant_is_waited_for_before_what_uses_it(stack):
    """Issue 37 item 2: the node accounts' grants before every pool (so every node, and the training on the host
    network), each CPU step's grants and Workload Identity binding before its Kubernetes service account (so before
    its pods), each wait keyed on its grants' ids and conditions."""
    plan = plan_of(stack)
    waits = {r["name"]: r for r in plan.find(WAIT)}
    for pool in plan.find("gcp:container/nodePool:NodePool"):
        assert "nodes-access-propagation" in pool["options"]["dependsOn"], pool["name"]
    node_grants = [
        r["name"]
        for r in plan.resources
        if r["type"] in ("gcp:projects/iAMMember:IAMMember", "gcp:storage/bucketIAMMember:BucketIAMMember")
        and r["name"].split("-")[0] in ("system", "cpu", "tpu")
    ]
    assert node_grants and set(node_grants) <= set(waits["nodes-access-propagation"]["options"]["dependsOn"])
    assert len(waits["nodes-access-propagation"]["inputs"]["grants"]) == len(node_grants)
    for ksa in plan.find("kubernetes:core/v1:ServiceAccount"):
        step = ksa["name"].removesuffix("-ksa")
        wait = waits[f"{step}-access-propagation"]
        assert wait["name"] in ksa["options"]["dependsOn"]
        assert f"{step}-workload-identity" in wait["options"]["dependsOn"]
        grants = wait["inputs"]["grants"]
        assert any("workload-identity" in g for g in grants) and any("resource.name.startsWith" in g for g in grants)
        assert grants == sorted(grants)


def test_the_bound_is_iams_documented_seven_minutes_and_the_docs_say_why_no_live_signal_replaces_it():
    """No live signal shows a grant in effect for GKE's service agent (``infra.gcp.kms``'s docstring gives the sources):
    the wait stays IAM's documented "potentially 7 minutes", and the user's page says why, so replacing it by a probe
    that cannot see enforcement would have to change both."""
    from tools.stack_files import ROOT

    assert PROPAGATION_SECONDS == 7 * 60
    assert kms.PROPAGATION_DOC == "https://cloud.google.com/iam/docs/access-change-propagation"
    assert kms.__doc__ is not None
    for reason in ("testIamPermissions", "getIamPolicy", "CreateClusterRequest", "IamMemberMissing"):
        assert reason in " ".join(kms.__doc__.split()), reason
    page = " ".join((ROOT / "docs" / "security.md").read_text().split())
    assert "A fixed wait, because nothing can see the grant take effect for GKE's service agent" in page
