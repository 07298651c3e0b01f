"""The capacity preflight: the pure checks at both sides of each boundary (the quota rule of every machine family
the stack allows among them), then the real Compute Engine and Service Usage clients against a loopback API
speaking their JSON and error shapes (tests/fake_compute.py), then the program: a missing reservation stops
`pulumi up` before any resource is registered. Hostile replies: test_capacity_hostile.py; names a destroy
leaves taken: test_capacity_survivors.py."""

from __future__ import annotations

import dataclasses
import time

import pytest
from google.auth.credentials import AnonymousCredentials

from core import deadline
from core.machines import CPU_QUOTAS, HYPERDISK_FAMILIES, PD_FAMILIES
from core.tpu import CATALOGUE
from infra.gcp import capacity
from infra.gcp.capacity import Finding, Held, QuotaLimit, Reservation, needs, quota_findings, reservation_findings
from tests.conftest import SENTINEL_TOKEN
from tests.fake_compute import (
    aggregate_reservation,
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
from tools.plan import plan_stack
from tools.stack_files import ROOT

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
}


def found(count=8, in_use=0, **fields):
    base = {"status": "READY", "specific": True, "aggregate": False, "machine_type": "ct6e-standard-4t"}
    return Reservation(**{**base, "count": count, "in_use": in_use, **fields})


def problems(findings):
    return [f.text for f in findings if f.level == "problem"]


# ---------------------------------------------------------------------------------------------
# What the stack needs, and the pure checks


@pytest.mark.pure
def test_what_the_pools_need():
    prod = needs(PROD)
    assert prod.reservation == ("my-tpu-prod-project", "my-v6e-32-reservation") and prod.vms == 8
    # system e2-standard-8 x 10 = 80 (CPUS), cpu-np n4-standard-64 x 4 = 256 (N4_CPUS, and CPUS perhaps).
    assert prod.cpus == {"CPUS": 80, "N4_CPUS": 256} and prod.chips == 32
    assert prod.maybe_cpus == {"CPUS": 256} and prod.maybe_families == ("N4",) and prod.uncounted == ()
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
def test_the_quotas_at_their_boundaries():
    need = needs(PROD)
    exact: dict[str, tuple[float, float]] = {"CPUS": (336, 0), "N4_CPUS": (256, 0), "E2_CPUS": (0, 0)}
    assert quota_findings(need, exact, "us-east5", Held()) == [], "a reservation needs no TPU quota; E2_CPUS unread"
    short = {**exact, "N4_CPUS": (256, 1)}
    (problem,) = problems(quota_findings(need, short, "us-east5", Held()))
    assert problem.startswith("quota N4_CPUS in us-east5: 255 of 256 vCPUs left, the CPU pools need 256")
    (e2,) = problems(quota_findings(need, {**exact, "CPUS": (79, 0)}, "us-east5", Held()))
    assert e2.startswith("quota CPUS in us-east5: 79 of 79 vCPUs left, the CPU pools need 80"), "E2 draws on CPUS"
    ours = Held(cpus={"N4_CPUS": 128}, maybe_cpus={"CPUS": 128})
    busy = {**exact, "N4_CPUS": (256, 128), "CPUS": (336, 128)}
    assert quota_findings(need, busy, "us-east5", ours) == [], "what the stack holds counts as left"
    unknown = quota_findings(need, {"CPUS": (336, 0)}, "us-east5", Held())
    assert unknown == [Finding("unknown", "region us-east5 lists no N4_CPUS quota; it was not checked")]
    assert quota_findings(need, None, "us-east5", Held())[0].level == "unknown"


@pytest.mark.pure
def test_cpus_short_only_if_n4_counts_against_it_is_a_warning_not_a_stop():
    """The documentation this project could read does not settle whether N4 vCPUs also count against CPUS
    (core.machines.CPU_QUOTAS): a CPUS limit that fits the E2 pool but not E2 + N4 warns, and never stops."""
    need = needs(PROD)
    (warning,) = quota_findings(need, {"CPUS": (200, 0), "N4_CPUS": (256, 0)}, "us-east5", Held())
    assert warning.level == "unknown"
    assert warning.text.startswith(
        "quota CPUS in us-east5: 200 of 200 vCPUs left; the CPU pools need 336 at their maximum size if N4 vCPUs "
        "count against CPUS as well as their own metric"
    )


FAMILIES = PD_FAMILIES + HYPERDISK_FAMILIES


@pytest.mark.pure
def test_every_family_the_stack_allows_has_a_quota_rule():
    assert set(CPU_QUOTAS) == set(FAMILIES)


def with_pools(system: str, cpu: str):
    """The prod settings with other pool machines (the quota rule is about families: the config's own size
    rules for cpu-np are not what is tested here)."""
    return dataclasses.replace(
        PROD,
        system_pool=dataclasses.replace(PROD.system_pool, machine_type=system),
        cpu_pool=dataclasses.replace(PROD.cpu_pool, machine_type=cpu),
    )


@pytest.mark.pure
@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_counts_only_against_the_metrics_it_draws_on(family):
    """cpu-np of 4 x <family>-standard-16 (64 vCPUs) beside the system pool's 10 x e2-standard-8 (80): E2 and N1
    against CPUS; every other series against its own <SERIES>_CPUS for sure and against CPUS perhaps (a warning
    when short, never a stop)."""
    need = needs(with_pools("e2-standard-8", f"{family}-standard-16"))
    own = f"{family.upper()}_CPUS"
    if family in ("e2", "n1"):
        assert need.cpus == {"CPUS": 80 + 64} and need.maybe_cpus == {} and own not in need.cpus
        assert quota_findings(need, {"CPUS": (144, 0), own: (0, 0)}, "r", Held()) == [], f"{own} is not read"
        (short,) = problems(quota_findings(need, {"CPUS": (143, 0)}, "r", Held()))
        assert short.startswith("quota CPUS in r: 143 of 143 vCPUs left, the CPU pools need 144")
        return
    assert need.cpus == {"CPUS": 80, own: 64} and need.maybe_cpus == {"CPUS": 64}
    assert need.maybe_families == (family.upper(),)
    assert quota_findings(need, {"CPUS": (144, 0), own: (64, 0)}, "r", Held()) == []
    (short,) = problems(quota_findings(need, {"CPUS": (144, 0), own: (63, 0)}, "r", Held()))
    assert short.startswith(f"quota {own} in r: 63 of 63 vCPUs left"), "its own metric stops `up`"
    maybe = quota_findings(need, {"CPUS": (80, 0), own: (64, 0)}, "r", Held())
    assert [f.level for f in maybe] == ["unknown"], "CPUS short only if the family counts against it: a warning"
    assert f"if {family.upper()} vCPUs count against CPUS" in maybe[0].text
    assert problems(quota_findings(need, {"CPUS": (79, 0), own: (64, 0)}, "r", Held())), "the E2 pool's CPUS stops"
    unlisted = quota_findings(need, {"CPUS": (144, 0)}, "r", Held())
    assert unlisted == [Finding("unknown", f"region r lists no {own} quota; it was not checked")]


@pytest.mark.pure
def test_a_machine_of_unknown_shape_is_named_not_counted():
    need = needs(settings("prod", ["tpu-rl:systemPool.machineType=e2-medium"]))
    assert need.uncounted == (("tpu-rl:systemPool.machineType", "e2-medium"),) and need.cpus == {"N4_CPUS": 256}
    findings = quota_findings(need, {"CPUS": (1000, 0), "N4_CPUS": (256, 0)}, "r", Held())
    assert findings == [
        Finding(
            "unknown",
            "tpu-rl:systemPool.machineType e2-medium has no size or quota rule this check knows; its vCPUs were not "
            "counted",
        )
    ]


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
    assert capacity.api_findings({a: "ENABLED" for a in capacity.REQUIRED_APIS}, "p") == []
    disabled = {**{a: "ENABLED" for a in capacity.REQUIRED_APIS}, "container.googleapis.com": "DISABLED"}
    assert capacity.api_findings(disabled, "p") == [
        Finding("note", "this `up` enables container.googleapis.com in project p")
    ]


@pytest.mark.pure
def test_the_stacks_own_vms_are_counted_by_machine_type():
    url = "https://www.googleapis.com/compute/v1/projects/p/zones/z/machineTypes/"
    vms = [url + "ct6e-standard-4t", url + "n2-standard-64", url + "e2-standard-8", url + "e2-custom-4-8192"]
    assert capacity.held(vms, "ct6e-standard-4t") == Held(1, {"N2_CPUS": 64, "CPUS": 8}, {"CPUS": 64})


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


@pytest.mark.slow
def test_a_stack_with_its_capacity_passes_and_reads_each_thing_once(compute):
    assert REAL_CHECK(PROD, clients(compute)) == []
    assert sorted(compute.requests) == sorted(
        [
            "/v1/projects/my-tpu-prod-project/services:batchGet",
            VMS_PATH.format(project="my-tpu-prod-project"),
            RES_PATH,
            REGION_PATH.format(project="my-tpu-prod-project"),
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


@pytest.mark.slow
def test_a_rate_limit_is_retried_within_the_budget(compute):
    compute.flaky[RES_PATH] = [
        (403, error(403, "Rate Limit Exceeded", "rateLimitExceeded")),
        (429, error(429, "Too many requests", "rateLimitExceeded")),
    ]
    assert REAL_CHECK(PROD, clients(compute)) == []
    assert compute.requests.count(RES_PATH) == 3


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
    assert not [r for r in compute.requests if "cryptoKeys" in r], "no ring of the stack's names: no key to read"
