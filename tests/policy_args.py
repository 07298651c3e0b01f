"""The policy SDK's arguments as the engine hands them to a policy, its ``report`` recorded, and what a policy read
shown to compare, for tests that call the pack's checks directly (``policy/tpu_rl_policies/resources.py``'s factories
and what they wrap, ``properties.plain``)."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from pulumi_policy import PolicyCustomTimeouts, PolicyResourceOptions, ResourceValidationArgs, StackValidationArgs

from policy.tpu_rl_policies import properties
from policy.tpu_rl_policies.properties import Unseen

TYPE = "kubernetes:batch/v1:Job"
OPTIONS = PolicyResourceOptions(False, [], False, [], PolicyCustomTimeouts(0, 0, 0), [])
URN = "urn:pulumi:dev::tpu-rl::kubernetes:batch/v1:Job::step"


class Reports:
    """The SDK's ``report(message, urn=None)``, recording what it is called with."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None]] = []

    def __call__(self, message: str, urn: str | None = None) -> None:
        self.calls.append((message, urn))


def resource_args(props: Any) -> ResourceValidationArgs:
    return ResourceValidationArgs(TYPE, props, URN, "step", OPTIONS, None)


def stack_args(*resources: Any) -> StackValidationArgs:
    return StackValidationArgs(list(resources))


def urn_of(resource_type: str, name: str, stack: str = "dev") -> str:
    """The URN of a resource of the project ``tpu-rl`` with no parent."""
    return f"urn:pulumi:{stack}::tpu-rl::{resource_type}::{name}"


def policy_resource(resource_type: str, name: str, props: Any, stack: str = "dev", protect: bool = False) -> Any:
    """A resource as ``StackValidationArgs`` holds it: what ``_resources`` reads of pulumi-policy's ``PolicyResource``
    (its type, props, URN, name and options)."""
    urn = urn_of(resource_type, name, stack)
    opts = SimpleNamespace(protect=protect)
    return SimpleNamespace(resource_type=resource_type, props=props, urn=urn, name=name, opts=opts)


def stack_resource(props: Any, name: str = "step", protect: bool = False) -> Any:
    """A Job of the stack ``dev`` as ``StackValidationArgs`` holds it."""
    return policy_resource(TYPE, name, props, protect=protect)


def shown(value: Any) -> Any:
    """A plain value with each ``Unseen`` as its path and owner and each leaf with its type (``1``, ``1.0``, ``True``
    told apart), to compare (an ``Unseen`` equals nothing)."""
    if isinstance(value, Unseen):
        return ("unseen", value.path, value.owner)
    if isinstance(value, dict):
        return {key: shown(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shown(item) for item in value]
    return (type(value).__name__, value)


def noting(read: Callable[[], Any]) -> tuple[Any, list[Any]]:
    """What ``read`` returns, and the values not known yet it noted as read (in the order read): what a policy's
    ``_judged`` names as not seen."""
    seen: list[Any] = []
    token = properties._UNSEEN.set(seen)
    try:
        result = read()
    finally:
        properties._UNSEEN.reset(token)
    return result, [value for value, _ in seen]
