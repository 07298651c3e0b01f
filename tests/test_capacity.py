"""The capacity preflight: the pure checks at both sides of each boundary, then the real Compute Engine and
Service Usage clients against a loopback API speaking their JSON and error shapes (tests/fake_compute.py),
then the program: a missing reservation stops `pulumi up` before any resource is registered."""

from __future__ import annotations

import time

import pytest
from google.auth.credentials import AnonymousCredentials

from core import deadline
from infra.gcp import capacity
from infra.gcp.capacity import Finding, Held, needs, quota_findings, reservation_findings
from tests.conftest import SENTINEL_TOKEN
from tests.fake_compute import (
    aggregate_reservation,
    error,
    fake_compute,
    instance,
    quota_info,
    quota_path,
    region,
    reservation,
)
from tests.lifecycle_walk import settings
from tools.plan import plan_stack
from tools.stack_files import ROOT

PROD = settings("prod", [])
DEV = settings("dev", [])
RES_PATH = "/compute/v1/projects/my-tpu-prod-project/zones/us-east5-b/reservations/my-v6e-32-reservation"
REGION_PATH = "/compute/v1/projects/{project}/regions/us-east5"
VMS_PATH = "/compute/v1/projects/{project}/zones/us-east5-b/instances"
REAL_CHECK = capacity.check_capacity
"""The check itself (conftest replaces it with one that finds nothing, for every other test)."""
ENOUGH = {
    "CPUS": (1000, 0),
    "N4_CPUS": (600, 0),
    "E2_CPUS": (200, 0),
}


def found(count=8, in_use=0, **fields):
    base = {
        "status": "READY",
        "specific_reservation_required": True,
        "machine_type": "ct6e-standard-4t",
        "count": count,
        "in_use_count": in_use,
    }
    return {**base, **fields}


def problems(findings):
    return [f.text for f in findings if f.level == "problem"]


# ---------------------------------------------------------------------------------------------
# What the stack needs, and the pure checks


@pytest.mark.pure
def test_what_the_pools_need():
    prod = needs(PROD)
    assert prod.reservation == ("my-tpu-prod-project", "my-v6e-32-reservation") and prod.vms == 8
    # system e2-standard-8 x 10 = 80, cpu-np n4-standard-64 x 4 = 256.
    assert prod.cpus == {"E2_CPUS": 80, "N4_CPUS": 256, "CPUS": 336} and prod.chips == 32
    shared = needs(settings("prod", ["tpu-rl:tpu.reservation=projects/owner-proj/reservations/shared-v6e"]))
    assert shared.reservation == ("owner-proj", "shared-v6e")
    dev = needs(DEV)
    assert dev.reservation is None and dev.preemptible and dev.vms == 2 and dev.chips == 8
    on_demand = needs(settings("dev", ["tpu-rl:tpu.capacity=on-demand"]))
    assert not on_demand.preemptible
    assert needs(settings("dev", ["tpu-rl:tpu.capacity=flex-start"])).preemptible


@pytest.mark.pure
@pytest.mark.parametrize(
    ("reservation", "held_vms", "message"),
    [
        (found(8), 0, None),
        (found(8, in_use=1), 0, "has 7 of 8 VMs free, the slices need 8"),
        (found(8, in_use=8), 8, None),  # a later `up`: this stack's own slice holds them
        (found(8, in_use=8), 7, "has 0 of 8 VMs free (and 7 held by this stack), the slices need 8"),
        (found(16, in_use=8), 0, None),
        (found(8, specific_reservation_required=False), 0, "is not a specific reservation"),
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
def test_the_quotas_at_their_boundaries():
    need = needs(PROD)
    exact = {"CPUS": (336, 0), "N4_CPUS": (256, 0), "E2_CPUS": (80, 0)}
    assert problems(quota_findings(need, exact, "us-east5", Held())) == [], "a reservation needs no TPU quota"
    short = {**exact, "N4_CPUS": (256, 1)}
    (problem,) = problems(quota_findings(need, short, "us-east5", Held()))
    assert problem.startswith("quota N4_CPUS in us-east5: 255 of 256 vCPUs left, the CPU pools need 256")
    ours = Held(cpus={"N4_CPUS": 128, "CPUS": 128})
    busy = {**exact, "N4_CPUS": (256, 128), "CPUS": (336, 128)}
    assert problems(quota_findings(need, busy, "us-east5", ours)) == [], "what the stack holds counts as left"
    unknown = quota_findings(need, {"CPUS": (336, 0), "E2_CPUS": (80, 0)}, "us-east5", Held())
    assert unknown == [Finding("unknown", "region us-east5 lists no N4_CPUS quota; it was not checked")]
    assert quota_findings(need, None, "us-east5", Held())[0].level == "unknown"


@pytest.mark.pure
def test_tpu_quota_limits_by_capacity():
    """Cloud Quotas entries as it lists them: a default (no dimensions, every location), per region, per
    region and family; the most specific entry for the slice's region (and, on demand, CT6E) counts."""
    spot = needs(DEV)
    on_demand = needs(settings("dev", ["tpu-rl:tpu.capacity=on-demand"]))
    flex = needs(settings("dev", ["tpu-rl:tpu.capacity=flex-start"]))
    default = {"dimensions": {}, "value": 0, "locations": ["us-east5", "us-central1"]}
    here = {"dimensions": {"region": "us-east5"}, "value": 8, "locations": ["us-east5"]}
    elsewhere = {"dimensions": {"region": "us-central1"}, "value": 64, "locations": ["us-central1"]}
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
    (short,) = capacity.tpu_quota_findings(flex, [{**here, "value": 7}], "us-east5")
    assert short.level == "unknown" and short.text.endswith("flex-start may use on-demand quota instead")
    family = {"dimensions": {"region": "us-east5", "tpu_family": "CT6E"}, "value": 8, "locations": ["us-east5"]}
    v5e = {"dimensions": {"region": "us-east5", "tpu_family": "CT5LP"}, "value": 64, "locations": ["us-east5"]}
    assert not problems(capacity.tpu_quota_findings(on_demand, [v5e, family], "us-east5"))
    assert problems(capacity.tpu_quota_findings(on_demand, [v5e, {**family, "value": 7}], "us-east5"))
    assert capacity.tpu_quota_findings(on_demand, [v5e], "us-east5")[0].level == "unknown", "another family only"
    assert capacity.tpu_quota_findings(spot, None, "us-east5")[0].level == "unknown"


@pytest.mark.pure
@pytest.mark.parametrize(
    ("chips", "in_use", "held_vms", "family", "message"),
    [
        (32, 0, 0, capacity.V6E_FAMILY, None),
        (32, 4, 0, capacity.V6E_FAMILY, "has 28 of 32 chips free, the slices need 32"),
        (32, 32, 8, capacity.V6E_FAMILY, None),  # a later `up`: 8 VMs x 4 chips held by this stack
        (32, 0, 0, "VM_FAMILY_CLOUD_TPU_LITE_POD_SLICE_CT5LP", "is a TPU reservation of VM_FAMILY_CLOUD_TPU_LITE"),
    ],
    ids=["exactly-free", "four-chips-short", "held-by-us", "other-family"],
)
def test_an_aggregate_tpu_reservation_is_counted_in_chips(chips, in_use, held_vms, family, message):
    """TPU capacity is often reserved as an aggregate reservation (a VM family and chips, no machine type):
    Cluster Toolkit skips its machine-type check for TPUs; here its family and free chips are checked."""
    found = {
        "status": "READY",
        "specific_reservation_required": True,
        "aggregate": True,
        "vm_family": family,
        "reserved": chips,
        "in_use": in_use,
    }
    result = problems(reservation_findings(needs(PROD), found, "us-east5-b", Held(tpu_vms=held_vms)))
    assert result == [] if message is None else message in result[0]


@pytest.mark.pure
def test_the_apis():
    assert capacity.api_findings({a: "ENABLED" for a in capacity.REQUIRED_APIS}, "p") == []
    disabled = {**{a: "ENABLED" for a in capacity.REQUIRED_APIS}, "container.googleapis.com": "DISABLED"}
    assert capacity.api_findings(disabled, "p") == [
        Finding("note", "this `up` enables container.googleapis.com in project p")
    ]


@pytest.mark.pure
def test_the_stacks_own_vms_are_counted_by_machine_type():
    vms = [
        {"machine_type": "https://www.googleapis.com/compute/v1/projects/p/zones/z/machineTypes/ct6e-standard-4t"},
        {"machine_type": "https://www.googleapis.com/compute/v1/projects/p/zones/z/machineTypes/n2-standard-64"},
        {"machine_type": "https://www.googleapis.com/compute/v1/projects/p/zones/z/machineTypes/e2-standard-8"},
    ]
    assert capacity.held(vms, "ct6e-standard-4t") == Held(1, {"N2_CPUS": 64, "CPUS": 72, "E2_CPUS": 8})


# ---------------------------------------------------------------------------------------------
# The real clients against the loopback API


@pytest.fixture
def compute(monkeypatch):
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


def clients(fake):
    return capacity.Clients(credentials=AnonymousCredentials(), client_options={"api_endpoint": fake.url})


def test_a_stack_with_its_capacity_passes_and_reads_each_thing_once(compute):
    assert REAL_CHECK(PROD, clients(compute)) == []
    assert sorted(set(compute.requests)) == sorted(
        [
            "/v1/projects/my-tpu-prod-project/services:batchGet",
            VMS_PATH.format(project="my-tpu-prod-project"),
            RES_PATH,
            REGION_PATH.format(project="my-tpu-prod-project"),
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
        Finding("unknown", "the Compute Engine API is not enabled yet: reservation and quotas were not checked")
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


def test_a_rate_limit_is_retried_within_the_budget(compute):
    compute.flaky[RES_PATH] = [
        (403, error(403, "Rate Limit Exceeded", "rateLimitExceeded")),
        (429, error(429, "Too many requests", "rateLimitExceeded")),
    ]
    assert REAL_CHECK(PROD, clients(compute)) == []
    assert compute.requests.count(RES_PATH) == 3


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


def test_up_stops_before_any_resource_when_the_reservation_is_missing(compute, monkeypatch):
    compute.routes[REGION_PATH.format(project="real-project-1")] = (200, region("us-east5", ENOUGH))
    compute.routes[VMS_PATH.format(project="real-project-1")] = (200, {"kind": "compute#instanceList", "items": []})
    monkeypatch.setattr(capacity, "make_clients", lambda: clients(compute))
    monkeypatch.setattr(capacity, "check_capacity", REAL_CHECK)
    plan, _ = plan_stack(
        ROOT / "Pulumi.prod.yaml",
        [*REAL, "tpu-rl:workflow.preflight=false"],
        live=True,
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
        live=True,
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


def crypto_key(purpose: str = "ENCRYPT_DECRYPT", primary: str | None = "ENABLED") -> dict:
    """A CryptoKey as Cloud KMS's REST API returns it (``projects.locations.keyRings.cryptoKeys.get``)."""
    key = {"name": OWN_KEY, "purpose": purpose, "createTime": "2026-11-01T10:00:00.000000Z"}
    if primary:
        key["primary"] = {
            "name": f"{OWN_KEY}/cryptoKeyVersions/1",
            "state": primary,
            "algorithm": "GOOGLE_SYMMETRIC_ENCRYPTION",
            "protectionLevel": "SOFTWARE",
        }
    return key


OWN = settings("prod", [f"tpu-rl:gke.secretsEncryptionKey={OWN_KEY}"])
KEY_PROBLEM = "tpu-rl:gke.secretsEncryptionKey: key " + OWN_KEY


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ((200, crypto_key()), []),
        (None, [f"{KEY_PROBLEM} was not found; create it (gcloud kms keys create) or set the key to `create`"]),
        (
            (200, crypto_key("ASYMMETRIC_SIGN")),
            [f"{KEY_PROBLEM} is for ASYMMETRIC_SIGN; GKE needs an ENCRYPT_DECRYPT key"],
        ),
        (
            (200, crypto_key(primary="DISABLED")),
            [f"{KEY_PROBLEM} has DISABLED as its primary version; GKE needs an enabled one"],
        ),
        (
            (200, crypto_key(primary=None)),
            [f"{KEY_PROBLEM} has no primary version as its primary version; GKE needs an enabled one"],
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
    assert not [r for r in compute.requests if "cryptoKeys" in r], "a key the stack creates is not read"
