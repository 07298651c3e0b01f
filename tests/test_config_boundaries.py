"""Every validation rule at both sides of its boundary: the last accepted value reaches Settings, the
first refused value gets its one-line message (ranges, cross-field rules, meshes, names, pools)."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import pytest

from core.config import ConfigError
from core.config import finish as config_finish
from core.config import rules as config_rules
from core.config.workflow_keys import IMAGE_REGISTRIES
from core.machines import MachineShape
from core.models import MODELS
from core.printed_commands import pulumi_config_set
from core.settings import PoolSettings
from tests.config_boundaries import BOUNDARIES, T, boundary_message, read_messages
from tests.lifecycle_walk import settings

pytestmark = pytest.mark.pure


@pytest.mark.parametrize(
    ("rule", "accepted", "check", "value", "refused"),
    BOUNDARIES,
    ids=[b[0] for b in BOUNDARIES],
)
def test_each_rule_at_both_sides_of_its_boundary(rule, accepted, check, value, refused):
    """The last accepted value reaches Settings; the first refused one gets its whole line (the reviewed file's):
    the key to change, the value shown and what is allowed."""
    assert check(settings("prod", accepted)) == value
    message = boundary_message(refused)
    assert " is invalid: " in message and "\n" not in message, message
    if not os.environ.get("TPU_RL_UPDATE_MESSAGES"):
        assert message == read_messages()[f"boundary:{rule}"]


def test_the_prod_stack_reads_as_written():
    """Every value of Pulumi.prod.yaml (the tutorial's run) and every default it relies on, as Settings holds
    them (the training knobs are pinned through the rendered argv in test_commands)."""
    values = dataclasses.asdict(settings("prod", []))
    assert values.pop("training") == {
        "knobs": values_of_knobs(),
        "optimizer": "adafactor",
        "dataset": "openmathinstruct2",
        "extra_args": {},
        "dataset_revision": "main",
    }
    assert values == {
        "stack": "prod",
        "project": "my-tpu-prod-project",
        "region": "us-east5",
        "zone": "us-east5-b",
        "cluster_name": "tpu-rl-prod",
        "bucket_name": "my-tpu-prod-project-tpu-rl-prod",
        "authorized_networks": ("203.0.113.0/24",),
        "tpu": {
            "version": "v6e",
            "machine_type": "ct6e-standard-4t",
            "topology": "4x8",
            "slices": 1,
            "capacity": "reservation",
            "reservation": "projects/my-tpu-prod-project/reservations/my-v6e-32-reservation",
        },
        "slice": {
            "version": "v6e",
            "machine_type": "ct6e-standard-4t",
            "topology": "4x8",
            "chips_per_vm": 4,
            "gke_accelerator": "tpu-v6e-slice",
            "pathways_type": "tpuv6e",
            "boot_disk_type": "hyperdisk-balanced",
        },
        "system_pool": {
            "machine_type": "e2-standard-8",
            "min_nodes": 2,
            "max_nodes": 10,
            "disk_size_gb": 200,
            "disk_type": "pd-balanced",
            "boot_disk_image": "",
        },
        "cpu_pool": {
            "machine_type": "n4-standard-64",
            "min_nodes": 0,
            "max_nodes": 4,
            "disk_size_gb": 500,
            "disk_type": "hyperdisk-balanced",
            "boot_disk_image": "",
        },
        "gke": {
            "release_channel": "REGULAR",
            "version_prefix": "1.35.",
            "maintenance_exclusion": "NO_MINOR_OR_NODE_UPGRADES",
            "maintenance_window": "09:00",
            "hold_upgrades": None,
            "secrets_key": "create",
        },
        "protect": True,
        "force_destroy": False,
        "bucket_versioning": True,
        "namespace": "tpu-rl",
        "hf_token_set": True,
        "model": {
            "spec": {
                "name": "gemma4-26b",
                "hf_repo": "google/gemma-4-26b-a4b-it",
                "maxtext_name": "gemma4-26b",
                "weights_gib": 52,
                "convert_hours": 1.0,
                "export_hours": 0.75,
                "train_seconds_per_sample": 6.0,
                "evaluate_hours": 1.5,
                "publish_hours": 0.5,
            },
            "revision": "main",
            "hub_cache": "",
            "hub_cache_writer": "",
        },
        "images": {
            "maxtext": "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training:0.2.5",
            "pathways_server": "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server@sha256:"
            "d03068b39a8a2fab0621086ccb7c9445ce17ad34f1520159ca4ecd395346a162",
            "pathways_proxy": "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server@sha256:"
            "6342a3cae2818d2f887d396e9ae4156b3316f79fef186d71ff16d535b44e1724",
            "registries": ("us-docker.pkg.dev/cloud-tpu-images", "us-docker.pkg.dev/cloud-tpu-v2-images"),
            "upstream": None,
            "maxtext_check": "refuse",
        },
        "workflow": {
            "enabled": True,
            "preflight": True,
            "capacity_check": True,
            "max_restarts": 1,
            "timeouts": {
                "convert": 4 * 3600,
                "train": 24 * 3600,
                "export": 4 * 3600,
                "evaluate": 3 * 3600,
                "publish": 4 * 3600,
            },
            "jobset_version": "0.10.1",
            "unschedulable_timeout": 15 * 60,
            "step_memory_gib": 168,
            "verify_export": True,
            "stall_timeout": 2 * 3600,
            "restart_drill": False,
            "steps": ("convert", "train", "export"),
        },
        "kueue": {
            "install": True,
            "queue": "tpu-rl",
            "version": "0.17.8",
            "pods_ready_timeout": 30 * 60,
            "admission_timeout": 15 * 60,
            # podsReadyTimeout + a TPU host maintenance event ("up to a few hours", read as 4 h)
            "recovery_timeout": 30 * 60 + 4 * 3600,
        },
        "labels": {"app": "tpu-rl", "stack": "prod", "cluster": "tpu-rl-prod", "managed-by": "pulumi"},
        "publish": {"repo": None, "private": True},
        "shared_project": False,
        "access": {"members": (), "readers": (), "workload_identity_pool": ""},
        "existing": None,
    }


def values_of_knobs() -> dict[str, Any]:
    from core.knobs import TRAINING_KNOBS

    return {knob.key: knob.default for knob in TRAINING_KNOBS}


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["tpu-rl:workflow.preflight=false"], {"workflow.preflight": False}),
        (["tpu-rl:workflow.jobsetVersion=0.12.0"], {"workflow.jobset_version": "0.12.0"}),
        (["tpu-rl:gke.maintenanceExclusion=none"], {"gke.maintenance_exclusion": None}),
        (
            ["tpu-rl:gke.maintenanceExclusion=NO_MINOR_OR_NODE_UPGRADES"],
            {"gke.maintenance_exclusion": "NO_MINOR_OR_NODE_UPGRADES"},
        ),
        # GKE's longest NO_UPGRADES exclusion: 30 days are accepted (31 are refused, test_config_rejections).
        (["tpu-rl:gke.holdUpgrades=2026-12-01/2026-12-31"], {"gke.hold_upgrades": ("2026-12-01", "2026-12-31")}),
        (["tpu-rl:gke.holdUpgrades=2026-12-01/2026-12-02"], {"gke.hold_upgrades": ("2026-12-01", "2026-12-02")}),
        (["tpu-rl:gke.secretsEncryptionKey="], {"gke.secrets_key": None}),
        (
            ["tpu-rl:gke.secretsEncryptionKey=projects/other-project/locations/us-east5/keyRings/r/cryptoKeys/k"],
            {"gke.secrets_key": "projects/other-project/locations/us-east5/keyRings/r/cryptoKeys/k"},
        ),
        (["tpu-rl:bucketVersioning=false"], {"bucket_versioning": False}),
        (["tpu-rl:workflow.verifyExport=false"], {"workflow.verify_export": False}),
        (
            [
                "tpu-rl:images.registries=["
                + ", ".join([*(f'"r.io/r{i}"' for i in range(18)), '"us-docker.pkg.dev/cloud-tpu-images"'])
                + ', "us-docker.pkg.dev/cloud-tpu-v2-images"]'
            ],
            {"images.registries": (*(f"r.io/r{i}" for i in range(18)), *IMAGE_REGISTRIES)},
        ),
        (
            [
                'tpu-rl:images.registries=["us-docker.pkg.dev/cloud-tpu-images", '
                '"us-docker.pkg.dev/cloud-tpu-v2-images", "europe-docker.pkg.dev/my-project/mirror"]',
                "tpu-rl:images.maxtext=europe-docker.pkg.dev/my-project/mirror/maxtext:0.2.5",
            ],
            {"images.maxtext": "europe-docker.pkg.dev/my-project/mirror/maxtext:0.2.5"},
        ),
        (["tpu-rl:forceDestroy=true"], {"force_destroy": True}),
        (
            [
                'tpu-rl:access.members=["user:ops@acme.example", "principalSet://iam.googleapis.com/projects/1/'
                'locations/global/workloadIdentityPools/github/attribute.environment/deploy-prod"]',
                "tpu-rl:access.readers[0]=serviceAccount:preview-prod@acme-tpu.iam.gserviceaccount.com",
                "tpu-rl:access.workloadIdentityPool=projects/1/locations/global/workloadIdentityPools/github",
            ],
            {
                "access.members": (
                    "user:ops@acme.example",
                    "principalSet://iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/github/"
                    "attribute.environment/deploy-prod",
                ),
                "access.readers": ("serviceAccount:preview-prod@acme-tpu.iam.gserviceaccount.com",),
                "access.workload_identity_pool": "projects/1/locations/global/workloadIdentityPools/github",
            },
        ),
        (["tpu-rl:bucketName=my-bucket"], {"bucket_name": "my-bucket"}),
        (["tpu-rl:tpu.reservation=r2"], {"tpu.reservation": "projects/my-tpu-prod-project/reservations/r2"}),
        (["tpu-rl:cpuPool.machineType=n4-standard-64"], {"cpu_pool.disk_type": "hyperdisk-balanced"}),
        (["tpu-rl:workflow.enabled=false"], {"workflow.enabled": False, "hf_token_set": True}),
    ],
)
def test_each_setting_reaches_settings(overrides, expected):
    values = dataclasses.asdict(settings("prod", overrides))
    for path, value in expected.items():
        node: Any = values
        for part in path.split("."):
            node = node[part]
        assert node == value, path


def test_a_workflow_needs_the_token_but_provisioning_does_not():
    assert settings("prod", ["tpu-rl:workflow.enabled=false"], token=None).hf_token_set is False
    with pytest.raises(ConfigError) as caught:
        settings("prod", [], token=None)
    assert str(caught.value) == (
        "tpu-rl:hfToken = null is invalid: required while tpu-rl:workflow.enabled is true; set it with "
        f"`{pulumi_config_set('prod', 'tpu-rl:hfToken', secret=True)}` (a Hugging Face read token)"
    )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["gcp:project=googler-123"],
            "tpu-rl:bucketName = null is invalid: required: the default googler-123-tpu-rl-prod "
            "(gcp:project-tpu-rl:clusterName) is not a valid bucket name; set one with "
            f"`{pulumi_config_set('prod', 'tpu-rl:bucketName', '<name>')}`",
        ),
        (
            ["tpu-rl:tpu.capacity=flex-start", "tpu-rl:tpu.reservation=", "tpu-rl:gke.versionPrefix=1.32."],
            'tpu-rl:gke.versionPrefix = "1.32." is invalid: TPU flex-start needs GKE 1.33.0-gke.1712000 or later',
        ),
    ],
    ids=["derived-bucket", "flex-start-version"],
)
def test_whole_messages_of_derived_and_cross_field_rules(overrides, message):
    with pytest.raises(ConfigError) as caught:
        settings("prod", overrides)
    assert str(caught.value) == message


def test_the_mesh_rules_apply_only_when_the_workflow_runs():
    """A provision-only stack (workflow.enabled false) is not refused for a mesh it never uses."""
    s = settings("prod", ["tpu-rl:workflow.enabled=false", f"{T}iciFsdpParallelism=1"])
    assert s.workflow.enabled is False and s.training.knobs["ici_fsdp_parallelism"] == 1


@pytest.mark.parametrize(
    ("vcpus", "memory_gib", "step_memory", "fits"),
    [
        (34, 196 * 1.1, 168, True),  # 32 vCPU head + 2 reserved; 196 GiB x 1.1 headroom
        (33, 196 * 1.1, 168, False),
        (34, 196 * 1.1 - 0.01, 168, False),
        (64, 256.0, 168, True),
        (64, 232 * 1.1, 232, True),  # a raised tpu-rl:workflow.stepMemoryGib, x 1.1 headroom
        (64, 232 * 1.1 - 0.01, 232, False),
    ],
)
def test_the_cpu_pool_rule_at_its_exact_boundary(vcpus, memory_gib, step_memory, fits, monkeypatch):
    """No catalogue machine sits on the boundary, so the rule is checked with a made-up shape."""
    monkeypatch.setattr(config_finish, "machine_shape", lambda name: MachineShape(name, vcpus, memory_gib))
    pool = PoolSettings("n2-custom", 0, 4, 500, "pd-balanced")
    if fits:
        config_finish.check_cpu_pool(pool, MODELS["gemma4-26b"], step_memory)
    else:
        with pytest.raises(ConfigError, match="is too small"):
            config_finish.check_cpu_pool(pool, MODELS["gemma4-26b"], step_memory)


@pytest.mark.parametrize(("disk_gb", "refused"), [(244, None), (243, "use at least 244 GB")])
def test_the_cpu_disk_rule_at_its_exact_boundary(disk_gb, refused, monkeypatch):
    """No real disk size leaves pods exactly the scratch a step needs (gemma4-26b: 124 + 20 GiB), so the rule is
    checked with a made-up allocatable: a disk that leaves exactly what is needed is enough, and the size the message
    asks for is the first that is."""
    monkeypatch.setattr(config_finish, "boot_disk_allocatable_gib", lambda gb: float(gb - 100))
    pool = PoolSettings("n4-standard-64", 0, 4, disk_gb, "hyperdisk-balanced")
    if refused is None:
        config_finish.check_cpu_disk(pool, MODELS["gemma4-26b"])
    else:
        with pytest.raises(ConfigError) as caught:
            config_finish.check_cpu_disk(pool, MODELS["gemma4-26b"])
        assert str(caught.value).endswith(f"at {disk_gb} GB leaves pods 143 GiB; {refused}")


def test_a_machine_of_unknown_size_is_left_to_gke():
    config_finish.check_cpu_pool(
        PoolSettings("n2-custom-64-262144", 0, 4, 500, "pd-balanced"), MODELS["gemma4-26b"], 168
    )


@pytest.mark.parametrize(
    ("stack", "label"),
    [("prod", "prod"), ("Dev.Team_1", "dev-team_1"), ("x" * 70, "x" * 63)],
)
def test_the_stack_label_is_a_gcp_label_value(stack, label):
    assert config_rules.label_value(stack) == label


SHARED_LINE = (
    "stacks dev and prod both name project acme-tpu: in one project dev's deploy identity administers prod, and "
    "prod's administers dev (roles/container.admin reaches every cluster of the project and its Secrets; "
    "roles/resourcemanager.projectIamAdmin and roles/iam.serviceAccountAdmin let it grant itself any role, the other "
    'stack\'s state key and deploy account included: docs/security.md "Two stacks in one project"); give each stack '
    "a project of its own, or set tpu-rl:sharedProject: true in both stack files to accept that ({} not)"
)


@pytest.mark.parametrize(
    ("own", "other", "other_project", "refused"),
    [
        (True, "true", "acme-tpu", None),
        (True, True, "acme-tpu", None),
        (False, "false", "acme-other", None),
        (False, "", "my-tpu-prod-project", None),
        (True, "false", "acme-tpu", "Pulumi.prod.yaml does"),
        (False, "true", "acme-tpu", "Pulumi.dev.yaml does"),
        (False, "", "acme-tpu", "Pulumi.dev.yaml and Pulumi.prod.yaml do"),
    ],
    ids=["both", "both-yaml-bool", "apart", "placeholder", "only-dev", "only-prod", "neither"],
)
def test_a_project_another_stack_file_names_is_accepted_only_in_both(own, other, other_project, refused):
    """core.config.projects: the last accepted pair (both set tpu-rl:sharedProject) and the first refused (one
    does not), word for word."""
    from core.config.projects import problem

    mine = settings("dev", ["gcp:project=acme-tpu", f"tpu-rl:sharedProject={str(own).lower()}"])
    assert mine.shared_project is own
    others = {"prod": {"gcp:project": other_project, "tpu-rl:sharedProject": other}, "dev": {"gcp:project": "x"}}
    found = problem("dev", mine, others)
    assert found == (None if refused is None else SHARED_LINE.format(refused))
