"""What ``grant-targets`` counts as the stack's own (``grants.own_resources``), seen through the grants it then passes
or refuses, called as the engine calls the policy (at `pulumi up`, the stack's configuration from ``ConfigureStack``)
on small stacks built by hand:

- the Cloud KMS key: a ``CryptoKey`` is the stack's by its ``keyRing`` id (``<keyRing>/cryptoKeys/<name>``) even when
  the stack declares no ``KeyRing``; a key of another ring, or another key of the ring, is refused;
- which of the stack's kinds an account is (``system``, ``cpu``, ``tpu`` or a step), by its id
  ``<clusterName>-<suffix>``: of two cluster names one of which prefixes the other (``tpu-rl`` and ``tpu-rl-prod``),
  the longest that prefixes the id names it; an id of no cluster, or an account known by its email alone, is of no
  kind and holds nothing;
- the cluster names: the stack's clusters and ``tpu-rl:clusterName``, ``tpu-rl`` when neither gives one as text (a
  cluster whose name is missing or no text, an empty ``clusterName``);
- the projects: ``gcp:project``, else (unset or empty) the stack's clusters' projects, a cluster whose project is
  missing or no text adding none.

Each finding is the exact line an operator reads, on the grant's URN."""

from __future__ import annotations

from typing import Any

import pytest

from policy.tpu_rl_policies.resources import DEPLOYMENT
from tests.grant_cases import AGENT, KEY_IAM, PROJECT, PROJECT_IAM, STACK_CONFIG, grant_findings, prod_resource

pytestmark = pytest.mark.pure

CLUSTER = "gcp:container/cluster:Cluster"
ACCOUNT = "gcp:serviceaccount/account:Account"
CRYPTO_KEY = "gcp:kms/cryptoKey:CryptoKey"
KEY_RING = "gcp:kms/keyRing:KeyRing"
NODE_ROLE = "roles/container.defaultNodeServiceAccount"
KEY_ROLE = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
RING = f"projects/{PROJECT}/locations/us-east5/keyRings/tpu-rl-prod-keys"
"""The key ring's id, as the provider gives it to the ``CryptoKey``'s ``keyRing`` at `pulumi up`."""
GRANT_URN = f"urn:pulumi:prod::tpu-rl::{PROJECT_IAM}::grant"


@pytest.fixture(autouse=True)
def engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """At `pulumi up` (each test sets the configuration it needs), restored after the test."""
    monkeypatch.setattr(DEPLOYMENT, "config", {})
    monkeypatch.setattr(DEPLOYMENT, "dry_run", False)


def configure(monkeypatch: pytest.MonkeyPatch, config: dict[str, str]) -> None:
    monkeypatch.setattr(DEPLOYMENT, "config", dict(config))


def found(*resources: Any) -> list[tuple[str, str | None]]:
    return grant_findings(list(resources))


def account(account_id: str) -> Any:
    return prod_resource(ACCOUNT, account_id, {"accountId": account_id, "project": PROJECT})


def email(account_id: str) -> str:
    return f"{account_id}@{PROJECT}.iam.gserviceaccount.com"


def cluster(**props: Any) -> Any:
    return prod_resource(CLUSTER, "cluster", props)


def project_grant(account_id: str, project: str = PROJECT) -> Any:
    """GKE's node role in ``project`` to the account ``account_id`` of the stack's project."""
    props = {"project": project, "role": NODE_ROLE, "member": f"serviceAccount:{email(account_id)}"}
    return prod_resource(PROJECT_IAM, "grant", props)


def unused(holder: str) -> tuple[str, str]:
    """The refusal of GKE's node role in the project to ``holder``, whose step does not use it."""
    who = f"the {holder} account" if holder else "an account of no kind the stack makes"
    message = f"grant: {NODE_ROLE} on the project to {who}: its step does not use it; remove the grant"
    return (message, GRANT_URN)


def elsewhere(project: str, own: str) -> tuple[str, str]:
    """The refusal of a grant in ``project``, the stack's projects being ``own``."""
    message = f"grant: grants {NODE_ROLE} in project {project}, not the stack's ({own}): grant in gcp:project only"
    return (message, GRANT_URN)


# The stack's Cloud KMS key.

KEY_GRANT_URN = f"urn:pulumi:prod::tpu-rl::{KEY_IAM}::grant"


def key_grant(key: str) -> Any:
    return prod_resource(KEY_IAM, "grant", {"cryptoKeyId": key, "role": KEY_ROLE, "member": AGENT})


def not_the_stacks_key(key: str) -> tuple[str, str]:
    message = f"grant: grants on the key {key}, not the stack's (tpu-rl:gke.secretsEncryptionKey): remove the grant"
    return (message, KEY_GRANT_URN)


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (f"{RING}/cryptoKeys/gke-secrets", []),
        (
            f"projects/{PROJECT}/locations/us-east5/keyRings/other-keys/cryptoKeys/gke-secrets",
            [not_the_stacks_key(f"projects/{PROJECT}/locations/us-east5/keyRings/other-keys/cryptoKeys/gke-secrets")],
        ),
        (f"{RING}/cryptoKeys/other", [not_the_stacks_key(f"{RING}/cryptoKeys/other")]),
        ("/cryptoKeys/gke-secrets", [not_the_stacks_key("/cryptoKeys/gke-secrets")]),
    ],
    ids=["the-stacks-key", "same-name-in-another-ring", "another-key-of-the-ring", "a-key-of-no-ring"],
)
def test_a_key_is_the_stacks_by_its_key_ring_id_when_the_stack_declares_no_ring(
    monkeypatch: pytest.MonkeyPatch, key: str, expected: list[tuple[str, str]]
) -> None:
    """A ``CryptoKey`` in a ring the stack does not declare (no ``KeyRing``, no ``secretsEncryptionKey``) is the
    stack's as ``<its keyRing>/cryptoKeys/<its name>``: GKE's service agent is granted it; the same name in another
    ring, another key of the ring, and a key of an empty ring are refused, on the grant."""
    configure(monkeypatch, STACK_CONFIG)
    stack = [prod_resource(CRYPTO_KEY, "secrets-key", {"name": "gke-secrets", "keyRing": RING}), key_grant(key)]
    assert found(*stack) == expected


def test_a_key_of_a_declared_ring_is_the_stacks_by_the_rings_project_location_and_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The program's shape: the ring declared, the key's ``keyRing`` an id the engine gives later; the key is known
    by the ring's project, location and name, and one of another ring is refused."""
    configure(monkeypatch, STACK_CONFIG)
    ring = prod_resource(KEY_RING, "key-ring", {"project": PROJECT, "location": "us-east5", "name": "tpu-rl-prod-keys"})
    key = prod_resource(CRYPTO_KEY, "secrets-key", {"name": "gke-secrets", "keyRing": "key-ring-id"})
    other = f"projects/{PROJECT}/locations/us-east5/keyRings/other-keys/cryptoKeys/gke-secrets"
    assert found(ring, key, key_grant(f"{RING}/cryptoKeys/gke-secrets")) == []
    assert found(ring, key, key_grant(other)) == [not_the_stacks_key(other)]


# Which of the stack's kinds an account is.


@pytest.mark.parametrize(
    ("configured", "declared"),
    [("tpu-rl-prod", "tpu-rl"), ("tpu-rl", "tpu-rl-prod")],
    ids=["configured-longer", "declared-longer"],
)
@pytest.mark.parametrize(
    ("account_id", "expected"),
    [
        ("tpu-rl-prod-cpu-np", []),
        ("tpu-rl-prod-sys-np", []),
        ("tpu-rl-cpu-np", []),
        ("tpu-rl-prod-export", [unused("export")]),
    ],
    ids=["longer-clusters-cpu-pool", "longer-clusters-system-pool", "shorter-clusters-cpu-pool", "a-step"],
)
def test_of_two_cluster_names_one_prefixing_the_other_the_longest_names_the_account(
    monkeypatch: pytest.MonkeyPatch, configured: str, declared: str, account_id: str, expected: list[Any]
) -> None:
    """With clusters ``tpu-rl`` and ``tpu-rl-prod`` (one configured, one declared), ``tpu-rl-prod-cpu-np`` is the
    ``tpu-rl-prod`` cluster's CPU pool (not a ``prod-cpu-np`` of ``tpu-rl``) and holds GKE's node role;
    ``tpu-rl-cpu-np`` is ``tpu-rl``'s; ``tpu-rl-prod-export`` is the export step's, which holds no node role, and is
    refused naming it."""
    configure(monkeypatch, {"gcp:project": PROJECT, "tpu-rl:clusterName": configured})
    stack = [cluster(name=declared, project=PROJECT), account(account_id), project_grant(account_id)]
    assert found(*stack) == expected


def test_an_account_of_no_cluster_of_the_stack_holds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """An account whose id starts with none of the stack's cluster names (``other-cpu-np`` in the ``tpu-rl-prod``
    stack) is of none of its kinds: even GKE's node role, a CPU pool's, is refused it, naming it as of no kind."""
    configure(monkeypatch, STACK_CONFIG)
    stack = [cluster(name="tpu-rl-prod", project=PROJECT), account("other-cpu-np"), project_grant("other-cpu-np")]
    assert found(*stack) == [unused("")]


@pytest.mark.parametrize("account_id", [None, 42], ids=["no-account-id", "a-number"])
def test_an_account_known_by_its_email_alone_holds_nothing(monkeypatch: pytest.MonkeyPatch, account_id: Any) -> None:
    """An account whose id is missing or no text, given its email: the stack's account (its grants are judged) but of
    no kind the program makes, so GKE's node role is refused it."""
    configure(monkeypatch, STACK_CONFIG)
    props = {"email": email("tpu-rl-prod-cpu-np"), "project": PROJECT}
    if account_id is not None:
        props["accountId"] = account_id
    stack = [prod_resource(ACCOUNT, "nodes", props), project_grant("tpu-rl-prod-cpu-np")]
    assert found(*stack) == [unused("")]


def test_an_account_known_by_its_email_and_id_is_named_by_its_id(monkeypatch: pytest.MonkeyPatch) -> None:
    """Near miss: the same account with its id is the CPU pool's, and holds GKE's node role."""
    configure(monkeypatch, STACK_CONFIG)
    props = {"email": email("tpu-rl-prod-cpu-np"), "accountId": "tpu-rl-prod-cpu-np", "project": PROJECT}
    assert found(prod_resource(ACCOUNT, "nodes", props), project_grant("tpu-rl-prod-cpu-np")) == []


# The cluster names.

NO_CLUSTER_NAME = {
    "a-cluster-of-no-name": ([cluster(project=PROJECT)], {}),
    "a-cluster-named-by-no-text": ([cluster(name=42, project=PROJECT)], {}),
    "an-empty-configured-name": ([], {"tpu-rl:clusterName": ""}),
    "both": ([cluster(name=None, project=PROJECT)], {"tpu-rl:clusterName": ""}),
}


@pytest.mark.parametrize("case", list(NO_CLUSTER_NAME), ids=list(NO_CLUSTER_NAME))
@pytest.mark.parametrize(
    ("account_id", "expected"),
    [("tpu-rl-cpu-np", []), ("tpu-rl-prod-cpu-np", [unused("prod-cpu-np")])],
    ids=["the-default-clusters-pool", "another-clusters-pool"],
)
def test_with_no_cluster_name_given_as_text_the_cluster_is_tpu_rl(
    monkeypatch: pytest.MonkeyPatch, case: str, account_id: str, expected: list[Any]
) -> None:
    """A cluster whose name is missing or no text, an empty ``tpu-rl:clusterName``: neither names a cluster (no
    cluster named ``""``, ``-cpu-np``), so the cluster is the default ``tpu-rl``: ``tpu-rl-cpu-np`` is its CPU pool
    and holds GKE's node role, while ``tpu-rl-prod-cpu-np`` is a ``prod-cpu-np`` of it, refused."""
    clusters, config = NO_CLUSTER_NAME[case]
    configure(monkeypatch, {"gcp:project": PROJECT, **config})
    assert found(*clusters, account(account_id), project_grant(account_id)) == expected


# The projects.


@pytest.mark.parametrize(
    "config", [{}, {"gcp:project": ""}], ids=["no-project-configured", "an-empty-project-configured"]
)
@pytest.mark.parametrize(
    ("project", "expected"),
    [(PROJECT, []), ("other-project", [elsewhere("other-project", PROJECT)])],
    ids=["in-the-clusters-project", "in-another-project"],
)
def test_with_no_project_configured_the_clusters_project_is_the_stacks(
    monkeypatch: pytest.MonkeyPatch, config: dict[str, str], project: str, expected: list[Any]
) -> None:
    """``gcp:project`` unset or empty: the stack's project is its cluster's; a grant there passes, one in another
    project is refused naming the cluster's as the stack's."""
    configure(monkeypatch, {"tpu-rl:clusterName": "tpu-rl-prod", **config})
    stack = [cluster(name="tpu-rl-prod", project=PROJECT), account("tpu-rl-prod-cpu-np")]
    assert found(*stack, project_grant("tpu-rl-prod-cpu-np", project)) == expected


@pytest.mark.parametrize("project", [None, 42], ids=["no-project", "a-number"])
def test_a_cluster_whose_project_is_no_text_adds_no_project(monkeypatch: pytest.MonkeyPatch, project: Any) -> None:
    """Of two clusters, one whose project is missing or no text: the stack's projects are the other's alone, as the
    refusal of a grant in another project lists them."""
    configure(monkeypatch, {"tpu-rl:clusterName": "tpu-rl-prod"})
    props = {"name": "tpu-rl-prod"} if project is None else {"name": "tpu-rl-prod", "project": project}
    stack = [cluster(name="tpu-rl-prod", project=PROJECT), prod_resource(CLUSTER, "second", props)]
    stack += [account("tpu-rl-prod-cpu-np"), project_grant("tpu-rl-prod-cpu-np", "other-project")]
    assert found(*stack) == [elsewhere("other-project", PROJECT)]


def test_a_configured_project_is_the_stacks_whatever_the_clusters(monkeypatch: pytest.MonkeyPatch) -> None:
    """Near miss: ``gcp:project`` set, the cluster's project is not the stack's."""
    configure(monkeypatch, {"gcp:project": "configured-project", "tpu-rl:clusterName": "tpu-rl-prod"})
    stack = [cluster(name="tpu-rl-prod", project=PROJECT), account("tpu-rl-prod-cpu-np")]
    assert found(*stack, project_grant("tpu-rl-prod-cpu-np")) == [elsewhere(PROJECT, "configured-project")]
