"""Destroy, then `up` again: the names a destroy leaves taken (``capacity.SURVIVORS``), found by the capacity check
before anything is created. With ``gke.secretsEncryptionKey: create`` Cloud KMS keeps the key ring (the provider
never deletes one) and the key (the provider's DELETE schedules its versions for destruction and turns its rotation
off, and leaves the key): a loopback KMS answering as after a destroy, through the real client, then the program
under the mock runtime, which imports what can be reused and stops, with the one command to run, on what cannot be
yet."""

from __future__ import annotations

import pytest
from google.auth.credentials import AnonymousCredentials

from infra.gcp import capacity
from infra.gcp.capacity import SURVIVORS, CryptoKey, Finding, key_version_fix, surviving_key_findings
from tests.conftest import SENTINEL_TOKEN, plan_of
from tests.fake_compute import (
    crypto_key,
    error,
    fake_compute,
    key_after_destroy,
    key_ring,
    reservation,
    serve_project,
)
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
WHERE = f"--key gke-secrets --keyring tpu-rl-prod-keys --location us-east5 --project {PROJECT}"
"""The key's flags in the gcloud commands the check names."""


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
            capacity.check,
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
    """The key once its primary version is enabled again (the command the check named was run): its rotation is still
    off, as the destroy left it; the import and the update that follows set it again."""
    compute.routes[RING] = (200, key_ring(RING_ID))
    compute.routes[KEY] = (200, key_after_destroy(KEY_ID, "ENABLED"))
    plan, imports = up(compute)
    assert plan.error is None, plan.error
    # The ids the provider gives a ring and a key it creates (naming.key_ring_id, crypto_key_id): on a later `up`
    # the old id equals the import id, and the engine plans no import (step_generator.go, isImport).
    assert imports["key-ring"] == RING_ID and imports["secrets-key"] == KEY_ID
    key = plan.one("gcp:kms/cryptoKey:CryptoKey", "secrets-key")["inputs"]
    assert key["deletionPolicy"] == "DELETE" and key["keyRing"] == "key-ring-id", "the same inputs as a create"
    assert plan.one("gcp:container/cluster:Cluster")["inputs"]["databaseEncryption"] == {
        "state": "ENCRYPTED",
        "keyName": KEY_ID,
    }
    assert (
        "INFO",
        f"capacity check: key {KEY_ID} exists (Cloud KMS keeps a key after a destroy): this `up` adopts it and turns "
        "its rotation back on (the destroy turned it off)",
    ) in plan.logs
    # The engine imports, then goes on from the state it read as from an old state (step_generator.go
    # continueStepsFromImport -> the provider's Diff against the program's inputs). The provider reads the key's
    # rotation as "" (ResourceKMSCryptoKeyFlatten: rotationPeriod absent, as disableCryptoKeyRotation left it) and the
    # program asks for 90 days: an update, whose PATCH has rotationPeriod,nextRotationTime in its mask and the next
    # rotation set from now (resourceKMSCryptoKeyUpdate, resourceKMSCryptoKeyUpdateEncoder). Nothing that forces a
    # new key differs (name, keyRing, purpose: ForceNew; an imported resource may not be replaced).
    read = read_inputs(key_after_destroy(KEY_ID, "ENABLED"))
    program = {**key, "keyRing": RING_ID}  # the ring's id (the mock runtime answers "key-ring-id")
    changed = {k for k in read if read[k] != program.get(k)}
    assert changed == {"rotationPeriod"} and program["rotationPeriod"] == "7776000s"


def read_inputs(reply: dict) -> dict:
    """The inputs the provider's Read gives an imported key (terraform-provider-google ``resourceKMSCryptoKeyRead``:
    ``ResourceKMSCryptoKeyFlatten`` of the fields the program sets, ``deletion_policy`` its default DELETE)."""
    return {
        "name": reply["name"].rsplit("/", 1)[-1],
        "keyRing": reply["name"].rsplit("/cryptoKeys/", 1)[0],
        "purpose": reply["purpose"],
        "rotationPeriod": reply.get("rotationPeriod", ""),
        "deletionPolicy": "DELETE",
    }


@pytest.mark.slow
def test_a_ring_without_its_key_is_imported_and_the_key_created(compute):
    compute.routes[RING] = (200, key_ring(RING_ID))
    plan, imports = up(compute)
    assert plan.error is None, plan.error
    assert imports["key-ring"] == RING_ID and imports["secrets-key"] == ""


SKIP = " (tpu-rl:workflow.capacityCheck: false skips this check)"
AGAIN = "then `pulumi up` again (it adopts the key)"


@pytest.mark.parametrize(
    ("key", "line"),
    [
        (
            key_after_destroy(KEY_ID),
            f"has its primary version 3 scheduled for destruction on 2027-01-03T08:45Z (until then it can be "
            f"restored); GKE needs an enabled one: run `gcloud kms keys versions restore 3 {WHERE} && gcloud kms keys "
            f"versions enable 3 {WHERE}`, {AGAIN}",
        ),
        (
            key_after_destroy(KEY_ID, "DISABLED"),
            f"has its primary version 3 DISABLED; GKE needs an enabled one: run `gcloud kms keys versions enable 3 "
            f"{WHERE}`, {AGAIN}",
        ),
        (
            key_after_destroy(KEY_ID, "DESTROYED"),
            f"has its primary version 3 DESTROYED (its key material is gone for good); GKE needs an enabled one: run "
            f"`gcloud kms keys versions create {WHERE} --primary`, {AGAIN}",
        ),
        (
            crypto_key(KEY_ID, primary=None, rotation=False),
            f"has no primary version; GKE needs an enabled one: run `gcloud kms keys versions create {WHERE} "
            f"--primary`, {AGAIN}",
        ),
    ],
    ids=["destroy-scheduled", "restored-not-enabled", "destroyed", "no-primary"],
)
@pytest.mark.slow
def test_a_key_a_destroy_left_stops_up_before_anything_with_the_one_command_that_makes_it_usable(compute, key, line):
    """What `pulumi destroy` leaves (every version scheduled for destruction, then destroyed 30 days on): the name can
    never hold a new key, but the key itself can be made usable again. `up` stops before anything is created, with the
    one command for the primary's state (Cloud KMS: a version scheduled for destruction is restored to DISABLED, then
    enabled; a destroyed one never comes back, so a new version is made primary)."""
    compute.routes[RING] = (200, key_ring(RING_ID))
    compute.routes[KEY] = (200, key)
    plan, _ = up(compute)
    assert plan.resources == [], "nothing is registered"
    assert str(plan.error) == (
        f"capacity check: {KEY_SETTING}: key {KEY_ID}, which Cloud KMS keeps after a destroy, {line}{SKIP}"
    )


@pytest.mark.slow
def test_a_surviving_key_gke_can_never_use_stops_up_naming_the_key_to_set(compute):
    """A key of the stack's name for another purpose (a purpose never changes): one line, whatever its versions."""
    compute.routes[RING] = (200, key_ring(RING_ID))
    compute.routes[KEY] = (200, crypto_key(KEY_ID, "ASYMMETRIC_SIGN", primary=None))
    plan, _ = up(compute)
    assert plan.resources == [], "nothing is registered"
    assert str(plan.error) == (
        f"capacity check: {KEY_SETTING}: key {KEY_ID} is for ASYMMETRIC_SIGN; GKE needs an ENCRYPT_DECRYPT key; Cloud "
        f"KMS never frees a key's name, so set {KEY_SETTING} to another ENCRYPT_DECRYPT key in the cluster's region "
        f"(gcloud kms keys create ...), or change tpu-rl:clusterName{SKIP}"
    )


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
    usable = CryptoKey("ENCRYPT_DECRYPT", "ENABLED", "3")
    assert surviving_key_findings("r", False, "k", None) == []
    assert [f.reuse for f in surviving_key_findings("r", True, "k", None)] == ["r"]
    assert [f.reuse for f in surviving_key_findings("r", True, "k", usable)] == ["r", "k"]
    (_, note) = surviving_key_findings("r", True, "k", usable)
    assert "rotation" not in note.text, "a key that still rotates (an older stack's, abandoned) is adopted as it is"
    (problem,) = surviving_key_findings("r", True, KEY_ID, CryptoKey("ENCRYPT_DECRYPT", "DISABLED", "3"))
    assert problem.level == "problem" and problem.reuse == "", "nothing is reused when `up` stops"
    unknown = surviving_key_findings("r", True, "k", None, key_error="reading Cloud KMS key k: HTTP 500")
    assert [(f.level, f.reuse) for f in unknown] == [("note", "r"), ("unknown", "")]
    assert surviving_key_findings("r", None, "k", None, ring_error="x")[0] == Finding(
        "unknown",
        f"x; if an earlier destroy left key ring r, its create fails with 409 (already exists): then set {KEY_SETTING} "
        "to its key k",
    )


@pytest.mark.pure
def test_the_command_for_each_state_of_the_primary_version():
    """Cloud KMS's version states (CryptoKeyVersionState): only DESTROY_SCHEDULED (restore, then enable) and DISABLED
    (enable) come back; any other state that is not ENABLED, and no primary, get a new primary version."""
    restore, enable, create = (
        f"gcloud kms keys versions restore 7 {WHERE}",
        f"gcloud kms keys versions enable 7 {WHERE}",
        f"gcloud kms keys versions create {WHERE} --primary",
    )
    expected = {
        "DESTROY_SCHEDULED": f"{restore} && {enable}",
        "DISABLED": enable,
        "DESTROYED": create,
        "PENDING_GENERATION": create,
        "IMPORT_FAILED": create,
        None: create,
    }
    for state, command in expected.items():
        key = CryptoKey("ENCRYPT_DECRYPT", state, "7" if state else "")
        assert key_version_fix(KEY_ID, key) == command, state
    with pytest.raises(ValueError, match="not a Cloud KMS key name"):
        key_version_fix("k", CryptoKey("ENCRYPT_DECRYPT", "DISABLED", "7"))


def test_a_key_of_ones_own_is_never_imported():
    own = "projects/security-project/locations/us-east5/keyRings/gke/cryptoKeys/secrets"
    s = settings("prod", [f"{KEY_SETTING}={own}"])
    assert s.gke.secrets_key == own  # read, judged (test_capacity), granted; never created nor imported
