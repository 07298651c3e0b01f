"""``private-publish`` (``policy/tpu_rl_policies/publish.py``) on each way a container's environment can name a Hub
repository and say whether it is private, called directly as the engine calls a stack validation: the exact finding an
operator reads, on the resource that publishes, and the near misses that pass. Each container of a pod is judged on
its own (one that publishes nothing, or passes, does not end the judging of the next), and a ConfigMap is read in the
namespace of the pod that reads it."""

from __future__ import annotations

from typing import Any

import pytest
from pulumi_policy import StackValidationArgs

from policy.tpu_rl_policies.publish import private_publish
from policy.tpu_rl_policies.resources import CONFIG_MAP
from tests.policy_args import Reports, policy_resource

pytestmark = pytest.mark.pure

JOB = "kubernetes:batch/v1:Job"
REPO, PRIVATE = "TPU_RL_PUBLISH_REPO", "TPU_RL_PUBLISH_PRIVATE"
TAIL = (
    ": a trained model goes public only when the stack says so in two places, tpu-rl:publish.private false and "
    "this policy's publicRepos"
)


def urn(type_: str, name: str) -> str:
    return f"urn:pulumi:dev::tpu-rl::{type_}::{name}"


def resource(type_: str, name: str, props: dict[str, Any]) -> Any:
    """A resource as ``StackValidationArgs`` holds it."""
    return policy_resource(type_, name, props)


def job(*containers: dict[str, Any], name: str = "pub", namespace: str = "tpu-rl") -> Any:
    pod = {"spec": {"containers": list(containers)}}
    meta = {"name": name, "namespace": namespace}
    return resource(JOB, name, {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {"template": pod}})


def container(name: str, env: list[dict[str, Any]] | None = None, env_from: list[str] | None = None) -> dict[str, Any]:
    """A container with literal ``env`` entries and ``envFrom`` ConfigMaps."""
    out: dict[str, Any] = {"name": name, "image": "x", "env": env or []}
    if env_from:
        out["envFrom"] = [{"configMapRef": {"name": cm}} for cm in env_from]
    return out


def var(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "value": value}


def config_map(name: str, data: dict[str, str], namespace: str = "tpu-rl") -> Any:
    return resource(CONFIG_MAP, name, {"metadata": {"name": name, "namespace": namespace}, "data": data})


def check(*resources: Any, public: list[str] | None = None) -> list[tuple[str, str | None]]:
    """The findings, as (message, URN), with the config the engine sends (``publicRepos`` filled from its default)."""
    report = Reports()
    private_publish.validate(StackValidationArgs(list(resources), {"publicRepos": public or []}), report)
    return report.calls


def public(repo: str, private: str) -> str:
    return f"publishes {repo} to the Hugging Face Hub as a public repository ({PRIVATE}={private}){TAIL}"


def undeclared(container_name: str, sources: str) -> str:
    return (
        f"container {container_name} takes its environment from {sources}, which this stack does not declare: it may "
        f"publish to the Hugging Face Hub ({REPO}) as a public repository; declare the object in the stack or set "
        f"{PRIVATE}=true in the container's env"
    )


PUB = urn(JOB, "pub")


@pytest.mark.parametrize(
    ("env", "shown"),
    [([], "(unset)"), ([var(PRIVATE, "false")], "false"), ([var(PRIVATE, "True")], "True")],
    ids=["unset", "false", "not-exactly-true"],
)
def test_a_repository_not_private_is_a_finding_on_the_publishing_job(env: list[dict[str, Any]], shown: str) -> None:
    """Only ``true`` exactly keeps the repository private (``publish_hub.py`` reads it so)."""
    assert check(job(container("publish", [var(REPO, "acme/m"), *env]))) == [(public("acme/m", shown), PUB)]


def test_a_private_repository_passes() -> None:
    assert check(job(container("publish", [var(REPO, "acme/m"), var(PRIVATE, "true")]))) == []


def test_a_repository_listed_in_public_repos_passes_and_another_does_not() -> None:
    publishing = job(container("publish", [var(REPO, "acme/m"), var(PRIVATE, "false")]))
    assert check(publishing, public=["acme/m"]) == []
    assert check(publishing, public=["acme/other"]) == [(public("acme/m", "false"), PUB)]


def test_a_container_without_a_repository_publishes_nothing() -> None:
    assert check(job(container("train", [var("OTHER", "x")]))) == []


def test_a_container_that_publishes_nothing_does_not_stop_the_next_one_being_judged() -> None:
    found = check(job(container("train", [var("OTHER", "x")]), container("publish", [var(REPO, "acme/m")])))
    assert found == [(public("acme/m", "(unset)"), PUB)]


def test_a_listed_repository_does_not_stop_the_next_container_being_judged() -> None:
    found = check(
        job(container("first", [var(REPO, "acme/open")]), container("second", [var(REPO, "acme/m")])),
        public=["acme/open"],
    )
    assert found == [(public("acme/m", "(unset)"), PUB)]


def test_values_from_a_declared_config_map_are_read() -> None:
    """``envFrom`` a ConfigMap of the stack: its keys are the container's environment."""
    cm = config_map("publish", {REPO: "acme/m", PRIVATE: "false"})
    assert check(cm, job(container("publish", env_from=["publish"]))) == [(public("acme/m", "false"), PUB)]
    private = config_map("publish", {REPO: "acme/m", PRIVATE: "true"})
    assert check(private, job(container("publish", env_from=["publish"]))) == []


def test_a_config_map_key_ref_is_read_in_the_pod_namespace() -> None:
    """A ConfigMap of the same name in another namespace is not the one the pod reads."""
    ref = {"name": REPO, "valueFrom": {"configMapKeyRef": {"name": "publish", "key": "repo"}}}
    publishing = job(container("publish", [ref]), namespace="team-a")
    elsewhere = config_map("publish", {"repo": "acme/m"}, namespace="team-b")
    shown = "a repository (ConfigMap publish, which this stack does not declare)"
    assert check(elsewhere, publishing) == [(public(shown, "(unset)"), PUB)]
    here = config_map("publish", {"repo": "acme/m"}, namespace="team-a")
    assert check(here, elsewhere, publishing) == [(public("acme/m", "(unset)"), PUB)]


def test_an_undeclared_env_from_without_a_repository_is_a_finding_naming_each_source() -> None:
    found = check(job(container("publish", env_from=["a", "b"])))
    assert found == [(undeclared("publish", "ConfigMap a, ConfigMap b"), PUB)]


def test_each_container_with_an_undeclared_env_from_is_a_finding() -> None:
    found = check(job(container("first", env_from=["a"]), container("second", [var(REPO, "acme/m")])))
    assert found == [(undeclared("first", "ConfigMap a"), PUB), (public("acme/m", "(unset)"), PUB)]


def test_an_undeclared_env_from_may_set_the_unset_private_flag() -> None:
    found = check(job(container("publish", [var(REPO, "acme/m")], env_from=["a", "b"])))
    assert found == [(public("acme/m", "(unset, unless ConfigMap a, ConfigMap b sets it)"), PUB)]


def test_literal_values_override_an_undeclared_env_from() -> None:
    """``env`` entries come after ``envFrom``: a literal ``true`` or a listed literal repository stands."""
    assert check(job(container("publish", [var(REPO, "acme/m"), var(PRIVATE, "true")], env_from=["a"]))) == []
    listed = job(container("publish", [var(REPO, "acme/m"), var(PRIVATE, "false")], env_from=["a"]))
    assert check(listed, public=["acme/m"]) == []


def test_values_from_a_declared_env_from_may_be_overridden_by_a_later_undeclared_one() -> None:
    """A private flag or a listed repository read from a declared ConfigMap does not pass when another ``envFrom``
    source the stack does not declare may set it again."""
    private = config_map("private", {PRIVATE: "true"})
    assert check(private, job(container("publish", [var(REPO, "acme/m")], env_from=["private", "a"]))) == [
        (public("acme/m", "true"), PUB)
    ]
    repo = config_map("repo", {REPO: "acme/m"})
    assert check(repo, job(container("publish", env_from=["repo", "a"])), public=["acme/m"]) == [
        (public("acme/m", "(unset, unless ConfigMap a sets it)"), PUB)
    ]
    assert check(repo, job(container("publish", env_from=["repo"])), public=["acme/m"]) == []
