"""What the training step passes to MaxText, as data: train_rl's command-line overrides as a JSON object of strings
(``CONFIG_FILE``, a file of the step's ConfigMap of scripts, at ``CONFIG_PATH`` in its container), which the
launcher (``workloads/container/launch.py``, the file ``LAUNCHER`` of the same ConfigMap) turns into train_rl's
argv, ``key=value`` in the object's order, and ``exec``\\ s in its place. The policy pack reads the same object
(``read_config``) rather than a script, and knows the launcher by its text (``LAUNCHER_SHA256``).

Why not a config file MaxText reads itself: MaxText's ``pyconfig._initialize_pydantic`` (0.2.4, 0.2.5) merges a config
file's keys *under* the model's config (``OmegaConf.merge(base_yml_config, model_cfg_oc, overrides_cfg)``) and
lets an ``M_<KEY>`` environment variable override any key not on the command line (its step 6 refuses both only
for ``cli_keys``): the same keys in a file would mean other values than on the command line. The launcher keeps
MaxText's arguments byte for byte what the training script passed before (``tests/test_step_config.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

TRAIN_RL = "maxtext.trainers.post_train.rl.train_rl"
TRAINER_MENTIONS = ("trainers.post_train.rl.train_rl", "post_train/rl/train_rl")
"""Text that names the trainer: anywhere in a TPU container's command, environment or mounted files other than the
launcher, a run the policy pack cannot read."""
LAUNCHER = "launch.py"
"""The launcher's file name in a step's ConfigMap of scripts (``workloads/container/launch.py``)."""
LAUNCHER_SHA256 = "a5952b8507ce47cdb3095ffdc859cab045e1bb71645daf65a61031a1d998cae3"
"""The sha256 of the launcher's text (``tests/test_step_config.py`` computes it from the file): a mounted file with
it is the launcher, and no other file may name the trainer."""
CONFIG_FILE = "train.json"
"""The overrides' file name in the training step's ConfigMap of scripts."""
CONFIG_PATH = "/tpu-rl/" + CONFIG_FILE
"""Where the launcher reads them, whatever its own path: the step's ConfigMap of scripts, mounted read-only at
``/tpu-rl`` (``workloads.specs.commands.SCRIPTS_DIR``)."""
MAX_CONFIG_BYTES = 128 * 1024
"""The longest overrides file the policy pack reads: the argv it makes must fit ``execve``'s limits anyway."""
KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[.][A-Za-z_][A-Za-z0-9_]*)*")
"""A key the launcher passes: a dotted name, so ``key=value`` is one OmegaConf override of that key (no ``-``
flag for absl, no ``=`` or space that would move the value)."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        raise ValueError(f"the key {twice[0]} is set twice")
    return dict(pairs)


def read_config(text: str) -> dict[str, str] | str:
    """The overrides of a ``CONFIG_FILE``'s text, in order, or why they cannot be read: a JSON object whose keys are
    ``KEY`` names, each once, and whose values are strings (what ``workloads/container/launch.py`` accepts, and
    nothing else)."""
    if len(text.encode("utf-8", "replace")) > MAX_CONFIG_BYTES:
        return f"it is longer than {MAX_CONFIG_BYTES} bytes"
    try:
        config = json.loads(text, object_pairs_hook=_pairs)
    except ValueError as err:  # json.JSONDecodeError is a ValueError, and so is a key set twice
        return f"it is not a JSON object of strings ({err})"
    if not isinstance(config, dict):
        return "it is not a JSON object of strings"
    for key, value in config.items():
        if not KEY.fullmatch(key):
            return f"the key {key[:80]!r} is not a dotted name"
        if not isinstance(value, str):
            return f"the value of {key} is not a string"
    return config


def config_text(overrides: Iterable[str]) -> str:
    """The ``CONFIG_FILE`` of train_rl's ``key=value`` overrides (its argv after ``-m TRAIN_RL``): a JSON object in
    their order, one key a line. Raises ``ValueError`` on a word the launcher could not pass back as it is (not
    ``KEY=...``, or a key set twice): a bug of the argv's builder."""
    pairs = []
    for word in overrides:
        key, sep, value = word.partition("=")
        if not sep or not KEY.fullmatch(key):
            raise ValueError(f"train_rl's argument {word[:80]!r} is no key=value override")
        pairs.append((key, value))
    body = _pairs(pairs)
    lines = [f"  {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}" for key, value in body.items()]
    return "{\n" + ",\n".join(lines) + "\n}\n"
