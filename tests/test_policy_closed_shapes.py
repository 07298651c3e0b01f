"""``closed-world-shapes``: a resource of a type the program creates holds only the property paths, namespaces and
pinned values the program writes (``core/data/closed-world.json``), through pulumi-policy's own analyzer with the
stack's configuration as the engine sends it, at `pulumi up` and at a preview (a value not known yet)."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from pulumi.output import Unknown

from tests import analyzer
from tests.conftest import plan_of

shapes = importlib.import_module("policy.tpu_rl_policies.closed_shapes")
POLICY = shapes.closed_world_shapes
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
ROLE = "kubernetes:rbac.authorization.k8s.io/v1:Role"
RELEASE = "kubernetes:helm.sh/v3:Release"
FIX = "or admit with a reason in the base branch's policy/config/<stack>.json (closed-world-shapes.admit)"


def judge(type_: str, props: dict[str, Any], admit: Any = [], preview: bool = False) -> list[analyzer.Finding]:  # noqa: B006
    config = {"all": "mandatory", "closed-world-shapes": {"enforcementLevel": "mandatory", "admit": admit}}
    pack = analyzer.Pack(
        config, dry_run=preview, policies=[POLICY], stack="dev", stack_config=analyzer.engine_config("dev")
    )
    return pack.analyze(analyzer.Resource(type_, "r", f"urn:pulumi:dev::tpu-rl::{type_}::r", props))


def cm(**props: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "tpu-rl"}, **props}


@pytest.mark.program
@pytest.mark.parametrize("stack", ["dev", "prod"])
@pytest.mark.parametrize("preview", [False, True], ids=["up", "preview"])
def test_the_programs_own_plans_draw_nothing(stack, preview):
    plan = analyzer.first_preview(stack) if preview else analyzer.frozen(plan_of(stack))
    pack = analyzer.Pack(
        analyzer.policy_config_file(stack),
        dry_run=preview,
        policies=[POLICY],
        stack=stack,
        stack_config=analyzer.engine_config(stack),
    )
    assert [f for r in analyzer.resources(plan, preview=preview, stack_view=False) for f in pack.analyze(r)] == []


@pytest.mark.pure
@pytest.mark.parametrize("preview", [False, True])
def test_a_path_the_program_does_not_set_is_named_at_up_and_preview(preview):
    assert judge(CONFIG_MAP, cm(data={"run.sh": "x"}), preview=preview) == []
    value = Unknown() if preview else "hf_x"
    (found,) = judge(CONFIG_MAP, cm(data={"run.sh": "x", "token": value}), preview=preview)
    assert (found.level, found.message) == (
        "mandatory",
        f"r: data.token is not a property the program sets on {CONFIG_MAP}: remove it, {FIX}",
    )


@pytest.mark.pure
def test_an_empty_object_is_a_path_of_its_own():
    queue = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
    path, value = judge(queue, {"spec": {"namespaceSelector": {}}})
    assert "spec.namespaceSelector is not a property" in path.message
    assert "spec.namespaceSelector of " + queue + " is {}, not a value the program writes" in value.message
    assert (
        judge(queue, {"spec": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "tpu-rl"}}}}) == []
    )


@pytest.mark.pure
def test_many_paths_are_one_finding_naming_five():
    (found,) = judge(CONFIG_MAP, cm(data={f"k{i}": "x" for i in range(7)}))
    assert "data.k0, data.k1, data.k2, data.k3, data.k4 and 2 more are not properties" in found.message


@pytest.mark.pure
def test_an_unknown_whole_object_is_judged_at_up():
    found = judge(
        RELEASE,
        {
            "namespace": "kueue-system",
            "chart": "oci://registry.k8s.io/kueue/charts/kueue",
            "createNamespace": True,
            "values": Unknown(),
        },
        preview=True,
    )
    assert [(f.level, f.unjudged) for f in found] == [("advisory", True)]
    assert [
        f.message.startswith("cannot judge")
        for f in judge(
            RELEASE,
            {
                "namespace": "kueue-system",
                "chart": "oci://registry.k8s.io/kueue/charts/kueue",
                "createNamespace": True,
                "values": Unknown(),
            },
        )
    ] == [True]


@pytest.mark.pure
def test_the_namespace_is_the_stacks_or_a_charts():
    assert judge(CONFIG_MAP, cm()) == []
    (found,) = judge(CONFIG_MAP, {**cm(), "metadata": {"name": "c", "namespace": "kube-system"}})
    assert "in namespace kube-system at metadata.namespace, not one the program uses" in found.message
    (found,) = judge(CONFIG_MAP, {**cm(), "metadata": {"name": "c"}})
    assert "no namespace (the provider's default)" in found.message
    assert (
        judge(
            CONFIG_MAP,
            {**cm(), "metadata": {"name": "c", "namespace": "kube-system"}},
            admit=[{"namespace": "kube-system", "reason": "r"}],
        )
        == []
    )


@pytest.mark.pure
def test_a_pinned_value_is_the_programs():
    rule = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}
    assert judge(ROLE, {"metadata": {"name": "r", "namespace": "tpu-rl"}, "rules": [rule]}) == []
    (found,) = judge(
        ROLE, {"metadata": {"name": "r", "namespace": "tpu-rl"}, "rules": [rule, {**rule, "verbs": ["create"]}]}
    )
    assert found.message.startswith('r: rules[] of kubernetes:rbac.authorization.k8s.io/v1:Role is {"apiGroups"')
    admitted = [{"pinned": f"{ROLE}:rules[]", "value": {**rule, "verbs": ["create"]}, "reason": "r"}]
    assert (
        judge(
            ROLE,
            {"metadata": {"name": "r", "namespace": "tpu-rl"}, "rules": [rule, {**rule, "verbs": ["create"]}]},
            admit=admitted,
        )
        == []
    )
    previewed = judge(
        ROLE,
        {"metadata": {"name": "r", "namespace": "tpu-rl"}, "rules": [{**rule, "verbs": [Unknown()]}]},
        preview=True,
    )
    assert [(f.level, f.unjudged) for f in previewed] == [("advisory", True)]


@pytest.mark.pure
def test_admissions_need_a_reason_and_a_shape():
    assert judge(CONFIG_MAP, cm(data={"x": "y"}), admit=[{"path": f"{CONFIG_MAP}:data.x", "reason": "r"}]) == []
    assert judge(CONFIG_MAP, cm(data={"x": "y"}), admit=[{"path": f"{CONFIG_MAP}:data.*", "reason": "r"}]) == []
    unreasoned = judge(CONFIG_MAP, cm(data={"x": "y"}), admit=[{"path": f"{CONFIG_MAP}:data.x"}])
    assert "admit[0] admits the path" in unreasoned[0].message and len(unreasoned) == 2
    (malformed, _) = judge(CONFIG_MAP, cm(data={"x": "y"}), admit=[{"path": "data.x", "reason": "r"}])
    assert "admits a malformed path (data.x)" in malformed.message


PREFIX = "the policy config's closed-world-shapes admit[0]"
SUFFIX = "; it admits nothing until fixed"
TOKEN = f"r: data.token is not a property the program sets on {CONFIG_MAP}: remove it, {FIX}"
"""The finding on ``cm(data={"token": ...})`` that a malformed admission leaves standing."""
SHAPE = "see docs/policies.md (the closed world) for the entry's shape"
RULE = {"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}

MALFORMED = [
    ({"reason": "r"}, "names nothing: name one of path, namespace, pinned"),
    (
        {"path": f"{CONFIG_MAP}:data.token", "pinned": f"{CONFIG_MAP}:data.token", "reason": "r"},
        "names path and pinned: name one of path, namespace, pinned",
    ),
    (
        {"path": f"{CONFIG_MAP}:data.token", "value": "x", "reason": "r"},
        "has value, which a path entry does not take",
    ),
    (
        {"path": f"{CONFIG_MAP}:data.token", "why": "x", "because": "y", "reason": "r"},
        "has because, why, which a path entry does not take",
    ),
    ({"namespace": "kube-system", "value": "x", "reason": "r"}, "has value, which a namespace entry does not take"),
    ({"path": 5, "reason": "r"}, f"admits a malformed path (5): {SHAPE}"),
    ({"path": f"{CONFIG_MAP}:data[", "reason": "r"}, f"admits a malformed path ({CONFIG_MAP}:data[): {SHAPE}"),
    ({"path": "data.token", "reason": "r"}, f"admits a malformed path (data.token): {SHAPE}"),
    (
        {"path": f'{CONFIG_MAP}:data["\\q"]', "reason": "r"},
        f'admits a malformed path ({CONFIG_MAP}:data["\\q"]): {SHAPE}',
    ),
    ({"namespace": "", "reason": "r"}, f"admits a malformed namespace (): {SHAPE}"),
    ({"pinned": f"{ROLE}:rules[]", "reason": "r"}, f"admits a malformed pinned ({ROLE}:rules[]): {SHAPE}"),
    ({"pinned": "rules[]", "value": RULE, "reason": "r"}, f"admits a malformed pinned (rules[]): {SHAPE}"),
]


@pytest.mark.pure
@pytest.mark.parametrize(("entry", "problem"), MALFORMED, ids=[p.split(":")[0] for _, p in MALFORMED])
def test_a_malformed_admission_says_what_is_wrong_and_admits_nothing(entry: dict[str, Any], problem: str) -> None:
    """The finding names what the entry lacks or has too much of (the keys sorted), and the path it would have
    admitted stays a finding."""
    found = judge(CONFIG_MAP, cm(data={"token": "x"}), admit=[entry])
    assert [f.message for f in found] == [f"{PREFIX} {problem}{SUFFIX}", TOKEN]


@pytest.mark.pure
def test_an_admitted_path_admits_everything_under_it() -> None:
    """``<type>:data`` admits any key of ``data`` and any depth below it, not only the paths it spells out."""
    admit = [{"path": f"{CONFIG_MAP}:data", "reason": "the team's scripts"}]
    assert judge(CONFIG_MAP, cm(data={"token": "x", "other": "y"}), admit=admit) == []
    values = {"values": {"extra": {"deep": {"deeper": 1}}}}
    assert judge(RELEASE, {**release(), **values}, admit=[{"path": f"{RELEASE}:values.extra", "reason": "r"}]) == []
    (found,) = judge(RELEASE, {**release(), **values}, admit=[{"path": f"{RELEASE}:values.extra.other", "reason": "r"}])
    assert found.message.startswith("r: values.extra is not a property the program sets on")


@pytest.mark.pure
def test_an_admitted_path_may_quote_a_key_holding_a_colon() -> None:
    """The type token is the first three ``:`` parts; the rest, colons and all, is the path."""
    values = {"values": {"host:port": "a:1"}}
    admit = [{"path": f'{RELEASE}:values["host:port"]', "reason": "r"}]
    assert judge(RELEASE, {**release(), **values}, admit=admit) == []
    (found,) = judge(RELEASE, {**release(), **values})
    assert found.message.startswith('r: values["host:port"] is not a property the program sets on')


@pytest.mark.pure
def test_a_namespace_entry_admits_its_text_as_a_name_never_as_a_path() -> None:
    """A namespace is read as written, even one that a path reader would refuse (a quoted key JSON cannot read)."""
    odd = 'a:b:c:["\\q"]'
    meta = {"metadata": {"name": "c", "namespace": odd}}
    assert judge(CONFIG_MAP, {**cm(), **meta}, admit=[{"namespace": odd, "reason": "r"}]) == []


def release() -> dict[str, Any]:
    return {
        "namespace": "kueue-system",
        "chart": "oci://registry.k8s.io/kueue/charts/kueue",
        "createNamespace": True,
    }


@pytest.mark.pure
def test_the_tree_takes_the_listed_paths_and_nothing_under_a_leaf() -> None:
    """Built from the list's paths (the policy builds one per type at import): each listed path is taken, a key under
    a listed path is a stray at that key, a path that is not one is skipped, and an empty object is taken at the
    root (a resource with no properties sets none the program does not)."""
    tree = shapes._tree(["data", 'metadata.labels["app"]', "spec.["])
    assert list(shapes._strays({}, tree, "")) == []
    assert list(shapes._strays({"data": "x", "metadata": {"labels": {"app": "a"}}}, tree, "")) == []
    assert list(shapes._strays({"data": {"token": "x"}}, tree, "")) == ["data.token"]
    assert list(shapes._strays({"metadata": {"labels": {"app": {"x": 1}}}}, tree, "")) == ["metadata.labels.app.x"]
    assert list(shapes._strays({"metadata": {"labels": 1}}, tree, "")) == ["metadata.labels"]
    assert list(shapes._strays({"spec": 1}, tree, "")) == ["spec"]


FIREWALL = "gcp:compute/firewall:Firewall"
CLUSTER = "gcp:container/cluster:Cluster"


@pytest.mark.program
@pytest.mark.parametrize(
    ("type_", "name", "path", "value"),
    [
        pytest.param(CLUSTER, "cluster", "datapathProvider", "LEGACY_DATAPATH", id="a-datapath-without-network-policy"),
        pytest.param(FIREWALL, "internal", "allows", [{"protocol": "all"}], id="a-firewall-open-to-every-port"),
        pytest.param(FIREWALL, "internal", "direction", "EGRESS", id="a-firewall-turned-around"),
    ],
)
def test_a_cluster_or_network_setting_that_weakens_isolation_is_not_the_programs(type_, name, path, value):
    """Where an admitted path's value decides isolation (a datapath with no NetworkPolicy enforcement, a firewall
    rule's ports and direction), the value is pinned to the program's."""
    plan = plan_of("prod")
    (props,) = [r["inputs"] for r in plan.resources if r["type"] == type_ and r["name"] == name]
    assert judge(type_, props) == []
    (found,) = judge(type_, {**props, path: value})
    assert found.message.startswith(f"r: {path} of {type_} is ") and "not a value the program writes" in found.message
