"""``private-publish`` names where a value it cannot read comes from: a literal not known yet, or the object a
reference reads."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from pulumi.output import Unknown

from tests import analyzer

pytestmark = pytest.mark.pure

policies = importlib.import_module("policy.tpu_rl_policies")
PUBLISH = analyzer.pack_policy("private-publish")
JOB = "kubernetes:batch/v1:Job"
PUBLIC = "to the Hugging Face Hub as a public repository"
ELSEWHERE = {"configMapKeyRef": {"name": "elsewhere", "key": "repo"}}


def publishing_job(*env: dict[str, Any]) -> analyzer.Resource:
    pod = {"spec": {"containers": [{"name": "publish", "image": "x", "env": list(env)}]}}
    props = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pub", "namespace": "tpu-rl"}}
    return analyzer.Resource(JOB, "pub", f"urn:pulumi:dev::tpu-rl::{JOB}::pub", {**props, "spec": {"template": pod}})


CASES = [
    (
        [{"name": "TPU_RL_PUBLISH_REPO", "value": Unknown()}],
        f"publishes a repository (not known during preview) {PUBLIC} (TPU_RL_PUBLISH_PRIVATE=(unset))",
    ),
    (
        [{"name": "TPU_RL_PUBLISH_REPO", "value": "acme/m"}, {"name": "TPU_RL_PUBLISH_PRIVATE", "value": Unknown()}],
        f"publishes acme/m {PUBLIC} (TPU_RL_PUBLISH_PRIVATE=(not known during preview))",
    ),
    (
        [{"name": "TPU_RL_PUBLISH_REPO", "valueFrom": ELSEWHERE}],
        f"publishes a repository (ConfigMap elsewhere, which this stack does not declare) {PUBLIC} "
        "(TPU_RL_PUBLISH_PRIVATE=(unset))",
    ),
]


@pytest.mark.parametrize(("env", "words"), CASES, ids=["repo-literal", "private-literal", "repo-config-map"])
def test_a_value_it_cannot_read_is_named_by_where_it_comes_from(env: list[dict[str, Any]], words: str) -> None:
    """At a preview a literal not known yet is "not known during preview" (judged at `pulumi up`, with what it would
    report shown); a reference names its object."""
    pack = analyzer.Pack(
        {"all": "mandatory"}, dry_run=True, policies=[PUBLISH], stack="dev", stack_config=analyzer.engine_config("dev")
    )
    (found,) = pack.analyze_stack([publishing_job(*env)])
    assert words in found.message
