"""Every GCP input the program sends, nested fields included, is a field of the pulumi-gcp SDK.

The SDK checks top-level keyword arguments but sends nested dicts as they are; a typo there
(``tpuTopolgy``) would only fail at `pulumi up`. This walks each input against the SDK's
``*Args`` classes.
"""

from __future__ import annotations

import importlib
import inspect
import re
from typing import Any

import pytest

from tests.conftest import plan_of


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _args_class(type_token: str) -> type:
    """``gcp:container/nodePool:NodePool`` -> ``pulumi_gcp.container.NodePoolArgs``."""
    _, module, cls = type_token.split(":")
    package = module.split("/")[0]
    return getattr(importlib.import_module(f"pulumi_gcp.{package}"), f"{cls}Args")


def _nested_class(owner: type, annotation: str) -> type | None:
    match = re.search(r"'(\w+Args)'", annotation)
    if not match:
        return None
    module = importlib.import_module(owner.__module__.rsplit(".", 1)[0] + "._inputs")
    return getattr(module, match.group(1))


def _check(cls: type[Any], value: dict[str, Any], path: str, errors: list[str]) -> None:
    params = inspect.signature(cls.__init__).parameters
    for key, item in value.items():
        name = _snake(key)
        if name not in params:
            errors.append(f"{path}.{key}: not a field of {cls.__name__}")
            continue
        nested = _nested_class(cls, str(params[name].annotation))
        if nested is None:
            continue
        for element in item if isinstance(item, list) else [item]:
            if isinstance(element, dict):
                _check(nested, element, f"{path}.{key}", errors)


@pytest.mark.parametrize("stack", ["dev", "prod"])
@pytest.mark.slow
def test_every_gcp_input_is_an_sdk_field(stack):
    errors: list[str] = []
    plan = plan_of(
        stack,
        "tpu-rl:tpu.capacity=flex-start",
        "tpu-rl:tpu.reservation=",
        # every optional input as well: the upgrade hold, the created KMS key, versioning
        "tpu-rl:gke.holdUpgrades=2026-12-01/2026-12-20",
        "tpu-rl:gke.secretsEncryptionKey=create",
        "tpu-rl:bucketVersioning=true",
    )
    resources = [r for r in plan.resources if r["type"].startswith("gcp:")] + [
        r for r in plan_of(stack).resources if r["type"] == "gcp:container/nodePool:NodePool"
    ]
    assert len(resources) > 40
    assert {"gcp:kms/keyRing:KeyRing", "gcp:kms/cryptoKey:CryptoKey"} <= {r["type"] for r in resources}
    for resource in resources:
        _check(_args_class(resource["type"]), resource["inputs"], resource["name"], errors)
    assert errors == []


def test_the_walk_catches_a_nested_typo():
    errors: list[str] = []
    pool = next(r for r in plan_of("prod").resources if r["name"] == "tpu-pool-0")
    inputs = {**pool["inputs"], "placementPolicy": {"type": "COMPACT", "tpuTopolgy": "4x8"}}
    _check(_args_class(pool["type"]), inputs, "tpu-pool-0", errors)
    assert errors == ["tpu-pool-0.placementPolicy.tpuTopolgy: not a field of NodePoolPlacementPolicyArgs"]
