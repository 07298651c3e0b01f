"""The capacity check reads cpu-np's secondary boot disk image (``tpu-rl:cpuPool.bootDiskImage``) once, through
google-cloud-compute's ``ImagesClient`` and the loopback Compute Engine API (tests/fake_compute.py): an image that does
not exist, is not READY, or is OBSOLETE or DELETED stops `up` with the fix; DEPRECATED, no permission, no answer or
a reply it cannot read is a warning; its ``diskSizeGb`` counts against cpu-np's disk quota once per node (a run's and
the pool's maximum), only when it was read; without the setting nothing is read."""

from __future__ import annotations

import json
import time

import pytest

from core import deadline
from infra.gcp import capacity
from infra.gcp.capacity import BootDiskImage, Finding, Held, boot_disk_findings, needs, quota_findings
from infra.gcp.capacity.boot_disk import check_boot_disk_image
from tests.fake_compute import (
    DISKS_ENOUGH,
    clients,
    error,
    fake_compute,
    image,
    instance,
    region,
    serve_project,
    serve_reservation,
)
from tests.lifecycle_walk import settings

pytestmark = pytest.mark.usefixtures("google_clients")

NAME = "tpu-rl-images-0-2-5"
WITH_IMAGE = settings("prod", [f"tpu-rl:cpuPool.bootDiskImage={NAME}"])
PROD = settings("prod", [])
REAL_CHECK = capacity.check_capacity
P = "my-tpu-prod-project"
PATH = f"/compute/v1/projects/{P}/global/images/{NAME}"
REGION = f"/compute/v1/projects/{P}/regions/us-east5"
INSTANCES = f"/compute/v1/projects/{P}/zones/us-east5-b/instances"
KEY = "tpu-rl:cpuPool.bootDiskImage"
IMAGE = f"{KEY}: image {NAME} of project {P}"
BUILD = 'build it (docs/images-and-caches.md "Image pulls": gke-disk-image-builder)'
DOC = "https://cloud.google.com/compute/docs/images/deprecate-custom"
SKIPPED = (
    "; cpu-np's secondary boot disk image was not checked; its secondary boot disks were not counted against the disk "
    "quota"
)
READING = f"reading image {NAME} ({KEY}): "
CPU_QUOTAS = {"CPUS": (1000, 0), "N4_CPUS": (600, 0)}
CPU_NP = f"1 cpu-np node(s) for the CPU steps with a 100 GB secondary boot disk each (image {NAME}, {KEY})"


@pytest.fixture
def gce(monkeypatch):
    """The prod stack's project answers every read well and holds the image, READY, 100 GB."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with fake_compute() as fake:
        serve_project(fake, P, CPU_QUOTAS)
        serve_reservation(fake, P)
        fake.images[P, NAME] = image(NAME, project=P)
        yield fake


def read(fake, stack=WITH_IMAGE):
    """The image's findings and the GB counted per node, as the check makes them (its own clients)."""
    made = clients(fake)
    try:
        return check_boot_disk_image(stack, made, deadline.BUDGETS["compute"])
    finally:
        made.close()


def hdb(limit, usage=0):
    """The region's quotas with ``HDB_TOTAL_GB`` (cpu-np's n4 and the slices' boot disk metric) at ``limit``."""
    return region("us-east5", {**DISKS_ENOUGH, **CPU_QUOTAS, "HDB_TOTAL_GB": (limit, usage)})


def test_a_ready_image_passes_on_one_read_and_gives_its_size(gce):
    assert read(gce) == ([], 100)
    assert gce.requests == [PATH]


def test_a_missing_image_stops_up(gce):
    del gce.images[P, NAME]
    assert read(gce) == ([Finding("problem", f"{IMAGE} does not exist; {BUILD} or fix the name")], None)


@pytest.mark.parametrize(
    ("status", "fix"),
    [
        ("PENDING", "wait for the builder to finish, then run `up` again"),
        ("FAILED", f"{BUILD} again or set another image"),
        ("DELETING", f"{BUILD} again or set another image"),
    ],
)
def test_an_image_that_is_not_ready_stops_up(gce, status, fix):
    gce.images[P, NAME] = image(NAME, project=P, status=status)
    findings, _ = read(gce)
    sep = ":" if status == "PENDING" else ";"
    assert findings == [Finding("problem", f"{IMAGE} is {status}, not READY{sep} {fix}")]


@pytest.mark.parametrize("state", ["OBSOLETE", "DELETED"])
def test_an_obsolete_or_deleted_image_stops_up(gce, state):
    gce.images[P, NAME] = image(NAME, project=P, deprecated=state)
    assert read(gce)[0] == [
        Finding(
            "problem",
            f"{IMAGE} is {state}, and Compute Engine returns an error for a request that uses it ({DOC}); {BUILD} "
            "again or set another image",
        )
    ]


def test_a_deprecated_image_is_a_warning_and_an_active_one_nothing(gce):
    gce.images[P, NAME] = image(NAME, project=P, deprecated="DEPRECATED")
    assert read(gce) == (
        [
            Finding(
                "unknown",
                f'{IMAGE} is DEPRECATED, which "can still be used to create a VM" ({DOC}); whether GKE still makes '
                f"cpu-np's secondary boot disks from it, the page does not say; {BUILD} again or set another image",
            )
        ],
        100,
    ), "GKE may still make the disks: they are counted"
    gce.images[P, NAME] = image(NAME, project=P, deprecated="ACTIVE")
    assert read(gce) == ([], 100)


@pytest.mark.pure
def test_each_finding_is_its_own_line():
    both = boot_disk_findings("p", "i", BootDiskImage(status="FAILED", deprecation="OBSOLETE", disk_size_gb=10))
    assert [f.level for f in both] == ["problem", "problem"]
    assert boot_disk_findings("p", "i", BootDiskImage("READY", "", 10)) == []


def test_no_permission_is_a_warning_and_nothing_is_counted(gce):
    message = "Required 'compute.images.get' permission for 'projects/my-tpu-prod-project/global/images/x'"
    gce.routes[PATH] = (403, error(403, message, "forbidden"))
    assert read(gce) == ([Finding("unknown", f"{READING}permission denied (HTTP 403){SKIPPED}")], None)


@pytest.mark.parametrize(
    ("document", "why"),
    [
        (image("someone-elses", project=P), "name is 'someone-elses', not " + NAME),
        ({k: v for k, v in image(NAME, project=P).items() if k != "status"}, "status is missing"),
        ({k: v for k, v in image(NAME, project=P).items() if k != "diskSizeGb"}, "diskSizeGb is missing"),
        ({**image(NAME, project=P), "diskSizeGb": "-5"}, "diskSizeGb is -5, not a count"),
    ],
    ids=["another-image", "no-status", "no-size", "negative-size"],
)
def test_a_reply_it_cannot_read_is_a_warning_naming_the_field(gce, document, why):
    gce.raw[PATH] = (200, {"Content-Type": "application/json"}, json.dumps(document).encode())
    assert read(gce) == (
        [
            Finding(
                "unknown",
                f"{READING}Compute Engine (images.get) answered with a reply this check cannot read ({why}){SKIPPED}",
            )
        ],
        None,
    )


@pytest.mark.slow
def test_a_hanging_image_read_ends_at_its_budget(gce, monkeypatch):
    monkeypatch.setitem(deadline.BUDGETS, "compute", deadline.Budget(1.0, 0.3, 0.3, "test"))
    gce.hang.add(PATH)
    start = time.monotonic()
    (line,), counted = read(gce)
    assert time.monotonic() - start < 1.0 + 2, "the read ends within its budget"
    assert line.level == "unknown" and line.text.startswith(READING) and line.text.endswith(SKIPPED), line
    assert counted is None


def test_the_images_client_reads_through_the_cap(gce):
    made = clients(gce)
    try:
        adapter = made.images.transport._session.get_adapter("https://compute.googleapis.com/")
        assert type(adapter).__name__ == "CappedAdapter"
    finally:
        made.close()


@pytest.mark.pure
def test_the_secondary_disk_counts_per_cpu_np_node_on_its_boot_disk_metric():
    """prod: cpu-np n4-standard-64, 500 GB hyperdisk-balanced, 1 node for a run, 4 at most; 8 TPU VMs of 100 GB."""
    plain, counted = needs(WITH_IMAGE), needs(WITH_IMAGE, secondary_gb=100)
    assert plain.draw("run")["HDB_TOTAL_GB"] == 1300 and plain.draw("max")["HDB_TOTAL_GB"] == 2800, "not read: none"
    assert counted.draw("run")["HDB_TOTAL_GB"] == 1400 and counted.draw("max")["HDB_TOTAL_GB"] == 3200
    assert {m: a for m, a in counted.draw("run").items() if m != "HDB_TOTAL_GB"} == {
        m: a for m, a in plain.draw("run").items() if m != "HDB_TOTAL_GB"
    }, "vCPUs and the system pool's disks unchanged"
    assert needs(PROD, secondary_gb=100).draw("run") == needs(PROD).draw("run"), "no image set: nothing to count"


@pytest.mark.pure
def test_a_quota_just_big_enough_without_the_secondary_disk_now_fails():
    quotas = {"CPUS": (1000.0, 0.0), "N4_CPUS": (600.0, 0.0), "SSD_TOTAL_GB": (4096.0, 0.0), "HDB_TOTAL_GB": (1300, 0)}
    before = quota_findings(needs(WITH_IMAGE), quotas, "us-east5", Held())
    assert [f.level for f in before] == ["unknown"], "the run fits without it"
    (line,) = quota_findings(needs(WITH_IMAGE, secondary_gb=100), quotas, "us-east5", Held())
    assert line == Finding(
        "problem",
        f"quota HDB_TOTAL_GB in us-east5: 1300 of 1300 GB left, the run needs 1400 ({CPU_NP}, 8 TPU VM(s)); request "
        "more quota or lower tpu-rl:cpuPool.diskSizeGb",
    )
    (peak,) = quota_findings(needs(WITH_IMAGE, secondary_gb=100), {**quotas, "HDB_TOTAL_GB": (2800, 0)}, "r", Held())
    assert peak == Finding(
        "unknown",
        "quota HDB_TOTAL_GB in r: 2800 of 2800 GB left hold the run (1400) but not the pools at their autoscaling "
        "maximum (3200), so GKE cannot scale them that far; lower tpu-rl:cpuPool.maxNodes to 3 or request more quota",
    )


def test_the_check_reads_the_image_after_the_offers_and_counts_it(gce):
    gce.routes[REGION] = (200, hdb(1300))
    findings = [f for f in REAL_CHECK(WITH_IMAGE, clients(gce)) if f.level != "note"]
    assert findings == [
        Finding(
            "problem",
            f"quota HDB_TOTAL_GB in us-east5: 1300 of 1300 GB left, the run needs 1400 ({CPU_NP}, 8 TPU VM(s)); "
            "request more quota or lower tpu-rl:cpuPool.diskSizeGb",
        )
    ]
    assert gce.requests.count(PATH) == 1
    offers = [n for n, p in enumerate(gce.requests) if "/diskTypes/" in p or "/machineTypes/" in p]
    assert max(offers) < gce.requests.index(PATH) < gce.requests.index(INSTANCES)


def test_without_the_setting_nothing_is_read_nor_counted(gce):
    gce.routes[REGION] = (200, hdb(1300))
    findings = REAL_CHECK(PROD, clients(gce))
    assert not [f for f in findings if f.level == "problem"], findings
    assert not [p for p in gce.requests if "/global/images/" in p], "no image set: no read"


def test_an_image_not_read_adds_nothing_and_says_so(gce):
    gce.routes[REGION] = (200, hdb(1300))
    gce.routes[PATH] = (403, error(403, "Required 'compute.images.get' permission", "forbidden"))
    findings = [f for f in REAL_CHECK(WITH_IMAGE, clients(gce)) if f.level != "note"]
    assert Finding("unknown", f"{READING}permission denied (HTTP 403){SKIPPED}") in findings
    assert not [f for f in findings if f.level == "problem"], "the run fits without the secondary disk"


def test_a_missing_image_stops_up_through_the_check(gce):
    del gce.images[P, NAME]
    problems = [f.text for f in REAL_CHECK(WITH_IMAGE, clients(gce)) if f.level == "problem"]
    assert problems == [f"{IMAGE} does not exist; {BUILD} or fix the name"]


def test_a_later_up_counts_its_own_cpu_np_nodes_secondary_disk(gce):
    """The stack's cpu-np node runs already, its boot disk and its secondary boot disk in the usage: not needed
    twice."""
    node = instance("gke-cpu-np-0", "n4-standard-64", project=P, zone="us-east5-b", boot_gb=500)
    node["disks"].append({**node["disks"][0], "boot": False, "index": 1, "mode": "READ_ONLY", "diskSizeGb": "100"})
    gce.routes[INSTANCES] = (200, {"kind": "compute#instanceList", "items": [node]})
    gce.routes[REGION] = (200, hdb(1400, 600))
    findings = REAL_CHECK(WITH_IMAGE, clients(gce))
    assert not [f for f in findings if f.level == "problem"], "1400 - 600 used + 600 its own: the run's 1400 fit"


def test_a_disabled_compute_api_names_the_image_not_checked(gce):
    gce.services["compute.googleapis.com"] = "DISABLED"
    findings = REAL_CHECK(WITH_IMAGE, clients(gce))
    assert (
        Finding(
            "unknown",
            "the Compute Engine API is not enabled yet: the zone's offers, reservation and quotas were not checked, "
            f"nor image {NAME} ({KEY})",
        )
        in findings
    )
    assert PATH not in gce.requests
