"""Shared fixtures: offline plans of the example stacks, and the ../shared test data."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from infra.plan import plan_stack
from infra.plan.offline import ROOT, Plan

# Tests talk only to loopback: google-auth must never probe the GCE metadata server.
os.environ["NO_GCE_CHECK"] = "True"
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

SHARED = ROOT.parent / "shared"
SENTINEL_TOKEN = "hf_SENTINELtokenVALUEforLEAKchecks0123456789"


def shared_path(*parts: str) -> Path:
    """A file under ../shared, or skip the test with the reason when the folder is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is not available (../shared is laid beside the checkout only in CI and dev machines)")
    return path


@pytest.fixture(autouse=True)
def no_live_cluster(monkeypatch):
    """Tests never reach a cluster: the live JobSet read finds nothing unless a test says otherwise."""
    monkeypatch.setattr("workloads.retry.read_live_jobset", lambda kubeconfig, namespace, name: None)


@functools.lru_cache(maxsize=64)
def _plan(stack: str, overrides: tuple[str, ...]) -> Plan:
    plan, _ = plan_stack(
        ROOT / f"Pulumi.{stack}.yaml", list(overrides), stack=stack, secrets={"tpu-rl:hfToken": SENTINEL_TOKEN}
    )
    return plan


def plan_of(stack: str, *overrides: str) -> Plan:
    """Offline plan of an example stack with ``--set`` overrides (cached; do not mutate)."""
    return _plan(stack, tuple(overrides))


@pytest.fixture(scope="session")
def dev_plan() -> Plan:
    return plan_of("dev")


@pytest.fixture(scope="session")
def prod_plan() -> Plan:
    return plan_of("prod")
