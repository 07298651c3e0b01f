"""Destroy, then `up` again: the names a destroy leaves taken (``capacity.SURVIVORS``), found by the capacity check
before anything is created. With ``gke.secretsEncryptionKey: create`` Cloud KMS keeps the key ring (the provider
never deletes one) and the key (abandoned): a loopback KMS answering as after a destroy, through the real client,
then the program under the mock runtime, which imports what can be reused and stops on what cannot."""

from __future__ import annotations

import pytest
from google.auth.credentials import AnonymousCredentials

from infra.gcp import capacity
from infra.gcp.capacity import SURVIVORS, CryptoKey, Finding, surviving_key_findings
from tests.conftest import SENTINEL_TOKEN, plan_of
from tests.fake_compute import crypto_key, error, fake_compute, key_ring, reservation, serve_project
from tests.lifecycle_walk import settings
from tools.plan import plan_stack
from tools.stack_files import ROOT

REAL_CHECK = capacity.check_capacity
PROJECT = "real-project-1"
REAL = [f"gcp:project={PROJECT}", "tpu-rl:tpu.reservation=res-a", 'tpu-rl:authorizedNetworks=["198.18.0.0/15"]']
"""The prod stack (``gke.secretsEncryptionKey: create``) with its placeholders replaced."""
RING_ID = f"projects/{PROJECT}/locations/us-east5/keyRings/tpu-rl-prod-keys"
KEY_ID = f"{RING_ID}/cryptoKeys/gke-secrets"
RING, KEY = f"/v1/{RING_ID}", f"/v1/{KEY_ID}"
KEY_SETTING = "tpu-rl:gke.secretsEncryptionKey"


@pytest.fixture
def compute(monkeypatch):
    """The real project's Compute and Service Usage answer well; no ring yet (a test makes one survive)."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with fake_compute() as fake:
        serve_project(fake, PROJECT, {"CPUS": (1000, 0), "N4_CPUS": (600, 0)})
        fake.routes[f"/compute/v1/projects/{PROJECT}/zones/us-east5-b/reservations/res-a"] = (
            200,
            reservation("res-a", project=PROJECT, zone="us-east5-b", count=8),
        )
        monkeypatch.setattr(
            capacity,
            "make_clients",
            lambda: capacity.Clients(credentials=AnonymousCredentials(), client_options={"api_endpoint": fake.url}),
        )
        monkeypatch.setattr(capacity, "check_capacity", REAL_CHECK)
        yield fake


def up(compute):
    """The program as `pulumi up` runs it, placeholder and capacity checks on, the platform only (the steps are
    another test's): (plan, {resource name: import id})."""
    imports: dict[str, str] = {}

    def record(registration):
        imports[registration.name] = registration.request.importId
        return None

    plan, _ = plan_stack(
        ROOT / "Pulumi.prod.yaml",
        [*REAL, "tpu-rl:workflow.preflight=false", "tpu-rl:workflow.enabled=false"],
        live=True,
        preflight=True,
        secrets={"tpu-rl:hfToken": SENTINEL_TOKEN},
        raise_errors=False,
        outputs_for=record,
    )
    return plan, imports


@pytest.mark.slow
def test_a_first_up_creates_the_ring_and_the_key(compute):
    plan, imports = up(compute)
    assert plan.error is None, plan.error
    assert imports["key-ring"] == "" and imports["secrets-key"] == "", "nothing to import: both are created"
    assert RING in compute.requests and KEY not in compute.requests, "no ring: its key is not looked for"


@pytest.mark.slow
def test_up_after_a_destroy_imports_the_ring_and_the_key_it_left(compute):
    compute.routes[RING] = (200, key_ring(RING_ID))
    compute.routes[KEY] = (200, crypto_key(KEY_ID))
    plan, imports = up(compute)
    assert plan.error is None, plan.error
    # The ids the provider gives a ring and a key it creates (naming.key_ring_id, crypto_key_id): on a later `up`
    # the old id equals the import id, and the engine plans no import (step_generator.go, isImport).
    assert imports["key-ring"] == RING_ID and imports["secrets-key"] == KEY_ID
    key = plan.one("gcp:kms/cryptoKey:CryptoKey", "secrets-key")["inputs"]
    assert key["deletionPolicy"] == "ABANDON" and key["keyRing"] == "key-ring-id", "the same inputs as a create"
    assert plan.one("gcp:container/cluster:Cluster")["inputs"]["databaseEncryption"] == {
        "state": "ENCRYPTED",
        "keyName": KEY_ID,
    }
    assert any("this `up` adopts it" in message for level, message in plan.logs if level == "INFO")


@pytest.mark.slow
def test_a_ring_without_its_key_is_imported_and_the_key_created(compute):
    compute.routes[RING] = (200, key_ring(RING_ID))
    plan, imports = up(compute)
    assert plan.error is None, plan.error
    assert imports["key-ring"] == RING_ID and imports["secrets-key"] == ""


@pytest.mark.parametrize(
    ("key", "words"),
    [
        (crypto_key(KEY_ID, primary="DESTROYED"), "has DESTROYED as its primary version; GKE needs an enabled one"),
        (crypto_key(KEY_ID, primary="DESTROY_SCHEDULED"), "has DESTROY_SCHEDULED as its primary version"),
        (crypto_key(KEY_ID, primary=None), "has no primary version as its primary version"),
        (
            crypto_key(KEY_ID, "ASYMMETRIC_SIGN", primary=None),
            "is for ASYMMETRIC_SIGN; GKE needs an ENCRYPT_DECRYPT key",
        ),
    ],
    ids=["destroyed", "destroy-scheduled", "no-primary", "asymmetric"],
)
@pytest.mark.slow
def test_a_surviving_key_gke_cannot_use_stops_up_before_anything_naming_the_key_to_set(compute, key, words):
    """An older stack destroyed the key's versions (the provider's default delete); its name can never be used for
    a new key: `up` stops before anything is created, with the one line saying what to set."""
    compute.routes[RING] = (200, key_ring(RING_ID))
    compute.routes[KEY] = (200, key)
    plan, _ = up(compute)
    assert plan.resources == [], "nothing is registered"
    message = str(plan.error)
    assert message.startswith(f"capacity check: {KEY_SETTING}: key {KEY_ID} ") and words in message, message
    assert f"Cloud KMS never frees a key's name, so set {KEY_SETTING} to another ENCRYPT_DECRYPT key" in message
    assert "\n" not in message


@pytest.mark.slow
def test_a_ring_the_check_may_not_read_is_a_warning_naming_the_key(compute):
    compute.routes[RING] = (403, error(403, "Permission 'cloudkms.keyRings.get' denied", "forbidden"))
    plan, imports = up(compute)
    assert plan.error is None and imports["key-ring"] == ""
    (warning,) = [m for m in plan.warnings() if "key ring" in m]
    assert warning == (
        f"capacity check: reading Cloud KMS key ring {RING_ID}: permission denied (HTTP 403); if an earlier destroy "
        f"left key ring {RING_ID}, its create fails with 409 (already exists): then set {KEY_SETTING} to its key "
        f"{KEY_ID}"
    )


@pytest.mark.slow
def test_with_the_kms_api_off_no_ring_is_looked_for(compute):
    compute.services["cloudkms.googleapis.com"] = "DISABLED"
    plan, _ = up(compute)
    assert plan.error is None and RING not in compute.requests
    assert any("this `up` enables cloudkms.googleapis.com" in m for level, m in plan.logs if level == "INFO")


# ---------------------------------------------------------------------------------------------
# Every name the stack creates, and the rule (pure)


def test_every_gcp_resource_the_stacks_create_says_whether_a_destroy_frees_its_name():
    for stack in ("prod", "dev"):
        types = {r["type"] for r in plan_of(stack).resources}
        named = {t for t in types if t.startswith(("gcp:", "pulumi-python:", "pulumi:providers:"))}
        assert named <= set(SURVIVORS), f"{stack}: no row for {sorted(named - set(SURVIVORS))}"
    kept = sorted(t for t, (freed, _) in SURVIVORS.items() if not freed)
    assert kept == ["gcp:kms/cryptoKey:CryptoKey", "gcp:kms/keyRing:KeyRing"], "each kept name has a test above"


@pytest.mark.pure
def test_what_a_surviving_ring_and_key_mean():
    usable = CryptoKey("ENCRYPT_DECRYPT", "ENABLED")
    assert surviving_key_findings("r", False, "k", None) == []
    assert [f.reuse for f in surviving_key_findings("r", True, "k", None)] == ["r"]
    assert [f.reuse for f in surviving_key_findings("r", True, "k", usable)] == ["r", "k"]
    (problem,) = surviving_key_findings("r", True, "k", CryptoKey("ENCRYPT_DECRYPT", "DISABLED"))
    assert problem.level == "problem" and problem.reuse == "", "nothing is reused when `up` stops"
    unknown = surviving_key_findings("r", True, "k", None, key_error="reading Cloud KMS key k: HTTP 500")
    assert [(f.level, f.reuse) for f in unknown] == [("note", "r"), ("unknown", "")]
    assert surviving_key_findings("r", None, "k", None, ring_error="x")[0] == Finding(
        "unknown",
        f"x; if an earlier destroy left key ring r, its create fails with 409 (already exists): then set {KEY_SETTING} "
        "to its key k",
    )


def test_a_key_of_ones_own_is_never_imported():
    own = "projects/security-project/locations/us-east5/keyRings/gke/cryptoKeys/secrets"
    s = settings("prod", [f"{KEY_SETTING}={own}"])
    assert s.gke.secrets_key == own  # read, judged (test_capacity), granted; never created nor imported
