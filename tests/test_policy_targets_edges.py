"""``grant-targets``' judges of one target each, called on their own: the bucket folders each account may hold an
object role under (as ``infra.gcp.access`` grants them), the Cloud KMS key's and the image mirrors' grants, and the
reason a project-level role is refused, word for word as the operator reads them; a value the engine does not know
yet at a preview is judged at ``pulumi up``, never as a value that is not the stack's."""

from __future__ import annotations

from typing import Any

import pytest

from core.steps import STEPS
from infra.gcp.access import access
from policy.tpu_rl_policies import targets
from policy.tpu_rl_policies.grants import Grant, Own
from policy.tpu_rl_policies.properties import Unseen

pytestmark = pytest.mark.pure

PROJECT = "my-tpu-prod-project"
LOCATION = "us-east5"
MIRROR = "tpu-rl-prod-images"
KEY = f"projects/{PROJECT}/locations/{LOCATION}/keyRings/tpu-rl-prod-keys/cryptoKeys/gke-secrets"
STATE_KEY = f"projects/{PROJECT}/locations/{LOCATION}/keyRings/pulumi-state-prod/cryptoKeys/state"
AGENT = "serviceAccount:service-123456789012@container-engine-robot.iam.gserviceaccount.com"
STEP = f"serviceAccount:tpu-rl-prod-export@{PROJECT}.iam.gserviceaccount.com"
STACK = targets.Stack(
    Own(projects={PROJECT}, keys={KEY}, repositories={(PROJECT, LOCATION, MIRROR)}), {}, frozenset(("gemma4-26b",))
)


def _said(judge: Any, props: dict[str, Any], *grants: Grant) -> tuple[list[str], Any]:
    """What ``judge`` says of ``grants`` on a target with ``props``, and what it returns (the holders' judge)."""
    said: list[str] = []
    return said, judge(props, list(grants), STACK, said.append)


def test_each_account_holds_object_roles_under_the_folders_the_program_grants_it() -> None:
    """Each step's account writes its own step's folder and reads those its step reads; the node accounts write the
    ``nodes`` step's and the Pathways scratch and read what it reads: exactly the program's grants, no more."""
    expected = {
        holder: {targets.WRITER: frozenset(entry.write), targets.READER: frozenset(entry.read)}
        for holder, entry in access(tuple(STEPS)).items()
    }
    assert targets._bucket_folders() == expected
    assert targets._bucket_folders()["cpu"][targets.WRITER] == frozenset(("train", "scratch"))


def test_the_reason_a_project_role_is_refused_names_the_roles_the_stack_needs() -> None:
    said, _ = _said(targets._on_project, {"project": PROJECT}, Grant("roles/owner", [STEP], None))
    assert said == [
        "project-level roles/owner to the stack's identities: the stack's identities need only "
        "roles/artifactregistry.reader, roles/container.defaultNodeServiceAccount, "
        "roles/serviceusage.serviceUsageConsumer at project level"
    ]


@pytest.mark.parametrize(
    "role", ["roles/viewer", "roles/browser", "roles/iam.securityReviewer", "roles/compute.viewer", "roles/X.Viewer"]
)
def test_a_project_reader_role_is_refused_for_what_it_reads(role: str) -> None:
    assert targets._why_project(role) == "it reads every resource of its kind in the project, other stacks' among them"


def test_a_grant_on_a_state_key_is_refused_for_the_secrets_it_decrypts() -> None:
    said, judged = _said(targets._on_key, {"cryptoKeyId": STATE_KEY}, Grant(targets.KEY_ROLE, [AGENT], None))
    assert judged is None
    assert said == [
        f"grants on {STATE_KEY}, a Pulumi state secrets key: it decrypts the stack's secrets, the Hugging Face "
        "token among them, and is used by the account that runs pulumi only: remove the grant"
    ]


def test_the_stack_key_granted_to_another_member_is_refused_by_name() -> None:
    said, _ = _said(targets._on_key, {"cryptoKeyId": KEY}, Grant(targets.KEY_ROLE, [AGENT, STEP], None))
    assert said == [
        f"grants the stack's key to {STEP}: only GKE's service agent uses it (to encrypt Secrets); remove the grant"
    ]


@pytest.mark.parametrize(
    ("key", "member"),
    [
        pytest.param(Unseen("cryptoKeyId"), AGENT, id="key not known yet"),
        pytest.param(KEY, Unseen("member"), id="member not known yet"),
    ],
)
def test_a_key_grant_not_known_yet_is_left_to_pulumi_up(key: Any, member: Any) -> None:
    said, judged = _said(targets._on_key, {"cryptoKeyId": key}, Grant(targets.KEY_ROLE, [member], None))
    assert (said, judged) == ([], None)


def _mirror_props(**changes: Any) -> dict[str, Any]:
    return {"project": PROJECT, "location": LOCATION, "repository": MIRROR, **changes}


@pytest.mark.parametrize("unknown", ["project", "location", "repository"])
def test_a_repository_grant_whose_target_is_not_known_yet_is_left_to_pulumi_up(unknown: str) -> None:
    props = _mirror_props(**{unknown: Unseen(unknown)})
    said, judged = _said(targets._on_repository, props, Grant(targets.REGISTRY_READER, [STEP], None))
    assert (said, judged) == ([], None)


@pytest.mark.parametrize(
    "repository",
    [
        pytest.param(MIRROR, id="id"),
        pytest.param(f"projects/{PROJECT}/locations/{LOCATION}/repositories/{MIRROR}", id="full name"),
    ],
)
def test_the_mirrors_reader_is_judged_per_holder_by_the_mirror_s_full_name(repository: str) -> None:
    said, judged = _said(
        targets._on_repository, _mirror_props(repository=repository), Grant(targets.REGISTRY_READER, [STEP], None)
    )
    assert said == []
    judged("cpu", said.append)
    assert said == []
    judged("export", said.append)
    assert said == [
        f"roles/artifactregistry.reader on {PROJECT}/{LOCATION}/{MIRROR} to the export account: its step does not "
        "use it; remove the grant"
    ]


@pytest.mark.parametrize(
    ("repository", "named"),
    [
        pytest.param("other", f"{PROJECT}/{LOCATION}/other", id="another id"),
        pytest.param(
            f"projects/{PROJECT}/zones/{LOCATION}/repositories/{MIRROR}",
            f"{PROJECT}/{LOCATION}/projects/{PROJECT}/zones/{LOCATION}/repositories/{MIRROR}",
            id="a six-part name that is no repository's",
        ),
        pytest.param(
            f"projects/other/locations/{LOCATION}/repositories/{MIRROR}",
            f"other/{LOCATION}/{MIRROR}",
            id="full name in another project",
        ),
    ],
)
def test_a_grant_on_a_repository_that_is_not_a_mirror_is_refused(repository: str, named: str) -> None:
    said, judged = _said(
        targets._on_repository, _mirror_props(repository=repository), Grant(targets.REGISTRY_READER, [STEP], None)
    )
    assert judged is None
    assert said == [f"grants on repository {named}, not one of the stack's image mirrors: remove the grant"]
