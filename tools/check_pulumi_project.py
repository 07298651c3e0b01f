"""The PR preview's check of a branch's Pulumi project files: ``pulumi preview`` may start nothing but the program's
own runtime, Python, in the program's own virtualenv (docs/guardrails.md "Guardrails and PR review").

The preview workflow copies this file from the base commit to where the branch cannot write, before any of the
branch's code runs, and runs it with the base pack's interpreter (PyYAML from ``policy/requirements.lock`` and the
base's ``core.errors``, installed there with the base's ``core``; nothing else is imported) on the branch's project
directory, once before the branch's ``make venv`` and once more right before ``pulumi preview``, when no process of
the branch is left::

    python check_pulumi_project.py <project directory> <stack> [--base <base project directory>]

It allow-lists, and refuses anything else with one line naming the file, the key and why:

- ``Pulumi.yaml`` is the project's only project file: the CLI looks for ``Pulumi.json``, then ``Pulumi.yaml``, then
  ``Pulumi.yml``, and reads the first it finds;
- it is a regular file of plain YAML: one document, no anchors, aliases, explicit tags, merge keys or repeated keys
  (what two YAML parsers could read differently);
- its keys are ``name`` (``tpu-rl``: the project whose stacks, and secrets, the preview reads), ``description``,
  ``runtime`` (exactly ``{name: python, options: {toolchain: pip, virtualenv: venv}}``) and ``config`` (the
  project's own keys, each declared with ``type``, ``description``, ``default``, ``items`` or ``secret``). So no
  ``plugins`` (plugin binaries the CLI would start), ``main`` (another program), ``packages`` (SDKs generated and
  installed), ``backend`` (another state backend, sent the stack's credentials), ``options`` or ``stackConfigDir``;
- ``Pulumi.<stack>.yaml``, when there is one, holds ``config``, ``secretsprovider``, ``encryptedkey`` and
  ``encryptionsalt`` only: an ``environment`` would import Pulumi ESC environments, whose variables the CLI sets in
  its own environment, which the policy pack's analyzer inherits. Its ``tpu-rl:stateBackend``, where the stack's
  state lives, is a backend URL (``gs://``, ``s3://``, ``azblob://``, ``https://`` or ``file://``, no spaces).

With ``--base <base project directory>`` (the base commit's stack file, copied where the branch cannot write), the
branch's ``Pulumi.<stack>.yaml`` must keep the base's ``tpu-rl:stateBackend`` and ``secretsprovider``: the preview
reads the state where the base records it and decrypts with the base's provider, and a change of either is the base
branch's own commit, never a previewed branch's.

``--get <project directory> <stack> <key>`` prints a stack file's ``gcp:project``, ``tpu-rl:stateBackend`` or
``tpu-rl:stateOrganization`` (nothing
when it is unset), checked as above: the preview takes the backend from the base's stack file, the deploy workflow
from its checkout's, and compares the dev and prod projects::

    python check_pulumi_project.py --get <project directory> <stack> tpu-rl:stateBackend
"""

from __future__ import annotations

import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

import yaml

from core.errors import BadInputError

PROJECT_NAME = "tpu-rl"
RUNTIME_NAME = "python"
RUNTIME_OPTIONS = {"toolchain": "pip", "virtualenv": "venv"}
RUNTIME_KEYS = ("name", "options")
PROJECT_KEYS = ("config", "description", "name", "runtime")
CONFIG_ENTRY_KEYS = ("default", "description", "items", "secret", "type")
STACK_KEYS = ("config", "encryptedkey", "encryptionsalt", "secretsprovider")
OTHER_PROJECT_FILES = ("Pulumi.json", "Pulumi.yml")
MAX_BYTES = 1_000_000
MAX_DEPTH = 32
PROJECT_KEY = re.compile(r"[A-Za-z][A-Za-z0-9]*\Z")
STACK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
STATE_BACKEND = "tpu-rl:stateBackend"
BACKEND_SCHEMES = ("gs://", "s3://", "azblob://", "https://", "file://")
SECRETS_PROVIDER = "secretsprovider"
STATE_ORGANIZATION = "tpu-rl:stateOrganization"
READABLE_KEYS = ("gcp:project", STATE_BACKEND, STATE_ORGANIZATION)
"""What ``--get`` prints: plain settings, never a secret (``secure:`` values are not strings and are refused)."""
PLAIN_VALUE = re.compile(r"[!-~]{1,2048}\Z")
"""A value printed into a workflow's step: printable ASCII, no spaces, no newline."""
KEPT_FROM_BASE = {
    STATE_BACKEND: "the preview reads the stack's state where the base records it; move a stack's state on the base "
    'branch, in a commit of its own (docs/state.md "Where the state lives")',
    SECRETS_PROVIDER: "the preview decrypts the stack's secrets with the base's provider; change it on the base "
    "branch, in a commit of its own (pulumi stack change-secrets-provider)",
}
"""What the branch's stack file must keep from the base's, and why."""

WHY = {
    "plugins": "the CLI would start the plugin binaries it names",
    "main": "the CLI would run the program from another directory",
    "packages": "the CLI would generate and install the SDKs it names",
    "backend": "the CLI would send the stack's credentials to another state backend",
    "options": "it changes how the CLI runs the program",
    "stackConfigDir": "the CLI would read the stack's config from another directory",
    "environment": "the CLI would set the variables of Pulumi ESC environments in its own environment, the policy "
    "pack's analyzer's",
}
"""Why a key that is not allow-listed matters, for the keys whose harm is known (the refusal holds for any other)."""


class ProjectRefusedError(BadInputError):
    """The project files are not the shape the preview runs (one line)."""


def _lines(values: tuple[str, ...]) -> str:
    return ", ".join(values)


def _not_allowed(where: str, key: str, allowed: tuple[str, ...]) -> ProjectRefusedError:
    why = WHY.get(key, "not in the allow-list")
    return ProjectRefusedError(f"{where}: `{key}` is not allowed ({why}); allowed: {_lines(allowed)}")


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses a key given twice (Go's YAML readers refuse it or keep another one)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, str):
                raise ProjectRefusedError(
                    f"{self.name}: the key {key!r} (line {key_node.start_mark.line + 1}) is not a string"
                )
            if key in seen:
                raise ProjectRefusedError(f"{self.name}: `{key}` is given twice (line {key_node.start_mark.line + 1})")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def read_plain_yaml(path: Path) -> Any:
    """The one YAML document of a regular file of at most ``MAX_BYTES``, refused when it uses what two YAML parsers
    could read differently (anchors, aliases, explicit tags, merge keys, repeated keys, several documents)."""
    name = path.name
    try:
        info = os.lstat(path)
    except OSError as err:
        raise ProjectRefusedError(f"{name}: cannot be read ({err.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise ProjectRefusedError(
            f"{name}: not a regular file (a symbolic link or a device may read differently later)"
        )
    if info.st_size > MAX_BYTES:
        raise ProjectRefusedError(f"{name}: larger than {MAX_BYTES} bytes")
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as file:
        data = file.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ProjectRefusedError(f"{name}: larger than {MAX_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ProjectRefusedError(f"{name}: not UTF-8") from None
    return parse_plain_yaml(name, text)


def parse_plain_yaml(name: str, text: str) -> Any:
    """The one YAML document of ``text`` (the file ``name``'s), refused as ``read_plain_yaml`` says."""
    try:
        depth = documents = 0
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                raise ProjectRefusedError(f"{name}: a YAML alias (*{event.anchor}) is not allowed")
            if isinstance(event, yaml.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise ProjectRefusedError(f"{name}: more than one YAML document")
                if event.tags or event.version:
                    raise ProjectRefusedError(f"{name}: a YAML directive (%YAML, %TAG) is not allowed")
            if isinstance(event, yaml.NodeEvent) and event.anchor is not None:
                raise ProjectRefusedError(f"{name}: a YAML anchor (&{event.anchor}) is not allowed")
            if isinstance(event, (yaml.ScalarEvent, yaml.CollectionStartEvent)) and event.tag is not None:
                raise ProjectRefusedError(f"{name}: an explicit YAML tag ({event.tag}) is not allowed")
            if isinstance(event, yaml.ScalarEvent) and event.value == "<<" and event.style is None:
                raise ProjectRefusedError(f"{name}: a YAML merge key (<<) is not allowed")
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise ProjectRefusedError(f"{name}: nested deeper than {MAX_DEPTH} levels")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
        loader = _Loader(text)
        loader.name = name
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ProjectRefusedError(f"{name}: not valid YAML{where}: {problem}") from None


def check_project(data: Any) -> None:
    """``Pulumi.yaml``'s allow-list (the module's docstring)."""
    where = "Pulumi.yaml"
    if not isinstance(data, dict):
        raise ProjectRefusedError(f"{where}: not a mapping of keys")
    for key in data:
        if key not in PROJECT_KEYS:
            raise _not_allowed(where, key, PROJECT_KEYS)
    if data.get("name") != PROJECT_NAME:
        raise ProjectRefusedError(
            f"{where}: name is {data.get('name')!r}, not {PROJECT_NAME} (the project whose stacks are read)"
        )
    if not isinstance(data.get("description", ""), str):
        raise ProjectRefusedError(f"{where}: description is not text")
    runtime = data.get("runtime")
    expected = "{name: python, options: {toolchain: pip, virtualenv: venv}}"
    if not isinstance(runtime, dict):
        raise ProjectRefusedError(f"{where}: runtime is {runtime!r}; it must be the mapping {expected}")
    for key in runtime:
        if key not in RUNTIME_KEYS:
            raise ProjectRefusedError(f"{where}: runtime.{key} is not allowed; runtime must be {expected}")
    if runtime.get("name") != RUNTIME_NAME:
        raise ProjectRefusedError(
            f"{where}: runtime.name is {runtime.get('name')!r}; the preview runs the python runtime only"
        )
    options = runtime.get("options")
    if not isinstance(options, dict):
        raise ProjectRefusedError(
            f"{where}: runtime.options is {options!r}; it must be {{toolchain: pip, virtualenv: venv}}"
        )
    wanted = RUNTIME_OPTIONS
    for key, value in options.items():
        if key not in wanted:
            raise ProjectRefusedError(
                f"{where}: runtime.options.{key} is not allowed; the options are exactly toolchain: pip and "
                "virtualenv: venv"
            )
        if value != wanted[key]:
            raise ProjectRefusedError(
                f"{where}: runtime.options.{key} is {value!r}, not {wanted[key]} (the program's own environment, "
                "made by make venv)"
            )
    for key in wanted:
        if key not in options:
            raise ProjectRefusedError(f"{where}: runtime.options.{key} is missing (it must be {wanted[key]})")
    config = data.get("config", {})
    if not isinstance(config, dict):
        raise ProjectRefusedError(f"{where}: config is not a mapping of keys")
    for key, entry in config.items():
        if not PROJECT_KEY.match(key):
            raise ProjectRefusedError(
                f"{where}: config key {key!r} is not allowed: only the project's own keys are declared here"
            )
        if not isinstance(entry, dict):
            raise ProjectRefusedError(f"{where}: config.{key} is not a mapping of {_lines(CONFIG_ENTRY_KEYS)}")
        for field in entry:
            if field not in CONFIG_ENTRY_KEYS:
                raise _not_allowed(f"{where}: config.{key}", field, CONFIG_ENTRY_KEYS)


def check_stack(data: Any, stack: str) -> None:
    """``Pulumi.<stack>.yaml``'s allow-list (the module's docstring)."""
    where = f"Pulumi.{stack}.yaml"
    if data is None:
        return
    if not isinstance(data, dict):
        raise ProjectRefusedError(f"{where}: not a mapping of keys")
    for key in data:
        if key not in STACK_KEYS:
            raise _not_allowed(where, key, STACK_KEYS)
    config = data.get("config")
    if config is not None and not isinstance(config, dict):
        raise ProjectRefusedError(f"{where}: config is not a mapping of keys")
    backend = (config or {}).get(STATE_BACKEND)
    if backend is not None and not (
        isinstance(backend, str) and PLAIN_VALUE.match(backend) and backend.startswith(BACKEND_SCHEMES)
    ):
        raise ProjectRefusedError(
            f"{where}: {STATE_BACKEND} is {_shown(backend)}, not a state backend URL ({_lines(BACKEND_SCHEMES)}; "
            "no spaces)"
        )


def _shown(value: Any) -> str:
    """A setting as a refusal names it: unset, or its value (at most 200 characters of its repr)."""
    return "unset" if value is None else repr(value)[:200]


def _setting(data: Any, key: str) -> Any:
    """A checked stack file's ``key``: a top-level key (``secretsprovider``) or a config key; None when unset."""
    if not isinstance(data, dict):
        return None
    if key in STACK_KEYS:
        return data.get(key)
    return (data.get("config") or {}).get(key)


def read_stack(project: Path, stack: str) -> Any:
    """The checked ``Pulumi.<stack>.yaml`` of ``project`` (None when there is none: a Pulumi Cloud stack may have
    none)."""
    if not STACK_NAME.match(stack):
        raise ProjectRefusedError(f"the stack name {stack!r} is not a plain name")
    stack_file = project / f"Pulumi.{stack}.yaml"
    if not os.path.lexists(stack_file):
        return None
    data = read_plain_yaml(stack_file)
    check_stack(data, stack)
    return data


def keeps_base(branch: Any, base: Any, stack: str) -> None:
    """Refuses a branch's stack file whose state backend or secrets provider is not the base's (one line)."""
    for key, why in KEPT_FROM_BASE.items():
        mine, theirs = _setting(branch, key), _setting(base, key)
        if mine != theirs:
            raise ProjectRefusedError(
                f"Pulumi.{stack}.yaml: {key} is {_shown(mine)} where the base branch has {_shown(theirs)}: {why}"
            )


def get(project: Path, stack: str, key: str) -> str | None:
    """A stack file's ``gcp:project``, ``tpu-rl:stateBackend`` or ``tpu-rl:stateOrganization``, checked; None when
    unset."""
    if key not in READABLE_KEYS:
        raise ProjectRefusedError(f"{key!r} cannot be read here; the keys that can: {_lines(READABLE_KEYS)}")
    value = _setting(read_stack(project, stack), key)
    if value is not None and not (isinstance(value, str) and PLAIN_VALUE.match(value)):
        raise ProjectRefusedError(f"Pulumi.{stack}.yaml: {key} is {_shown(value)}, not one word of printable text")
    return value


def check(project: Path, stack: str, base: Path | None = None) -> None:
    """Raises ``ProjectRefusedError`` (one line) unless the project directory's Pulumi files have the allowed shape
    and, given the base's project directory, keep the base's state backend and secrets provider."""
    if not STACK_NAME.match(stack):
        raise ProjectRefusedError(f"the stack name {stack!r} is not a plain name")
    for other in OTHER_PROJECT_FILES:
        if os.path.lexists(project / other):
            raise ProjectRefusedError(
                f"{other}: not allowed beside Pulumi.yaml (the CLI would read the first of Pulumi.json, "
                "Pulumi.yaml, Pulumi.yml it finds)"
            )
    check_project(read_plain_yaml(project / "Pulumi.yaml"))
    branch = read_stack(project, stack)
    if base is not None:
        keeps_base(branch, read_stack(base, stack), stack)


USAGE = (
    "usage: check_pulumi_project.py <project directory> <stack> [--base <base project directory>]\n"
    f"       check_pulumi_project.py --get <project directory> <stack> <{'|'.join(READABLE_KEYS)}>"
)


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["--get"] and len(argv) == 4:
            value = get(Path(argv[1]), argv[2], argv[3])
            if value is not None:
                print(value)
            return 0
        if len(argv) == 2 or (len(argv) == 4 and argv[2] == "--base"):
            check(Path(argv[0]), argv[1], Path(argv[3]) if len(argv) == 4 else None)
        else:
            print(USAGE, file=sys.stderr)
            return 2
    except ProjectRefusedError as refused:
        print(f"error: {refused}", file=sys.stderr)
        return refused.exit_code  # bad input: one line, exit 2
    kept = ", its state backend and secrets provider the base's" if len(argv) == 4 else ""
    print(f"Pulumi.yaml and Pulumi.{argv[1]}.yaml have the shape the preview runs: python in venv/, nothing else{kept}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
