"""Where else a stack could already live: the backends the project knows, and whether one holds the stack.

Before `pulumi stack init` makes a stack in its home, ``tools/state.py new`` looks for a stack of the same name in
every other backend the project knows (``known``): the homes the repository's other stack files record (or would
default to), the project's shared bucket of earlier versions (``gs://<gcp:project>-pulumi-state``), Pulumi Cloud
wherever the CLI holds a login, and ``.pulumi-state/`` of this checkout (an older default). A stack found there
would otherwise be created again, empty, and its first `up` would create a second cluster beside the live one (or
adopt and then, on destroy, delete it).

A self-managed backend keeps a stack's checkpoint at ``.pulumi/stacks/<project>/<stack>.json`` (the project-scoped
layout) or ``.pulumi/stacks/<stack>.json`` (the legacy layout, before projects), gzip- or zstd-compressed as
``.json.gz`` / ``.json.zst``, under the URL's folder (pulumi/pulumi ``pkg/backend/diy/store.go``:
``projectReferenceStore.StackBasePath``, ``legacyReferenceStore.StackBasePath``, ``ListReferences``; the
``.json.bak`` a ``pulumi stack rm`` leaves is no stack: ``state.go`` ``removeStack`` keeps only a backup). Pulumi
Cloud is asked with ``pulumi stack ls --json``, which lists the current project's stacks by ``name`` (``stack`` or
``org/stack``: ``pkg/cmd/pulumi/stack/stack_list.go``, ``stackSummaryJSON``).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from core.names import PROJECT
from core.redact import scrub
from core.state_names import legacy_bucket
from tools.state_export import StateError
from tools.state_home import Home, file_folder, home_of, is_cloud, other_stack_files, same

SUFFIXES = (".json", ".json.gz", ".json.zst")
STACKS = ".pulumi/stacks/"
TIMEOUT = (5.0, 20.0)
"""Connect and read timeout of each GCS request, in seconds."""
CLOUD_TIMEOUT = 60.0
"""How long `pulumi stack ls` may take to answer from Pulumi Cloud, in seconds."""
MAX_LISTED = 2000
"""The most objects of one bucket's ``.pulumi/stacks/`` read (a checkpoint and its backup per stack)."""


@dataclass(frozen=True)
class Known:
    """A backend the project knows, and why."""

    url: str
    why: str


def stack_of(name: str) -> tuple[str, str] | None:
    """``(project, stack)`` of an object under ``.pulumi/stacks/`` that is a checkpoint (``project`` empty in the
    legacy layout), else None."""
    rest = name.removeprefix(STACKS)
    suffix = next((s for s in SUFFIXES if rest.endswith(s)), None)
    if suffix is None or rest == name:
        return None
    parts = rest[: -len(suffix)].split("/")
    if len(parts) == 1:
        return "", parts[0]
    return (parts[0], parts[1]) if len(parts) == 2 else None


def holds(names: Iterable[str], stack: str) -> bool:
    """Whether objects named ``names`` (relative to the backend's folder) hold a checkpoint of ``stack`` of this
    project, in either layout."""
    return any(found in ((PROJECT, stack), ("", stack)) for found in map(stack_of, names) if found)


def stacks(names: Iterable[str]) -> set[tuple[str, str]]:
    """Every ``(project, stack)`` whose checkpoint is among ``names``."""
    return {found for found in map(stack_of, names) if found}


def known(home: Home, root: Path, env: dict[str, str] | None = None) -> list[Known]:
    """Every backend other than the stack's home that the project knows (the module's docstring)."""
    env = dict(os.environ) if env is None else env
    found: list[Known] = []

    def add(url: str, why: str) -> None:
        if url and not same(url, home.backend) and not any(same(url, k.url) for k in found):
            found.append(Known(url.rstrip("/"), why))

    for other in other_stack_files(home.stack, root):
        add(home_of(other), f"stack {other.stack}'s state home ({other.name})")
    if home.project:
        add(f"gs://{legacy_bucket(home.project)}", "the project's shared state bucket of earlier versions")
    for url in cloud_logins(env):
        add(url, "Pulumi Cloud, where the CLI is logged in")
    if (root / ".pulumi-state" / ".pulumi").is_dir():
        add(f"file://{root.resolve() / '.pulumi-state'}", ".pulumi-state/ in this checkout, an earlier default")
    return found


def cloud_logins(env: dict[str, str]) -> list[str]:
    """The Pulumi Cloud URLs the CLI holds a login for: ``accessTokens`` of ``$PULUMI_HOME/credentials.json``
    (pulumi/pulumi sdk/go/common/workspace/creds.go ``Credentials``), and Pulumi Cloud itself when
    ``PULUMI_ACCESS_TOKEN`` is set."""
    urls = ["https://api.pulumi.com"] if env.get("PULUMI_ACCESS_TOKEN") else []
    home = Path(env.get("PULUMI_HOME") or Path(env.get("HOME") or "~").expanduser() / ".pulumi")
    try:
        tokens = json.loads((home / "credentials.json").read_text()[:1_000_000]).get("accessTokens")
    except (OSError, ValueError, AttributeError):
        tokens = None
    if isinstance(tokens, dict):
        urls += [url for url, token in tokens.items() if isinstance(url, str) and is_cloud(url) and token]
    return list(dict.fromkeys(u.rstrip("/") for u in urls))


# ---------------------------------------------------------------------------------------------
# Does a backend hold the stack?


def listed(url: str, storage: Any) -> list[str] | None:
    """The object names under a self-managed backend's ``.pulumi/stacks/``, relative to its folder; None when the
    backend cannot be read by this account (a bucket it may not list: another stack's, kept apart on purpose).
    A bucket or folder that does not exist holds nothing. StateError for anything else."""
    folder = file_folder(url)
    if folder is not None:
        base = folder / ".pulumi" / "stacks"
        if not base.is_dir():
            return []
        return [STACKS + str(p.relative_to(base)) for p in base.rglob("*") if p.is_file()][:MAX_LISTED]
    parsed = urlparse(url)
    if parsed.scheme != "gs":
        raise StateError(f"{scrub(url, limit=120)} is no backend this tool can read")
    from google.api_core import exceptions

    if storage is None:
        raise StateError("no Google credentials to read it with (gcloud auth application-default login)")
    prefix = parsed.path.strip("/")
    full = f"{prefix}/{STACKS}" if prefix else STACKS
    try:
        blobs = storage.list_blobs(parsed.netloc, prefix=full, timeout=TIMEOUT, max_results=MAX_LISTED)
        return [blob.name[len(full) - len(STACKS) :] for blob in blobs]
    except exceptions.NotFound:
        return []
    except exceptions.Forbidden:
        return None
    except Exception as err:  # noqa: BLE001 (credentials, network: one line)
        raise StateError(f"cannot list gs://{parsed.netloc}/{full}: {scrub(str(err), limit=200)}") from None


def in_cloud(url: str, stack: str, run: Callable[..., Any] = subprocess.run) -> bool:
    """Whether Pulumi Cloud at ``url`` holds a stack ``stack`` of this project, as `pulumi stack ls --json` lists
    it; StateError when it does not answer."""
    env = {**os.environ, "PULUMI_BACKEND_URL": url}
    try:
        done = run(["pulumi", "stack", "ls", "--json"], env=env, capture_output=True, text=True, timeout=CLOUD_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise StateError(f"`pulumi stack ls` at {url} did not answer: {scrub(str(err), limit=120)}") from None
    if done.returncode != 0:
        said = scrub(" ".join((done.stderr or "").split()), limit=200)
        raise StateError(f"`pulumi stack ls` at {url} failed: {said}")
    try:
        listing = json.loads(done.stdout or "[]")
    except json.JSONDecodeError:
        raise StateError(f"`pulumi stack ls --json` at {url} gave no JSON") from None
    names = [entry.get("name") for entry in listing if isinstance(entry, dict)] if isinstance(listing, list) else []
    return any(isinstance(n, str) and (n == stack or n.endswith(f"/{stack}")) for n in names)


def holds_stack(url: str, stack: str, storage: Any, run: Callable[..., Any] = subprocess.run) -> bool | None:
    """Whether the backend at ``url`` holds ``stack``; None when this account cannot read it."""
    if is_cloud(url):
        return in_cloud(url, stack, run)
    names = listed(url, storage)
    return None if names is None else holds(names, stack)


def found_elsewhere(
    home: Home, root: Path, storage: Any, run: Callable[..., Any] = subprocess.run, env: dict[str, str] | None = None
) -> tuple[Known | None, list[str]]:
    """The first known backend that holds the stack (None: none does), and one line per backend that could not be
    asked (it is skipped only when this account may not read it)."""
    failures = []
    for other in known(home, root, env):
        try:
            if holds_stack(other.url, home.stack, storage, run):
                return other, []
        except StateError as err:
            failures.append(f"{other.url} ({other.why}): {err}")
    return None, failures
