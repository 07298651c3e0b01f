"""The capacity preflight: the pure checks at both sides of each boundary (the quota rule of every machine family
the stack allows among them), then the real Compute Engine and Service Usage clients against a loopback API
speaking their JSON and error shapes (tests/fake_compute.py), then the program: a missing reservation stops
`pulumi up` before any resource is registered. Hostile replies: test_capacity_hostile.py; names a destroy
leaves taken: test_capacity_survivors.py."""

from __future__ import annotations

import dataclasses
import functools
import threading
import time

import pytest

from core import deadline
from core.names import REQUIRED_APIS
from core.tpu import CATALOGUE
from infra.gcp import capacity
from infra.gcp.capacity import Finding, Held, QuotaLimit, Reservation, needs, reservation_findings
from tests.conftest import SENTINEL_TOKEN
from tests.fake_compute import (
    aggregate_reservation,
    clients,
    crypto_key,
    error,
    fake_compute,
    instance,
    quota_info,
    quota_path,
    region,
    reservation,
)
from tests.lifecycle_walk import settings
from tests.world import fake_world
from tools.plan import plan_stack
from tools.stack_files import ROOT

pytestmark = pytest.mark.usefixtures("google_clients")

PROD = settings("prod", [])
DEV = settings("dev", [])
RES_PATH = "/compute/v1/projects/my-tpu-prod-project/zones/us-east5-b/reservations/my-v6e-32-reservation"
REGION_PATH = "/compute/v1/projects/{project}/regions/us-east5"
VMS_PATH = "/compute/v1/projects/{project}/zones/us-east5-b/instances"
V6E_FAMILY = CATALOGUE["v6e"].reservation_family
"""The prod stack's slice's aggregate reservation family (``VM_FAMILY_CLOUD_TPU_LITE_POD_SLICE_CT6E``)."""
REAL_CHECK = capacity.check_capacity
"""The check itself (conftest replaces it with one that finds nothing, for every other test)."""
ENOUGH = {
    "CPUS": (1000, 0),
    "N4_CPUS": (600, 0),
    "E2_CPUS": (200, 0),
    "SSD_TOTAL_GB": (4096, 0),
    "HDB_TOTAL_GB": (8192, 0),
}
"""Quotas that hold the prod stack's pools at their maximum (tests/test_capacity_quotas.py tests the boundaries)."""


def found(count=8, in_use=0, **fields):
    base = {"status": "READY", "specific": True, "aggregate": False, "machine_type": "ct6e-standard-4t"}
    return Reservation(**{**base, "count": count, "in_use": in_use, **fields})


def problems(findings):
    return [f.text for f in findings if f.level == "problem"]


# ---------------------------------------------------------------------------------------------
# What the stack needs, and the pure checks


@pytest.mark.pure
@pytest.mark.parametrize(
    ("reservation", "held_vms", "message"),
    [
        (found(8), 0, None),
        (found(8, in_use=1), 0, "has 7 of 8 VMs free, the slices need 8"),
        (found(8, in_use=8), 8, None),  # a later `up`: this stack's own slice holds them
        (found(8, in_use=8), 7, "has 0 of 8 VMs free (and 7 held by this stack), the slices need 8"),
        (found(16, in_use=8), 0, None),
        (found(8, specific=False), 0, "is not a specific reservation"),
        (found(8, machine_type="ct6e-standard-8t"), 0, "holds ct6e-standard-8t VMs, the slice needs ct6e-standard-4t"),
        (found(8, status="CREATING"), 0, "is CREATING, not READY"),
        (None, 0, "reservation my-v6e-32-reservation (project my-tpu-prod-project, zone us-east5-b) was not found"),
    ],
    ids=[
        "exactly-free",
        "one-short",
        "held-by-us",
        "held-not-enough",
        "larger",
        "not-specific",
        "other-type",
        "creating",
        "missing",
    ],
)
def test_the_reservation_at_its_boundaries(reservation, held_vms, message):
    found_problems = problems(reservation_findings(needs(PROD), reservation, "us-east5-b", Held(tpu_vms=held_vms)))
    if message is None:
        assert found_problems == []
    else:
        (problem,) = found_problems
        assert message in problem and problem.startswith("tpu-rl:tpu.reservation: " if reservation is None else "reser")


@pytest.mark.pure
def test_tpu_quota_limits_by_capacity():
    """Cloud Quotas entries as it lists them: a default (no dimensions, every location), per region, per
    region and family; the most specific entry for the slice's region (and, on demand, CT6E) counts."""
    spot = needs(DEV)
    on_demand = needs(settings("dev", ["tpu-rl:tpu.capacity=on-demand"]))
    flex = needs(settings("dev", ["tpu-rl:tpu.capacity=flex-start"]))
    default = QuotaLimit({}, 0, ("us-east5", "us-central1"))
    here = QuotaLimit({"region": "us-east5"}, 8, ("us-east5",))
    elsewhere = QuotaLimit({"region": "us-central1"}, 64, ("us-central1",))
    assert capacity.tpu_quota_id(spot) == "PREEMPTIBLE-TPU-V6E-per-project-region"
    assert capacity.tpu_quota_id(on_demand) == "TPUS-PER-TPU-FAMILY-per-project-region"
    assert capacity.tpu_quota_findings(spot, [default, here, elsewhere], "us-east5") == [
        Finding(
            "note", "quota PREEMPTIBLE-TPU-V6E-per-project-region in us-east5: limit 8 TPU chips (usage is not checked)"
        )
    ]
    (problem,) = problems(capacity.tpu_quota_findings(spot, [default, elsewhere], "us-east5"))
    assert problem.startswith(
        "quota PREEMPTIBLE-TPU-V6E-per-project-region in us-east5: the limit is 0 TPU chips, the slices need 8"
    ), "the default entry (0 for a new project) applies to a region without its own"
    (short,) = capacity.tpu_quota_findings(flex, [dataclasses.replace(here, value=7)], "us-east5")
    assert short.level == "unknown" and short.text.endswith("flex-start may use on-demand quota instead")
    family = QuotaLimit({"region": "us-east5", "tpu_family": "CT6E"}, 8, ("us-east5",))
    v5e = QuotaLimit({"region": "us-east5", "tpu_family": "CT5LP"}, 64, ("us-east5",))
    assert not problems(capacity.tpu_quota_findings(on_demand, [v5e, family], "us-east5"))
    assert problems(capacity.tpu_quota_findings(on_demand, [v5e, dataclasses.replace(family, value=7)], "us-east5"))
    assert capacity.tpu_quota_findings(on_demand, [v5e], "us-east5")[0].level == "unknown", "another family only"
    assert capacity.tpu_quota_findings(spot, None, "us-east5")[0].level == "unknown"
    (unbounded,) = capacity.tpu_quota_findings(spot, [dataclasses.replace(here, value=-1)], "us-east5")
    assert unbounded.level == "unknown", "a negative limit is no bound this check can judge: never a stop"


@pytest.mark.pure
@pytest.mark.parametrize(
    ("chips", "in_use", "held_vms", "family", "message"),
    [
        (32, 0, 0, V6E_FAMILY, None),
        (32, 4, 0, V6E_FAMILY, "has 28 of 32 chips free, the slices need 32"),
        (32, 32, 8, V6E_FAMILY, None),  # a later `up`: 8 VMs x 4 chips held by this stack
        (32, 0, 0, "VM_FAMILY_CLOUD_TPU_LITE_POD_SLICE_CT5LP", "is a TPU reservation of VM_FAMILY_CLOUD_TPU_LITE"),
    ],
    ids=["exactly-free", "four-chips-short", "held-by-us", "other-family"],
)
def test_an_aggregate_tpu_reservation_is_counted_in_chips(chips, in_use, held_vms, family, message):
    """TPU capacity is often reserved as an aggregate reservation (a VM family and chips, no machine type):
    Cluster Toolkit skips its machine-type check for TPUs; here its family and free chips are checked."""
    found = Reservation(status="READY", specific=True, aggregate=True, vm_family=family, count=chips, in_use=in_use)
    result = problems(reservation_findings(needs(PROD), found, "us-east5-b", Held(tpu_vms=held_vms)))
    assert result == [] if message is None else message in result[0]


@pytest.mark.pure
def test_the_apis():
    assert capacity.api_findings({a: "ENABLED" for a in REQUIRED_APIS}, "p") == []
    disabled = {**{a: "ENABLED" for a in REQUIRED_APIS}, "container.googleapis.com": "DISABLED"}
    assert capacity.api_findings(disabled, "p") == [
        Finding("note", "this `up` enables container.googleapis.com in project p")
    ]


# ---------------------------------------------------------------------------------------------
# The real clients against the loopback API


class FakeClock:
    """api_core's retry waits through ``time.sleep`` and measures its deadline by ``time.monotonic``
    (``retry_unary.retry_target``, ``retry_base._retry_error_helper``): this clock advances on each sleep instead."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []
        self.before = {t for t in threading.enumerate() if t is not threading.main_thread()}
        """Threads an earlier test left (a library's daemon): theirs is the real clock, so they move this one not."""

    def monotonic(self) -> float:
        return time.monotonic() if threading.current_thread() in self.before else self.now

    def sleep(self, seconds: float) -> None:
        if threading.current_thread() in self.before:
            time.sleep(seconds)
            return
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    from google.api_core.retry import retry_base, retry_unary  # the Google clients' library: not at collection

    fake = FakeClock()
    monkeypatch.setattr(retry_unary, "time", fake)
    monkeypatch.setattr(retry_base, "time", fake)
    return fake


@pytest.fixture
def compute(monkeypatch, clock):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with fake_compute() as fake:
        for project in ("my-tpu-prod-project", "my-tpu-dev-project"):
            fake.routes[REGION_PATH.format(project=project)] = (200, region("us-east5", ENOUGH))
            fake.routes[VMS_PATH.format(project=project)] = (200, {"kind": "compute#instanceList", "items": []})
        fake.routes[RES_PATH] = (
            200,
            reservation("my-v6e-32-reservation", project="my-tpu-prod-project", zone="us-east5-b", count=8),
        )
        yield fake


@pytest.mark.slow
def test_a_stack_with_its_capacity_passes_and_reads_each_thing_once(compute):
    assert REAL_CHECK(PROD, clients(compute)) == []
    assert sorted(compute.requests) == sorted(
        [
            "/v3/projects/my-tpu-prod-project:testIamPermissions",
            "/v1/projects/my-tpu-prod-project/services:batchGet",
            *(
                f"/compute/v1/projects/my-tpu-prod-project/zones/us-east5-b/{kind}/{name}"
                for kind, name in (
                    ("machineTypes", "e2-standard-8"),
                    ("machineTypes", "n4-standard-64"),
                    ("machineTypes", "ct6e-standard-4t"),
                    ("acceleratorTypes", "ct6e"),
                    ("diskTypes", "pd-balanced"),
                    ("diskTypes", "hyperdisk-balanced"),
                )
            ),
            VMS_PATH.format(project="my-tpu-prod-project"),
            RES_PATH,
            REGION_PATH.format(project="my-tpu-prod-project"),
            # the project's quotas across all regions, and whether the stack's network exists (a fresh project: no)
            "/compute/v1/projects/my-tpu-prod-project",
            "/compute/v1/projects/my-tpu-prod-project/global/networks/tpu-rl-prod-net",
            # gke.secretsEncryptionKey: create looks for a ring of its name an earlier destroy left (none here)
            "/v1/projects/my-tpu-prod-project/locations/us-east5/keyRings/tpu-rl-prod-keys",
        ]
    )


def test_a_missing_reservation_is_a_problem(compute):
    del compute.routes[RES_PATH]
    (problem,) = problems(REAL_CHECK(PROD, clients(compute)))
    assert "my-v6e-32-reservation (project my-tpu-prod-project, zone us-east5-b) was not found" in problem


def test_the_stacks_own_slice_counts_as_free_on_a_later_up(compute):
    compute.routes[RES_PATH] = (
        200,
        reservation("my-v6e-32-reservation", project="my-tpu-prod-project", zone="us-east5-b", count=8, in_use=8),
    )
    assert "VMs free" in problems(REAL_CHECK(PROD, clients(compute)))[0]
    vms = [
        instance(f"gke-tpu-{i}", "ct6e-standard-4t", project="my-tpu-prod-project", zone="us-east5-b") for i in range(8)
    ]
    compute.routes[VMS_PATH.format(project="my-tpu-prod-project")] = (
        200,
        {"kind": "compute#instanceList", "items": vms},
    )
    assert REAL_CHECK(PROD, clients(compute)) == []


def test_a_disabled_service_usage_api_is_a_problem_and_other_apis_a_note(compute):
    compute.services["container.googleapis.com"] = "DISABLED"
    (note,) = REAL_CHECK(PROD, clients(compute))
    assert note == Finding("note", "this `up` enables container.googleapis.com in project my-tpu-prod-project")
    compute.service_usage_error = (
        403,
        error(
            403,
            "Service Usage API has not been used in project 42",
            "accessNotConfigured",
            service="serviceusage.googleapis.com",
        ),
    )
    (problem,) = problems(REAL_CHECK(PROD, clients(compute)))
    assert problem.startswith("the Service Usage API is disabled in project my-tpu-prod-project")


def test_a_disabled_compute_api_skips_the_reservation_and_quotas(compute):
    compute.services["compute.googleapis.com"] = "DISABLED"
    findings = REAL_CHECK(PROD, clients(compute))
    assert (
        Finding(
            "unknown",
            "the Compute Engine API is not enabled yet: the zone's offers, reservation and quotas were not checked",
        )
        in findings
    )
    assert RES_PATH not in compute.requests and not problems(findings)


def test_no_permission_is_an_unknown_not_a_problem(compute):
    compute.routes[RES_PATH] = (403, error(403, "Required 'compute.reservations.get' permission", "forbidden"))
    findings = REAL_CHECK(PROD, clients(compute))
    assert not problems(findings)
    assert (
        Finding(
            "unknown",
            "reading reservation my-v6e-32-reservation: permission denied (HTTP 403); the reservation was not checked",
        )
        in findings
    )


def test_a_rate_limit_is_retried_within_the_budget(compute, clock):
    compute.flaky[RES_PATH] = [
        (403, error(403, "Rate Limit Exceeded", "rateLimitExceeded")),
        (429, error(429, "Too many requests", "rateLimitExceeded")),
    ]
    assert REAL_CHECK(PROD, clients(compute)) == []
    assert compute.requests.count(RES_PATH) == 3
    assert len(clock.slept) == 2 and 0 < sum(clock.slept) <= 0.5 + 1.0, "two backoffs (jittered), on the fake clock"


@pytest.mark.slow
def test_a_hanging_api_is_an_unknown_within_the_budget(compute, monkeypatch):
    monkeypatch.setitem(deadline.BUDGETS, "compute", deadline.Budget(1.5, 0.5, 0.5, "test"))
    compute.hang.add(RES_PATH)
    start = time.monotonic()
    findings = REAL_CHECK(PROD, clients(compute))
    assert time.monotonic() - start < 1.5 * 2 + 3, "the hanging read ends at its budget"
    assert any(f.level == "unknown" and "reservation my-v6e-32-reservation" in f.text for f in findings)
    assert not problems(findings)


def test_a_short_tpu_quota_is_a_problem_through_the_client(compute):
    """Spot dev: the chips' limit comes from Cloud Quotas (regions.get does not list the v6e metrics)."""
    path = quota_path("my-tpu-dev-project", "PREEMPTIBLE-TPU-V6E-per-project-region")
    compute.routes[path] = (
        200,
        quota_info(
            "my-tpu-dev-project",
            "PREEMPTIBLE-TPU-V6E-per-project-region",
            [({}, 0, ["us-east5"]), ({"region": "us-east5"}, 4, ["us-east5"])],
        ),
    )
    (problem,) = problems(REAL_CHECK(DEV, clients(compute)))
    assert problem.startswith("quota PREEMPTIBLE-TPU-V6E-per-project-region in us-east5: the limit is 4 TPU chips")
    assert path in compute.requests
    del compute.routes[path]
    findings = REAL_CHECK(DEV, clients(compute))
    assert Finding(
        "unknown", "quota PREEMPTIBLE-TPU-V6E-per-project-region was not found; TPU quota was not checked"
    ) in findings and not problems(findings)


def test_an_aggregate_reservation_through_the_client(compute):
    compute.routes[RES_PATH] = (
        200,
        aggregate_reservation("my-v6e-32-reservation", project="my-tpu-prod-project", zone="us-east5-b", chips=32),
    )
    assert REAL_CHECK(PROD, clients(compute)) == []
    compute.routes[RES_PATH] = (
        200,
        aggregate_reservation(
            "my-v6e-32-reservation", project="my-tpu-prod-project", zone="us-east5-b", chips=32, in_use=16
        ),
    )
    (problem,) = problems(REAL_CHECK(PROD, clients(compute)))
    assert "has 16 of 32 chips free, the slices need 32" in problem


# ---------------------------------------------------------------------------------------------
# The program


REAL = ["gcp:project=real-project-1", "tpu-rl:tpu.reservation=res-a", 'tpu-rl:authorizedNetworks=["198.18.0.0/15"]']
"""The prod stack with its placeholders replaced (the placeholder check comes first)."""


@pytest.mark.slow
def test_up_stops_before_any_resource_when_the_reservation_is_missing(compute, monkeypatch):
    compute.routes[REGION_PATH.format(project="real-project-1")] = (200, region("us-east5", ENOUGH))
    compute.routes[VMS_PATH.format(project="real-project-1")] = (200, {"kind": "compute#instanceList", "items": []})
    monkeypatch.setattr(capacity.check, "make_clients", lambda: clients(compute))
    plan, _ = plan_stack(
        ROOT / "Pulumi.prod.yaml",
        [*REAL, "tpu-rl:workflow.preflight=false"],
        world=functools.partial(fake_world, capacity=REAL_CHECK),
        preflight=True,
        secrets={"tpu-rl:hfToken": SENTINEL_TOKEN},
        raise_errors=False,
    )
    assert str(plan.error) == (
        "capacity check: tpu-rl:tpu.reservation: reservation res-a (project real-project-1, zone us-east5-b) "
        "was not found; create it, or set tpu-rl:tpu.reservation (and gcp:zone) to the reservation the slice "
        "should use (tpu-rl:workflow.capacityCheck: false skips this check)"
    )
    assert plan.resources == [], "nothing is registered"
    assert "/compute/v1/projects/real-project-1/zones/us-east5-b/reservations/res-a" in compute.requests
    compute.requests.clear()
    skipped, _ = plan_stack(
        ROOT / "Pulumi.prod.yaml",
        [*REAL, "tpu-rl:workflow.preflight=false", "tpu-rl:workflow.capacityCheck=false"],
        world=functools.partial(fake_world, capacity=REAL_CHECK),
        preflight=True,
        secrets={"tpu-rl:hfToken": SENTINEL_TOKEN},
        raise_errors=False,
    )
    assert compute.requests == [], "the check is skipped"
    assert skipped.resources and "capacity" not in str(skipped.error), "the program went on to register the stack"


# ---------------------------------------------------------------------------------------------
# A Secrets key of one's own (tpu-rl:gke.secretsEncryptionKey naming a key)

OWN_KEY = "projects/security-project/locations/us-east5/keyRings/gke/cryptoKeys/secrets"
KEY_PATH = f"/v1/{OWN_KEY}"


OWN = settings("prod", [f"tpu-rl:gke.secretsEncryptionKey={OWN_KEY}"])
KEY_PROBLEM = "tpu-rl:gke.secretsEncryptionKey: key " + OWN_KEY


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ((200, crypto_key(OWN_KEY)), []),
        (None, [f"{KEY_PROBLEM} was not found; create it (gcloud kms keys create) or set the key to `create`"]),
        (
            (200, crypto_key(OWN_KEY, "ASYMMETRIC_SIGN")),
            [f"{KEY_PROBLEM} is for ASYMMETRIC_SIGN; GKE needs an ENCRYPT_DECRYPT key"],
        ),
        (
            (200, crypto_key(OWN_KEY, primary="DISABLED")),
            [f"{KEY_PROBLEM} has DISABLED as its primary version; GKE needs an enabled one"],
        ),
        (
            (200, crypto_key(OWN_KEY, primary=None)),
            [f"{KEY_PROBLEM} has no primary version; GKE needs an enabled one"],
        ),
    ],
)
def test_a_secrets_key_of_ones_own_is_read_before_anything_is_created(compute, answer, expected):
    if answer:
        compute.routes[KEY_PATH] = answer
    assert problems(REAL_CHECK(OWN, clients(compute))) == expected
    assert KEY_PATH in compute.requests


def test_a_key_the_check_may_not_read_is_an_unknown_and_create_reads_no_key(compute):
    compute.routes[KEY_PATH] = (403, error(403, "Permission 'cloudkms.cryptoKeys.get' denied", "forbidden"))
    findings = REAL_CHECK(OWN, clients(compute))
    assert not problems(findings)
    assert (
        Finding(
            "unknown", f"reading Cloud KMS key {OWN_KEY}: permission denied (HTTP 403); the Secrets key was not checked"
        )
        in findings
    )
    compute.requests.clear()
    REAL_CHECK(PROD, clients(compute))
    assert not [r for r in compute.requests if "cryptoKeys" in r], "no ring of the stack's names: no key to read"
