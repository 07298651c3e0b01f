"""Dev and prod in one Google project, walked together (docs/security.md "Two stacks in one project", docs/state.md
"Two stacks in one project").

The two stack files are the examples as `pulumi config set` and `make stack` leave them in one project: each with its
own ``secretsprovider`` and ``tpu-rl:stateBackend``, both sharing a Hub cache whose one writer is prod, both with
image mirrors and a Cloud KMS key for Secrets. The real program plans each under the mock runtime; every GCP object
and IAM member it registers is given its identity in Google Cloud (what the provider creates, and what its delete
removes), and:

- the two stacks hold no object and no grant in common, but the project's APIs and GKE service agent, whose deletes
  do nothing (terraform-provider-google ``resourceGoogleProjectServiceDelete``: ``disable_on_destroy`` false "skip
  disabling service"; google-beta ``resourceProjectServiceIdentityDelete``: "There is no delete endpoint"), and the
  shared Hub cache, where only prod's conversion holds a role that writes; no authoritative IAM resource at all;
- a destroy of either, as the engine runs it (pulumi/pulumi ``pkg/engine/destroy.go`` ``newDestroySource``: a null
  source, so every resource of the *stack's own state* is condemned; ``pkg/resource/deploy/step.go``
  ``DeleteStep.Apply``: protect, ``retainOnDelete``, ``deletedWith``, then the provider's Delete, through
  ``tests.engine.Stack._delete``) and as the provider deletes (``resourceIamMemberDelete``: ``subtractFromBindings``,
  which removes the role and member from the resource's policy whoever else registered it; ``resourceKMSKeyRingDelete``:
  the ring stays; ``resourceKMSCryptoKeyDelete`` with ``DELETE``: its versions destroyed), leaves every object and grant
  of the other stack in place;
- with IAM enforced per caller and inherited (``tests/fake_iam.py``: organization, folder, project, ring, key, bucket
  and account policies, the roles' contents), dev's accounts reach nothing of prod's state by the grants `make
  state-bucket` makes, but deploy-dev's documented project roles let it in three ways in a shared project (a: decrypt
  through the shared key ring; b: its own conditioned binding rewritten; c: a token of deploy-prod), each one line of
  `make audit STACK=prod`; with dev and prod in projects of their own (the default) prod has no finding and deploy-dev
  is refused each of the three;
- a stack file that names the other's state home, key or cluster is refused in one line, exit 2, nothing created.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SENTINEL_TOKEN
from tests.engine import Recorded
from tests.engine import Stack as EngineStack
from tests.fake_iam import as_member, binding, deployer_roles, grant, lay_out_state, policed_apis
from tests.stack_homes import access_lines
from tools import shared_names, state, state_access
from tools.plan import plan_stack
from tools.plan.offline import Plan, Registration
from tools.stack_files import ROOT
from tools.state_home import Home
from tools.state_locks import lock_prefix

pytestmark = pytest.mark.slow

PROJECT = "acme-tpu"
STACKS = ("dev", "prod")
HUB_BUCKET = f"{PROJECT}-hub-cache"
HUB = f"gs://{HUB_BUCKET}/hub/"
WRITER = "prod"
ENCRYPTED_KEY = "CiQAiRhdlQ7ogTYJFm9rET0XjWwP05Af8jmhoJXyD5OVZQz5OAsSSQCO2yJKaySKHpJOj9CuLhqUkqMwXxiMthCQD540f66IbcZQ="


def state_bucket_of(stack: str, project: str = PROJECT) -> str:
    return f"{project}-pulumi-state-{stack}"


def state_key_of(stack: str, project: str = PROJECT) -> str:
    """The stack's key as the stack files record it: in the ring ``pulumi-state`` every stack's key shares (the
    layout before a ring per stack)."""
    return f"projects/{project}/locations/global/keyRings/pulumi-state/cryptoKeys/tpu-rl-{stack}"


def deploy(stack: str, project: str = PROJECT) -> str:
    return f"serviceAccount:deploy-{stack}@{project}.iam.gserviceaccount.com"


def preview(stack: str, project: str = PROJECT) -> str:
    return f"serviceAccount:preview-{stack}@{project}.iam.gserviceaccount.com"


def stack_text(stack: str, *, backend_of: str | None = None, key_of: str | None = None, project: str = PROJECT) -> str:
    """The example stack file in ``project`` as the set-up leaves it: ``pulumi stack init --secrets-provider`` wrote
    the header, `pulumi config set --path` the nested keys into their maps, `make stack` the home at the end.
    ``backend_of`` / ``key_of``: another stack whose home or key the file names instead (a swapped file)."""
    text = (ROOT / f"Pulumi.{stack}.yaml").read_text().replace(f"my-tpu-{stack}-project", project)
    text = text.replace("  tpu-rl:model:\n", f"  tpu-rl:model:\n    hubCache: {HUB}\n    hubCacheWriter: {WRITER}\n", 1)
    if "  tpu-rl:gke:\n" not in text:
        text += "  tpu-rl:gke:\n    secretsEncryptionKey: create\n"
    text += "  tpu-rl:images:\n    mirror: true\n"
    text += f"  tpu-rl:stateBackend: gs://{state_bucket_of(backend_of or stack, project)}\n"
    return f"secretsprovider: gcpkms://{state_key_of(key_of or stack, project)}\nencryptedkey: {ENCRYPTED_KEY}\n{text}"


def checkout(folder: Path, **texts: str) -> Path:
    """A repository holding Pulumi.yaml and each ``stack=text``'s stack file."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    for stack, text in texts.items():
        (folder / f"Pulumi.{stack}.yaml").write_text(text)
    return folder


def provider_outputs(registration: Registration) -> dict[str, Any] | None:
    """What the provider returns that the mocks do not: a repository's ``name`` (its id), which its grants name."""
    if registration.type == "gcp:artifactregistry/repository:Repository":
        return {**registration.inputs, "name": registration.inputs["repositoryId"]}
    return None


_CHECKOUTS = tempfile.TemporaryDirectory(prefix="tpu-rl-two-stacks-")
"""Where ``planned`` lays out its repositories; removed when the process ends (``TemporaryDirectory``'s finalizer)."""


@functools.cache
def planned(stack: str, *overrides: str) -> Plan:
    """The real program's plan of ``stack``'s file (``stack_text``), once per process."""
    folder = checkout(Path(tempfile.mkdtemp(dir=_CHECKOUTS.name)), **{stack: stack_text(stack)})
    plan, _ = plan_stack(
        folder / f"Pulumi.{stack}.yaml",
        list(overrides),
        stack=stack,
        secrets={"tpu-rl:hfToken": SENTINEL_TOKEN},
        outputs_for=provider_outputs,
    )
    assert plan.error is None, plan.error
    return plan


# ---------------------------------------------------------------------------------------------
# Each resource's identity in Google Cloud

NO_CLOUD_OBJECT = ("tpu-rl:", "pulumi-python:dynamic/", "pulumi:providers:", "kubernetes:")
"""Components (no provider), dynamic resources (they record a time or an identity in the state, nothing in Google
Cloud), and the Kubernetes provider and objects, which live in the stack's own cluster (``in_own_cluster``)."""
NO_OP_DELETE = ("gcp:projects/service:Service", "gcp:projects/serviceIdentity:ServiceIdentity")
"""Project-wide objects any stack of the project registers, whose delete does nothing (module docstring)."""
AUTHORITATIVE = re.compile(r"I[Aa][Mm](Binding|Policy)$")
"""``IAMBinding`` / ``IAMPolicy`` (and ``IamBinding`` / ``IamPolicy``) resources: they replace every member of a role,
or the whole policy, of their resource."""
IAM_TARGETS = {
    "gcp:projects/iAMMember:IAMMember": lambda i: ("project", i["project"]),
    "gcp:serviceaccount/iAMMember:IAMMember": lambda i: ("serviceAccount", i["serviceAccountId"]),
    "gcp:storage/bucketIAMMember:BucketIAMMember": lambda i: ("bucket", i["bucket"]),
    "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember": lambda i: ("cryptoKey", i["cryptoKeyId"]),
    "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember": lambda i: (
        "repository",
        f"projects/{i['project']}/locations/{i['location']}/repositories/{i['repository']}",
    ),
}


def identity(resource: dict[str, Any], by_name: dict[str, dict[str, Any]]) -> tuple[str, ...] | None:
    """The Google Cloud object (or IAM member) ``resource`` creates; None: it creates none. A type not known here
    fails: a new resource type must say what it creates."""
    kind, inputs = resource["type"], resource["inputs"]
    project = inputs.get("project", PROJECT)
    if kind.startswith(NO_CLOUD_OBJECT):
        return None
    if kind in IAM_TARGETS:
        condition = (inputs.get("condition") or {}).get("expression", "")
        return ("member", *IAM_TARGETS[kind](inputs), inputs["role"], inputs["member"], condition)
    if kind.startswith("gcp:compute/"):
        return ("compute", kind.split(":")[1], project, inputs["name"])
    if kind == "gcp:container/cluster:Cluster":
        return ("cluster", f"projects/{project}/locations/{inputs['location']}/clusters/{inputs['name']}")
    if kind == "gcp:container/nodePool:NodePool":
        cluster = identity(by_name[inputs["cluster"].removesuffix("-id")], by_name)
        assert cluster is not None
        return ("nodePool", f"{cluster[1]}/nodePools/{inputs['name']}")
    if kind == "gcp:kms/keyRing:KeyRing":
        return ("keyRing", f"projects/{project}/locations/{inputs['location']}/keyRings/{inputs['name']}")
    if kind == "gcp:kms/cryptoKey:CryptoKey":
        ring = identity(by_name[inputs["keyRing"].removesuffix("-id")], by_name)
        assert ring is not None
        return ("cryptoKey", f"{ring[1]}/cryptoKeys/{inputs['name']}")
    if kind == "gcp:artifactregistry/repository:Repository":
        where = f"projects/{project}/locations/{inputs['location']}/repositories/{inputs['repositoryId']}"
        return ("repository", where)
    if kind == "gcp:serviceaccount/account:Account":
        return (
            "serviceAccount",
            f"projects/{project}/serviceAccounts/{inputs['accountId']}@{project}.iam.gserviceaccount.com",
        )
    if kind == "gcp:storage/bucket:Bucket":
        return ("bucket", inputs["name"])
    if kind == "gcp:projects/service:Service":
        return ("service", project, inputs["service"])
    if kind == "gcp:projects/serviceIdentity:ServiceIdentity":
        return ("serviceIdentity", project, inputs["service"])
    raise AssertionError(f"{kind} ({resource['name']}): say which Google Cloud object it creates")


def objects(plan: Plan) -> dict[tuple[str, ...], dict[str, Any]]:
    """Identity -> the resource that creates it, for every GCP object and IAM member of ``plan``."""
    by_name = {r["name"]: r for r in plan.resources}
    found: dict[tuple[str, ...], dict[str, Any]] = {}
    for resource in plan.resources:
        key = identity(resource, by_name)
        if key is not None:
            assert key not in found, f"{key} registered twice in stack {plan.stack}"
            found[key] = resource
    return found


def in_own_cluster(plan: Plan) -> None:
    """The stack's Kubernetes objects go to its own cluster: its one Kubernetes provider names it."""
    (provider,) = [r for r in plan.resources if r["type"] == "pulumi:providers:kubernetes"]
    (cluster,) = [r for r in plan.resources if r["type"] == "gcp:container/cluster:Cluster"]
    assert (
        provider["inputs"]["clusterIdentifier"]
        == f"{PROJECT}/{cluster['inputs']['location']}/{cluster['inputs']['name']}"
    )


# ---------------------------------------------------------------------------------------------
# Names and grants


@pytest.fixture(scope="module")
def plans() -> dict[str, Plan]:
    return {stack: planned(stack) for stack in STACKS}


def test_the_stacks_share_no_object_and_no_grant_but_the_projects_apis_and_service_agent(plans):
    dev, prod = objects(plans["dev"]), objects(plans["prod"])
    for stack, found in (("dev", dev), ("prod", prod)):
        kinds = {key[0] for key in found}
        assert {"bucket", "serviceAccount", "keyRing", "cryptoKey", "cluster", "nodePool", "repository"} <= kinds, stack
        assert {key[1] for key in found if key[0] == "compute"} >= {"compute/network", "compute/subnetwork"}
        in_own_cluster(plans[stack])
    shared = set(dev) & set(prod)
    assert shared, "both stacks enable the project's APIs and create GKE's service agent"
    for key in shared:
        for found in (dev, prod):
            resource = found[key]
            assert resource["type"] in NO_OP_DELETE, f"{key} is both stacks': a destroy of either deletes it"
            if resource["type"] == "gcp:projects/service:Service":
                assert resource["inputs"]["disableOnDestroy"] is False, key
    members = [key for key in shared if key[0] == "member"]
    assert members == [], "an IAM member both stacks register is removed by the destroy of either"


def test_no_stack_registers_an_authoritative_iam_resource(plans):
    for plan in plans.values():
        authoritative = [r["name"] for r in plan.resources if AUTHORITATIVE.search(r["type"])]
        assert authoritative == [], f"{plan.stack}: {authoritative} would replace other stacks' members"


def test_the_hub_cache_has_one_writer_and_the_other_stack_only_reads_it(plans):
    on_cache: dict[str, set[str]] = {}
    for stack, plan in plans.items():
        for key in objects(plan):
            if key[:3] == ("member", "bucket", HUB_BUCKET):
                on_cache.setdefault(stack, set()).add(key[3])
                assert key[5] == f'resource.name.startsWith("projects/_/buckets/{HUB_BUCKET}/objects/hub/")', key
    assert on_cache == {
        "prod": {"roles/storage.objectUser", "roles/storage.objectViewer"},
        "dev": {"roles/storage.objectViewer"},
    }


# ---------------------------------------------------------------------------------------------
# A destroy of either, through the engine model


class Project:
    """Google Cloud as both stacks' `up`s left it: identity -> the stacks whose resources created it."""

    def __init__(self, plans: list[Plan]) -> None:
        self.held: dict[tuple[str, ...], set[str]] = {}
        self.destroyed_versions: set[str] = set()
        for plan in plans:
            for key in objects(plan):
                self.held.setdefault(key, set()).add(plan.stack)

    def delete(self, resource: dict[str, Any], key: tuple[str, ...]) -> None:
        """The provider's Delete (module docstring): an IAM member is subtracted from its resource's policy, whoever
        registered it; a key ring stays; a key's versions are destroyed, the key's name stays; an API stays enabled
        and the service agent stays; any other object is gone."""
        kind = resource["type"]
        if kind in NO_OP_DELETE or kind == "gcp:kms/keyRing:KeyRing":
            return
        if kind == "gcp:kms/cryptoKey:CryptoKey":
            assert resource["inputs"]["deletionPolicy"] == "DELETE"
            self.destroyed_versions.add(key[1])
            return
        self.held.pop(key, None)


class Walk(EngineStack):
    """The engine model's deletes (``tests.engine.Stack._delete``) over a stack whose state is its plan, each provider
    Delete played on ``Project``."""

    def __init__(self, plan: Plan, project: Project) -> None:
        super().__init__(cluster=None, gcs=None)  # type: ignore[arg-type]
        self.project = project
        self.by_urn: dict[str, dict[str, Any]] = {}
        by_name = {r["name"]: r for r in plan.resources}
        named: dict[str, list[dict[str, Any]]] = {}
        for resource in plan.resources:
            named.setdefault(resource["name"], []).append(resource)

        def parent_of(resource: dict[str, Any]) -> dict[str, Any] | None:
            # A name may be a component's and its child's (``secrets-key``): the parent is the component.
            found = named.get(resource["options"].get("parent") or "", [])
            return next((r for r in found if r["type"].startswith("tpu-rl:")), found[0] if found else None)

        def urn(resource: dict[str, Any]) -> str:
            # resource.NewURN: the parent's type chain, "$", the type (the mock monitor's make_urn does the same).
            chain, parent = resource["type"], parent_of(resource)
            while parent is not None:
                chain, parent = f"{parent['type']}${chain}", parent_of(parent)
            return f"urn:pulumi:{plan.stack}::tpu-rl::{chain}::{resource['name']}"

        urns = {id(r): urn(r) for r in plan.resources}
        for resource in plan.resources:
            options, me = resource["options"], urns[id(resource)]
            assert me not in self.by_urn, me
            self.by_urn[me] = resource
            parent = parent_of(resource)
            depends = {urns[id(d)] for n in options.get("dependsOn") or () for d in named.get(n, [])}
            self.state[me] = Recorded(
                inputs=resource["inputs"],
                outputs={},
                trigger=None,
                urn=me,
                type=resource["type"],
                custom=not resource["type"].startswith("tpu-rl:"),
                parent=urns[id(parent)] if parent is not None else "",
                dependencies=tuple(sorted(depends - {me})),
                deleted_with=next((urns[id(d)] for d in named.get(options.get("deletedWith") or "", [])), ""),
                protect=bool(options.get("protect")),
                retain_on_delete=bool(options.get("retainOnDelete")),
            )
        self.keys = {u: identity(r, by_name) for u, r in self.by_urn.items()}

    def _provider_delete(self, rec: Recorded, calls: list[tuple[str, str]]) -> None:
        calls.append(("Delete", rec.urn))
        key = self.keys[rec.urn]
        if key is not None:
            self.project.delete(self.by_urn[rec.urn], key)

    def _live_objects(self) -> list[dict[str, Any]]:
        return []


LIFTED = ("tpu-rl:protect=false",)
"""What the docs have a protected stack set, and `up`, before its destroy (docs/destroy.md "Destroy")."""


@pytest.mark.parametrize("gone", STACKS)
def test_a_destroy_of_either_stack_leaves_every_object_and_grant_of_the_other(plans, gone):
    kept = next(s for s in STACKS if s != gone)
    walked = planned(gone, *LIFTED) if gone == "prod" else plans[gone]
    project = Project([walked, plans[kept]])
    before = {key for key, stacks in project.held.items() if kept in stacks}
    done = Walk(walked, project).destroy()
    assert done.errors == [], done.errors
    assert before <= set(project.held), f"{gone}'s destroy removed {kept}'s {sorted(before - set(project.held))}"
    mine = set(objects(walked))
    assert {k[0] for k in mine - set(project.held)} >= {"bucket", "serviceAccount", "cluster", "member"}, "it deleted"
    assert project.destroyed_versions == {k[1] for k in mine if k[0] == "cryptoKey"}, "only its own key's versions"


def test_the_walk_sees_the_hazard_of_a_shared_grant():
    """The model can fail: dev planned with prod's cluster name registers prod's members, and dev's destroy takes
    them from prod (what ``tools.shared_names`` refuses before such a stack exists)."""
    dev, prod = planned("dev", "tpu-rl:clusterName=tpu-rl-prod"), planned("prod")
    project = Project([dev, prod])
    Walk(dev, project).destroy()
    lost = {key for key in objects(prod) if key not in project.held}
    assert (
        "member",
        "project",
        PROJECT,
        "roles/container.defaultNodeServiceAccount",
        f"serviceAccount:tpu-rl-prod-cpu-np@{PROJECT}.iam.gserviceaccount.com",
        "",
    ) in lost


# ---------------------------------------------------------------------------------------------
# The state, the keys, the accounts and the Hub cache, with IAM enforced per caller and inherited


def home(stack: str, project: str = PROJECT) -> Home:
    return Home(
        stack,
        f"gs://{state_bucket_of(stack, project)}",
        "recorded",
        f"gcpkms://{state_key_of(stack, project)}",
        False,
        project,
        "us-east5",
    )


CHECKPOINT = ".pulumi/stacks/tpu-rl/{}.json"
OPS = "user:ops@acme.example"
NOT_PRODS_STATE = {
    "roles/storage.admin": f'!resource.name.startsWith("projects/_/buckets/{state_bucket_of("prod")}")',
    "roles/cloudkms.admin": f'!resource.name.startsWith("{state_key_of("prod")}")',
}
"""The conditions docs/permissions.md gave deploy-dev's two state-reaching roles in a shared project (until this
change): prod's bucket and prod's key left out, nothing else."""


def lay_out(fake, project_of: dict[str, str]) -> None:
    """Each stack's state as `make state-bucket STACK=<s> MEMBERS=<ops>,<deploy-s> READERS=<preview-s>` leaves it (the
    key in the shared ring ``pulumi-state``, the layout the stack files record), each stack's project as its set-up
    leaves it (the operator owns it, the deploy account holds the deployer's roles of docs/permissions.md "The
    roles", the preview account the viewer's; in a shared project deploy-dev's two state-reaching roles conditioned
    as ``NOT_PRODS_STATE``), prod's checkpoint and lock as its `up` leaves them, prod's data key sealed by its key,
    and the Hub cache with the grants the plans hold."""
    for stack in STACKS:
        project = project_of[stack]
        writers = (OPS, deploy(stack, project))
        lay_out_state(
            fake,
            project,
            state_bucket_of(stack, project),
            state_key_of(stack, project),
            writers,
            (preview(stack, project),),
        )
        fake.project_policies[project] = [binding("roles/owner", OPS)]
    shared = project_of["dev"] == project_of["prod"]
    for stack in STACKS:
        project = project_of[stack]
        for role in deployer_roles():
            condition = NOT_PRODS_STATE.get(role, "") if stack == "dev" and shared else ""
            grant(fake.project_policies, project, role, deploy(stack, project), condition)
        grant(fake.project_policies, project, "roles/viewer", preview(stack, project))
    prod = state_bucket_of("prod", project_of["prod"])
    fake.contents[(prod, CHECKPOINT.format("prod"))] = json.dumps({"version": 3, "secrets": "sealed"}).encode()
    fake.contents[(prod, lock_prefix("prod") + "held.json")] = b'{"pid": 1}'
    _, kms = as_member(fake, None)
    fake.sealed = kms.encrypt(name=state_key_of("prod", project_of["prod"]), plaintext=b"prod data key").ciphertext
    fake.buckets[HUB_BUCKET] = {"name": HUB_BUCKET, "location": "US-EAST5"}
    fake.bucket_policies[HUB_BUCKET] = hub_policy()
    fake.contents[(HUB_BUCKET, "hub/google/gemma-4/abc/model.safetensors")] = b"weights"


@pytest.fixture
def project():
    """Dev and prod in one project (``lay_out``)."""
    with policed_apis(PROJECT) as fake:
        lay_out(fake, {"dev": PROJECT, "prod": PROJECT})
        yield fake


APART = {"dev": f"{PROJECT}-dev", "prod": f"{PROJECT}-prod"}


@pytest.fixture
def projects():
    """Dev and prod each in a project of its own, the default (``lay_out``)."""
    with policed_apis(APART["prod"]) as fake:
        lay_out(fake, APART)
        yield fake


def hub_policy() -> list[dict[str, Any]]:
    """The Hub cache bucket's bindings, from both stacks' registered members on it."""
    bindings = []
    for stack in STACKS:
        for key in objects(planned(stack)):
            if key[:3] == ("member", "bucket", HUB_BUCKET):
                expression = key[5]
                bindings.append(
                    {"role": key[3], "members": [key[4]], "condition": {"title": "hub", "expression": expression}}
                )
    return bindings


def attempts(fake, member: str, stack: str, project: str = PROJECT) -> dict[str, bool]:
    """Each thing the diy backend and the gcpkms secrets provider do with ``stack``'s state, as ``member``: allowed?"""
    from google.api_core import exceptions

    storage, kms = as_member(fake, member)
    bucket = storage.bucket(state_bucket_of(stack, project))
    checkpoint = bucket.blob(CHECKPOINT.format(stack))
    actions = {
        "read the checkpoint": lambda: checkpoint.download_as_bytes(),
        "list the stack's locks": lambda: list(
            storage.list_blobs(state_bucket_of(stack, project), prefix=lock_prefix(stack))
        ),
        "take the lock": lambda: bucket.blob(lock_prefix(stack) + "mine.json").upload_from_string("{}"),
        "write the checkpoint": lambda: checkpoint.upload_from_string('{"version": 3}'),
        "clear the lock": lambda: bucket.blob(lock_prefix(stack) + "held.json").delete(),
        "decrypt the secrets": lambda: kms.decrypt(name=state_key_of(stack, project), ciphertext=fake.sealed),
    }
    found = {}
    for what, action in actions.items():
        try:
            action()
            found[what] = True
        except (exceptions.Forbidden, exceptions.BadRequest, exceptions.NotFound):
            found[what] = False
    return found


NOTHING = dict.fromkeys(
    [
        "read the checkpoint",
        "list the stack's locks",
        "take the lock",
        "write the checkpoint",
        "clear the lock",
        "decrypt the secrets",
    ],
    False,
)


@pytest.mark.parametrize("member", [deploy("dev"), preview("dev")], ids=["deploy-dev", "preview-dev"])
def test_devs_accounts_do_not_reach_prods_state_directly_in_a_shared_project(project, member):
    """What the old claim rested on, and all it shows: neither of dev's accounts reaches prod's state by the grants
    they hold (deploy-dev's two state-reaching roles are conditioned away from prod's bucket and key). The bypasses
    below are what deploy-dev's other roles let it do about that."""
    before = dict(project.contents)
    assert attempts(project, member, "prod") == NOTHING
    assert project.contents == before, "nothing of prod's changed"


def test_the_model_can_fail_a_project_grant_reaches_every_bucket_and_key_in_it(project):
    grant(project.project_policies, PROJECT, "roles/storage.objectViewer", preview("dev"))
    grant(project.project_policies, PROJECT, "roles/cloudkms.cryptoKeyDecrypter", preview("dev"))
    found = attempts(project, preview("dev"), "prod")
    assert found["read the checkpoint"] and found["decrypt the secrets"] and not found["take the lock"]


def test_each_account_does_what_its_own_stack_needs_and_no_more(project):
    storage, kms = as_member(project, deploy("prod"))
    assert state_access.check(home("prod"), "write", storage=storage, kms=kms) is None
    storage, kms = as_member(project, preview("prod"))
    assert state_access.check(home("prod"), "read", storage=storage, kms=kms) is None
    found = attempts(project, preview("prod"), "prod")
    assert found == {
        "read the checkpoint": True,
        "list the stack's locks": True,
        "take the lock": False,
        "write the checkpoint": False,
        "clear the lock": False,
        "decrypt the secrets": True,
    }, "a preview reads and decrypts, and takes no lock"
    assert all(attempts(project, deploy("prod"), "prod").values())


def test_a_destroy_of_dev_writes_devs_state_and_leaves_prods_bytes(project):
    """What `pulumi destroy` does to the state as deploy-dev (diy ``lock.go``: the lock object; ``store.go``: the
    checkpoint written after the deletes; then the lock removed); prod's objects are the same bytes after."""
    prod_before = {k: v for k, v in project.contents.items() if k[0] == state_bucket_of("prod")}
    storage, _ = as_member(project, deploy("dev"))
    bucket = storage.bucket(state_bucket_of("dev"))
    lock = bucket.blob(lock_prefix("dev") + "destroy.json")
    lock.upload_from_string('{"pid": 2}')
    bucket.blob(CHECKPOINT.format("dev")).upload_from_string(json.dumps({"version": 3, "deployment": {}}))
    lock.delete()
    assert {k: v for k, v in project.contents.items() if k[0] == state_bucket_of("prod")} == prod_before
    assert (state_bucket_of("dev"), CHECKPOINT.format("dev")) in project.contents


def test_the_hub_cache_reader_reads_it_and_cannot_write_or_replace_a_file(project):
    from google.api_core import exceptions

    name = "hub/google/gemma-4/abc/model.safetensors"
    reader, _ = as_member(project, f"serviceAccount:tpu-rl-dev-convert@{PROJECT}.iam.gserviceaccount.com")
    assert reader.bucket(HUB_BUCKET).blob(name).download_as_bytes() == b"weights"
    for planted in (name, "hub/google/gemma-4/abc/other.safetensors"):
        with pytest.raises(exceptions.Forbidden):
            reader.bucket(HUB_BUCKET).blob(planted).upload_from_string(b"same size")
    with pytest.raises(exceptions.Forbidden):
        reader.bucket(HUB_BUCKET).blob(name).delete()
    assert project.contents[(HUB_BUCKET, name)] == b"weights"
    writer, _ = as_member(project, f"serviceAccount:tpu-rl-prod-convert@{PROJECT}.iam.gserviceaccount.com")
    writer.bucket(HUB_BUCKET).blob("hub/google/gemma-4/abc/config.json").upload_from_string(b"{}")
    with pytest.raises(exceptions.Forbidden):
        writer.bucket(HUB_BUCKET).blob("elsewhere/config.json").upload_from_string(b"{}")


# ---------------------------------------------------------------------------------------------
# What deploy-dev's documented project roles let it do to prod in a shared project, and what `make audit` says


def as_rest(fake, member: str) -> Any:
    """google-auth's ``AuthorizedSession`` as ``member`` (what `gcloud projects set-iam-policy` and `gcloud iam
    service-accounts add-iam-policy-binding` send through)."""
    from google.auth.transport.requests import AuthorizedSession
    from google.oauth2.credentials import Credentials

    return AuthorizedSession(Credentials(token=member))


def audit_prod(fake, tmp_path: Path, capsys, project: str = PROJECT) -> tuple[int, list[str]]:
    """`make audit STACK=prod` over the checkout's stack files (the shared project accepted in both where shared; each
    naming in ``tpu-rl:access`` the members and readers `make state-bucket` granted its state, ``lay_out``), as the
    operator (the projects' owner), on the loopback APIs; its findings, one line each."""
    from google.auth.credentials import AnonymousCredentials

    from tools import audit
    from tools.audit_reads import Endpoints, Reads

    homes = {stack: APART[stack] if project != PROJECT else PROJECT for stack in STACKS}
    texts = {
        stack: stack_text(stack, project=homes[stack])
        + access_lines((OPS, deploy(stack, homes[stack])), (preview(stack, homes[stack]),))
        for stack in STACKS
    }
    if project == PROJECT:
        texts = {stack: text + '  tpu-rl:sharedProject: "true"\n' for stack, text in texts.items()}
    root = checkout(tmp_path / "audit", **texts)
    reads = Reads(credentials=AnonymousCredentials(), endpoints=Endpoints.at(fake.url))
    argv = ["--stack", "prod", "--root", str(root), "--kubeconfig", str(tmp_path / "none")]
    code = audit.main(argv, reads=reads)
    out = capsys.readouterr().out.splitlines()
    return code, [line.removeprefix("finding: ") for line in out if line.startswith("finding: ")]


def dev_can(fake, tmp_path, capsys, capability: str) -> list[str]:
    """The audit's lines naming deploy-dev as able to do ``capability``."""
    _, found = audit_prod(fake, tmp_path, capsys)
    return [line for line in found if line.startswith(f"{deploy('dev')} can {capability}")]


def test_a_deploy_dev_grants_itself_decrypt_on_prods_key_through_the_shared_ring(project, tmp_path, capsys):
    """roles/cloudkms.admin holds cloudkms.keyRings.setIamPolicy; the condition leaves prod's key out but not the ring
    it sits in, and a ring's grant reaches every key in it."""
    ring = state_key_of("prod").rsplit("/cryptoKeys/", 1)[0]
    assert dev_can(project, tmp_path, capsys, "decrypt") == []
    _, kms = as_member(project, deploy("dev"))
    policy = kms.get_iam_policy(request={"resource": ring})
    policy.bindings.add(role="roles/cloudkms.cryptoKeyDecrypter", members=[deploy("dev")])
    kms.set_iam_policy(request={"resource": ring, "policy": policy})
    assert kms.decrypt(name=state_key_of("prod"), ciphertext=project.sealed).plaintext == b"prod data key"
    assert dev_can(project, tmp_path, capsys, "decrypt") == [
        f"{deploy('dev')} can decrypt stack prod's state key (roles/cloudkms.cryptoKeyDecrypter on key ring {ring})"
    ]


def test_b_deploy_dev_rewrites_its_own_conditioned_project_binding(project, tmp_path, capsys):
    """roles/resourcemanager.projectIamAdmin sets the project's whole policy: deploy-dev drops its own condition."""
    assert dev_can(project, tmp_path, capsys, "read or write") == []
    session = as_rest(project, deploy("dev"))
    url = f"{project.url}/v3/projects/{PROJECT}"
    policy = session.post(f"{url}:getIamPolicy", json={"options": {"requestedPolicyVersion": 3}}).json()
    for entry in policy["bindings"]:
        if deploy("dev") in entry["members"] and entry.get("condition"):
            del entry["condition"]
    assert session.post(f"{url}:setIamPolicy", json={"policy": policy}).status_code == 200
    found = attempts(project, deploy("dev"), "prod")
    assert found == dict.fromkeys(NOTHING, True) | {"decrypt the secrets": False}, "(decrypt is one more grant away)"
    assert dev_can(project, tmp_path, capsys, "read or write") == [
        f"{deploy('dev')} can read or write stack prod's state and set IAM on gs://{state_bucket_of('prod')} "
        f"(roles/storage.admin on project {PROJECT})"
    ]


def test_c_deploy_dev_grants_itself_token_creation_on_deploy_prod(project, tmp_path, capsys):
    """roles/iam.serviceAccountAdmin sets every account's policy: deploy-dev makes itself a token creator of
    deploy-prod, mints its token and decrypts prod's secrets as deploy-prod."""
    email = deploy("prod").split(":", 1)[1]
    via = f"(roles/iam.serviceAccountTokenCreator on the account {email})"
    assert [line for line in dev_can(project, tmp_path, capsys, "mint") if line.endswith(via)] == []
    session = as_rest(project, deploy("dev"))
    url = f"{project.url}/v1/projects/-/serviceAccounts/{email}"
    policy = session.post(f"{url}:getIamPolicy").json()
    policy.setdefault("bindings", []).append(
        {"role": "roles/iam.serviceAccountTokenCreator", "members": [deploy("dev")]}
    )
    assert session.post(f"{url}:setIamPolicy", json={"policy": policy}).status_code == 200
    token = session.post(f"{url}:generateAccessToken", json={"scope": ["cloud-platform"]}).json()["accessToken"]
    _, as_prod = as_member(project, token)
    assert as_prod.decrypt(name=state_key_of("prod"), ciphertext=project.sealed).plaintext == b"prod data key"
    assert [line for line in dev_can(project, tmp_path, capsys, "mint") if line.endswith(via)] == [
        f"{deploy('dev')} can mint tokens of {email} {via}"
    ]


def test_in_a_shared_project_the_audit_names_deploy_dev_before_any_bypass(project, tmp_path, capsys):
    """The roles themselves, before deploy-dev uses them: each is a finding on prod (the shared project is accepted
    in both stack files, and still named)."""
    code, found = audit_prod(project, tmp_path, capsys)
    mine = {line.rsplit(" (", 1)[1].rstrip(")") for line in found if line.startswith(deploy("dev"))}
    assert code == 1
    assert {
        f"roles/resourcemanager.projectIamAdmin on project {PROJECT}",
        f"roles/iam.serviceAccountAdmin on project {PROJECT}",
        f"roles/container.admin on project {PROJECT}",
        f"roles/cloudkms.admin on project {PROJECT}",
    } <= mine
    assert not [line for line in found if not line.startswith(deploy("dev"))], "only deploy-dev is prod's outsider"


def test_apart_the_default_prod_has_no_finding_and_deploy_dev_reaches_nothing_of_it(projects, tmp_path, capsys):
    code, found = audit_prod(projects, tmp_path, capsys, project=APART["prod"])
    assert (code, found) == (0, [])
    dev, prod = deploy("dev", APART["dev"]), APART["prod"]
    assert attempts(projects, dev, "prod", prod) == NOTHING
    _, kms = as_member(projects, dev)
    ring = state_key_of("prod", prod).rsplit("/cryptoKeys/", 1)[0]
    session = as_rest(projects, dev)
    email = deploy("prod", prod).split(":", 1)[1]
    refused = [
        session.post(f"{projects.url}/v3/projects/{prod}:getIamPolicy", json={}).status_code,
        session.post(
            f"{projects.url}/v1/projects/-/serviceAccounts/{email}:setIamPolicy", json={"policy": {}}
        ).status_code,
        session.post(f"{projects.url}/v1/{ring}:setIamPolicy", json={"policy": {}}).status_code,
        session.post(f"{projects.url}/v1/projects/-/serviceAccounts/{email}:generateAccessToken", json={}).status_code,
    ]
    assert refused == [403, 403, 403, 403]


# ---------------------------------------------------------------------------------------------
# A stack file that names the other stack's home, key or names


def run_state(root: Path, capsys, *argv: str) -> tuple[int, list[str]]:
    code = state.main([*argv, "--root", str(root)])
    return code, [line for line in capsys.readouterr().err.splitlines() if line]


SWAPS = {
    "backend": (
        {"backend_of": "prod"},
        f"error: stack dev's state home gs://{state_bucket_of('prod')} (recorded in Pulumi.dev.yaml) is in "
        f"gs://{state_bucket_of('prod')}, stack prod's state bucket",
    ),
    "key": ({"key_of": "prod"}, f"error: stack dev's secrets key {state_key_of('prod')} encrypts stack prod's"),
}


@pytest.mark.parametrize("swap", SWAPS)
@pytest.mark.parametrize("command", ["select", "new"])
def test_a_swapped_stack_file_is_refused_in_one_line_with_nothing_created(tmp_path, capsys, monkeypatch, swap, command):
    """Dev's file naming prod's state bucket or key: one line, exit 2, before any client is made or file written."""
    swapped, start = SWAPS[swap]
    root = checkout(tmp_path / "repo", dev=stack_text("dev", **swapped), prod=stack_text("prod"))
    before = {p.name: p.read_text() for p in root.iterdir()}
    monkeypatch.setattr("tools.state_access.clients", lambda: pytest.fail("a client was made"))
    monkeypatch.setattr("tools.state._storage", lambda: pytest.fail("a client was made"))
    code, lines = run_state(
        root, capsys, command, "--stack", "dev", *(["--access", "write"] if command == "select" else [])
    )
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(start), lines[0]
    assert {p.name: p.read_text() for p in root.iterdir()} == before


@pytest.mark.parametrize(
    ("key", "value", "start"),
    [
        ("clusterName", "tpu-rl-prod", "error: stack dev's tpu-rl:clusterName tpu-rl-prod is stack prod's too"),
        ("bucketName", f"{PROJECT}-tpu-rl-prod", f"error: stack dev's artifacts bucket gs://{PROJECT}-tpu-rl-prod is"),
    ],
    ids=["clusterName", "bucketName"],
)
def test_a_stack_file_naming_the_other_stacks_cluster_or_bucket_is_refused_before_stack_init_and_up(
    tmp_path, capsys, key, value, start
):
    dev = stack_text("dev").replace(
        "  tpu-rl:clusterName: tpu-rl-dev\n",
        f"  tpu-rl:{key}: {value}\n"
        if key == "clusterName"
        else f"  tpu-rl:clusterName: tpu-rl-dev\n  tpu-rl:{key}: {value}\n",
    )
    root = checkout(tmp_path / "repo", dev=dev, prod=stack_text("prod"))
    for argv in (("new", "--stack", "dev"), ("releases", "--stack", "dev")):
        code, lines = run_state(root, capsys, *argv)
        assert code == 2 and len(lines) == 1 and lines[0].startswith(start), lines
        assert lines[0].endswith("(docs/state.md#two-stacks-in-one-project)")
    assert shared_names.problem("prod", root) is not None, "and prod's, named the same"


def test_two_writers_of_one_hub_cache_are_refused(tmp_path, capsys):
    dev = stack_text("dev").replace(f"hubCacheWriter: {WRITER}", "hubCacheWriter: dev")
    root = checkout(tmp_path / "repo", dev=dev, prod=stack_text("prod"))
    code, lines = run_state(root, capsys, "releases", "--stack", "dev")
    assert code == 2 and len(lines) == 1
    assert lines[0].startswith(f"error: stacks dev and prod share the Hub cache {HUB} but name different writers")


def test_the_example_stacks_in_one_project_share_no_name_and_share_the_project_only_if_both_accept(tmp_path):
    """No name of the two examples is the other's (``tools.shared_names``); the project itself is refused by the
    program's preflight and `make audit` unless both files accept it (``core.config.projects``)."""
    from core.config.projects import problem
    from core.config.projects import stack_configs as configs
    from tools.stack_files import load_stack

    root = checkout(tmp_path / "repo", dev=stack_text("dev"), prod=stack_text("prod"))
    assert [shared_names.problem(stack, root) for stack in STACKS] == [None, None]
    dev = load_stack("dev", root / "Pulumi.dev.yaml")[0]
    assert problem("dev", dev, configs(root, "dev")) is not None
    (root / "Pulumi.prod.yaml").write_text(stack_text("prod") + '  tpu-rl:sharedProject: "true"\n')
    accepted = load_stack("dev", root / "Pulumi.dev.yaml", ["tpu-rl:sharedProject=true"])[0]
    assert problem("dev", accepted, configs(root, "dev")) is None
    other = checkout(
        tmp_path / "other",
        dev=stack_text("dev").replace("tpu-rl-dev\n", "tpu-rl-prod\n", 1),
        prod=stack_text("prod").replace(f"gcp:project: {PROJECT}", "gcp:project: acme-other"),
    )
    assert shared_names.problem("dev", other) is None, "a cluster name of another project is its own"


GIVEN_KEY = f"projects/{PROJECT}/locations/us-east5/keyRings/platform/cryptoKeys/gke-secrets"


def test_a_secrets_key_both_stacks_are_given_keeps_its_one_grant_through_either_destroy():
    """Both stacks given one existing key register the same member (the project's GKE service agent on it): the one
    grant two stacks may share, kept by each stack's delete (``retainOnDelete``), so either destroy leaves it."""
    given = f"tpu-rl:gke.secretsEncryptionKey={GIVEN_KEY}"
    dev, prod = planned("dev", given), planned("prod", given, *LIFTED)
    shared = [key for key in set(objects(dev)) & set(objects(prod)) if key[0] == "member"]
    assert [key[1:4] for key in shared] == [("cryptoKey", GIVEN_KEY, "roles/cloudkms.cryptoKeyEncrypterDecrypter")]
    for gone, kept in ((dev, prod), (prod, dev)):
        assert all(objects(gone)[key]["options"]["retainOnDelete"] for key in shared)
        project = Project([gone, kept])
        Walk(gone, project).destroy()
        assert set(objects(kept)) <= set(project.held), f"{gone.stack}'s destroy removed {kept.stack}'s"
        assert project.destroyed_versions == set(), "a given key is no stack's to destroy"


MAKE = shutil.which("make")


@pytest.mark.skipif(MAKE is None, reason="make is not installed")
@pytest.mark.parametrize("exists", [False, True], ids=["new-stack", "existing-stack"])
def test_make_up_of_a_stack_named_as_the_other_is_refused_before_any_pulumi_command_changes_anything(tmp_path, exists):
    """`make up STACK=dev` with prod's cluster name: refused in one line, exit 2, before `pulumi stack init` (a new
    stack) or before `pulumi up` (one that exists); the fake CLI (tests/fake_pulumi.py) records every call."""
    from tests.fake_pulumi import CLEAN, calls, install
    from tests.fake_pulumi import checkout as make_checkout

    root = make_checkout(tmp_path)
    install(tmp_path / "bin")
    for stack in STACKS:
        path = root / f"Pulumi.{stack}.yaml"
        text = path.read_text().replace(f"my-tpu-{stack}-project", PROJECT).replace("tpu-rl-dev\n", "tpu-rl-prod\n")
        path.write_text(text + f"  tpu-rl:stateBackend: file://{tmp_path / stack}\n")
    if exists:
        (tmp_path / "dev/.pulumi/stacks/tpu-rl").mkdir(parents=True)
        (tmp_path / "dev/.pulumi/stacks/tpu-rl/dev.json").write_text('{"version": 3, "deployment": null}')
    before = (root / "Pulumi.dev.yaml").read_text()
    environment = {k: v for k, v in os.environ.items() if k not in CLEAN}
    environment.update(
        PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}",
        PULUMI_LOG=str(tmp_path / "pulumi.log"),
        PULUMI_HOME=str(tmp_path / "pulumi-home"),
        FAKE_CLOUD=str(tmp_path / "cloud"),
    )
    assert MAKE is not None
    command = [
        MAKE,
        "--no-print-directory",
        "-o",
        ".venv/.installed",
        "-o",
        "policy/venv/.installed",
        "up",
        "STACK=dev",
    ]
    done = subprocess.run(command, cwd=root, env=environment, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert line.startswith("error: stack dev's tpu-rl:clusterName tpu-rl-prod is stack prod's too (Pulumi.prod.yaml)")
    made = [" ".join(c["argv"][:2]) for c in calls(tmp_path / "pulumi.log")]
    assert "stack init" not in made and "up --stack" not in made, made
    assert (root / "Pulumi.dev.yaml").read_text() == before, "nothing written"
