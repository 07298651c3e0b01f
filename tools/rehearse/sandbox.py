"""A step's container as the plan renders it, laid out on this machine (plain functions of the rendered objects).

Each step is the JobSet the plan holds for it (its ``app.kubernetes.io/component`` label names the step) and, in
it, the container that runs the step's script (``/bin/bash /tpu-rl/run.sh``), with the ConfigMap mounted where the
container mounts it. Nothing of the script, its programs or its argv is written here: they are the ConfigMap's
files. What changes is where the container's paths are: each is the same path under the step's sandbox folder
(``mapped``), the ConfigMap's mount, the scratch volume, ``/tmp``, the image's ``/deps/src`` (where it keeps
MaxText) and the kubelet's ``/var/run/secrets``, so ``/tpu-rl/run.sh`` is ``<sandbox>/tpu-rl/run.sh``; and the
environment is the container's, with the values the cluster would fill in (a Secret's, a field's) given the
rehearsal's stand-ins, and the rehearsal's settings on top (``Sandbox.environment``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import TpuRlError
from core.step_config import LAUNCHER
from core.steps import STEPS, StepName

COMPONENT = "app.kubernetes.io/component"
IMAGE_PATHS = ("/tmp", "/deps/src", "/var/run/secrets")
"""Paths of the image and the kubelet, besides the container's mounts, that the steps' programs use."""
FIELD_VALUES = {"status.podIP": "127.0.0.1", "status.hostIP": "127.0.0.1"}
"""What a field reference gives in the rehearsal (others: ``rehearse``)."""


class RenderedStepError(TpuRlError):
    """The plan's objects are not what a step is (one line: a tpu-rl bug, exit 70 would hide it; exit 1)."""


@dataclass(frozen=True)
class StepPod:
    """One step's container, as rendered."""

    step: StepName
    name: str
    script: str
    files: Mapping[str, str]
    env: tuple[tuple[str, dict[str, Any]], ...]
    """Name -> its entry (``value`` or ``valueFrom``), in order."""
    mounts: tuple[str, ...]
    """The container's mount paths."""
    config_mount: str
    """Where the ConfigMap of scripts is mounted (``/tpu-rl``)."""
    other_config: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)
    """The container's other ConfigMaps: mount path -> their files (the publication's model card)."""


def _script_container(spec: Mapping[str, Any]) -> dict[str, Any] | None:
    for container in spec.get("containers") or []:
        command = [*(container.get("command") or []), *(container.get("args") or [])]
        if command[-1:] and str(command[-1]).endswith("/run.sh"):
            return container
    return None


def _under(path: str, folder: str) -> bool:
    return path.startswith(folder.rstrip("/") + "/")


def step_pods(objects: Iterable[Mapping[str, Any]]) -> list[StepPod]:
    """Every step of the plan, in the workflow's order (the catalogue's)."""
    listed = list(objects)
    config_maps = {(o["metadata"]["name"]): o.get("data") or {} for o in listed if o.get("kind") == "ConfigMap"}
    found = []
    for obj in listed:
        if obj.get("kind") != "JobSet":
            continue
        label = (obj["metadata"].get("labels") or {}).get(COMPONENT, "")
        step = next((name for name in STEPS if name == label), None)
        if step is None:
            raise RenderedStepError(f"JobSet {obj['metadata']['name']} names no step of the catalogue ({label!r})")
        for replicated in obj["spec"]["replicatedJobs"]:
            spec = replicated["template"]["spec"]["template"]["spec"]
            container = _script_container(spec)
            if container is None:
                continue
            volumes = {v["name"]: v for v in spec.get("volumes") or []}
            mounts = {m["mountPath"]: volumes.get(m["name"], {}) for m in container.get("volumeMounts") or []}
            script_path = str([*(container.get("command") or []), *(container.get("args") or [])][-1])
            config = next(
                ((p, v["configMap"]["name"]) for p, v in mounts.items() if "configMap" in v and _under(script_path, p)),
                None,
            )
            if config is None or config[1] not in config_maps:
                raise RenderedStepError(
                    f"step {step} ({obj['metadata']['name']}): its script's ConfigMap is not in the plan"
                )
            files = config_maps[config[1]]
            script = files.get(script_path.removeprefix(config[0].rstrip("/") + "/"), "")
            env = tuple((e["name"], e) for e in container.get("env") or [])
            others = {
                path: config_maps.get(v["configMap"]["name"], {})
                for path, v in mounts.items()
                if "configMap" in v and path != config[0]
            }
            found.append(StepPod(step, obj["metadata"]["name"], script, files, env, tuple(mounts), config[0], others))
    order = list(STEPS)
    return sorted(found, key=lambda pod: order.index(pod.step))


def mapped(text: str, root: Path, paths: Iterable[str]) -> str:
    """``text`` with each container path that starts one of ``paths`` (at a word's start, not inside a URL or
    another path) moved under ``root``."""
    heads = sorted({p.rstrip("/") for p in paths}, key=len, reverse=True)
    pattern = re.compile(r"(?<![\w./:@-])(" + "|".join(map(re.escape, heads)) + r")(?=/|[^\w.-]|$)")
    return pattern.sub(lambda match: str(root) + match.group(1), text)  # one pass: nothing is mapped twice


def container_paths(pod: StepPod) -> tuple[str, ...]:
    return (*pod.mounts, *IMAGE_PATHS)


def launcher_cut(script: str) -> str:
    """A script that starts train_rl through the launcher in the background (training's), up to and including that
    line: then it waits for it and exits with its status. What follows in the real script (the watchdog, the side
    file, the judge) watches a train_rl that runs on the slice. Any other script as it is."""
    lines = script.splitlines()
    at = next((n for n, line in enumerate(lines) if f"/{LAUNCHER}" in line and line.rstrip().endswith("&")), None)
    if at is None:
        return script
    return "\n".join([*lines[: at + 1], "wait $!; status=$?", f"cat {_log_of(lines[at])}", 'exit "$status"']) + "\n"


def _log_of(line: str) -> str:
    match = re.search(r">>\s*(\S+)", line)
    return match.group(1) if match else "/dev/null"


def environment(pod: StepPod, stand_ins: Mapping[str, str], settings: Mapping[str, str]) -> dict[str, str]:
    """The container's environment: its values; a Secret's value the stand-in for that Secret (``stand_ins``: Secret
    name -> value); a field's ``FIELD_VALUES``; then the rehearsal's ``settings`` over them."""
    env: dict[str, str] = {}
    for name, entry in pod.env:
        if "value" in entry:
            env[name] = str(entry["value"])
            continue
        source = entry.get("valueFrom") or {}
        if "secretKeyRef" in source:
            env[name] = stand_ins.get(source["secretKeyRef"].get("name", ""), "")
        elif "fieldRef" in source:
            env[name] = FIELD_VALUES.get(source["fieldRef"].get("fieldPath", ""), "rehearse")
    return {**env, **settings}
