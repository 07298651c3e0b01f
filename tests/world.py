"""The world the tests hand the program (``program.world.World``) in place of the real one: a cluster that holds
only what the mock provider applied in this test (``APPLIED``, filled by ``tests/conftest.py`` ``statuses``), image
digests computed from the reference, a capacity check that finds nothing; the Hub, the bucket and what `make up`
hands over of the state as the real run reaches them (``HF_ENDPOINT``, ``STORAGE_EMULATOR_HOST`` and the state's
variables, which a test sets). A test that needs the real reader against a loopback server passes ``cluster=
ClusterReader``; one that needs the real capacity check against the loopback Compute API passes its own."""

from __future__ import annotations

import copy
import hashlib
import os
from typing import Any

from infra.k8s.live import ClusterReader, Connect, Objects
from program.world import CheckCapacity, InState, ResolveDigest, World, stack_hub
from workloads.observe.artifacts import storage_client
from workloads.reader import Hub

APPLIED: dict[str, dict[str, Any]] = {}
"""Objects the mock provider "applied" with a status (``statuses``), as a live read finds them."""


class AppliedCluster(ClusterReader):
    """A cluster that holds only ``APPLIED`` (in the status the test gave it), nothing else, and admits every dry
    run: no request leaves the process."""

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(APPLIED.get(name))

    def list(self, api_version: str, kind: str, namespace: str, label_selector: str) -> Objects:
        return []

    def pods(self, namespace: str, label_selector: str) -> Objects:
        return []

    def events(self, namespace: str, field_selector: str) -> Objects:
        return []

    def crd(self, name: str) -> dict[str, Any] | None:
        return None

    def dry_run_create(self, manifest: dict[str, Any]) -> None:
        return None


NO_HUB = Hub(None, "", "")
"""A Hub with no tokens, for a live reader whose test reads no step's output."""


def digest_of(image: str, *, key: str = "") -> str:
    """The digest this double gives a tag: the sha256 of the reference's text."""
    return "sha256:" + hashlib.sha256(image.encode()).hexdigest()


def no_findings(settings: Any, *, held_keys: str | None = None) -> list[Any]:
    return []


def fake_world(
    *,
    cluster: Connect = AppliedCluster,
    registry: ResolveDigest = digest_of,
    capacity: CheckCapacity = no_findings,
) -> World:
    """The world of a test's `pulumi up`, built inside the run (the Hub's tokens are the stack's config), its cluster
    empty until the run's registrations apply objects to it."""
    APPLIED.clear()
    return World(
        hub=stack_hub(os.environ),
        cluster=cluster,
        bucket=storage_client,
        registry=registry,
        capacity=capacity,
        state=InState.of(os.environ),
    )
