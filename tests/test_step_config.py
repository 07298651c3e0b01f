"""Training's overrides as data: the train step's ConfigMap holds ``train.json`` (train_rl's
``key=value`` overrides, ``core.step_config``) and the launcher (``workloads/container/launch.py``) that passes them
to train_rl; the policy pack reads the same file, no script.

Pinned here: MaxText receives byte for byte the argv the training script passed before (real bash's reading of the
old command line against the real launcher's ``execvp``, for every example stack and the largest options), the
launcher and the policy pack accept the same files, the launcher's sha256 is the one the policy pack knows, and the
run the policy reads is the run the program estimates.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.config.load import INTERPRETED, REFUSED_KEYS
from core.config.values import ConfigError
from core.estimate import training_run as estimated_run
from core.knobs import TRAINING_KNOBS
from core.maxtext_keys import known_keys
from core.names import SETUP_FAILURE_EXIT
from core.step_config import (
    CONFIG_FILE,
    CONFIG_PATH,
    KEY,
    LAUNCHER,
    LAUNCHER_SHA256,
    TRAIN_RL,
    config_text,
    read_config,
)
from tests.lifecycle_walk import settings
from workloads.container import launch
from workloads.specs import commands
from workloads.specs.commands import SCRIPTS_DIR, command_line, train_argv, train_config
from workloads.specs.step_specs import plan_workflow
from workloads.specs.train_script import launch_env

pytestmark = pytest.mark.pure

LAUNCH_FILE = Path(launch.__file__)
STACKS = {
    "dev": ("dev", []),
    "prod": ("prod", []),
    "prod-adamw": ("prod", ["tpu-rl:training.optimizer=adamw"]),
    "prod-two-slices": (
        "prod",
        [
            "tpu-rl:tpu.slices=2",
            "tpu-rl:training.iciExpertParallelism=1",
            "tpu-rl:training.rolloutTensorParallelism=32",
        ],
    ),
    "prod-5000-batches": ("prod", ["tpu-rl:training.numBatches=5000", "tpu-rl:workflow.timeouts.train=168h"]),
}


def _train(stack: str):
    name, overrides = STACKS[stack]
    return plan_workflow(settings(name, overrides)).train


def test_the_launcher_is_the_file_the_policy_pack_knows():
    """``core.step_config.LAUNCHER_SHA256`` is the launcher's sha256: a change to launch.py changes this pin."""
    digest = hashlib.sha256(LAUNCH_FILE.read_bytes()).hexdigest()
    assert digest == LAUNCHER_SHA256, f"update core/step_config.py LAUNCHER_SHA256 to {digest}"
    shipped = _train("prod").scripts["data"][LAUNCHER]
    assert hashlib.sha256(shipped.encode()).hexdigest() == LAUNCHER_SHA256, "the ConfigMap ships the file as it is"


def test_the_launcher_and_the_pure_layer_name_the_same_things():
    assert (launch.TRAIN_RL, launch.CONFIG, launch.KEY.pattern) == (TRAIN_RL, CONFIG_PATH, KEY.pattern)
    assert f"{SCRIPTS_DIR}/{CONFIG_FILE}" == CONFIG_PATH and commands.TRAIN_RL == TRAIN_RL
    assert launch.REFUSED == SETUP_FAILURE_EXIT, "a file the launcher cannot read is not retried"


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_the_training_step_ships_its_overrides_and_the_launcher_runs_them(stack):
    train = _train(stack)
    data = train.scripts["data"]
    assert data[CONFIG_FILE] == train_config(_argv(stack, train))[CONFIG_FILE]
    launches = [line for line in data["run.sh"].splitlines() if f"{SCRIPTS_DIR}/{LAUNCHER}" in line]
    # train_rl in its environment (the Hub off, the staged dataset readable: make rehearse loads it so)
    assert launches == [f"{launch_env()} python3 {SCRIPTS_DIR}/{LAUNCHER} >> /tmp/tpu-rl-train.log 2>&1 &"]
    assert not any(m in data["run.sh"] for m in ("trainers.post_train.rl.train_rl", "post_train/rl/train_rl"))


def _argv(stack: str, train) -> list[str]:
    """The train step's ``train_argv`` as it was filled (its input and output paths)."""
    name, overrides = STACKS[stack]
    return train_argv(settings(name, overrides), str(train.input_uri), train.output_uri)


def _recorder(tmp_path: Path) -> Path:
    """A ``python3`` on PATH that writes its argv, NUL-separated, to ``tmp_path/argv``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    shim = bin_dir / "python3"
    shim.write_text(f"#!/bin/sh\nprintf '%s\\0' \"$@\" > {tmp_path / 'argv'}\n")
    shim.chmod(0o755)
    return bin_dir


def _before(argv: list[str], tmp_path: Path) -> list[bytes]:
    """What bash passed ``python3`` for the training script's old line (``command_line(argv)``), read by real bash."""
    bin_dir = _recorder(tmp_path)
    subprocess.run(["bash", "-c", command_line(argv)], env={"PATH": f"{bin_dir}:/usr/bin:/bin"}, check=True, timeout=30)
    return (tmp_path / "argv").read_bytes().split(b"\0")[:-1]


def _after(config: str, tmp_path: Path) -> list[bytes]:
    """What the launcher passes ``python3`` (its ``execvp``) for the overrides file ``config``, run for real with
    its /tpu-rl paths in ``tmp_path``."""
    bin_dir = _recorder(tmp_path)
    folder = tmp_path / "tpu-rl"
    folder.mkdir(parents=True)
    (folder / CONFIG_FILE).write_text(config, encoding="utf-8")
    program = folder / LAUNCHER
    program.write_text(LAUNCH_FILE.read_text().replace(f"{SCRIPTS_DIR}/", f"{folder}/"))
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    done = subprocess.run([sys.executable, str(program)], env=env, timeout=30, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return (tmp_path / "argv").read_bytes().split(b"\0")[:-1]


LONG_TEXT = ("A-z0_9.,:/=+@%*" * 18)[:256]
"""The longest extraArgs text: 256 of the characters ``core.config.load.SAFE_TEXT`` allows (``*`` among them)."""


def _with_every_text_key():
    """The prod stack with every text key extraArgs accepts at ``LONG_TEXT`` (less those a rule refuses there)."""
    typed = {knob.key for knob in TRAINING_KNOBS}
    extra = [k for k, kind in known_keys().items() if kind == "str" and k not in {*REFUSED_KEYS, *typed, *INTERPRETED}]
    for _ in range(5):
        try:
            return settings("prod", [f"tpu-rl:training.extraArgs.{key}={LONG_TEXT}" for key in extra])
        except ConfigError as err:
            extra = [k for k in extra if not any(f"extraArgs.{k}" in problem for problem in err.problems)]
    raise AssertionError("extraArgs never settled")


def _settings_of(case: str):
    if case == "every-text-key":
        return _with_every_text_key()
    name, overrides = STACKS[case]
    return settings(name, overrides)


@pytest.mark.slow
@pytest.mark.parametrize("case", [*sorted(STACKS), "every-text-key"])
def test_maxtext_receives_the_same_argv_byte_for_byte(case, tmp_path):
    """The old line ``python3 -m train_rl <quoted words>`` as bash read it, and the launcher's ``execvp`` of the
    step's train.json: the same words, byte for byte (every extraArgs text key at its longest value too)."""
    s = _settings_of(case)
    train = plan_workflow(s).train
    argv = train_argv(s, str(train.input_uri), train.output_uri)
    before = _before(argv, tmp_path / "before")
    after = _after(train.scripts["data"][CONFIG_FILE], tmp_path / "after")
    assert before == after == [word.encode() for word in argv]
    if case == "every-text-key":
        assert sum(LONG_TEXT in word for word in argv) > 10, "the extraArgs are in the argv"


def test_the_launcher_refuses_a_file_it_cannot_pass_in_one_line(tmp_path):
    bin_dir = _recorder(tmp_path)
    folder = tmp_path / "tpu-rl"
    folder.mkdir(parents=True)
    (folder / CONFIG_FILE).write_text('{"num_batches": 5000}')
    program = folder / LAUNCHER
    program.write_text(LAUNCH_FILE.read_text().replace(f"{SCRIPTS_DIR}/", f"{folder}/"))
    done = subprocess.run(
        [sys.executable, str(program)],
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
        timeout=30,
        capture_output=True,
        text=True,
    )
    assert done.returncode == SETUP_FAILURE_EXIT and not (tmp_path / "argv").exists()
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("tpu-rl: cannot start train_rl: "), done.stderr


def test_the_launcher_without_python3_on_path_says_so_in_one_line(tmp_path):
    """What bash said for a missing ``python3`` (exit 127), now the launcher's ``execvp``: one line, no traceback."""
    folder = tmp_path / "tpu-rl"
    folder.mkdir()
    (folder / CONFIG_FILE).write_text(config_text(["num_batches=1"]))
    program = folder / LAUNCHER
    program.write_text(LAUNCH_FILE.read_text().replace(f"{SCRIPTS_DIR}/", f"{folder}/"))
    env = {"PATH": str(tmp_path / "nothing")}
    done = subprocess.run([sys.executable, str(program)], env=env, timeout=30, capture_output=True, text=True)
    assert done.returncode == 127
    assert done.stderr == "tpu-rl: cannot start train_rl: python3: No such file or directory\n", done.stderr


FILES = [
    ('{"a": "1", "rl.num_generations": "4"}', ["a=1", "rl.num_generations=4"]),
    ('{"b": "2", "a": "1"}', ["b=2", "a=1"]),  # the file's order
    ('{"v": "{\'x\': true} = y"}', ["v={'x': true} = y"]),
    ('{"e": ""}', ["e="]),
    ('{"u": "caf\\u00e9"}', ["u=café"]),
    ("{}", []),
    ('{"a": "1", "a": "2"}', None),
    ('{"a": 1}', None),
    ('{"a": null}', None),
    ('{"a": ["1"]}', None),
    ('{"-a": "1"}', None),
    ('{"a=b": "1"}', None),
    ('{"a b": "1"}', None),
    ('{"a.": "1"}', None),
    ('{"1a": "1"}', None),
    ('["a=1"]', None),
    ('"a=1"', None),
    ("a: '1'", None),
    ('{"a": "1"', None),
    ('{"a": "1"} {}', None),
    ('{"a": NaN}', None),
]


@pytest.mark.parametrize(("text", "words"), FILES, ids=[str(i) for i in range(len(FILES))])
def test_the_launcher_and_the_policy_pack_accept_the_same_files(text, words):
    read = read_config(text)
    if words is None:
        assert isinstance(read, str), read
        with pytest.raises(ValueError):
            launch.overrides(text)
    else:
        assert launch.overrides(text) == words
        assert read == dict(word.split("=", 1) for word in words)


def test_a_file_over_the_policy_packs_bound_is_not_read():
    text = json.dumps({"a": "x" * (128 * 1024)})
    assert read_config(text) == "it is longer than 131072 bytes"
    at_bound = '{"a": "' + "x" * (128 * 1024 - 9) + '"}'
    assert len(at_bound.encode()) == 128 * 1024 and read_config(at_bound) == {"a": "x" * (128 * 1024 - 9)}
    assert read_config(at_bound[:-1] + " }") == "it is longer than 131072 bytes"


def test_the_policy_packs_reasons_in_its_words():
    assert read_config('["a=1"]') == "it is not a JSON object of strings"
    assert read_config('{"a": 1}') == "the value of a is not a string"
    assert read_config('{"a": "1", "a": "2"}') == "it is not a JSON object of strings (the key a is set twice)"
    long = "-" + "k" * 100
    assert read_config(json.dumps({long: "1"})) == f"the key {long[:80]!r} is not a dotted name"


def test_the_writers_refusal_names_the_word_cut_at_80_characters():
    word = "-" * 100
    with pytest.raises(ValueError) as raised:
        config_text([word])
    assert str(raised.value) == f"train_rl's argument {word[:80]!r} is no key=value override"


def test_the_writer_keeps_a_values_characters_as_they_are_not_escaped():
    assert config_text(["a=é", "b=1"]) == '{\n  "a": "é",\n  "b": "1"\n}\n'


@pytest.mark.parametrize(
    "words",
    [["num_batches"], ["--flag=1"], ["a b=1"], ["a=1", "a=2"], ["config.yml"]],
    ids=["no-value", "a-flag", "a-space", "a-key-twice", "a-config-file"],
)
def test_the_writer_refuses_an_argv_the_launcher_could_not_pass_back(words):
    with pytest.raises(ValueError):
        config_text(words)


def test_the_writer_keeps_every_character_of_a_value():
    words = ['vllm_hf_overrides={"architectures": ["MaxTextForCausalLM"]}', "t=a'b\"c\\d$e`f\nnew line", "u=é"]
    text = config_text(words)
    assert launch.overrides(text) == words and list(read_config(text)) == ["vllm_hf_overrides", "t", "u"]
    with pytest.raises(ValueError, match="not train_rl's argv"):
        train_config(["-m", "maxtext.checkpoint_conversion.to_maxtext", "a=1"])


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_the_policy_pack_reads_the_run_the_program_estimates(stack):
    """The pack's reading of the step's train.json is the run the program's own estimate prices."""
    import importlib

    scripts = importlib.import_module("policy.tpu_rl_policies.scripts")
    name, overrides = STACKS[stack]
    s = settings(name, overrides)
    config = read_config(plan_workflow(s).train.scripts["data"][CONFIG_FILE])
    assert isinstance(config, dict)
    assert scripts.training_run(config, {}) == estimated_run(s)


def test_no_program_of_the_image_runs_the_launcher_but_training():
    """Only the train step ships the launcher and the overrides (the CPU steps run no train_rl)."""
    for step in plan_workflow(settings("prod", ["tpu-rl:workflow.steps.evaluate=true"])):
        files = set(step.scripts["data"])
        assert ({LAUNCHER, CONFIG_FILE} <= files) == (step.step == "train"), step.step
    assert os.path.basename(launch.CONFIG) == CONFIG_FILE
