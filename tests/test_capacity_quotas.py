"""The capacity check asks for what a run uses: the slices, the system pool at its minimum, one
cpu-np node for the CPU steps and their boot disks stop `up` when short; the pools' autoscaling maximum beyond that
warns, naming the key to lower; a type the zone does not offer stops it; and the operator's missing permissions
stop it, all in one run. Pure first, at each boundary, then through the real clients against the loopback API
(tests/fake_compute.py), every shortfall in one run."""

from __future__ import annotations

import dataclasses

import pytest

from core.machines import CPU_QUOTAS, DISK_QUOTAS, HYPERDISK_FAMILIES, PD_FAMILIES, boot_disk_type
from infra.gcp import capacity, permissions
from infra.gcp.capacity import (
    Finding,
    Held,
    Offer,
    accelerator_findings,
    global_quota_findings,
    needs,
    offer_findings,
    offers,
    quota_findings,
)
from infra.gcp.capacity.needs import PROJECT as ALL_REGIONS
from tests.fake_compute import (
    GLOBAL_ENOUGH,
    clients,
    error,
    fake_compute,
    instance,
    region,
    reservation,
    serve_reservation,
)
from tests.lifecycle_walk import settings

pytestmark = pytest.mark.usefixtures("google_clients")

PROD = settings("prod", [])
DEV = settings("dev", [])
REAL_CHECK = capacity.check_capacity
PROJECT = "my-tpu-prod-project"
RUN = {"CPUS": 16, "N4_CPUS": 64, "SSD_TOTAL_GB": 400, "HDB_TOTAL_GB": 1300}
"""What a prod run uses: system 2 x e2-standard-8 (16 vCPUs, 2 x 200 GB pd-balanced), one cpu-np n4-standard-64 for
the CPU steps (64 vCPUs, 500 GB hyperdisk-balanced) and 8 TPU VMs' 100 GB hyperdisk-balanced boot disks."""
MAX = {"CPUS": 80, "N4_CPUS": 256, "SSD_TOTAL_GB": 2000, "HDB_TOTAL_GB": 2800}
"""The pools at their autoscaling maximum: system 10 nodes, cpu-np 4."""
ORDINARY = {"CPUS": (96, 0), "N4_CPUS": (64, 0), "SSD_TOTAL_GB": (500, 0), "HDB_TOTAL_GB": (1300, 0)}
"""Quotas that hold the run (and CPUS with N4 counted, 80) but not the maximum."""


def quotas(table):
    return {metric: (float(limit), float(usage)) for metric, (limit, usage) in table.items()}


def levels(findings):
    return [f.level for f in findings]


@pytest.mark.pure
def test_what_a_run_uses_and_the_maximum():
    need = needs(PROD)
    assert need.draw("run") == RUN and need.draw("max") == MAX
    assert need.maybe() == {"CPUS": 64} and need.maybe_families == ("N4",), "N4 may count against CPUS too"
    dev = needs(DEV)  # system 1 x e2-standard-8 of 100 GB, cpu-np 1 x n4-standard-64 of 200 GB, 2 TPU VMs
    assert dev.draw("run") == {"CPUS": 8, "N4_CPUS": 64, "SSD_TOTAL_GB": 100, "HDB_TOTAL_GB": 400}
    off = needs(settings("dev", ["tpu-rl:workflow.enabled=false"]))
    assert off.draw("run")["N4_CPUS"] == 0 and off.draw("max")["N4_CPUS"] == 128, "no steps: cpu-np at its minimum"
    warm = needs(settings("dev", ["tpu-rl:cpuPool.minNodes=2"]))
    assert warm.draw("run")["N4_CPUS"] == 128, "a minimum above one node is what the run has"


@pytest.mark.pure
def test_quotas_that_hold_the_run_but_not_the_maximum_pass_and_name_the_key_to_lower():
    findings = quota_findings(needs(PROD), quotas(ORDINARY), "us-east5", Held())
    assert levels(findings) == ["unknown"] * 3, "warnings, never a stop"
    hdb, n4, ssd = (f.text for f in findings)
    assert hdb == (
        "quota HDB_TOTAL_GB in us-east5: 1300 of 1300 GB left hold the run (1300) but not the pools at their "
        "autoscaling maximum (2800), so GKE cannot scale them that far; lower tpu-rl:cpuPool.maxNodes to 1 or "
        "request more quota"
    )
    assert n4.startswith("quota N4_CPUS in us-east5: 64 of 64 vCPUs left hold the run (64) but not the pools")
    assert n4.endswith("lower tpu-rl:cpuPool.maxNodes to 1 or request more quota")
    assert ssd.endswith("lower tpu-rl:systemPool.maxNodes to 2 or request more quota"), "500 GB: 2 x 200"
    at_max = quotas({metric: (amount, 0) for metric, amount in MAX.items()})
    assert quota_findings(needs(PROD), at_max, "us-east5", Held()) == [], "the maximum exactly: nothing to say"


@pytest.mark.pure
def test_each_shortfall_of_the_run_is_one_line_all_at_once():
    short = quotas({metric: (amount - 1, 0) for metric, amount in RUN.items()})
    found = quota_findings(needs(PROD), short, "us-east5", Held())
    problems = [f.text for f in found if f.level == "problem"]
    assert problems == [
        "quota CPUS in us-east5: 15 of 15 vCPUs left, the run needs 16 (2 system node(s) at minNodes); request more "
        "quota or lower tpu-rl:systemPool.minNodes / tpu-rl:systemPool.machineType",
        "quota HDB_TOTAL_GB in us-east5: 1299 of 1299 GB left, the run needs 1300 (1 cpu-np node(s) for the CPU steps, "
        "8 TPU VM(s)); request more quota or lower tpu-rl:cpuPool.diskSizeGb",
        "quota N4_CPUS in us-east5: 63 of 63 vCPUs left, the run needs 64 (1 cpu-np node(s) for the CPU steps); "
        "request more quota or lower tpu-rl:cpuPool.machineType",
        "quota SSD_TOTAL_GB in us-east5: 399 of 399 GB left, the run needs 400 (2 system node(s) at minNodes); "
        "request more quota or lower tpu-rl:systemPool.diskSizeGb",
    ]
    assert levels(found) == ["problem"] * 4, "one line per metric: CPUS short needs no second (maybe) line"


@pytest.mark.pure
def test_what_the_stack_holds_counts_as_left_and_a_metric_not_listed_is_a_warning():
    need = needs(PROD)
    url = "https://www.googleapis.com/compute/v1/projects/p/zones/z/machineTypes/"
    ours = capacity.held(
        [(url + "ct6e-standard-4t", 100), (url + "n4-standard-64", 500), (url + "e2-standard-8", 200)],
        "ct6e-standard-4t",
        tpu_vcpus=180,
    )
    assert ours == Held(
        1,
        {"HDB_TOTAL_GB": 600, "N4_CPUS": 64, "CPUS": 8, "SSD_TOTAL_GB": 200, "CPUS_ALL_REGIONS": 72},
        {"CPUS": 64, "CPUS_ALL_REGIONS": 180},
    ), "every CPU VM's vCPUs on CPUS_ALL_REGIONS; the TPU VM's perhaps"
    busy = quotas({**{m: (a, a) for m, a in MAX.items()}})
    held_all = Held(8, {m: float(a) for m, a in MAX.items()}, {"CPUS": 64.0})
    assert quota_findings(need, busy, "us-east5", held_all) == [], "a later `up`: its own nodes hold what it needs"
    unlisted = quota_findings(need, quotas({k: v for k, v in ORDINARY.items() if k != "HDB_TOTAL_GB"}), "r", Held())
    assert Finding("unknown", "region r lists no HDB_TOTAL_GB quota; it was not checked") in unlisted
    assert not [f for f in unlisted if f.level == "problem"]


@pytest.mark.pure
def test_cpus_short_only_if_n4_counts_against_it_is_a_warning_not_a_stop():
    (warning,) = quota_findings(
        needs(PROD), quotas({**{m: (a, 0) for m, a in MAX.items()}, "CPUS": (79, 0)}), "us-east5", Held()
    )
    assert warning.level == "unknown" and "hold the run (16) but not the pools" in warning.text
    small = needs(settings("prod", ["tpu-rl:systemPool.maxNodes=2"]))  # E2 needs 16 vCPUs of CPUS, at most
    (maybe,) = quota_findings(small, quotas({**{m: (a, 0) for m, a in MAX.items()}, "CPUS": (50, 0)}), "r", Held())
    assert maybe.level == "unknown" and maybe.text.startswith(
        "quota CPUS in r: 50 of 50 vCPUs left; the run needs 80 if N4 vCPUs count against CPUS"
    )


# ---------------------------------------------------------------------------------------------
# The project's quotas across all regions

SIZED = {"e2-standard-8": 8, "n4-standard-64": 64, "ct6e-standard-4t": 180}
"""Guest CPUs as the zone answers them (``machineTypes.get``): the slice's machine has no predefined shape."""
OBJECTS = {"NETWORKS": 1, "SUBNETWORKS": 1, "ROUTERS": 1, "FIREWALLS": 4}
"""What the stack's network draws: its VPC, subnet, router and firewall rule, and GKE's 3 rules of a private
cluster."""


def project_quotas(**changed):
    return quotas({**GLOBAL_ENOUGH, **changed})


@pytest.mark.pure
def test_every_cpu_vm_draws_on_cpus_all_regions_and_the_network_on_the_projects_quotas():
    need = needs(PROD, SIZED)
    assert need.draw("run", ALL_REGIONS) == {"CPUS_ALL_REGIONS": 80, **OBJECTS}, "2 x e2-standard-8 + n4-standard-64"
    assert need.draw("max", ALL_REGIONS) == {"CPUS_ALL_REGIONS": 336, **OBJECTS}, "10 x 8 + 4 x 64"
    assert need.maybe(ALL_REGIONS) == {"CPUS_ALL_REGIONS": 8 * 180}, "the slices' vCPUs perhaps"
    assert need.draw("run") == RUN, "a region's draw is as it was: no global metric in it"
    assert needs(PROD).maybe(ALL_REGIONS) == {}, "a slice the zone did not size is not counted"


@pytest.mark.pure
def test_a_global_cpu_quota_short_of_the_run_stops_up_in_one_line():
    """The issue: a fresh project's CPUS_ALL_REGIONS (32) holds the regional quotas' run but not cpu-np's n4-standard-64
    node, which GKE would never create, leaving the conversion pending while a reserved slice bills."""
    (line,) = global_quota_findings(
        needs(PROD, SIZED), project_quotas(CPUS_ALL_REGIONS=(32, 0)), "p", Held(), network=False
    )
    assert line == Finding(
        "problem",
        "quota CPUS_ALL_REGIONS of project p: 32 of 32 vCPUs left, the run needs 80 (2 system node(s) at minNodes, "
        "1 cpu-np node(s) for the CPU steps); request more quota or lower tpu-rl:systemPool.minNodes / "
        "tpu-rl:systemPool.machineType / tpu-rl:cpuPool.machineType",
    ), "one line, no second (maybe) line for the slices"
    (used,) = global_quota_findings(
        needs(PROD, SIZED), project_quotas(CPUS_ALL_REGIONS=(100, 30)), "p", Held(), network=False
    )
    assert used.level == "problem" and used.text.startswith("quota CPUS_ALL_REGIONS of project p: 70 of 100 vCPUs left")


@pytest.mark.pure
def test_the_pools_maximum_and_the_slices_vcpus_beyond_the_global_quota_warn():
    need = needs(PROD, SIZED)
    (peak,) = global_quota_findings(need, project_quotas(CPUS_ALL_REGIONS=(200, 0)), "p", Held(), network=False)
    assert peak == Finding(
        "unknown",
        "quota CPUS_ALL_REGIONS of project p: 200 of 200 vCPUs left hold the run (80) but not the pools at their "
        "autoscaling maximum (336), so GKE cannot scale them that far; lower tpu-rl:systemPool.maxNodes or "
        "tpu-rl:cpuPool.maxNodes or request more quota",
    )
    (maybe,) = global_quota_findings(need, project_quotas(CPUS_ALL_REGIONS=(400, 0)), "p", Held(), network=False)
    assert maybe == Finding(
        "unknown",
        "quota CPUS_ALL_REGIONS of project p: 400 of 400 vCPUs left; the run needs 1520 if the 8 TPU VM(s)' vCPUs "
        "(ct6e-standard-4t) count against CPUS_ALL_REGIONS, which nothing this check could read settles "
        "(infra.gcp.capacity.needs.ALL_REGIONS_CPUS); if GKE cannot add nodes, request more quota",
    )
    assert global_quota_findings(need, project_quotas(CPUS_ALL_REGIONS=(1520, 0)), "p", Held(), network=False) == []


@pytest.mark.pure
def test_the_networks_objects_are_counted_until_the_stack_holds_them():
    need = needs(PROD, SIZED)
    full = project_quotas(NETWORKS=(5, 5), FIREWALLS=(100, 97))
    assert [f.text for f in global_quota_findings(need, full, "p", Held(), network=False)] == [
        "quota FIREWALLS of project p: 3 of 100 firewall rules left, the run needs 4 (its firewall rule and the 3 GKE "
        "creates for a private cluster); request more quota",
        "quota NETWORKS of project p: 0 of 5 networks left, the run needs 1 (the stack's VPC network); request more "
        "quota",
    ]
    assert global_quota_findings(need, full, "p", Held(), network=True) == [], "a later `up`: its network exists"
    assert global_quota_findings(need, full, "p", Held(), network=None) == [], "not known: the caller warns"
    assert [f.level for f in global_quota_findings(need, full, "p", Held(), network=False)] == ["problem"] * 2


@pytest.mark.pure
def test_what_the_stack_holds_counts_as_left_on_the_projects_quotas_too():
    """A later `up`: the stack's own VMs are in the usage (the global quota at its limit with them)."""
    url = "https://www.googleapis.com/compute/v1/projects/p/zones/z/machineTypes/"
    vms = [(url + "ct6e-standard-4t", 100)] * 8 + [(url + "e2-standard-8", 200)] * 2 + [(url + "n4-standard-64", 500)]
    ours = capacity.held(vms, "ct6e-standard-4t", tpu_vcpus=180)
    at_limit = project_quotas(CPUS_ALL_REGIONS=(1520, 1520))
    (peak,) = global_quota_findings(needs(PROD, SIZED), at_limit, "p", ours, network=True)
    assert peak.level == "unknown" and "80 of 1520 vCPUs left hold the run (80) but not the pools" in peak.text
    (short,) = global_quota_findings(needs(PROD, SIZED), at_limit, "p", Held(), network=True)
    assert short.level == "problem", "the same usage without the stack's VMs is short"
    room = project_quotas(CPUS_ALL_REGIONS=(1776, 1520))  # the maximum's 336, the slices' 1440 among the usage
    assert global_quota_findings(needs(PROD, SIZED), room, "p", ours, network=True) == []


@pytest.mark.pure
def test_docs_quote_the_global_refusal_as_the_check_writes_it():
    from tools.stack_files import ROOT

    (line,) = global_quota_findings(
        needs(PROD, SIZED), project_quotas(CPUS_ALL_REGIONS=(32, 0)), "my-project", Held(), network=False
    )
    assert f"error: capacity check: {line.text}\n" in (ROOT / "docs" / "first-run.md").read_text()


@pytest.mark.pure
def test_a_project_that_lists_no_quota_is_a_warning():
    need = needs(PROD, SIZED)
    unlisted = {k: v for k, v in project_quotas().items() if k != "CPUS_ALL_REGIONS"}
    assert global_quota_findings(need, unlisted, "p", Held(), network=False) == [
        Finding("unknown", "project p lists no CPUS_ALL_REGIONS quota; it was not checked")
    ], "one line for the metric, not a second for the slices' maybe"
    assert global_quota_findings(need, None, "p", Held(), network=False) == [
        Finding("unknown", "the quotas of project p were not listed; they were not checked")
    ]


FAMILIES = PD_FAMILIES + HYPERDISK_FAMILIES


@pytest.mark.pure
def test_every_family_has_a_cpu_rule_and_its_boot_disk_a_disk_metric():
    assert set(CPU_QUOTAS) == set(FAMILIES)
    assert {boot_disk_type(f"{family}-standard-8") for family in FAMILIES} <= set(DISK_QUOTAS)


@pytest.mark.pure
@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_draws_on_its_metrics(family):
    """cpu-np of <family>-standard-16 beside the system pool's e2-standard-8 (2 at the minimum): E2 and N1 against
    CPUS; every other series against its own <SERIES>_CPUS (and CPUS perhaps)."""
    pools = dataclasses.replace(
        PROD.cpu_pool, machine_type=f"{family}-standard-16", disk_type=boot_disk_type(family) or ""
    )
    need = needs(dataclasses.replace(PROD, cpu_pool=pools))
    run = need.draw("run")
    own = f"{family.upper()}_CPUS"
    if family in ("e2", "n1"):
        assert run["CPUS"] == 16 + 16 and own not in run and need.maybe() == {}
    else:
        assert run["CPUS"] == 16 and run[own] == 16 and need.maybe() == {"CPUS": 16}


@pytest.mark.pure
def test_a_machine_of_unknown_shape_is_counted_by_what_the_zone_answers():
    shared = settings("prod", ["tpu-rl:systemPool.machineType=e2-medium"])
    assert needs(shared).uncounted == (("tpu-rl:systemPool.machineType", "e2-medium"),)
    answered = needs(shared, {"e2-medium": 2})
    assert answered.uncounted == () and answered.draw("run")["CPUS"] == 4, "2 nodes x 2 guest CPUs (machineTypes.get)"


@pytest.mark.pure
def test_the_zone_offers_every_type_or_one_line_names_them_all():
    wanted = offers(PROD)
    assert [(o.kind, o.name) for o in wanted] == [
        ("machine type", "e2-standard-8"),
        ("machine type", "n4-standard-64"),
        ("machine type", "ct6e-standard-4t"),
        ("accelerator type", "ct6e"),
        ("disk type", "pd-balanced"),
        ("disk type", "hyperdisk-balanced"),
    ]
    assert wanted[-1].keys == ("tpu-rl:cpuPool.machineType", "tpu-rl:tpu.version")
    assert offer_findings("z", []) == []
    (line,) = offer_findings("z", [Offer("machine type", "n4-standard-64", ("tpu-rl:cpuPool.machineType",))])
    assert line.level == "problem" and line.text.startswith(
        "gcp:zone z does not offer machine type n4-standard-64 (tpu-rl:cpuPool.machineType); set gcp:zone"
    )


@pytest.mark.pure
def test_missing_permissions_are_one_line_with_their_roles():
    wanted = permissions.needed(PROD)
    assert wanted["cloudkms.keyRings.create"] == "roles/cloudkms.admin", "prod creates its Secrets key"
    assert "cloudkms.keyRings.create" not in permissions.needed(DEV), "dev has no key"
    assert permissions.missing_text("p", wanted, wanted) is None
    held = set(wanted) - {"compute.firewalls.create", "iam.serviceAccounts.actAs", "compute.firewalls.delete"}
    assert permissions.missing_text("p", wanted, held) == (
        "the account running `up` lacks 3 permission(s) in project p that the stack's resources need "
        "(roles/compute.securityAdmin: compute.firewalls.create, compute.firewalls.delete; "
        "roles/iam.serviceAccountUser: iam.serviceAccounts.actAs); grant it those roles (docs/permissions.md), e.g. "
        "gcloud projects add-iam-policy-binding p --member=user:YOU --role=roles/compute.securityAdmin"
    )
    assert len(wanted) <= 100, "testIamPermissions is asked once"


# ---------------------------------------------------------------------------------------------
# Through the clients


@pytest.fixture
def compute(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with fake_compute() as fake:
        fake.routes[f"/compute/v1/projects/{PROJECT}/regions/us-east5"] = (200, region("us-east5", ORDINARY))
        fake.routes[f"/compute/v1/projects/{PROJECT}/zones/us-east5-b/instances"] = (
            200,
            {"kind": "compute#instanceList", "items": []},
        )
        serve_reservation(fake, PROJECT)
        yield fake


def test_ordinary_quotas_that_hold_the_run_pass_through_the_clients(compute):
    findings = REAL_CHECK(PROD, clients(compute))
    assert levels(findings) == ["unknown"] * 3 and all("autoscaling maximum" in f.text for f in findings)
    (asked,) = compute.bodies
    assert set(asked["permissions"]) == set(permissions.needed(PROD)), "one testIamPermissions of every permission"


def test_every_shortfall_is_a_line_of_its_own_in_one_run(compute):
    compute.routes[f"/compute/v1/projects/{PROJECT}/regions/us-east5"] = (
        200,
        region("us-east5", {metric: (amount - 1, 0) for metric, amount in RUN.items()}),
    )
    del compute.offers["machineTypes"]["n4-standard-64"], compute.offers["acceleratorTypes"]["ct6e"]
    compute.permissions = set(permissions.needed(PROD)) - {"storage.buckets.create"}
    found = [f.text for f in REAL_CHECK(PROD, clients(compute)) if f.level == "problem"]
    assert [text.split(" ", 2)[:2] for text in found] == [
        ["the", "account"],
        ["gcp:zone", "us-east5-b"],
        ["quota", "CPUS"],
        ["quota", "HDB_TOTAL_GB"],
        ["quota", "N4_CPUS"],
        ["quota", "SSD_TOTAL_GB"],
    ]
    assert "(roles/storage.admin: storage.buckets.create)" in found[0]
    assert "does not offer machine type n4-standard-64 (tpu-rl:cpuPool.machineType); set gcp:zone" in found[1], (
        "the slice's accelerator type is no stop while its machine type is offered"
    )


@pytest.mark.pure
def test_an_accelerator_type_the_zone_does_not_list_warns_where_the_machine_type_is_offered():
    machine = Offer("machine type", "ct6e-standard-4t", ("tpu-rl:tpu.machineType",))
    chips = [Offer("accelerator type", "ct6e", ("tpu-rl:tpu.version",))]
    assert accelerator_findings("z", machine, [], True) == []
    (offered,) = accelerator_findings("z", machine, chips, True)
    assert offered == Finding(
        "unknown",
        "gcp:zone z lists no accelerator type ct6e (tpu-rl:tpu.version): acceleratorTypes.get answered not found; it "
        "offers machine type ct6e-standard-4t (tpu-rl:tpu.machineType), what the TPU pool asks for, so this is not a "
        "stop; if GKE refuses the TPU pool, set gcp:zone to a zone that offers both (gcloud compute accelerator-types "
        "list --filter=zone:z)",
    )
    (unread,) = accelerator_findings("z", machine, chips, False)
    assert unread.level == "unknown" and "machine type ct6e-standard-4t (tpu-rl:tpu.machineType) could not be read" in (
        unread.text
    )


@pytest.mark.parametrize(
    ("gone", "levels_"),
    [
        ({"acceleratorTypes": ["ct6e"]}, ["unknown"]),
        ({"acceleratorTypes": ["ct6e"], "machineTypes": ["ct6e-standard-4t"]}, ["problem"]),
    ],
    ids=["machine-offered", "neither-offered"],
)
def test_the_accelerator_types_not_found_through_the_clients(compute, gone, levels_):
    """acceleratorTypes.get answers 404 for ct6e: a warning while the zone offers ct6e-standard-4t, the one stop
    naming both when it offers neither."""
    for kind, names in gone.items():
        for name in names:
            del compute.offers[kind][name]
    found = [f for f in REAL_CHECK(PROD, clients(compute)) if "ct6e" in f.text and "gcp:zone" in f.text]
    assert levels(found) == levels_, found
    if levels_ == ["problem"]:
        assert "machine type ct6e-standard-4t (tpu-rl:tpu.machineType), accelerator type ct6e (tpu-rl:tpu.version)" in (
            found[0].text
        )


def test_a_later_up_counts_its_own_nodes_disks(compute):
    """The stack's 8 TPU VMs and its cpu-np node run already, their boot disks in the usage: not needed twice."""
    vms = [instance(f"gke-tpu-{i}", "ct6e-standard-4t", project=PROJECT, zone="us-east5-b") for i in range(8)]
    vms.append(instance("gke-cpu-np-0", "n4-standard-64", project=PROJECT, zone="us-east5-b", boot_gb=500))
    compute.routes[f"/compute/v1/projects/{PROJECT}/zones/us-east5-b/instances"] = (
        200,
        {"kind": "compute#instanceList", "items": vms},
    )
    compute.routes[f"/compute/v1/projects/{PROJECT}/regions/us-east5"] = (
        200,
        region("us-east5", {**ORDINARY, "HDB_TOTAL_GB": (1300, 1300), "N4_CPUS": (64, 64)}),
    )
    compute.routes[f"/compute/v1/projects/{PROJECT}/zones/us-east5-b/reservations/my-v6e-32-reservation"] = (
        200,
        reservation("my-v6e-32-reservation", project=PROJECT, zone="us-east5-b", count=8, in_use=8),
    )
    assert "problem" not in levels(REAL_CHECK(PROD, clients(compute)))


def test_a_low_global_cpu_quota_stops_up_through_the_clients(compute):
    """``projects.get`` answered as Compute writes a project (its ``quotas[]`` beside its metadata), read through the
    real client: the run's 80 vCPUs beyond a fresh project's CPUS_ALL_REGIONS stop `up`."""
    compute.project_quotas["CPUS_ALL_REGIONS"] = (32, 0)
    (line,) = [f for f in REAL_CHECK(PROD, clients(compute)) if f.level == "problem"]
    assert line.text.startswith("quota CPUS_ALL_REGIONS of project my-tpu-prod-project: 32 of 32 vCPUs left")
    assert f"/compute/v1/projects/{PROJECT}" in compute.requests


def test_the_stacks_network_is_held_on_a_later_up(compute):
    network = f"/compute/v1/projects/{PROJECT}/global/networks/tpu-rl-prod-net"
    compute.project_quotas["NETWORKS"] = (5, 5)
    (line,) = [f.text for f in REAL_CHECK(PROD, clients(compute)) if f.level == "problem"]
    assert line.startswith("quota NETWORKS of project my-tpu-prod-project: 0 of 5 networks left") and (
        network in compute.requests
    ), "a fresh project: networks.get answers 404"
    compute.networks.add((PROJECT, "tpu-rl-prod-net"))
    assert "problem" not in levels(REAL_CHECK(PROD, clients(compute))), "its network exists: its objects are held"
    compute.routes[network] = (403, error(403, "Required 'compute.networks.get' permission", "forbidden"))
    found = REAL_CHECK(PROD, clients(compute))
    assert "problem" not in levels(found)
    denied = "reading network tpu-rl-prod-net: permission denied (HTTP 403); the quotas of the network's objects"
    assert Finding("unknown", f"{denied} were not checked") in found


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (
            (403, error(403, "Cloud Resource Manager API has not been used", "accessNotConfigured", service="crm")),
            "crm is disabled",
        ),
        ((400, {"error": {"code": 400, "message": "Permission x is not valid", "status": "INVALID_ARGUMENT"}}), "400"),
    ],
    ids=["api-disabled", "refused"],
)
def test_a_permission_test_that_cannot_be_made_is_a_warning(compute, answer, why):
    compute.routes[f"/v3/projects/{PROJECT}:testIamPermissions"] = answer
    (first, *_) = REAL_CHECK(PROD, clients(compute))
    assert first.level == "unknown" and why in first.text
    assert first.text.endswith("the permissions (docs/permissions.md) were not checked")


@pytest.mark.pure
def test_docs_permissions_lists_every_role_and_permission_the_check_tests():
    from tools.stack_files import ROOT

    page = (ROOT / "docs" / "permissions.md").read_text()
    rows = {line.split(" | ")[0].strip("| `"): line for line in page.splitlines() if line.startswith("| `roles/")}
    assert list(rows) == [g.role for g in permissions.GRANTS]
    for grant in permissions.GRANTS:
        assert grant.why in rows[grant.role] and all(f"`{p}`" in rows[grant.role] for p in grant.permissions)
