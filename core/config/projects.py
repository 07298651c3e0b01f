"""One Google project per stack, unless both stack files say otherwise (docs/security.md "Two stacks in one project").

A stack's deploy identity holds project-level roles no IAM condition can scope to one stack (``roles/container.admin``:
a cluster's create is checked on the project and the role reaches every cluster's Kubernetes API;
``roles/resourcemanager.projectIamAdmin``: any binding of the project, its own conditioned ones included;
``roles/iam.serviceAccountAdmin``: every account's IAM policy). In a project two stacks share, each one's deploy
identity therefore administers the other. So a stack whose ``gcp:project`` another stack file of the checkout names
too is refused, unless both files set ``tpu-rl:sharedProject: true``: sharing is a choice written down in both.

``problem`` is pure: a function of the stack's name and settings and the other stack files' ``config:`` sections
(``tools.stack_files.load_stack_config``'s strings, or the YAML as the CLI writes it). ``stack_configs`` reads those
sections from a checkout with limits, for the program's preflight (``program/stack.py``), which may not import
``tools``. The program runs it before anything is registered; `make audit` runs it too (``tools/audit.py``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.config.placeholders import EXAMPLE_PROJECTS
from core.errors import BadInputError
from core.inputs import InputError, parse_yaml, read_file
from core.names import PROJECT

if TYPE_CHECKING:
    from core.settings import Settings

SHARED_KEY = f"{PROJECT}:sharedProject"
HELP = 'docs/security.md "Two stacks in one project"'
STACK_FILE = re.compile(r"Pulumi\.([A-Za-z0-9_.-]{1,100})\.yaml")
"""A stack file's name (the stack name as Pulumi allows it: letters, digits, '-', '_', '.')."""
MAX_STACK_FILE_BYTES = 1_000_000
"""As ``tools.stack_files``: a stack file is a few KB."""


class SharedProjectError(BadInputError):
    """A project another stack file names too, not accepted in both files (one line, exit 2)."""


def _truth(value: Any) -> bool:
    """``true`` as YAML reads it or as `pulumi config set` writes it (the text, any case)."""
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def _project(config: Mapping[str, Any]) -> str:
    value = config.get("gcp:project")
    return value.strip() if isinstance(value, str) else ""


def problem(stack: str, settings: Settings, others: Mapping[str, Mapping[str, Any]]) -> str | None:
    """One line when another stack file (``others``: stack -> its ``config:`` values) names this stack's project and
    the two do not both set ``tpu-rl:sharedProject: true``; None otherwise. A file whose project is unset or the
    example's placeholder names no project."""
    project = settings.project
    if not project or project in EXAMPLE_PROJECTS:
        return None
    for other in sorted(others):
        config = others[other]
        if other == stack or _project(config) != project:
            continue
        accepted = ((stack, settings.shared_project), (other, _truth(config.get(SHARED_KEY))))
        lacking = [f"Pulumi.{name}.yaml" for name, shared in accepted if not shared]
        if not lacking:
            continue
        return (
            f"stacks {stack} and {other} both name project {project}: in one project {stack}'s deploy identity "
            f"administers {other}, and {other}'s administers {stack} (roles/container.admin reaches every cluster of "
            "the project and its Secrets; roles/resourcemanager.projectIamAdmin and roles/iam.serviceAccountAdmin let "
            f"it grant itself any role, the other stack's state key and deploy account included: {HELP}); give each "
            f"stack a project of its own, or set {SHARED_KEY}: true in both stack files to accept that "
            f"({' and '.join(lacking)} {'does' if len(lacking) == 1 else 'do'} not)"
        )
    return None


def refuse_shared(stack: str, settings: Settings, others: Mapping[str, Mapping[str, Any]]) -> None:
    """``SharedProjectError`` (exit 2) with ``problem``'s line, if any."""
    found = problem(stack, settings, others)
    if found:
        raise SharedProjectError(found)


def stack_configs(root: Path, stack: str) -> dict[str, dict[str, Any]]:
    """The ``config:`` section of every other ``Pulumi.<name>.yaml`` in ``root``, read with limits (a file that cannot
    be read, or has no such section, is no one's: its own commands refuse it)."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(root.glob("Pulumi.*.yaml")):
        match = STACK_FILE.fullmatch(path.name)
        if match is None or match.group(1) == stack:
            continue
        try:
            document = parse_yaml(read_file(path, MAX_STACK_FILE_BYTES).decode("utf-8"), path.name)
        except (InputError, UnicodeDecodeError):
            continue
        config = document.get("config") if isinstance(document, dict) else None
        if isinstance(config, dict):
            found[match.group(1)] = {str(k): v for k, v in config.items()}
    return found
