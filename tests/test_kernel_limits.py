"""No container argument near a kernel limit, for every catalogued model at its largest options.

Linux refuses an ``execve`` whose single argument or environment string is longer than ``MAX_ARG_STRLEN`` (32 pages,
131,072 bytes) or whose argv and environment together pass a quarter of the stack limit (``execve(2)``, "Limits on
size of arguments and environment"); the container runtime's ``execve`` of the container's command then fails and
the pod never starts. The export's script alone would be a 72 KB ``bash -c`` argument, so every step's script and
programs are files of its ConfigMap (``workloads.specs.commands.step_files``) and each container's argv and
environment stay under 32 KiB, a quarter of ``MAX_ARG_STRLEN``; the ConfigMap itself stays under Kubernetes' 1 MiB.
"""

from __future__ import annotations

import functools
import json
import re

import pytest

from core.config.load import INTERPRETED, REFUSED_KEYS
from core.config.values import ConfigError
from core.knobs import TRAINING_KNOBS
from core.maxtext_keys import known_keys
from core.models import MODELS
from tests.lifecycle_walk import settings
from workloads.specs.step_manifests import CONFIG_MAP_MAX_BYTES
from workloads.specs.step_specs import config_map_bytes, plan_workflow

pytestmark = pytest.mark.pure

ARGV_ENV_MAX_BYTES = 32 * 1024
"""The bound a container's argv and environment keep: a quarter of one argument's limit (``MAX_ARG_STRLEN``)."""
SCRIPTS_MAX_BYTES = CONFIG_MAP_MAX_BYTES // 2
"""The bound a step's ConfigMap of scripts keeps at the largest options: half of what Kubernetes accepts."""
LONG_TEXT = ("A-z0_9.,:/=+@%*" * 18)[:256]
"""The longest value an extraArgs string may have (``core.config.load.SAFE_TEXT``: 256 of its characters)."""
LONGEST_REPO = "a" * 96 + "/" + "b" * 96
"""The longest Hub repository the configuration accepts (``core.config.formats.HUB_REPO``)."""
MAX_OPTIONS = (
    "tpu-rl:workflow.steps.evaluate=true",
    f"tpu-rl:publish.repo={LONGEST_REPO}",
    "tpu-rl:tpu.slices=2",
    "tpu-rl:training.iciExpertParallelism=1",
    "tpu-rl:training.rolloutTensorParallelism=32",
    "tpu-rl:model.revision=" + "r" * 100,
    "tpu-rl:workflow.stallTimeout=168h",
)


def _extra_args() -> dict[str, str]:
    """Every MaxText key extraArgs accepts as text, each with the longest value it may have."""
    typed = {knob.key for knob in TRAINING_KNOBS}
    return {
        key: LONG_TEXT
        for key, kind in known_keys().items()
        if kind == "str" and key not in REFUSED_KEYS and key not in typed and key not in INTERPRETED
    }


@functools.cache
def largest(model: str):
    """The prod stack with ``model`` at its largest options: every step on, the longest values the schema allows,
    and every text key of extraArgs at 256 characters (less the few a rule refuses at that value, dropped)."""
    extra = _extra_args()
    for _ in range(5):
        overrides = [f"tpu-rl:model.name={model}", *MAX_OPTIONS]
        overrides += [f"tpu-rl:training.extraArgs.{key}={value}" for key, value in extra.items()]
        try:
            return settings("prod", overrides), len(extra)
        except ConfigError as err:
            refused = {m.group(1) for p in err.problems if (m := re.search(r"training\.extraArgs\.([a-z0-9_.]+)", p))}
            assert refused, err.problems  # a problem of MAX_OPTIONS itself: fix the option, not the test
            extra = {k: v for k, v in extra.items() if k not in refused}
    raise AssertionError("extraArgs never settled")


def _containers(manifest: dict) -> list[dict]:
    found = []
    for job in manifest["spec"]["replicatedJobs"]:
        pod = job["template"]["spec"]["template"]["spec"]
        found += pod.get("initContainers", []) + pod["containers"]
    return found


def argv_env_bytes(container: dict) -> int:
    """What ``execve`` copies for the container: each argv word and ``NAME=value`` string with its NUL (a value
    from a Secret, a field or a ConfigMap at its longest: the token's 512 characters, a pod IP, a label)."""
    words = [*container.get("command", []), *container.get("args", [])]
    env = [f"{e['name']}={e.get('value', 'x' * 512)}" for e in container.get("env", [])]
    return sum(len(word.encode()) + 1 for word in words + env)


@pytest.mark.source
@pytest.mark.parametrize("model", sorted(MODELS))
def test_every_containers_argv_and_env_stay_far_below_the_kernels_limits_at_the_largest_options(model):
    s, extra_keys = largest(model)
    assert extra_keys > 100, "the largest options set most of MaxText's text keys"
    plan = plan_workflow(s)
    assert [step.step for step in plan] == ["convert", "train", "export", "evaluate", "publish"]
    for step in plan:
        for container in _containers(step.manifest):
            size = argv_env_bytes(container)
            assert size < ARGV_ENV_MAX_BYTES, f"{step.name} {container['name']}: {size} bytes of argv and env"
            assert "-c" not in container.get("command", []), "no script is an argument"
        scripts = config_map_bytes(step.scripts)
        assert scripts < SCRIPTS_MAX_BYTES, f"{step.name}: {scripts} bytes of scripts"
        assert len(json.dumps(step.scripts)) < SCRIPTS_MAX_BYTES


def test_the_largest_options_lengthen_the_training_script_not_its_argv():
    """The extraArgs are in training's script (its ConfigMap), not in any argv: the bound above is no accident of
    small options."""
    s, _ = largest("gemma4-26b")
    small = plan_workflow(settings("prod", [])).train
    large = plan_workflow(s).train
    assert config_map_bytes(large.scripts) > config_map_bytes(small.scripts) + 40_000
    assert LONG_TEXT in large.script
    sizes = [argv_env_bytes(c) for c in _containers(large.manifest)]
    assert sizes == [argv_env_bytes(c) for c in _containers(small.manifest)] or max(sizes) < ARGV_ENV_MAX_BYTES
    assert not any(LONG_TEXT in json.dumps(c) for c in _containers(large.manifest))


def test_a_script_over_a_config_maps_limit_is_refused_as_bad_input(monkeypatch):
    """The one input that lengthens a script without bound is refused before anything is planned: exit 2 with the
    key, not an API server's refusal mid-`up`."""
    from workloads.specs import step_manifests as manifests
    from workloads.specs import step_specs as steps

    monkeypatch.setattr(steps, "CONFIG_MAP_MAX_BYTES", 40_000)
    assert manifests.CONFIG_MAP_MAX_BYTES == 1024 * 1024
    with pytest.raises(ConfigError) as found:
        plan_workflow(settings("prod", ["tpu-rl:workflow.steps.evaluate=true"]))
    (problem,) = found.value.problems
    assert problem.startswith("tpu-rl:training.extraArgs") and "over a ConfigMap's 40000" in problem


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_each_steps_config_map_of_scripts_is_a_valid_immutable_object_its_pod_mounts_read_only(stack):
    """Against Kubernetes' own schema (strict); named by the step, immutable, in the step's namespace, and the one
    volume its container runs its script from."""
    from tests.k8s_validation import validate_core

    plan = plan_workflow(settings(stack, ["tpu-rl:workflow.steps.evaluate=true", "tpu-rl:publish.repo=me/model"]))
    for step in plan:
        scripts = step.scripts
        validate_core(scripts)
        assert scripts["metadata"]["name"] == f"{step.name}-scripts" and scripts["immutable"] is True
        assert scripts["metadata"]["namespace"] == step.manifest["metadata"]["namespace"]
        pod = step.manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        (volume,) = [v for v in pod["volumes"] if "configMap" in v and v["name"] == "scripts"]
        assert volume["configMap"] == {"name": scripts["metadata"]["name"], "defaultMode": 0o444}


def test_a_changed_program_is_a_new_step_and_a_new_config_map(monkeypatch):
    """The identity hashes the ConfigMap's data: a program changed under the same manifest re-runs the steps that run
    it, under new names, and only those."""
    from workloads.specs import commands

    before = {step.step: step.name for step in plan_workflow(settings("prod", []))}
    changed = commands.program_file("complete_export.py") + "\nCHANGED = True\n"  # code: a comment would not do
    monkeypatch.setitem(commands.SNIPPETS, "complete_export.py", changed)
    after = {step.step: step.name for step in plan_workflow(settings("prod", []))}
    assert after["convert"] == before["convert"] and after["train"] == before["train"]
    assert after["export"] != before["export"], "the export runs complete_export.py"
    scan = commands.program_file("checkpoint_scan.py") + "\nCHANGED = True\n"
    monkeypatch.setitem(commands.SNIPPETS, "checkpoint_scan.py", scan)
    scanned = {step.step: step.name for step in plan_workflow(settings("prod", []))}
    assert scanned["convert"] == before["convert"], "the conversion runs no checkpoint scan"
    assert scanned["train"] != before["train"], "training scans its checkpoints to tell a resumed attempt"
