"""Load each step's MaxText argv with MaxText's own config loader (run by MaxText's Python, not the project's).

    <maxtext venv>/bin/python tools/maxtext_loader.py ARGV.json     # {"train": ["-m", "maxtext...", ...], ...}

It imports nothing of the project: the interpreter is the venv ``python -m tools.adopt_maxtext VERSION --loader
PYTHON3.12`` makes (``build/maxtext-<version>/venv``: the release's wheel and the JAX it needs, on CPU). For each
step it does what the module the argv runs does with its words before any TPU work: ``train_rl``
(``model_creation_utils.setup_configs_and_devices``) ``pyconfig.initialize_pydantic(argv, config_class=RLConfig)``;
and the sampler's config vLLM's MaxText model makes of ``vllm_additional_config`` (``sampler``); ``to_maxtext`` its
argparse flags taken out, then ``pyconfig.initialize``; ``to_huggingface`` its absl flags taken
out, then ``pyconfig.initialize_pydantic``. ``argv[0]`` is the module's own file, from which pyconfig picks the
config file (``_CONFIG_FILE_MAPPING``: ``post_train/rl.yml`` for train_rl, ``base.yml`` for the converters), and a
run-time reference (``${checkpoint}``) is given a path. Prints one JSON object: ``results``, step -> "ok" or the
loader's error, and ``derived``, step -> the paths it derived (``DERIVED``); exits 1 when a step failed.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("JAX_PLATFORMS", "cpu")
TRAINER = "maxtext.trainers.post_train.rl.train_rl"
DERIVED = ("checkpoint_dir", "tensorboard_dir")
"""What the loader derives that the program reads back (``core.layout``)."""
PLACEHOLDERS = {"${checkpoint}": "gs://tpu-rl-loader-check/checkpoint/0/items", "${commit}": "0" * 40}


def _words(argv: list[str]) -> tuple[str, list[str]]:
    """The module an argv runs (``-m MODULE``) and its ``key=value`` words, run-time references filled in."""
    if argv[:1] != ["-m"] or len(argv) < 2:
        raise ValueError(f"not a python -m argv: {argv[:2]}")
    words = []
    for word in argv[2:]:
        for ref, value in PLACEHOLDERS.items():
            word = word.replace(ref, value)
        words.append(word)
    return argv[1], words


def load(argv: list[str]) -> Any:
    """What MaxText's loader makes of ``argv`` (an exception when it refuses it)."""
    module, words = _words(argv)
    pyconfig = importlib.import_module("maxtext.configs.pyconfig")
    types = importlib.import_module("maxtext.configs.types")
    package = Path(importlib.import_module("maxtext").__file__ or "").parent
    path = str(package.joinpath(*module.split(".")[1:])) + ".py"
    keys = [w for w in words if not w.startswith("--")]  # the converters' own flags (argparse, absl)
    if module == TRAINER:
        config = pyconfig.initialize_pydantic([path, *keys], config_class=types.RLConfig)
        sampler(config)
        return config
    if module.endswith(".to_maxtext"):
        return pyconfig.initialize([path, *keys])
    return pyconfig.initialize_pydantic([path, *keys])


def sampler(config: Any) -> Any:
    """The sampler's MaxText config, as vLLM's MaxText model makes it from ``vllm_additional_config``'s
    ``maxtext_config`` (``integration/vllm/maxtext_vllm_adapter/adapter.py`` ``generate_maxtext_config``:
    ``configs/inference/vllm.yml`` and those keys as overrides; the padding it adds from vLLM's mesh left out)."""
    pyconfig = importlib.import_module("maxtext.configs.pyconfig")
    configs = importlib.import_module("maxtext.utils.globals").MAXTEXT_CONFIGS_DIR
    extra = config.vllm_additional_config
    overrides = dict(extra.get("maxtext_config") or {}) if isinstance(extra, dict) else {}
    return pyconfig.initialize(["", os.path.join(configs, "inference", "vllm.yml")], **overrides)


def main(path: str) -> int:
    steps: dict[str, list[str]] = json.loads(Path(path).read_text())
    results: dict[str, str] = {}
    derived: dict[str, dict[str, str]] = {}
    for name, argv in steps.items():
        try:
            config = load(argv)
            results[name] = "ok"
            derived[name] = {key: str(getattr(config, key, "")) for key in DERIVED}
        except (Exception, SystemExit) as err:  # noqa: BLE001 (the loader's refusal is the result)
            text = " ".join(line.strip() for line in str(err).splitlines() if line.strip())
            results[name] = f"{type(err).__name__}: {text[:500]}"
    print(json.dumps({"results": results, "derived": derived}))
    return 0 if all(result == "ok" for result in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
