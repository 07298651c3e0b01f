"""What a TPU container passes to MaxText, read as data, not as a script: the runs it starts through tpu-rl's
launcher (``core.step_config``: a mounted file whose sha256 is ``LAUNCHER_SHA256``, which starts train_rl with the
overrides of the ConfigMap's ``train.json``), and the run each makes (``training_run``). No shell is parsed: any
other mention of the trainer in the container's command, environment or mounted files is a run this policy cannot
read (``trainer_runs``)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.estimate import TrainingRun
from core.models import model_for_maxtext
from core.step_config import CONFIG_PATH, LAUNCHER, LAUNCHER_SHA256, TRAINER_MENTIONS, read_config

from .env import ContainerEnv, EnvValue, MountedFile, Mounts
from .properties import unseen

LAUNCHED_BY = f"tpu-rl's launcher ({LAUNCHER}, known by its sha256: core/step_config.py)"


@dataclass
class ContainerRuns:
    """The training runs one container starts (each the run, or why it cannot be read), the files it runs and the
    other files it mounts that this policy cannot read, and where it names the trainer other than through the
    launcher."""

    runs: list[TrainingRun | str] = field(default_factory=list)
    unread_files: list[MountedFile] = field(default_factory=list)
    unread_mounts: list[MountedFile] = field(default_factory=list)
    mentions: list[str] = field(default_factory=list)


def _is_launcher(text: str) -> bool:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest() == LAUNCHER_SHA256


def trainer_runs(words: Sequence[str], env: ContainerEnv, mounts: Mounts) -> ContainerRuns:
    """The runs of a container whose argv is ``words``: one per mention of a launcher's path in its command and
    mounted files (at least one per mounted launcher), each of the overrides at ``CONFIG_PATH``; the files its
    command runs, and the other mounted files, that this policy cannot read (one not known yet is noted: judged at
    `pulumi up`); and each place that names the trainer (``TRAINER_MENTIONS``) other than the launcher: its command,
    an environment variable, a mounted file."""
    out = ContainerRuns()
    for mounted in mounts.run_files(words):
        if not isinstance(mounted.text, str) and not unseen(mounted.text):
            out.unread_files.append(mounted)
    texts: list[tuple[str, str]] = [("its command", " ".join(words))]
    texts += [(f"its environment variable {name}", v.value) for name, v in env.values.items() if _text(v.value)]
    launchers: list[str] = []
    unread = {f.source for f in out.unread_files}
    for mounted in mounts.files():
        if not _text(mounted.text):
            if not unseen(mounted.text) and mounted.source not in unread:
                out.unread_mounts.append(mounted)
            continue
        if _is_launcher(mounted.text):
            launchers.append(mounted.path)
        else:
            texts.append((f"{mounted.path} ({mounted.source})", mounted.text))
    for where, text in texts:
        if any(mention in text for mention in TRAINER_MENTIONS):
            out.mentions.append(where)
    for path in launchers:
        started = max(1, sum(text.count(path) for _, text in texts))
        out.runs += [_launched_run(path, mounts, env.values)] * started
    return out


def _text(value: Any) -> bool:
    """Whether a value is text this policy reads (one not known yet is noted as read)."""
    return not unseen(value) and isinstance(value, str)


def _launched_run(launcher: str, mounts: Mounts, env: Mapping[str, EnvValue]) -> TrainingRun | str:
    """The run of the launcher at ``launcher``, with the overrides at ``CONFIG_PATH``, or why it cannot be read
    (either under more than one volume: which file the container sees is the runtime's mount order)."""
    for path in (launcher, CONFIG_PATH):
        if mounts.covering(path) > 1:
            return f"cannot read {path}: more than one volume is mounted over it"
    config = mounts.file(CONFIG_PATH)
    if config is None or not _text(config.text):
        where = "no file" if config is None else config.source
        return f"cannot read {CONFIG_PATH} ({where}), which {LAUNCHED_BY} reads"
    overrides = read_config(config.text)
    if isinstance(overrides, str):
        return f"cannot read {CONFIG_PATH}: {overrides}"
    return training_run(overrides, env)


_POSITIVE = re.compile(r"[1-9][0-9]*")
"""A count as this policy reads one: digits without a sign, a leading zero (YAML 1.1's octal), ``_`` or an
exponent; OmegaConf would read more, which is a finding here, never a guess."""
RUN_KEYS = ("model_name", "num_batches", "batch_size", "rl.num_generations", "max_target_length")


def training_run(overrides: Mapping[str, str], env: Mapping[str, EnvValue]) -> TrainingRun | str:
    """The run train_rl makes with these command-line overrides, or why it cannot be read. A top-level key missing
    from them is read from its ``M_<KEY>`` environment variable, as MaxText's ``pyconfig`` does (0.2.4's and 0.2.5's;
    both set: pyconfig refuses to start). A key that overrides a run key's parent or child (``rl=...`` beside
    ``rl.num_generations``) cannot be read."""
    values: dict[str, Any] = {}
    for key in RUN_KEYS:
        other = next((k for k in overrides if k != key and (key.startswith(k + ".") or k.startswith(key + "."))), None)
        if other is not None:
            return f"cannot read {key}= beside {other}="
        value = _read(overrides, env, key)
        if key == "model_name":
            if not isinstance(value, str) or not value:
                return f"cannot read {key}="
            model = model_for_maxtext(value)
            if model is None:
                return f"model_name={value} has no cost model (core/models.py)"
            values[key] = model.name
            continue
        if not isinstance(value, str) or not _POSITIVE.fullmatch(value):
            return f"cannot read {key}= as a positive integer"
        values[key] = int(value)
    return TrainingRun(
        model=values["model_name"],
        num_batches=values["num_batches"],
        batch_size=values["batch_size"],
        num_generations=values["rl.num_generations"],
        max_target_length=values["max_target_length"],
        checkpoint_reads=1 if _reads_once(overrides, env) else 2,
    )


def _read(overrides: Mapping[str, str], env: Mapping[str, EnvValue], key: str) -> Any:
    """A key's value as train_rl gets it: the override, else (a top-level key) its ``M_<KEY>`` environment variable
    when that is plain text; None: neither."""
    value: Any = overrides.get(key)
    if value is None and "." not in key:
        from_env = env.get(f"M_{key.upper()}")
        value = from_env.value if from_env is not None and isinstance(from_env.value, str) else None
    return value


def _reads_once(overrides: Mapping[str, str], env: Mapping[str, EnvValue]) -> bool:
    """Whether train_rl reads the converted checkpoint once (``load_checkpoint_only_once``, MaxText's default false);
    only a plain true counts, so a value this policy cannot read is costed at the second read."""
    value = _read(overrides, env, "load_checkpoint_only_once")
    return isinstance(value, str) and value.lower() == "true"
