"""Destroy, then `up` again: the names a destroy leaves taken (``capacity.SURVIVORS``), found by the capacity check
before anything is created. With ``gke.secretsEncryptionKey: create`` Cloud KMS keeps the key ring (the provider
never deletes one) and the key (the provider's DELETE schedules its versions for destruction and turns its rotation
off, and leaves the key): a loopback KMS answering as after a destroy, through the real client, then the program
under the mock runtime, which imports what can be reused and stops, with the one command to run, on what cannot be
yet. A key of the stack's names that a destroy did not leave (another stack's, a cluster of the project encrypting
its Secrets with it: the loopback GKE ``clusters.list``) is never imported: `up` stops before anything is
registered, naming it, so no second stack of the same names can schedule its versions for destruction or delete its
grant."""

from __future__ import annotations

import functools

import pytest
from google.auth.credentials import AnonymousCredentials

from core.names import KEYS_IN_STATE
from infra.gcp import capacity
from infra.gcp.capacity import SURVIVORS, CryptoKey, Finding, key_version_fix, surviving_key_findings
from infra.gcp.capacity.keys import Claim, ReplyError, clusters_reply, judge_key
from tests.conftest import SENTINEL_TOKEN, one
from tests.fake_compute import (
    crypto_key,
    error,
    fake_compute,
    gke_cluster,
    key_after_destroy,
    key_ring,
    reservation,
    serve_project,
)
from tests.lifecycle_walk import settings
from tests.world import fake_world
from tools.plan import plan_stack
from tools.stack_files import ROOT

pytestmark = pytest.mark.usefixtures("google_clients")

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
PROD = {"app": "tpu-rl", "stack": "prod", "cluster": "tpu-rl-prod", "managed-by": "pulumi"}
"""The labels the prod stack writes on its key (``Settings.labels``)."""
DEV = {**PROD, "stack": "dev"}


@pytest.fixture
def compute(monkeypatch):
    """The real project's Compute and Service Usage answer well; no ring yet (a test makes one survive)."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.delenv(KEYS_IN_STATE, raising=False)
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
        world=functools.partial(fake_world, capacity=REAL_CHECK),
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
    key = one(plan, "gcp:kms/cryptoKey:CryptoKey", "secrets-key")["inputs"]
    assert key["deletionPolicy"] == "DELETE" and key["keyRing"] == "key-ring-id", "the same inputs as a create"
    assert one(plan, "gcp:container/cluster:Cluster")["inputs"]["databaseEncryption"] == {
        "state": "ENCRYPTED",
        "keyName": KEY_ID,
    }
    assert (
        "INFO",
        f"capacity check: key {KEY_ID} exists (Cloud KMS keeps a key after a destroy) and no cluster is known to use "
        "it (its rotation is off, as a destroy leaves it; this `up` turns it back on): this `up` adopts it",
    ) in plan.logs
    assert "/v1/projects/real-project-1/locations/-/clusters" in compute.requests, "whether a cluster uses it, read"
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
AGAIN = "then `make up STACK=prod` again (it adopts the key)"


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
# A key a destroy did not leave: another stack's, or this stack's own


LIVE = crypto_key(KEY_ID, labels=PROD)
"""The prod stack's key while its cluster runs: rotating every 90 days, its primary enabled, its labels."""
SET_INSTEAD = (
    f"set tpu-rl:clusterName to a name no other stack of project {PROJECT} uses (its key ring and key are then new), "
    f"or {KEY_SETTING} to another key"
)


IN_USE = (gke_cluster("tpu-rl-prod", "us-east5", KEY_ID),)
"""The prod stack's cluster, its Secrets encrypted with the key."""


def _live(compute, key=LIVE, clusters=IN_USE):
    compute.routes[RING] = (200, key_ring(RING_ID))
    compute.routes[KEY] = (200, key)
    compute.clusters = list(clusters)


@pytest.mark.slow
def test_a_new_stack_of_a_live_stacks_names_stops_naming_the_key_and_its_cluster(compute, monkeypatch):
    """prod created again in another backend: the same labels, the same names, an empty state (``make up`` hands
    over the keys the state holds: none). Nothing is registered, so nothing of the live key or its grant can ever be
    in this state for a destroy to delete."""
    _live(compute)
    monkeypatch.setenv(KEYS_IN_STATE, "")
    plan, _ = up(compute)
    assert plan.resources == [], "nothing is registered"
    assert str(plan.error) == (
        f"capacity check: {KEY_SETTING}: key {KEY_ID} encrypts the Secrets of GKE cluster us-east5/tpu-rl-prod (the "
        f"key's labels name stack prod and cluster tpu-rl-prod), so this stack does not adopt it: {SET_INSTEAD}; stack "
        f"prod's state does not hold it: if this is that stack, run `up` against the backend that holds its state{SKIP}"
    )


@pytest.mark.slow
def test_another_stacks_key_in_use_stops_up_whatever_the_state_says(compute, monkeypatch):
    """dev configured with prod's clusterName: the key's labels name dev, whose cluster (of the same name) uses it."""
    _live(compute, crypto_key(KEY_ID, labels=DEV))
    plan, _ = up(compute)
    assert plan.resources == []
    assert str(plan.error) == (
        f"capacity check: {KEY_SETTING}: key {KEY_ID} encrypts the Secrets of GKE cluster us-east5/tpu-rl-prod (the "
        f"key's labels name stack dev and cluster tpu-rl-prod), so this stack does not adopt it: {SET_INSTEAD}{SKIP}"
    )
    other = [gke_cluster("team-a", "us-central1-a", KEY_ID)]
    _live(compute, key_after_destroy(KEY_ID, "ENABLED", labels=PROD), other)
    plan, _ = up(compute)
    assert plan.resources == [] and "GKE cluster us-central1-a/team-a (" in str(plan.error), (
        "a key whose rotation a destroy turned off, used since by another cluster: never adopted"
    )


@pytest.mark.slow
def test_this_stacks_own_key_in_use_is_taken_from_its_state_and_never_imported(compute):
    """A later `up` of the stack, by hand (the state's keys unknown): its cluster uses its key, labelled by it. The
    state holds both, so nothing is imported; a copy of the stack whose state does not hold them stops at the ring's
    create with 409 (Cloud KMS never frees a name), having imported nothing that its destroy could delete."""
    _live(compute)
    plan, imports = up(compute)
    assert plan.error is None, plan.error
    assert imports["key-ring"] == "" and imports["secrets-key"] == "", "nothing imported"
    assert (
        "INFO",
        f"capacity check: key {KEY_ID} encrypts the Secrets of cluster us-east5/tpu-rl-prod, this stack's by its name "
        "and the key's labels: this `up` takes it as the stack's state records it, without importing it (a stack whose "
        "state does not hold it fails at its create with 409, changing nothing of it)",
    ) in plan.logs


@pytest.mark.slow
def test_a_key_the_state_holds_is_the_stacks_own_and_its_import_a_no_op(compute, monkeypatch):
    _live(compute, clusters=[gke_cluster("tpu-rl-prod", "us-east5", KEY_ID), gke_cluster("x", "us-east5", KEY_ID)])
    monkeypatch.setenv(KEYS_IN_STATE, f"projects/other/locations/us-east5/keyRings/r/cryptoKeys/k,{KEY_ID}")
    plan, imports = up(compute)
    assert plan.error is None, plan.error
    assert imports["key-ring"] == RING_ID and imports["secrets-key"] == KEY_ID, "the ids the state holds: no import"
    assert "/v1/projects/real-project-1/locations/-/clusters" not in compute.requests, "nothing else to tell"


@pytest.mark.slow
def test_a_rotating_key_no_cluster_uses_is_adopted_by_its_labels_only(compute):
    """Rotating with an enabled primary and no cluster: this stack's key whose cluster was never made, or one a destroy
    with ``deletion_policy: ABANDON`` (an older version) left: its labels are the stack's own record. Another stack's
    labels stop `up`."""
    _live(compute, clusters=[gke_cluster("tpu-rl-prod", "us-east5")])
    plan, imports = up(compute)
    assert plan.error is None and imports["secrets-key"] == KEY_ID
    _live(compute, crypto_key(KEY_ID, labels=DEV), clusters=[])
    plan, _ = up(compute)
    assert plan.resources == []
    assert str(plan.error) == (
        f"capacity check: {KEY_SETTING}: key {KEY_ID} rotates with an enabled primary version, which no destroy "
        f"leaves (the key's labels name stack dev and cluster tpu-rl-prod), so this stack does not adopt it: "
        f"{SET_INSTEAD}{SKIP}"
    )


@pytest.mark.slow
def test_a_key_whose_users_cannot_be_read_is_adopted_only_as_a_destroy_left_it(compute):
    _live(compute)
    compute.routes["/v1/projects/real-project-1/locations/-/clusters"] = (
        403,
        error(403, "Permission 'container.clusters.list' denied", "forbidden"),
    )
    plan, imports = up(compute)
    assert plan.error is None and imports["key-ring"] == "" and imports["secrets-key"] == ""
    (warning,) = [m for m in plan.warnings() if KEY_ID in m]
    assert warning == (
        f"capacity check: listing the GKE clusters of project {PROJECT}: permission denied (HTTP 403); whether a GKE "
        f"cluster uses key {KEY_ID} is unknown, so this `up` adopts it only as a destroy leaves it (its rotation off): "
        "otherwise, if the stack's state does not hold it, its create fails with 409 (already exists)"
    )
    compute.routes[KEY] = (200, key_after_destroy(KEY_ID, "ENABLED", labels=DEV))
    plan, imports = up(compute)
    assert plan.error is None and imports["secrets-key"] == KEY_ID, "rotation off: what a destroy leaves"
    assert len([m for m in plan.warnings() if KEY_ID in m]) == 1


# ---------------------------------------------------------------------------------------------
# Every name the stack creates, and the rule (pure)


def test_every_gcp_resource_the_stacks_create_says_whether_a_destroy_frees_its_name(dev_plan, prod_plan):
    for stack, plan in (("prod", prod_plan), ("dev", dev_plan)):
        types = {r["type"] for r in plan.resources}
        named = {t for t in types if t.startswith(("gcp:", "pulumi-python:", "pulumi:providers:"))}
        assert named <= set(SURVIVORS), f"{stack}: no row for {sorted(named - set(SURVIVORS))}"
    kept = sorted(t for t, (freed, _) in SURVIVORS.items() if not freed)
    assert kept == ["gcp:kms/cryptoKey:CryptoKey", "gcp:kms/keyRing:KeyRing"], "each kept name has a test above"


OURS = Claim("prod", "tpu-rl-prod", "us-east5")
"""This stack as the check tells it: no cluster uses the key, the state's keys unknown."""


@pytest.mark.pure
def test_what_a_surviving_ring_and_key_mean():
    left = CryptoKey("ENCRYPT_DECRYPT", "ENABLED", "3", rotates=False)
    assert surviving_key_findings("r", False, "k", None, OURS) == []
    assert [f.reuse for f in surviving_key_findings("r", True, "k", None, OURS)] == ["r"]
    assert [f.reuse for f in surviving_key_findings("r", True, KEY_ID, left, OURS)] == ["r", KEY_ID]
    (problem,) = surviving_key_findings("r", True, KEY_ID, CryptoKey("ENCRYPT_DECRYPT", "DISABLED", "3"), OURS)
    assert problem.level == "problem" and problem.reuse == "", "nothing is reused when `up` stops"
    live = CryptoKey("ENCRYPT_DECRYPT", "ENABLED", "3", stack="prod", cluster="tpu-rl-prod")
    in_use = Claim("prod", "tpu-rl-prod", "us-east5", users=("us-east5/tpu-rl-prod",))
    (note,) = surviving_key_findings("r", True, KEY_ID, live, in_use)
    assert note.level == "note" and note.reuse == "", "in use: neither the key nor its ring is imported"
    unknown = surviving_key_findings("r", True, "k", None, OURS, key_error="reading Cloud KMS key k: HTTP 500")
    assert [(f.level, f.reuse) for f in unknown] == [("note", "r"), ("unknown", "")]
    assert surviving_key_findings("r", None, "k", None, OURS, ring_error="x")[0] == Finding(
        "unknown",
        f"x; if an earlier destroy left key ring r, its create fails with 409 (already exists): then set {KEY_SETTING} "
        "to its key k",
    )


def _key(rotates=True, primary="ENABLED", stack="prod", cluster="tpu-rl-prod"):
    return CryptoKey("ENCRYPT_DECRYPT", primary, "3" if primary else "", rotates=rotates, stack=stack, cluster=cluster)


MINE, TWIN, OTHER = ("us-east5/tpu-rl-prod",), ("us-east5/tpu-rl-prod",), ("us-central1/team-a",)


@pytest.mark.pure
@pytest.mark.parametrize(
    ("key", "users", "held", "outcome"),
    [
        # what a destroy leaves: rotation off (after the fix, an enabled primary), no cluster
        (_key(rotates=False), (), None, "adopt"),
        (_key(rotates=False, stack="dev"), (), False, "adopt"),
        (_key(rotates=False, primary="DESTROY_SCHEDULED"), (), None, "problem"),
        (_key(rotates=False), None, None, "adopt"),
        # the stack's own record: its labels, or its state
        (_key(), (), None, "adopt"),
        (_key(), (), False, "adopt"),
        (_key(stack="dev"), (), True, "adopt"),
        (_key(stack="dev"), OTHER, True, "adopt"),
        (_key(primary="DISABLED"), MINE, True, "problem"),
        # in use by a cluster: never adopted
        (_key(), MINE, None, "keep"),
        (_key(), MINE + OTHER, None, "keep"),
        (_key(), TWIN, False, "problem"),
        (_key(), OTHER, None, "problem"),
        (_key(), OTHER, False, "problem"),
        (_key(stack="dev"), MINE, None, "problem"),
        (_key(stack="", cluster=""), MINE, None, "problem"),
        (_key(rotates=False), OTHER, None, "problem"),
        (_key(rotates=False, primary="DESTROY_SCHEDULED"), OTHER, None, "problem"),
        # not a leftover, not this stack's by its labels
        (_key(stack="dev"), (), None, "problem"),
        (_key(cluster="other"), (), None, "problem"),
        (_key(stack="", cluster=""), (), None, "problem"),
        # users unknown: only what a destroy leaves is adopted
        (_key(), None, None, "unknown"),
    ],
)
def test_a_key_is_adopted_only_when_a_destroy_left_it_or_the_stacks_own_record_says_so(key, users, held, outcome):
    """``judge_key``'s table: no row adopts a key a cluster of another stack uses, nor one that rotates with an enabled
    primary unless the state or the key's labels say it is this stack's."""
    claim = Claim("prod", "tpu-rl-prod", "us-east5", users=users, users_error="x" if users is None else "", held=held)
    findings, adopt = judge_key(KEY_ID, key, claim)
    twin = any("stack prod's state does not hold it" in f.text for f in findings)
    assert twin == (held is False and bool(users) and (key.stack, key.cluster) == ("prod", "tpu-rl-prod")), (
        "the state is named only when it is known"
    )
    assert findings and all("\n" not in f.text for f in findings)
    levels = {f.level for f in findings}
    got = "adopt" if adopt else next(level for level in ("problem", "unknown", "note") if level in levels)
    assert {"note": "keep"}.get(got, got) == outcome
    assert [f.reuse for f in findings if f.reuse] == ([KEY_ID] if adopt else []), "an adopted key is imported, only it"
    assert ("unknown" in levels) == (users is None), "clusters that cannot be read are a warning, whatever follows"


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


@pytest.mark.pure
def test_a_cluster_uses_the_key_it_encrypts_with_or_still_decrypts_with():
    """GKE's ``ListClustersResponse``: ``databaseEncryption.keyName``, or ``decryptionKeys`` (output only: keys the
    cluster still decrypts existing objects with); a reply with ``missingZones`` may lack their clusters."""
    old = "projects/p/locations/us-east5/keyRings/r/cryptoKeys/old"
    reply = {
        "clusters": [
            gke_cluster("a", "us-east5", KEY_ID),
            gke_cluster(
                "b", "us-east5-b", "projects/p/locations/us-east5/keyRings/r/cryptoKeys/new", decryption_keys=(KEY_ID,)
            ),
            gke_cluster("c", "us-east5", old),
            gke_cluster("d", "us-east5"),
        ]
    }
    assert clusters_reply(reply, KEY_ID) == ("us-east5-b/b", "us-east5/a")
    assert clusters_reply({}, KEY_ID) == (), "no cluster: GKE leaves the field out"
    with pytest.raises(ReplyError, match="missingZones lists us-east5-c"):
        clusters_reply({**reply, "missingZones": ["us-east5-c"]}, KEY_ID)
    with pytest.raises(ReplyError, match=r"clusters\[0\] is str"):
        clusters_reply({"clusters": ["a"]}, KEY_ID)
