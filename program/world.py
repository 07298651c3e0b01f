"""What a run reads of the world beyond its configuration, reached through one object ``main`` receives (``World``):
the cluster, the bucket, the Hugging Face Hub, the image registries, the capacity APIs and what `make up` handed over
of the stack's state. ``__main__.py`` builds the real one (``live_world``); the offline plan gives none (it reads
nothing), or only the Hub for its ``--preflight``; the tests give doubles. Each component is handed the reader it
uses, never the whole world (``program.stack``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pulumi.runtime import config as runtime_config

from core.images import PINS_IN_STATE
from core.names import KEYS_IN_STATE
from core.version import STEPS_IN_STATE
from infra.k8s.kubeconfig import context_kubeconfig
from infra.k8s.live import ClusterReader, Connect
from infra.k8s.manifests import RELEASES_IN_STATE
from workloads.reader import Hub, OpenBucket

if TYPE_CHECKING:
    from google.cloud import storage

    from core.settings import Settings
    from infra.gcp.capacity import Finding


class ResolveDigest(Protocol):
    """An image's digest as its registry gives it now (``infra.gcp.registry.resolve_digest``); ``key`` is the
    configuration key that names the image, for the error's line."""

    def __call__(self, image: str, *, key: str) -> str: ...


class CheckCapacity(Protocol):
    """Every finding of the capacity check before anything is created (``infra.gcp.capacity.check_capacity``);
    ``held_keys``: the Cloud KMS keys the stack's state holds (``InState.keys``)."""

    def __call__(self, settings: Settings, *, held_keys: str | None = None) -> list[Finding]: ...


@dataclass(frozen=True)
class InState:
    """What `make up` read of the stack's state and handed over (each None: not handed over, as in a `pulumi up` run
    by hand or the offline plan), as the text of its variable: parsed where it is used."""

    steps: str | None = None
    """``core.version.STEPS_IN_STATE``: the version that wrote the state and its steps' names."""
    pins: str | None = None
    """``core.images.PINS_IN_STATE``: the digests the last `up` pinned each tag to."""
    releases: str | None = None
    """``infra.k8s.manifests.RELEASES_IN_STATE``: the Helm releases the state holds."""
    keys: str | None = None
    """``core.names.KEYS_IN_STATE``: the Cloud KMS keys the state holds."""

    @classmethod
    def of(cls, environ: Mapping[str, str]) -> InState:
        """What `make up` handed over in ``environ`` (the process's environment)."""
        return cls(
            environ.get(STEPS_IN_STATE),
            environ.get(PINS_IN_STATE),
            environ.get(RELEASES_IN_STATE),
            environ.get(KEYS_IN_STATE),
        )


@dataclass(frozen=True)
class World:
    """The readers of a run, each None where the run does not read that part of the world (the offline plan reads
    none of them)."""

    hub: Hub | None = None
    """The Hub's endpoint and the stack's tokens: the preflight, the export check, the publication's check."""
    cluster: Connect | None = None
    """A reader of the cluster from its kubeconfig: the platform's checks, the steps' state and the waits."""
    bucket: OpenBucket | None = None
    """A client of Cloud Storage: a completed step's output checked (with ``cluster``: read by the same reader)."""
    registry: ResolveDigest | None = None
    """Each image named by tag pinned to its digest before anything is registered."""
    capacity: CheckCapacity | None = None
    """The capacity check (``tpu-rl:workflow.capacityCheck``)."""
    kubeconfig: Callable[[str], str] | None = None
    """An existing cluster's kubeconfig, of its context (``infra.k8s.kubeconfig.context_kubeconfig``): the offline
    plan reads none."""
    state: InState = field(default_factory=InState)
    """What `make up` handed over of the stack's state."""


OFFLINE = World()
"""The offline plan's world: nothing is read."""


def stack_hub(environ: Mapping[str, str]) -> Hub:
    """The Hub as `pulumi up` reaches it: ``HF_ENDPOINT`` (None: huggingface.co) and the stack's own tokens
    (``tpu-rl:hfToken``, ``tpu-rl:hfWriteToken``; decrypted by the engine). Read inside the program's run, where the
    stack's configuration is."""
    tokens = [runtime_config.get_config(f"tpu-rl:{key}") or "" for key in ("hfToken", "hfWriteToken")]
    return Hub(environ.get("HF_ENDPOINT"), *tokens)


def environment_hub(environ: Mapping[str, str]) -> Hub:
    """The Hub as the offline plan's ``--preflight`` reaches it: it never decrypts the stack's tokens, so it checks
    those of ``HF_TOKEN`` and ``HF_WRITE_TOKEN`` (empty: not given)."""
    return Hub(environ.get("HF_ENDPOINT"), environ.get("HF_TOKEN", ""), environ.get("HF_WRITE_TOKEN", ""))


def _resolve_digest(image: str, *, key: str) -> str:
    from infra.gcp.registry import resolve_digest  # the registry's client only where a run pins an image

    return resolve_digest(image, key=key)


def _check_capacity(settings: Settings, *, held_keys: str | None = None) -> list[Finding]:
    from infra.gcp.capacity import check_capacity  # Google's API clients only where a run checks the capacity

    return check_capacity(settings, held_keys=held_keys)


def _storage_client() -> storage.Client:
    from workloads.observe.artifacts import storage_client

    return storage_client()


def live_world(environ: Mapping[str, str] | None = None) -> World:
    """The world of `pulumi up` and a preview (``environ``: the process's by default): every reader real."""
    environ = os.environ if environ is None else environ
    found = environ

    def kubeconfig(context: str) -> str:
        return context_kubeconfig(context, found, Path.home())

    return World(
        hub=stack_hub(environ),
        cluster=ClusterReader,
        bucket=_storage_client,
        registry=_resolve_digest,
        capacity=_check_capacity,
        kubeconfig=kubeconfig,
        state=InState.of(environ),
    )
