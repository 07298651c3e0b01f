"""What the policy pack's tests of the train step's mounted files share (``tests/test_policy_env_mounts.py``,
``tests/test_policy_scripts_mounts_principals.py``): the stack's namespace, the launcher's text and a complete run."""

from __future__ import annotations

from pathlib import Path

from workloads.container import launch

NAMESPACE = "tpu-rl"
LAUNCHER_TEXT = Path(launch.__file__).read_text(encoding="utf-8")
"""The launcher as the train step's ConfigMap holds it: the policy knows it by its sha256."""
RUN = {
    "model_name": "gemma4-26b",
    "num_batches": "7",
    "batch_size": "4",
    "rl.num_generations": "2",
    "max_target_length": "1024",
}
"""A complete run's overrides, every run key set."""
