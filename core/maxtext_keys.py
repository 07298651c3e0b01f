"""MaxText's configuration keys and their types (``MAXTEXT_VERSION``): a fact table of the pinned image.

``train_rl`` loads ``configs/base.yml`` and ``configs/post_train/rl.yml``; pyconfig rejects an
unknown top-level key, but a typo inside a nested block (``rl.num_generation=8``) is merged
silently and the run trains with the default. The table lists every top-level key and every
key of a nested block (``rl.num_generations``) with the type of its default, so ``extraArgs``
can be checked before a TPU starts.

The table is made from the release's wheel, with the files the tests read, by one command (docs/operations.md
"Adopting a MaxText release")::

    make maxtext VERSION=0.2.5        # python -m tools.adopt_maxtext 0.2.5

or from any folder of MaxText configs (``src/maxtext/configs`` of a checkout)::

    python -m core.maxtext_keys path/to/maxtext/configs > core/data/maxtext-0.2.5-keys.json
"""

from __future__ import annotations

import difflib
import functools
import json
import sys
from pathlib import Path
from typing import Any

import yaml

MAXTEXT_VERSION = "0.2.5"
"""The MaxText of the image ``tpu_post_training:0.2.5`` (``core.config.schema`` ``DEFAULT_IMAGES``)."""
TABLE = Path(__file__).parent / "data" / f"maxtext-{MAXTEXT_VERSION}-keys.json"
CONFIG_FILES = ("base.yml", "post_train/rl.yml")
TYPES = ("bool", "int", "float", "str", "null", "list", "dict")


def type_name(value: Any) -> str:
    """The table's name for the type of a YAML default."""
    if value is None:
        return "null"
    for kind, name in ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"), (list, "list"), (dict, "dict")):
        if isinstance(value, kind):
            return name
    return "str"


def generate(configs_dir: Path) -> dict[str, str]:
    """Key -> type for every key of ``base.yml`` and ``post_train/rl.yml`` (rl.yml wins)."""
    table: dict[str, str] = {}
    for name in CONFIG_FILES:
        document = yaml.safe_load((configs_dir / name).read_text()) or {}
        for key, value in document.items():
            table[key] = type_name(value)
            if isinstance(value, dict):
                for sub, sub_value in value.items():
                    table[f"{key}.{sub}"] = type_name(sub_value)
    return dict(sorted(table.items()))


@functools.cache
def known_keys() -> dict[str, str]:
    """The committed table: MaxText key -> type name."""
    return json.loads(TABLE.read_text())


def closest_key(key: str) -> str | None:
    """The known key a typo most likely meant, if any is close."""
    table = known_keys()
    prefix = key.split(".", 1)[0] + "." if "." in key else ""
    pool = [k for k in table if k.startswith(prefix)] if prefix else list(table)
    matches = difflib.get_close_matches(key, pool, n=1, cutoff=0.75)
    return matches[0] if matches else None


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(
            f"usage: python -m core.maxtext_keys MAXTEXT_CONFIGS_DIR > core/data/maxtext-{MAXTEXT_VERSION}-keys.json"
        )
    print(json.dumps(generate(Path(sys.argv[1])), indent=1))
