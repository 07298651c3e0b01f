"""The shared Hub cache's bucket (``tpu-rl:model.hubCache``): the stack does not create it, it only grants its
identities roles on it bounded to the folder by IAM conditions (``infra.gcp.access``), so before anything is created
one ``buckets.get`` (google-cloud-storage ``Client.get_bucket``, bounded like every read) says whether it can serve:

- it exists (otherwise the grants' create fails after the network, the cluster and the identities exist);
- uniform bucket-level access is on: "You must enable uniform bucket-level access on the bucket before adding
  conditions." (https://cloud.google.com/storage/docs/access-control/using-iam-permissions, "Use IAM Conditions on
  buckets");
- its data is in ``gcp:region``, where the conversion that reads ~52 GB from it per new run and the training nodes
  are (``workloads/container/base_snapshot.py``): https://cloud.google.com/storage/pricing, "Data transfer within
  Google Cloud": free when "Data moves within the same location" ("A region is not considered the same location as a
  multi-region, even if the region is within the geographic limits of a multi-region") or "from a Cloud Storage
  bucket located in a dual-region to a different Google Cloud service located in one of the regions that make up the
  dual-region"; any other read is billed per GiB by the bucket's and the destination's locations;
- the account running `up` may read and set the bucket's IAM policy, where the steps' grants go
  (``gcp.storage.BucketIAMMember`` reads the policy and sets it again): the project's ``testIamPermissions`` cannot
  say it for a bucket that may live in another project or carry its own grants, so the bucket itself is asked
  (``buckets.testIamPermissions``, google-cloud-storage ``Bucket.test_iam_permissions``: "Tests a set of permissions on
  the given bucket to see which, if any, are held by the caller",
  https://cloud.google.com/storage/docs/json_api/v1/buckets/testIamPermissions). Without them the grants' create
  fails after the network, the cluster and the identities exist;
- it is no stack's artifacts bucket (its labels, ``infra.gcp.storage.bucket_args``: ``app`` and ``stack``): that
  bucket is emptied by its stack's destroy with ``forceDestroy`` and written by its steps (the stack's own bucket is
  refused with the configuration already, ``core.config.rules``);
- who may write the folder: the bucket's IAM policy (``buckets.getIamPolicy``, version 3 for the conditions,
  https://cloud.google.com/storage/docs/json_api/v1/buckets/getIamPolicy) and the policies of the managed folders
  that hold or lie in the folder (``managedFolders.list`` and ``managedFolders.getIamPolicy``,
  https://cloud.google.com/storage/docs/json_api/v1/managedFolder). Every member (``deleted:`` ones aside) whose role
  creates, replaces or deletes objects (``WRITE_ROLES``) on the folder, granted on the bucket or a managed folder,
  with no condition, a condition bounding it to object-name prefixes that overlap the folder, or a condition this
  check cannot read (counted as covering the folder), is one warning line, the project's convenience members
  (``projectOwner:``, ``projectEditor:``) included; a role it cannot tell (a custom role, whose permissions it does not
  read, or a predefined one outside its tables) is one warning line too. The stack's own conversion is not named. A
  grant of another stack's shape (a service account's write role bounded to the folder, as
  ``infra.gcp.access.hub_cache_grants`` makes the writer's) is a stop where it cannot be the named writer's
  (``tpu-rl:model.hubCacheWriter``): in the writer stack, any other; in a reader, two or more (a cache has one writer).
  No writer can make a stack use a wrong byte (every cached file is hashed against the Hub's value, offline against
  the stack's own record: ``workloads/container/base_snapshot.py``): the warnings name who could, at worst, cost the
  stacks a fetch from the Hub. A role held on the bucket's project (or above), which the bucket inherits, is in
  neither policy and not read here; the convenience members stand for the project's basic roles.

Each is one line naming the conflict and what to run, before anything is created. Without a shared cache nothing is
read."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from core import deadline
from core.names import step_account
from core.printed_commands import ANY_STACK, pulumi_config_set
from core.redact import scrub
from core.settings import Settings
from core.steps import HUB_CACHE_FILLER
from infra.gcp.access import HUB_CACHE_WRITE_ROLES, READER_ROLE
from infra.gcp.capacity.findings import Finding
from infra.gcp.capacity.reads import Clients, ReadFailedError, ReplyError, as_text, bounded_read

KEY = "tpu-rl:model.hubCache"
SOURCE = "Cloud Storage (buckets.get)"
PERMISSIONS_SOURCE = "Cloud Storage (buckets.testIamPermissions)"
POLICY_SOURCE = "Cloud Storage (buckets.getIamPolicy)"
FOLDERS_SOURCE = "Cloud Storage (managedFolders.list, managedFolders.getIamPolicy)"
WRITER_KEY = "tpu-rl:model.hubCacheWriter"
ON_BUCKET = ("storage.buckets.getIamPolicy", "storage.buckets.setIamPolicy")
"""What `up` does on the shared bucket besides reading it: the steps' grants (roles/storage.admin grants both)."""


@dataclass(frozen=True)
class HubBucket:
    """A bucket as the JSON API's ``buckets.get`` answers it, the fields the shared cache needs."""

    location: str
    """``US-EAST5``, ``US``, ``NAM4`` (GCS writes it upper-case)."""
    location_type: str
    """``region`` | ``dual-region`` | ``multi-region`` ("" when the reply gives none)."""
    data_locations: tuple[str, ...]
    """A configurable dual-region's regions (``customPlacementConfig.dataLocations``); () otherwise."""
    uniform: bool
    """``iamConfiguration.uniformBucketLevelAccess.enabled``."""
    labels: dict[str, str] = field(default_factory=dict)
    """The bucket's labels: a stack's artifacts bucket carries ``app`` and ``stack`` (``Settings.labels``)."""


WRITE_ROLES = frozenset(
    {
        *HUB_CACHE_WRITE_ROLES,
        "roles/storage.admin",
        "roles/storage.legacyBucketOwner",
        "roles/storage.legacyBucketWriter",
        "roles/storage.legacyObjectOwner",
        "roles/storage.folderAdmin",
        "roles/owner",
        "roles/editor",
    }
)
"""The predefined roles that hold ``storage.objects.create``, ``delete`` or ``update``: "IAM roles for Cloud Storage"
(https://cloud.google.com/storage/docs/access-control/iam-roles; google-cloud-storage's ``StorageRoles``:
legacyBucketOwner and legacyBucketWriter hold ``storage.objects.create`` and ``delete``, legacyObjectOwner
``storage.objects.update``), and the basic Owner and Editor roles."""
READ_ROLES = frozenset(
    {READER_ROLE, "roles/storage.legacyBucketReader", "roles/storage.legacyObjectReader", "roles/viewer"}
)
"""The predefined roles that hold none of them (the same page). Any other role is one the check cannot tell."""
CONVENIENCE = {"projectOwner": "roles/owner", "projectEditor": "roles/editor", "projectViewer": "roles/viewer"}
"""A convenience member stands for every holder of a basic role on a project (Cloud Storage's IAM overview,
https://cloud.google.com/storage/docs/iam, its convenience values; a new bucket grants the project's owners and
editors ``legacyBucketOwner``)."""


@dataclass(frozen=True)
class WriteGrant:
    """One member of the bucket's, or a managed folder's, IAM policy whose role may write objects of the cache's
    folder (``writes``; False: a role the check cannot tell)."""

    member: str
    role: str
    prefixes: tuple[str, ...]
    """The object-name prefixes of its condition that overlap the folder; () for a grant with no condition, or one
    whose condition the check cannot read (``conditioned``)."""
    conditioned: bool = False
    managed_folder: str = ""
    """The managed folder it is granted on ("": the bucket)."""
    writes: bool = True

    @property
    def stack_shaped(self) -> bool:
        """A stack's grant: a service account's object-writing role on the bucket, bounded to prefixes
        (``infra.gcp.access.BucketGrant.condition``)."""
        shaped = self.member.startswith("serviceAccount:") and self.role in HUB_CACHE_WRITE_ROLES
        return shaped and bool(self.prefixes) and not self.managed_folder


def create_command(bucket: str, region: str) -> str:
    return f"gcloud storage buckets create gs://{bucket} --location={region} --uniform-bucket-level-access"


def hub_cache_findings(bucket: str, region: str, found: HubBucket | None) -> list[Finding]:
    """Whether the bucket ``bucket`` (None: it does not exist) can hold the shared Hub cache of a stack in ``region``
    (pure)."""
    if found is None:
        return [
            Finding(
                "problem",
                f"{KEY}: bucket gs://{bucket} does not exist; create it once: {create_command(bucket, region)}",
            )
        ]
    findings: list[Finding] = []
    if not found.uniform:
        findings.append(
            Finding(
                "problem",
                f"{KEY}: bucket gs://{bucket} has uniform bucket-level access off, and the stack's grants on it carry "
                f"IAM conditions, which need it: gcloud storage buckets update gs://{bucket} "
                "--uniform-bucket-level-access",
            )
        )
    here = region.upper()
    if found.location.upper() == here or here in {place.upper() for place in found.data_locations}:
        return findings
    kind = f"{found.location_type} " if found.location_type else ""
    elsewhere = (
        f"the conversion reads ~52 GB from it per new run in {region} (gcp:region), and Cloud Storage bills reads "
        "out of a bucket's location as data transfer"
    )
    if found.location_type == "dual-region" and not found.data_locations:
        # A dual-region whose reply names no regions (no customPlacementConfig: a predefined one, NAM4, EUR4, ...).
        findings.append(
            Finding(
                "unknown",
                f"{KEY}: bucket gs://{bucket} is in dual-region {found.location}; {elsewhere}, unless {region} is one "
                f"of its two regions (https://cloud.google.com/storage/docs/locations): if it is not, use a bucket in "
                f"{region} ({create_command('NEW-BUCKET', region)})",
            )
        )
        return findings
    findings.append(
        Finding(
            "problem",
            f"{KEY}: bucket gs://{bucket} is in {kind}{found.location}, not in {region}: {elsewhere}; use a bucket "
            f"in {region} ({create_command('NEW-BUCKET', region)})",
        )
    )
    return findings


def owner_findings(bucket: str, region: str, found: HubBucket, app: str) -> list[Finding]:
    """A bucket a stack of ``app`` made for its artifacts (its labels) cannot hold a cache other stacks read (pure)."""
    stack = found.labels.get("stack")
    if found.labels.get("app") != app or not stack:
        return []
    setting = pulumi_config_set(ANY_STACK, KEY, "gs://NEW-BUCKET/hub/")
    return [
        Finding(
            "problem",
            f"{KEY}: gs://{bucket} is stack {stack}'s artifacts bucket (its labels app={app}, stack={stack}), which "
            f"that stack's steps write and its destroy may empty; create a bucket of its own for the cache: "
            f"{create_command('NEW-BUCKET', region)}, then, in every stack that shares it, `{setting}`",
        )
    ]


def _where(grant: WriteGrant, bucket: str) -> str:
    if grant.managed_folder:
        return f"on managed folder gs://{bucket}/{grant.managed_folder}"
    if grant.prefixes:
        return f"on gs://{bucket}/{grant.prefixes[0]} (by an IAM condition)"
    if grant.conditioned:
        return "on the bucket under an IAM condition this check cannot read (counted as covering the folder)"
    return "on the bucket"


def _who(member: str) -> str:
    kind, _, project = member.partition(":")
    basic = CONVENIENCE.get(kind)
    return f"{member} (whoever holds {basic} on project {project})" if basic else member


def _removal(grant: WriteGrant, bucket: str) -> str:
    """The command that removes the grant."""
    target = f"managed-folders remove-iam-policy-binding gs://{bucket}/{grant.managed_folder}"
    where = target if grant.managed_folder else f"buckets remove-iam-policy-binding gs://{bucket}"
    every = " --all" if grant.conditioned or grant.prefixes else ""
    return f"gcloud storage {where} --member={grant.member} --role={grant.role}{every}"


def _describe_role(role: str) -> str:
    """The command that lists a role's permissions."""
    custom = re.fullmatch(r"(projects|organizations)/([^/]+)/roles/([^/]+)", role)
    if custom is None:
        return f"gcloud iam roles describe {role}"
    flag = "--project" if custom.group(1) == "projects" else "--organization"
    return f"gcloud iam roles describe {custom.group(3)} {flag}={custom.group(2)}"


def member_line(grant: WriteGrant, bucket: str, folder: str) -> str:
    """One line for a member that may write the cache's folder (or whose role the check cannot tell)."""
    cache = f"gs://{bucket}/{folder}"
    safe = (
        "the conversion uses no file of the cache before hashing it against the Hub's hash (offline, against the "
        "stack's own record), so such a writer can cost a fetch, not a wrong byte"
    )
    if not grant.writes:
        return (
            f"{KEY}: {_who(grant.member)} holds {grant.role} {_where(grant, bucket)}, and whether that role may write "
            f"objects of {cache} this check cannot tell (it reads no custom role's permissions): list them "
            f"({_describe_role(grant.role)}); {safe}"
        )
    return (
        f"{KEY}: {_who(grant.member)} may create, replace or delete objects of {cache}: {grant.role} "
        f"{_where(grant, bucket)}; {safe}; if it need not write there, remove it: {_removal(grant, bucket)}"
    )


def writer_findings(  # noqa: PLR0913 (the folder, who writes it, and which stack this is and should write)
    bucket: str, folder: str, grants: list[WriteGrant], own: str, stack: str, writer: str
) -> list[Finding]:
    """Every member but this stack's conversion (``own``) that may write the cache's folder, one line each (pure): a
    stop for a grant of a stack's shape that cannot be the writer stack's (``writer``: where this stack is it, any
    other; in a reader, two or more: a cache has one writer), a warning for every other."""
    others = sorted((g for g in grants if g.member != own), key=lambda g: (g.member, g.role, g.managed_folder))
    stacks = [g for g in others if g.stack_shaped]
    findings: list[Finding] = []
    if stack == writer:
        findings += [Finding("problem", _second_writer(g, bucket, stack)) for g in stacks]
    elif (count := len({g.member for g in stacks})) > 1:
        findings += [Finding("problem", _many_writers(g, bucket, count, writer)) for g in stacks]
    else:
        stacks = []
    return findings + [Finding("unknown", member_line(g, bucket, folder)) for g in others if g not in stacks]


def _second_writer(grant: WriteGrant, bucket: str, stack: str) -> str:
    return (
        f"{KEY}: {grant.member} holds {grant.role} on gs://{bucket}/{grant.prefixes[0]}, so another stack writes the "
        f"cache this stack is the writer of ({WRITER_KEY} = {stack}): a cache has one writer. Set {WRITER_KEY} to "
        f"that stack here (`{pulumi_config_set(stack, WRITER_KEY, '<writer-stack>')}`; this stack then only reads "
        f"it), or set it to {stack} in that stack and run its `make up` first (its conversion's grant becomes "
        "read-only)"
    )


def _many_writers(grant: WriteGrant, bucket: str, count: int, writer: str) -> str:
    return (
        f"{KEY}: {grant.member} holds {grant.role} on gs://{bucket}/{grant.prefixes[0]}, one of {count} stacks' "
        f"conversions that write the cache this stack reads, which has one writer ({WRITER_KEY} = {writer}): in each "
        f"stack that shares it, `{pulumi_config_set(ANY_STACK, WRITER_KEY, writer)}`, then run "
        f"`make up STACK=<stack>` in those that are not {writer} (their conversion's grant becomes read-only)"
    )


def permission_findings(bucket: str, held: list[str]) -> list[Finding]:
    """Whether the account running `up` holds ``ON_BUCKET`` on the bucket (pure)."""
    missing = [p for p in ON_BUCKET if p not in held]
    if not missing:
        return []
    return [
        Finding(
            "problem",
            f"{KEY}: the account running `up` lacks {', '.join(missing)} on bucket gs://{bucket}, where the stack "
            "grants its conversion and export their roles on the cache's folder; grant it roles/storage.admin on the "
            f"bucket: gcloud storage buckets add-iam-policy-binding gs://{bucket} --member=user:YOU "
            "--role=roles/storage.admin",
        )
    ]


def hub_bucket_reply(reply: Any, name: str) -> HubBucket:
    """The JSON API's bucket resource (a dict) ``name`` as the check reads it."""
    if reply.get("name") != name:
        raise ReplyError(f"name is {scrub(repr(reply.get('name')), limit=80)}, not {name}")
    iam = reply.get("iamConfiguration")
    uniform = iam.get("uniformBucketLevelAccess") if isinstance(iam, dict) else None
    enabled = uniform.get("enabled") if isinstance(uniform, dict) else None
    if not isinstance(enabled, bool):
        raise ReplyError("iamConfiguration.uniformBucketLevelAccess.enabled is missing")
    placement = reply.get("customPlacementConfig") or {}
    places = (placement.get("dataLocations") or []) if isinstance(placement, dict) else None
    if not isinstance(places, list):
        raise ReplyError("customPlacementConfig.dataLocations is not a list")
    labels = reply.get("labels") or {}
    if not isinstance(labels, dict):
        raise ReplyError("labels is not a map")
    return HubBucket(
        location=as_text(reply.get("location"), "location", 60),
        location_type=as_text(reply.get("locationType") or "", "locationType", 40),
        data_locations=tuple(
            as_text(place, f"customPlacementConfig.dataLocations[{n}]", 60) for n, place in enumerate(places)
        ),
        uniform=enabled,
        labels={as_text(k, "labels", 63): as_text(v, f"labels.{k}", 63) for k, v in labels.items()},
    )


STARTS_WITH = re.compile(r'resource\.name\.startsWith\("projects/_/buckets/([^"/]+)/objects/([^"]*)"\)')
"""One term of a stack's condition (``infra.gcp.access.BucketGrant.condition``)."""


def condition_prefixes(expression: str, bucket: str) -> tuple[str, ...] | None:
    """The object-name prefixes of ``bucket`` a condition bounds a grant to, when it is a disjunction of
    ``resource.name.startsWith`` terms (the shape of a stack's grants); None for any other expression."""
    found = []
    for term in expression.split("||"):
        match = STARTS_WITH.fullmatch(term.strip())
        if match is None:
            return None
        if match.group(1) == bucket:
            found.append(match.group(2))
    return tuple(found)


def role_writes(role: str) -> bool | None:
    """Whether a role creates, replaces or deletes objects; None: the check cannot tell (``WRITE_ROLES``)."""
    return True if role in WRITE_ROLES else False if role in READ_ROLES else None


def write_grants(bindings: Any, bucket: str, folder: str, managed_folder: str = "") -> list[WriteGrant]:
    """The members of a policy's ``bindings`` (the JSON API's) whose role may write objects of ``folder`` (or that the
    check cannot tell), on the bucket or on ``managed_folder``; a condition it cannot read covers the folder."""
    if not isinstance(bindings, list):
        raise ReplyError("bindings is not a list")
    grants: list[WriteGrant] = []
    for n, binding in enumerate(bindings):
        if not isinstance(binding, dict):
            raise ReplyError(f"bindings[{n}] is not an object")
        condition = binding.get("condition") or {}
        expression = condition.get("expression", "") if isinstance(condition, dict) else None
        if not isinstance(expression, str):
            raise ReplyError(f"bindings[{n}].condition.expression is not text")
        role = as_text(binding.get("role"), f"bindings[{n}].role", 200)
        prefixes = condition_prefixes(expression, bucket) if expression else None
        covering = tuple(p for p in prefixes or () if p.startswith(folder) or folder.startswith(p))
        if role_writes(role) is False or (prefixes is not None and not covering):
            continue  # reads only, or bounded to other objects
        members = binding.get("members") or []
        if not isinstance(members, list | set | frozenset):  # google-cloud-storage's Policy keeps a set
            raise ReplyError(f"bindings[{n}].members is not a list")
        for member in sorted(members, key=str):
            name = as_text(member, f"bindings[{n}].members", 200)
            if not name.startswith("deleted:"):  # a deleted account holds nothing
                writes = role_writes(role) is True
                grants.append(WriteGrant(name, role, covering, bool(expression), managed_folder, writes))
    return grants


def check_hub_cache(settings: Settings, clients: Clients, budget: deadline.Budget) -> list[Finding]:
    """The shared Hub cache's bucket, read once (nothing without ``tpu-rl:model.hubCache``)."""
    shared = settings.shared_hub_cache
    if shared is None:
        return []
    bucket = shared[0]
    try:
        found = _read_bucket(bucket, clients, budget)
    except ReadFailedError as err:
        return [Finding("unknown", f"{err}; the shared Hub cache's bucket was not checked")]
    findings = hub_cache_findings(bucket, settings.region, found)
    if found is None:
        return findings
    from google.api_core import exceptions as api

    findings += owner_findings(bucket, settings.region, found, settings.labels["app"])
    try:
        held = _held(bucket, clients, budget)
    except (ReadFailedError, api.NotFound) as err:
        why = err if isinstance(err, ReadFailedError) else f"asking gs://{bucket} for its permissions: not found"
        return [*findings, Finding("unknown", f"{why}; whether `up` may grant on the bucket was not checked")]
    findings += permission_findings(bucket, held)
    if ON_BUCKET[0] not in held:
        return findings
    return findings + _writers(settings, bucket, shared[1], clients, budget)


def _writers(settings: Settings, bucket: str, folder: str, clients: Clients, budget: deadline.Budget) -> list[Finding]:
    """Who may write the cache's folder (``writer_findings``), from the bucket's IAM policy and its managed folders'."""
    from google.api_core import exceptions as api

    account = step_account(settings.cluster_name, HUB_CACHE_FILLER)
    own = f"serviceAccount:{account}@{settings.project}.iam.gserviceaccount.com"
    try:
        grants = _write_grants(bucket, folder, clients, budget)
    except (ReadFailedError, api.NotFound) as err:
        why = err if isinstance(err, ReadFailedError) else f"reading gs://{bucket}'s IAM policy: not found"
        return [Finding("unknown", f"{why}; who may write the cache's folder was not checked")]
    unread: list[Finding] = []
    try:
        grants += _folder_grants(bucket, folder, clients, budget)
    except (ReadFailedError, api.NotFound) as err:
        why = err if isinstance(err, ReadFailedError) else f"listing gs://{bucket}'s managed folders: not found"
        unread.append(Finding("unknown", f"{why}; whether a managed folder's grants write the cache was not checked"))
    writer = settings.model.hub_cache_writer
    return writer_findings(bucket, folder, grants, own, settings.stack, writer) + unread


def _write_grants(name: str, folder: str, clients: Clients, budget: deadline.Budget) -> list[WriteGrant]:
    def read(options: dict[str, Any]) -> list[WriteGrant]:
        policy = clients.storage.bucket(name).get_iam_policy(
            requested_policy_version=3, timeout=options["timeout"], retry=options["retry"]
        )
        return write_grants(policy.bindings, name, folder)

    return bounded_read(f"reading gs://{name}'s IAM policy ({KEY})", POLICY_SOURCE, read, clients, budget)


MAX_FOLDER_PAGES = 10
"""Pages of managed folders read (``managedFolders.list``, up to 1000 a page)."""


def managed_folders(folder: str, listed: list[str]) -> list[str]:
    """The managed folders whose grants reach objects of ``folder``: each that holds it (its proper ancestors, asked
    for by name) and each ``managedFolders.list`` names in it (``listed``, the folder itself included)."""
    parts = folder.rstrip("/").split("/")
    return sorted({"/".join(parts[:n]) + "/" for n in range(1, len(parts))} | set(listed))


def folder_names(reply: Any, folder: str) -> list[str]:
    """The names of a ``managedFolders.list`` reply (``items[].name``), each in ``folder``."""
    items = (reply.get("items") or []) if isinstance(reply, dict) else None
    if not isinstance(items, list):
        raise ReplyError("items is not a list")
    names = [item.get("name") if isinstance(item, dict) else None for item in items]
    for n, name in enumerate(names):
        if not isinstance(name, str) or len(name) > 1024 or not name.startswith(folder):
            raise ReplyError(f"items[{n}].name is not a managed folder in {folder}")
    return [str(name) for name in names]


def _folder_grants(bucket: str, folder: str, clients: Clients, budget: deadline.Budget) -> list[WriteGrant]:
    """The write grants of the managed folders in and above ``folder``, read through the storage client's session
    (google-cloud-storage 3 has no managed-folder methods: its ``_get_resource``, the call its own reads make)."""
    from google.api_core import exceptions as api

    def read(options: dict[str, Any]) -> list[WriteGrant]:
        call = {"timeout": options["timeout"], "retry": options["retry"]}
        listed, token = [], None
        for _ in range(MAX_FOLDER_PAGES):
            query = {"prefix": folder, **({"pageToken": token} if token else {})}
            reply = clients.storage._get_resource(f"/b/{bucket}/managedFolders", query_params=query, **call)
            listed += folder_names(reply, folder)
            token = reply.get("nextPageToken")
            if not token:
                break
        else:
            raise ReplyError(f"more than {MAX_FOLDER_PAGES} pages of managed folders")
        grants: list[WriteGrant] = []
        for name in managed_folders(folder, listed):
            path = f"/b/{bucket}/managedFolders/{quote(name, safe='')}/iam"
            try:
                policy = clients.storage._get_resource(path, query_params={"optionsRequestedPolicyVersion": 3}, **call)
            except api.NotFound:
                continue  # no managed folder of that name
            grants += write_grants(policy.get("bindings") or [], bucket, folder, name)
        return grants

    what = f"reading the managed folders of gs://{bucket} in and above {folder} ({KEY})"
    return bounded_read(what, FOLDERS_SOURCE, read, clients, budget)


def _held(name: str, clients: Clients, budget: deadline.Budget) -> list[str]:
    def ask(options: dict[str, Any]) -> list[str]:
        held = clients.storage.bucket(name).test_iam_permissions(
            list(ON_BUCKET), timeout=options["timeout"], retry=options["retry"]
        )
        if not isinstance(held, list) or not all(isinstance(p, str) for p in held):
            raise ReplyError("permissions is not a list of names")
        return held

    return bounded_read(
        f"asking gs://{name} which of {', '.join(ON_BUCKET)} `up` holds", PERMISSIONS_SOURCE, ask, clients, budget
    )


def _read_bucket(name: str, clients: Clients, budget: deadline.Budget) -> HubBucket | None:
    from google.api_core import exceptions as api

    def read(options: dict[str, Any]) -> HubBucket:
        bucket = clients.storage.get_bucket(name, timeout=options["timeout"], retry=options["retry"])
        # The Bucket's ``name`` is the one asked for; the reply is its ``_properties`` (``_PropertyMixin.reload``).
        return hub_bucket_reply(bucket._properties, name)

    try:
        return bounded_read(f"reading bucket gs://{name} ({KEY})", SOURCE, read, clients, budget)
    except api.NotFound:
        return None
