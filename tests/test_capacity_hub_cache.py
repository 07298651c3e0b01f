"""The capacity check reads a shared Hub cache's bucket (``tpu-rl:model.hubCache``) once, through google-cloud-storage
and the loopback Cloud Storage JSON API (tests/fake_compute.py): a bucket that does not exist, without uniform
bucket-level access, out of ``gcp:region``, another stack's artifacts bucket, or written by another stack where this one
is the cache's writer stops `up` with the fix; no permission, no answer or a reply it cannot read is a warning; without
the setting nothing is read."""

from __future__ import annotations

import json
import time

import pytest

from core import deadline
from infra.gcp import capacity
from infra.gcp.capacity import MAX_REPLY_BYTES, Finding, HubBucket, hub_cache_findings
from infra.gcp.capacity.hub_cache import check_hub_cache
from tests.fake_compute import binding, bucket, clients, fake_compute, policy, serve_project, serve_reservation
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
    """The prod stack's project answers every read well and the shared bucket is in us-east5 with uniform access."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with fake_compute() as fake:
        serve_project(fake, P, {"CPUS": (1000, 0), "N4_CPUS": (600, 0)})
        serve_reservation(fake, P)
        fake.buckets["shared-hub"] = bucket("shared-hub")
        yield fake


def hub(fake, stack=SHARED):
    """The shared cache's findings, as the check makes them (``check_hub_cache``, its own clients)."""
    made = clients(fake)
    try:
        return check_hub_cache(stack, made, deadline.BUDGETS["compute"])
    finally:
        made.close()


def test_a_bucket_in_the_region_with_uniform_access_passes_on_one_read_and_one_permission_test(gcs):
    """A reader's check reads the bucket and asks for the permissions; the writer's reads its IAM policy too."""
    assert hub(gcs, READER) == []
    assert gcs.requests == [PATH, f"{PATH}/iam/testPermissions"]
    gcs.requests.clear()
    assert hub(gcs) == []
    assert gcs.requests == [PATH, f"{PATH}/iam/testPermissions", f"{PATH}/iam"]


WRITER_KEY = "tpu-rl:model.hubCacheWriter"
OTHER = "serviceAccount:tpu-rl-dev-convert@my-tpu-prod-project.iam.gserviceaccount.com"
"""Another stack's conversion (``tpu-rl-dev``, of the same project)."""
OWN = "serviceAccount:tpu-rl-prod-convert@my-tpu-prod-project.iam.gserviceaccount.com"


def test_another_stacks_writer_grant_on_the_folder_stops_the_writer_with_what_to_run(gcs):
    """One writer per cache: another stack's identity that may create or delete objects of the folder (or of a
    folder inside it, or around it) makes this writer's `up` stop before anything is created, naming the member and
    the two ways out."""
    for prefix in ("hub/", "hub/google/", ""):
        gcs.bucket_policies["shared-hub"] = policy("shared-hub", binding("roles/storage.objectUser", OTHER, prefix))
        assert hub(gcs) == [
            Finding(
                "problem",
                f"{KEY}: {OTHER} holds roles/storage.objectUser on gs://shared-hub/{prefix}, so another stack "
                f"writes the cache this stack is the writer of ({WRITER_KEY} = prod): a cache has one writer. Set "
                f"{WRITER_KEY} to that stack here (`pulumi config set {WRITER_KEY} STACK`; this stack then only reads "
                "it), or set it to prod in that stack and run its `make up` first (its conversion's grant becomes "
                "read-only)",
            )
        ], prefix
    assert hub(gcs, READER) == [], "a reader writes nothing there: another writer is no conflict"


@pytest.mark.parametrize(
    "grant",
    [
        binding("roles/storage.objectViewer", OTHER, "hub/"),  # a reader
        binding("roles/storage.objectUser", OWN, "hub/"),  # this stack's own, from its last `up`
        binding("roles/storage.objectUser", OTHER, "other-cache/"),  # another folder
        binding("roles/storage.admin", "serviceAccount:deployer@p.iam.gserviceaccount.com", None),  # the operator's
        binding("roles/storage.objectUser", "user:someone@example.com", "hub/"),  # a person
        binding("roles/storage.objectUser", f"deleted:{OTHER}?uid=123", "hub/"),  # an account deleted since
    ],
    ids=["viewer", "own", "another-folder", "unconditioned-admin", "a-person", "deleted"],
)
def test_what_is_not_another_stacks_writer_passes(gcs, grant):
    gcs.bucket_policies["shared-hub"] = policy("shared-hub", grant)
    assert hub(gcs) == []


def test_a_policy_it_cannot_read_is_a_warning(gcs):
    gcs.routes[f"{PATH}/iam"] = (403, {"error": {"code": 403, "message": "denied"}})
    assert hub(gcs) == [
        Finding(
            "unknown",
            f"reading gs://shared-hub's IAM policy ({KEY}): permission denied (HTTP 403); whether another stack writes "
            "the cache was not checked",
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
            f"stack's steps write and its destroy may empty; create a bucket of its own for the cache: {NEW}, then "
            f"`pulumi config set {KEY} gs://NEW-BUCKET/hub/` in every stack that shares it",
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
