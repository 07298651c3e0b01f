"""The capacity check reads a shared Hub cache's bucket (``tpu-rl:model.hubCache``) once, through google-cloud-storage
and the loopback Cloud Storage JSON API (tests/fake_compute.py): a bucket that does not exist, without uniform
bucket-level access, out of ``gcp:region``, another stack's artifacts bucket, or written by another stack's conversion
where it cannot be the cache's one writer stops `up` with the fix; every other member that may write the cache's folder
(on the bucket or a managed folder, conditioned or not, the project's convenience members included) or whose role it
cannot tell is a warning naming it; no permission, no answer or a reply it cannot read is a warning; without the
setting nothing is read."""

from __future__ import annotations

import json
import time

import pytest

from core import deadline
from core.printed_commands import pulumi_config_set
from infra.gcp import capacity
from infra.gcp.capacity import MAX_REPLY_BYTES, Finding, HubBucket, hub_cache_findings
from infra.gcp.capacity.hub_cache import check_hub_cache
from tests.fake_compute import binding, bucket, clients, error, fake_compute, policy, serve_project, serve_reservation
from tests.lifecycle_walk import settings

pytestmark = pytest.mark.usefixtures("google_clients")

SHARED = settings("prod", ["tpu-rl:model.hubCache=gs://shared-hub/hub/", "tpu-rl:model.hubCacheWriter=prod"])
READER = settings("prod", ["tpu-rl:model.hubCache=gs://shared-hub/hub/", "tpu-rl:model.hubCacheWriter=dev"])
PROD = settings("prod", [])
REAL_CHECK = capacity.check_capacity
P = "my-tpu-prod-project"
PATH = "/storage/v1/b/shared-hub"
KEY = "tpu-rl:model.hubCache"
CREATE = "gcloud storage buckets create gs://shared-hub --location=us-east5 --uniform-bucket-level-access"
SKIPPED = "; the shared Hub cache's bucket was not checked"
READING = f"reading bucket gs://shared-hub ({KEY}): "


@pytest.fixture
def gcs(monkeypatch):
    """The prod stack's project answers every read well and the shared bucket is in us-east5 with uniform access, its
    IAM policy without the convenience bindings (``bare``) and no managed folder."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with fake_compute() as fake:
        serve_project(fake, P, {"CPUS": (1000, 0), "N4_CPUS": (600, 0)})
        serve_reservation(fake, P)
        fake.buckets["shared-hub"] = bucket("shared-hub")
        fake.bucket_policies["shared-hub"] = bare()
        fake.routes[FOLDERS] = (200, {"kind": "storage#managedFolders"})
        yield fake


FOLDERS = f"{PATH}/managedFolders"


def bare(*bindings: dict) -> dict:
    """The bucket's IAM policy with only ``bindings``: its owner removed the project's convenience bindings."""
    return {**policy("shared-hub"), "bindings": list(bindings)}


def hub(fake, stack=SHARED):
    """The shared cache's findings, as the check makes them (``check_hub_cache``, its own clients)."""
    made = clients(fake)
    try:
        return check_hub_cache(stack, made, deadline.BUDGETS["compute"])
    finally:
        made.close()


def test_a_bucket_in_the_region_with_uniform_access_passes_on_its_reads(gcs):
    """The check reads the bucket, asks for the permissions, reads the bucket's IAM policy and lists the managed folders
    in the cache's folder, in the writer stack and in a reader."""
    for stack in (READER, SHARED):
        gcs.requests.clear()
        assert hub(gcs, stack) == []
        assert gcs.requests == [PATH, f"{PATH}/iam/testPermissions", f"{PATH}/iam", FOLDERS]


WRITER_KEY = "tpu-rl:model.hubCacheWriter"
OTHER = "serviceAccount:tpu-rl-dev-convert@my-tpu-prod-project.iam.gserviceaccount.com"
"""Another stack's conversion (``tpu-rl-dev``, of the same project)."""
OWN = "serviceAccount:tpu-rl-prod-convert@my-tpu-prod-project.iam.gserviceaccount.com"


SAFE = (
    "the conversion uses no file of the cache before hashing it against the Hub's hash (offline, against the stack's "
    "own record), so such a writer can cost a fetch, not a wrong byte"
)
REMOVE = "gcloud storage buckets remove-iam-policy-binding gs://shared-hub"


def second_writer(member: str, prefix: str, role: str = "roles/storage.objectUser") -> Finding:
    return Finding(
        "problem",
        f"{KEY}: {member} holds {role} on gs://shared-hub/{prefix}, so another stack writes the cache this stack is "
        f"the writer of ({WRITER_KEY} = prod): a cache has one writer. Set {WRITER_KEY} to that stack here "
        f"(`{pulumi_config_set('prod', WRITER_KEY, '<writer-stack>')}`; this stack then only reads it), or set it to "
        "prod in that stack and run its `make up` first (its conversion's grant becomes read-only)",
    )


def test_another_stacks_writer_grant_on_the_folder_stops_the_writer_with_what_to_run(gcs):
    """One writer per cache: another stack's identity that may create or delete objects of the folder (or of a
    folder inside it, or around it) makes this writer's `up` stop before anything is created, naming the member and
    the two ways out; in a reader, that one writer is a warning naming it."""
    for prefix in ("hub/", "hub/google/", ""):
        gcs.bucket_policies["shared-hub"] = bare(binding("roles/storage.objectUser", OTHER, prefix))
        assert hub(gcs) == [second_writer(OTHER, prefix)], prefix
    assert hub(gcs, READER) == [
        Finding(
            "unknown",
            f"{KEY}: {OTHER} may create, replace or delete objects of gs://shared-hub/hub/: roles/storage.objectUser "
            f"on gs://shared-hub/ (by an IAM condition); {SAFE}; if it need not write there, remove it: {REMOVE} "
            f"--member={OTHER} --role=roles/storage.objectUser --all",
        )
    ], "a reader's one writer: named, not stopped"


THIRD = "serviceAccount:tpu-rl-staging-convert@my-tpu-prod-project.iam.gserviceaccount.com"


def test_two_stacks_writing_the_cache_a_stack_reads_stop_it(gcs):
    """A reader knows the cache has one writer (``tpu-rl:model.hubCacheWriter``): two stacks'
    conversions that may write it cannot both be that stack's, so each is a stop naming the fix. This reader's own
    conversion, whose grant its `up` makes read-only, is not counted."""
    gcs.bucket_policies["shared-hub"] = bare(
        binding("roles/storage.objectUser", OTHER, "hub/"),
        binding("roles/storage.objectCreator", THIRD, "hub/google/"),
        binding("roles/storage.objectUser", OWN, "hub/"),
    )
    assert hub(gcs, READER) == [
        Finding(
            "problem",
            f"{KEY}: {member} holds {role} on gs://shared-hub/{prefix}, one of 2 stacks' conversions that write the "
            f"cache this stack reads, which has one writer ({WRITER_KEY} = dev): in each stack that shares it, "
            f"`{pulumi_config_set('<stack>', WRITER_KEY, 'dev')}`, then run `make up STACK=<stack>` in those that are "
            "not dev (their conversion's grant becomes read-only)",
        )
        for member, role, prefix in (
            (OTHER, "roles/storage.objectUser", "hub/"),
            (THIRD, "roles/storage.objectCreator", "hub/google/"),
        )
    ]
    assert hub(gcs) == [
        second_writer(OTHER, "hub/"),
        second_writer(THIRD, "hub/google/", "roles/storage.objectCreator"),
    ]


@pytest.mark.parametrize(
    "grant",
    [
        binding("roles/storage.objectViewer", OTHER, "hub/"),  # a reader
        binding("roles/storage.objectUser", OWN, "hub/"),  # this stack's own, from its last `up`
        binding("roles/storage.objectUser", OTHER, "other-cache/"),  # another folder
        binding("roles/storage.legacyBucketReader", "projectViewer:p", None),  # the project's viewers
        binding("roles/storage.objectUser", f"deleted:{OTHER}?uid=123", "hub/"),  # an account deleted since
        {
            "role": "roles/storage.objectAdmin",
            "members": [OTHER],
            "condition": {"expression": 'resource.name.startsWith("projects/_/buckets/elsewhere/objects/hub/")'},
        },  # another bucket's objects
    ],
    ids=["viewer", "own", "another-folder", "project-viewers", "deleted", "another-bucket"],
)
def test_what_cannot_write_the_folder_is_not_named(gcs, grant):
    gcs.bucket_policies["shared-hub"] = bare(grant)
    assert hub(gcs) == [] and hub(gcs, READER) == []


PERSON = "user:someone@example.com"
DEPLOYER = "serviceAccount:deployer@p.iam.gserviceaccount.com"
TIMED = 'request.time < timestamp("2030-01-01T00:00:00Z")'


@pytest.mark.parametrize(
    ("grant", "who", "how"),
    [
        (
            binding("roles/storage.legacyBucketOwner", "projectEditor:p", None),
            "projectEditor:p (whoever holds roles/editor on project p)",
            "roles/storage.legacyBucketOwner on the bucket; {SAFE}; if it need not write there, remove it: {REMOVE} "
            "--member=projectEditor:p --role=roles/storage.legacyBucketOwner",
        ),
        (
            binding("roles/storage.admin", DEPLOYER, None),
            DEPLOYER,
            "roles/storage.admin on the bucket; {SAFE}; if it need not write there, remove it: {REMOVE} "
            f"--member={DEPLOYER} --role=roles/storage.admin",
        ),
        (
            binding("roles/storage.objectUser", PERSON, "hub/"),
            PERSON,
            "roles/storage.objectUser on gs://shared-hub/hub/ (by an IAM condition); {SAFE}; if it need not write "
            f"there, remove it: {{REMOVE}} --member={PERSON} --role=roles/storage.objectUser --all",
        ),
        (
            binding("roles/storage.legacyObjectOwner", "group:ml@example.com", None),
            "group:ml@example.com",
            "roles/storage.legacyObjectOwner on the bucket; {SAFE}; if it need not write there, remove it: {REMOVE} "
            "--member=group:ml@example.com --role=roles/storage.legacyObjectOwner",
        ),
        (
            {"role": "roles/storage.objectCreator", "members": [OTHER], "condition": {"expression": TIMED}},
            OTHER,
            "roles/storage.objectCreator on the bucket under an IAM condition this check cannot read (counted as "
            "covering the folder); {SAFE}; if it need not write there, remove it: {REMOVE} "
            f"--member={OTHER} --role=roles/storage.objectCreator --all",
        ),
    ],
    ids=["convenience", "unconditioned-admin", "a-person", "legacy-object-owner", "unreadable-condition"],
)
def test_every_other_member_that_may_write_the_folder_is_one_warning(gcs, grant, who, how):
    """Whoever may create, replace or delete the cache's objects, bucket-wide, bounded to the folder,
    or under a condition the check cannot read, is named with its grant and the command that removes it, in the
    writer stack and in a reader alike: none of them is a stack's conversion, so none stops `up`."""
    gcs.bucket_policies["shared-hub"] = bare(grant)
    line = f"{KEY}: {who} may create, replace or delete objects of gs://shared-hub/hub/: " + how.format(
        SAFE=SAFE, REMOVE=REMOVE
    )
    assert hub(gcs) == [Finding("unknown", line)]
    assert hub(gcs, READER) == [Finding("unknown", line)]


def test_the_buckets_own_convenience_bindings_name_the_projects_owners_and_editors(gcs):
    """A bucket as Cloud Storage makes it grants the project's owners and editors ``legacyBucketOwner``
    (tests/fake_compute.py ``policy``): both may write the cache, one line each; its viewers may not."""
    gcs.bucket_policies["shared-hub"] = policy("shared-hub")
    found = hub(gcs, READER)
    assert [f.level for f in found] == ["unknown", "unknown"]
    assert [f.text.split(" may create")[0] for f in found] == [
        f"{KEY}: projectEditor:p (whoever holds roles/editor on project p)",
        f"{KEY}: projectOwner:p (whoever holds roles/owner on project p)",
    ]


@pytest.mark.parametrize(
    ("role", "describe"),
    [
        ("projects/my-tpu-prod-project/roles/cacheWriter", "cacheWriter --project=my-tpu-prod-project"),
        ("organizations/123/roles/storageOps", "storageOps --organization=123"),
        ("roles/storage.someNewRole", "roles/storage.someNewRole"),
    ],
    ids=["project-custom", "organization-custom", "unknown-predefined"],
)
def test_a_role_whose_permissions_the_check_cannot_tell_is_named_as_such(gcs, role, describe):
    """A custom role's permissions are not read (the check has no IAM ``roles.get`` client); a predefined role outside
    its tables is not guessed: one warning each, with the command that lists the role's permissions."""
    gcs.bucket_policies["shared-hub"] = bare(binding(role, OTHER, "hub/"))
    assert hub(gcs) == [
        Finding(
            "unknown",
            f"{KEY}: {OTHER} holds {role} on gs://shared-hub/hub/ (by an IAM condition), and whether that role may "
            "write objects of gs://shared-hub/hub/ this check cannot tell (it reads no custom role's permissions): "
            f"list them (gcloud iam roles describe {describe}); {SAFE}",
        )
    ]


NESTED = settings("prod", ["tpu-rl:model.hubCache=gs://shared-hub/tpu-rl/hub/", "tpu-rl:model.hubCacheWriter=prod"])


def test_a_managed_folder_that_holds_or_lies_in_the_cache_names_its_writers(gcs):
    """Grants on a managed folder reach its objects without the bucket's policy: the folders above the cache's
    (asked for by name; none: 404) and those ``managedFolders.list`` names in it are read, and each writer named."""
    gcs.routes[FOLDERS] = (200, {"kind": "storage#managedFolders", "items": [{"name": "tpu-rl/hub/google/"}]})
    above, inside = f"{FOLDERS}/tpu-rl%2F/iam", f"{FOLDERS}/tpu-rl%2Fhub%2Fgoogle%2F/iam"
    gcs.routes[above] = (200, bare(binding("roles/storage.objectAdmin", PERSON, None)))
    gcs.routes[inside] = (200, bare(binding("roles/storage.objectViewer", OTHER, None)))
    found = hub(gcs, NESTED)
    assert gcs.requests[-3:] == [FOLDERS, above, inside]
    assert found == [
        Finding(
            "unknown",
            f"{KEY}: {PERSON} may create, replace or delete objects of gs://shared-hub/tpu-rl/hub/: "
            f"roles/storage.objectAdmin on managed folder gs://shared-hub/tpu-rl/; {SAFE}; if it need not write there, "
            f"remove it: gcloud storage managed-folders remove-iam-policy-binding gs://shared-hub/tpu-rl/ "
            f"--member={PERSON} --role=roles/storage.objectAdmin",
        )
    ]
    gcs.routes[FOLDERS] = (403, error(403, "denied", "forbidden"))
    assert hub(gcs, NESTED) == [
        Finding(
            "unknown",
            f"reading the managed folders of gs://shared-hub in and above tpu-rl/hub/ ({KEY}): permission denied "
            "(HTTP 403); whether a managed folder's grants write the cache was not checked",
        )
    ]


@pytest.mark.pure
def test_a_condition_is_read_only_as_a_stacks_prefixes_and_anything_else_covers_the_folder():
    from infra.gcp.capacity.hub_cache import condition_prefixes, role_writes

    term = 'resource.name.startsWith("projects/_/buckets/b/objects/{}")'
    assert condition_prefixes(term.format("hub/"), "b") == ("hub/",)
    assert condition_prefixes(f"{term.format('a/')} ||  {term.format('hub/')}", "b") == ("a/", "hub/")
    assert condition_prefixes(term.format("hub/"), "other") == ()
    for unread in (f"({term.format('hub/')})", f"{term.format('hub/')} && {TIMED}", TIMED, term.format('h"/')):
        assert condition_prefixes(unread, "b") is None, unread
    assert [role_writes(r) for r in ("roles/storage.legacyBucketWriter", "roles/storage.objectViewer", "x")] == [
        True,
        False,
        None,
    ]


def test_a_policy_it_cannot_read_is_a_warning(gcs):
    gcs.routes[f"{PATH}/iam"] = (403, {"error": {"code": 403, "message": "denied"}})
    assert hub(gcs) == [
        Finding(
            "unknown",
            f"reading gs://shared-hub's IAM policy ({KEY}): permission denied (HTTP 403); who may write the cache's "
            "folder was not checked",
        )
    ]
    gcs.routes[f"{PATH}/iam"] = (200, {**policy("shared-hub"), "bindings": [{"role": "x", "condition": 5}]})
    (line,) = hub(gcs)
    assert line.level == "unknown" and "(bindings[0].condition.expression is not text)" in line.text, line
    gcs.bucket_permissions = {"storage.buckets.setIamPolicy"}
    gcs.requests.clear()
    assert [f.level for f in hub(gcs)] == ["problem"] and f"{PATH}/iam" not in gcs.requests, "no permission: not read"


def test_another_stacks_artifacts_bucket_stops_up_with_the_command_for_a_bucket_of_its_own(gcs):
    """The bucket a stack made for its artifacts (its labels: ``infra.gcp.storage.bucket_args``) is emptied by that
    stack's destroy and written by its steps: one line naming the stack and what to run."""
    labels = {"app": "tpu-rl", "stack": "dev", "cluster": "tpu-rl-dev", "managed-by": "pulumi"}
    gcs.buckets["shared-hub"] = bucket("shared-hub", labels=labels)
    assert hub(gcs, READER) == [
        Finding(
            "problem",
            f"{KEY}: gs://shared-hub is stack dev's artifacts bucket (its labels app=tpu-rl, stack=dev), which that "
            f"stack's steps write and its destroy may empty; create a bucket of its own for the cache: {NEW}, then, "
            f"in every stack that shares it, `{pulumi_config_set('<stack>', KEY, 'gs://NEW-BUCKET/hub/')}`",
        )
    ]
    gcs.buckets["shared-hub"] = bucket("shared-hub", labels={"team": "ml", "app": "other"})
    assert hub(gcs, READER) == [], "labels of anything else are no stack's"


GRANT = "gcloud storage buckets add-iam-policy-binding gs://shared-hub --member=user:YOU --role=roles/storage.admin"


@pytest.mark.parametrize(
    ("held", "missing"),
    [
        (set(), "storage.buckets.getIamPolicy, storage.buckets.setIamPolicy"),
        ({"storage.buckets.getIamPolicy", "storage.buckets.get"}, "storage.buckets.setIamPolicy"),
    ],
    ids=["none", "read-only"],
)
def test_an_account_that_cannot_grant_on_the_bucket_stops_up_with_the_grant(gcs, held, missing):
    """The steps' grants on the shared bucket set its IAM policy: without both permissions on that bucket (which may
    live in another project: the project's own test cannot say) `up` would fail after the cluster exists."""
    gcs.bucket_permissions = held
    assert hub(gcs) == [
        Finding(
            "problem",
            f"{KEY}: the account running `up` lacks {missing} on bucket gs://shared-hub, where the stack grants its "
            f"conversion and export their roles on the cache's folder; grant it roles/storage.admin on the bucket: "
            f"{GRANT}",
        )
    ]


def test_the_permission_test_is_asked_only_of_a_bucket_that_exists_and_its_failure_is_a_warning(gcs):
    del gcs.buckets["shared-hub"]
    assert [f.level for f in hub(gcs)] == ["problem"] and gcs.requests == [PATH], "a missing bucket: nothing to ask"
    gcs.buckets["shared-hub"] = bucket("shared-hub")
    gcs.requests.clear()
    gcs.routes[f"{PATH}/iam/testPermissions"] = (400, {"error": {"code": 400, "message": "Invalid argument."}})
    assert hub(gcs) == [
        Finding(
            "unknown",
            "asking gs://shared-hub which of storage.buckets.getIamPolicy, storage.buckets.setIamPolicy `up` holds: "
            "HTTP 400; whether `up` may grant on the bucket was not checked",
        )
    ]


def test_a_missing_bucket_stops_up_with_the_command_that_creates_it(gcs):
    del gcs.buckets["shared-hub"]
    assert hub(gcs) == [Finding("problem", f"{KEY}: bucket gs://shared-hub does not exist; create it once: {CREATE}")]


def test_uniform_access_off_stops_up(gcs):
    gcs.buckets["shared-hub"] = bucket("shared-hub", uniform=False)
    assert hub(gcs) == [
        Finding(
            "problem",
            f"{KEY}: bucket gs://shared-hub has uniform bucket-level access off, and the stack's grants on it carry "
            "IAM conditions, which need it: gcloud storage buckets update gs://shared-hub "
            "--uniform-bucket-level-access",
        )
    ]


NEW = "gcloud storage buckets create gs://NEW-BUCKET --location=us-east5 --uniform-bucket-level-access"
ELSEWHERE = (
    "the conversion reads ~52 GB from it per new run in us-east5 (gcp:region), and Cloud Storage bills reads out of a "
    "bucket's location as data transfer"
)


@pytest.mark.parametrize(
    ("document", "where"),
    [
        (bucket("shared-hub", "US-CENTRAL1"), "region US-CENTRAL1"),
        (bucket("shared-hub", "US", location_type="multi-region"), "multi-region US"),
        (
            bucket("shared-hub", "US", location_type="dual-region", data_locations=["US-CENTRAL1", "US-EAST1"]),
            "dual-region US",
        ),
    ],
    ids=["another-region", "multi-region", "dual-region-without-it"],
)
def test_a_bucket_out_of_the_region_stops_up(gcs, document, where):
    gcs.buckets["shared-hub"] = document
    assert hub(gcs) == [
        Finding(
            "problem",
            f"{KEY}: bucket gs://shared-hub is in {where}, not in us-east5: {ELSEWHERE}; use a bucket in us-east5 "
            f"({NEW})",
        )
    ]


def test_a_dual_region_holding_the_region_passes_and_a_predefined_one_is_a_warning(gcs):
    """Reads from a dual-region into one of its regions are free (https://cloud.google.com/storage/pricing); a
    predefined dual-region's reply does not name its regions."""
    gcs.buckets["shared-hub"] = bucket(
        "shared-hub", "US", location_type="dual-region", data_locations=["US-EAST1", "US-EAST5"]
    )
    assert hub(gcs) == []
    gcs.buckets["shared-hub"] = bucket("shared-hub", "NAM4", location_type="dual-region")
    (line,) = hub(gcs)
    assert line.level == "unknown" and line.text.startswith(
        f"{KEY}: bucket gs://shared-hub is in dual-region NAM4; {ELSEWHERE}, unless us-east5 is one of its two regions"
    )


def test_the_region_is_compared_whatever_the_case():
    found = HubBucket(location="us-east5", location_type="region", data_locations=(), uniform=True)
    assert hub_cache_findings("b", "us-east5", found) == []
    both = hub_cache_findings("b", "us-east5", HubBucket("EU", "multi-region", (), uniform=False))
    assert [f.level for f in both] == ["problem", "problem"]


def test_no_permission_is_a_warning(gcs):
    message = (
        "deployer@example.iam.gserviceaccount.com does not have storage.buckets.get access to the Google Cloud "
        "Storage bucket. Permission 'storage.buckets.get' denied on resource (or it may not exist)."
    )
    gcs.routes[PATH] = (
        403,
        {"error": {"code": 403, "message": message, "errors": [{"message": message, "reason": "forbidden"}]}},
    )
    assert hub(gcs) == [Finding("unknown", f"{READING}permission denied (HTTP 403){SKIPPED}")]


@pytest.mark.parametrize(
    ("document", "why"),
    [
        (bucket("someone-elses"), "name is 'someone-elses', not shared-hub"),
        (
            {k: v for k, v in bucket("shared-hub").items() if k != "iamConfiguration"},
            "iamConfiguration.uniformBucketLevelAccess.enabled is missing",
        ),
        ({**bucket("shared-hub"), "location": 5}, "location is int, not text"),
        (
            {**bucket("shared-hub"), "customPlacementConfig": {"dataLocations": "US-EAST5"}},
            "customPlacementConfig.dataLocations is not a list",
        ),
    ],
    ids=["another-bucket", "no-iam-configuration", "number-for-location", "string-for-list"],
)
def test_a_reply_it_cannot_read_is_a_warning_naming_the_field(gcs, document, why):
    gcs.raw[PATH] = (200, {"Content-Type": "application/json"}, json.dumps(document).encode())
    assert hub(gcs) == [
        Finding(
            "unknown",
            f"{READING}Cloud Storage (buckets.get) answered with a reply this check cannot read ({why}){SKIPPED}",
        )
    ]


def test_a_reply_larger_than_the_cap_is_cut_there_and_a_warning(gcs):
    made = clients(gcs)
    try:
        adapter = made.storage._http.get_adapter("https://storage.googleapis.com/")
        assert type(adapter).__name__ == "CappedAdapter", "the storage client's session reads through the cap"
    finally:
        made.close()
    padded = {**bucket("shared-hub"), "labels": {"pad": "x" * (MAX_REPLY_BYTES + 1)}}
    gcs.raw[PATH] = (200, {"Content-Type": "application/json"}, json.dumps(padded).encode())
    (line,) = hub(gcs)
    assert line.level == "unknown" and line.text.startswith(
        f"{READING}Cloud Storage (buckets.get): GET http://127.0.0.1:"
    ), line
    assert line.text.endswith(
        f"{PATH} replied more than 4 MiB (a Google API answers this in kilobytes: check for a proxy in the way)"
        f"{SKIPPED}"
    ), line


@pytest.mark.slow
def test_a_hanging_bucket_read_ends_at_its_budget(gcs, monkeypatch):
    monkeypatch.setitem(deadline.BUDGETS, "compute", deadline.Budget(1.0, 0.3, 0.3, "test"))
    gcs.hang.add(PATH)
    start = time.monotonic()
    (line,) = hub(gcs)
    assert time.monotonic() - start < 1.0 + 2, "the read ends within its budget"
    assert line.level == "unknown" and line.text.startswith(READING) and line.text.endswith(SKIPPED), line


def test_the_check_reads_the_bucket_after_the_apis_and_only_with_the_setting(gcs):
    del gcs.buckets["shared-hub"]
    findings = REAL_CHECK(SHARED, clients(gcs))
    assert [f for f in findings if f.level != "note"] == [
        Finding("problem", f"{KEY}: bucket gs://shared-hub does not exist; create it once: {CREATE}")
    ]
    assert gcs.requests.count(PATH) == 1
    assert gcs.requests.index(PATH) == gcs.requests.index(f"/v1/projects/{P}/services:batchGet") + 1
    gcs.requests.clear()
    assert [f for f in REAL_CHECK(PROD, clients(gcs)) if f.level != "note"] == []
    assert not [p for p in gcs.requests if p.startswith("/storage/")], "no shared cache: no read"


def test_a_disabled_compute_api_still_checks_the_bucket(gcs):
    gcs.services["compute.googleapis.com"] = "DISABLED"
    gcs.buckets["shared-hub"] = bucket("shared-hub", uniform=False)
    findings = REAL_CHECK(SHARED, clients(gcs))
    assert [f.level for f in findings if KEY in f.text] == ["problem"]
    assert gcs.requests.count(PATH) == 1
