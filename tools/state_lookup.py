"""Where else a stack could already live: the backends the project knows, and whether one holds the stack.

Before `pulumi stack init` makes a stack in its home, ``tools/state.py new`` looks for a stack of the same name in
every other backend the project knows (``known``): the homes the repository's other stack files record (or would
default to), the project's shared bucket of earlier versions (``gs://<gcp:project>-pulumi-state``), every backend the
Pulumi CLI holds a login for (``logins``), ``.pulumi-state/`` of this checkout (an older default), and, for a Pulumi
Cloud home, the same Cloud in every organization but the recorded one. A stack found there would otherwise be created
again, empty, and its first `up` would create a second cluster beside the live one (or adopt and then, on destroy,
delete it).

The CLI's logins are the credentials file's (pulumi/pulumi ``sdk/go/common/workspace/creds.go``: ``credentials.json``
in ``$PULUMI_CREDENTIALS_PATH``, else the Pulumi home, ``$PULUMI_HOME`` or ``~/.pulumi``
(``sdk/go/common/util/pulumihome``); its ``Credentials``: ``current``, ``accessTokens`` and ``accounts``, each keyed by
backend URL). `pulumi login gs://...` (or ``s3://``, ``azblob://``, ``file://``) stores its URL there with an empty
token (``pkg/backend/diy/backend.go`` ``Login``: ``StoreAccount(be.URL(), Account{}, true)``); a Pulumi Cloud URL
is usable only with a token (``Account.HasCredential``). A file the CLI encrypted (an envelope with the
``$pulumiSecureStore`` marker, ``sdk/go/common/util/securestore/envelope.go`` ``IsEnvelope``), or one that does not
parse, is not read: ``pulumi whoami --json`` names the current login (its ``url``), and a warning says that the
others could not be looked in.

A self-managed backend keeps a stack's checkpoint at ``.pulumi/stacks/<project>/<stack>.json`` (the project-scoped
layout) or ``.pulumi/stacks/<stack>.json`` (the legacy layout, before projects), gzip- or zstd-compressed as
``.json.gz`` / ``.json.zst``, under the URL's folder (pulumi/pulumi ``pkg/backend/diy/store.go``:
``projectReferenceStore.StackBasePath``, ``legacyReferenceStore.StackBasePath``, ``ListReferences``; the
``.json.bak`` a ``pulumi stack rm`` leaves is no stack: ``state.go`` ``removeStack`` keeps only a backup): read with
google-cloud-storage for ``gs://``, from the folder for ``file://``; an ``s3://`` or ``azblob://`` backend, for which
this project installs no client, is one line saying it cannot tell (never passed over). Pulumi Cloud is asked with
``pulumi stack ls --json``, which lists the current project's stacks by ``name`` (``stack``, or ``org/stack`` outside
the default organization: ``pkg/cmd/pulumi/stack/stack_list.go``, ``stackSummaryJSON``).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from core.errors import BAD_INPUT
from core.names import PROJECT
from core.redact import scrub
from core.state_names import legacy_bucket
from infra.client_errors import client_errors, translated
from tools.state_export import StateError
from tools.state_home import CLOUD, ORG_KEY, Home, file_folder, home_of, is_cloud, other_stack_files, same

SUFFIXES = (".json", ".json.gz", ".json.zst")
STACKS = ".pulumi/stacks/"
TIMEOUT = (5.0, 20.0)
"""Connect and read timeout of each GCS request, in seconds."""
CLOUD_TIMEOUT = 60.0
"""How long `pulumi stack ls` may take to answer from Pulumi Cloud, in seconds."""
MAX_LISTED = 2000
"""The most objects of one bucket's ``.pulumi/stacks/`` read (a checkpoint and its backup per stack)."""
MAX_CREDENTIALS = 1_000_000
"""The most of the CLI's credentials file read (a few KB)."""
ENVELOPE = "$pulumiSecureStore"
"""The marker of a credentials file the CLI encrypted (securestore ``envelope``)."""
NO_CLIENT = {"s3": "S3", "azblob": "Azure Blob Storage"}
"""The self-managed backends the CLI reads that this project installs no client for."""


@dataclass(frozen=True)
class Known:
    """A backend the project knows, and why."""

    url: str
    why: str
    fix: str = ""
    """What to run when the stack is found there ("" for the usual: record it, or move it)."""


@dataclass(frozen=True)
class Lookup:
    """The backends to look in, with what could not be listed of the CLI's logins."""

    backends: list[Known]
    warnings: list[str] = field(default_factory=list)
    """Said, and the lookup goes on (an encrypted credentials file: only the current login is known)."""
    failures: list[str] = field(default_factory=list)
    """Backends that cannot be known: `new` stops, as a stack there cannot be ruled out."""


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


def known(
    home: Home, root: Path, env: dict[str, str] | None = None, run: Callable[..., Any] = subprocess.run
) -> Lookup:
    """Every backend other than the stack's home that the project knows (the module's docstring)."""
    env = dict(os.environ) if env is None else env
    found: list[Known] = []

    def add(url: str, why: str) -> None:
        if url and not same(url, home.backend) and not any(same(url, k.url) for k in found):
            found.append(Known(url.rstrip("/"), why))

    for other in other_stack_files(home.stack, root):
        add(home_of(other), f"stack {other.stack}'s state home ({other.name})")
    if home.project and not any(same(f"gs://{legacy_bucket(home.project)}", k.url) for k in found):
        move = f"make state-bucket STACK={home.stack}, then make state-move STACK={home.stack}"
        shared = Known(f"gs://{legacy_bucket(home.project)}", "the project's shared state bucket of earlier versions")
        found.append(replace(shared, fix=f"move it to a bucket and key of its own ({move})"))
    urls, warnings, failures = logins(env, run)
    for url, why in urls:
        add(url, why)
    if (root / ".pulumi-state" / ".pulumi").is_dir():
        add(f"file://{root.resolve() / '.pulumi-state'}", ".pulumi-state/ in this checkout, an earlier default")
    return Lookup(found, warnings, failures)


def credentials_file(env: dict[str, str]) -> Path:
    """Where the CLI keeps its logins (creds.go ``getCredsFilePath``)."""
    folder = env.get("PULUMI_CREDENTIALS_PATH") or env.get("PULUMI_HOME")
    return Path(folder or Path(env.get("HOME") or "~").expanduser() / ".pulumi") / "credentials.json"


def logins(env: dict[str, str], run: Callable[..., Any]) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """``(url, why)`` of every backend the CLI holds a login for, the warnings and the failures (the module's
    docstring); Pulumi Cloud itself when ``PULUMI_ACCESS_TOKEN`` is set."""
    found = [(CLOUD, "Pulumi Cloud, PULUMI_ACCESS_TOKEN being set")] if env.get("PULUMI_ACCESS_TOKEN") else []
    path = credentials_file(env)
    why = f"where the Pulumi CLI is logged in ({path})"
    try:
        raw = path.read_bytes()[:MAX_CREDENTIALS]
    except FileNotFoundError:
        return found, [], []
    except OSError as err:
        return found, [], [f"{path}: {scrub(str(err), limit=120)}"]
    if not raw.strip():
        return found, [], []  # creds.go readCredentialsFile: an empty file is as none
    try:
        data = json.loads(raw)
    except ValueError:
        data = None
    if not isinstance(data, dict) or ENVELOPE in data:
        said = "is encrypted by the Pulumi CLI" if isinstance(data, dict) else "does not parse"
        try:
            url = whoami(env, run)
        except StateError as err:
            return found, [], [f"{path} {said}, and `pulumi whoami` did not name the current login: {err}"]
        warning = (
            f"warning: {path} {said}: only the CLI's current login, {url} (pulumi whoami), was looked in for the "
            "stack; look in any other backend you logged in to yourself (PULUMI_BACKEND_URL=<url> pulumi stack ls)"
        )
        return [*found, (url, "the Pulumi CLI's current login (pulumi whoami)")], [warning], []
    tokens: dict[str, Any] = data["accessTokens"] if isinstance(data.get("accessTokens"), dict) else {}
    accounts: dict[str, Any] = data["accounts"] if isinstance(data.get("accounts"), dict) else {}
    current = data["current"] if isinstance(data.get("current"), str) else ""
    for url in dict.fromkeys([current, *tokens, *accounts]):
        if not isinstance(url, str) or not url:
            continue
        account: dict[str, Any] = accounts[url] if isinstance(accounts.get(url), dict) else {}
        usable = tokens.get(url) or account.get("accessToken") or account.get("refreshToken")
        if not is_cloud(url) or usable:
            found.append((url, why))
    return found, [], []


def whoami(env: dict[str, str], run: Callable[..., Any]) -> str:
    """The URL of the CLI's current login, as `pulumi whoami --json` names it (``url``); StateError otherwise."""
    clean = {k: v for k, v in env.items() if k != "PULUMI_BACKEND_URL"}
    try:
        done = run(["pulumi", "whoami", "--json"], env=clean, capture_output=True, text=True, timeout=CLOUD_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise StateError(scrub(str(err), limit=120)) from None
    if done.returncode != 0:
        raise StateError(scrub(" ".join((done.stderr or "").split()), limit=200))
    try:
        url = json.loads(done.stdout or "{}").get("url")
    except (ValueError, AttributeError):
        url = None
    if not isinstance(url, str) or "://" not in url:
        raise StateError("its --json output names no url")
    return url


# ---------------------------------------------------------------------------------------------
# Does a backend hold the stack?


def listed(url: str, storage: Any) -> list[str] | None:
    """The object names under a self-managed backend's ``.pulumi/stacks/``, relative to its folder; None when the
    backend cannot be read by this account (a bucket it may not list: another stack's, kept apart on purpose).
    A bucket or folder that does not exist holds nothing. StateError for anything else, an ``s3://`` or
    ``azblob://`` backend among them (no client here: it cannot tell)."""
    folder = file_folder(url)
    if folder is not None:
        base = folder / ".pulumi" / "stacks"
        if not base.is_dir():
            return []
        return [STACKS + str(p.relative_to(base)) for p in base.rglob("*") if p.is_file()][:MAX_LISTED]
    parsed = urlparse(url)
    if parsed.scheme in NO_CLIENT:
        raise StateError(
            f"this project installs no {NO_CLIENT[parsed.scheme]} client, so it cannot tell whether the backend holds "
            f"the stack: look yourself (PULUMI_BACKEND_URL={scrub(url, limit=120)} pulumi stack ls), then log out of "
            f"it if it holds none (pulumi logout {scrub(url, limit=120)})"
        )
    if parsed.scheme != "gs":
        raise StateError(f"{scrub(url, limit=120)} is no backend this tool can read")
    from google.api_core import exceptions

    if storage is None:
        raise StateError(
            "no Google credentials to read it with (gcloud auth application-default login)", exit_code=BAD_INPUT
        )
    prefix = parsed.path.strip("/")
    full = f"{prefix}/{STACKS}" if prefix else STACKS
    try:
        blobs = storage.list_blobs(parsed.netloc, prefix=full, timeout=TIMEOUT, max_results=MAX_LISTED)
        return [blob.name[len(full) - len(STACKS) :] for blob in blobs]
    except exceptions.NotFound:
        return []
    except exceptions.Forbidden:
        return None
    except client_errors() as err:
        raise translated(err, f"listing gs://{parsed.netloc}/{full}", StateError, "GCS") from None


def cloud_stacks(url: str, run: Callable[..., Any] = subprocess.run, organization: str = "") -> list[str]:
    """The names `pulumi stack ls --json` lists for this project at Pulumi Cloud ``url`` (``organization``: the
    default organization, whose stacks it names without one); StateError when it does not answer."""
    env = {**os.environ, "PULUMI_BACKEND_URL": url}
    if organization:
        env["PULUMI_DEFAULT_ORGANIZATION"] = organization
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
        raise StateError(f"`pulumi stack ls` at {url} gave no JSON") from None
    names = [entry.get("name") for entry in listing if isinstance(entry, dict)] if isinstance(listing, list) else []
    return [n for n in names if isinstance(n, str)]


def in_cloud(url: str, stack: str, run: Callable[..., Any] = subprocess.run) -> bool:
    """Whether Pulumi Cloud at ``url`` holds a stack ``stack`` of this project, in any organization."""
    return any(n == stack or n.endswith(f"/{stack}") for n in cloud_stacks(url, run))


def holds_stack(url: str, stack: str, storage: Any, run: Callable[..., Any] = subprocess.run) -> bool | None:
    """Whether the backend at ``url`` holds ``stack``; None when this account cannot read it."""
    if is_cloud(url):
        return in_cloud(url, stack, run)
    names = listed(url, storage)
    return None if names is None else holds(names, stack)


def in_other_organization(home: Home, run: Callable[..., Any] = subprocess.run) -> Known | None:
    """For a Pulumi Cloud home: the stack in another organization of the same Cloud (the one a teammate's default
    organization would have made), or None."""
    names = cloud_stacks(home.backend, run, home.organization)
    other = next((n.split("/")[0] for n in names if n.endswith(f"/{home.stack}") and n.count("/") == 1), None)
    if other is None or other == home.organization:
        return None
    return Known(
        home.backend,
        f"Pulumi Cloud, in the organization {other} and not {home.organization}",
        f"if that is the stack, record its organization instead ({ORG_KEY}: {other} in Pulumi.{home.stack}.yaml); "
        f"else rename one of the two (pulumi stack rename)",
    )


def found_elsewhere(
    home: Home, lookup: Lookup, storage: Any, run: Callable[..., Any] = subprocess.run
) -> tuple[Known | None, list[str]]:
    """The first known backend that holds the stack (None: none does), and one line per backend that could not be
    asked (it is skipped only when this account may not read it), the CLI's logins that could not be known first."""
    failures = list(lookup.failures)
    for other in lookup.backends:
        try:
            if holds_stack(other.url, home.stack, storage, run):
                return other, []
        except StateError as err:
            failures.append(f"{other.url} ({other.why}): {err}")
    if is_cloud(home.backend) and home.organization:
        try:
            found = in_other_organization(home, run)
        except StateError as err:
            failures.append(f"{home.backend} (the stack's home, in its other organizations): {err}")
        else:
            if found is not None:
                return found, []
    return None, failures
