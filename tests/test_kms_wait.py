"""The wait after the GKE service agent's grant on the Secrets key (``infra.gcp.kms.GrantPropagation``): its logic on
a fake clock, the dynamic provider's decisions (a new grant waits, a later `up` does not), how it is stored, and
under the mock runtime that the cluster waits for it."""

from __future__ import annotations

import base64

import dill
import pytest
from pulumi.dynamic.dynamic import serialize_provider

from infra.gcp import kms
from infra.gcp.kms import PROPAGATION_SECONDS, GrantPropagationProvider, wait_for_propagation
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
def test_the_wait_lasts_its_bound_by_the_clock_in_steps():
    clock = FakeClock()
    line = wait_for_propagation(420.0, GRANT, clock=clock, sleep=clock.sleep, step=15.0)
    assert clock.now == 1420.0 and len(clock.sleeps) == 28 and max(clock.sleeps) == 15.0
    assert line == (
        f"waited 420 s for the new grant {GRANT} to take effect (IAM: typically 2 minutes, potentially 7 or longer, "
        "https://cloud.google.com/iam/docs/access-change-propagation); if the cluster create still fails on a Cloud "
        "KMS permission, run `pulumi up` again"
    )


@pytest.mark.pure
def test_a_sleep_that_wakes_early_sleeps_again_and_the_wait_never_overruns():
    clock = FakeClock(short=4.0)
    wait_for_propagation(60.0, GRANT, clock=clock, sleep=clock.sleep, step=15.0)
    assert 1060.0 <= clock.now < 1060.0 + 15.0, "the bound by the clock, not by the count of sleeps"
    clock = FakeClock()
    wait_for_propagation(10.0, GRANT, clock=clock, sleep=clock.sleep, step=15.0)
    assert clock.sleeps == [10.0], "the last sleep is what is left, not a whole step"
    clock = FakeClock()
    wait_for_propagation(0.0, GRANT, clock=clock, sleep=clock.sleep)
    assert clock.sleeps == []


@pytest.mark.pure
def test_only_a_new_grant_waits_again():
    provider = GrantPropagationProvider()
    olds = {"grant": GRANT, "seconds": PROPAGATION_SECONDS, "note": "waited"}
    same = provider.diff(GRANT, olds, {"grant": GRANT, "seconds": PROPAGATION_SECONDS})
    assert same.changes is False and same.replaces == [], "a later `up`: no wait"
    longer = provider.diff(GRANT, olds, {"grant": GRANT, "seconds": 900.0})
    assert longer.changes is False, "a longer bound in a later version does not wait again for an old grant"
    other = provider.diff(GRANT, olds, {"grant": GRANT.replace("/k/", "/k2/"), "seconds": PROPAGATION_SECONDS})
    assert other.changes is True and other.replaces == ["grant"], "another key, role or member: a new grant waits"


def test_create_waits_says_why_and_records_it(monkeypatch, capsys):
    waited: list[tuple[float, str]] = []

    def wait_for_propagation(seconds: float, grant: str) -> str:
        waited.append((seconds, grant))
        return f"waited {seconds:g} s"

    monkeypatch.setattr(kms, "wait_for_propagation", wait_for_propagation)
    result = GrantPropagationProvider().create({"grant": GRANT, "seconds": 420})
    assert waited == [(420.0, GRANT)]
    assert result.id == GRANT and result.outs == {"grant": GRANT, "seconds": 420, "note": "waited 420 s"}
    assert capsys.readouterr().err == "waited 420 s\n", "one line, which the engine shows as the provider's message"


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
    assert dev_plan.find(WAIT) == []
    assert "gke-agent-key-propagation" not in dev_plan.one("gcp:container/cluster:Cluster")["options"]["dependsOn"]
