"""What ``grant-targets`` counts as the stack's own (``grants.own_resources``) from the stack's configuration and from
what a declared resource leaves out, seen through the grants it then passes or refuses, called as the engine calls the
policy at `pulumi up` (the stack's configuration set as ``ConfigureStack`` sets ``DEPLOYMENT``) on small stacks built
by hand:

- the Cloud KMS key given in ``tpu-rl:gke`` ``secretsEncryptionKey`` (a ``projects/...`` id) is the stack's, so GKE's
  service agent may be granted it with no ``CryptoKey`` declared; a value that is no key id adds none;
- every ``CryptoKey`` the stack declares is its own, not only the last one read;
- a ``Bucket`` whose name is missing or no text adds no bucket named ``""``: a grant on an empty bucket name is still
  refused;
- an ``Account`` given no email is known by ``<accountId>@<project>.iam.gserviceaccount.com`` only when both are
  text; one given its email is known by that email, whatever its id and project;
- the recorded state home (``tpu-rl:stateBackend``) names a state bucket no grant may land on.

Each finding is the exact line an operator reads, on the grant's (or the bucket's) URN."""

from __future__ import annotations

import json
from typing import Any

import pytest

from policy.tpu_rl_policies.resources import DEPLOYMENT
from tests.grant_cases import grant_findings, prod_resource
from tools.plan.offline import UNKNOWN

pytestmark = pytest.mark.pure

PROJECT = "my-tpu-prod-project"
STACK_CONFIG = {"gcp:project": PROJECT, "tpu-rl:clusterName": "tpu-rl-prod"}
RING = f"projects/{PROJECT}/locations/us-east5/keyRings/tpu-rl-prod-keys"
KEY = f"{RING}/cryptoKeys/gke-secrets"
AGENT = "serviceAccount:service-123456789012@container-engine-robot.iam.gserviceaccount.com"
PRINCIPAL = f"serviceAccount:{PROJECT}.svc.id.goog[tpu-rl/tpu-rl-prod-export]"
BUCKET_TYPE = "gcp:storage/bucket:Bucket"
ACCOUNT = "gcp:serviceaccount/account:Account"
CRYPTO_KEY = "gcp:kms/cryptoKey:CryptoKey"
KEY_IAM = "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember"
BUCKET_IAM = "gcp:storage/bucketIAMMember:BucketIAMMember"
ACCOUNT_IAM = "gcp:serviceaccount/iAMMember:IAMMember"
KEY_ROLE = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
BUCKET_READER = "roles/storage.legacyBucketReader"
IDENTITY_USER = "roles/iam.workloadIdentityUser"


@pytest.fixture(autouse=True)
def engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """At `pulumi up`, the prod stack's project and cluster configured (each test adds what it needs), restored
    after the test."""
    monkeypatch.setattr(DEPLOYMENT, "config", dict(STACK_CONFIG))
    monkeypatch.setattr(DEPLOYMENT, "dry_run", False)


def configure(monkeypatch: pytest.MonkeyPatch, **settings: str) -> None:
    """The prod stack's configuration with ``settings`` (``tpu-rl:<key>`` -> the engine's text) added."""
    monkeypatch.setattr(DEPLOYMENT, "config", {**STACK_CONFIG, **{f"tpu-rl:{k}": v for k, v in settings.items()}})


def urn(type_: str, name: str) -> str:
    return f"urn:pulumi:prod::tpu-rl::{type_}::{name}"


def found(*resources: Any) -> list[tuple[str, str | None]]:
    return grant_findings(list(resources))


# The stack's Cloud KMS key.


def key_grant(key: str, name: str = "grant") -> Any:
    """GKE's service agent granted the key ``key``, as ``infra/gcp/kms.py`` grants it."""
    return prod_resource(KEY_IAM, name, {"cryptoKeyId": key, "role": KEY_ROLE, "member": AGENT})


def not_the_stacks_key(key: str, name: str = "grant") -> tuple[str, str]:
    message = f"{name}: grants on the key {key}, not the stack's (tpu-rl:gke.secretsEncryptionKey): remove the grant"
    return (message, urn(KEY_IAM, name))


def test_the_configured_secrets_key_is_the_stacks_with_no_key_declared(monkeypatch: pytest.MonkeyPatch) -> None:
    """``tpu-rl:gke`` given ``secretsEncryptionKey`` (a key the stack does not declare): GKE's service agent may be
    granted that key; another key of its ring is still refused, on its grant."""
    configure(monkeypatch, gke=json.dumps({"secretsEncryptionKey": KEY, "location": "us-east5"}))
    assert found(key_grant(KEY)) == []
    assert found(key_grant(f"{RING}/cryptoKeys/other")) == [not_the_stacks_key(f"{RING}/cryptoKeys/other")]


NOT_A_KEY_ID = "tpu-rl-prod-keys/cryptoKeys/gke-secrets"
NO_KEY_GIVEN = {
    "no-gke-setting": (None, KEY),
    "no-secrets-key": (json.dumps({"location": "us-east5"}), KEY),
    "the-key-under-another-field": (json.dumps({"databaseEncryptionKey": KEY}), KEY),
    "a-key-id-not-of-a-project": (json.dumps({"secretsEncryptionKey": NOT_A_KEY_ID}), NOT_A_KEY_ID),
    "a-key-given-as-an-object": (json.dumps({"secretsEncryptionKey": {"id": KEY}}), KEY),
    "the-key-as-the-whole-setting": (KEY, KEY),
}


@pytest.mark.parametrize("case", list(NO_KEY_GIVEN), ids=list(NO_KEY_GIVEN))
def test_a_secrets_key_not_given_as_a_key_id_is_not_the_stacks(monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    """Near miss: no ``secretsEncryptionKey`` in ``tpu-rl:gke``, one that is not a ``projects/...`` id, or the id
    given otherwise than as that field of the object: the key is not the stack's, and granting it is refused."""
    gke, key = NO_KEY_GIVEN[case]
    if gke is not None:
        configure(monkeypatch, gke=gke)
    assert found(key_grant(key)) == [not_the_stacks_key(key)]


def test_every_declared_key_is_the_stacks_not_only_the_last() -> None:
    """Two ``CryptoKey`` resources in a ring the stack does not declare: each is the stack's by its ring's id, so
    GKE's service agent is granted both; a third key of the ring is refused, on its grant alone."""
    keys = [
        prod_resource(CRYPTO_KEY, "secrets-key", {"name": "gke-secrets", "keyRing": RING}),
        prod_resource(CRYPTO_KEY, "backup-key", {"name": "backup", "keyRing": RING}),
    ]
    grants = [key_grant(KEY, "first"), key_grant(f"{RING}/cryptoKeys/backup", "second")]
    third = key_grant(f"{RING}/cryptoKeys/third", "third")
    assert found(*keys, *grants, third) == [not_the_stacks_key(f"{RING}/cryptoKeys/third", "third")]


# The stack's bucket.


def bucket_grant(bucket: str) -> Any:
    """Bucket names to an account the stack does not declare (whose holder ``stack-principals`` judges)."""
    member = f"serviceAccount:tpu-rl-prod-export@{PROJECT}.iam.gserviceaccount.com"
    return prod_resource(BUCKET_IAM, "grant", {"bucket": bucket, "role": BUCKET_READER, "member": member})


def not_the_stacks_bucket(bucket: str) -> tuple[str, str]:
    message = (
        f"grant: grants on bucket {bucket}, which is neither the stack's bucket nor a shared Hub cache the policy "
        "config names (grant-targets hubCaches): another stack's or project's data: grant on the stack's own bucket"
    )
    return (message, urn(BUCKET_IAM, "grant"))


@pytest.mark.parametrize("name", [None, 42], ids=["no-name", "a-number"])
@pytest.mark.parametrize("granted", ["", "gs://"], ids=["empty", "gs-url-of-no-bucket"])
def test_a_bucket_of_no_name_makes_no_empty_bucket_name_the_stacks(name: Any, granted: str) -> None:
    """A ``Bucket`` whose name is missing or no text is no bucket named ``""``: a grant whose bucket is empty (``""``
    or a bare ``gs://``) is refused as another's, on the grant."""
    props = {"project": PROJECT, "location": "US-EAST5"} | ({} if name is None else {"name": name})
    assert found(prod_resource(BUCKET_TYPE, "bucket", props), bucket_grant(granted)) == [not_the_stacks_bucket("")]


def test_a_named_bucket_is_the_stacks() -> None:
    """Near miss: the bucket named, a grant of bucket names on it passes."""
    props = {"name": f"{PROJECT}-tpu-rl-prod", "project": PROJECT, "location": "US-EAST5"}
    assert found(prod_resource(BUCKET_TYPE, "bucket", props), bucket_grant(f"{PROJECT}-tpu-rl-prod")) == []


# The stack's accounts.


def account_grant(email: str) -> Any:
    """A Kubernetes service account bound to the account ``email``, as ``infra/gcp/identities.py`` binds it."""
    props = {
        "serviceAccountId": f"projects/{PROJECT}/serviceAccounts/{email}",
        "role": IDENTITY_USER,
        "member": PRINCIPAL,
    }
    return prod_resource(ACCOUNT_IAM, "grant", props)


def not_the_stacks_account(email: str) -> tuple[str, str]:
    return (
        f"grant: grants on the account {email}, not one of the stack's: remove the grant",
        urn(ACCOUNT_IAM, "grant"),
    )


EXPORT = f"tpu-rl-prod-export@{PROJECT}.iam.gserviceaccount.com"
NO_EMAIL: dict[str, tuple[dict[str, Any], str]] = {
    "no-account-id": ({"project": PROJECT}, f"None@{PROJECT}.iam.gserviceaccount.com"),
    "an-account-id-of-no-text": ({"accountId": 42, "project": PROJECT}, f"42@{PROJECT}.iam.gserviceaccount.com"),
    "no-project": ({"accountId": "tpu-rl-prod-export"}, "tpu-rl-prod-export@None.iam.gserviceaccount.com"),
    "a-project-of-no-text": (
        {"accountId": "tpu-rl-prod-export", "project": 7},
        "tpu-rl-prod-export@7.iam.gserviceaccount.com",
    ),
}


@pytest.mark.parametrize("case", list(NO_EMAIL), ids=list(NO_EMAIL))
def test_an_account_given_no_email_nor_an_id_and_project_as_text_adds_no_account(case: str) -> None:
    """An ``Account`` with no email whose ``accountId`` or ``project`` is missing or no text: no email is built of
    what is missing (``None@...``, ``42@...``, ``...@None...``), so a grant on such an email is refused as another's,
    on the grant."""
    props, email = NO_EMAIL[case]
    assert found(prod_resource(ACCOUNT, "export", props), account_grant(email)) == [not_the_stacks_account(email)]


def test_an_account_given_no_email_is_known_by_its_id_and_project() -> None:
    """Near miss: the same account with its id and project as text is ``<accountId>@<project>.iam.gserviceaccount
    .com``: a Kubernetes service account bound to it passes."""
    props = {"accountId": "tpu-rl-prod-export", "project": PROJECT}
    assert found(prod_resource(ACCOUNT, "export", props), account_grant(EXPORT)) == []


@pytest.mark.parametrize(
    "props",
    [
        {"accountId": "tpu-rl-prod-export"},
        {"accountId": "tpu-rl-prod-export", "project": "other-project"},
    ],
    ids=["no-project", "another-project-given"],
)
def test_an_account_given_its_email_is_known_by_that_email(props: dict[str, Any]) -> None:
    """An ``Account`` given its email is known by it, not by one built of its id and project: a binding on the given
    email passes, one on the built email (``...@None...``, ``...@other-project...``) is refused, on the grant."""
    account = prod_resource(ACCOUNT, "export", {**props, "email": EXPORT})
    built = f"tpu-rl-prod-export@{props.get('project')}.iam.gserviceaccount.com"
    assert found(account, account_grant(EXPORT)) == []
    assert found(account, account_grant(built)) == [not_the_stacks_account(built)]


# The recorded state home.

STATE_HOME = "tpu-rl-state-home"


def test_the_recorded_state_home_is_a_state_bucket_no_grant_lands_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """``tpu-rl:stateBackend`` ``gs://tpu-rl-state-home/prod``: the stack's bucket of that name is refused (on the
    bucket) and so is a grant on it (on the grant), though the name is not a ``-pulumi-state`` one."""
    configure(monkeypatch, stateBackend=f"gs://{STATE_HOME}/prod")
    bucket = prod_resource(BUCKET_TYPE, "bucket", {"name": STATE_HOME, "project": PROJECT, "location": "US-EAST5"})
    assert found(bucket, bucket_grant(STATE_HOME)) == [
        (
            f"bucket: the stack's bucket is named as a Pulumi state bucket ({STATE_HOME}): its grants would reach the "
            "state: name the bucket otherwise (tpu-rl:bucketName)",
            urn(BUCKET_TYPE, "bucket"),
        ),
        (
            f"grant: grants on {STATE_HOME}, a Pulumi state bucket: the state and its secrets are reached by the "
            "account that runs pulumi only (make state-bucket), never by a workload: remove the grant",
            urn(BUCKET_IAM, "grant"),
        ),
    ]


@pytest.mark.parametrize(
    "recorded", [None, "", "file:///home/ops/.pulumi"], ids=["none-recorded", "empty", "a-local-home"]
)
def test_with_no_gcs_state_home_recorded_the_bucket_is_the_stacks(
    monkeypatch: pytest.MonkeyPatch, recorded: str | None
) -> None:
    """Near miss: no ``tpu-rl:stateBackend``, an empty one, or a home that is no bucket: the same bucket is the
    stack's and the grant on it passes."""
    if recorded is not None:
        configure(monkeypatch, stateBackend=recorded)
    bucket = prod_resource(BUCKET_TYPE, "bucket", {"name": STATE_HOME, "project": PROJECT, "location": "US-EAST5"})
    assert found(bucket, bucket_grant(STATE_HOME)) == []


@pytest.mark.parametrize("recorded", ["https://api.pulumi.com", "file:///home/ops/.pulumi"], ids=["cloud", "local"])
def test_a_bucket_whose_name_is_not_known_is_not_the_home_that_is_no_bucket(
    monkeypatch: pytest.MonkeyPatch, recorded: str
) -> None:
    """A home that is no bucket names none: the stack's bucket whose name a preview does not know yet (read as no
    text) is not taken for it (it was: both read as the empty name)."""
    configure(monkeypatch, stateBackend=recorded)
    bucket = prod_resource(BUCKET_TYPE, "bucket", {"name": UNKNOWN, "project": PROJECT, "location": "US-EAST5"})
    assert found(bucket) == []
