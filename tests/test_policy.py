"""The CrossGuard pack on the captured dev and prod plans, and on mutated plans it must catch."""

from __future__ import annotations

import asyncio
import base64
import collections.abc
import copy
import dataclasses
import functools
import importlib
import inspect
import json
import os
import re
import shlex
import sys
from typing import Any

import pytest
from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationPolicy,
)
from pulumi_policy.proxy import unknown_checking_proxy

from policy import judge_preview
from tests import analyzer
from tests.analyzer import Finding, Pack
from tests.conftest import one
from tests.conftest import plan_of as _program_plan
from tests.pack_estimate import stack_estimate
from tests.policy_args import shown
from tests.pure_plan import per_mutant_cache
from tests.pure_plan import pure_plan as _built
from tools.plan.offline import ROOT, Plan


@functools.wraps(_program_plan)
def plan_of(stack: str, *overrides: str) -> Plan:
    """``tests.conftest.plan_of`` (cached: shared by the tests, which copy what they change), noted as never changed
    in place (``analyzer.frozen``)."""
    return analyzer.frozen(_program_plan(stack, *overrides))


@functools.wraps(_built)
def pure_plan(stack: str, *overrides: str) -> Plan:
    """``tests.pure_plan.pure_plan`` (cached: shared by the cases, which copy what they change), its resources noted as
    never changed in place (``analyzer.frozen``: each pickled once, not once per judgement)."""
    return analyzer.frozen(_built(stack, *overrides))


pytestmark = pytest.mark.pure  # the policies judge builder output (pure_plan); one test also runs the program

# Imported by its package path (as the mutation run names it); the pack itself runs it from its folder. Each helper is
# read from the module of its concern (policies.scripts.training_run, policies.network.parse_cidr, ...).
policies = importlib.import_module("policy.tpu_rl_policies")
BY_NAME = {p.name: p for p in policies.POLICIES}
LONG = "tpu-rl:workflow.timeouts.train=168h"
"""A deadline the long runs the budget cases cost fit in (core/config/workflow_rules.py ``check_train_deadline``)."""


def stack_config(stack: str) -> dict[str, Any]:
    return json.loads(_config_text(stack))


@functools.cache
def _config_text(stack: str) -> str:
    """The stack's policy config file, read once per process (every judgement reads it; a test writes none)."""
    return (ROOT / "policy" / "config" / f"{stack}.json").read_text()


def policy_config(stack: str, name: str) -> dict[str, Any]:
    entry = stack_config(stack).get(name, {})
    return {k: v for k, v in entry.items() if k != "enforcementLevel"} if isinstance(entry, dict) else {}


def level(stack: str, name: str) -> str:
    config = stack_config(stack)
    entry = config.get(name, config.get("all"))
    assert entry is not None, f"{name} has no level in policy/config/{stack}.json"
    return entry["enforcementLevel"] if isinstance(entry, dict) else entry


def _options(resource: dict[str, Any]) -> PolicyResourceOptions:
    o = resource["options"]
    timeouts = o["customTimeouts"] or {}
    return PolicyResourceOptions(
        protect=o["protect"],
        ignore_changes=o["ignoreChanges"],
        delete_before_replace=o["deleteBeforeReplace"],
        aliases=[],
        custom_timeouts=PolicyCustomTimeouts(0, 0, 0) if not timeouts else PolicyCustomTimeouts(1, 1, 1),
        additional_secret_outputs=[],
        parent=o["parent"],
    )


def _run(result: Any) -> None:
    if asyncio.iscoroutine(result):
        asyncio.new_event_loop().run_until_complete(result)


def violations(
    plan: Plan, name: str, stack: str = "dev", config: dict[str, Any] | None = None, *, preview: bool = False
) -> list[str]:
    """Messages the named policy reports on a plan, run as the engine runs the pack (``tests/analyzer.py``: the
    properties as protobuf Structs, every number a double, through pulumi-policy's own analyzer), with the stack's
    policy config file (or ``config`` as this policy's properties); at ``pulumi up`` unless ``preview``."""
    return [f.message for f in findings(plan, name, stack, config, preview=preview)]


def findings(
    plan: Plan, name: str, stack: str = "dev", config: dict[str, Any] | None = None, *, preview: bool = False
) -> list[Finding]:
    policy = BY_NAME[name]
    variant = VARIANTS.get(stack, (stack,))
    file = stack_config(variant[0])
    if config is not None:
        file = {**file, name: {"enforcementLevel": level(variant[0], name), **config}}
    deployment = analyzer.engine_config(*variant)  # the stack's configuration, as ConfigureStack sends it
    pack = Pack(file, dry_run=preview, policies=[policy], stack=variant[0], stack_config=deployment)
    if isinstance(policy, ResourceValidationPolicy):
        found = [f for r in analyzer.resources(plan, preview=preview, stack_view=False) for f in pack.analyze(r)]
    else:
        found = pack.analyze_stack(analyzer.resources(plan, preview=preview, stack_view=True))
    return [f for f in found if f.policy == name]


def test_pack_module_imports_without_starting_a_server():
    assert "pulumi_policy" in sys.modules and len(policies.POLICIES) >= 12
    assert "__main__" not in policies.__name__
    for policy in policies.POLICIES:
        assert policy.name and policy.description and policy.severity and policy.remediation_steps
        assert "\n" not in policy.description


# Findings the stack config makes expected (all advisory there); everything else must be clean.
EXPECTED = {
    "dev": {"no-open-control-plane", "bucket-deletion-guard", "model-revision-pinned"},
    "prod": {"model-revision-pinned"},
}


@pytest.mark.parametrize(
    ("stack", "source"),
    [
        pytest.param(st, src, marks=[pytest.mark.program] if src == "program" else [])
        for st in ("dev", "prod")
        for src in ("program", "builders")
    ],
)
@pytest.mark.slow
def test_every_policy_runs_on_the_example_stacks(stack, source):
    plan = plan_of(stack) if source == "program" else pure_plan(stack)
    for name in BY_NAME:
        found = violations(plan, name, stack)
        if name in EXPECTED[stack]:
            assert found, f"{name} should report the finding {stack} expects"
            assert level(stack, name) == "advisory", f"{name} must be advisory in {stack}"
        else:
            assert found == [], f"{name} on {stack}: {found}"


@pytest.mark.slow
def test_a_publishing_stack_passes_every_policy_prod_passes():
    """The publish JobSet (its queue, retries, image, pod) and its card and Secret change no verdict."""
    for name in BY_NAME:
        assert violations(base_plan("publishing"), name, "prod") == violations(base_plan("prod"), name, "prod"), name


@pytest.mark.slow
def test_an_evaluating_stack_passes_every_policy_prod_passes():
    """The evaluation's JobSet (no token, its own account), its account, grants and propagation wait change no
    verdict."""
    evaluating = plan_of("prod", "tpu-rl:workflow.steps.evaluate=true")
    assert any(r["name"] == "evaluate-ksa" for r in evaluating.resources)
    for name in BY_NAME:
        assert violations(evaluating, name, "prod") == violations(plan_of("prod"), name, "prod"), name


@pytest.mark.program
@pytest.mark.parametrize(
    "preview",
    [pytest.param(False, marks=pytest.mark.slow), True],  # at up: a whole plan's outputs, the slow tier
    ids=["up", "first-preview"],
)
@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_example_stacks_pass_the_pack_as_the_engine_runs_it(stack, preview):
    """The whole pack, configured from the stack's policy config file as the engine reads it, on what the program
    registers (its own protobuf Structs: every number a double, secrets sig-wrapped): ``Analyze`` on each resource's
    inputs, ``AnalyzeStack`` on the outputs. At `pulumi up` and at the first preview of a new stack (every output a
    provider computes unknown), no mandatory finding; at the preview, what the pack cannot see yet is named (advisory):
    the service accounts' emails in the Kubernetes service accounts' annotations and the annotations of the steps that
    wait on an earlier one."""
    plan = analyzer.first_preview(stack) if preview else plan_of(stack)
    config = analyzer.engine_config(stack)  # the stack's configuration, as ConfigureStack sends it
    pack = Pack(analyzer.policy_config_file(stack), dry_run=preview, stack=stack, stack_config=config)
    found = analyzer.analyze_plan(plan, pack, preview=preview)
    assert analyzer.mandatory(found) == []
    assert {f.policy for f in found if not f.unjudged} == EXPECTED[stack]
    unjudged = [f for f in found if f.unjudged]
    if not preview:
        assert unjudged == []
        return
    assert {f.level for f in unjudged} == {"advisory"}
    assert {f.policy for f in unjudged} == {
        "no-secrets-in-workloads",
        "iam-service-accounts-only",
        "stack-principals",
        "grant-targets",
        "own-names",
    }
    accounts = [f for f in unjudged if f.policy == "own-names"]
    assert accounts and all("iam.gke.io/gcp-service-account" in f.message for f in accounts)
    (secrets,) = [f for f in unjudged if f.policy == "no-secrets-in-workloads"]
    assert "ServiceAccount convert-ksa: .metadata.annotations.iam.gke.io/gcp-service-account" in secrets.message
    members = [f for f in unjudged if f.policy in ("iam-service-accounts-only", "stack-principals")]
    assert all(".member" in f.message for f in members)
    (targets,) = [f for f in unjudged if f.policy == "grant-targets"]
    assert "IAMMember convert-workload-identity: .serviceAccountId" in targets.message


def test_a_count_the_engine_sends_as_a_double_is_a_count():
    """The engine sends every number as a double and pulumi-policy reads it with ``MessageToDict``: the JobSet's
    ``parallelism: 1`` reaches the pack as ``1.0`` (which the queue policy once refused as "not a count", blocking every
    step of every stack)."""
    from google.protobuf import json_format

    train = next(r for r in pure_plan("prod").resources if r["type"] == JOBSET and _is(r, "train"))
    sent = json_format.MessageToDict(judge_preview.properties(train["inputs"]))
    assert sent["spec"]["replicatedJobs"][1]["template"]["spec"]["parallelism"] == 8.0
    assert policies.properties.plain(sent)["spec"]["replicatedJobs"][1]["template"]["spec"]["parallelism"] == 8
    assert policies.kueue._count(8.0, "parallelism") == 8
    with pytest.raises(policies.kueue._MalformedError, match="is not a count"):
        policies.kueue._count(1.5, "parallelism")
    assert violations(pure_plan("prod"), "kueue-queue-fits", "prod") == []


def _read_item_by_item(value: Any, depth: int = 0, path: str = "", owner: Any = None) -> Any:
    """``properties.plain`` as a reader of pulumi-policy's proxies through their items alone would make it: each item
    read through the proxy's check, an unknown it raises on read as the unknown string."""
    from pulumi_policy.proxy import UnknownValueError

    unseen, sentinels = policies.properties.Unseen, policies.properties._UNKNOWN_SENTINELS
    if depth > 64:
        return unseen(f"{path} (nested more than 64 levels)", owner)
    if isinstance(value, str):
        return unseen(path or ".", owner) if value in sentinels else value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    is_mapping = isinstance(value, collections.abc.Mapping)
    if not is_mapping and not isinstance(value, collections.abc.Sequence):
        return value
    out: Any = {} if is_mapping else []
    for key in list(value) if is_mapping else range(len(value)):
        try:
            item = value[key]
        except UnknownValueError:
            item = UNKNOWN_STRING
        where = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}"
        read = _read_item_by_item(item, depth + 1, where, owner)
        out.__setitem__(key, read) if is_mapping else out.append(read)
    return out


def test_plain_reads_a_proxy_as_its_items_read_one_by_one():
    """``properties.plain`` reads what pulumi-policy's proxy wraps at once: the same plain copy as reading each item
    through the proxy (every unknown the same ``Unseen`` at its path, whole numbers ``int``), on what the first preview
    of dev sends (unknowns in it) and on shapes at the edges: the proxy's own key ``__target``, every kind of
    unknown, a value nested deeper than ``plain`` reads, a tuple."""
    from google.protobuf import json_format
    from pulumi_policy import proxy
    from pulumi_policy.deserialize import deserialize_properties

    nested: Any = 1.0
    for _ in range(70):
        nested = {"a": [nested]}
    edges = {
        "__target": {"x": proxy.UNKNOWN_NUMBER_VALUE, "__target": [1.5, 2.0]},
        "unknowns": [proxy.UNKNOWN_BOOLEAN_VALUE, proxy.UNKNOWN_OBJECT_VALUE, {"s": proxy.UNKNOWN_ARRAY_VALUE}],
        "values": [True, False, None, 0, 3.0, -2.5, "", "text", [], {}],
        "deep": nested,
    }
    sent = [edges]
    plan = analyzer.first_preview("dev")
    for r in plan.resources:
        for props in (analyzer.inputs(plan, r), analyzer.outputs(plan, r, preview=True)):
            sent.append(json_format.MessageToDict(judge_preview.properties(props)))
    assert any(proxy.UNKNOWN_STRING_VALUE in json.dumps(props) for props in sent)
    for props in sent:
        proxied = proxy.unknown_checking_proxy(deserialize_properties(props))
        for path, owner in (("", None), ("JobSet x: ", ("urn:x", JOBSET))):
            expected = shown(_read_item_by_item(proxied, path=path, owner=owner))
            assert shown(policies.properties.plain(proxied, path=path, owner=owner)) == expected
    assert shown(policies.properties.plain((1.0, "a"))) == [("int", 1), ("str", "a")]
    other = collections.OrderedDict(a=2.0, b=[proxy.UNKNOWN_STRING_VALUE], c=collections.UserString("text"))
    assert shown(policies.properties.plain(other, path="p")) == shown(_read_item_by_item(other, path="p"))
    assert shown(policies.properties.plain(other, path="p"))["b"] == [("unseen", "p.b[0]", None)]


def test_the_analyzers_stack_request_is_the_one_protobuf_serialises():
    """``tests/analyzer.py`` writes an ``AnalyzeStackRequest``'s bytes as the run of its resources' (each remembered):
    the bytes protobuf itself serialises for the request the engine builds (every resource's type, URN, name, parent,
    properties and options), on the first preview of prod (unknowns, secrets, parents, protected resources)."""
    from pulumi.runtime.proto import analyzer_pb2

    resources = analyzer.resources(analyzer.first_preview("prod"), preview=True, stack_view=True)
    assert any(r.parent for r in resources) and any(r.protect for r in resources)
    request = analyzer_pb2.AnalyzeStackRequest()
    for r in resources:
        entry = request.resources.add(type=r.type, urn=r.urn, name=r.name, parent=r.parent)
        entry.properties.MergeFromString(judge_preview.properties(r.props).SerializeToString())
        entry.options.CopyFrom(judge_preview.options(*analyzer._option_values(r)))
    entries = [
        (r.type, r.urn, r.name, r.parent, analyzer.marshalled(r.props), analyzer._option_values(r)) for r in resources
    ]
    written = b"".join(analyzer._stack_entry(entry) for entry in entries)
    assert written == request.SerializeToString(deterministic=True)
    assert analyzer_pb2.AnalyzeStackRequest.FromString(written) == request


def test_prod_is_stricter_than_dev():
    order = {"disabled": 0, "advisory": 1, "mandatory": 2}
    for name in BY_NAME:
        assert order[level("prod", name)] >= order[level("dev", name)], name
    assert level("prod", "no-open-control-plane") == "mandatory" and level("dev", "no-open-control-plane") == "advisory"
    assert level("prod", "bucket-deletion-guard") == "mandatory"


STEPS = ("convert", "train", "export", "publish")


def _is(resource: dict, name: str | None) -> bool:
    """A resource by name, or a workflow step by its step (its name is content-addressed)."""
    if name in STEPS:
        return (resource["inputs"].get("metadata") or {}).get("labels", {}).get("app.kubernetes.io/component") == name
    return name is None or resource["name"] == name


# Stack variants some cases need: (example stack whose policy config applies, --set overrides).
VARIANTS = {
    "flex": ("dev", "tpu-rl:tpu.capacity=flex-start"),
    "publishing": ("prod", "tpu-rl:publish.repo=acme/gemma4-grpo"),
    "dev-in-shared-project": ("dev", "gcp:project=shared-project"),
    "prod-in-shared-project": ("prod", "gcp:project=shared-project"),
}


def base_plan(stack: str) -> Plan:
    return pure_plan(*VARIANTS.get(stack, (stack,)))


def _pod_spec(resource):
    return resource["inputs"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def _publish_env(name, value):
    def change(resource):
        env = _container(resource)["env"]
        next(e for e in env if e["name"] == name)["value"] = value

    return change


def mutated(stack: str, type_: str, name: str | None, change) -> Plan:
    plan = copy.deepcopy(base_plan(stack))
    targets = [r for r in plan.resources if r["type"] == type_ and _is(r, name)]
    assert targets, (type_, name)
    for resource in targets:
        change(resource)
    return plan


def mutated_to_judge(stack: str, type_: str, name: str | None, change) -> Plan:
    """``mutated``, for a plan that is only judged: the changed resources are copies, the rest the stack's plan's own
    (the pack reads them and writes nothing; copying the whole plan per case cost seconds). Not for a plan a test
    changes further."""
    plan = base_plan(stack)
    resources = [copy.deepcopy(r) if r["type"] == type_ and _is(r, name) else r for r in plan.resources]
    targets = [r for r in resources if r["type"] == type_ and _is(r, name)]
    assert targets, (type_, name)
    for resource in targets:
        change(resource)
    return dataclasses.replace(plan, resources=resources)


def _head(r):
    return r["inputs"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def _set(path, value):
    def change(resource):
        node = resource["inputs"]
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = copy.deepcopy(value)  # each plan its own: a case runs once per mutant in a mutation run

    return change


POOL, CLUSTER, BUCKET = "gcp:container/nodePool:NodePool", "gcp:container/cluster:Cluster", "gcp:storage/bucket:Bucket"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
JOB = "kubernetes:batch/v1:Job"  # not in our stacks; the generic workload policies still cover it
CQ = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
BUCKET_IAM = "gcp:storage/bucketIAMMember:BucketIAMMember"


def _container(r, index=0):
    return _head(r)["containers"][index]


def _worker(r):
    return r["inputs"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]


def _container_set(path, value):
    def change(resource):
        node = _container(resource)
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value

    return change


def _cidrs(*blocks):
    return _set(["masterAuthorizedNetworksConfig", "cidrBlocks"], [{"cidrBlock": c} for c in blocks])


def _env(name, value=None, value_from=None):
    entry = {"name": name, **({"value": value} if value is not None else {"valueFrom": value_from})}
    return lambda r: _container(r)["env"].append(entry)


def _command(text):
    """A hand-written step: its container's script an argument (``bash -c``), as before tpu-rl mounted scripts."""
    return lambda r: _head(r)["containers"][0].__setitem__("command", ["/bin/bash", "-c", text])


def _both(*changes):
    def change(resource):
        for c in changes:
            c(resource)

    return change


TOKEN = "hf_abcdefghijklmnopqrstuvwxyz"

# (id, policy, stack, resource type, resource or step name, change, words the finding contains). Every
# finding is also compared word for word with tests/data/policy-messages.tsv (reviewed; rewritten by
# `TPU_RL_UPDATE_MESSAGES=1 make test`).
MUTATIONS = [
    (
        "token-in-command",
        "no-secrets-in-workloads",
        "prod",
        JOBSET,
        "train",
        _command(f"python3 x hf_access_token={TOKEN}"),
        "command contains secret material",
    ),
    (
        "token-in-a-mounted-script",
        "no-secrets-in-workloads",
        "prod",
        "kubernetes:core/v1:ConfigMap",
        "export",
        lambda r: r["inputs"]["data"].__setitem__("run.sh", r["inputs"]["data"]["run.sh"] + f"echo --token {TOKEN}\n"),
        "/tpu-rl/run.sh (ConfigMap",
    ),
    (
        "token-in-a-program-the-script-runs",
        "no-secrets-in-workloads",
        "prod",
        "kubernetes:core/v1:ConfigMap",
        "convert",
        lambda r: r["inputs"]["data"].__setitem__("mark_folder.py", f"HF_TOKEN = {TOKEN!r}\n"),
        "/tpu-rl/mark_folder.py (ConfigMap",
    ),
    (
        "script-from-an-undeclared-config-map",
        "tpu-budget",
        "prod",
        JOBSET,
        "train",
        lambda r: next(v for v in _head(r)["volumes"] if v["name"] == "scripts")["configMap"].update(name="elsewhere"),
        "runs /tpu-rl/run.sh from ConfigMap elsewhere, which this stack does not declare",
    ),
    (
        "token-in-args",
        "no-secrets-in-workloads",
        "prod",
        JOBSET,
        "convert",
        lambda r: _container(r).__setitem__("args", [f"--token={TOKEN}"]),
        "args contains secret material",
    ),
    (
        "env-var-in-command",
        "no-secrets-in-workloads",
        "prod",
        JOBSET,
        "export",
        lambda r: _container(r).__setitem__("args", ["MY_API_KEY=abc"]),
        "args contains secret material",
    ),
    (
        "token-literal-env",
        "no-secrets-in-workloads",
        "prod",
        JOBSET,
        "convert",
        lambda r: _container(r)["env"].__setitem__(0, {"name": "HF_TOKEN", "value": TOKEN}),
        "env HF_TOKEN has a literal value",
    ),
    (
        "secret-named-env",
        "no-secrets-in-workloads",
        "prod",
        JOBSET,
        "convert",
        _env("WANDB_API_KEY", "abc"),
        "env WANDB_API_KEY has a literal value",
    ),
    (
        "token-valued-env",
        "no-secrets-in-workloads",
        "prod",
        JOBSET,
        "convert",
        _env("EXTRA", TOKEN),
        "env EXTRA has a literal value",
    ),
    (
        "token-from-config-map",
        "no-secrets-in-workloads",
        "prod",
        JOBSET,
        "convert",
        lambda r: _container(r)["env"].__setitem__(
            0, {"name": "HF_TOKEN", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}
        ),
        "HF_TOKEN must come from a secretKeyRef",
    ),
    (
        "node-count",
        "tpu-node-pool-shape",
        "prod",
        POOL,
        "tpu-pool-0",
        _set(["nodeCount"], 4),
        "must equal the slice's 8 hosts",
    ),
    (
        "topology-unformable",
        "tpu-node-pool-shape",
        "prod",
        POOL,
        "tpu-pool-0",
        _set(["placementPolicy", "tpuTopology"], "4x5"),
        "cannot form topology 4x5",
    ),
    (
        "topology-from-labels",
        "tpu-node-pool-shape",
        "prod",
        POOL,
        "tpu-pool-0",
        _both(
            _set(["placementPolicy"], {}), _set(["nodeConfig", "labels"], {"cloud.google.com/gke-tpu-topology": "4x8"})
        ),
        "needs placementPolicy {type: COMPACT, tpuTopology: 4x8}",
    ),
    (
        "not-compact",
        "tpu-node-pool-shape",
        "prod",
        POOL,
        "tpu-pool-0",
        _set(["placementPolicy", "type"], "SPREAD"),
        "needs placementPolicy",
    ),
    (
        "single-host-with-topology",
        "tpu-node-pool-shape",
        "prod",
        POOL,
        "tpu-pool-0",
        _both(
            _set(["nodeConfig", "machineType"], "ct6e-standard-8t"),
            _set(["placementPolicy", "tpuTopology"], "2x4"),
            _set(["nodeCount"], 1),
        ),
        "must not set placementPolicy.tpuTopology",
    ),
    (
        "two-zones",
        "tpu-node-pool-shape",
        "prod",
        POOL,
        "tpu-pool-0",
        _set(["nodeLocations"], ["us-east5-a", "us-east5-b"]),
        "exactly one zone",
    ),
    ("no-zone", "tpu-node-pool-shape", "prod", POOL, "tpu-pool-0", _set(["nodeLocations"], []), "nodeLocations has 0"),
    (
        "autoscaled-reservation",
        "tpu-node-pool-shape",
        "dev",
        POOL,
        "tpu-pool-0",
        _set(
            ["nodeConfig", "reservationAffinity"], {"consumeReservationType": "SPECIFIC_RESERVATION", "values": ["r"]}
        ),
        "cannot consume a reservation",
    ),
    (
        "autoscaled-part-slice",
        "tpu-node-pool-shape",
        "dev",
        POOL,
        "tpu-pool-0",
        _set(["autoscaling", "maxNodeCount"], 1),
        "one whole slice",
    ),
    (
        "autoscaled-total-max",
        "tpu-node-pool-shape",
        "dev",
        POOL,
        "tpu-pool-0",
        _set(["autoscaling"], {"totalMaxNodeCount": 3}),
        "autoscaling max 3",
    ),
    (
        "autoscaled-min-partial",
        "tpu-node-pool-shape",
        "dev",
        POOL,
        "tpu-pool-0",
        _set(["autoscaling", "minNodeCount"], 1),
        "autoscaling min must be 0 or 2",
    ),
    (
        "static-without-reservation",
        "tpu-node-pool-shape",
        "prod",
        POOL,
        "tpu-pool-0",
        _set(["nodeConfig", "reservationAffinity", "values"], []),
        "needs a SPECIFIC_RESERVATION affinity",
    ),
    (
        "spot-any-reservation",
        "tpu-node-pool-shape",
        "dev",
        POOL,
        "tpu-pool-0",
        _set(["nodeConfig", "reservationAffinity"], {"consumeReservationType": "ANY_RESERVATION"}),
        "set reservationAffinity NO_RESERVATION",
    ),
    (
        "public-nodes",
        "gke-private-cluster",
        "prod",
        CLUSTER,
        None,
        _set(["privateClusterConfig", "enablePrivateNodes"], False),
        "nodes must be private",
    ),
    (
        "no-workload-identity",
        "gke-private-cluster",
        "prod",
        CLUSTER,
        None,
        _set(["workloadIdentityConfig"], {}),
        "Workload Identity",
    ),
    (
        "unshielded",
        "gke-private-cluster",
        "prod",
        CLUSTER,
        None,
        _set(["enableShieldedNodes"], False),
        "shielded nodes",
    ),
    (
        "open-world",
        "no-open-control-plane",
        "prod",
        CLUSTER,
        None,
        _cidrs("0.0.0.0/0"),
        "cover 100.0000% of the public IPv4 space",
    ),
    (
        "open-world-in-halves",
        "no-open-control-plane",
        "prod",
        CLUSTER,
        None,
        _cidrs("0.0.0.0/1", "128.0.0.0/1"),
        "cover 100.0000%",
    ),
    ("open-world-zero-padded", "no-open-control-plane", "prod", CLUSTER, None, _cidrs("0.0.0.0/00"), "cover 100.0000%"),
    (
        "open-world-netmask",
        "no-open-control-plane",
        "prod",
        CLUSTER,
        None,
        _cidrs("0.0.0.0/0.0.0.0"),
        "cover 100.0000%",
    ),
    (
        "wider-than-16",
        "no-open-control-plane",
        "prod",
        CLUSTER,
        None,
        _cidrs("203.0.113.0/24", "1.0.0.0/8"),
        "1.0.0.0/8 (1.0.0.0/8) is wider than /16",
    ),
    (
        "host-bits",
        "no-open-control-plane",
        "prod",
        CLUSTER,
        None,
        _cidrs("1.2.3.4/15"),
        "1.2.3.4/15 (1.2.0.0/15) is wider than /16",
    ),
    (
        "many-narrow",
        "no-open-control-plane",
        "prod",
        CLUSTER,
        None,
        _cidrs("198.51.100.0/24", *(f"{i}.0.0.0/16" for i in range(1, 12))),
        "together cover 0.01",
    ),
    (
        "not-a-cidr",
        "no-open-control-plane",
        "prod",
        CLUSTER,
        None,
        _cidrs("office-network"),
        "'office-network' is not an IPv4 CIDR",
    ),
    ("ipv6", "no-open-control-plane", "prod", CLUSTER, None, _cidrs("::/0"), "'::/0' is not an IPv4 CIDR"),
    (
        "google-cloud-ips",
        "no-open-control-plane",
        "prod",
        CLUSTER,
        None,
        _set(["masterAuthorizedNetworksConfig", "gcpPublicCidrsAccessEnabled"], True),
        "gcpPublicCidrsAccessEnabled",
    ),
    (
        "storage-admin",
        "no-broad-project-iam",
        "prod",
        "gcp:projects/iAMMember:IAMMember",
        "tpu-container.defaultNodeServiceAccount",
        _set(["role"], "roles/storage.admin"),
        "project-level roles/storage.admin is too broad",
    ),
    (
        "project-object-viewer",
        "grant-targets",
        "prod",
        "gcp:projects/iAMMember:IAMMember",
        "tpu-container.defaultNodeServiceAccount",
        _set(["role"], "roles/storage.objectViewer"),
        "project-level roles/storage.objectViewer",
    ),
    (
        "grant-on-the-state-bucket",
        "grant-targets",
        "prod",
        BUCKET_IAM,
        "export-bucket-objectViewer",
        _set(["bucket"], "my-tpu-prod-project-pulumi-state-prod"),
        "a Pulumi state bucket",
    ),
    (
        "editor",
        "no-broad-project-iam",
        "prod",
        "gcp:projects/iAMMember:IAMMember",
        "tpu-container.defaultNodeServiceAccount",
        _set(["role"], "roles/editor"),
        "project-level roles/editor",
    ),
    (
        "no-uniform-access",
        "bucket-hardening",
        "prod",
        BUCKET,
        None,
        _set(["uniformBucketLevelAccess"], False),
        "uniform bucket-level access",
    ),
    (
        "public-access",
        "bucket-hardening",
        "prod",
        BUCKET,
        None,
        _set(["publicAccessPrevention"], "inherited"),
        "public access prevention",
    ),
    (
        "no-soft-delete",
        "bucket-hardening",
        "dev",
        BUCKET,
        None,
        _set(["softDeletePolicy"], {}),
        "soft delete or versioning",
    ),
    (
        "zero-soft-delete",
        "bucket-hardening",
        "dev",
        BUCKET,
        None,
        _set(["softDeletePolicy", "retentionDurationSeconds"], 0),
        "soft delete or versioning",
    ),
    ("force-destroy", "bucket-deletion-guard", "prod", BUCKET, None, _set(["forceDestroy"], True), "forceDestroy"),
    (
        "unprotected",
        "bucket-deletion-guard",
        "prod",
        BUCKET,
        None,
        lambda r: r["options"].__setitem__("protect", False),
        "not protected",
    ),
    (
        "jobset-ttl",
        "no-ttl-on-managed-jobs",
        "prod",
        JOBSET,
        "train",
        _set(["spec", "ttlSecondsAfterFinished"], 86400),
        "ttlSecondsAfterFinished",
    ),
    (
        "child-job-ttl",
        "no-ttl-on-managed-jobs",
        "prod",
        JOBSET,
        "train",
        lambda r: r["inputs"]["spec"]["replicatedJobs"][1]["template"]["spec"].__setitem__(
            "ttlSecondsAfterFinished", 0
        ),
        "ttlSecondsAfterFinished",
    ),
    (
        "job-ttl",
        "no-ttl-on-managed-jobs",
        "prod",
        JOBSET,
        "export",
        _set(["spec", "ttlSecondsAfterFinished"], 3600),
        "ttlSecondsAfterFinished",
    ),
    (
        "restarts-above-cap",
        "bounded-retries",
        "prod",
        JOBSET,
        "train",
        _set(["spec", "failurePolicy", "maxRestarts"], 2),
        "maxRestarts 2",
    ),
    (
        "restarts-missing",
        "bounded-retries",
        "prod",
        JOBSET,
        "train",
        _set(["spec", "failurePolicy"], {}),
        "maxRestarts None",
    ),
    (
        "child-backoff-above-cap",
        "bounded-retries",
        "prod",
        JOBSET,
        "train",
        lambda r: r["inputs"]["spec"]["replicatedJobs"][1]["template"]["spec"].__setitem__("backoffLimit", 257),
        "worker: backoffLimit 257",
    ),
    (
        "job-backoff-missing",
        "bounded-retries",
        "prod",
        JOBSET,
        "convert",
        lambda r: r["inputs"]["spec"]["replicatedJobs"][0]["template"]["spec"].pop("backoffLimit"),
        "convert: backoffLimit None",
    ),
    (
        "latest",
        "pinned-images",
        "prod",
        JOBSET,
        "convert",
        lambda r: _container(r).__setitem__("image", "maxtext:latest"),
        "is not pinned",
    ),
    (
        "untagged",
        "pinned-images",
        "prod",
        JOBSET,
        "convert",
        lambda r: _container(r).__setitem__("image", "us-docker.pkg.dev/p/r:1/maxtext"),
        "is not pinned",
    ),
    (
        "pathways-by-tag",
        "pinned-images",
        "prod",
        JOBSET,
        "train",
        lambda r: _head(r)["initContainers"][0].__setitem__(
            "image", "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server:jax-0.11.0"
        ),
        "must be pinned by digest",
    ),
    (
        "bucket-labels",
        "cost-attribution-labels",
        "prod",
        BUCKET,
        None,
        _set(["labels"], {}),
        "missing cost-attribution labels app, stack on labels",
    ),
    (
        "cluster-labels",
        "cost-attribution-labels",
        "prod",
        CLUSTER,
        None,
        _set(["resourceLabels"], {"app": "tpu-rl"}),
        "missing cost-attribution labels stack on resourceLabels",
    ),
    (
        "pool-labels",
        "cost-attribution-labels",
        "prod",
        POOL,
        "tpu-pool-0",
        _set(["nodeConfig", "resourceLabels"], None),
        "on nodeConfig.resourceLabels",
    ),
    (
        "nameless-container-env",
        "no-secrets-in-workloads",
        "prod",
        JOBSET,
        "convert",
        lambda r: _head(r)["containers"].append(
            {"image": "busybox:1.36", "env": [{"name": "X_TOKEN", "value": "v"}, {"value": "no name"}]}
        ),
        "container ?: env X_TOKEN has a literal value",
    ),
    (
        "command-and-env",
        "no-secrets-in-workloads",
        "prod",
        JOBSET,
        "convert",
        _both(
            lambda r: _container(r).__setitem__("args", [f"hf_access_token={TOKEN}"]),
            _env("DB_PASSWORD", "hunter2"),
        ),
        "env DB_PASSWORD has a literal value",
    ),
    (
        "bad-cidr-then-open",
        "no-open-control-plane",
        "prod",
        CLUSTER,
        None,
        _cidrs("office", "0.0.0.0/0"),
        "0.0.0.0/0 (0.0.0.0/0) is wider than /16",
    ),
    (
        "no-image",
        "pinned-images",
        "prod",
        JOBSET,
        "convert",
        lambda r: _container(r).pop("image"),
        "image (none) is not pinned",
    ),
    (
        "short-digest",
        "pinned-images",
        "prod",
        JOBSET,
        "convert",
        lambda r: _container(r).__setitem__("image", "us-docker.pkg.dev/p/r/maxtext@sha256:abc"),
        "is not pinned",
    ),
    (
        "nameless-replicated-job",
        "bounded-retries",
        "prod",
        JOBSET,
        "train",
        lambda r: (
            r["inputs"]["spec"]["replicatedJobs"][1].pop("name"),
            r["inputs"]["spec"]["replicatedJobs"][1]["template"]["spec"].__setitem__("backoffLimit", 257),
        ),
        "?: backoffLimit 257",
    ),
    (
        "flex-start-reservation",
        "tpu-node-pool-shape",
        "flex",
        POOL,
        "tpu-pool-0",
        _set(["nodeConfig", "reservationAffinity"], {"consumeReservationType": "ANY_RESERVATION"}),
        "spot and flex-start capacity cannot consume a reservation",
    ),
    (
        "static-no-affinity",
        "tpu-node-pool-shape",
        "prod",
        POOL,
        "tpu-pool-0",
        lambda r: r["inputs"]["nodeConfig"].pop("reservationAffinity"),
        "needs a SPECIFIC_RESERVATION affinity",
    ),
    (
        "queue-smaller-than-a-slice",
        "kueue-queue-fits",
        "prod",
        CQ,
        "kueue-cluster-queue",
        lambda r: r["inputs"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0].__setitem__(
            "nominalQuota", "31"
        ),
        # One chip short of the slice: the base plan's quota, 32, is exactly the slice and passes.
        "asks for 32 google.com/tpu but ClusterQueue tpu-rl offers at most 31",
    ),
    (
        "tpu-flavor-of-another-topology",
        "kueue-queue-fits",
        "prod",
        "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor",
        "kueue-tpu-flavor",
        _set(["spec", "nodeLabels", "cloud.google.com/gke-tpu-topology"], "2x4"),
        "asks for 32 google.com/tpu but ClusterQueue tpu-rl offers at most 0 on a flavor its pods fit",
    ),
    (
        "cpu-not-covered",
        "kueue-queue-fits",
        "prod",
        CQ,
        "kueue-cluster-queue",
        lambda r: _uncover(r["inputs"]["spec"]["resourceGroups"][0], "cpu"),
        "asks for cpu, which ClusterQueue tpu-rl does not cover",
    ),
    (
        "namespace-not-admitted",
        "kueue-queue-fits",
        "prod",
        CQ,
        "kueue-cluster-queue",
        _set(["spec", "namespaceSelector"], {"matchLabels": {"kubernetes.io/metadata.name": "other"}}),
        "ClusterQueue tpu-rl does not admit namespace tpu-rl",
    ),
    (
        "step-not-queued",
        "kueue-queue-fits",
        "prod",
        JOBSET,
        "export",
        lambda r: r["inputs"]["metadata"]["labels"].pop("kueue.x-k8s.io/queue-name"),
        "names no LocalQueue (kueue.x-k8s.io/queue-name) while the stack has one",
    ),
    # Cluster and CI hardening
    (
        "secrets-in-plain-etcd",
        "secrets-encryption",
        "prod",
        CLUSTER,
        None,
        lambda r: r["inputs"].pop("databaseEncryption"),
        "without application-layer encryption",
    ),
    (
        "secrets-decrypted",
        "secrets-encryption",
        "prod",
        CLUSTER,
        None,
        _set(["databaseEncryption", "state"], "DECRYPTED"),
        "without application-layer encryption",
    ),
    (
        "secrets-key-missing",
        "secrets-encryption",
        "prod",
        CLUSTER,
        None,
        _set(["databaseEncryption", "keyName"], ""),
        "without application-layer encryption",
    ),
    (
        "versioning-off",
        "bucket-deletion-guard",
        "prod",
        BUCKET,
        None,
        lambda r: r["inputs"].pop("versioning"),
        "bucket versioning is off",
    ),
    (
        "versioning-disabled",
        "bucket-deletion-guard",
        "prod",
        BUCKET,
        None,
        _set(["versioning", "enabled"], False),
        "bucket versioning is off",
    ),
    (
        "node-metadata-of-the-node",
        "gke-private-cluster",
        "prod",
        POOL,
        "cpu-pool",
        _set(["nodeConfig", "workloadMetadataConfig", "mode"], "GCE_METADATA"),
        "node pool metadata mode GCE_METADATA",
    ),
    (
        "node-metadata-unset",
        "gke-private-cluster",
        "prod",
        POOL,
        "system-pool",
        lambda r: r["inputs"]["nodeConfig"].pop("workloadMetadataConfig"),
        "node pool metadata mode (unset)",
    ),
    (
        "legacy-abac",
        "gke-private-cluster",
        "prod",
        CLUSTER,
        None,
        _set(["enableLegacyAbac"], True),
        "legacy ABAC grants every service account broad access",
    ),
    (
        "a-grant-to-a-person",
        "iam-service-accounts-only",
        "prod",
        BUCKET_IAM,
        "export-bucket-objectUser",
        _set(["member"], "user:alice@example.com"),
        "user:alice@example.com is not a service account",
    ),
    (
        "a-grant-to-everyone",
        "iam-service-accounts-only",
        "prod",
        "gcp:projects/iAMMember:IAMMember",
        "cpu-container.defaultNodeServiceAccount",
        _set(["member"], "allUsers"),
        "allUsers is not a service account",
    ),
    (
        "an-authoritative-binding",
        "iam-service-accounts-only",
        "prod",
        BUCKET_IAM,
        "export-bucket-objectUser",
        lambda r: (
            r.__setitem__("type", "gcp:storage/bucketIAMBinding:BucketIAMBinding"),
            r["inputs"].__setitem__("members", [r["inputs"].pop("member")]),
        ),
        "BucketIAMBinding replaces every other grant of its role or resource",
    ),
    (
        "the-write-token-in-another-step",
        "secret-holders",
        "publishing",
        JOBSET,
        "export",
        _env("HF_TOKEN", value_from={"secretKeyRef": {"name": "hf-write-token", "key": "token"}}),
        "reads Secret hf-write-token (env HF_TOKEN), which holds tpu-rl:hfWriteToken",
    ),
    (
        "a-step-relabelled-as-the-publication",
        "secret-holders",
        "publishing",
        JOBSET,
        "export",
        _both(
            _env("HF_TOKEN", value_from={"secretKeyRef": {"name": "hf-write-token", "key": "token"}}),
            lambda r: _head(r).__setitem__("containers", [{**_container(r), "name": "publish"}]),
            lambda r: r["inputs"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"][
                "labels"
            ].__setitem__("app.kubernetes.io/component", "publish"),
        ),
        "container publish (export) reads Secret hf-write-token (env HF_TOKEN)",
    ),
    (
        "a-step-relabelled-as-the-evaluation",
        "step-pods",
        "prod",
        JOBSET,
        "convert",
        lambda r: r["inputs"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"][
            "labels"
        ].__setitem__("app.kubernetes.io/component", "evaluate"),
        "pod convert of step evaluate runs as tpu-rl-prod-convert",
    ),
    (
        "an-env-name-the-program-never-sets",
        "step-pods",
        "prod",
        JOBSET,
        "convert",
        _env("HF_ENDPOINT", "https://hub.example"),
        "sets env HF_ENDPOINT, which the program never sets",
    ),
    (
        "an-env-read-from-another-field",
        "step-pods",
        "prod",
        JOBSET,
        "train",
        lambda r: next(e for e in _container(r)["env"] if e["name"] == "VLLM_HOST_IP")["valueFrom"].__setitem__(
            "fieldRef", {"fieldPath": "status.hostIP"}
        ),
        "env VLLM_HOST_IP takes valueFrom",
    ),
    (
        "a-changed-program-in-a-steps-config-map",
        "step-pods",
        "prod",
        "kubernetes:core/v1:ConfigMap",
        "export",
        lambda r: r["inputs"]["data"].__setitem__(
            "complete_export.py", r["inputs"]["data"]["complete_export.py"] + "\nimport urllib.request\n"
        ),
        "file complete_export.py is not the program's complete_export.py for step export",
    ),
    (
        "a-file-the-program-does-not-ship",
        "step-pods",
        "prod",
        "kubernetes:core/v1:ConfigMap",
        "convert",
        lambda r: r["inputs"]["data"].__setitem__("sitecustomize.py", "import os\n"),
        "file sitecustomize.py is not one the program ships for step convert",
    ),
    (
        "a-command-the-program-does-not-run",
        "step-pods",
        "prod",
        JOBSET,
        "convert",
        _command("python3 -c 'import this'"),
        "container convert: its command is not what the program runs in step convert",
    ),
    (
        "an-api-token-mounted-in-a-cpu-step",
        "step-pods",
        "prod",
        JOBSET,
        "convert",
        lambda r: _head(r).__setitem__("automountServiceAccountToken", True),
        "pod convert of step convert has automountServiceAccountToken True",
    ),
    (
        "a-sidecar-in-a-steps-pod",
        "step-pods",
        "prod",
        JOBSET,
        "export",
        lambda r: _head(r)["containers"].append({"name": "sidecar", "image": _container(r)["image"]}),
        "container sidecar is not one of step export's",
    ),
    (
        "a-step-reads-a-secret-the-program-does-not-make",
        "secret-holders",
        "prod",
        JOBSET,
        "export",
        _env("CREDENTIALS", value_from={"secretKeyRef": {"name": "cloud-key", "key": "json"}}),
        "reads Secret cloud-key (env CREDENTIALS), which the program does not make",
    ),
    (
        "whole-bucket-object-user",
        "scoped-bucket-grants",
        "prod",
        BUCKET_IAM,
        "export-bucket-objectUser",
        lambda r: r["inputs"].pop("condition"),
        "roles/storage.objectUser on the whole bucket",
    ),
    (
        "conditionless-reader",
        "scoped-bucket-grants",
        "prod",
        BUCKET_IAM,
        "tpu-bucket-objectViewer",
        _set(["condition", "expression"], ""),
        "roles/storage.objectViewer on the whole bucket",
    ),
    (
        "object-creator-unbounded",
        "scoped-bucket-grants",
        "prod",
        BUCKET_IAM,
        "cpu-bucket-legacyBucketReader",
        _set(["role"], "roles/storage.objectCreator"),
        "roles/storage.objectCreator on the whole bucket",
    ),
    (
        "bucket-admin",
        "scoped-bucket-grants",
        "prod",
        BUCKET_IAM,
        "cpu-bucket-objectUser",
        _set(["role"], "roles/storage.objectAdmin"),
        "bucket-level roles/storage.objectAdmin manages the whole bucket",
    ),
    (
        "public-publish",
        "private-publish",
        "publishing",
        JOBSET,
        "publish",
        _publish_env("TPU_RL_PUBLISH_PRIVATE", "false"),
        "as a public repository",
    ),
    (
        "second-container-public",
        "private-publish",
        "publishing",
        JOBSET,
        "publish",
        lambda r: _pod_spec(r)["containers"].append(
            {
                **copy.deepcopy(_container(r)),
                "name": "again",
                "env": [
                    {"name": "TPU_RL_PUBLISH_REPO", "value": "acme/other"},
                    {"name": "TPU_RL_PUBLISH_PRIVATE", "value": "false"},
                ],
            }
        ),
        "publishes acme/other to the Hugging Face Hub as a public repository",
    ),
    (
        "publish-visibility-unset",
        "private-publish",
        "publishing",
        JOBSET,
        "publish",
        _publish_env("TPU_RL_PUBLISH_PRIVATE", ""),
        "as a public repository",
    ),
    (
        "image-from-docker-hub",
        "trusted-registries",
        "prod",
        JOBSET,
        "convert",
        lambda r: _container(r).__setitem__("image", "docker.io/someone/tpu_post_training:0.2.4"),
        "is not from a trusted registry",
    ),
    (
        "worker-image-lookalike",
        "trusted-registries",
        "prod",
        JOBSET,
        "train",
        lambda r: _worker(r)["containers"][0].__setitem__(
            "image", "us-docker.pkg.dev/cloud-tpu-v2-images-mirror/pathways/server@sha256:" + "0" * 64
        ),
        "is not from a trusted registry",
    ),
    (
        "privileged-head",
        "least-privilege-pods",
        "prod",
        JOBSET,
        "train",
        lambda r: _container(r).__setitem__("securityContext", {"privileged": True}),
        "is privileged",
    ),
    (
        "capability-added",
        "least-privilege-pods",
        "prod",
        JOBSET,
        "export",
        _container_set(["securityContext", "capabilities", "add"], ["SYS_ADMIN"]),
        "adds capabilities",
    ),
    (
        "host-path-on-the-head",
        "least-privilege-pods",
        "prod",
        JOBSET,
        "train",
        lambda r: _head(r)["volumes"].__setitem__(
            0, {"name": "shared-tmp", "hostPath": {"path": "/tmp", "type": "DirectoryOrCreate"}}
        ),
        "mounts the node's /tmp",
    ),
    (
        "host-path-after-another-volume",
        "least-privilege-pods",
        "prod",
        JOBSET,
        "export",
        lambda r: _head(r)["volumes"].append({"name": "logs", "hostPath": {"path": "/var/log"}}),
        "mounts the node's /var/log",
    ),
    (
        "image-missing-from-a-trusted-registry",
        "trusted-registries",
        "prod",
        JOBSET,
        "convert",
        lambda r: _container(r).pop("image"),
        "image (none) is not from a trusted registry",
    ),
    (
        "worker-mounts-the-root",
        "least-privilege-pods",
        "prod",
        JOBSET,
        "train",
        lambda r: _worker(r)["volumes"][0]["hostPath"].__setitem__("path", "/"),
        "mounts the node's /",
    ),
]
POLICY_MESSAGES = ROOT / "tests" / "data" / "policy-messages.tsv"


def read_policy_messages() -> dict[str, list[str]]:
    lines = POLICY_MESSAGES.read_text().splitlines() if POLICY_MESSAGES.exists() else []
    return {case: json.loads(found) for case, found in (line.split("\t", 1) for line in lines if line)}


PINNED = "tpu-rl:model.revision=0123456789abcdef0123456789abcdef01234567"


def test_model_revision_policy_catches_a_moving_ref():
    plan = pure_plan("prod", PINNED)
    assert violations(plan, "model-revision-pinned", "prod") == []
    moved = copy.deepcopy(plan)
    convert = next(r for r in moved.resources if r["type"] == JOBSET and _is(r, "convert"))
    data = _scripts(moved, convert)["inputs"]["data"]  # the script is a file of the step's ConfigMap
    data["run.sh"] = data["run.sh"].replace(PINNED.split("=", 1)[1], "main")
    assert violations(moved, "model-revision-pinned", "prod") == [
        "model revision 'main' is a moving ref; pin a commit for reproducible runs "
        "(tpu-rl pulumi --stack <stack> -- config set --path 'tpu-rl:model.revision' <commit>)"
    ]


COMMIT = PINNED.split("=", 1)[1]


@pytest.mark.parametrize(
    ("revision", "found"),
    [(COMMIT, []), ("main", ["model revision 'main' is a moving ref; pin a commit for reproducible runs"])],
    ids=["commit", "branch"],
)
@pytest.mark.parametrize("field", ["command", "args"])
def test_model_revision_policy_reads_argv_form_commands_and_args(revision, found, field):
    """A hand-written Job that passes the revision as one argv word, in `command` or in `args`."""
    plan = copy.deepcopy(pure_plan("prod", PINNED))
    convert = next(r for r in plan.resources if r["type"] == JOBSET and _is(r, "convert"))
    argv = ["python3", "-m", "convert", f"--revision={revision}", "--lazy_load_tensors=true"]
    _container(convert).update({"command": argv[:2], "args": argv[2:]} if field == "args" else {"command": argv})
    assert [v.split(" (tpu-rl pulumi")[0] for v in violations(plan, "model-revision-pinned", "prod")] == found


@pytest.mark.parametrize("field", ["command", "args"])
def test_the_budget_reads_the_launcher_in_an_argv_form_command(field):
    """The head runs the launcher itself (no script): the same run; the trainer's argv there is a finding. (Each
    mention of the launcher's path in the command and the mounted files is a run: the script goes.)"""
    plan = copy.deepcopy(pure_plan("prod"))
    jobset = next(r for r in plan.resources if r["type"] == JOBSET and _is(r, "train"))
    del _train_data(plan)["run.sh"]
    argv = ["python3", "/tpu-rl/launch.py"]
    head = next(c for c in _head(jobset)["containers"] if c["name"] == "workload-container")
    head.update({"command": argv[:1], "args": argv[1:]} if field == "args" else {"command": argv, "args": []})
    estimate = stack_estimate([_policy_resource(r) for r in plan.resources])
    assert estimate == stack_estimate([_policy_resource(r) for r in pure_plan("prod").resources])
    trainer = ["python3", "-m", "maxtext.trainers.post_train.rl.train_rl", "model_name=gemma4-26b", "num_batches=50"]
    head.update({"command": trainer[:3], "args": trainer[3:]} if field == "args" else {"command": trainer})
    (found,) = violations(plan, "tpu-budget", "prod")
    assert "names the trainer in its command, not through tpu-rl's launcher" in found


MUTATION = {m[0]: m for m in MUTATIONS}


@per_mutant_cache
def clean_violations(policy: str, stack: str) -> tuple[str, ...]:
    """What ``policy`` reports on the unmutated plan of ``stack``, judged once per process (per mutant in a mutation
    run): the cases of each policy share it. A tuple, so no test changes what the next one reads."""
    return tuple(violations(base_plan(stack), policy, stack))


@per_mutant_cache
def caught(case: str) -> tuple[str, ...]:
    """What the case's policy reports on the case's mutated plan (a fresh copy of the stack's plan, mutated), judged
    once per process (per mutant): the tests of the case below read the same judgement."""
    _, policy, stack, type_, name, change, _ = MUTATION[case]
    return tuple(violations(mutated_to_judge(stack, type_, name, change), policy, stack))


@pytest.mark.parametrize(
    ("case", "policy", "stack", "type_", "name", "change", "words"), MUTATIONS, ids=[m[0] for m in MUTATIONS]
)
def test_each_policy_catches_its_mutation(case, policy, stack, type_, name, change, words):
    assert not [v for v in clean_violations(policy, stack) if words in v]
    found = list(caught(case))
    assert any(words in v for v in found), found
    if not os.environ.get("TPU_RL_UPDATE_MESSAGES"):
        assert _named(found) == _named(read_policy_messages()[case])


MUTATING = "MUTANT_UNDER_TEST" in os.environ
"""Under ``make mutation`` (mutmut sets it), whose tree ships mutmut's copy of ``core/hf_model.py`` in the steps'
ConfigMaps: a step's name hashes that text, so the names in the pinned messages are compared without their hash."""


def _named(messages: list[str]) -> list[str]:
    return [re.sub(r"(-[a-z0-9]+)-[0-9a-f]{10}\b", r"\1-<hash>", m) for m in messages] if MUTATING else messages


# The accepted side of each boundary: changes that must not be reported.
UNKNOWN_STRING = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
"""What the engine sends for a value it does not know yet (``rpc.go`` ``UnknownStringValue``)."""


def _differences(old: Any, new: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The paths where ``new`` differs from ``old``: a changed leaf, an added or a removed key (sent as a key whose
    value is not known: an Output that resolves to nothing at `pulumi up` is unknown at a preview), a list of another
    length."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[tuple[Any, ...]] = []
        for key in sorted(set(old) | set(new), key=str):
            out += _differences(old[key], new[key], (*path, key)) if key in old and key in new else [(*path, key)]
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [p for i, (a, b) in enumerate(zip(old, new, strict=True)) for p in _differences(a, b, (*path, i))]
    return [] if old == new else [path]


def _unknown_at(node: Any, path: tuple[Any, ...]) -> None:
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = UNKNOWN_STRING


def unknown_in_place_of_the_change(stack: str, type_: str, name: str | None, change: Any) -> Plan | None:
    """The plan a mutation makes, with every value it changed, added or removed sent as not known yet; None when the
    mutation changes no input (an option such as ``protect``)."""
    base, plan = base_plan(stack), mutated_to_judge(stack, type_, name, change)
    changed = False
    for before, after in zip(base.resources, plan.resources, strict=True):
        for path in _differences(before["inputs"], after["inputs"]) if before is not after else ():
            changed = True
            _unknown_at(after["inputs"], path)
    return plan if changed else None


@pytest.mark.parametrize(
    ("case", "policy", "stack", "type_", "name", "change", "words"), MUTATIONS, ids=[m[0] for m in MUTATIONS]
)
def test_an_unknown_in_place_of_what_a_policy_catches_is_never_passed(case, policy, stack, type_, name, change, words):
    """Unknown is not safe: where each policy catches a value, the same value not known yet (a preview) is reported
    as not judged (advisory, naming it) and refuses nothing by itself; at `pulumi up` (the engine knows every value it
    sends) one left unknown is a finding at the policy's level."""
    plan = unknown_in_place_of_the_change(stack, type_, name, change)
    if plan is None:
        pytest.skip("the mutation changes an option, not a value the engine could send as unknown")
    known = [*clean_violations(policy, stack), *caught(case)]
    assert_never_passed(plan, known, policy, stack, words)


def assert_never_passed(plan: Plan, known: list[str], policy: str, stack: str, words: str) -> None:
    """At a preview the policy reports nothing that rests on a value not known yet (only findings it also reports with
    the values known) and either still catches ``words`` or says it could not judge (advisory, naming the value); at
    `pulumi up` it catches it or reports the value it could not judge, at its configured level."""
    preview = findings(plan, policy, stack, preview=True)
    definite = [f.message for f in preview if not f.unjudged]
    assert set(definite) <= set(known), "a finding resting on a value not known yet"
    assert any(words in m for m in definite) or [f for f in preview if f.unjudged and f.level == "advisory"], preview
    up = findings(plan, policy, stack)
    configured = level(VARIANTS.get(stack, (stack,))[0], policy)
    said = [f for f in up if f.level == configured and ("not known at `pulumi up`" in f.message or words in f.message)]
    assert said, up


def _unknown_where_changed(clean: dict[str, Any], changed: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(changed)
    for path in _differences(clean["inputs"], changed["inputs"]):
        _unknown_at(out["inputs"], path)
    return out


PASSES = [
    (
        "bind-low-ports",
        "least-privilege-pods",
        "prod",
        JOBSET,
        "export",
        _container_set(["securityContext", "capabilities", "add"], ["NET_BIND_SERVICE"]),
    ),
    (
        "not-privileged",
        "least-privilege-pods",
        "prod",
        JOBSET,
        "train",
        lambda r: _container(r).__setitem__("securityContext", {"privileged": False}),
    ),
    (
        "backoff-at-cap",
        "bounded-retries",
        "prod",
        JOBSET,
        "train",
        lambda r: r["inputs"]["spec"]["replicatedJobs"][1]["template"]["spec"].__setitem__("backoffLimit", 256),
    ),
    (
        "restarts-at-dev-cap",
        "bounded-retries",
        "dev",
        JOBSET,
        "train",
        _set(["spec", "failurePolicy", "maxRestarts"], 3),
    ),
    ("prefix-16", "no-open-control-plane", "prod", CLUSTER, None, _cidrs("1.2.0.0/16")),
    ("private-and-wide", "no-open-control-plane", "prod", CLUSTER, None, _cidrs("10.0.0.0/8", "172.16.0.0/12")),
    ("a-host", "no-open-control-plane", "prod", CLUSTER, None, _cidrs("8.8.8.8")),
    (
        "pathways-by-digest",
        "pinned-images",
        "prod",
        JOBSET,
        "train",
        lambda r: _head(r)["initContainers"][0].__setitem__(
            "image", "us-docker.pkg.dev/x/pathways/proxy@sha256:" + "a" * 64
        ),
    ),
    (
        "versioning-instead-of-soft-delete",
        "bucket-hardening",
        "prod",
        BUCKET,
        None,
        _both(_set(["softDeletePolicy"], {}), _set(["versioning"], {"enabled": True})),
    ),
    (
        "narrow-project-role",
        "no-broad-project-iam",
        "prod",
        "gcp:projects/iAMMember:IAMMember",
        "tpu-container.defaultNodeServiceAccount",
        _set(["role"], "roles/monitoring.metricWriter"),
    ),
    (
        "autoscaled-min-whole-slice",
        "tpu-node-pool-shape",
        "dev",
        POOL,
        "tpu-pool-0",
        _set(["autoscaling", "minNodeCount"], 2),
    ),
    (
        "env-from-secret",
        "no-secrets-in-workloads",
        "prod",
        JOBSET,
        "convert",
        _env("OTHER_TOKEN", value_from={"secretKeyRef": {"name": "s", "key": "k"}}),
    ),
    (
        "extra-labels",
        "cost-attribution-labels",
        "prod",
        BUCKET,
        None,
        _set(["labels"], {"app": "a", "stack": "s", "team": "t"}),
    ),
    (
        "env-without-a-name",
        "no-secrets-in-workloads",
        "prod",
        JOBSET,
        "convert",
        lambda r: _container(r)["env"].append({"value": "plain"}),
    ),
    (
        "spot-without-affinity",
        "tpu-node-pool-shape",
        "dev",
        POOL,
        "tpu-pool-0",
        lambda r: r["inputs"]["nodeConfig"].pop("reservationAffinity", None),
    ),
    (
        "tag-and-digest",
        "pinned-images",
        "prod",
        JOBSET,
        "convert",
        lambda r: _container(r).__setitem__("image", "r/m:1@sha256:" + "b" * 64),
    ),
    (
        "quota-exactly-a-slice-and-a-head",
        "kueue-queue-fits",
        "prod",
        CQ,
        "kueue-cluster-queue",
        # cpu-np's cpu quota exactly the head's 32 cores (its proxy, resource manager and workload)
        lambda r: r["inputs"]["spec"]["resourceGroups"][0]["flavors"][1]["resources"][1].__setitem__(
            "nominalQuota", "32"
        ),
    ),
]


@pytest.mark.parametrize(
    ("policy", "stack", "type_", "name", "change"), [p[1:] for p in PASSES], ids=[p[0] for p in PASSES]
)
def test_the_accepted_side_of_each_boundary_is_not_reported(policy, stack, type_, name, change):
    assert violations(mutated_to_judge(stack, type_, name, change), policy, stack) == []


def test_the_reviewed_policy_messages_are_the_cases():
    found = {m[0]: list(caught(m[0])) for m in MUTATIONS}
    if os.environ.get("TPU_RL_UPDATE_MESSAGES"):
        POLICY_MESSAGES.write_text("".join(f"{case}\t{json.dumps(v)}\n" for case, v in found.items()))
    assert list(read_policy_messages()) == list(found)


def test_judging_the_cases_leaves_each_stacks_plan_as_built():
    """The cases share each stack's plan (``mutated_to_judge`` copies only what a case changes): judging every case,
    with its values and with them unknown, leaves the shared plan as a fresh build makes it."""
    for case in MUTATIONS:
        caught(case[0])
        unknown_in_place_of_the_change(*case[2:6])
    for stack in sorted({case[2] for case in MUTATIONS}):
        fresh = inspect.unwrap(pure_plan)(*VARIANTS.get(stack, (stack,)))  # built again, not the cached plan
        assert base_plan(stack).resources == fresh.resources, stack


def test_no_policy_message_shows_any_part_of_a_secret():
    """PR comments carry policy messages: a secret found in a workload is named by kind, never quoted."""
    secrets = (TOKEN, "KEY=abc")  # the values; an env var's name is not a secret
    for case in [m for m in MUTATIONS if m[1] == "no-secrets-in-workloads"]:
        for message in caught(case[0]):
            for secret in secrets:
                parts = {secret[i : i + 6] for i in range(len(secret) - 5)}
                assert not any(part in message for part in parts), (case[0], message)


def test_trusted_registries_come_from_the_policy_config():
    mirror = "europe-docker.pkg.dev/my-project/mirror"
    plan = mutated_to_judge(
        "prod", JOBSET, "convert", lambda r: _container(r).__setitem__("image", f"{mirror}/maxtext:0.2.4")
    )
    assert violations(plan, "trusted-registries", "prod")
    trusted = [mirror, "us-docker.pkg.dev/cloud-tpu-images", "us-docker.pkg.dev/cloud-tpu-v2-images"]
    assert violations(plan, "trusted-registries", "prod", config={"registries": trusted}) == []
    only_mirror = violations(plan, "trusted-registries", "prod", config={"registries": [mirror]})
    assert only_mirror, "the other steps' images are refused"
    assert not [v for v in only_mirror if f"{mirror}/maxtext" in v], "the mirror's image is trusted"


def test_a_public_repository_needs_the_policy_config_to_list_it():
    private = base_plan("publishing")
    assert violations(private, "private-publish", "prod") == []
    public = pure_plan("prod", "tpu-rl:publish.repo=acme/gemma4-grpo", "tpu-rl:publish.private=false")
    assert violations(public, "private-publish", "prod"), "the stack's say-so alone is not enough"
    assert violations(public, "private-publish", "prod", config={"publicRepos": ["acme/gemma4-grpo"]}) == []
    assert violations(public, "private-publish", "prod", config={"publicRepos": ["acme/other"]})
    assert policy_config("prod", "private-publish") == {} and level("prod", "private-publish") == "mandatory"


def test_secrets_encryption_is_required_only_where_the_policy_config_says_so():
    dev = base_plan("dev")
    assert one(dev, CLUSTER)["inputs"]["databaseEncryption"] == {"state": "DECRYPTED"}
    assert violations(dev, "secrets-encryption", "dev") == []
    assert violations(dev, "secrets-encryption", "dev", config={"required": True})
    assert violations(dev, "secrets-encryption", "dev", config={}) == [], "not required unless the config says so"
    assert policy_config("prod", "secrets-encryption") == {"required": True}
    assert level("prod", "secrets-encryption") == "mandatory"


def test_every_policy_has_a_mutation():
    covered = {m[1] for m in MUTATIONS} | {"model-revision-pinned", "tpu-budget"}  # tested below
    covered |= {case[1] for case in HELM_CASES}  # the hostile corpus of charts, below
    covered |= {case[1] for case in OBJECT_CASES} | {"stack-principals"}  # objects the stacks do not hold; below
    covered |= {"known-workload-kinds"}  # tests/test_policy_pods.py
    covered |= {"closed-world", "closed-world-shapes"}  # tests/test_policy_closed_world.py, ..._closed_shapes.py
    covered |= {"pod-bindings"}  # tests/test_policy_pods_whole.py
    covered |= {"always-made", "own-projects", "own-names"}  # tests/test_policy_always_made.py, ..._own_projects.py
    assert covered == set(BY_NAME)


def test_budget_gate():
    prod = pure_plan("prod")
    assert stack_estimate([_policy_resource(r) for r in prod.resources])["totalUsd"] == pytest.approx(230.23, abs=0.01)
    assert violations(pure_plan("prod", "tpu-rl:training.numBatches=2000", LONG), "tpu-budget", "prod")[0].startswith(
        "estimated TPU cost of one run is $"
    )
    found = violations(
        pure_plan("dev", "tpu-rl:tpu.capacity=on-demand", "tpu-rl:training.numBatches=500", LONG), "tpu-budget"
    )
    assert found and "above maxEstimatedUsd $100.00" in found[0]
    reserved = violations(pure_plan("dev", "tpu-rl:tpu.capacity=reservation", "tpu-rl:tpu.reservation=r"), "tpu-budget")
    assert any("per day until it is deleted" in v for v in reserved)
    idle = violations(
        pure_plan(
            "dev", "tpu-rl:tpu.capacity=reservation", "tpu-rl:tpu.reservation=r", "tpu-rl:workflow.enabled=false"
        ),
        "tpu-budget",
    )
    assert len(idle) == 1 and "per day until it is deleted" in idle[0], "provision-only still shows the daily bill"


def test_budget_gate_says_when_it_cannot_judge():
    plan = mutated(
        "prod",
        JOBSET,
        "train",
        _command("exec python3 -m something_else"),
    )
    del _train_data(plan)["launch.py"]  # a mounted launcher is a run, whatever the command
    (found,) = violations(plan, "tpu-budget", "prod")
    name = next(r for r in plan.resources if r["type"] == JOBSET and _is(r, "train"))["inputs"]["metadata"]["name"]
    assert found == (
        "cannot find the train_rl run (tpu-rl's launcher (launch.py, known by its sha256: core/step_config.py) with "
        f"its /tpu-rl/train.json) in JobSet {name}, whose pods ask for TPU chips, so no estimate: the budget gate "
        "cannot judge this stack; keep the JobSet rendered by workloads/"
    )


def _policy_resource(r):
    props = unknown_checking_proxy(r["inputs"])  # its own dicts and lists: the proxy copies them as it wraps them
    return PolicyResource(r["type"], props, f"urn:{r['name']}", r["name"], _options(r), None, None, [], {})


def test_pack_entry_point_builds_the_pack(monkeypatch):
    import runpy

    import pulumi_policy

    built: dict[str, Any] = {}

    class FakePack:
        def __init__(self, name, policies, enforcement_level=None, **kwargs):
            built.update(name=name, policies=policies, level=enforcement_level)

    import pulumi_policy.policy

    monkeypatch.setattr(pulumi_policy, "PolicyPack", FakePack)
    monkeypatch.setattr(pulumi_policy.policy, "_PolicyAnalyzerServicer", pulumi_policy.policy._PolicyAnalyzerServicer)
    monkeypatch.syspath_prepend(str(ROOT / "policy"))  # as `python __main__.py` in policy/ (the CLI) puts it
    runpy.run_path(str(ROOT / "policy" / "__main__.py"))
    assert built["name"] == "tpu-rl-guardrails"
    # PolicyPack builds the analyzer by that module name: ours, which keeps whether the engine runs a preview.
    assert pulumi_policy.policy._PolicyAnalyzerServicer.__name__ == "Analyzer"
    names = [p.name for p in built["policies"]]
    assert len(names) == len(set(names)) == len(policies.POLICIES)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_policy_config_names_only_known_policies(stack):
    config = stack_config(stack)
    assert set(config) - {"all"} <= set(BY_NAME)
    for name, entry in config.items():
        value = entry["enforcementLevel"] if isinstance(entry, dict) else entry
        assert value in ("advisory", "mandatory", "remediate", "disabled"), name


@pytest.mark.parametrize(
    ("blocks", "share"),
    [
        (["0.0.0.0/0"], 1.0),
        (["10.0.0.0/8", "192.168.0.0/16", "203.0.113.0/24"], 0.0),
        (["0.0.0.0/1", "128.0.0.0/1"], 1.0),
        (["8.8.8.0/24", "8.8.8.0/24", "8.8.8.128/25"], 256 / policies.network.PUBLIC_ADDRESSES),
    ],
)
def test_public_share_counts_overlaps_once_and_ignores_private_space(blocks, share):
    assert policies.network.public_share([policies.network.parse_cidr(b) for b in blocks]) == pytest.approx(share)


def test_coverage_limits_at_their_boundaries():
    """At the limit passes, one step beyond fails (prefix /16 and share 0.01% by default)."""

    def found(blocks, **config):
        plan = mutated_to_judge(
            "prod",
            CLUSTER,
            None,
            _set(["masterAuthorizedNetworksConfig", "cidrBlocks"], [{"cidrBlock": c} for c in blocks]),
        )
        config = {"minPrefixLength": 16, "maxPublicShare": 0.0001, **config}
        return violations(plan, "no-open-control-plane", "prod", config=config)

    assert found(["1.2.0.0/16"]) == []
    assert any("wider than /16" in m for m in found(["1.2.0.0/15"]))
    share_of_16 = 65536 / policies.network.PUBLIC_ADDRESSES
    assert found(["1.2.0.0/16"], maxPublicShare=share_of_16) == []
    assert any("together cover" in m for m in found(["1.2.0.0/16", "1.4.0.1/32"], maxPublicShare=share_of_16))


def _normalised(resource):
    """Inputs without what only a real registration knows (ids, emails)."""
    text = json.dumps(resource["inputs"], sort_keys=True)
    text = re.sub(r'"[a-z0-9-]+@[a-z0-9.-]+"', '"EMAIL"', text)
    text = re.sub(r'serviceAccount:[^"]+', "serviceAccount:EMAIL", text)
    inputs = json.loads(text)
    for key in ("network", "subnetwork", "cluster", "bucket"):
        inputs.pop(key, None)
    (inputs.get("metadata") or {}).pop("annotations", None)
    return inputs


@pytest.mark.program
@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_builders_plan_is_what_the_program_registers(stack):
    program = plan_of(stack)
    for resource in pure_plan(stack).resources:
        registered = one(program, resource["type"], resource["name"])
        assert _normalised(resource) == _normalised(registered), resource["name"]
        assert resource["options"]["protect"] == registered["options"]["protect"]


BUDGET_FIX = (
    "use a smaller slice, fewer numBatches or spot/flex-start capacity, or raise the budget in the policy config"
)
IDLE = (
    "per day until it is deleted, used or not (`pulumi destroy` removes the slice only): delete it after the run or "
    "use autoscaled capacity"
)
OPEN = "set tpu-rl:authorizedNetworks to the networks you deploy from"


@pytest.mark.parametrize(
    ("overrides", "config", "expected"),
    [
        # prod's run: 230.23 USD (the start-up 45 min, the checkpoint read twice), 1,451.52 USD a day idle
        # (test_estimate). At the limits: nothing.
        ((), {"maxEstimatedUsd": 230.23, "maxIdleUsdPerDay": 1451.52}, []),
        (
            (),
            {"maxEstimatedUsd": 230.22, "maxIdleUsdPerDay": 1451.51},
            [
                f"estimated TPU cost of one run is $230.23 (reservation, 32 chips), above maxEstimatedUsd $230.22: "
                f"{BUDGET_FIX}",
                f"the slice's reservation bills $1,451.52 {IDLE}",
            ],
        ),
        # Defaults without config: 1,000 USD a run, 5,000 USD a day. 1,000 batches: 1.0 + 45 / 60 + 999 x 96 s + 0.75
        # = 29.14 h x 32 x 1.89.
        (
            ("tpu-rl:training.numBatches=1000", LONG),
            {},
            [
                "estimated TPU cost of one run is $1,762.39 (reservation, 32 chips), above maxEstimatedUsd "
                f"$1,000.00: {BUDGET_FIX}"
            ],
        ),
        (("tpu-rl:tpu.slices=3", "tpu-rl:workflow.enabled=false"), {}, []),  # 96 chips: 4,354.56 USD a day
        (
            ("tpu-rl:tpu.slices=4", "tpu-rl:workflow.enabled=false"),
            {},
            [f"the slice's reservation bills $5,806.08 {IDLE}"],
        ),
    ],
)
def test_budget_limits_and_defaults(overrides, config, expected):
    assert violations(pure_plan("prod", *overrides), "tpu-budget", "prod", config) == expected


@pytest.mark.parametrize(
    ("policy", "change", "config", "expected"),
    [
        (
            "no-open-control-plane",
            _cidrs("1.0.0.0/8"),
            {},
            [
                f"authorized network 1.0.0.0/8 (1.0.0.0/8) is wider than /16; {OPEN}",
                "the authorized networks together cover 0.4532% of the public IPv4 space (at most 0.0100% allowed); "
                f"the control plane is open to the internet: {OPEN}",
            ],
        ),
        ("no-open-control-plane", _cidrs("1.0.0.0/8"), {"minPrefixLength": 8, "maxPublicShare": 0.004532}, []),
        (
            "no-open-control-plane",
            _cidrs("1.0.0.0/8"),
            {"minPrefixLength": 9, "maxPublicShare": 0.004531},
            [
                f"authorized network 1.0.0.0/8 (1.0.0.0/8) is wider than /9; {OPEN}",
                "the authorized networks together cover 0.4532% of the public IPv4 space (at most 0.4531% allowed); "
                f"the control plane is open to the internet: {OPEN}",
            ],
        ),
        ("bounded-retries", _set(["spec", "failurePolicy", "maxRestarts"], 3), {}, []),
        (
            "bounded-retries",
            _set(["spec", "failurePolicy", "maxRestarts"], 4),
            {},
            ["failurePolicy.maxRestarts 4 is missing or above 3: lower tpu-rl:workflow.maxRestarts"],
        ),
        (
            "bounded-retries",
            # The workers' own backoffLimit (32) sits on this cap and passes; the head's 33 does not.
            lambda r: r["inputs"]["spec"]["replicatedJobs"][0]["template"]["spec"].__setitem__("backoffLimit", 33),
            {"maxBackoffLimit": 32, "maxRestarts": 1},
            ["pathways-head: backoffLimit 33 is unbounded or above 32: a TPU slice retries for hours"],
        ),
    ],
)
def test_policy_config_defaults_and_overrides(policy, change, config, expected):
    type_ = CLUSTER if policy == "no-open-control-plane" else JOBSET
    assert violations(
        mutated_to_judge("prod", type_, "train" if type_ == JOBSET else None, change), policy, "prod", config
    ) == (expected)


def test_required_labels_come_from_the_policy_config():
    found = violations(pure_plan("prod"), "cost-attribution-labels", "prod", {"requiredLabels": ["team"]})
    assert sorted(set(found)) == [
        "missing cost-attribution labels team on labels",
        "missing cost-attribution labels team on nodeConfig.resourceLabels",
        "missing cost-attribution labels team on resourceLabels",
    ]


@pytest.mark.parametrize(
    ("overrides", "capacity", "chips"),
    [
        ((), "reservation", 32),
        (("tpu-rl:tpu.capacity=spot", "tpu-rl:tpu.reservation="), "spot", 32),
        (("tpu-rl:tpu.capacity=flex-start", "tpu-rl:tpu.reservation="), "flex-start", 32),
        (("tpu-rl:tpu.capacity=on-demand", "tpu-rl:tpu.reservation="), "on-demand", 32),
        (
            (
                "tpu-rl:tpu.slices=2",
                "tpu-rl:training.iciExpertParallelism=1",
                "tpu-rl:training.rolloutTensorParallelism=32",
            ),
            "reservation",
            64,
        ),
    ],
    ids=["reservation", "spot", "flex-start", "on-demand", "two-slices"],
)
def test_the_budget_reads_capacity_and_slices_from_the_pools(overrides, capacity, chips):
    plan = pure_plan("prod", *overrides)
    estimate = stack_estimate([_policy_resource(r) for r in plan.resources])
    assert (estimate["capacity"], estimate["chips"]) == (capacity, chips)


def test_a_provision_only_stack_costs_nothing_per_run_but_bills_per_day():
    plan = pure_plan("prod", "tpu-rl:workflow.enabled=false")
    estimate = stack_estimate([_policy_resource(r) for r in plan.resources])
    assert (estimate["totalUsd"], estimate["totalHours"], estimate["idleUsdPerDay"]) == (0.0, 0.0, 1451.52)


def test_a_pool_the_budget_cannot_read_is_skipped_not_the_rest():
    """A pool with an unformable topology (reported by tpu-node-pool-shape) does not hide the next one."""
    plan = copy.deepcopy(
        pure_plan(
            "prod",
            "tpu-rl:tpu.slices=2",
            "tpu-rl:training.iciExpertParallelism=1",
            "tpu-rl:training.rolloutTensorParallelism=32",
        )
    )
    first = next(r for r in plan.resources if r["name"] == "tpu-pool-0")
    first["inputs"]["placementPolicy"]["tpuTopology"] = "4x5"
    estimate = stack_estimate([_policy_resource(r) for r in plan.resources])
    assert estimate["chips"] == 32


def test_default_backoff_cap_without_config():
    def change(resource):
        resource["inputs"]["spec"]["replicatedJobs"][1]["template"]["spec"]["backoffLimit"] = 257

    assert violations(
        mutated_to_judge("prod", JOBSET, "train", change), "bounded-retries", "prod", {"maxRestarts": 5}
    ) == ["worker: backoffLimit 257 is unbounded or above 256: a TPU slice retries for hours"]


def _as_job(backoff_limit):
    """The convert step as a hand-written batch/v1 Job (its replicated Job's spec) with this backoffLimit."""

    def change(resource):
        spec = copy.deepcopy(resource["inputs"]["spec"]["replicatedJobs"][0]["template"]["spec"])
        spec["backoffLimit"] = backoff_limit
        resource["type"] = JOB
        resource["inputs"] = {**resource["inputs"], "apiVersion": "batch/v1", "kind": "Job", "spec": spec}

    return change


@pytest.mark.parametrize(
    ("backoff_limit", "expected"),
    [
        (257, ["Job: backoffLimit 257 is unbounded or above 256: a TPU slice retries for hours"]),
        (None, ["Job: backoffLimit None is unbounded or above 256: a TPU slice retries for hours"]),
        (256, []),  # a Job has no failurePolicy.maxRestarts to miss
    ],
)
def test_a_plain_job_is_judged_by_its_own_backoff_limit(backoff_limit, expected):
    plan = mutated_to_judge("prod", JOBSET, "convert", _as_job(backoff_limit))
    assert [r["type"] for r in plan.resources].count(JOB) == 1
    assert violations(plan, "bounded-retries", "prod") == expected


# Kueue: which namespaces a ClusterQueue admits, which steps it judges, which flavors count.
NAMESPACE = "kubernetes:core/v1:Namespace"
LOCAL_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"
FLAVOR = "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"
NS_NAME = "kubernetes.io/metadata.name"
NEVER = ": Kueue would never admit it; size the ClusterQueue to the pools (tpu-rl:kueue)"
UNQUEUED = (
    " names no LocalQueue (kueue.x-k8s.io/queue-name) while the stack has one: it bypasses Kueue and competes "
    "with queued runs for the slice"
)


def _jobset_name(plan: Plan, step: str) -> str:
    (resource,) = [r for r in plan.resources if r["type"] == JOBSET and _is(r, step)]
    return resource["inputs"]["metadata"]["name"]


def _not_admitted(plan: Plan) -> list[str]:
    """The findings when the ClusterQueue admits none of the steps' namespace (tpu-rl), in plan order."""
    return [
        f"ClusterQueue tpu-rl does not admit namespace tpu-rl (JobSet {_jobset_name(plan, s)}){NEVER}"
        for s in ("convert", "export", "train")
    ]


def _with(plan: Plan, *resources: dict[str, Any]) -> Plan:
    """The plan with more objects (as the program would register them, sorted by type and name), for a plan that is
    only judged: the added objects are copies, the rest is the given plan's own (as ``mutated_to_judge``); a test may
    change the objects it added, nothing else of it."""
    added = copy.deepcopy(list(resources))
    return dataclasses.replace(plan, resources=sorted([*plan.resources, *added], key=lambda r: (r["type"], r["name"])))


def _object(type_: str, name: str, manifest: dict[str, Any]) -> dict[str, Any]:
    """A Kubernetes object as a plan resource, with default options."""
    options = {
        "protect": False,
        "ignoreChanges": [],
        "deleteBeforeReplace": False,
        "customTimeouts": None,
        "parent": None,
    }
    return {"type": type_, "name": name, "inputs": manifest, "options": options}


def _term(key, operator, *values):
    return {"matchExpressions": [{"key": key, "operator": operator, **({"values": list(values)} if values else {})}]}


@pytest.mark.parametrize(
    ("selector", "admitted"),
    [
        (None, False),  # null selects nothing (Kueue ClusterQueue), {} everything
        ({}, True),
        (_term(NS_NAME, "In", "tpu-rl", "other"), True),
        (_term(NS_NAME, "In", "other"), False),
        (_term("team", "In", "ml"), False),
        (_term(NS_NAME, "NotIn", "other"), True),
        (_term(NS_NAME, "NotIn", "tpu-rl"), False),
        (_term("team", "NotIn", "ml"), True),  # a namespace without the label is not in any value set
        (_term(NS_NAME, "Exists"), True),
        (_term("team", "Exists"), False),
        (_term("team", "DoesNotExist"), True),
        (_term(NS_NAME, "DoesNotExist"), False),
        (_term(NS_NAME, "Gt", "1"), False),  # not a label-selector operator: the selector is invalid
        # Every label and every expression must hold.
        ({"matchLabels": {NS_NAME: "tpu-rl"}, **_term(NS_NAME, "In", "other")}, False),
        ({"matchLabels": {NS_NAME: "tpu-rl"}, **_term(NS_NAME, "NotIn", "other")}, True),
    ],
    ids=lambda v: json.dumps(v) if isinstance(v, dict) else None,
)
def test_the_namespace_selector_of_the_cluster_queue(selector, admitted):
    """Kueue's reading of the selector decides whether the steps are admitted; any selector but the program's (the
    namespace's name label alone) is refused as well, even one that admits the stack's namespace: it admits others."""
    plan = mutated_to_judge("prod", CQ, "kueue-cluster-queue", _set(["spec", "namespaceSelector"], selector))
    expected = ([] if selector is None else [_not_only(selector)]) + ([] if admitted else _not_admitted(plan))
    assert violations(plan, "kueue-queue-fits", "prod") == expected


def test_the_program_s_namespace_selector_is_the_one_that_passes():
    own = {"matchLabels": {NS_NAME: "tpu-rl"}}
    assert one(base_plan("prod"), CQ)["inputs"]["spec"]["namespaceSelector"] == own
    equal = mutated_to_judge("prod", CQ, "kueue-cluster-queue", _set(["spec", "namespaceSelector"], copy.deepcopy(own)))
    assert violations(equal, "kueue-queue-fits", "prod") == []
    wider = {"matchLabels": {NS_NAME: "tpu-rl", "team": "ml"}}  # narrower in fact, but not the program's
    plan = mutated_to_judge("prod", CQ, "kueue-cluster-queue", _set(["spec", "namespaceSelector"], wider))
    assert violations(plan, "kueue-queue-fits", "prod") == [_not_only(wider)] + _not_admitted(plan)


def _not_only(selector: Any) -> str:
    return (
        f"ClusterQueue tpu-rl selects namespaces by {selector!s}, not the stack's namespace only "
        f"({ {'matchLabels': {NS_NAME: 'tpu-rl'}}!s}): pods of other namespaces would take the slice's quota"
    )


def test_the_namespace_selector_reads_the_labels_of_the_stacks_namespace():
    plan = mutated_to_judge(
        "prod", CQ, "kueue-cluster-queue", _set(["spec", "namespaceSelector"], {"matchLabels": {"team": "ml"}})
    )

    def namespace(name, labels):
        return _object(
            NAMESPACE, name, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
        )

    not_only = [_not_only({"matchLabels": {"team": "ml"}})]  # admits the namespace, and whatever else is labelled
    labelled = namespace("tpu-rl", {"team": "ml"})
    assert violations(_with(plan, labelled), "kueue-queue-fits", "prod") == not_only
    assert violations(plan, "kueue-queue-fits", "prod") == not_only + _not_admitted(plan), "no Namespace: no labels"
    for other in (namespace("other", {"team": "ml"}), namespace("tpu-rl", {}), namespace("None", {"team": "ml"})):
        assert violations(_with(plan, other), "kueue-queue-fits", "prod") == not_only + _not_admitted(plan), other


def _also(plan: Plan, type_: str, name: str | None, change) -> Plan:
    """``mutated`` on a plan already changed: a copy of it with one more change."""
    plan = copy.deepcopy(plan)
    targets = [r for r in plan.resources if r["type"] == type_ and _is(r, name)]
    assert targets, (type_, name)
    for resource in targets:
        change(resource)
    return plan


def _queue(name: str | None):
    def change(resource):
        labels = resource["inputs"]["metadata"]["labels"]
        if name is None:
            labels.pop("kueue.x-k8s.io/queue-name")
        else:
            labels["kueue.x-k8s.io/queue-name"] = name

    return change


def test_every_step_is_judged_after_one_that_is_not():
    """A step without a queue, or with one the stack does not manage, does not end the check of the rest."""
    export_unqueued = mutated_to_judge("prod", JOBSET, "export", _queue(None))
    export_finding = f"JobSet {_jobset_name(export_unqueued, 'export')}{UNQUEUED}"

    both = _also(export_unqueued, JOBSET, "convert", _queue(None))
    assert violations(both, "kueue-queue-fits", "prod") == [
        f"JobSet {_jobset_name(both, 'convert')}{UNQUEUED}",
        export_finding,
    ]

    elsewhere = _also(export_unqueued, JOBSET, "convert", _queue("queue-of-another-team"))
    assert violations(elsewhere, "kueue-queue-fits", "prod") == [export_finding]

    orphan = _object(
        LOCAL_QUEUE,
        "orphan-local-queue",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "orphan", "namespace": "tpu-rl"},
            "spec": {"clusterQueue": "not-in-this-stack"},
        },
    )
    dangling = _also(_with(export_unqueued, orphan), JOBSET, "convert", _queue("orphan"))
    assert violations(dangling, "kueue-queue-fits", "prod") == [export_finding]


def _tpu_flavors(*flavors):
    """The ClusterQueue's group with these flavors in place of its TPU flavor, in this order (cpu-np's kept last)."""
    return lambda r: r["inputs"]["spec"]["resourceGroups"][0].__setitem__(
        "flavors", [*flavors, r["inputs"]["spec"]["resourceGroups"][0]["flavors"][-1]]
    )


WORKERS_QUOTA = ({"name": "cpu", "nominalQuota": "64000m"}, {"name": "memory", "nominalQuota": "524288Mi"})
"""The TPU flavor's cpu and memory: the eight workers' requests (infra/k8s/kueue.py workers_quota)."""


def _tpu_quota(flavor: str, *entries):
    """A TPU flavor's quotas: ``entries``, with the workers' cpu and memory where ``entries`` names neither."""
    named = {entry["name"] for entry in entries}
    return {"name": flavor, "resources": [*entries, *(e for e in WORKERS_QUOTA if e["name"] not in named)]}


def _uncover(group: dict, resource: str) -> None:
    """``resource`` gone from a resource group: from what it covers and from every flavor's quotas."""
    group["coveredResources"].remove(resource)
    for flavor in group["flavors"]:
        flavor["resources"] = [entry for entry in flavor["resources"] if entry["name"] != resource]


def _workers_get_at_most(plan: Plan, best: str) -> list[str]:
    return [
        f"JobSet {_jobset_name(plan, 'train')} (worker) asks for 32 google.com/tpu but ClusterQueue tpu-rl offers "
        f"at most {best} on a flavor its pods fit{NEVER}"
    ]


def test_a_flavor_the_pods_do_not_fit_is_skipped_not_the_rest():
    """A 2x4 flavor listed before the 4x8 one: the 4x8 workers are admitted on the second."""
    small = _object(
        FLAVOR,
        "kueue-tpu-2x4-flavor",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "tpu-rl-tpu-2x4"},
            "spec": {
                "nodeLabels": {
                    "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                    "cloud.google.com/gke-tpu-topology": "2x4",
                },
                "nodeTaints": [{"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"}],
            },
        },
    )
    slice_quota = {"name": "google.com/tpu", "nominalQuota": "32"}
    two = mutated_to_judge(
        "prod",
        CQ,
        "kueue-cluster-queue",
        _tpu_flavors(_tpu_quota("tpu-rl-tpu-2x4", slice_quota), _tpu_quota("tpu-rl-tpu-slice", slice_quota)),
    )
    assert violations(_with(two, small), "kueue-queue-fits", "prod") == []
    only_small = mutated_to_judge(
        "prod", CQ, "kueue-cluster-queue", _tpu_flavors(_tpu_quota("tpu-rl-tpu-2x4", slice_quota))
    )
    assert violations(_with(only_small, small), "kueue-queue-fits", "prod") == _workers_get_at_most(only_small, "0")


@pytest.mark.parametrize(
    "entries",
    [(), ({"name": "google.com/tpu"},), ({"name": "cpu", "nominalQuota": "64"},)],
    ids=["no-resources", "no-nominal-quota", "another-resource-only"],
)
def test_a_flavor_without_a_quota_for_the_resource_offers_none(entries):
    plan = mutated_to_judge("prod", CQ, "kueue-cluster-queue", _tpu_flavors(_tpu_quota("tpu-rl-tpu-slice", *entries)))
    assert violations(plan, "kueue-queue-fits", "prod") == _workers_get_at_most(plan, "0")


# ---------------------------------------------------------------------------------------------------------------
# The pod wherever it is: a kept hostile corpus. Each case is a shape a review found passing, and the
# finding it must get now. A case runs on the plan of one hostile resource (the policies judge each resource on its
# own, or with the ConfigMaps and Secrets it reads); the example stacks pass all of it unchanged (above).

MAXTEXT_IMAGE = "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training:0.2.4"
POD_KINDS = {
    # kind: (type token, inputs for a pod spec and a pod template's metadata)
    "Pod": ("kubernetes:core/v1:Pod", lambda spec, meta: {"metadata": {**meta, "name": "evil"}, "spec": spec}),
    "PodTemplate": (
        "kubernetes:core/v1:PodTemplate",
        lambda spec, meta: {"template": {"metadata": meta, "spec": spec}},
    ),
    **{
        kind: (
            f"kubernetes:apps/v1:{kind}",
            lambda spec, meta: {"spec": {"template": {"metadata": meta, "spec": spec}}},
        )
        for kind in ("Deployment", "DaemonSet", "StatefulSet", "ReplicaSet")
    },
    "ReplicationController": (
        "kubernetes:core/v1:ReplicationController",
        lambda spec, meta: {"spec": {"template": {"metadata": meta, "spec": spec}}},
    ),
    "Job": ("kubernetes:batch/v1:Job", lambda spec, meta: {"spec": {"template": {"metadata": meta, "spec": spec}}}),
    "CronJob": (
        "kubernetes:batch/v1:CronJob",
        lambda spec, meta: {"spec": {"jobTemplate": {"spec": {"template": {"metadata": meta, "spec": spec}}}}},
    ),
    "JobSet": (
        JOBSET,
        lambda spec, meta: {
            "spec": {
                "replicatedJobs": [
                    {"name": "evil", "template": {"spec": {"template": {"metadata": meta, "spec": spec}}}}
                ]
            }
        },
    ),
    "DeploymentPatch": (
        "kubernetes:apps/v1:DeploymentPatch",
        lambda spec, meta: {"spec": {"template": {"metadata": meta, "spec": spec}}},
    ),
    "PodList": (
        "kubernetes:core/v1:PodList",
        lambda spec, meta: {"items": [{"kind": "Pod", "metadata": meta, "spec": spec}]},
    ),
    # A custom resource: its pods are found by their shape.
    "LeaderWorkerSet": (
        "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet",
        lambda spec, meta: {"spec": {"leaderWorkerTemplate": {"workerTemplate": {"metadata": meta, "spec": spec}}}},
    ),
}


def _clean_pod() -> dict[str, Any]:
    """A CPU pod no policy reports: a trusted, pinned image, no host access, the token from its Secret."""
    return {
        "containers": [
            {
                "name": "step",
                "image": MAXTEXT_IMAGE,
                "command": ["python3", "-c", "print(1)"],
                "env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}],
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
            }
        ]
    }


def _workload(kind: str, spec: dict[str, Any], meta: dict[str, Any] | None = None) -> dict[str, Any]:
    type_, inputs = POD_KINDS[kind]
    body = inputs(spec, meta or {})
    body.setdefault("metadata", {"name": "evil", "namespace": "tpu-rl"})
    body["metadata"].setdefault("namespace", "tpu-rl")
    return _object(type_, "evil", body)


def _plan_of(*resources: dict[str, Any]) -> Plan:
    return Plan(stack="prod", resources=[copy.deepcopy(r) for r in resources], outputs={})


def _step(pod):
    return pod["containers"][0]


def _init(pod, **container):
    pod["initContainers"] = [{"name": "init", "image": MAXTEXT_IMAGE, **container}]


def _ephemeral(pod, **container):
    pod["ephemeralContainers"] = [{"name": "debug", "image": MAXTEXT_IMAGE, **container}]


# (id, policy, change to the clean pod and its template metadata, words of the finding)
POD_VIOLATIONS = [
    (
        "privileged",
        "least-privilege-pods",
        lambda p, m: _step(p).update(securityContext={"privileged": True}),
        "is privileged",
    ),
    (
        "privileged-init",
        "least-privilege-pods",
        lambda p, m: _init(p, securityContext={"privileged": True}),
        "container init is privileged",
    ),
    (
        "privileged-ephemeral",
        "least-privilege-pods",
        lambda p, m: _ephemeral(p, securityContext={"privileged": True}),
        "container debug is privileged",
    ),
    (
        "capability",
        "least-privilege-pods",
        lambda p, m: _step(p).update(securityContext={"capabilities": {"add": ["SYS_ADMIN"]}}),
        "adds capabilities",
    ),
    (
        "privilege-escalation",
        "least-privilege-pods",
        lambda p, m: _step(p).update(securityContext={"allowPrivilegeEscalation": True}),
        "allows privilege escalation (allowPrivilegeEscalation: true)",
    ),
    ("host-pid", "least-privilege-pods", lambda p, m: p.update(hostPID=True), "process namespace (hostPID: true)"),
    ("host-ipc", "least-privilege-pods", lambda p, m: p.update(hostIPC=True), "IPC namespace (hostIPC: true)"),
    ("host-network", "least-privilege-pods", lambda p, m: p.update(hostNetwork=True), "uses the node's network"),
    (
        "host-path-root",
        "least-privilege-pods",
        lambda p, m: p.update(volumes=[{"name": "root", "hostPath": {"path": "/"}}]),
        "mounts the node's /:",
    ),
    (
        "host-path-tmp-on-cpu",
        "least-privilege-pods",
        lambda p, m: p.update(volumes=[{"name": "tmp", "hostPath": {"path": "/tmp"}}]),
        "mounts the node's /tmp:",
    ),
    (
        "latest",
        "pinned-images",
        lambda p, m: _step(p).update(image=MAXTEXT_IMAGE.replace(":0.2.4", ":latest")),
        "is not pinned",
    ),
    (
        "LATEST",
        "pinned-images",
        lambda p, m: _step(p).update(image=MAXTEXT_IMAGE.replace(":0.2.4", ":LATEST")),
        "is not pinned",
    ),
    ("untagged", "pinned-images", lambda p, m: _step(p).update(image=MAXTEXT_IMAGE.split(":")[0]), "is not pinned"),
    (
        "latest-init",
        "pinned-images",
        lambda p, m: _init(p, image="busybox:Latest"),
        "image busybox:Latest is not pinned",
    ),
    (
        "docker-io",
        "trusted-registries",
        lambda p, m: _step(p).update(image="docker.io/someone/maxtext:0.2.4"),
        "not from a trusted",
    ),
    (
        "implicit-docker-hub",
        "trusted-registries",
        lambda p, m: _step(p).update(image="busybox:1.36"),
        "not from a trusted",
    ),
    (
        "ephemeral-docker-hub",
        "trusted-registries",
        lambda p, m: _ephemeral(p, image="busybox:1.36"),
        "container debug: image busybox:1.36 is not from a trusted",
    ),
    (
        "init-docker-hub",
        "trusted-registries",
        lambda p, m: _init(p, image="docker.io/library/alpine:3.20"),
        "container init: image docker.io/library/alpine:3.20 is not",
    ),
    (
        "token-in-env",
        "no-secrets-in-workloads",
        lambda p, m: _step(p)["env"].append({"name": "EXTRA", "value": TOKEN}),
        "env EXTRA has a literal value",
    ),
    (
        "token-in-args",
        "no-secrets-in-workloads",
        lambda p, m: _step(p).update(args=[f"--token={TOKEN}"]),
        "args contains secret material (a Hugging Face token)",
    ),
    (
        "token-in-init-command",
        "no-secrets-in-workloads",
        lambda p, m: _init(p, command=["sh", "-c", f"HF_TOKEN={TOKEN} huggingface-cli login"]),
        "container init: command contains secret material",
    ),
    (
        "token-in-an-annotation",
        "no-secrets-in-workloads",
        lambda p, m: m.update(annotations={"note": f"token {TOKEN}"}),
        "annotation note contains secret material (a Hugging Face token)",
    ),
    (
        "token-in-a-label",
        "no-secrets-in-workloads",
        lambda p, m: m.update(labels={"owner": TOKEN}),
        "label owner contains secret material (a Hugging Face token)",
    ),
    (
        "hf-token-literal",
        "no-secrets-in-workloads",
        lambda p, m: _step(p).update(env=[{"name": "HF_TOKEN", "value": TOKEN}]),
        "HF_TOKEN must come from a secretKeyRef",
    ),
]
POD_POLICIES = ("least-privilege-pods", "pinned-images", "trusted-registries", "no-secrets-in-workloads")


@pytest.mark.parametrize("kind", list(POD_KINDS))
def test_a_clean_pod_of_any_kind_passes_the_pod_policies(kind):
    plan = _plan_of(_workload(kind, _clean_pod()))
    for policy in POD_POLICIES:
        assert violations(plan, policy, "prod") == [], (kind, policy)


@pytest.mark.parametrize(("case", "policy", "change", "words"), POD_VIOLATIONS, ids=[v[0] for v in POD_VIOLATIONS])
def test_the_pod_is_judged_the_same_in_every_kind(case, policy, change, words):
    """The case's finding in each kind that holds a pod (each kind judged, every one it is missing from named: one
    test a case, not a case and kind, whose 312 tests cost more in pytest's own work than in judging)."""
    missed = {}
    for kind in POD_KINDS:
        pod, meta = _clean_pod(), dict[str, Any]()
        change(pod, meta)
        found = violations(_plan_of(_workload(kind, pod, meta)), policy, "prod")
        if not any(words in v for v in found):
            missed[kind] = found
    assert missed == {}, (case, missed)


@pytest.mark.parametrize("kind", list(POD_KINDS))
def test_the_reviews_hostile_pod_gets_every_finding_in_every_kind(kind):
    """Privileged, hostPID, hostPath /, a :latest image from docker.io and a literal token: four findings as a Pod
    and none as a DaemonSet, StatefulSet, ReplicaSet or CronJob, before."""
    pod = _clean_pod()
    pod.update(hostPID=True, volumes=[{"name": "root", "hostPath": {"path": "/"}}])
    _step(pod).update(image="docker.io/library/busybox:latest", securityContext={"privileged": True})
    _step(pod)["env"].append({"name": "X", "value": TOKEN})
    plan = _plan_of(_workload(kind, pod))
    found = {policy: violations(plan, policy, "prod") for policy in POD_POLICIES}
    assert [len(found[p]) for p in POD_POLICIES] == [3, 1, 1, 1], found


def _train(plan: Plan) -> dict[str, Any]:
    return next(r for r in plan.resources if r["type"] == JOBSET and _is(r, "train"))


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("hostPID", True, "pod convert shares the node's process namespace (hostPID: true)"),
        ("hostIPC", True, "pod convert shares the node's IPC namespace (hostIPC: true)"),
        ("hostNetwork", True, "pod convert uses the node's network (hostNetwork: true)"),
    ],
)
def test_host_namespaces_on_a_cpu_step(field, value, words):
    plan = mutated_to_judge("prod", JOBSET, "convert", lambda r: _head(r).__setitem__(field, value))
    assert [v.split(":")[0] for v in violations(plan, "least-privilege-pods", "prod")] == [words.split(":")[0]]


def test_privilege_escalation_on_a_cpu_step():
    plan = mutated_to_judge(
        "prod", JOBSET, "export", _container_set(["securityContext", "allowPrivilegeEscalation"], True)
    )
    assert violations(plan, "least-privilege-pods", "prod") == [
        "container export allows privilege escalation (allowPrivilegeEscalation: true): set it false"
    ]


def test_the_host_network_stays_where_the_program_uses_it():
    """The TPU workers and the Pathways head (the coordinator of a JobSet with TPU workers) keep it; the head of a
    JobSet without a coordinator, or a worker that asks for no chips, does not."""
    assert violations(base_plan("prod"), "least-privilege-pods", "prod") == []
    headless = mutated_to_judge("prod", JOBSET, "train", lambda r: r["inputs"]["spec"].pop("coordinator"))
    assert violations(headless, "least-privilege-pods", "prod") == [
        "pod pathways-head uses the node's network (hostNetwork: true): only the Pathways head and the TPU workers do"
    ]
    chipless = mutated_to_judge("prod", JOBSET, "train", lambda r: _worker(r)["containers"][0].pop("resources"))
    assert sorted(v.split(":")[0] for v in violations(chipless, "least-privilege-pods", "prod")) == [
        "pod pathways-head uses the node's network (hostNetwork",
        "pod worker uses the node's network (hostNetwork",
        "volume shared-tmp mounts the node's /tmp",
    ]


# Env from the stack's ConfigMaps and Secrets, resolved as the kubelet resolves it.


def _config_map(name: str, data: dict[str, str], namespace: str = "tpu-rl") -> dict[str, Any]:
    manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }
    return _object(CONFIG_MAP_TYPE, f"cm-{name}", manifest)


def _secret(name: str, *, data: dict[str, str] | None = None, string_data: dict[str, str] | None = None):
    manifest: dict[str, Any] = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "tpu-rl"}}
    if data is not None:
        manifest["data"] = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    if string_data is not None:
        manifest["stringData"] = string_data
    return _object("kubernetes:core/v1:Secret", f"secret-{name}", manifest)


CONFIG_MAP_TYPE = "kubernetes:core/v1:ConfigMap"
PUBLIC = "as a public repository"


def _publish_container(r):
    return _pod_spec(r)["containers"][0]


def _publication(env_change, *objects) -> Plan:
    """The publishing stack, its publish container's env changed, with more objects in the stack."""

    def change(resource):
        container = _publish_container(resource)
        env_change(container)

    return _with(mutated_to_judge("publishing", JOBSET, "publish", change), *objects)


def _without_publish_env(container, *keep):
    container["env"] = [e for e in container["env"] if not e["name"].startswith("TPU_RL_PUBLISH_") or e["name"] in keep]


PUBLISH_CASES = [
    # (id, env change, objects, finding words or None for none)
    (
        "env-from-a-config-map-that-says-public",
        lambda c: (
            _without_publish_env(c),
            c.setdefault("envFrom", []).append({"configMapRef": {"name": "publication"}}),
        ),
        [
            _config_map(
                "publication",
                {"TPU_RL_PUBLISH_REPO": "acme/x", "TPU_RL_PUBLISH_BRANCH": "main", "TPU_RL_PUBLISH_PRIVATE": "false"},
            )
        ],
        "publishes acme/x to the Hugging Face Hub as a public repository (TPU_RL_PUBLISH_PRIVATE=false)",
    ),
    (
        "env-from-with-a-prefix",
        lambda c: (
            _without_publish_env(c),
            c.setdefault("envFrom", []).append({"prefix": "TPU_RL_PUBLISH_", "configMapRef": {"name": "publication"}}),
        ),
        [_config_map("publication", {"REPO": "acme/x", "PRIVATE": "false"})],
        "publishes acme/x to the Hugging Face Hub as a public repository",
    ),
    (
        "the-later-env-from-wins",
        lambda c: (
            _without_publish_env(c, "TPU_RL_PUBLISH_REPO"),
            c.setdefault("envFrom", []).extend(
                [{"configMapRef": {"name": "private"}}, {"configMapRef": {"name": "public"}}]
            ),
        ),
        [
            _config_map("private", {"TPU_RL_PUBLISH_PRIVATE": "true"}),
            _config_map("public", {"TPU_RL_PUBLISH_PRIVATE": "false"}),
        ],
        "(TPU_RL_PUBLISH_PRIVATE=false)",
    ),
    (
        "env-wins-over-env-from",
        lambda c: c.setdefault("envFrom", []).append({"configMapRef": {"name": "public"}}),
        [_config_map("public", {"TPU_RL_PUBLISH_PRIVATE": "false"})],
        None,
    ),
    (
        "config-map-key-ref",
        lambda c: next(e for e in c["env"] if e["name"] == "TPU_RL_PUBLISH_PRIVATE").update(
            value=None, valueFrom={"configMapKeyRef": {"name": "visibility", "key": "private"}}
        ),
        [_config_map("visibility", {"private": "false"})],
        "(TPU_RL_PUBLISH_PRIVATE=false)",
    ),
    (
        "secret-key-ref-base64",
        lambda c: next(e for e in c["env"] if e["name"] == "TPU_RL_PUBLISH_PRIVATE").update(
            value=None, valueFrom={"secretKeyRef": {"name": "visibility", "key": "private"}}
        ),
        [_secret("visibility", data={"private": "false"})],
        "(TPU_RL_PUBLISH_PRIVATE=false)",
    ),
    (
        "secret-string-data-over-data",
        lambda c: next(e for e in c["env"] if e["name"] == "TPU_RL_PUBLISH_PRIVATE").update(
            value=None, valueFrom={"secretKeyRef": {"name": "visibility", "key": "private"}}
        ),
        [_secret("visibility", data={"private": "true"}, string_data={"private": "false"})],
        "(TPU_RL_PUBLISH_PRIVATE=false)",
    ),
    (
        "a-config-map-the-stack-does-not-declare",
        lambda c: next(e for e in c["env"] if e["name"] == "TPU_RL_PUBLISH_PRIVATE").update(
            value=None, valueFrom={"configMapKeyRef": {"name": "elsewhere", "key": "private"}}
        ),
        [],
        "(TPU_RL_PUBLISH_PRIVATE=(ConfigMap elsewhere, which this stack does not declare))",
    ),
    (
        "an-undeclared-env-from",
        lambda c: (
            _without_publish_env(c),
            c.setdefault("envFrom", []).append({"configMapRef": {"name": "elsewhere"}}),
        ),
        [],
        "takes its environment from ConfigMap elsewhere, which this stack does not declare",
    ),
    (
        "expanded-from-another-variable",
        lambda c: (
            c["env"].insert(0, {"name": "VISIBILITY", "value": "false"}),
            next(e for e in c["env"] if e["name"] == "TPU_RL_PUBLISH_PRIVATE").update(value="$(VISIBILITY)"),
        ),
        [],
        "(TPU_RL_PUBLISH_PRIVATE=false)",
    ),
    (
        "expanded-to-true",
        lambda c: (
            c["env"].insert(0, {"name": "VISIBILITY", "value": "true"}),
            next(e for e in c["env"] if e["name"] == "TPU_RL_PUBLISH_PRIVATE").update(value="$(VISIBILITY)"),
        ),
        [],
        None,
    ),
    (
        "an-escaped-reference-stays-text",
        lambda c: (
            c["env"].insert(0, {"name": "VISIBILITY", "value": "true"}),
            next(e for e in c["env"] if e["name"] == "TPU_RL_PUBLISH_PRIVATE").update(value="$$(VISIBILITY)"),
        ),
        [],
        "(TPU_RL_PUBLISH_PRIVATE=$(VISIBILITY))",
    ),
    (
        "capitalised-true-is-public-to-publish-hub",
        lambda c: next(e for e in c["env"] if e["name"] == "TPU_RL_PUBLISH_PRIVATE").update(value="True"),
        [],
        "(TPU_RL_PUBLISH_PRIVATE=True)",
    ),
    (
        "a-later-duplicate-wins",
        lambda c: c["env"].append({"name": "TPU_RL_PUBLISH_PRIVATE", "value": "false"}),
        [],
        "(TPU_RL_PUBLISH_PRIVATE=false)",
    ),
]


@pytest.mark.parametrize(("case", "change", "objects", "words"), PUBLISH_CASES, ids=[c[0] for c in PUBLISH_CASES])
def test_a_publication_is_judged_by_the_environment_the_kubelet_makes(case, change, objects, words):
    found = violations(_publication(change, *objects), "private-publish", "prod")
    if words is None:
        assert found == []
    else:
        assert len(found) == 1 and words in found[0] and (PUBLIC in found[0] or "may publish" in found[0]), found


def _unknown_data(obj: dict[str, Any], whole: bool) -> dict[str, Any]:
    """A ConfigMap or Secret whose data is not known yet: each value, or (``whole``) which keys it holds."""
    obj = copy.deepcopy(obj)
    for part in ("data", "stringData"):
        if part in obj["inputs"]:
            obj["inputs"][part] = UNKNOWN_STRING if whole else dict.fromkeys(obj["inputs"][part], UNKNOWN_STRING)
    return obj


PUBLISH_WITH_OBJECTS = [c for c in PUBLISH_CASES if c[2] and c[3] is not None]


@pytest.mark.parametrize("whole", [False, True], ids=["values", "keys"])
@pytest.mark.parametrize(
    ("case", "change", "objects", "words"), PUBLISH_WITH_OBJECTS, ids=[c[0] for c in PUBLISH_WITH_OBJECTS]
)
def test_a_publication_whose_config_map_is_not_known_yet_is_never_passed(case, change, objects, words, whole):
    known = violations(base_plan("publishing"), "private-publish", "publishing")
    known += violations(_publication(change, *objects), "private-publish", "publishing")
    plan = _publication(change, *[_unknown_data(o, whole) for o in objects])
    assert_never_passed(plan, known, "private-publish", "publishing", words)


SECRET_CONFIG_CASES = [
    (
        "hf-token-from-a-config-map-by-env-from",
        lambda c: (
            c.__setitem__("env", [e for e in c["env"] if e["name"] != "HF_TOKEN"]),
            c.setdefault("envFrom", []).append({"configMapRef": {"name": "tokens"}}),
        ),
        [_config_map("tokens", {"HF_TOKEN": TOKEN})],
        [
            "ConfigMap tokens: data HF_TOKEN contains secret material (a Hugging Face token)",  # mounted or not
            "container convert: HF_TOKEN must come from a secretKeyRef",
        ],
    ),
    (
        "a-secret-named-key-from-a-config-map",
        lambda c: c["env"].append(
            {"name": "WANDB_API_KEY", "valueFrom": {"configMapKeyRef": {"name": "k", "key": "k"}}}
        ),
        [_config_map("k", {"k": "abc"})],
        ["container convert: env WANDB_API_KEY comes from ConfigMap k, which is not a Secret"],
    ),
    (
        "a-token-in-a-config-map-by-env-from",
        lambda c: c.setdefault("envFrom", []).append({"configMapRef": {"name": "settings"}}),
        [_config_map("settings", {"EXTRA": TOKEN, "PLAIN": "1"})],
        [
            "ConfigMap settings: data EXTRA contains secret material (a Hugging Face token)",
            "container convert: env EXTRA comes from ConfigMap settings, which is not a Secret",
        ],
    ),
    (
        "hf-token-from-a-secret-by-env-from",
        lambda c: (
            c.__setitem__("env", [e for e in c["env"] if e["name"] != "HF_TOKEN"]),
            c.setdefault("envFrom", []).append({"secretRef": {"name": "tokens"}}),
        ),
        [_secret("tokens", string_data={"HF_TOKEN": TOKEN})],
        [],
    ),
]


@pytest.mark.parametrize(
    ("case", "change", "objects", "expected"), SECRET_CONFIG_CASES, ids=[c[0] for c in SECRET_CONFIG_CASES]
)
def test_secrets_read_from_the_stacks_config_maps(case, change, objects, expected):
    plan = _with(mutated_to_judge("prod", JOBSET, "convert", lambda r: change(_container(r))), *objects)
    found = violations(plan, "no-secrets-in-workloads", "prod")
    assert [v.split(";")[0] for v in found] == expected
    assert not [message for message in found if _shows_the_token(message)]


SECRET_CASES_WITH_OBJECTS = [c for c in SECRET_CONFIG_CASES if c[2] and c[3]]


@pytest.mark.parametrize("whole", [False, True], ids=["values", "keys"])
@pytest.mark.parametrize(
    ("case", "change", "objects", "expected"), SECRET_CASES_WITH_OBJECTS, ids=[c[0] for c in SECRET_CASES_WITH_OBJECTS]
)
def test_a_secret_in_a_config_map_not_known_yet_is_never_passed(case, change, objects, expected, whole):
    def plan_with(*extra):
        return _with(mutated_to_judge("prod", JOBSET, "convert", lambda r: change(_container(r))), *extra)

    known = violations(base_plan("prod"), "no-secrets-in-workloads", "prod") + violations(
        plan_with(*objects), "no-secrets-in-workloads", "prod"
    )
    plan = plan_with(*[_unknown_data(o, whole) for o in objects])
    assert_never_passed(plan, known, "no-secrets-in-workloads", "prod", expected[0])


def _shows_the_token(message: str) -> bool:
    return any(TOKEN[i : i + 6] in message for i in range(len(TOKEN) - 5))


def test_no_corpus_finding_shows_any_part_of_the_token():
    for _case, policy, change, _words in POD_VIOLATIONS:
        pod, meta = _clean_pod(), dict[str, Any]()
        change(pod, meta)
        for kind in ("Pod", "CronJob", "JobSet"):
            for message in violations(_plan_of(_workload(kind, pod, meta)), policy, "prod"):
                assert not _shows_the_token(message), message


SECRET_TEXTS = {
    "a Hugging Face token": [TOKEN, f"--model-token {TOKEN}", f"x{TOKEN}y"],
    "hf_access_token=...": [
        "hf_access_token=abc",
        "HF_ACCESS_TOKEN=abc",
        "x hf_acce\u017f\u017f_token=\u212a",
    ],
    "a *_TOKEN/KEY/SECRET/PASSWORD= assignment": [
        "export WANDB_API_KEY=abc",
        "A_TOKEN=1",
        "GH_SECRET=s3",
        "DB_PASSWORD=pw rest",
        "X9_B_KEY==",
    ],
    "a --token flag": ["--token=abc", "--hf-token abc", "--TOKEN=x", "--HF-Token=x"],
}
"""Each kind of secret material the secrets policy names, in texts it must find it in."""
NOT_SECRETS = [
    "",
    "hf_short",
    "hf_access_token=",
    "hf_access_token=  ",
    "hf_access_token= x",
    "xhf_access_token=abc",
    "export a_TOKEN=x",
    "_TOKEN=x",
    "A_TOKEN= x",
    "A_TOKENS=x",
    "--token",
    "--tokens=x",
    "token=abc",
]


def _every_pattern(text: str) -> str | None:
    """What ``_secret_kind`` answers, searched with each whole pattern alone, in order."""
    return next((policies.secrets.KINDS[p] for p in policies.secrets.TOKEN_PATTERNS if p.search(text)), None)


def _stack_texts() -> set[str]:
    """Every text the example stacks' plans hold (their scripts among them)."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, str):
            found.add(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for stack in ("dev", "prod", "flex", "publishing"):
        for r in base_plan(stack).resources:
            walk(r["inputs"])
    return found


def test_each_kind_of_secret_is_found_in_a_text_short_or_long():
    """The secrets policy searches a part every match of a pattern holds first (``secrets.CORES``): each kind is still
    found, alone, among other words and inside the longest script of the stacks, and nothing else is; on every text of
    the stacks and every case here the answer is what the whole patterns alone give."""
    kind_of = policies.secrets._secret_kind
    texts = _stack_texts()
    script = max(texts, key=len)
    assert len(script) > 10_000
    for kind, cases in SECRET_TEXTS.items():
        for text in cases:
            for where in (text, f"echo start\n{text}\necho end", f"{script}\n{text}\n{script[:1000]}"):
                assert kind_of(where) == kind == _every_pattern(where), (kind, where[:80])
    for text in NOT_SECRETS:
        for where in (text, f"{script}\n{text}\n{script[:1000]}"):
            assert kind_of(where) is None and _every_pattern(where) is None, text
    for text in texts:
        assert kind_of(text) == _every_pattern(text)


def test_each_secret_patterns_first_part_is_a_run_of_it_with_its_flags():
    """What makes the first search sound: the part is written once into its pattern, at its top level (between the
    pattern's other items, not inside an alternative or a repetition), and compiled with the pattern's flags."""
    cores = policies.secrets.CORES
    assert len(cores) == 2
    for pattern, core in cores.items():
        assert core.flags == pattern.flags
        before, found, after = pattern.pattern.partition(core.pattern)
        assert found and not before.endswith(("(", "|", "\\")) and not after.startswith(("|", "*", "+", "?", "{", ")"))
        assert before.count("(") == before.count(")") and "|" not in before.replace("(?i)", "")


def _template_labels(r):
    return r["inputs"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["labels"]


@pytest.mark.parametrize(
    ("where", "words"),
    [
        (lambda r: r["inputs"]["metadata"].setdefault("annotations", {}).__setitem__("x", TOKEN), "annotation x"),
        (lambda r: r["inputs"]["metadata"]["labels"].__setitem__("x", TOKEN), "label x"),
        (lambda r: _template_labels(r).__setitem__("x", TOKEN), "pod convert: label x"),
    ],
    ids=["jobset-annotation", "jobset-label", "pod-template-label"],
)
def test_a_token_in_labels_and_annotations(where, words):
    found = violations(mutated_to_judge("prod", JOBSET, "convert", where), "no-secrets-in-workloads", "prod")
    assert [v.split(" contains")[0] for v in found] == [words]
    assert not _shows_the_token(found[0])


def test_an_unknown_annotation_does_not_switch_a_policy_off():
    """At a preview, an annotation that waits on the previous step is not known: the policy that reads annotations says
    it could not judge that one (advisory) and judges the rest, the token in the container's args a mandatory finding;
    no other policy is stopped by it."""

    def change(resource):
        resource["inputs"]["metadata"].setdefault("annotations", {})["tpu-rl/input"] = UNKNOWN_STRING
        _container(resource)["args"] = [f"--token={TOKEN}"]

    plan = mutated_to_judge("prod", JOBSET, "export", change)
    found = findings(plan, "no-secrets-in-workloads", "prod", preview=True)
    assert [(f.level, f.message.split(";")[0]) for f in found if not f.unjudged] == [
        ("mandatory", "container export: args contains secret material (a Hugging Face token)")
    ]
    (unjudged,) = [f for f in found if f.unjudged]
    assert unjudged.level == "advisory" and ".metadata.annotations.tpu-rl/input not known" in unjudged.message
    for name in BY_NAME:
        if name != "no-secrets-in-workloads":
            assert not [f for f in findings(plan, name, "prod", preview=True) if f.unjudged], name


# The budget reads every TPU workload: the runs it starts through tpu-rl's launcher, with the overrides of its
# train.json (core/step_config.py), and no other mention of the trainer.

FIVE_THOUSAND = ("tpu-rl:training.numBatches=5000", LONG)
LAUNCHER_PATH = "/tpu-rl/launch.py"


def _scripts(plan: Plan, step: dict[str, Any]) -> dict[str, Any]:
    """A step's ConfigMap of scripts in the plan (the volume its container mounts at /tpu-rl)."""
    (volume,) = [v for v in _head(step)["volumes"] if v["name"] == "scripts"]
    name = volume["configMap"]["name"]
    return next(r for r in plan.resources if r["type"] == CONFIG_MAP_TYPE and r["inputs"]["metadata"]["name"] == name)


def _train_data(plan: Plan) -> dict[str, str]:
    """The train step's ConfigMap data: its script (``run.sh``), the launcher and its overrides (``train.json``)."""
    return _scripts(plan, _train(plan))["inputs"]["data"]


def _edit_train(overrides: tuple[str, ...], edit) -> Plan:
    """The prod plan (with overrides), the train step's ConfigMap data changed by ``edit(data)``."""
    plan = copy.deepcopy(pure_plan("prod", *overrides))
    edit(_train_data(plan))
    return plan


def _set_override(key: str, value: Any):
    """An edit of train.json: ``key`` set to ``value`` (a JSON value), or removed where ``value`` is None."""

    def edit(data: dict[str, str]) -> None:
        overrides = json.loads(data["train.json"])
        if value is None:
            overrides.pop(key)
        else:
            overrides[key] = value
        data["train.json"] = json.dumps(overrides)

    return edit


def _estimate(plan: Plan) -> dict[str, Any]:
    return stack_estimate([_policy_resource(r) for r in plan.resources])


@per_mutant_cache
def _total(overrides: tuple[str, ...] = ()) -> float:
    """The cost of prod's plan (with overrides), estimated once per process (per mutant in a mutation run)."""
    return _estimate(pure_plan("prod", *overrides))["totalUsd"]


def _budget_findings(plan: Plan) -> list[str]:
    return violations(plan, "tpu-budget", "prod")


def test_the_budget_reads_the_overrides_the_launcher_passes():
    assert _estimate(_edit_train((), _set_override("num_batches", "5000")))["totalUsd"] == _total(FIVE_THOUSAND)
    assert _estimate(_edit_train(FIVE_THOUSAND, lambda d: None))["totalUsd"] == _total(FIVE_THOUSAND)


NOT_READ = [
    # (id, the edit of train.json, the finding)
    ("underscores", _set_override("num_batches", "5_000"), "cannot read num_batches= as a positive integer"),
    ("hex", _set_override("num_batches", "0x1388"), "cannot read num_batches= as a positive integer"),
    ("exponent", _set_override("num_batches", "5e3"), "cannot read num_batches= as a positive integer"),
    ("yaml-octal", _set_override("num_batches", "050"), "cannot read num_batches= as a positive integer"),
    ("zero", _set_override("num_batches", "0"), "cannot read num_batches= as a positive integer"),
    ("a-number-not-a-string", _set_override("num_batches", 5000), "the value of num_batches is not a string"),
    ("a-parent-key", _set_override("rl", "{num_generations: 64}"), "cannot read rl.num_generations= beside rl="),
    ("a-flag", _set_override("--num_batches", "1"), "is not a dotted name"),
    ("a-value-in-the-key", _set_override("num_batches=5000 #", "1"), "is not a dotted name"),
    ("unknown-model", _set_override("model_name", "llama"), "model_name=llama has no cost model"),
    (
        "a-key-twice",
        lambda d: d.__setitem__("train.json", d["train.json"].replace("{", '{"num_batches": "5000",', 1)),
        "the key num_batches is set twice",
    ),
    ("not-json", lambda d: d.__setitem__("train.json", "num_batches: 5000\n"), "is not a JSON object of strings"),
    ("no-overrides-file", lambda d: d.pop("train.json"), "cannot read /tpu-rl/train.json (a volume of ConfigMap"),
]


@pytest.mark.parametrize(("case", "edit", "words"), NOT_READ, ids=[c[0] for c in NOT_READ])
def test_overrides_the_budget_cannot_read_are_a_finding(case, edit, words):
    (found,) = _budget_findings(_edit_train((), edit))
    assert words in found and found.endswith(
        "the budget gate cannot judge this stack; keep the JobSet rendered by workloads/"
    )


def test_an_overrides_file_not_known_yet_is_judged_at_up():
    plan = _edit_train(FIVE_THOUSAND, lambda d: d.__setitem__("train.json", UNKNOWN_STRING))
    assert_never_passed(plan, [], "tpu-budget", "prod", "cannot read /tpu-rl/train.json")


def test_each_launch_is_a_run():
    """The script starts the launcher twice: two runs of its overrides (a plain count of the launcher's path)."""

    def twice(data):
        line = next(line for line in data["run.sh"].split("\n") if LAUNCHER_PATH in line)
        data["run.sh"] = data["run.sh"].replace(line, f"python3 {LAUNCHER_PATH}\n{line}", 1)

    estimate = _estimate(_edit_train(FIVE_THOUSAND, twice))
    assert len(estimate["runs"]) == 2 and estimate["totalUsd"] > _total(FIVE_THOUSAND)


@pytest.mark.parametrize("path", ["/tpu-rl/train.json", "/tpu-rl/launch.py", "/tpu-rl"])
def test_a_volume_over_the_launcher_or_its_overrides_is_a_finding(path):
    """Another volume (here a Secret's, which the pack does not read) over the overrides or the launcher: the runtime's
    mount order decides which file the container sees, so the pack cannot read the run."""

    def shadow(jobset):
        pod = _head(jobset)
        pod["volumes"].append({"name": "other", "secret": {"secretName": "other"}})
        head = next(c for c in pod["containers"] if c["name"] == "workload-container")
        sub = {"subPath": "x"} if path.endswith((".json", ".py")) else {}
        head["volumeMounts"].append({"name": "other", "mountPath": path, "readOnly": True, **sub})

    plan = copy.deepcopy(pure_plan("prod"))
    shadow(_train(plan))
    found = _budget_findings(plan)
    assert any("more than one volume is mounted over it" in v for v in found), found


TRAIN_RL_ARGV = ["python3", "-m", "maxtext.trainers.post_train.rl.train_rl", "model_name=gemma4-26b", "num_batches=1"]
MENTIONS = [
    # (id, the edit of the train step's ConfigMap data, where the finding says the trainer is named)
    (
        "a-second-trainer-in-the-script",
        lambda d: d.__setitem__("run.sh", d["run.sh"] + " ".join(TRAIN_RL_ARGV) + "\n"),
        "/tpu-rl/run.sh (ConfigMap",
    ),
    (
        "a-trainer-in-a-nested-script",
        lambda d: d.__setitem__("run.sh", d["run.sh"] + f"bash -c {shlex.quote(' '.join(TRAIN_RL_ARGV))}\n"),
        "/tpu-rl/run.sh (ConfigMap",
    ),
    (
        "the-trainer-by-its-file",
        lambda d: d.__setitem__(
            "run.sh", d["run.sh"] + "python3 /deps/src/maxtext/trainers/post_train/rl/train_rl.py\n"
        ),
        "/tpu-rl/run.sh (ConfigMap",
    ),
    (
        "another-file-of-the-config-map",
        lambda d: d.__setitem__("other.sh", " ".join(TRAIN_RL_ARGV)),
        "/tpu-rl/other.sh (ConfigMap",
    ),
    (
        "a-changed-launcher",
        lambda d: d.__setitem__("launch.py", d["launch.py"] + "\n"),
        "/tpu-rl/launch.py (ConfigMap",
    ),
]


@pytest.mark.parametrize(("case", "edit", "where"), MENTIONS, ids=[m[0] for m in MENTIONS])
def test_the_trainer_named_other_than_through_the_launcher_is_a_finding(case, edit, where):
    found = _budget_findings(_edit_train((), edit))
    assert any(f"names the trainer in {where}" in v and "not through tpu-rl's launcher" in v for v in found), found


def _copy_of_train(name: str, change=None):
    def add(plan: Plan) -> Plan:
        extra = copy.deepcopy(_train(plan))
        extra["name"] = name
        extra["inputs"]["metadata"]["name"] = name
        if change:
            change(extra)
        return _with(plan, extra)

    return add


@pytest.mark.slow
def test_a_second_tpu_jobset_is_costed():
    plan = _copy_of_train("second-train")(pure_plan("prod"))
    one = _estimate(pure_plan("prod"))
    train = one["steps"]["train"]["usd"]
    assert _estimate(plan)["totalUsd"] == pytest.approx(one["totalUsd"] + train, abs=0.01)
    assert _estimate(plan)["runs"] == [_train(plan)["inputs"]["metadata"]["name"], "second-train"]
    assert violations(pure_plan("prod"), "tpu-budget", "prod", {"maxEstimatedUsd": 300}) == []
    (found,) = violations(plan, "tpu-budget", "prod", {"maxEstimatedUsd": 300})
    cost = re.match(r"estimated TPU cost of one run is \$([\d,]+\.\d\d) ", found)
    assert cost and float(cost[1].replace(",", "")) == pytest.approx(one["totalUsd"] + train, abs=0.01), found


def _tpu_deployment(
    command: list[str], env: list[dict[str, Any]] | None = None, scripts: str | None = None
) -> dict[str, Any]:
    """A Deployment asking for TPU chips that runs ``command`` (with ConfigMap ``scripts`` mounted at /tpu-rl)."""
    pod = _clean_pod()
    _step(pod).update(command=command, resources={"limits": {"google.com/tpu": "4"}}, env=env or [])
    if scripts is not None:
        pod["volumes"] = [{"name": "scripts", "configMap": {"name": scripts}}]
        _step(pod)["volumeMounts"] = [{"name": "scripts", "mountPath": "/tpu-rl", "readOnly": True}]
    return _workload("Deployment", pod)


def _launched(overrides: dict[str, str], env: list[dict[str, Any]] | None = None) -> Plan:
    """A provision-only prod plan with a TPU Deployment that runs the launcher with ``overrides`` (its own
    ConfigMap: the launcher and train.json)."""
    plan = pure_plan("prod", *FIVE_THOUSAND)
    launcher = _train_data(plan)["launch.py"]
    scripts = _config_map("evil-scripts", {"launch.py": launcher, "train.json": json.dumps(overrides)})
    deployment = _tpu_deployment(["python3", LAUNCHER_PATH], env, scripts="evil-scripts")
    return _with(pure_plan("prod", "tpu-rl:workflow.enabled=false"), scripts, deployment)


@pytest.mark.parametrize("field", ["command", "args"])
def test_a_tpu_workload_of_another_kind_is_costed(field):
    """A Deployment that runs the launcher from its own ConfigMap (the launcher and a five-thousand-batch run's
    train.json, no script) beside the workflow's training."""
    data = _train_data(pure_plan("prod", *FIVE_THOUSAND))
    scripts = _config_map("evil-scripts", {name: data[name] for name in ("launch.py", "train.json")})
    deployment = _tpu_deployment(["python3", LAUNCHER_PATH], scripts="evil-scripts")
    if field == "args":
        _step(deployment["inputs"]["spec"]["template"]["spec"]).update(command=["python3"], args=[LAUNCHER_PATH])
    plan = _with(pure_plan("prod"), scripts, deployment)
    estimate = _estimate(plan)
    assert sorted(estimate["runs"]) == sorted(["evil", _train(plan)["inputs"]["metadata"]["name"]])
    assert estimate["totalUsd"] > _total(FIVE_THOUSAND)


@pytest.mark.parametrize(
    ("command", "env", "words"),
    [
        (["sleep", "infinity"], None, "cannot find the train_rl run"),
        (
            ["python3", "-c", "import runpy; runpy.run_module('maxtext.trainers.post_train.rl.train_rl')"],
            None,
            "names the trainer in its command, not through tpu-rl's launcher",
        ),
        (TRAIN_RL_ARGV, None, "names the trainer in its command, not through tpu-rl's launcher"),
        (
            ["bash", "-c", "python3 -m $(MODULE) num_batches=1"],
            [{"name": "MODULE", "value": "maxtext.trainers.post_train.rl.train_rl"}],
            "names the trainer in its command, not through tpu-rl's launcher",
        ),
        (
            ["bash", "-c", "python3 -m $MODULE num_batches=1"],
            [{"name": "MODULE", "value": "maxtext.trainers.post_train.rl.train_rl"}],
            "names the trainer in its environment variable MODULE, not through tpu-rl's launcher",
        ),
        (["python3", LAUNCHER_PATH], None, "cannot find the train_rl run"),  # no launcher mounted there
    ],
    ids=["no-trainer", "hidden-trainer", "argv-trainer", "kubelet-expansion", "environment", "launcher-not-mounted"],
)
def test_a_tpu_workload_the_budget_cannot_read_is_a_finding(command, env, words):
    plan = _with(pure_plan("prod"), _tpu_deployment(command, env))
    found = violations(plan, "tpu-budget", "prod")
    assert any(words in f for f in found) and all("Deployment evil" in f for f in found), found
    assert all(
        f.endswith("the budget gate cannot judge this stack; keep the JobSet rendered by workloads/") for f in found
    )


def test_a_config_map_a_tpu_workload_mounts_and_the_pack_cannot_read_is_a_finding():
    """Its files may start the trainer (``cd /tpu-rl && bash run.sh`` names no path): unknown is not safe."""
    launcher = _train_data(pure_plan("prod"))["launch.py"]
    plan = _with(
        pure_plan("prod"),
        _config_map("evil-scripts", {"launch.py": launcher, "train.json": json.dumps({**RUN, "num_batches": "1"})}),
        _tpu_deployment(["bash", "-c", "cd /tpu-rl && bash run.sh"], scripts="evil-scripts"),
    )
    deployment = next(r for r in plan.resources if r["name"] == "evil" and "Deployment" in r["type"])
    pod = deployment["inputs"]["spec"]["template"]["spec"]
    pod["volumes"].append({"name": "more", "configMap": {"name": "undeclared"}})
    _step(pod)["volumeMounts"].append({"name": "more", "mountPath": "/more", "readOnly": True})
    (found,) = violations(plan, "tpu-budget", "prod")
    assert "Deployment evil mounts /more from ConfigMap undeclared, which this stack does not declare" in found


RUN = {
    "model_name": "gemma4-26b",
    "batch_size": "4",
    "rl.num_generations": "4",
    "max_target_length": "640",
}
"""prod's training overrides (its train.json) but num_batches: no load_checkpoint_only_once, MaxText's false, as
tpu-rl:training.loadCheckpointOnlyOnce's default leaves it (two reads of the checkpoint, as ``_total`` costs prod)."""


@pytest.mark.parametrize(
    ("overrides", "env", "num_batches"),
    [
        ({**RUN, "num_batches": "5000"}, [], 5000),
        ({**RUN}, [{"name": "M_NUM_BATCHES", "value": "5000"}], 5000),  # pyconfig's environment override
        ({**RUN, "num_batches": "50"}, [{"name": "M_NUM_BATCHES", "value": "5000"}], 50),  # both: pyconfig refuses
        ({**RUN}, [{"name": "NB", "value": "9"}, {"name": "M_NUM_BATCHES", "value": "$(NB)"}], 9),  # kubelet's
    ],
    ids=["plain", "environment", "command-line-first", "kubelet-expansion"],
)
@pytest.mark.slow
def test_the_launchers_overrides_with_its_environment(overrides, env, num_batches):
    assert _estimate(_launched(overrides, env))["totalUsd"] == _total(
        (f"tpu-rl:training.numBatches={num_batches}", LONG)
    )


SECOND_READ_USD = 2 / 60 * 32 * 1.89
"""What a second read of the converted checkpoint costs on prod's reserved slice (core.estimate
CHECKPOINT_READ_MINUTES)."""


@pytest.mark.parametrize(
    ("once", "env", "extra"),
    [
        ("True", [], 0.0),  # MaxText's loader takes either case
        (None, [], SECOND_READ_USD),  # MaxText's default: the actor read from the checkpoint again
        ("false", [], SECOND_READ_USD),
        (None, [{"name": "M_LOAD_CHECKPOINT_ONLY_ONCE", "value": "true"}], 0.0),  # pyconfig's environment override
        ("yes", [], SECOND_READ_USD),  # not read here: costed at the second read, never below
    ],
    ids=["true", "unset", "false", "environment", "unread"],
)
def test_the_budget_costs_the_second_read_unless_train_rl_reads_the_checkpoint_once(once, env, extra):
    overrides = {**RUN, "num_batches": "5000", **({"load_checkpoint_only_once": once} if once is not None else {})}
    # prod's stack reads the checkpoint twice (loadCheckpointOnlyOnce false, the default): one read less is its cost
    # less SECOND_READ_USD
    total = _total(FIVE_THOUSAND) - SECOND_READ_USD
    assert _estimate(_launched(overrides, env))["totalUsd"] == pytest.approx(total + extra, abs=0.01)


# A Helm release of any chart passed: only the charts tpu-rl installs, at their versions and values.


def _release(name: str, chart: str, version: str, **inputs: Any) -> dict[str, Any]:
    return _object(
        HELM, name, {"name": name, "chart": chart, "version": version, "namespace": f"{name}-system", **inputs}
    )


HELM = "kubernetes:helm.sh/v3:Release"


def _program_releases() -> list[dict[str, Any]]:
    from infra.k8s import kueue
    from infra.k8s.platform import JOBSET_CHART
    from tests.lifecycle_walk import settings

    s = settings("prod", [])
    return [
        _release("jobset", JOBSET_CHART, s.workflow.jobset_version, atomic=True),
        _release("kueue", kueue.CHART, s.kueue.version, values=kueue.helm_values(s)),
    ]


def test_the_allowed_charts_are_the_ones_the_program_installs():
    from core.controllers import JOBSET_VERSIONS, KUEUE_VERSIONS
    from infra.k8s import kueue
    from infra.k8s.platform import JOBSET_CHART

    assert {chart: versions for chart, (versions, _) in policies.helm.HELM_CHARTS.items()} == {
        JOBSET_CHART: JOBSET_VERSIONS,
        kueue.CHART: KUEUE_VERSIONS,
    }
    assert violations(_plan_of(*_program_releases()), "reviewed-helm-charts", "prod") == []


HELM_CASES = [
    (
        "any-chart",
        "reviewed-helm-charts",
        _release("evil", "oci://docker.io/someone/charts/miner", "1.0.0"),
        "installs chart 'oci://docker.io/someone/charts/miner', which is not one tpu-rl installs",
    ),
    (
        "a-chart-by-repository",
        "reviewed-helm-charts",
        _release("evil", "jobset", "0.10.1", repositoryOpts={"repo": "https://charts.example.com"}),
        "installs chart 'jobset', which is not one tpu-rl installs",
    ),
    (
        "another-version",
        "reviewed-helm-charts",
        _release("jobset", "oci://registry.k8s.io/jobset/charts/jobset", "0.11.0"),
        "version '0.11.0' is not one",
    ),
    (
        "repository-options",
        "reviewed-helm-charts",
        _release(
            "jobset",
            "oci://registry.k8s.io/jobset/charts/jobset",
            "0.10.1",
            repositoryOpts={"repo": "https://x.example"},
        ),
        "repositoryOpts.repo fetches the chart from elsewhere",
    ),
    (
        "a-post-renderer",
        "reviewed-helm-charts",
        _release("jobset", "oci://registry.k8s.io/jobset/charts/jobset", "0.10.1", postrender="/bin/sed"),
        "postrender changes what the chart renders",
    ),
    (
        "values-files",
        "reviewed-helm-charts",
        _release("jobset", "oci://registry.k8s.io/jobset/charts/jobset", "0.10.1", valueYamlFiles=["v.yaml"]),
        "valueYamlFiles changes what the chart renders",
    ),
    (
        "an-image-value",
        "reviewed-helm-charts",
        _release(
            "kueue",
            "oci://registry.k8s.io/kueue/charts/kueue",
            "0.17.1",
            values={"controllerManager": {"manager": {"image": {"repository": "docker.io/someone/kueue"}}}},
        ),
        "values controllerManager.manager.image.repository are not ones tpu-rl sets",
    ),
]


@pytest.mark.parametrize(("case", "policy", "release", "words"), HELM_CASES, ids=[h[0] for h in HELM_CASES])
def test_a_helm_release_of_another_chart_is_a_finding(case, policy, release, words):
    (found,) = violations(_plan_of(release), policy, "prod")
    assert words in found, found


@pytest.mark.parametrize(("case", "policy", "change", "words"), POD_VIOLATIONS, ids=[v[0] for v in POD_VIOLATIONS])
@pytest.mark.parametrize("kind", ["Pod", "JobSet", "LeaderWorkerSet"])
def test_an_unknown_in_place_of_a_pod_finding_is_never_passed(kind, case, policy, change, words):
    pod, meta = _clean_pod(), dict[str, Any]()
    change(pod, meta)
    clean, bad = _workload(kind, _clean_pod()), _workload(kind, pod, meta)
    known = violations(_plan_of(clean), policy, "prod") + violations(_plan_of(bad), policy, "prod")
    assert_never_passed(_plan_of(_unknown_where_changed(clean, bad)), known, policy, "prod", words)


@pytest.mark.parametrize(("case", "policy", "release", "words"), HELM_CASES, ids=[h[0] for h in HELM_CASES])
def test_an_unknown_in_place_of_a_helm_finding_is_never_passed(case, policy, release, words):
    clean = _release("jobset", "oci://registry.k8s.io/jobset/charts/jobset", "0.10.1")
    clean["name"] = release["name"] = "release"
    clean["inputs"]["name"] = release["inputs"]["name"]
    clean["inputs"]["namespace"] = release["inputs"]["namespace"]
    known = violations(_plan_of(clean), policy, "prod") + violations(_plan_of(release), policy, "prod")
    assert_never_passed(_plan_of(_unknown_where_changed(clean, release)), known, policy, "prod", words)


def test_a_release_whose_values_are_not_known_yet_is_judged_at_up():
    release = _release("kueue", "oci://registry.k8s.io/kueue/charts/kueue", "0.17.1", values=UNKNOWN_STRING)
    (preview,) = findings(_plan_of(release), "reviewed-helm-charts", "prod", preview=True)
    assert preview.unjudged and preview.level == "advisory" and ".values" in preview.message, preview
    (up,) = findings(_plan_of(release), "reviewed-helm-charts", "prod")
    assert up.level == "mandatory" and up.message.startswith("cannot judge .values: not known at `pulumi up`"), up


RENDERER_TYPES = [
    "kubernetes:helm.sh/v4:Chart",
    "kubernetes:helm.sh/v3:Chart",
    "kubernetes:yaml/v2:ConfigGroup",
    "kubernetes:yaml/v2:ConfigFile",
    "kubernetes:yaml:ConfigGroup",
    "kubernetes:yaml:ConfigFile",
    "kubernetes:kustomize/v2:Directory",
    "kubernetes:kustomize:Directory",
]


@pytest.mark.parametrize("type_", RENDERER_TYPES)
@pytest.mark.parametrize("preview", [True, False], ids=["preview", "up"])
def test_a_chart_or_manifest_renderer_is_refused_at_preview_and_at_up(type_, preview):
    """What a chart or a manifest file renders is out of the review the stack's own objects get: refused whatever its
    inputs, known or not (a Helm v4 Chart's values may be unknown at a preview)."""
    renderer = _object(type_, "evil", {"chart": "oci://registry.k8s.io/jobset/charts/jobset", "values": UNKNOWN_STRING})
    (found,) = findings(_plan_of(renderer), "reviewed-helm-charts", "prod", preview=preview)
    assert found.level == "mandatory" and not found.unjudged
    assert found.message.startswith(f"{type_} evil renders Kubernetes objects from a chart or from files"), found


def test_the_kueue_chart_takes_the_program_s_values_and_no_other():
    """Kueue's values are the program's, value for value: another node pool moves the controller off the system
    pool (onto the TPU slice, or a pool another stack shares)."""
    _, kueue_release = _program_releases()
    assert violations(_plan_of(kueue_release), "reviewed-helm-charts", "prod") == []
    moved = copy.deepcopy(kueue_release)
    moved["inputs"]["values"]["controllerManager"]["nodeSelector"] = {"cloud.google.com/gke-nodepool": "other"}
    (found,) = violations(_plan_of(moved), "reviewed-helm-charts", "prod")
    assert found.startswith("Helm release kueue: controllerManager.nodeSelector.cloud.google.com/gke-nodepool differ")


# Quantities as Kubernetes parses them; a malformed one is a finding, never an exception.


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("16", 16),
        ("500m", 0.5),
        ("1.8e11", 1.8e11),
        ("1E3", 1000),
        ("1E", 1e18),
        ("2Gi", 2**31),
        ("1Ei", 2**60),
        ("1k", 1000),
        ("1.5Gi", 1.5 * 2**30),
        (".5", 0.5),
        ("1.", 1),
        ("+1", 1),
        ("-1", -1),
        ("100n", 1e-7),
        ("3u", 3e-6),
        ("1e-3", 0.001),
        (16, 16),
        (1.8e11, 1.8e11),
    ],
)
def test_quantities_parse_as_kubernetes_parses_them(text, value):
    from core.requests import quantity

    assert quantity(text) == pytest.approx(value)


@pytest.mark.parametrize(
    "text",
    ["100GB", "1K", "1ki", "1e", "1e1.5", "12 Gi", " 1", "", ".", "Ki", "0x10", "1_000", True, None, [], float("nan")],
)
def test_anything_else_is_not_a_quantity(text):
    from core.requests import quantity

    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        quantity(text)


def _convert_memory(value):
    def change(resource):
        resources = _container(resource)["resources"]
        resources["requests"]["memory"] = value
        resources["limits"]["memory"] = value

    return change


def test_a_memory_in_exponent_form_is_read_not_a_crash():
    plan = mutated_to_judge("prod", JOBSET, "convert", _convert_memory("1.8e11"))
    for name in BY_NAME:
        assert not [v for v in violations(plan, name, "prod") if "cannot judge" in v], name
    small = mutated_to_judge("prod", JOBSET, "convert", _convert_memory("1e9"))
    assert violations(small, "kueue-queue-fits", "prod") == []


@pytest.mark.parametrize("value", ["12 GB", "-1Gi", "lots", True])
def test_a_malformed_quantity_is_a_finding(value):
    plan = mutated_to_judge("prod", JOBSET, "convert", _convert_memory(value))
    (found,) = violations(plan, "kueue-queue-fits", "prod")
    assert "convert: container convert: requests.memory" in found and "is not a Kubernetes quantity" in found


# No policy raises on a hostile shape: every malformed input is a finding or ignored.

HOSTILE_SHAPES = [
    {"spec": "not a mapping"},
    {"spec": {"template": []}},
    {"spec": {"template": {"spec": {"containers": "a string"}}}},
    {"spec": {"template": {"spec": {"containers": [None, 1, "x", {"image": 3, "env": {"a": 1}}]}}}},
    {"spec": {"template": {"spec": {"containers": [{"resources": {"limits": [1]}, "securityContext": []}]}}}},
    {"spec": {"template": {"spec": {"containers": [{"command": [1, None, {"a": 1}], "args": "text"}]}}}},
    {
        "spec": {
            "template": {"spec": {"volumes": [None, {"hostPath": "x"}, {"hostPath": {"path": 5}}], "containers": []}}
        }
    },
    {"spec": {"replicatedJobs": {"name": "x"}, "coordinator": []}},
    {"spec": {"replicatedJobs": [None, {"replicas": "2", "template": {"spec": {"parallelism": -1}}}]}},
    {"metadata": {"labels": ["x"], "annotations": {"a": None}, "name": ["n"]}},
    {"items": [None, {"kind": 5}]},
    {
        "spec": {
            "template": {
                "spec": {"containers": [{"env": [{"name": "A", "valueFrom": []}, {"name": "B", "value": "$("}]}]}
            }
        }
    },
    {"spec": {"template": {"spec": {"containers": [{"envFrom": [None, {"configMapRef": "x", "prefix": 1}]}]}}}},
]
HOSTILE_TYPES = [POD_KINDS[k][0] for k in ("Pod", "Deployment", "CronJob", "JobSet", "PodList", "LeaderWorkerSet")] + [
    JOB,
    HELM,
    CONFIG_MAP_TYPE,
    "kubernetes:core/v1:Secret",
    POOL,
    CLUSTER,
    BUCKET,
    CQ,
    LOCAL_QUEUE,
    FLAVOR,
]


@pytest.mark.parametrize("shape", HOSTILE_SHAPES, ids=[str(i) for i in range(len(HOSTILE_SHAPES))])
@pytest.mark.slow
def test_no_policy_raises_on_a_hostile_shape(shape):
    resources = [_object(type_, f"hostile-{i}", copy.deepcopy(shape)) for i, type_ in enumerate(HOSTILE_TYPES)]
    resources.append(_object(LOCAL_QUEUE, "q", {"metadata": {"name": "q"}, "spec": {"clusterQueue": "cq"}}))
    resources.append(_object(CQ, "cq", {"metadata": {"name": "cq"}, "spec": {"resourceGroups": "x"}}))
    plan = _with(pure_plan("prod"), *resources)
    for name in BY_NAME:
        found = violations(plan, name, "prod")  # raises if the policy does
        assert not [v for v in found if "cannot judge" in v], (name, found)


# Objects the stacks do not hold (RBAC, admission control, Services): each case with its near miss, which passes.


def _k8s(kind: str, api: str, name: str, **body: Any) -> dict[str, Any]:
    manifest = {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": "tpu-rl"}, **body}
    return _object(f"kubernetes:{api if '/' in api else 'core/' + api}:{kind}", name, manifest)


RBAC = "rbac.authorization.k8s.io/v1"
ADMISSION = "admissionregistration.k8s.io/v1"
READ_PODS = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}


OBJECT_CASES = [
    # (id, policy, near miss (passes), hostile object, words of its finding)
    (
        "wildcard-verbs",
        "no-broad-rbac",
        _k8s("Role", RBAC, "reader", rules=[READ_PODS]),
        _k8s("Role", RBAC, "reader", rules=[{**READ_PODS, "verbs": ["*"]}]),
        "Role reader rule 0 grants every verb ('*')",
    ),
    (
        "wildcard-resources",
        "no-broad-rbac",
        _k8s("ClusterRole", RBAC, "reader", rules=[READ_PODS]),
        _k8s("ClusterRole", RBAC, "reader", rules=[{**READ_PODS, "resources": ["*"]}]),
        "ClusterRole reader rule 0 grants every resource ('*')",
    ),
    (
        "escalating-verbs",
        "no-broad-rbac",
        _k8s("ClusterRole", RBAC, "binder", rules=[READ_PODS]),
        _k8s(
            "ClusterRole",
            RBAC,
            "binder",
            rules=[{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"]}],
        ),
        "grants bind: a way to any permission",
    ),
    (
        "a-mutating-webhook",
        "no-admission-webhooks",
        _k8s("ConfigMap", "v1", "webhooks", data={"kind": "MutatingWebhookConfiguration"}),
        _k8s("MutatingWebhookConfiguration", ADMISSION, "webhooks", webhooks=[]),
        "MutatingWebhookConfiguration webhooks sees or changes every object it matches",
    ),
    (
        "an-admission-policy",
        "no-admission-webhooks",
        _k8s("ConfigMap", "v1", "policy", data={"kind": "ValidatingAdmissionPolicy"}),
        _k8s("ValidatingAdmissionPolicy", ADMISSION, "policy", spec={}),
        "ValidatingAdmissionPolicy policy sees or changes every object it matches",
    ),
    (
        "a-load-balancer",
        "no-exposed-services",
        _k8s("Service", "v1", "pathways", spec={"type": "ClusterIP", "ports": [{"port": 29000}]}),
        _k8s("Service", "v1", "pathways", spec={"type": "LoadBalancer", "ports": [{"port": 29000}]}),
        "Service pathways of type LoadBalancer opens its pods beyond the cluster",
    ),
    (
        "a-node-port",
        "no-exposed-services",
        _k8s("Service", "v1", "pathways", spec={"clusterIP": "None", "ports": [{"port": 29000}]}),
        _k8s("Service", "v1", "pathways", spec={"type": "NodePort", "ports": [{"port": 29000}]}),
        "Service pathways of type NodePort opens its pods beyond the cluster",
    ),
    (
        "external-ips",
        "no-exposed-services",
        _k8s("Service", "v1", "pathways", spec={"ports": [{"port": 29000}]}),
        _k8s("Service", "v1", "pathways", spec={"ports": [{"port": 29000}], "externalIPs": ["203.0.113.7"]}),
        "Service pathways sets externalIPs",
    ),
]


@pytest.mark.parametrize(("case", "policy", "near", "bad", "words"), OBJECT_CASES, ids=[c[0] for c in OBJECT_CASES])
def test_each_object_policy_catches_its_case_and_lets_its_near_miss_through(case, policy, near, bad, words):
    assert violations(_with(base_plan("prod"), near), policy, "prod") == []
    (found,) = findings(_with(base_plan("prod"), bad), policy, "prod", preview=True)
    assert words in found.message and found.level == "mandatory" and not found.unjudged, found


# Where the kind itself is the finding (a webhook against a ConfigMap), nothing of it can be unknown: a type never is.
SAME_KIND_CASES = [c for c in OBJECT_CASES if c[2]["type"] == c[3]["type"]]


@pytest.mark.parametrize(
    ("case", "policy", "near", "bad", "words"), SAME_KIND_CASES, ids=[c[0] for c in SAME_KIND_CASES]
)
def test_an_unknown_in_place_of_an_object_finding_is_never_passed(case, policy, near, bad, words):
    known = violations(_with(base_plan("prod"), bad), policy, "prod")
    plan = _with(base_plan("prod"), _unknown_where_changed(near, bad))
    assert_never_passed(plan, known, policy, "prod", words)


def test_the_publication_reads_the_write_token_and_nothing_else_does():
    publishing = base_plan("publishing")
    assert violations(publishing, "secret-holders", "publishing") == []
    publish = next(r for r in publishing.resources if r["type"] == JOBSET and _is(r, "publish"))
    env = _publish_container(publish)["env"]
    assert any(e.get("valueFrom", {}).get("secretKeyRef", {}).get("name") == "hf-write-token" for e in env)

    def as_a_volume(resource):
        spec = _pod_spec(resource)
        spec.setdefault("volumes", []).append(
            {"name": "w", "projected": {"sources": [{"secret": {"name": "hf-write-token"}}]}}
        )
        _container(resource).setdefault("volumeMounts", []).append({"name": "w", "mountPath": "/w"})

    (found,) = violations(
        mutated_to_judge("publishing", JOBSET, "convert", as_a_volume), "secret-holders", "publishing"
    )
    assert "container convert (convert) reads Secret hf-write-token (volume w)" in found


# The stack's own principals: the program's plans (the builders' plan holds no accounts).


def _program_mutated(stack: str, type_: str, name: str, change) -> Plan:
    """The program's plan with one resource changed, for a plan that is only judged: that resource a copy, the rest
    the stack's plan's own (as ``mutated_to_judge``)."""
    plan = plan_of(stack)
    (target,) = [copy.deepcopy(r) for r in plan.resources if r["type"] == type_ and r["name"] == name]
    change(target)
    resources = [target if r["type"] == type_ and r["name"] == name else r for r in plan.resources]
    wire = {key: sent for key, sent in plan.wire.items() if key != (type_, name)}  # the change is what it receives
    return dataclasses.replace(plan, resources=resources, wire=wire)


WORKLOAD_IDENTITY = "gcp:serviceaccount/iAMMember:IAMMember"
PRINCIPAL_CASES = [
    (
        "another-stacks-account",
        BUCKET_IAM,
        "export-bucket-objectUser",
        "member",
        "serviceAccount:tpu-rl-dev-export@my-tpu-prod-project.iam.gserviceaccount.com",
        "which is not one of this stack's accounts",
    ),
    (
        "a-kubernetes-account-the-stack-does-not-make",
        WORKLOAD_IDENTITY,
        "export-workload-identity",
        "member",
        "serviceAccount:my-tpu-prod-project.svc.id.goog[tpu-rl/tpu-rl-export]",
        "lets tpu-rl/tpu-rl-export act as a Google account, but this stack makes no such Kubernetes service account",
    ),
    (
        "a-kubernetes-account-named-as-another",
        WORKLOAD_IDENTITY,
        "export-workload-identity",
        "member",
        "serviceAccount:my-tpu-prod-project.svc.id.goog[tpu-rl/tpu-rl-prod-convert]",
        "binds tpu-rl/tpu-rl-prod-convert to the account tpu-rl-prod-export",
    ),
]


@pytest.mark.program
@pytest.mark.parametrize(
    ("case", "type_", "name", "key", "value", "words"), PRINCIPAL_CASES, ids=[c[0] for c in PRINCIPAL_CASES]
)
def test_grants_go_to_the_stacks_own_principals(case, type_, name, key, value, words):
    assert violations(plan_of("prod"), "stack-principals", "prod") == []
    plan = _program_mutated("prod", type_, name, lambda r: r["inputs"].__setitem__(key, value))
    (found,) = violations(plan, "stack-principals", "prod")
    assert words in found, found
    unknown = _program_mutated("prod", type_, name, lambda r: r["inputs"].__setitem__(key, UNKNOWN_STRING))
    assert_never_passed(unknown, [], "stack-principals", "prod", words)


@pytest.mark.program
def test_the_gke_agent_may_use_the_stacks_key_and_nothing_else():
    agent = "serviceAccount:service-123456789012@container-engine-robot.iam.gserviceaccount.com"
    assert any(r["inputs"].get("member") == agent for r in plan_of("prod").resources)
    plan = _program_mutated(
        "prod", BUCKET_IAM, "export-bucket-objectUser", lambda r: r["inputs"].__setitem__("member", agent)
    )
    (found,) = violations(plan, "stack-principals", "prod")
    assert "which is not one of this stack's accounts" in found


@pytest.mark.program
def test_two_stacks_in_one_project_share_no_principal():
    """A dev and a prod stack in one project, with the same namespace: their Workload Identity principals are
    disjoint (each Kubernetes service account is named as its own Google account), and each stack's pack passes."""
    dev, prod = plan_of(*VARIANTS["dev-in-shared-project"]), plan_of(*VARIANTS["prod-in-shared-project"])

    def principals(plan: Plan) -> set[str]:
        return {
            r["inputs"]["member"]
            for r in plan.resources
            if r["type"] == WORKLOAD_IDENTITY and r["inputs"].get("role") == "roles/iam.workloadIdentityUser"
        }

    assert principals(dev) and principals(prod) and not principals(dev) & principals(prod)
    assert violations(dev, "stack-principals", "dev-in-shared-project") == []
    assert violations(prod, "stack-principals", "prod-in-shared-project") == []


@pytest.mark.slow
@pytest.mark.program
def test_a_stack_with_a_shared_hub_cache_and_a_boot_disk_image_passes_the_pack():
    """The grants on a shared Hub cache's bucket are bounded to its folder (``scoped-bucket-grants``) and a secondary
    boot disk changes nothing the pack judges: the same findings as the prod stack, none mandatory."""
    overrides = (
        "tpu-rl:model.hubCache=gs://shared-hub/hub/",
        "tpu-rl:model.hubCacheWriter=prod",
        "tpu-rl:cpuPool.bootDiskImage=tpu-rl-images-0-2-5",
    )
    plan = plan_of("prod", *overrides)
    assert [r["name"] for r in plan.find("gcp:storage/bucketIAMMember:BucketIAMMember") if "-hubcache-" in r["name"]]
    config = analyzer.engine_config("prod", *overrides)  # the declared cache, as the engine sends the pack
    shared = {"enforcementLevel": "mandatory", "hubCaches": ["gs://shared-hub/hub/"]}  # the base's policy config
    file = {**analyzer.policy_config_file("prod"), "grant-targets": {**shared, "writtenHubCaches": shared["hubCaches"]}}
    found = analyzer.analyze_plan(plan, Pack(file, stack="prod", stack_config=config))
    assert analyzer.mandatory(found) == []
    assert {f.policy for f in found if not f.unjudged} == EXPECTED["prod"]
