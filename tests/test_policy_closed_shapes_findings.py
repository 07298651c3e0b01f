"""What ``closed-world-shapes`` finds on one resource and how it words it: the stray paths it names (where a list or a
root stands), the namespace a Helm release or an object is in, the pinned values it checks path by path, the names its
templates stand for in the stack's configuration, and the values not known at a preview it leaves for `pulumi up`."""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import pytest
from pulumi.output import Unknown

from tests import analyzer
from tests.frozen import NO_CACHE

pytestmark = pytest.mark.pure

shapes = importlib.import_module("policy.tpu_rl_policies.closed_shapes")
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
SECRET = "kubernetes:core/v1:Secret"
ROLE = "kubernetes:rbac.authorization.k8s.io/v1:Role"
BINDING = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
RELEASE = "kubernetes:helm.sh/v3:Release"
STORAGE = "kubernetes:storage.k8s.io/v1:StorageClass"
FIX = "or admit with a reason in the base branch's policy/config/<stack>.json (closed-world-shapes.admit)"
META = {"name": "c", "namespace": "tpu-rl"}
RULE = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}


def judge(
    type_: str,
    props: dict[str, Any],
    *,
    preview: bool = False,
    stack_config: dict[str, str] | None = None,
    policy: dict[str, Any] | None = None,
) -> list[analyzer.Finding]:
    """The policy's findings on one resource named ``r``, the dev stack's configuration as the engine sends it unless
    ``stack_config`` is given."""
    config = {"all": "mandatory", "closed-world-shapes": policy or {"enforcementLevel": "mandatory", "admit": []}}
    pack = analyzer.Pack(
        config,
        dry_run=preview,
        policies=[shapes.closed_world_shapes],
        stack="dev",
        stack_config=analyzer.engine_config("dev") if stack_config is None else stack_config,
    )
    return pack.analyze(analyzer.Resource(type_, "r", f"urn:pulumi:dev::tpu-rl::{type_}::r", props))


def messages(found: list[analyzer.Finding]) -> list[str]:
    return [f.message for f in found]


def binding(role: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "b", "namespace": "tpu-rl"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
    }


def storage(**props: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "s"},
        "parameters": {"type": "hyperdisk-balanced"},
        "provisioner": "pd.csi.storage.gke.io",
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
        **props,
    }


def stray(paths: str, type_: str, many: bool = False) -> str:
    verb, pronoun = ("are not properties", "them") if many else ("is not a property", "it")
    return f"r: {paths} {verb} the program sets on {type_}: remove {pronoun}, {FIX}"


SUBJECT = {"kind": "ServiceAccount", "name": "train", "namespace": "tpu-rl"}


@pytest.mark.parametrize(
    ("type_", "props", "found"),
    [
        pytest.param(CONFIG_MAP, {"data": ["x"]}, "data[]", id="a list where the tree takes none"),
        pytest.param(BINDING, {"subjects": [{**SUBJECT, "extra": 1}]}, "subjects[].extra", id="a key of an item"),
    ],
)
def test_a_stray_under_a_list_is_named_by_its_path(type_: str, props: dict[str, Any], found: str) -> None:
    base = binding("tpu-rl-dev-train-head") if type_ == BINDING else {"metadata": META}
    assert messages(judge(type_, {**base, **props})) == [stray(found, type_)]


@pytest.mark.parametrize("count", [2, 5])
def test_several_strays_are_one_finding_that_names_them_all_up_to_five(count: int) -> None:
    """Five paths are named in full (nothing "more"); more than one is "them"."""
    found = judge(CONFIG_MAP, {"metadata": META, "data": {f"k{i}": "x" for i in range(count)}})
    listed = ", ".join(f"data.k{i}" for i in range(count))
    assert messages(found) == [stray(listed, CONFIG_MAP, many=True)]


def test_a_value_where_the_tree_wants_an_object_is_named_at_the_root_as_a_dot() -> None:
    """A root that takes no value of its own (a tree of no path) names a plain value there as ``.``."""
    assert list(shapes._strays("x", shapes.Node(), "")) == ["."]
    assert list(shapes._strays({"a": "x"}, shapes.Node(), "")) == ["a"]


def test_a_whole_object_the_program_sends_unknown_waits_without_a_word_at_a_preview() -> None:
    """A ConfigMap's ``data`` is sent not known yet by the program itself (``unknowns``): no note, no finding."""
    assert judge(CONFIG_MAP, {"metadata": META, "data": Unknown()}, preview=True) == []


def test_an_unknown_list_item_at_a_path_the_program_sends_unknown_waits_without_a_word(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The program's own unknowns are quiet inside a list too (their path names the item ``[]``)."""
    monkeypatch.setenv(NO_CACHE, "1")
    props = {**binding("tpu-rl-dev-train-head"), "subjects": [Unknown()]}
    (noted,) = judge(BINDING, props, preview=True)
    assert (noted.level, noted.unjudged) == ("advisory", True)
    unknowns = {**shapes.WORLD.unknowns, BINDING: frozenset({"subjects[]"})}
    monkeypatch.setattr(shapes, "WORLD", dataclasses.replace(shapes.WORLD, unknowns=unknowns))
    assert judge(BINDING, props, preview=True) == []


@pytest.mark.parametrize(
    "props",
    [
        pytest.param({"metadata": Unknown()}, id="metadata"),
        pytest.param({"metadata": {"name": "c", "namespace": Unknown()}}, id="namespace"),
        pytest.param({"metadata": META, "rules": [Unknown()]}, id="a list's item"),
    ],
)
def test_a_value_not_known_at_a_preview_is_judged_at_up_not_refused(props: dict[str, Any]) -> None:
    """Advisory, and without a finding it would make reading the value as unset (an object "in namespace (not known
    during preview)")."""
    found = judge(ROLE if "rules" in props else CONFIG_MAP, props, preview=True)
    assert [(f.level, f.unjudged) for f in found] == [("advisory", True)]
    assert [f.message.endswith("judged at `pulumi up`") for f in found] == [True]


def test_a_helm_release_in_another_namespace_is_named_at_its_namespace() -> None:
    props = {"namespace": "kube-system", "chart": "oci://registry.k8s.io/kueue/charts/kueue", "createNamespace": True}
    assert messages(judge(RELEASE, props)) == [
        f"r: {RELEASE} in namespace kube-system at namespace, not one the program uses (jobset-system, "
        f"kueue-system, tpu-rl): put it in the stack's namespace, {FIX}"
    ]


@pytest.mark.parametrize(
    ("metadata", "shown"),
    [
        pytest.param({"name": "c"}, "no namespace (the provider's default)", id="unset"),
        pytest.param({"name": "c", "namespace": ["x"]}, "namespace ['x']", id="a list"),
        pytest.param({"name": "c", "namespace": {"a": 1}}, "namespace {'a': 1}", id="an object"),
    ],
)
def test_an_object_out_of_the_stacks_namespaces_is_refused_in_full_words(metadata: dict[str, Any], shown: str) -> None:
    found = [m for m in messages(judge(CONFIG_MAP, {"metadata": metadata})) if " at metadata.namespace," in m]
    assert found == [
        f"r: {CONFIG_MAP} in {shown} at metadata.namespace, not one the program uses (jobset-system, kueue-system, "
        f"tpu-rl): put it in the stack's namespace, {FIX}"
    ]


def test_the_stacks_namespace_is_the_one_its_configuration_names() -> None:
    config = analyzer.engine_config("dev", "tpu-rl:namespace=team-a")
    assert judge(CONFIG_MAP, {"metadata": {"name": "c", "namespace": "team-a"}}, stack_config=config) == []
    (found,) = judge(CONFIG_MAP, {"metadata": META}, stack_config=config)
    assert (
        "in namespace tpu-rl at metadata.namespace, not one the program uses (jobset-system, kueue-system, team-a)"
        in (found.message)
    )


def test_a_configured_namespace_that_is_not_the_stacks_own_admits_nothing() -> None:
    """``kube-system`` is no name the stack may take: an object put there is refused even when configured so."""
    config = analyzer.engine_config("dev", "tpu-rl:namespace=kube-system")
    (found,) = judge(CONFIG_MAP, {"metadata": {"name": "c", "namespace": "kube-system"}}, stack_config=config)
    assert found.message == (
        f"r: {CONFIG_MAP} in namespace kube-system at metadata.namespace, not one the program uses (jobset-system, "
        f"kueue-system): put it in the stack's namespace, {FIX}"
    )


def test_the_cluster_name_is_the_configured_one_or_its_default() -> None:
    """A role binding names the role ``<clusterName>-train-head``: the stack's, ``tpu-rl`` when it sets none, and no
    name at all when the configured one is not a cluster name."""
    assert judge(BINDING, binding("tpu-rl-dev-train-head")) == []
    unset = {k: v for k, v in analyzer.engine_config("dev").items() if k != "tpu-rl:clusterName"}
    assert judge(BINDING, binding("tpu-rl-train-head"), stack_config=unset) == []
    assert len(judge(BINDING, binding("tpu-rl-dev-train-head"), stack_config=unset)) == 1
    bad = analyzer.engine_config("dev", "tpu-rl:clusterName=Bad_Name")
    (found,) = judge(BINDING, binding("Bad_Name-train-head"), stack_config=bad)
    assert found.message.startswith(f'r: roleRef of {BINDING} is {{"apiGroup"')
    nul = binding("\x00-train-head")
    assert messages(judge(BINDING, nul, stack_config=bad)) == messages(judge(BINDING, nul))


def test_each_pinned_path_is_judged_on_its_own() -> None:
    """An unset pinned path, or one not known at a preview, does not stop the next from being judged."""
    unset = storage(provisioner="x")
    del unset["parameters"]
    wrong = f'r: provisioner of {STORAGE} is "x", not a value the program writes there: write the program\'s, {FIX}'
    assert messages(judge(STORAGE, unset)) == [
        f"r: parameters of {STORAGE} is unset, and the program always sets it: set it, {FIX}",
        wrong,
    ]
    previewed = judge(STORAGE, storage(parameters=Unknown(), provisioner="x"), preview=True)
    assert [(f.level, f.message) for f in previewed if not f.unjudged] == [("mandatory", wrong)]


def test_a_list_at_a_pinned_path_of_one_value_is_judged_whole() -> None:
    """``type: ["Opaque"]`` is not the value ``Opaque``: only a ``[]`` path judges a list item by item."""
    found = messages(judge(SECRET, {"metadata": META, "type": ["Opaque"]}))
    assert f'r: type of {SECRET} is ["Opaque"], not a value the program writes there: write the program\'s, {FIX}' in (
        found
    )


def test_a_long_pinned_value_is_shown_to_three_hundred_characters() -> None:
    (found,) = judge(SECRET, {"metadata": META, "type": "x" * 400})
    shown = '"' + "x" * 299
    assert (
        found.message
        == f"r: type of {SECRET} is {shown}, not a value the program writes there: write the program's, {FIX}"
    )


def test_a_policy_config_without_admissions_admits_nothing_and_refuses_nothing_else() -> None:
    policy = {"enforcementLevel": "mandatory"}
    assert judge(CONFIG_MAP, {"metadata": META}, policy=policy) == []
    assert messages(judge(CONFIG_MAP, {"metadata": META, "data": {"k": "x"}}, policy=policy)) == [
        stray("data.k", CONFIG_MAP)
    ]
