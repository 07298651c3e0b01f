"""The wait after the GKE service agent's grant on the Secrets key and the node accounts' grants
(``infra.gcp.kms.GrantPropagation``): its logic on a fake clock, the dynamic provider's decisions (a new grant waits, a
later `up` does not), how it is stored, and under the mock runtime that the cluster and the pools wait for it. Then the
step accounts' live signal, their step's first use of each grant retried while IAM applies it (``FIRST_USE``, the
steps' ``mark_folder.py``), run against the loopback Cloud Storage with IAM applying each grant late
(``tests.fake_iam.PropagatingApis``), on a fake clock."""

from __future__ import annotations

import base64
from typing import Any

import dill
import pytest
from pulumi.dynamic.dynamic import serialize_provider

from infra.gcp import kms
from infra.gcp.kms import POLL_SECONDS, PROPAGATION_SECONDS, GrantPropagationProvider, key_advice, wait_for_propagation
from tests.conftest import one, plan_of
from workloads.specs.commands import program_file

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
    line = wait_for_propagation(
        clock.now - 20.0, 420.0, f"the new grant {GRANT}", key_advice("dev"), clock=clock, pause=clock.sleep
    )
    assert clock.now == 1400.0 and max(clock.sleeps) == POLL_SECONDS == 5.0, "what is left of the bound, 5 s at a time"
    assert line == (
        f"waited 420 s for the new grant {GRANT} to take effect (IAM: typically 2 minutes, potentially 7 or longer, "
        "https://cloud.google.com/iam/docs/access-change-propagation); if the cluster create still fails on a Cloud "
        "KMS permission, run `make up STACK=dev` again"
    )


@pytest.mark.pure
def test_a_sleep_that_wakes_early_sleeps_again_and_the_wait_never_overruns():
    clock = FakeClock(short=4.0)
    wait_for_propagation(clock.now, 60.0, "x", "", clock=clock, pause=clock.sleep, step=15.0)
    assert 1060.0 <= clock.now < 1060.0 + 15.0, "the bound by the clock, not by the count of sleeps"
    clock = FakeClock()
    wait_for_propagation(clock.now, 3.0, "x", "", clock=clock, pause=clock.sleep)
    assert clock.sleeps == [3.0], "the last sleep is what is left, not a whole step"


@pytest.mark.pure
def test_a_later_up_or_an_old_record_waits_for_nothing():
    clock = FakeClock()
    assert wait_for_propagation(clock.now - 420.0, 420.0, "x", "", clock=clock, pause=clock.sleep) is None
    assert wait_for_propagation(None, 420.0, "x", "", clock=clock, pause=clock.sleep) is None, "no time recorded"
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
        wait_for_propagation(clock.now, 420.0, "x", "", clock=clock, pause=interrupted)
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
    wait = one(prod_plan, WAIT, "gke-agent-key-propagation")
    grant = one(prod_plan, "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember", "gke-agent-key-user")
    assert wait["inputs"]["grant"] == "gke-agent-key-user-id", "the grant's id (an output: the wait follows it)"
    assert wait["inputs"]["seconds"] == PROPAGATION_SECONDS
    assert "gke-agent-key-user" in wait["options"]["dependsOn"] and wait["options"]["parent"] == "secrets-key"
    assert grant["options"]["parent"] == "secrets-key"
    cluster = one(prod_plan, "gcp:container/cluster:Cluster")
    assert {"gke-agent-key-propagation", "gke-agent-key-user"} <= set(cluster["options"]["dependsOn"])
    own = plan_of("prod", f"tpu-rl:gke.secretsEncryptionKey={OWN}")
    assert "gke-agent-key-propagation" in one(own, "gcp:container/cluster:Cluster")["options"]["dependsOn"]


def test_no_key_no_wait(dev_plan):
    assert "gke-agent-key-propagation" not in {r["name"] for r in dev_plan.find(WAIT)}
    assert "gke-agent-key-propagation" not in one(dev_plan, "gcp:container/cluster:Cluster")["options"]["dependsOn"]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_grant_is_waited_for_before_what_uses_it(stack):
    """The node accounts' grants are waited for before every pool (so every node, and the training on the host
    network), keyed on their ids and conditions; each CPU step's grants and Workload Identity binding are made before
    its Kubernetes service account (so before its pods), and the step waits for them to apply itself, at its first use
    (``FIRST_USE``): no wait of the program's stands between them."""
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
        if not ksa["name"].endswith("-ksa"):
            continue  # not a CPU step's (Workload Identity) account
        step = ksa["name"].removesuffix("-ksa")
        assert f"{step}-workload-identity" in ksa["options"]["dependsOn"], "the binding is made before the account"
        assert not set(ksa["options"]["dependsOn"]) & set(waits), "no wait: the step's first use waits"


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
    assert "A CPU step's account waits on a live signal instead, the step's own first use of each grant" in page


def test_the_step_retries_its_first_use_for_iams_seven_minutes_and_a_margin():
    """The bound of the step's first use (``FIRST_USE``) is IAM's "potentially 7 minutes" (the module's) and a
    minute's margin for the pod's own start and the last retry's pause, which the docs give as 8 minutes."""
    assert f"BOUND_SECONDS = {PROPAGATION_SECONDS + 60}\n" in FIRST_USE
    assert PROPAGATION_SECONDS + 60 == 8 * 60
    for reason in ("iam.serviceAccounts.getAccessToken", "serviceAccountTokenCreator", "Workload Identity"):
        assert reason in " ".join((kms.__doc__ or "").split()), reason


# ---------------------------------------------------------------------------------------------
# The step accounts' grants: waited for by the step's own first use of each, retried while IAM applies it

FIRST_USE = program_file("mark_folder.py")
"""Each step's first program (``workloads/container/mark_folder.py``, a file of its ConfigMap): the step's first use of
each of its grants, retried while IAM applies it, instead of a fixed wait before its Kubernetes service account.
Tested as it runs in the step's pod, against the loopback Cloud Storage with IAM applying each grant late."""

PROJECT = "acme-tpu"
BUCKET = "acme-tpu-artifacts"
STEP_ACCOUNT = f"serviceAccount:tpu-rl-dev-export@{PROJECT}.iam.gserviceaccount.com"
OUTPUT = f"gs://{BUCKET}/qwen3-8b/export/abc/"
READS = (f"gs://{BUCKET}/qwen3-8b/train/", f"gs://{BUCKET}/qwen3-8b/convert/")


def _prefixes(*uris: str) -> dict[str, str]:
    names = " || ".join(
        f'resource.name.startsWith("projects/_/buckets/{BUCKET}/objects/{u.split("/", 3)[3]}")' for u in uris
    )
    return {"title": "prefixes", "expression": names}


class WorkloadIdentity:
    """The pod's credentials for its account through the GKE metadata server: refused (``RefreshError``, as the
    metadata server answers while the Workload Identity binding is not in effect) until ``ready`` says."""

    def __init__(self, member: str, ready: Any) -> None:
        from google.oauth2.credentials import Credentials

        self.credentials = Credentials(token=None, refresh_token="x", client_id="x", client_secret="x")
        outer = self

        def refresh(_request: Any) -> None:
            from google.auth.exceptions import RefreshError

            if not ready():
                raise RefreshError(
                    "Unable to generate access token; IAM returned 403 Forbidden: Permission "
                    "'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist)."
                )
            outer.credentials.token = member

        self.credentials.refresh = refresh  # type: ignore[method-assign]


def _first_use(fake: Any, clock: FakeClock, program: str, binding_ready: Any, capsys: Any) -> tuple[object, str]:
    """Run ``program``'s ``main`` as the step's pod would, on ``clock``; its exit and what it printed."""
    from google.cloud import storage

    namespace: dict[str, Any] = {"__name__": "first_use", "__package__": "workloads.container"}  # imports shown
    exec(compile(program, "mark_folder.py", "exec"), namespace)  # noqa: S102 (the step's program, under test)
    identity = WorkloadIdentity(STEP_ACCOUNT, binding_ready)
    client = storage.Client(
        project=PROJECT, credentials=identity.credentials, client_options={"api_endpoint": fake.url}
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(storage, "Client", lambda: client)
        code = namespace["main"]([OUTPUT, *READS], clock=clock, pause=clock.sleep)
    return code, capsys.readouterr().out


@pytest.fixture
def step_bucket():
    from tests.fake_iam import as_member, propagating_apis

    clock = FakeClock()
    with propagating_apis(PROJECT, clock, 200.0) as fake:
        as_member(fake, None)[0].create_bucket(BUCKET)
        fake.grant(BUCKET, "roles/storage.legacyBucketReader", STEP_ACCOUNT)
        fake.grant(BUCKET, "roles/storage.objectViewer", STEP_ACCOUNT, _prefixes(*READS))
        fake.grant(BUCKET, "roles/storage.objectUser", STEP_ACCOUNT, _prefixes(OUTPUT.rsplit("/", 2)[0] + "/"))
        yield fake, clock


def test_the_step_waits_for_its_grants_by_using_them_and_goes_on_as_soon_as_they_apply(step_bucket, capsys):
    fake, clock = step_bucket
    code, out = _first_use(fake, clock, FIRST_USE, lambda: clock.now >= 1000.0 + 150.0, capsys)
    assert code == 0
    assert 1200.0 <= clock.now < 1200.0 + 10.0, "the grants applied at 200 s: at most one pause later, not 420 s"
    assert out.splitlines()[0].startswith(
        "tpu-rl: waiting up to 480 s for the step account's grants (gs://acme-tpu-artifacts: RefreshError: Unable to "
        "generate access token"
    ), "the Workload Identity binding first"
    assert out.splitlines()[-1] == f"tpu-rl: created {OUTPUT}" and len(out.splitlines()) == 2
    assert fake.contents[(BUCKET, "qwen3-8b/export/abc/")] == b""
    assert not [n for (_, n) in fake.contents if n.endswith(".tpu-rl-grant-probe")], "a read probe writes nothing"
    refused = {permission for _, permission, _ in fake.refused}
    assert refused <= {"storage.buckets.get", "storage.objects.get", "storage.objects.create"}


def test_grants_already_in_effect_cost_nothing(step_bucket, capsys):
    fake, clock = step_bucket
    clock.now += 600.0
    code, out = _first_use(fake, clock, FIRST_USE, lambda: True, capsys)
    assert (code, out, clock.sleeps) == (0, f"tpu-rl: created {OUTPUT}\n", [])


def test_a_grant_still_refused_past_the_bound_is_one_line_and_another_error_fails_at_once(step_bucket, capsys):
    fake, clock = step_bucket
    fake.bucket_policies[BUCKET] = [
        b for b in fake.bucket_policies[BUCKET] if b["role"] != "roles/storage.objectViewer"
    ]
    code, _ = _first_use(fake, clock, FIRST_USE, lambda: True, capsys)
    assert 1480.0 <= clock.now <= 1480.0 + 10.0, "bounded by 420 s and the margin, from the pod's start"
    assert isinstance(code, str) and "\n" not in code
    assert code.startswith(f"tpu-rl: {READS[0]} still refused after 480 s (Forbidden: 403 GET {fake.url}/storage/")
    assert code.endswith("): the step account's grants have not taken effect; run `make up STACK=<stack>` again")
    clock = FakeClock()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fake, "clock", clock)
        del fake.buckets[BUCKET]
        code, _ = _first_use(fake, clock, FIRST_USE, lambda: True, capsys)
    assert code == f"tpu-rl: cannot create {OUTPUT} (NotFound): check the step's bucket access" and clock.sleeps == []


def test_no_step_waits_for_its_grants_before_its_pods():
    """The program waits for no step account's grants (no ``GrantPropagation`` of a step, no service account after
    one): the step's own first use does (above). The node accounts and GKE's service agent keep theirs."""
    plan = plan_of("prod", "tpu-rl:publish.repo=me/model", "tpu-rl:workflow.steps.evaluate=true")
    waits = {r["name"] for r in plan.find(WAIT)}
    assert not any(
        name.split("-access-propagation")[0] in ("convert", "export", "evaluate", "publish") for name in waits
    )
    for account in plan.find("kubernetes:core/v1:ServiceAccount"):
        assert not set(account["options"].get("dependsOn") or []) & waits, account["name"]
