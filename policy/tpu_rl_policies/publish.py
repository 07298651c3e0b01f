"""A published model goes to a private Hub repository unless the config lists it (``private-publish``)."""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, PolicyConfigSchema, Severity, StackValidationArgs, StackValidationPolicy

from core.names import PUBLISH_ENV

from .env import EnvValue, StackObjects, container_env
from .pods import _namespace, pod_containers, pods
from .properties import _config
from .resources import Report, Resource, _guarded_stack


def _unseen(value: EnvValue) -> str:
    """Where a value the policy cannot read comes from, as a message shows it."""
    return "(not known during preview)" if value.kind == "literal" else f"({value.source})"


def _private_publish(args: StackValidationArgs, resources: list[Resource], report: Report) -> None:
    """A container publishes when its environment (resolved: ``envFrom``, ``configMapKeyRef``, ``$(VAR)``) names a
    repository (``workloads/container/publish_hub.py`` reads ``core.names.PUBLISH_ENV``); it is private only when
    ``TPU_RL_PUBLISH_PRIVATE`` is exactly ``true``, as publish_hub.py reads it."""
    allowed = {str(repo) for repo in _config(args)["publicRepos"]}
    repo_env, _branch_env, private_env = PUBLISH_ENV
    objects = StackObjects(resources)
    for r in resources:
        namespace = _namespace(r.props)
        for pod in pods(r.resource_type, r.props):
            for container in pod_containers(pod.spec):
                env = container_env(container, namespace, objects)
                repo, private = env.values.get(repo_env), env.values.get(private_env)
                if repo is None and not env.unseen:
                    continue
                # A value from envFrom may be overridden by a later source this stack does not declare.
                if private is not None and private.value == "true" and not (private.from_env_from and env.unseen):
                    continue
                if repo is not None and repo.value in allowed and not (repo.from_env_from and env.unseen):
                    continue
                if repo is None:
                    report(
                        f"container {container.get('name')} takes its environment from {', '.join(env.unseen)}, "
                        f"which this stack does not declare: it may publish to the Hugging Face Hub ({repo_env}) "
                        f"as a public repository; declare the object in the stack or set {private_env}=true in "
                        "the container's env",
                        r.urn,
                    )
                    continue
                shown_repo = repo.value if isinstance(repo.value, str) else f"a repository {_unseen(repo)}"
                if private is None:
                    shown_private = "(unset)" if not env.unseen else f"(unset, unless {', '.join(env.unseen)} sets it)"
                else:
                    shown_private = private.value if isinstance(private.value, str) else _unseen(private)
                report(
                    f"publishes {shown_repo} to the Hugging Face Hub as a public repository "
                    f"({private_env}={shown_private}): a trained model goes public only when the stack says so in "
                    "two places, tpu-rl:publish.private false and this policy's publicRepos",
                    r.urn,
                )


private_publish = StackValidationPolicy(
    name="private-publish",
    description="A published model goes to a private Hub repository, unless the policy config lists the repository.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep tpu-rl:publish.private true, or list the repository in publicRepos (policy/config).",
    config_schema=PolicyConfigSchema(
        properties={"publicRepos": {"type": "array", "items": {"type": "string"}, "default": []}}
    ),
    validate=_guarded_stack(_private_publish),
)
