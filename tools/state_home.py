"""A stack's state home: where its Pulumi state lives and the Cloud KMS key its secrets are encrypted with, decided
from the repository's stack files alone (plain functions, no network; ``tools/state.py`` runs them).

The home is a property of the stack, not of the operator's login. ``Pulumi.<stack>.yaml`` records it as
``tpu-rl:stateBackend`` (committed, so every clone and CI job finds it), and a Pulumi Cloud home its organization as
``tpu-rl:stateOrganization``: a Cloud stack name without one resolves in each operator's default organization
(pulumi/pulumi ``pkg/backend/httpstate/backend.go`` ``New``: ``PULUMI_DEFAULT_ORGANIZATION``, else the
``pulumi org set-default`` one, else the account's; ``ParseStackReference`` fills the owner from it). A stack that
records none gets a bucket of its own, ``gs://<gcp:project>-pulumi-state-<stack>``, and a key in a ring of its own,
``projects/<gcp:project>/locations/global/keyRings/pulumi-state-<stack>/cryptoKeys/state`` (``core.state_names``).
Dev and prod in one Google project thus never share a bucket, a lock folder, a key or a key ring, so an account
granted one stack's state reads nothing of the other's. ``decide`` refuses, in one line (``StateError``, exit 2): a
home or key that another stack file of the repository holds, the project's shared bucket or key of earlier versions,
a protected stack's key in the shared ring of earlier versions, ``STATE_BACKEND``, ``STATE_ORG`` or
``PULUMI_BACKEND_URL`` disagreeing with what is recorded, a Pulumi Cloud home without its organization, a file
backend inside the checkout, a name no bucket or key can have, and a passphrase for a protected stack.
``with_record`` writes the home into the stack file, line by line, keeping its comments.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from core.config.formats import BUCKET_NAME, STATE_BACKEND
from core.config.placeholders import EXAMPLE_PROJECTS
from core.errors import BadInputError
from core.inputs import InputError, parse_yaml
from core.names import PROJECT
from core.printed_commands import pulumi_command
from core.redact import scrub
from core.state_names import (
    KEY_ID,
    KEY_LOCATION,
    in_shared_ring,
    is_legacy_key,
    key_name,
    legacy_bucket,
    ring_id,
    state_bucket,
    state_key,
)
from tools.stack_files import StackFileError, read_yaml
from tools.state_export import StateError

BACKEND_KEY = f"{PROJECT}:stateBackend"
ORG_KEY = f"{PROJECT}:stateOrganization"
ORG_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
"""A Pulumi Cloud organization's name as it prefixes a qualified stack name (``<org>/<stack>``)."""
CLOUD = "https://api.pulumi.com"
STACK_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")
"""A stack name as Pulumi allows it (sdk/go/common/tokens ``ValidateStackName``: letters, digits, '-', '_', '.')."""


class StateRefusedError(StateError, BadInputError):
    """Bad input: a home, key, bucket or name that is another stack's or none at all (one line, exit 2)."""


HOME_HELP = "docs/state.md#where-the-state-lives"
MOVE_HELP = "docs/state.md#moving-a-stack-to-a-home-of-its-own"


@dataclass(frozen=True)
class StackFile:
    """What the state tools read of one ``Pulumi.<stack>.yaml``."""

    stack: str
    name: str
    """The file's name, ``Pulumi.<stack>.yaml``."""
    project: str
    """``gcp:project`` ("" when unset or the example's placeholder)."""
    region: str
    recorded: str
    """``tpu-rl:stateBackend`` ("" when the file records none)."""
    organization: str
    """``tpu-rl:stateOrganization``: a Pulumi Cloud home's organization ("" when the file records none)."""
    secrets_provider: str
    """The top-level ``secretsprovider`` the CLI wrote ("" when none)."""
    salt: bool
    """The file has an ``encryptionsalt``: its secrets are encrypted with a passphrase."""
    protect: bool
    capacity_check: bool
    """``tpu-rl:workflow.capacityCheck`` (default true): false skips the permission checks too."""


@dataclass(frozen=True)
class Home:
    """Where a stack's state lives and what encrypts its secrets."""

    stack: str
    backend: str
    """The URL every Pulumi command of the stack gets as ``PULUMI_BACKEND_URL``."""
    origin: str
    """Where the URL comes from: ``recorded`` (the stack file), ``STATE_BACKEND`` or ``default``."""
    secrets_provider: str
    """What encrypts the stack's secrets: the stack file's provider, else what ``pulumi stack init`` is given
    (empty: the backend's own default, Pulumi Cloud's or the diy backend's passphrase)."""
    passphrase: bool
    project: str
    region: str
    organization: str = ""
    """A Pulumi Cloud home's organization, which every command gets as ``PULUMI_DEFAULT_ORGANIZATION`` ("" for a
    self-managed backend, which has none)."""

    @property
    def bucket(self) -> str:
        """The bucket of a ``gs://`` home ("" otherwise)."""
        return urlparse(self.backend).netloc if self.backend.startswith("gs://") else ""

    @property
    def prefix(self) -> str:
        """The folder inside the bucket (or nothing): Pulumi keeps ``.pulumi/`` under it (diy ``New``:
        ``blob.PrefixedBucket``)."""
        return urlparse(self.backend).path.strip("/") if self.backend.startswith("gs://") else ""

    @property
    def key(self) -> str:
        """The Cloud KMS key of a ``gcpkms://`` provider ("" otherwise)."""
        return kms_key(self.secrets_provider)


def kms_key(provider: str) -> str:
    """``projects/P/locations/L/keyRings/R/cryptoKeys/K`` of a ``gcpkms://`` secrets provider URL, else ""."""
    return key_name(provider) if provider.startswith("gcpkms://") else ""


def is_cloud(url: str) -> bool:
    return url.startswith(("https://", "http://"))


def same(a: str, b: str) -> bool:
    return a.rstrip("/") == b.rstrip("/")


def read_stack_file(stack: str, root: Path) -> StackFile:
    """``Pulumi.<stack>.yaml`` of ``root``, or StateError naming what is wrong."""
    path = root / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        raise StateRefusedError(
            f"no stack file {path.name}: a stack's settings, state home and key are recorded there; copy "
            "Pulumi.dev.yaml to it and set gcp:project"
        )
    try:
        document = read_yaml(path)
    except StackFileError as err:
        raise StateRefusedError(str(err)) from None
    document = document if isinstance(document, dict) else {}
    found = document.get("config")
    config: dict[str, Any] = found if isinstance(found, dict) else {}
    workflow = config.get(f"{PROJECT}:workflow")
    check = workflow.get("capacityCheck", True) if isinstance(workflow, dict) else True
    project = _text(config.get("gcp:project"))
    return StackFile(
        stack=stack,
        name=path.name,
        project="" if project in EXAMPLE_PROJECTS else project,
        region=_text(config.get("gcp:region")) or "us-east5",
        recorded=_text(config.get(BACKEND_KEY)),
        organization=_text(config.get(ORG_KEY)),
        secrets_provider=_text(document.get("secretsprovider")),
        salt=bool(document.get("encryptionsalt")),
        protect=_truth(config.get(f"{PROJECT}:protect"), False),
        capacity_check=_truth(check, True),
    )


def other_stack_files(stack: str, root: Path) -> list[StackFile]:
    """Every other stack file of the repository that reads (one that does not is no one's home)."""
    found = []
    for path in sorted(root.glob("Pulumi.*.yaml")):
        other = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
        if other == stack or not STACK_NAME.fullmatch(other):
            continue
        try:
            found.append(read_stack_file(other, root))
        except StateRefusedError:
            continue
    return found


def _text(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _truth(value: Any, default: bool) -> bool:
    """A boolean as `pulumi config set` writes it ("true") or as YAML reads it (true)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return default


# ---------------------------------------------------------------------------------------------
# The names a stack gets when it records none


def default_bucket(project: str, stack: str) -> str:
    """``<gcp:project>-pulumi-state-<stack>``, or StateError when that is no bucket name (GCS: 3-63 lowercase
    letters, digits, '-', '_')."""
    name = state_bucket(project, stack)
    if not BUCKET_NAME.matches(name):
        raise StateRefusedError(
            f"stack {stack}'s default state bucket {scrub(name, limit=100)} is not a bucket name ("
            f"{BUCKET_NAME.allowed}): name one with `make stack STACK={stack} STATE_BACKEND=gs://<bucket>`, which "
            f"records it in Pulumi.{stack}.yaml"
        )
    return name


def own_key(project: str, stack: str) -> str:
    """The stack's own key in its own ring, or StateError when the stack's name cannot name the ring."""
    ring = ring_id(stack)
    if not KEY_ID.fullmatch(ring):
        raise StateRefusedError(
            f"stack {stack}'s name cannot name a Cloud KMS key ring ({ring}: letters, digits, '_' and '-', at most "
            f"63): name a key in a ring of its own with SECRETS_PROVIDER=gcpkms://projects/{project}/locations/"
            f"{KEY_LOCATION}/keyRings/<ring>/cryptoKeys/state"
        )
    return state_key(project, stack)


def target_key(home: Home) -> str:
    """The key a stack's secrets belong in: the stack file's Cloud KMS key when it is one of the stack's choosing
    (in its project, neither the shared key nor in the shared ring of earlier versions), else the stack's own in its
    own ring (for those, a passphrase or a new stack)."""
    key = home.key
    if key and not is_legacy_key(key) and not in_shared_ring(key) and key.startswith(f"projects/{home.project}/"):
        return key
    return own_key(home.project, home.stack)


def home_of(other: StackFile) -> str:
    """Another stack file's home as its own commands would find it ("" when it cannot be told)."""
    if other.recorded:
        return other.recorded
    try:
        return f"gs://{default_bucket(other.project, other.stack)}" if other.project else ""
    except StateRefusedError:
        return ""


# ---------------------------------------------------------------------------------------------
# Deciding


def decide(
    stack: str,
    root: Path,
    *,
    env_url: str = "",
    explicit: str = "",
    secrets_provider: str = "",
    local_ok: bool = False,
    allow_passphrase: bool = False,
    shared_key_ok: bool = False,
    organization: str = "",
) -> Home:
    """The stack's home, or StateError (one line) on a conflict. ``env_url``: ``PULUMI_BACKEND_URL``;
    ``explicit``: ``STATE_BACKEND``; ``organization``: ``STATE_ORG``; ``shared_key_ok``: a bucket or key another stack
    holds or held is not refused (`make state-bucket` and `make state-move`, which give the stack its own).

    A stack's secrets use a passphrase when its file says so (``secretsprovider: passphrase``, or an
    ``encryptionsalt``), when ``SECRETS_PROVIDER=passphrase`` creates it, or when a self-managed backend would use
    its default provider, which is the passphrase, ``PULUMI_CONFIG_PASSPHRASE`` or not (pulumi/pulumi
    ``pkg/backend/diy/backend.go`` ``DefaultSecretManager``); a ``gs://`` home never does, as its new stack is
    given its own key. Pulumi Cloud's default provider is its own, per stack."""
    if not STACK_NAME.fullmatch(stack):
        raise StateRefusedError(f"{scrub(stack, limit=40)!r} is not a stack name (letters, digits, '-', '_', '.')")
    own = read_stack_file(stack, root)
    for source, url in ((f"{own.name}: {BACKEND_KEY}", own.recorded), ("STATE_BACKEND", explicit)):
        if url and not STATE_BACKEND.matches(url):
            raise StateRefusedError(
                f"{source} = {scrub(url, limit=120)!r} is not a state home: {STATE_BACKEND.allowed}"
            )
    if own.recorded and explicit and not same(own.recorded, explicit):
        raise StateRefusedError(
            f"STATE_BACKEND is {scrub(explicit, limit=120)}, but {own.name} records {BACKEND_KEY}: {own.recorded}: "
            f"leave STATE_BACKEND out (every command uses the recorded home), or move the stack ({MOVE_HELP})"
        )
    backend, origin = _backend(own, explicit)
    if shared_key_ok and own.project and is_legacy_home(own.project, backend):
        # `make state-bucket` and `make state-move` give a stack recorded in the shared bucket its own bucket
        backend, origin = f"gs://{default_bucket(own.project, own.stack)}", "default"
    if env_url and not same(env_url, backend):
        where = {"recorded": f"recorded in {own.name}", "STATE_BACKEND": "given as STATE_BACKEND"}.get(origin, "")
        raise StateRefusedError(
            f"PULUMI_BACKEND_URL is {scrub(env_url, limit=120)}, but stack {stack}'s state lives in {backend} "
            f"({where or 'its default: ' + own.name + ' records no ' + BACKEND_KEY}): unset PULUMI_BACKEND_URL; "
            "`make` passes the stack's home to every pulumi command itself"
        )
    org = _organization(own, backend, origin, organization)
    _refuse_inside(backend, root, local_ok, stack)
    others = other_stack_files(stack, root)
    _refuse_shared_bucket(stack, own, backend, origin, others)
    provider = _provider(own, backend, secrets_provider)
    if not shared_key_ok:
        _refuse_earlier_homes(own, backend, origin, kms_key(provider))
        _refuse_shared_key(stack, own, provider, others)
    passphrase = provider == "passphrase" or (not provider and not is_cloud(backend))
    if passphrase and own.protect and not allow_passphrase:
        if own.secrets_provider or own.salt:
            fix = f"move them to a key of its own: make state-bucket STACK={stack}, then make state-move STACK={stack}"
        else:
            key = state_key(own.project or "<project>", stack)
            fix = f"create it with a key of its own: SECRETS_PROVIDER=gcpkms://{key}"
        raise StateRefusedError(
            f"stack {stack} is protected ({PROJECT}:protect: true) and its secrets would be encrypted with a "
            f"passphrase, a shared string no one can revoke from one holder and whose loss loses every secret: {fix} "
            f"({MOVE_HELP}), or accept the passphrase with ALLOW_PASSPHRASE=1"
        )
    return Home(stack, backend, origin, provider, passphrase, own.project, own.region, org)


def _organization(own: StackFile, backend: str, origin: str, asked: str) -> str:
    """A Pulumi Cloud home's organization (the file's ``tpu-rl:stateOrganization``, else ``STATE_ORG`` for a stack
    that records none), or StateRefusedError: a Cloud home without one, one for a self-managed backend, or two that
    disagree."""
    for source, name in ((f"{own.name}: {ORG_KEY}", own.organization), ("STATE_ORG", asked)):
        if name and not ORG_NAME.fullmatch(name):
            raise StateRefusedError(
                f"{source} = {scrub(name, limit=60)!r} is not a Pulumi Cloud organization's name (letters, digits, "
                "'-', '_', '.')"
            )
    if own.organization and asked and asked != own.organization:
        raise StateRefusedError(
            f"STATE_ORG is {asked}, but {own.name} records {ORG_KEY}: {own.organization}: leave STATE_ORG out "
            "(every command uses the recorded organization)"
        )
    org = own.organization or asked
    if not is_cloud(backend):
        if org:
            given = "STATE_ORG" if asked and not own.organization else f"{own.name}'s {ORG_KEY}"
            raise StateRefusedError(
                f"{given} names the Pulumi Cloud organization {org}, but stack {own.stack}'s state lives in "
                f"{backend}, a self-managed backend, which has no organizations: "
                f"{'leave STATE_ORG out' if given == 'STATE_ORG' else 'remove the key from the file'}"
            )
        return ""
    if not org:
        given = f" STATE_BACKEND={backend}" if origin == "STATE_BACKEND" else ""
        raise StateRefusedError(
            f"stack {own.stack}'s state home {backend} names no organization: each operator's pulumi would look for "
            f"stack {own.stack} in their own default organization, and one whose default is another would create a "
            f"second, empty {own.stack} there; record the stack's organization: make stack STACK={own.stack}{given} "
            f"STATE_ORG=<organization> ({HOME_HELP})"
        )
    return org


def _refuse_earlier_homes(own: StackFile, backend: str, origin: str, key: str) -> None:
    """The homes earlier versions gave stacks, refused for every stack, `make state-move` the fix: the project's
    shared bucket and shared key, which every stack of the project used (its readers and decrypters are every
    stack's), and for a protected stack its key in the shared ring, whose IAM policy every key in it inherits."""
    stack, move = own.stack, f"make state-bucket STACK={own.stack}, then make state-move STACK={own.stack}"
    if own.project and is_legacy_home(own.project, backend):
        given = {"recorded": f"recorded in {own.name}", "STATE_BACKEND": "given as STATE_BACKEND"}.get(origin, "")
        raise StateRefusedError(
            f"stack {stack}'s state home {backend} ({given or 'its default'}) is the project's shared state bucket of "
            "earlier versions, which every stack of the project used: whoever may read one stack's state there reads "
            f"the others' and takes their locks; move the stack to a bucket and key of its own: {move} ({MOVE_HELP})"
        )
    if key and is_legacy_key(key):
        raise StateRefusedError(
            f"stack {stack}'s secrets key {key} is the project's shared key of earlier versions, which encrypted every "
            "stack's secrets: whoever may decrypt one stack's secrets decrypts the others'; move the stack to a key of "
            f"its own: {move} ({MOVE_HELP})"
        )
    if key and in_shared_ring(key) and own.protect:
        raise StateRefusedError(
            f"stack {stack} is protected ({PROJECT}:protect: true) and its secrets key {key} is in the key ring that "
            "every stack's key shared in earlier versions: whoever administers any key there may set the ring's IAM "
            f"policy, which every key in it inherits, and grant itself decrypt on this one; move it to a ring of its "
            f"own: {move} ({MOVE_HELP})"
        )


def is_legacy_home(project: str, backend: str) -> bool:
    """Whether ``backend`` is the project's shared bucket of earlier versions, or a folder of it."""
    legacy = f"gs://{legacy_bucket(project)}"
    return same(backend, legacy) or backend.startswith(f"{legacy}/")


def ring_warning(home: Home) -> str | None:
    """One warning line for a stack whose key is in the shared ring of earlier versions (a protected one is
    refused: ``_refuse_earlier_homes``), else None."""
    if not home.key or not in_shared_ring(home.key) or is_legacy_key(home.key):
        return None
    return (
        f"warning: stack {home.stack}'s secrets key {home.key} is in the key ring every stack's key shared in earlier "
        "versions, whose IAM policy every key in it inherits: move it to a ring of its own with make state-bucket "
        f"STACK={home.stack}, then make state-move STACK={home.stack} ({MOVE_HELP})"
    )


def _backend(own: StackFile, explicit: str) -> tuple[str, str]:
    if own.recorded:
        return own.recorded, "recorded"
    if explicit:
        return explicit.rstrip("/"), "STATE_BACKEND"
    if not own.project:
        raise StateRefusedError(
            f"{own.name} has no gcp:project of yours (unset, or the example's placeholder): set your project id in "
            f"the file first; the stack's state bucket is named after it"
        )
    return f"gs://{default_bucket(own.project, own.stack)}", "default"


def _refuse_inside(backend: str, root: Path, local_ok: bool, stack: str) -> None:
    folder = inside(backend, root)
    if folder is not None and not local_ok:
        raise StateRefusedError(
            f"stack {stack}'s state home {backend} is a file backend inside this checkout "
            f"({folder.relative_to(root.resolve())}/): deleting or re-cloning the folder would lose the stack's "
            f"state while its cluster and TPU pool keep billing; give it a bucket of its own (make state-bucket "
            f"STACK={stack}), or accept it with LOCAL_STATE=1"
        )


def _refuse_shared_bucket(stack: str, own: StackFile, backend: str, origin: str, others: list[StackFile]) -> None:
    """A bucket is one IAM boundary: two stacks in it share their readers, their writers and their lock folder."""
    if not backend.startswith("gs://"):
        return
    bucket = urlparse(backend).netloc
    for other in others:
        theirs = home_of(other)
        if theirs.startswith("gs://") and urlparse(theirs).netloc == bucket:
            given = {"recorded": f"recorded in {own.name}", "STATE_BACKEND": "given as STATE_BACKEND"}
            raise StateRefusedError(
                f"stack {stack}'s state home {backend} ({given.get(origin, 'its default')}) is in gs://{bucket}, "
                f"stack {other.stack}'s state bucket ({other.name}): whoever may read one stack's state there reads "
                f"the other's, and takes its lock; give stack {stack} a bucket of its own ({HOME_HELP})"
            )


def _provider(own: StackFile, backend: str, asked: str) -> str:
    """The stack file's secrets provider; for a file without one, what ``stack init`` is given."""
    current = own.secrets_provider or ("passphrase" if own.salt else "")
    if current and asked and asked != current:
        change = pulumi_command(own.stack, "stack", "change-secrets-provider", "<provider>")
        raise StateRefusedError(
            f"SECRETS_PROVIDER is {scrub(asked, limit=160)}, but {own.name}'s secrets are encrypted by {current}: "
            "`pulumi stack init` would make a new data key and every secret in the file would be lost; change it "
            f"with `{change}` instead"
        )
    if current:
        return current
    if asked:
        return asked
    if backend.startswith("gs://"):
        if not own.project:
            raise StateRefusedError(f"{own.name} has no gcp:project of yours: the stack's key is in that project")
        return f"gcpkms://{own_key(own.project, own.stack)}"
    return ""


def _refuse_shared_key(stack: str, own: StackFile, provider: str, others: list[StackFile]) -> None:
    key = kms_key(provider)
    if not key:
        return
    for other in others:
        if kms_key(other.secrets_provider) == key:
            raise StateRefusedError(
                f"stack {stack}'s secrets key {key} encrypts stack {other.stack}'s secrets too "
                f"({other.name}): whoever may decrypt one stack's secrets decrypts the other's; give stack {stack} a "
                f"key and bucket of its own: make state-bucket STACK={stack}, then make state-move STACK={stack} "
                f"({MOVE_HELP})"
            )


def inside(url: str, root: Path) -> Path | None:
    """The folder of a `file://` backend when it is inside `root` (the checkout), else None."""
    folder = file_folder(url)
    if folder is None:
        return None
    folder = folder.resolve()
    return folder if folder == root.resolve() or root.resolve() in folder.parents else None


def file_folder(url: str) -> Path | None:
    """The folder of a `file://` backend URL (`file://~` is the home folder), else None."""
    parsed = urlparse(url)
    if parsed.scheme != "file":
        return None
    folder = Path(os.path.expanduser(unquote(parsed.netloc + parsed.path) or "~"))
    return folder if folder.is_absolute() else Path.cwd() / folder


# ---------------------------------------------------------------------------------------------
# Recording the home in the stack file


def with_record(text: str, url: str, name: str, key: str = BACKEND_KEY) -> str:
    """``text`` (a stack file) with ``<key>: <url>`` (``tpu-rl:stateBackend`` by default) appended to its
    ``config:`` block, every other line kept as it was (comments and layout included), as `pulumi config set` appends
    a new key; StateRefusedError when the result would read as anything but the same file with that one key more."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    start = next((i for i, line in enumerate(lines) if re.fullmatch(r"config:[ \t]*(#.*)?\n", line)), None)
    entry = f"{key}: {url}\n"
    if start is None:
        written = "".join(lines) + "config:\n  " + entry
    else:
        end, indent = start + 1, "  "
        for i in range(start + 1, len(lines)):
            line = lines[i]
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if not line[:1].isspace():
                break
            if end == start + 1:
                indent = line[: len(line) - len(line.lstrip())]
            end = i + 1
        written = "".join(lines[:end]) + indent + entry + "".join(lines[end:])
    try:
        before, after = parse_yaml(text, name) or {}, parse_yaml(written, name)
    except InputError as err:
        raise StateRefusedError(str(err)) from None
    config = before.get("config") if isinstance(before, dict) else None
    wanted = {**before, "config": {**(config if isinstance(config, dict) else {}), key: url}}
    if not isinstance(before, dict) or (config is not None and not isinstance(config, dict)) or after != wanted:
        raise StateRefusedError(f"{name} cannot take `{key}: {url}` here; add it under config: yourself")
    return written


def with_value(text: str, name: str, key: str, value: str) -> str:
    """``text`` (a stack file) with the value of its ``config:`` key ``key`` replaced by ``value`` on its own line,
    every other line (and that line's comment) kept; StateRefusedError when the result would read as anything but the
    same file with that one value changed."""
    found = list(re.finditer(rf"^([ \t]+){re.escape(key)}:[ \t]*[^#\n]*?([ \t]+#[^\n]*)?$", text, re.M))
    if len(found) != 1:
        raise StateRefusedError(f"{name} cannot take `{key}: {value}` here; set it under config: yourself")
    line = found[0]
    written = f"{text[: line.start()]}{line.group(1)}{key}: {value}{line.group(2) or ''}{text[line.end() :]}"
    try:
        before, after = parse_yaml(text, name), parse_yaml(written, name)
    except InputError as err:
        raise StateRefusedError(str(err)) from None
    config = before.get("config") if isinstance(before, dict) else None
    if not isinstance(config, dict) or after != {**before, "config": {**config, key: value}}:
        raise StateRefusedError(f"{name} cannot take `{key}: {value}` here; set it under config: yourself")
    return written


def record(home: Home, root: Path, *, rewrite: bool = False) -> None:
    """Write the home, and a Pulumi Cloud home's organization, into the stack file when it records none
    (``with_record``: nothing is written when the file cannot take it), and say so; ``rewrite`` (`make state-move`):
    a recorded home that is not ``home``'s is replaced (``with_value``)."""
    own = read_stack_file(home.stack, root)
    path = root / own.name
    if rewrite and own.recorded and not same(own.recorded, home.backend):
        path.write_text(with_value(path.read_text(), own.name, BACKEND_KEY, home.backend))
        print(
            f"recorded {BACKEND_KEY}: {home.backend} in {own.name}, where it was {own.recorded}: commit it, so that "
            "every clone and CI job finds the state there"
        )
    if not own.recorded:
        path.write_text(with_record(path.read_text(), home.backend, own.name))
        print(
            f"recorded {BACKEND_KEY}: {home.backend} in {own.name}: commit it, so that every clone and CI job finds "
            "the state there"
        )
    if home.organization and not own.organization:
        path.write_text(with_record(path.read_text(), home.organization, own.name, ORG_KEY))
        print(
            f"recorded {ORG_KEY}: {home.organization} in {own.name}: commit it, so that every clone and CI job finds "
            f"stack {home.stack} in that organization"
        )
