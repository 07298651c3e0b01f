"""Where the program keeps each configured secret and who reads it (plain data): the closed world's ``secrets``
(``core/data/closed-world.json``, written by ``tools/closed_world.py`` from the program's own plans), which the pack's
``secret-holders`` policy judges a stack by.

A secret is known by its value, not by the name of the Secret that holds it: the generator finds where each
configured secret's value lands in the plans (a Secret's ``stringData`` or ``data`` key), and the policy finds its
value, as written or encoded, wherever a stack puts it. A reader is a container of a step's pod, known by three
things the program sets together: the pod's step label, its Kubernetes service account (the one bound to the step's
Google account) and the container's name; a pod relabelled as another step's keeps its own account, and so is not
that step's reader.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from core.names import COMPONENT_LABEL


@dataclass(frozen=True, order=True)
class Reader:
    """A container that may read a Secret: its pod's step label, its Kubernetes service account (a template:
    ``{clusterName}-publish``) and its name."""

    component: str
    service_account: str
    container: str


@dataclass(frozen=True)
class SecretUse:
    """One Secret the program makes (its name a template): the configuration key each of its data keys holds, and the
    containers that read it."""

    keys: Mapping[str, str]
    """Data key -> the configuration key whose value it holds (``token`` -> ``tpu-rl:hfToken``)."""
    readers: frozenset[Reader]


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def reader_of(pod_metadata: Any, pod_spec: Any, container: Any) -> Reader:
    """A container as a reader: its pod's step label, its account and its name (``""`` where one is missing)."""
    label = _map(_map(pod_metadata).get("labels")).get(COMPONENT_LABEL)
    account = _map(pod_spec).get("serviceAccountName")
    name = _map(container).get("name")
    return Reader(*(v if isinstance(v, str) else "" for v in (label, account, name)))


def secret_reads(
    pod_spec: Any, as_map: Callable[[Any], Mapping[str, Any]] = _map, as_list: Callable[[Any], list[Any]] = _list
) -> Iterator[tuple[Mapping[str, Any], Any, str]]:
    """(container, Secret name, route) for every Secret a container of the pod spec reads: an env ``secretKeyRef``, an
    ``envFrom`` ``secretRef``, a mounted ``secret`` volume or a ``projected`` volume's ``secret`` source (a volume the
    container does not mount gives it nothing). Init and ephemeral containers too. A name is handed back as it is
    written (a value not known yet too: the caller judges it); ``as_map`` and ``as_list`` read a node as a mapping or
    a list (the pack's note a value not known yet)."""
    spec = as_map(pod_spec)
    volumes: dict[str, list[Any]] = {}
    for volume in as_list(spec.get("volumes")):
        volume = as_map(volume)
        names = [as_map(volume.get("secret")).get("secretName")]
        names += [
            as_map(as_map(s).get("secret")).get("name") for s in as_list(as_map(volume.get("projected")).get("sources"))
        ]
        volumes[str(volume.get("name"))] = [n for n in names if n is not None]
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for container in as_list(spec.get(field)):
            container = as_map(container)
            for entry in as_list(container.get("env")):
                secret = as_map(as_map(as_map(entry).get("valueFrom")).get("secretKeyRef")).get("name")
                if secret is not None:
                    yield container, secret, f"env {as_map(entry).get('name')}"
            for entry in as_list(container.get("envFrom")):
                secret = as_map(as_map(entry).get("secretRef")).get("name")
                if secret is not None:
                    yield container, secret, "envFrom"
            for mount in as_list(container.get("volumeMounts")):
                for secret in volumes.get(str(as_map(mount).get("name")), ()):
                    yield container, secret, f"volume {as_map(mount).get('name')}"


def secret_values(props: Mapping[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """(field, data key, value as text or None) of a Secret's ``stringData`` and ``data`` (base64, decoded; None
    when it is not base64 of UTF-8 text); a value that is not text is handed back as it is."""
    for field in ("stringData", "data"):
        for key, value in _map(props.get(field)).items():
            if field == "data" and isinstance(value, str):
                try:
                    value = base64.b64decode(value, validate=True).decode()
                except (binascii.Error, UnicodeDecodeError):
                    value = None
            yield field, str(key), value
