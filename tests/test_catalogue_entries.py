"""One entry per model and per accelerator: a new catalogue entry alone makes the plan, the estimate, the capacity
check and the messages work (docs/architecture.md "Catalogues").

Each test adds a fictitious entry for itself only (``monkeypatch.setitem`` on ``core.models.MODELS`` or
``core.tpu.CATALOGUE``, the one dict every module reads) and changes nothing else: a model ``gemma4-31b``
whose MaxText name differs from tpu-rl's (so a fact read from the wrong name shows), and a TPU ``v7x`` with
its machine type, slices, prices, aggregate reservation family and Cloud Quotas ids. Then the offline plan
(``tools.plan.plan_stack``, the real program under the mock runtime), the estimate, the policy pack's reading of
the training command, the capacity check (the real clients against ``tests/fake_compute.py``) and the messages
name the new entry. The closed sets (capacity modes, TPU versions, step names) are Literals; their tuples are
checked here against the tables keyed by them.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from collections.abc import Iterator
from typing import Any, cast, get_args

import pytest
from google.auth.credentials import AnonymousCredentials

from core.config import ConfigError
from core.config.defaults import DEFAULT_PODS_READY, DEFAULT_RESTARTS, DEFAULT_UNSCHEDULABLE
from core.config.schema import FIELDS
from core.estimate import FLEX_START_FACTOR, SPOT_FACTOR, estimate_for, training_run, usd_per_chip_hour
from core.models import MODELS, Model, model_for_maxtext, step_memory_gib
from core.steps import STEPS, StepName, scratch_gib
from core.tpu import (
    CAPACITY_MODES,
    CATALOGUE,
    Capacity,
    MachineType,
    TpuPrices,
    TpuQuota,
    TpuVersion,
    TpuVersionName,
    resolve_slice,
)
from infra.gcp import capacity
from infra.gcp.capacity import Held, Reservation, needs, reservation_findings
from tests.conftest import SENTINEL_TOKEN
from tests.fake_compute import (
    FakeCompute,
    aggregate_reservation,
    fake_compute,
    quota_info,
    quota_path,
    serve_project,
)
from tests.lifecycle_walk import settings
from tools.plan import plan_stack
from tools.plan.offline import Plan
from tools.stack_files import ROOT
from workloads.observe import pod_state as pods
from workloads.specs.commands import train_argv

pytestmark = pytest.mark.usefixtures("google_clients")

policies = importlib.import_module("policy.tpu_rl_policies.scripts")

REAL_CHECK = capacity.check_capacity
"""The check itself (conftest replaces it with one that finds nothing, for every other test)."""
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
NODE_POOL = "gcp:container/nodePool:NodePool"
TPU_VERSIONS: tuple[TpuVersionName, ...] = get_args(TpuVersionName)
FIELD = {f.key: f for f in FIELDS}
"""The configuration's fields by key."""

NEW_MODEL = Model(
    name="gemma4-31b",
    hf_repo="google/gemma-4-31b-it",
    maxtext_name="gemma4-31b-dense",
    weights_gib=62,
    convert_hours=1.2,
    export_hours=0.9,
    train_seconds_per_sample=7.5,
)
"""A fictitious model: 62 GiB of bf16 weights, so 200 GiB of step memory (3 x 62 + 8, rounded up to 8) and 144 GiB
of conversion scratch (2 x 62 + 20)."""

V7X = cast(TpuVersionName, "v7x")
"""Not a member of ``TpuVersionName``: at runtime the catalogue alone decides (a real entry adds its name there)."""
NEW_TPU = TpuVersion(
    name=V7X,
    gke_accelerator="tpu7x",
    pathways_type="tpu7x",
    boot_disk_type="hyperdisk-balanced",
    default_machine_type="tpu7x-standard-4t",
    machine_types=(
        MachineType("tpu7x-standard-4t", 4, "2x2x1", ("2x2x2", "2x2x4", "2x4x4"), default_topology="2x2x2"),
    ),
    prices=TpuPrices(on_demand=5.00, reservation=3.50),
    reservation_family="VM_FAMILY_CLOUD_TPU_POD_SLICE_TPU7X",
    quota=TpuQuota(family="TPU7X", preemptible="PREEMPTIBLE-TPU-7X-per-project-region"),
    flex_start_zones=("us-central1-c",),
)
"""A fictitious v7-like TPU: 4 chips per VM, a 2x2x2 slice by default (8 chips, 2 hosts: the dev stack's size)."""
ON_V7X = ["tpu-rl:tpu.version=v7x", "tpu-rl:tpu.machineType=", "tpu-rl:tpu.topology="]
"""The dev stack on the new TPU with its default machine type and slice (dev names v6e's)."""
PROD_ON_V7X = ["tpu-rl:tpu.version=v7x", "tpu-rl:tpu.machineType=", "tpu-rl:tpu.topology=2x4x4"]
"""The prod stack (a reservation) on a 32-chip slice of the new TPU."""


@pytest.fixture
def new_model(monkeypatch: pytest.MonkeyPatch) -> Model:
    monkeypatch.setitem(MODELS, NEW_MODEL.name, NEW_MODEL)
    return NEW_MODEL


@pytest.fixture
def new_tpu(monkeypatch: pytest.MonkeyPatch) -> TpuVersion:
    monkeypatch.setitem(CATALOGUE, V7X, NEW_TPU)
    return NEW_TPU


def plan(stack: str, overrides: list[str]) -> Plan:
    """The offline plan, uncached (``tests.conftest.plan_of`` caches: a plan made with a test's entry must not
    outlive it)."""
    made, _ = plan_stack(
        ROOT / f"Pulumi.{stack}.yaml", overrides, stack=stack, secrets={"tpu-rl:hfToken": SENTINEL_TOKEN}
    )
    return made


def step_jobsets(made: Plan) -> dict[str, dict[str, Any]]:
    return {r["inputs"]["metadata"]["labels"]["app.kubernetes.io/component"]: r["inputs"] for r in made.find(JOBSET)}


def containers(manifest: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for job in manifest["spec"]["replicatedJobs"]:
        pod = job["template"]["spec"]["template"]["spec"]
        yield from pod.get("initContainers", [])
        yield from pod["containers"]


# ---------------------------------------------------------------------------------------------
# The catalogues and the closed sets


@pytest.mark.pure
def test_each_catalogue_key_is_its_entrys_name_and_the_literal_lists_every_tpu_version():
    assert all(key == model.name for key, model in MODELS.items())
    assert all(key == entry.name for key, entry in CATALOGUE.items())
    assert tuple(CATALOGUE) == TPU_VERSIONS, "TpuVersionName lists the catalogue's keys, in its order"
    assert all(model_for_maxtext(m.maxtext_name) is m for m in MODELS.values())
    assert model_for_maxtext("llama") is None


@pytest.mark.pure
@pytest.mark.parametrize("version", TPU_VERSIONS)
def test_every_accelerator_entry_is_whole(version: TpuVersionName):
    entry = CATALOGUE[version]
    assert entry.machine(entry.default_machine_type) is not None
    for machine in entry.machine_types:
        if machine.multi_host_capable:
            assert machine.default_topology in machine.multi_host_topologies, machine.name
        else:
            assert machine.default_topology == "", f"{machine.name} forms only {machine.single_host_topology}"
    assert 0 < entry.prices.reservation < entry.prices.on_demand
    # The aggregate reservation family is one the Compute API names (google-cloud-compute's VmFamily enum). Imported
    # here, as infra/gcp/capacity/ does: the library is some 40 MB of Python that only a capacity check needs.
    from google.cloud import compute_v1

    assert entry.reservation_family in compute_v1.AllocationAggregateReservation.VmFamily.__members__


@pytest.mark.pure
def test_the_accelerator_facts_as_recorded():
    """The values the entries hold (moved from core/estimate.py and infra/gcp/capacity/ unchanged)."""
    v6e, v5e, v5p = (CATALOGUE[v] for v in ("v6e", "v5e", "v5p"))
    assert [(e.prices.on_demand, e.prices.reservation) for e in (v6e, v5e, v5p)] == [
        (2.70, 1.89),
        (1.20, 0.84),
        (4.20, 2.94),
    ]
    assert v6e.reservation_family == "VM_FAMILY_CLOUD_TPU_LITE_POD_SLICE_CT6E"
    assert v6e.quota == TpuQuota(
        family="CT6E",
        preemptible="PREEMPTIBLE-TPU-V6E-per-project-region",
        on_demand="TPUS-PER-TPU-FAMILY-per-project-region",
    )
    assert v5e.quota is None and v5p.quota is None, "no Cloud Quotas ids recorded for them: not checked"
    assert v6e.flex_start_zones == ("asia-northeast1-b", "us-east5-a", "us-east5-b")
    assert [m.default_topology for e in (v6e, v5e, v5p) for m in e.machine_types if m.multi_host_capable] == [
        "4x8",
        "4x8",
        "2x2x4",
    ]


@pytest.mark.pure
def test_the_closed_sets_and_the_tables_keyed_by_them():
    assert CAPACITY_MODES == tuple(Capacity) == ("reservation", "spot", "flex-start", "on-demand")
    # A StrEnum: a mode formats, compares and serializes as the string the config, the outputs and the messages hold.
    assert [f"{mode}" for mode in CAPACITY_MODES] == ["reservation", "spot", "flex-start", "on-demand"]
    assert json.dumps({"capacity": Capacity.FLEX_START}) == '{"capacity": "flex-start"}'
    mode: str = Capacity.SPOT
    assert mode == "spot" and Capacity("spot") is Capacity.SPOT
    restarts = cast(dict[str, int], DEFAULT_RESTARTS)
    assert restarts["spot"] == DEFAULT_RESTARTS[Capacity.SPOT], "a string finds its mode"
    for table in (DEFAULT_RESTARTS, DEFAULT_PODS_READY, DEFAULT_UNSCHEDULABLE):
        assert set(table) == set(CAPACITY_MODES)
    assert all(usd_per_chip_hour(v, c) > 0 for v in TPU_VERSIONS for c in CAPACITY_MODES)
    assert get_args(StepName) == tuple(STEPS) and all(name == facts.name for name, facts in STEPS.items())
    # The config schema reads them with the messages it always had (tests/data/config-messages.tsv pins them).
    with pytest.raises(ConfigError, match=r"expected one of reservation, spot, flex-start, on-demand$"):
        FIELD["tpu-rl:tpu.capacity"].read("tpu-rl:tpu.capacity", "preemptible")
    with pytest.raises(ConfigError, match=r"expected one of v6e, v5e, v5p$"):
        FIELD["tpu-rl:tpu.version"].read("tpu-rl:tpu.version", "v7x")


@pytest.mark.pure
def test_the_schema_describes_the_defaults_the_entries_give():
    topology, memory = FIELD["tpu-rl:tpu.topology"], FIELD["tpu-rl:workflow.stepMemoryGib"]
    assert topology.doc == "slice topology; default 4x8 (v6e, v5e) or 2x2x4 (v5p)" and topology.shown_default == "4x8"
    assert FIELD["tpu-rl:tpu.machineType"].shown_default == "ct6e-standard-4t"
    assert memory.doc.endswith("rounded up to 8 (gemma4-26b 168, gemma4-e4b 56)")


# ---------------------------------------------------------------------------------------------
# A new model entry


@pytest.mark.pure
def test_a_new_model_is_configured_sized_and_estimated_from_its_entry(new_model: Model):
    s = settings("prod", ["tpu-rl:model.name=gemma4-31b"])
    assert s.model.spec is new_model
    assert s.workflow.step_memory_gib == step_memory_gib(new_model) == 200
    assert scratch_gib(new_model, "convert") == 144 and scratch_gib(new_model, "export") == 82
    steps = {step.step: step for step in estimate_for(s).steps}
    # train: 45 min start-up (the first step in it) + 49 steps x (7.5 s x 4 prompts x 4 generations) on 32 chips
    # = 0.75 + 1.6333 = 2.3833 h
    assert (steps["convert"].hours, steps["export"].hours) == (1.2, 0.9)
    assert steps["train"].hours == pytest.approx(45 / 60 + 49 * 7.5 * 16 / 3600)
    assert training_run(s).model == "gemma4-31b"
    with pytest.raises(ConfigError, match=r"conversion keeps 144 GiB of scratch"):
        settings("dev", ["tpu-rl:model.name=gemma4-31b"])  # dev's 200 GB cpu-np disk is too small for it


@pytest.mark.pure
def test_the_policy_pack_prices_a_training_command_of_the_new_model(new_model: Model):
    from core.step_config import CONFIG_FILE, read_config
    from workloads.specs.commands import train_config

    s = settings("prod", ["tpu-rl:model.name=gemma4-31b"])
    overrides = read_config(train_config(train_argv(s, "gs://b/in/", "gs://b/out/"))[CONFIG_FILE])
    assert isinstance(overrides, dict), overrides
    run = policies.training_run(overrides, {})
    assert run == training_run(s), "MaxText's model_name gemma4-31b-dense is the entry gemma4-31b"


def test_the_offline_plan_of_a_new_model(new_model: Model):
    made = plan("prod", ["tpu-rl:model.name=gemma4-31b"])
    jobsets = step_jobsets(made)
    assert sorted(jobsets) == ["convert", "export", "train"]
    assert all(m["metadata"]["name"].startswith("gemma4-31b-") for m in jobsets.values())
    (convert,) = [c for c in containers(jobsets["convert"]) if c["name"] == "convert"]
    (script,) = [
        r["inputs"]["data"]["run.sh"]
        for r in made.find("kubernetes:core/v1:ConfigMap")
        if r["name"] == jobsets["convert"]["metadata"]["name"] + "-scripts"
    ]
    assert "model_name=gemma4-31b-dense" in script and "snapshot google/gemma-4-31b-it " in script
    assert convert["resources"]["limits"]["memory"] == convert["resources"]["requests"]["memory"] == "200Gi"
    volumes = jobsets["convert"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["volumes"]
    assert {"name": "scratch", "emptyDir": {"sizeLimit": "144Gi"}} in volumes
    train_scripts = jobsets["train"]["metadata"]["name"] + "-scripts"
    assert "model_name=gemma4-31b-dense" in json.dumps(made.find("kubernetes:core/v1:ConfigMap", train_scripts))
    estimate = made.outputs["estimate"]
    assert (estimate["steps"]["convert"]["hours"], estimate["steps"]["export"]["hours"]) == (1.2, 0.9)
    assert estimate["steps"]["train"]["hours"] == round(45 / 60 + 49 * 7.5 * 16 / 3600, 2) == 2.38


# ---------------------------------------------------------------------------------------------
# A new accelerator entry


@pytest.mark.pure
def test_a_new_tpu_is_configured_priced_and_named_in_messages(new_tpu: TpuVersion):
    s = settings("dev", ON_V7X)
    assert (s.tpu.version, s.tpu.machine_type, s.tpu.topology) == ("v7x", "tpu7x-standard-4t", "2x2x2")
    assert s.slice == resolve_slice(V7X, "tpu7x-standard-4t", "2x2x2")
    assert (s.slice.gke_accelerator, s.slice.pathways_instance_type, s.slice.hosts) == ("tpu7x", "tpu7x:2x2x2", 2)
    estimate = estimate_for(s)
    assert estimate.usd_per_chip_hour == pytest.approx(5.00 * SPOT_FACTOR)
    assert usd_per_chip_hour(V7X, "reservation") == 3.50
    assert usd_per_chip_hour(V7X, "flex-start") == pytest.approx(5.00 * FLEX_START_FACTOR)
    # The messages name it: the unschedulable slice's fix, and the config rules'.
    fix = pods.pool_fix(
        "the TPU slice pool",
        capacity=Capacity.SPOT,
        cpu_machine="n4-standard-64",
        version=s.tpu.version,
        context=s.kube_context,
    )
    assert fix == (
        "GKE cannot get spot TPU v7x capacity in gcp:zone now: try again later, another zone, or another "
        "tpu-rl:tpu.capacity"
    )
    with pytest.raises(ConfigError, match=r"is invalid: TPU v7x machine types are tpu7x-standard-4t$"):
        settings("dev", ["tpu-rl:tpu.version=v7x", "tpu-rl:tpu.topology="])  # dev names ct6e-standard-4t
    with pytest.raises(ConfigError, match=r"TPU v7x flex-start is offered in us-central1-c only"):
        settings("dev", [*ON_V7X, "tpu-rl:tpu.capacity=flex-start"])
    with pytest.raises(ConfigError, match=r"expected one of v6e, v5e, v5p, v7x$"):
        settings("dev", ["tpu-rl:tpu.version=v8"])


def test_the_offline_plan_of_a_new_tpu(new_tpu: TpuVersion):
    made = plan("dev", ON_V7X)
    (pool,) = [
        r["inputs"] for r in made.find(NODE_POOL) if r["inputs"]["nodeConfig"]["machineType"].startswith("tpu7x")
    ]
    node = pool["nodeConfig"]
    assert node["labels"]["cloud.google.com/gke-tpu-accelerator"] == "tpu7x"
    assert node["labels"]["cloud.google.com/gke-tpu-topology"] == "2x2x2"
    assert node["diskType"] == "hyperdisk-balanced" and node["spot"] is True
    assert pool["placementPolicy"] == {"type": "COMPACT", "tpuTopology": "2x2x2"}
    assert pool["autoscaling"]["maxNodeCount"] == 2
    train = json.dumps(step_jobsets(made)["train"])
    assert "tpu7x:2x2x2" in train and '"cloud.google.com/gke-tpu-accelerator": "tpu7x"' in train
    assert "v6e" not in train and "ct6e" not in train
    assert made.outputs["estimate"]["usdPerChipHour"] == round(5.00 * SPOT_FACTOR, 4)
    assert made.outputs["estimate"]["capacity"] == "spot"


@pytest.mark.pure
def test_the_capacity_check_reads_the_new_tpus_reservation_family_and_quota(new_tpu: TpuVersion):
    need = needs(settings("prod", PROD_ON_V7X))
    assert need.tpu is new_tpu and (need.chips, need.vms) == (32, 8)
    aggregate = Reservation(status="READY", specific=True, aggregate=True, count=32)
    ours = dataclasses.replace(aggregate, vm_family=NEW_TPU.reservation_family)
    assert reservation_findings(need, ours, "us-east5-b", Held()) == []
    v6e = dataclasses.replace(aggregate, vm_family="VM_FAMILY_CLOUD_TPU_LITE_POD_SLICE_CT6E")
    (problem,) = reservation_findings(need, v6e, "us-east5-b", Held())
    assert problem.text.endswith(
        "is a TPU reservation of VM_FAMILY_CLOUD_TPU_LITE_POD_SLICE_CT6E family, the slice needs "
        "VM_FAMILY_CLOUD_TPU_POD_SLICE_TPU7X; fix tpu-rl:tpu.reservation or tpu-rl:tpu.version"
    )
    spot = needs(settings("dev", ON_V7X))
    on_demand = needs(settings("dev", [*ON_V7X, "tpu-rl:tpu.capacity=on-demand"]))
    assert capacity.tpu_quota_id(spot) == "PREEMPTIBLE-TPU-7X-per-project-region"
    assert capacity.tpu_quota_id(on_demand) == "TPUS-PER-TPU-FAMILY-per-project-region"
    family = capacity.QuotaLimit({"region": "us-east5", "tpu_family": "TPU7X"}, 8, ("us-east5",))
    other = capacity.QuotaLimit({"region": "us-east5", "tpu_family": "CT6E"}, 64, ("us-east5",))
    assert [f.level for f in capacity.tpu_quota_findings(on_demand, [other, family], "us-east5")] == ["note"]
    assert capacity.tpu_quota_findings(on_demand, [other], "us-east5")[0].level == "unknown", "another family only"


@pytest.mark.pure
def test_an_entry_without_quota_ids_is_not_quota_checked():
    """v5e lists no Cloud Quotas ids (core/tpu.py): no TPU quota is read for it, as before; its aggregate
    reservations are of its own family (the check compared every version's with v6e's before)."""
    spot = needs(settings("dev", ["tpu-rl:tpu.version=v5e", "tpu-rl:tpu.machineType=", "tpu-rl:tpu.topology=2x4"]))
    assert capacity.tpu_quota_id(spot) is None and capacity.tpu_quota_findings(spot, None, "us-east5") == []
    prod = needs(settings("prod", ["tpu-rl:tpu.version=v5e", "tpu-rl:tpu.machineType="]))
    v5e = Reservation(
        status="READY", specific=True, aggregate=True, vm_family="VM_FAMILY_CLOUD_TPU_LITE_POD_SLICE_CT5LP", count=32
    )
    assert reservation_findings(prod, v5e, "us-east5-b", Held()) == []


@pytest.fixture
def compute(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCompute]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with fake_compute() as fake:
        for project in ("my-tpu-prod-project", "my-tpu-dev-project"):
            serve_project(fake, project, {"CPUS": (1000, 0), "N4_CPUS": (600, 0)})
        yield fake


def clients(fake: FakeCompute) -> capacity.Clients:
    return capacity.Clients(credentials=AnonymousCredentials(), client_options={"api_endpoint": fake.url})


def test_the_capacity_check_of_a_new_tpu_through_the_clients(new_tpu: TpuVersion, compute: FakeCompute):
    quota = "PREEMPTIBLE-TPU-7X-per-project-region"
    path = quota_path("my-tpu-dev-project", quota)
    compute.routes[path] = (200, quota_info("my-tpu-dev-project", quota, [({"region": "us-east5"}, 4, ["us-east5"])]))
    (problem,) = [f.text for f in REAL_CHECK(settings("dev", ON_V7X), clients(compute)) if f.level == "problem"]
    assert problem.startswith(f"quota {quota} in us-east5: the limit is 4 TPU chips, the slices need 8")
    assert path in compute.requests
    reservation = "/compute/v1/projects/my-tpu-prod-project/zones/us-east5-b/reservations/my-v6e-32-reservation"
    compute.routes[reservation] = (
        200,
        aggregate_reservation(
            "my-v6e-32-reservation",
            project="my-tpu-prod-project",
            zone="us-east5-b",
            chips=32,
            family="VM_FAMILY_CLOUD_TPU_POD_SLICE_TPU7X",
        ),
    )
    assert REAL_CHECK(settings("prod", PROD_ON_V7X), clients(compute)) == []


@pytest.mark.pure
def test_the_capacity_modes_and_a_new_tpu_in_every_mode(new_tpu: TpuVersion):
    """Every capacity mode plans on the new TPU (each mode's defaults and its pool come from the mode's tables)."""
    for mode in CAPACITY_MODES:
        overrides = [*ON_V7X, f"tpu-rl:tpu.capacity={mode}"]
        if mode == "reservation":
            overrides.append("tpu-rl:tpu.reservation=my-v7x-reservation")
        if mode == "flex-start":
            overrides += ["gcp:region=us-central1", "gcp:zone=us-central1-c"]
        s = settings("dev", overrides)
        assert s.tpu.capacity == mode and s.workflow.max_restarts == DEFAULT_RESTARTS[mode]
        assert estimate_for(s).capacity == mode
