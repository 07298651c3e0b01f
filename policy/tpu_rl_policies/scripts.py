"""What a step's script passes to MaxText: the simple commands of a bash script (``shell_commands``), the train_rl
argv among them and in the scripts they carry (``trainer_invocations``), what MaxText's pyconfig makes of its
OmegaConf overrides (``maxtext_overrides``), and the run they make (``training_run``)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from core.estimate import TrainingRun
from core.models import model_for_maxtext

from .env import EnvValue, MountedFile, Mounts
from .properties import unseen

TRAIN_RL = "maxtext.trainers.post_train.rl.train_rl"
TRAINER_MENTIONS = ("trainers.post_train.rl.train_rl", "post_train/rl/train_rl")
"""Text that names the trainer: a word holding it is a script to read (``bash -c``, ``eval``), or a finding."""
_SHELL_PUNCTUATION = "();<>|&\n"
_REDIRECTIONS = frozenset((">", ">>", "<", "<<", "<<<", ">&", "<&", "&>", "&>>", "<>", ">|", "<<-"))
_MAX_SCRIPT_DEPTH = 4


class _Lines:
    """A script for ``shlex`` whose comments end before their newline, so the newline still ends the command
    (shlex's own comment handling reads the newline too, gluing the next line onto the commented one)."""

    def __init__(self, text: str) -> None:
        self._text, self._at = text, 0

    def read(self, size: int = -1) -> str:
        end = len(self._text) if size < 0 else self._at + size
        out, self._at = self._text[self._at : end], min(end, len(self._text))
        return out

    def readline(self, size: int = -1) -> str:
        end = self._text.find("\n", self._at)
        end = len(self._text) if end < 0 else end
        out, self._at = self._text[self._at : end], end
        return out

    def close(self) -> None:
        pass


def shell_commands(script: str) -> list[list[str]]:
    """The simple commands of a bash script, each as its words (quotes removed, ``#`` comments and redirections
    with their targets dropped), split at ``;``, ``&``, ``|``, ``&&``, ``||``, parentheses and newlines; a
    backslash-newline continues the line. Raises ``ValueError`` on a script shlex cannot read (an open quote)."""
    lexer = shlex.shlex(_Lines(script.replace("\\\n", "")), posix=True, punctuation_chars=_SHELL_PUNCTUATION)
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    skip_next = False
    while (token := lexer.get_token()) is not None and token != lexer.eof:
        if token and all(c in _SHELL_PUNCTUATION for c in token):
            if token in _REDIRECTIONS or not any(c in ";&|()\n" for c in token):
                skip_next = True  # a redirection: its target is no argument
            else:
                commands.append([])
            continue
        if skip_next:
            skip_next = False
            continue
        commands[-1].append(token)
    return [command for command in commands if command]


def _trainer_argv(words: Sequence[str]) -> list[str] | None:
    """The arguments after ``-m maxtext...train_rl`` (or its script path) in one command's words."""
    for index, word in enumerate(words):
        if word == "-m" and index + 1 < len(words) and words[index + 1] == TRAIN_RL:
            return list(words[index + 2 :])
        if word == f"-m{TRAIN_RL}" or word.endswith("post_train/rl/train_rl.py"):
            return list(words[index + 1 :])
    return None


def trainer_invocations(words: Sequence[str], depth: int = 0) -> tuple[list[list[str]], bool]:
    """Every train_rl argv in a command's words and in the scripts they carry (``bash -c``, ``eval``, ``sh -c``),
    and whether any word names the trainer in a way this cannot read (then a hidden run may exist)."""
    found: list[list[str]] = []
    unread = False
    argv = _trainer_argv(words)
    if argv is not None:
        found.append(argv)
    for word in words:
        if not any(m in word for m in TRAINER_MENTIONS) or word == TRAIN_RL or word.endswith("/train_rl.py"):
            continue
        if word == f"-m{TRAIN_RL}":
            continue
        if depth >= _MAX_SCRIPT_DEPTH:
            unread = True
            continue
        try:
            commands = shell_commands(word)
        except ValueError:
            unread = True
            continue
        inside = False
        for command in commands:
            more, hidden = trainer_invocations(command, depth + 1)
            found += more
            inside = inside or bool(more)
            unread = unread or hidden
        unread = unread or not inside
    return found, unread


class _OmegaConfLoader(yaml.SafeLoader):
    """OmegaConf's YAML loader (``omegaconf._utils.get_yaml_loader``): YAML 1.1 scalars without timestamps, and
    floats without a dot (``1e3``)."""


_OmegaConfLoader.yaml_implicit_resolvers = {
    key: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_OmegaConfLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?[0-9][0-9_]*(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def _merge(node: dict[str, Any], key: str, value: Any) -> None:
    """``OmegaConf.update(cfg, key, value, merge=True)``: a dotted key nests, a mapping merges into a mapping."""
    *parents, last = key.split(".")
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    if isinstance(value, dict) and isinstance(node.get(last), dict):
        for k, v in value.items():
            _merge(node[last], str(k), v)
    else:
        node[last] = value


def maxtext_overrides(argv: Sequence[str]) -> dict[str, Any]:
    """What train_rl's pyconfig makes of its command-line overrides (MaxText 0.2.4 ``pyconfig``: a first argument
    ending in ``.yml`` is the config file; the rest is ``OmegaConf.from_cli``, i.e. ``from_dotlist``): each
    ``key=value`` in order, the value read as OmegaConf's YAML, a later key overriding an earlier one, dotted keys
    nested (``rl.num_generations``). absl takes ``-``-words as flags."""
    words = list(argv)
    if words and words[0].endswith(".yml"):
        words = words[1:]
    config: dict[str, Any] = {}
    for word in words:
        if word.startswith("-"):
            continue
        key, sep, text = word.partition("=")
        value: Any = None
        if sep:
            try:
                value = yaml.load(text, Loader=_OmegaConfLoader)  # noqa: S506 (a SafeLoader subclass)
            except yaml.YAMLError:
                value = text
        _merge(config, key, value)
    return config


def _positive_int(value: Any) -> int | None:
    """An int as MaxText's pydantic config takes one (an integral float or a digit string too), at least 1."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?[0-9]+\s*", value):
        value = int(value)
    return value if isinstance(value, int) and value >= 1 else None


RUN_KEYS = ("model_name", "num_batches", "batch_size", "rl.num_generations", "max_target_length")


def training_run(argv: Sequence[str], env: Mapping[str, EnvValue]) -> TrainingRun | str:
    """The run a train_rl argv makes, or why it cannot be read. A top-level key missing from the command line is
    read from its ``M_<KEY>`` environment variable, as pyconfig does (both set: pyconfig refuses to start)."""
    config = maxtext_overrides(argv)
    values: dict[str, Any] = {}
    for key in RUN_KEYS:
        node: Any = config
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is None and "." not in key:
            from_env = env.get(f"M_{key.upper()}")
            node = from_env.value if from_env is not None and isinstance(from_env.value, str) else None
        if key == "model_name":
            if not isinstance(node, str) or not node:
                return f"cannot read {key}="
            model = model_for_maxtext(node)
            if model is None:
                return f"model_name={node} has no cost model (core/models.py)"
            values[key] = model.name
            continue
        number = _positive_int(node)
        if number is None:
            return f"cannot read {key}= as a positive integer"
        values[key] = number
    return TrainingRun(
        model=values["model_name"],
        num_batches=values["num_batches"],
        batch_size=values["batch_size"],
        num_generations=values["rl.num_generations"],
        max_target_length=values["max_target_length"],
    )


def _with_run_files(words: list[str], mounts: Mounts) -> tuple[list[str], list[MountedFile]]:
    """A command's words with each file it runs from a ConfigMap volume replaced by the file's text (``bash FILE``
    runs the lines ``bash -c TEXT`` would), and the files it names that this policy cannot read (an ``Unseen`` one
    is noted: judged at `pulumi up`)."""
    out: list[str] = []
    unknown: list[MountedFile] = []
    for word in words:
        mounted = mounts.file(word)
        if mounted is None:
            out.append(word)
        elif isinstance(mounted.text, str):
            out.append(mounted.text)
        else:
            if not unseen(mounted.text):
                unknown.append(mounted)
            out.append(word)
    return out, unknown
