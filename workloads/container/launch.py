"""Starts train_rl with the overrides of the training step's ``/tpu-rl/train.json`` (a file of its ConfigMap of
scripts, written by ``core.step_config.config_text``): ``python3 -m maxtext.trainers.post_train.rl.train_rl
key=value ...`` in the file's order, ``exec``\\ d in this process's place (the training script's child, its PID,
signals and output are train_rl's). The file is a JSON object of strings whose keys are dotted names, each once
(``core.step_config.read_config`` is the policy pack's reading of it); any other file stops the step with exit 3,
which no retry changes. The policy pack knows this file by its sha256 (``core.step_config.LAUNCHER_SHA256``): a
change to it is a change of that pin (``tests/test_step_config.py``)."""

from __future__ import annotations

import json
import os
import re
import sys

TRAIN_RL = "maxtext.trainers.post_train.rl.train_rl"
CONFIG = "/tpu-rl/train.json"
KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:[.][A-Za-z_][A-Za-z0-9_]*)*")
REFUSED = 3


def _pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("a key is set twice")
    return dict(pairs)


def overrides(text: str) -> list[str]:
    """train_rl's ``key=value`` arguments from the file's text; ``ValueError`` on anything but a JSON object of
    strings whose keys are dotted names, each once."""
    config = json.loads(text, object_pairs_hook=_pairs)
    if not isinstance(config, dict):
        raise ValueError("not a JSON object")
    words = []
    for key, value in config.items():
        if not KEY.fullmatch(key) or not isinstance(value, str):
            raise ValueError(f"{key[:80]!r} is not a dotted name with a string value")
        words.append(f"{key}={value}")
    return words


def main() -> None:
    try:
        with open(CONFIG, encoding="utf-8") as file:
            words = overrides(file.read())
    except (OSError, ValueError) as err:
        print(f"tpu-rl: cannot start train_rl: {CONFIG}: {err}", file=sys.stderr)
        sys.exit(REFUSED)
    try:
        os.execvp("python3", ["python3", "-m", TRAIN_RL, *words])
    except OSError as err:  # no python3 on PATH, an argv over execve's limits: what bash said as "cannot execute"
        print(f"tpu-rl: cannot start train_rl: python3: {err.strerror or err}", file=sys.stderr)
        sys.exit(127 if isinstance(err, FileNotFoundError) else 126)


if __name__ == "__main__":
    main()
