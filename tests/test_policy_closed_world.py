"""``closed-world``: a stack holds only what the program creates (``core/data/closed-world.json``, regenerated here from
the program's plans) or what the policy config admits with a reason. Through pulumi-policy's own analyzer with the
stack's configuration as the engine sends it (``tests/analyzer.py``), at `pulumi up` and at a preview: the program's
plans of every variant draw nothing; each kind of thing it does not create is one line naming it, with its near miss
and the boundary of its rule."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
import yaml
from pulumi.output import Unknown

from core.closed_world import DATA, load
from core.config.schema import FIELDS
from core.config.values import UNSET_SECRET, Boolean, OneOf
from core.errors import BadInputError
from tests import analyzer
from tests.closed_world_stack import CLOSED, JOBSET, MAXTEXT, MIRROR_PATH, ROLE_BINDING, mirror
from tests.conftest import SENTINEL_TOKEN, plan_of
from tests.example_stacks import STACKS
from tools import closed_world as generator
from tools.plan.offline import Plan
from tools.stack_files import ROOT

WORLD = load()
BUCKET_GRANT = "gcp:storage/bucketIAMMember:BucketIAMMember"
VALUE_ONLY: dict[str, str] = {
    "tpu-rl:tpu.version": "one TPU generation (v6e)",
    "tpu-rl:gke.releaseChannel": "the cluster's channel: a value of the Cluster",
    "tpu-rl:model.name": "the model: values of the steps",
    "tpu-rl:kueue.version": "one Kueue release",
    "tpu-rl:hfToken": "a Secret's value",
    "tpu-rl:hfWriteToken": "a Secret's value (the publishing variants plan with a placeholder)",
    "tpu-rl:stateOrganization": "where the state lives (Pulumi Cloud): read by make, not by the program",
    "tpu-rl:access.workloadIdentityPool": "the pool the access audit reads: read by make, not by the program",
}
"""The feature keys of the configuration (booleans, choices, optional texts) that no variant of
``tools.closed_world.VARIANTS`` sets, each with why: a change of one changes values of what the program creates, not
what it creates."""
HEAD = {"kind": "ServiceAccount", "namespace": "tpu-rl", "name": "tpu-rl-dev-train-head"}
"""The dev stack's one RBAC subject: its training head's Kubernetes service account."""


# ---------------------------------------------------------------------------------------------
# The list is the program's


@pytest.fixture(scope="module")
def variant_plans() -> dict[tuple[str, ...], Plan]:
    """The (cached) plan of every variant, made once for the module (a setup, outside each test's budget)."""
    return {args: plan_of(*args) for args in generator.VARIANTS.values()}


@pytest.mark.slow  # nine plans of the program: `make closed-world --check` in the slow tier
@pytest.mark.program
def test_the_list_is_what_the_program_creates(variant_plans):
    """Regenerated from the plans of every variant, byte for byte: a change to what the program creates fails here
    until `make closed-world` writes it, and the difference names each entry."""
    made_with = {"tpu-rl:hfToken": SENTINEL_TOKEN, "tpu-rl:hfWriteToken": UNSET_SECRET}  # as the test plans are
    generated = generator.collect(lambda *args: variant_plans[args], analyzer.first_preview, made_with)
    assert generator.difference(DATA.read_text(), generated) == []
    assert DATA.read_text() == generated


def test_a_difference_names_the_entry():
    written = DATA.read_text()
    changed = written.replace(f'"{MAXTEXT}",', f'"{MAXTEXT}",\n  "docker.io/library/nginx",')
    assert generator.difference(written, changed) == ['+  "docker.io/library/nginx",']
    assert generator.difference(changed, written) == ['-  "docker.io/library/nginx",']


def _keys(value: Any, prefix: str) -> set[str]:
    """The keys a stack file sets, nested objects' fields by their path (``tpu-rl:tpu.capacity``)."""
    if not isinstance(value, dict):
        return {prefix}
    return {k for key, item in value.items() for k in _keys(item, f"{prefix}.{key}" if prefix else str(key))}


def test_the_variants_cover_the_registered_stacks_and_every_feature_key():
    """Each of ``tests/example_stacks.py``'s variants is planned, and every feature key of the configuration (a
    boolean, a choice, or an optional text) is set by a variant or an example stack file, or named as changing values
    only."""
    assert set(STACKS.values()) <= set(generator.VARIANTS.values())
    covered = {o.split("=", 1)[0].split("[", 1)[0] for args in generator.VARIANTS.values() for o in args[1:]}
    for stack in ("dev", "prod"):
        covered |= _keys(yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"], "")
    features = [
        f.key
        for f in FIELDS
        if not f.key.startswith("tpu-rl:training.") and (isinstance(f.read, (Boolean, OneOf)) or f.default == "")
    ]
    assert len(features) > 20
    assert [key for key in features if key not in covered | set(VALUE_ONLY)] == []


def test_the_list_holds_each_category():
    assert "gcp:storage/bucket:Bucket" in WORLD.types and "pulumi:pulumi:Stack" in WORLD.types
    assert "pulumi:providers:gcp" in WORLD.types and "pulumi:providers:tpu-rl" not in WORLD.types
    assert ("v1", "ConfigMap") in WORLD.kinds and ("rbac.authorization.k8s.io/v1", "RoleBinding") in WORLD.kinds
    assert WORLD.roles[BUCKET_GRANT] >= {"roles/storage.objectViewer", "roles/storage.objectUser"}
    assert "roles/storage.admin" not in WORLD.roles[BUCKET_GRANT]
    assert {(s.kind, s.namespace, s.name) for s in WORLD.subjects} == {
        ("ServiceAccount", "{namespace}", "{clusterName}-train-head")
    }
    assert MAXTEXT in WORLD.images and not any("@" in i or i.endswith(":0.2.5") for i in WORLD.images)


# ---------------------------------------------------------------------------------------------
# The program's plans draw nothing


def _variant(args: tuple[str, ...], preview: bool) -> list[analyzer.Finding]:
    plan = analyzer.first_preview(*args) if preview else analyzer.frozen(plan_of(*args))
    pack = analyzer.Pack(
        analyzer.policy_config_file(args[0]),
        dry_run=preview,
        policies=[CLOSED],
        stack=args[0],
        stack_config=analyzer.engine_config(*args),
    )
    return pack.analyze_stack(analyzer.resources(plan, preview=preview, stack_view=True))


def _examples_fast(names: list[str]) -> list[Any]:
    """``names`` as parameters, all but the example stacks' in the slow tier (each other variant is a plan more)."""
    return [pytest.param(n, marks=() if n in ("dev", "prod") else pytest.mark.slow) for n in names]


@pytest.mark.program
@pytest.mark.parametrize("name", _examples_fast(list(generator.VARIANTS)))
def test_every_variant_draws_nothing_at_up(name):
    assert _variant(generator.VARIANTS[name], preview=False) == []


@pytest.mark.program
@pytest.mark.parametrize(
    "name", _examples_fast([n for n, args in generator.VARIANTS.items() if args in STACKS.values()])
)
def test_every_registered_variant_draws_nothing_at_its_first_preview(name):
    """Nothing unknown is read either: the first preview (every computed output unknown) shows no advisory."""
    assert _variant(generator.VARIANTS[name], preview=True) == []


# ---------------------------------------------------------------------------------------------
# What the program does not create


def _urn(type_: str, name: str) -> str:
    return f"urn:pulumi:dev::tpu-rl::{type_}::{name}"


def judge(
    *resources: tuple[str, str, dict[str, Any]],
    admit: Any = [],  # noqa: B006 (read only)
    overrides: tuple[str, ...] = (),
    preview: bool = False,
    engine_config: bool = True,
) -> list[analyzer.Finding]:
    """The policy on a stack of ``resources`` (type, name, props), with ``admit`` as its config's admissions and the
    dev stack's configuration (with ``overrides``) as the engine sends it (none when not ``engine_config``)."""
    config = {"all": "mandatory", "closed-world": {"enforcementLevel": "mandatory", "admit": admit}}
    pack = analyzer.Pack(
        config,
        dry_run=preview,
        policies=[CLOSED],
        stack="dev",
        stack_config=analyzer.engine_config("dev", *overrides) if engine_config else {},
    )
    return pack.analyze_stack([analyzer.Resource(t, n, _urn(t, n), p) for t, n, p in resources])


def messages(*resources: tuple[str, str, dict[str, Any]], **options: Any) -> list[str]:
    found = judge(*resources, **options)
    assert {f.level for f in found} <= {"mandatory"} and not any(f.unjudged for f in found)
    return [f.message for f in found]


def k8s(type_: str, name: str, **props: Any) -> tuple[str, str, dict[str, Any]]:
    """A Kubernetes object of ``type_``, its apiVersion and kind those of the token unless given."""
    group_version, kind = type_.removeprefix("kubernetes:").rsplit(":", 1)
    api = group_version.removeprefix("core/")
    return (type_, name, {"apiVersion": api, "kind": kind, "metadata": {"name": name}, **props})


def binding(*subjects: Any, type_: str = ROLE_BINDING) -> tuple[str, str, dict[str, Any]]:
    return k8s(type_, "hostile-binding", roleRef={"kind": "Role", "name": "r"}, subjects=list(subjects))


def jobset(image: Any) -> tuple[str, str, dict[str, Any]]:
    pod = {"spec": {"containers": [{"name": "main", "image": image}]}}
    return k8s(JOBSET, "hostile-step", spec={"replicatedJobs": [{"template": {"spec": {"template": pod}}}]})


def grant(role: Any, type_: str = BUCKET_GRANT) -> tuple[str, str, dict[str, Any]]:
    return (
        type_,
        "hostile-grant",
        {"bucket": "b", "role": role, "member": "serviceAccount:a@p.iam.gserviceaccount.com"},
    )


HOSTILE_TYPES = [
    ("gcp:cloudrunv2/service:Service", {"template": {"containers": [{"image": f"{MAXTEXT}:0.2.5"}]}}),
    ("gcp:storage/bucketACL:BucketACL", {"bucket": "b", "roleEntities": ["READER:allUsers"]}),
    ("gcp:serviceaccount/key:Key", {"serviceAccountId": "a@p.iam.gserviceaccount.com"}),
    ("gcp:storage/hmacKey:HmacKey", {"serviceAccountEmail": "a@p.iam.gserviceaccount.com"}),
    ("gcp:bigquery/datasetAccess:DatasetAccess", {"datasetId": "d", "role": "READER", "specialGroup": "allUsers"}),
    ("gcp:projects/iAMAuditConfig:IAMAuditConfig", {"project": "p", "service": "allServices"}),
    ("gcp:gkehub/scopeRbacRoleBinding:ScopeRbacRoleBinding", {"scopeId": "s", "group": "everyone@example.com"}),
    ("gcp:cloudidentity/groupMembership:GroupMembership", {"group": "groups/1", "preferredMemberKey": {"id": "x"}}),
    ("gcp:storage/bucketIamMember:BucketIamMember", {"bucket": "b", "role": "roles/storage.objectViewer"}),
    ("gcp:storagex/bucketIAMMember:BucketIAMMember", {"bucket": "b", "role": "roles/storage.objectViewer"}),
    ("gcp:storage/bucket:bucket", {"name": "b"}),
    ("pulumi:providers:docker", {}),
]


@pytest.mark.pure
@pytest.mark.parametrize(("type_", "props"), HOSTILE_TYPES, ids=[t for t, _ in HOSTILE_TYPES])
def test_a_type_the_program_does_not_create_is_refused_even_at_preview(type_, props):
    """Named with the resource and the fix, at `up` and at a preview (a type is always known), whatever else the
    resource holds; a listed image in it is no finding of its own."""
    for preview in (False, True):
        found = judge((type_, "hostile", props), preview=preview)
        assert [(f.level, f.urn) for f in found] == [("mandatory", _urn(type_, "hostile"))]
        assert found[0].message == (
            f"hostile: resource type {type_} is not one the program creates: remove it, or admit it with a reason in "
            "the base branch's policy/config/<stack>.json (closed-world.admit)"
        )


@pytest.mark.pure
def test_a_type_of_unknown_props_is_refused_at_preview():
    found = judge(("gcp:serviceaccount/key:Key", "key", {"serviceAccountId": Unknown()}), preview=True)
    assert [(f.level, f.unjudged) for f in found] == [("mandatory", False)]


@pytest.mark.pure
def test_each_listed_type_passes():
    assert messages(*((t, f"r{i}", {}) for i, t in enumerate(sorted(WORLD.types)))) == []


KINDS = [
    ("kubernetes:argoproj.io/v1alpha1:Workflow", "Workflow", "argoproj.io/v1alpha1"),
    ("kubernetes:apps/v1:Deployment", "Deployment", "apps/v1"),
    (
        "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
        "ClusterRoleBinding",
        "rbac.authorization.k8s.io/v1",
    ),
    ("kubernetes:rbac.authorization.k8s.io/v1beta1:RoleBinding", "RoleBinding", "rbac.authorization.k8s.io/v1beta1"),
    ("kubernetes:core/v1:List", "List", "v1"),
]


@pytest.mark.pure
@pytest.mark.parametrize(("type_", "kind", "api"), KINDS, ids=[k for _, k, _ in KINDS])
def test_a_kind_the_program_does_not_create_is_refused(type_, kind, api):
    """Its type and its kind, one line each (a kind of another apiVersion is another kind)."""
    assert messages(k8s(type_, "hostile")) == [
        f"hostile: resource type {type_} is not one the program creates: remove it, or admit it with a reason in the "
        "base branch's policy/config/<stack>.json (closed-world.admit)",
        f"hostile: Kubernetes kind {kind} of {api} is not one the program creates: remove it, or admit it with a "
        "reason in the base branch's policy/config/<stack>.json (closed-world.admit)",
    ]


@pytest.mark.pure
def test_a_listed_token_carrying_another_kind_is_refused_by_its_kind():
    """The provider creates what the object says: a RoleBinding token whose object is a ClusterRoleBinding, or a
    ConfigMap token whose object is of another apiVersion."""
    (message,) = messages(k8s(ROLE_BINDING, "b", kind="ClusterRoleBinding"))
    assert "Kubernetes kind ClusterRoleBinding of rbac.authorization.k8s.io/v1 is not one" in message
    (message,) = messages(k8s("kubernetes:core/v1:ConfigMap", "c", apiVersion="v2"))
    assert "Kubernetes kind ConfigMap of v2 is not one" in message
    assert messages(k8s(ROLE_BINDING, "b"), k8s("kubernetes:core/v1:ConfigMap", "c")) == []
    (message,) = messages(k8s("kubernetes:core/v1:ConfigMap", "c", kind=["ConfigMap"]))
    assert "which are not texts: fix them" in message


@pytest.mark.pure
def test_a_kind_not_known_at_preview_is_judged_at_up():
    unknown = k8s("kubernetes:core/v1:ConfigMap", "c", kind=Unknown())
    found = judge(unknown, preview=True)
    assert [(f.level, f.unjudged) for f in found] == [("advisory", True)]
    assert "ConfigMap c: .kind not known until what they come from exists" in found[0].message
    found = judge(unknown)
    assert [f.message for f in found] == [
        "cannot judge ConfigMap c: .kind: not known at `pulumi up`; give it a value the program knows"
    ]


@pytest.mark.pure
def test_a_role_the_program_does_not_grant_with_a_listed_type_is_refused():
    assert messages(grant("roles/storage.objectViewer")) == []
    assert messages(grant("roles/storage.admin")) == [
        f"hostile-grant: role roles/storage.admin on {BUCKET_GRANT} is not one the program grants with it: remove it, "
        "or admit it with a reason in the base branch's policy/config/<stack>.json (closed-world.admit)"
    ]
    # Per grant type: the repository reader is granted on the project and on mirrors, never on the bucket.
    assert "roles/artifactregistry.reader" in WORLD.roles["gcp:projects/iAMMember:IAMMember"]
    assert len(messages(grant("roles/artifactregistry.reader"))) == 1
    assert len(messages(grant("projects/p/roles/custom"))) == 1
    assert len(messages(grant("roles/storage.objectviewer"))) == 1
    (message,) = messages(grant(["roles/storage.objectViewer"]))
    assert "a role that is not a text" in message


@pytest.mark.pure
def test_the_roles_of_a_policy_document_are_judged():
    """Each binding's role, against the roles listed for its own grant type (none for a type the program never
    uses)."""
    type_ = "gcp:storage/bucketIAMPolicy:BucketIAMPolicy"
    document = '{"bindings": [{"role": "roles/storage.objectViewer"}, {"role": "roles/owner"}]}'
    found = messages((type_, "policy", {"bucket": "b", "policyData": document}))
    assert [m.split(" is not one")[0] for m in found] == [
        f"policy: resource type {type_}",
        f"policy: role roles/storage.objectViewer on {type_}",
        f"policy: role roles/owner on {type_}",
    ]
    admitted = [
        {"type": type_, "reason": "r"},
        {"role": "roles/storage.objectViewer", "grantType": type_, "reason": "r"},
    ]
    assert len(messages((type_, "policy", {"bucket": "b", "policyData": document}), admit=admitted)) == 1
    (_, message) = messages((type_, "p", {"bucket": "b", "policyData": "{"}))
    assert message == "p: its policy document cannot be read, so its roles cannot be judged: write it as JSON"


@pytest.mark.pure
def test_a_role_not_known_at_preview_is_judged_at_up():
    assert [(f.level, f.unjudged) for f in judge(grant(Unknown()), preview=True)] == [("advisory", True)]
    assert [f.message for f in judge(grant(Unknown()))] == [
        "cannot judge BucketIAMMember hostile-grant: .role: not known at `pulumi up`; give it a value the program knows"
    ]


@pytest.mark.pure
@pytest.mark.parametrize(
    "subject",
    [
        {"kind": "User", "name": "system:anonymous", "apiGroup": "rbac.authorization.k8s.io"},
        {"kind": "Group", "name": "system:serviceaccounts"},
        {**HEAD, "namespace": "kube-system"},
        {**HEAD, "name": "tpu-rl-prod-train-head"},
        {**HEAD, "kind": "User"},
        {"kind": "ServiceAccount", "namespace": "tpu-rl", "name": "default"},
    ],
    ids=["anonymous", "all-serviceaccounts", "other-namespace", "other-stack", "user-kind", "default"],
)
def test_a_subject_the_program_does_not_bind_is_refused(subject):
    assert messages(binding(HEAD)) == []
    found = messages(binding(HEAD, subject))
    shown = f"{subject['kind']} {subject['namespace']}/{subject['name']}" if "namespace" in subject else None
    shown = shown or f"{subject['kind']} {subject['name']}"
    assert found == [
        f"hostile-binding: RBAC subject {shown} is not one the program binds (its own Kubernetes service accounts in "
        "its namespace): remove it, or admit it with a reason in the base branch's policy/config/<stack>.json "
        "(closed-world.admit)"
    ]


@pytest.mark.pure
def test_the_subjects_follow_the_stacks_names():
    """The head's account in the namespace and under the cluster name the configuration gives (defaults when unset),
    or, when the engine sends no configuration, the stack's own cluster and namespace; a system namespace is never
    the stack's."""
    renamed = {"kind": "ServiceAccount", "namespace": "rl-runs", "name": "tpu-rl-b-train-head"}
    overrides = ("tpu-rl:clusterName=tpu-rl-b", "tpu-rl:namespace=rl-runs")
    assert messages(binding(renamed), overrides=overrides) == []
    assert len(messages(binding(HEAD), overrides=overrides)) == 1
    assert len(messages(binding(renamed))) == 1
    system = {**HEAD, "namespace": "kube-system"}
    assert len(messages(binding(system), overrides=("tpu-rl:namespace=kube-system",))) == 1
    cluster = ("gcp:container/cluster:Cluster", "cluster", {"name": "tpu-rl-dev"})
    namespace = k8s("kubernetes:core/v1:Namespace", "ns", metadata={"name": "tpu-rl"})
    assert messages(binding(HEAD), cluster, namespace, engine_config=False) == []
    assert len(messages(binding(HEAD), namespace, engine_config=False)) == 1


@pytest.mark.pure
def test_a_malformed_or_unknown_subject():
    (message,) = messages(binding({"kind": "User", "name": ["system:anonymous"]}))
    assert "an RBAC subject that is not kind, namespace and name texts" in message
    unknown = {**HEAD, "name": Unknown()}
    found = judge(binding(unknown, {"kind": "User", "name": "system:anonymous"}), preview=True)
    assert sorted((f.level, f.unjudged) for f in found) == [("advisory", True), ("mandatory", False)]
    assert "RBAC subject User system:anonymous" in next(f.message for f in found if not f.unjudged)
    assert [f.message.startswith("cannot judge") for f in judge(binding(unknown))] == [True]


@pytest.mark.pure
@pytest.mark.parametrize(
    "image",
    [
        f"{MAXTEXT}:0.2.6",
        f"{MAXTEXT}@sha256:{'3' * 64}",
        f"{MAXTEXT}:0.2.5@sha256:{'3' * 64}",
        "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:latest",
    ],
)
def test_an_image_of_a_listed_repository_passes_whatever_its_tag(image):
    assert messages(jobset(image)) == []


@pytest.mark.pure
@pytest.mark.parametrize(
    ("image", "repository"),
    [
        ("us-docker.pkg.dev/cloud-tpu-images/maxtext-images/maxtext_jax_stable:2025", None),
        ("us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training/evil:0.2.5", None),
        ("us-docker.pkg.dev/cloud-tpu-images/maxtext-images:0.2.5", None),
        ("ubuntu:24.04", None),
        ("docker.io/library/ubuntu", None),
        (f"{MAXTEXT.upper()}:0.2.5", None),
        (f"{MIRROR_PATH}/tpu_post_training:0.2.5", None),
    ],
)
def test_an_image_of_another_repository_is_refused(image, repository):
    (message,) = messages(jobset(image))
    assert message.startswith(f"hostile-step: image {image}")
    assert "at spec.replicatedJobs[0].template.spec.template.spec.containers[0].image is not from a repository" in (
        message
    )
    assert message.endswith(
        "tpu-rl:images.* moves only a tag or digest): remove it, or admit it with a reason in the base branch's "
        "policy/config/<stack>.json (closed-world.admit)"
    )


@pytest.mark.pure
def test_an_image_the_stacks_mirror_serves_is_its_upstreams():
    mirrored = jobset(f"{MIRROR_PATH}/tpu_post_training:0.2.5")
    assert messages(mirrored, mirror()) == []
    (message,) = messages(mirrored, mirror("https://us-docker.pkg.dev/someone/else"))
    assert "(repository us-docker.pkg.dev/someone/else/tpu_post_training)" in message
    assert len(messages(mirrored, mirror(mode="STANDARD_REPOSITORY"))) == 1
    assert len(messages(jobset(f"{MIRROR_PATH}/other:1"), mirror())) == 1
    docker_hub = {"dockerRepository": {"publicRepository": "DOCKER_HUB"}}
    (message,) = messages(mirrored, mirror(remoteRepositoryConfig=docker_hub))
    assert "(repository docker.io/tpu_post_training)" in message


@pytest.mark.pure
def test_an_image_or_mirror_not_known_at_preview_is_judged_at_up():
    mirrored = jobset(f"{MIRROR_PATH}/tpu_post_training:0.2.5")
    found = judge(mirrored, mirror(Unknown()), preview=True)
    assert [(f.level, f.unjudged) for f in found] == [("advisory", True)]
    assert [f.message.startswith("cannot judge") for f in judge(mirrored, mirror(Unknown()))] == [True]
    found = judge(jobset(Unknown()), jobset("ubuntu:24.04"), preview=True)
    assert sorted((f.level, f.unjudged) for f in found) == [("advisory", True), ("mandatory", False)]


@pytest.mark.pure
def test_an_image_anywhere_in_any_resource_is_judged():
    """A Cloud Run revision's, an Argo template's, a Helm chart value's ``image: {repository}``."""
    run = ("gcp:cloudrunv2/service:Service", "run", {"template": {"containers": [{"image": "gcr.io/x/y:1"}]}})
    assert [
        m for m in messages(run) if "image gcr.io/x/y:1 (repository gcr.io/x/y) at template.containers[0].image" in m
    ]
    argo = k8s(
        "kubernetes:argoproj.io/v1alpha1:Workflow", "wf", spec={"templates": [{"container": {"image": "a.io/b"}}]}
    )
    assert "wf: image a.io/b at spec.templates[0].container.image is not from" in messages(argo)[2]
    values = {"values": {"controllerManager": {"image": {"repository": "registry.k8s.io/x/y", "tag": "1"}}}}
    (message,) = messages(("kubernetes:helm.sh/v3:Release", "kueue", values))
    assert "image registry.k8s.io/x/y at values.controllerManager.image.repository" in message
    assert messages(("kubernetes:helm.sh/v3:Release", "kueue", {"values": {"image": {"tag": "1"}}})) == []


# ---------------------------------------------------------------------------------------------
# Admissions: the base branch's policy config, each with a reason


ADMITTED = [
    ({"type": "gcp:cloudrunv2/service:Service"}, ("gcp:cloudrunv2/service:Service", "run", {})),
    ({"apiVersion": "apps/v1", "kind": "Deployment"}, k8s("kubernetes:apps/v1:Deployment", "d")),
    ({"role": "roles/storage.admin", "grantType": BUCKET_GRANT}, grant("roles/storage.admin")),
    ({"role": "roles/storage.admin"}, grant("roles/storage.admin")),
    ({"subject": {"kind": "User", "name": "ops@example.com"}}, binding({"kind": "User", "name": "ops@example.com"})),
    ({"image": "docker.io/library/nginx"}, jobset("docker.io/library/nginx:1.27")),
]


@pytest.mark.pure
@pytest.mark.parametrize(
    ("entry", "resource"), ADMITTED, ids=["type", "kind", "role-on-type", "role", "subject", "image"]
)
def test_an_admission_with_a_reason_passes_and_without_one_is_a_finding(entry, resource):
    assert messages(resource, admit=[{**entry, "reason": "the team's dashboard"}]) == []
    refused = messages(resource)
    assert refused
    for reason in ({}, {"reason": ""}, {"reason": "  "}, {"reason": 1}):
        found = messages(resource, admit=[{**entry, **reason}])
        assert found[0].startswith("the policy config's closed-world admit[0] admits the ")
        assert found[0].endswith(
            "without a reason: give it a non-empty reason (why the stack needs it); it admits nothing until fixed"
        )
        assert found[1:] == refused


@pytest.mark.pure
def test_an_admission_admits_only_what_it_names():
    role_elsewhere = {"role": "roles/storage.admin", "grantType": "gcp:projects/iAMMember:IAMMember", "reason": "r"}
    assert len(messages(grant("roles/storage.admin"), admit=[role_elsewhere])) == 1
    kind_type_only = {"type": "kubernetes:apps/v1:Deployment", "reason": "r"}
    (message,) = messages(k8s("kubernetes:apps/v1:Deployment", "d"), admit=[kind_type_only])
    assert "Kubernetes kind Deployment of apps/v1" in message
    other_version = {"apiVersion": "apps/v1beta1", "kind": "Deployment", "reason": "r"}
    assert len(messages(k8s("kubernetes:apps/v1:Deployment", "d"), admit=[other_version])) == 2
    namespaced = {"subject": {"kind": "User", "namespace": "x", "name": "ops"}, "reason": "r"}
    assert len(messages(binding({"kind": "User", "name": "ops"}), admit=[namespaced])) == 1


@pytest.mark.pure
@pytest.mark.parametrize(
    ("admit", "problem"),
    [
        (["x"], "admit[0] is not an object"),
        ([{"reason": "r"}], "admit[0] names nothing: name one of type, kind, role, subject, image"),
        ([{"type": "a", "image": "b", "reason": "r"}], "admit[0] names type and image: name one of"),
        ([{"type": "a", "grantType": "b", "reason": "r"}], "admit[0] has grantType, which a type entry does not take"),
        ([{"image": f"{MAXTEXT}:1", "reason": "r"}], f"admits the image {MAXTEXT}:1 with a tag or digest: admit its"),
        ([{"kind": "Deployment", "reason": "r"}], "admit[0] admits a malformed kind (Deployment)"),
        ([{"subject": {"kind": "User"}, "reason": "r"}], "admit[0] admits a malformed subject"),
        ([{"subject": {"kind": "U", "name": "n", "x": 1}, "reason": "r"}], "admits a subject other than {kind,"),
    ],
)
def test_a_malformed_admission_is_a_finding_and_admits_nothing(admit, problem):
    (message,) = messages(admit=admit)
    assert problem in message


@pytest.mark.pure
def test_an_admit_that_is_not_a_list_is_refused_by_the_engine():
    with pytest.raises(BadInputError, match='closed-world.admit: "everything" is not of type array'):
        judge(admit="everything")


@pytest.mark.pure
def test_the_example_configs_admit_nothing_and_are_mandatory():
    for stack in ("dev", "prod"):
        assert analyzer.policy_config_file(stack)["closed-world"] == {"enforcementLevel": "mandatory", "admit": []}


closed_world = importlib.import_module("policy.tpu_rl_policies.closed_world")

pytestmark = pytest.mark.pure

PREFIX = "the policy config's closed-world admit[0]"
SUFFIX = "; it admits nothing until fixed"
SHAPE = "see docs/guardrails.md for the entry's shape"
ADMIN = "roles/storage.admin"
REFUSED_GRANT = f"hostile-grant: role {ADMIN} on {BUCKET_GRANT} is not one the program grants with it"

MALFORMED = [
    ({"type": "", "reason": "r"}, f"admits a malformed type (): {SHAPE}"),
    ({"image": "", "reason": "r"}, f"admits a malformed image (): {SHAPE}"),
    ({"role": ADMIN, "grantType": "", "reason": "r"}, f"admits a malformed role ({ADMIN}): {SHAPE}"),
    ({"role": ADMIN, "grantType": None, "reason": "r"}, f"admits a malformed role ({ADMIN}): {SHAPE}"),
    (
        {"type": "a", "grantType": "b", "apiVersion": "c", "reason": "r"},
        "has apiVersion, grantType, which a type entry does not take",
    ),
]


@pytest.mark.pure
@pytest.mark.parametrize(("entry", "problem"), MALFORMED, ids=["type", "image", "grant-type", "null-grant", "extra"])
def test_a_malformed_admission_says_what_is_wrong_and_admits_nothing(entry: dict[str, Any], problem: str) -> None:
    """An empty text or a ``grantType`` given as no type token is malformed, never a wildcard: the grant the entry
    might have admitted stays refused."""
    found = messages(grant(ADMIN), admit=[entry])
    assert found[0] == f"{PREFIX} {problem}{SUFFIX}"
    assert len(found) == 2 and found[1].startswith(REFUSED_GRANT)


@pytest.mark.pure
def test_a_core_kind_admits_the_core_groups_type_token() -> None:
    """``{"apiVersion": "v1", "kind": "Pod"}`` admits the object and the token that creates it,
    ``kubernetes:core/v1:Pod``; a grouped version is its own token's."""
    pod = k8s("kubernetes:core/v1:Pod", "p")
    assert len(messages(pod)) == 2
    assert messages(pod, admit=[{"apiVersion": "v1", "kind": "Pod", "reason": "the team's debug pod"}]) == []
    assert closed_world.kind_type("v1", "Pod") == "kubernetes:core/v1:Pod"
    assert closed_world.kind_type("apps/v1", "Deployment") == "kubernetes:apps/v1:Deployment"


@pytest.mark.pure
@pytest.mark.parametrize("present", ["apiVersion", "kind"])
def test_a_kubernetes_object_with_only_one_of_apiversion_and_kind_is_judged(present):
    """Either field makes it an object whose kind is judged; the other, missing, is not a text."""
    type_ = "kubernetes:core/v1:ConfigMap"
    props = {present: {"apiVersion": "v1", "kind": "ConfigMap"}[present], "metadata": {"name": "c"}}
    (message,) = messages((type_, "c", props))
    api, kind = ("v1", None) if present == "apiVersion" else (None, "ConfigMap")
    assert message == f"c: a Kubernetes object of apiVersion {api} and kind {kind}, which are not texts: fix them"
    assert messages((type_, "c", {"metadata": {"name": "c"}})) == [], "neither: nothing to judge"


@pytest.mark.pure
def test_an_apiversion_not_known_at_up_is_named_not_judged_as_a_text():
    found = judge(k8s("kubernetes:core/v1:ConfigMap", "c", apiVersion=Unknown()))
    assert [f.message for f in found] == [
        "cannot judge ConfigMap c: .apiVersion: not known at `pulumi up`; give it a value the program knows"
    ]


@pytest.mark.pure
def test_a_policy_document_not_known_at_up_is_named():
    type_ = "gcp:storage/bucketIAMPolicy:BucketIAMPolicy"
    found = judge((type_, "policy", {"bucket": "b", "policyData": Unknown()}))
    assert [f.message for f in found][-1] == (
        "cannot judge BucketIAMPolicy policy: .policyData: not known at `pulumi up`; give it a value the program knows"
    )


@pytest.mark.pure
def test_subjects_are_judged_on_kubernetes_objects_only_and_each_one():
    """A subject that is not texts is named and the next one is still judged; a ``subjects`` field of another
    provider's resource is no RBAC subject."""
    anonymous = {"kind": "User", "name": "system:anonymous"}
    found = messages(binding({"kind": "User", "name": ["x"]}, anonymous))
    assert len(found) == 2 and "not kind, namespace and name texts" in found[0] and "system:anonymous" in found[1]
    grant_with_subjects = (BUCKET_GRANT, "g", {**grant("roles/storage.objectViewer")[2], "subjects": [anonymous]})
    assert messages(grant_with_subjects) == []
