"""Every bad stack setting exits 2 with one line naming the key, before any resource exists."""

from __future__ import annotations

import pytest

from infra.config import ConfigError, load_settings
from infra.plan import main as plan_main

# (id, --set overrides, full key the message must name, words the message must contain)
BAD_INPUTS = [
    ("project-missing", ["gcp:project="], "gcp:project", "required"),
    ("project-format", ["gcp:project=My_Project"], "gcp:project", "project id"),
    ("region-format", ["gcp:region=useast"], "gcp:region", "region"),
    ("zone-not-in-region", ["gcp:zone=us-central1-a"], "gcp:zone", "us-east5"),
    ("cluster-digit-first", ["tpu-rl:clusterName=1tpu"], "tpu-rl:clusterName", "lowercase letter first"),
    ("cluster-too-long", ["tpu-rl:clusterName=a" + "b" * 20], "tpu-rl:clusterName", "at most 20"),
    ("cluster-trailing-hyphen", ["tpu-rl:clusterName=tpu-"], "tpu-rl:clusterName", "hyphen"),
    ("cluster-uppercase", ["tpu-rl:clusterName=TpuRl"], "tpu-rl:clusterName", "lowercase"),
    ("bucket-short", ["tpu-rl:bucketName=ab"], "tpu-rl:bucketName", "3-63"),
    ("bucket-google", ["tpu-rl:bucketName=my-google-bucket"], "tpu-rl:bucketName", "google"),
    ("bucket-uppercase", ["tpu-rl:bucketName=Bad_Bucket"], "tpu-rl:bucketName", "lowercase"),
    ("networks-empty", ["tpu-rl:authorizedNetworks=[]"], "tpu-rl:authorizedNetworks", "non-empty"),
    ("networks-host-bits", ['tpu-rl:authorizedNetworks=["10.0.0.1/8"]'], "tpu-rl:authorizedNetworks[0]", "host bits"),
    ("networks-garbage", ['tpu-rl:authorizedNetworks=["office"]'], "tpu-rl:authorizedNetworks[0]", "CIDR"),
    ("tpu-version", ["tpu-rl:tpu.version=v4"], "tpu-rl:tpu.version", "v6e"),
    (
        "tpu-machine-of-other-version",
        ["tpu-rl:tpu.machineType=ct5lp-hightpu-4t"],
        "tpu-rl:tpu.machineType",
        "ct6e-standard-4t",
    ),
    ("tpu-topology-unformable", ["tpu-rl:tpu.topology=4x5"], "tpu-rl:tpu.topology", "2x4, 4x4, 4x8"),
    ("tpu-topology-single-host", ["tpu-rl:tpu.topology=2x2"], "tpu-rl:tpu.topology", "single-host"),
    (
        "tpu-topology-on-single-host-machine",
        ["tpu-rl:tpu.machineType=ct6e-standard-8t", "tpu-rl:tpu.topology=4x8"],
        "tpu-rl:tpu.topology",
        "single-host",
    ),
    ("tpu-slices-zero", ["tpu-rl:tpu.slices=0"], "tpu-rl:tpu.slices", "at least 1"),
    ("tpu-slices-word", ["tpu-rl:tpu.slices=two"], "tpu-rl:tpu.slices", "integer"),
    ("tpu-capacity", ["tpu-rl:tpu.capacity=preemptible"], "tpu-rl:tpu.capacity", "flex-start"),
    ("tpu-reservation-missing", ["tpu-rl:tpu.capacity=reservation"], "tpu-rl:tpu.reservation", "required"),
    ("tpu-reservation-with-spot", ["tpu-rl:tpu.reservation=res-1"], "tpu-rl:tpu.reservation", "only allowed"),
    (
        "tpu-reservation-format",
        ["tpu-rl:tpu.capacity=reservation", "tpu-rl:tpu.reservation=Bad Name"],
        "tpu-rl:tpu.reservation",
        "reservation name",
    ),
    ("tpu-unknown-field", ["tpu-rl:tpu.topolgy=4x4"], "tpu-rl:tpu.topolgy", "unknown field"),
    ("unknown-key", ["tpu-rl:clustername=x"], "tpu-rl:clustername", "unknown key"),
    ("system-min-zero", ["tpu-rl:systemPool.minNodes=0"], "tpu-rl:systemPool.minNodes", "at least 1"),
    (
        "system-max-below-min",
        ["tpu-rl:systemPool.minNodes=3", "tpu-rl:systemPool.maxNodes=2"],
        "tpu-rl:systemPool.maxNodes",
        "minNodes",
    ),
    ("cpu-disk-small", ["tpu-rl:cpuPool.diskSizeGb=10"], "tpu-rl:cpuPool.diskSizeGb", "at least 50"),
    (
        "cpu-machine-too-small",
        ["tpu-rl:cpuPool.machineType=n2-standard-16"],
        "tpu-rl:cpuPool.machineType",
        "Pathways head",
    ),
    ("protect-not-bool", ["tpu-rl:protect=yes"], "tpu-rl:protect", "true or false"),
    ("namespace-format", ["tpu-rl:namespace=Bad_NS"], "tpu-rl:namespace", "DNS-1123"),
    ("namespace-system", ["tpu-rl:namespace=kube-system"], "tpu-rl:namespace", "system"),
    ("model-unknown", ["tpu-rl:model.name=llama3-8b"], "tpu-rl:model.name", "gemma4-26b"),
    (
        "image-latest",
        ["tpu-rl:images.pathwaysServer=us-docker.pkg.dev/x/pathways/server:latest"],
        "tpu-rl:images.pathwaysServer",
        ":latest",
    ),
    ("image-untagged", ["tpu-rl:images.maxtext=us-docker.pkg.dev/x/maxtext"], "tpu-rl:images.maxtext", "tag"),
    (
        "micro-batch-not-divisor",
        ["tpu-rl:training.batchSize=4", "tpu-rl:training.trainMicroBatchSize=3"],
        "tpu-rl:training.trainMicroBatchSize",
        "divide",
    ),
    ("generations-one", ["tpu-rl:training.numGenerations=1"], "tpu-rl:training.numGenerations", "at least 2"),
    (
        "prefill-not-below-target",
        ["tpu-rl:training.maxPrefillPredictLength=700"],
        "tpu-rl:training.maxPrefillPredictLength",
        "below maxTargetLength",
    ),
    (
        "fractions-over-one",
        ["tpu-rl:training.samplerDevicesFraction=0.75"],
        "tpu-rl:training.samplerDevicesFraction",
        "at most 1",
    ),
    (
        "rollout-does-not-divide",
        ["tpu-rl:training.rolloutTensorParallelism=3"],
        "tpu-rl:training.rolloutTensorParallelism",
        "sampler",
    ),
    (
        "ici-mesh-does-not-tile",
        ["tpu-rl:training.iciExpertParallelism=3"],
        "tpu-rl:training.iciExpertParallelism",
        "trainer",
    ),
    ("optimizer-unknown", ["tpu-rl:training.optimizer=sgd"], "tpu-rl:training.optimizer", "adafactor"),
    (
        "extra-arg-token",
        ["tpu-rl:training.extraArgs.hf_access_token=x"],
        "tpu-rl:training.extraArgs.hf_access_token",
        "set by the program",
    ),
    (
        "extra-arg-shell",
        ["tpu-rl:training.extraArgs.eval_interval=1;rm"],
        "tpu-rl:training.extraArgs.eval_interval",
        None,
    ),
    ("timeout-format", ["tpu-rl:workflow.timeouts.train=forever"], "tpu-rl:workflow.timeouts.train", "duration"),
    ("restarts-unbounded", ["tpu-rl:workflow.maxRestarts=100"], "tpu-rl:workflow.maxRestarts", "at most 5"),
]


@pytest.mark.parametrize(("overrides", "key", "words"), [c[1:] for c in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS])
def test_bad_value_exits_2_naming_the_key(overrides, key, words, tmp_path, capsys):
    out = tmp_path / "plan"
    argv = ["--stack", "dev", "--out", str(out)]
    for override in overrides:
        argv += ["--set", override]
    assert plan_main(argv) == 2
    captured = capsys.readouterr()
    message = captured.err.strip()
    assert message.count("\n") == 0, message
    assert message.startswith(f"error: {key} ")
    if words:
        assert words in message
    assert not out.exists(), "nothing may be written on a config error"
    assert captured.out == ""


def test_at_least_25_distinct_bad_inputs():
    assert len({c[0] for c in BAD_INPUTS}) >= 25


BASE = {"gcp:project": "my-proj-123", "gcp:region": "us-east5", "gcp:zone": "us-east5-b"}
TOKEN = {"tpu-rl:hfToken": "hf_x"}


def test_token_required_while_workflow_enabled():
    with pytest.raises(ConfigError, match="tpu-rl:hfToken .*required while tpu-rl:workflow.enabled"):
        load_settings({**BASE, "tpu-rl:tpu": '{"reservation": "r"}'}, "t")


def test_plaintext_token_is_rejected():
    with pytest.raises(ConfigError, match="plain text"):
        load_settings({**BASE, **TOKEN, "tpu-rl:tpu": '{"reservation": "r"}'}, "t", frozenset())


def test_provision_only_needs_no_token():
    settings = load_settings(
        {**BASE, "tpu-rl:tpu": '{"reservation": "r"}', "tpu-rl:workflow": '{"enabled": false}'}, "t"
    )
    assert not settings.workflow.enabled and not settings.hf_token_set


def test_defaults_reproduce_the_tutorial():
    s = load_settings({**BASE, **TOKEN, "tpu-rl:tpu": '{"reservation": "r"}'}, "t", frozenset(TOKEN))
    assert (s.tpu.version, s.tpu.machine_type, s.tpu.topology, s.tpu.slices, s.tpu.capacity) == (
        "v6e",
        "ct6e-standard-4t",
        "4x8",
        1,
        "reservation",
    )
    assert s.tpu.reservation == "projects/my-proj-123/reservations/r"
    assert (s.system_pool.machine_type, s.system_pool.min_nodes, s.system_pool.max_nodes) == ("e2-standard-8", 2, 10)
    assert s.cpu_pool.machine_type == "n2-standard-64" and s.cpu_pool.min_nodes == 0
    assert s.authorized_networks == ("0.0.0.0/0",)
    assert s.model.spec.hf_repo == "google/gemma-4-26b-a4b-it" and s.model.spec.maxtext_name == "gemma4-26b"
    assert s.images.maxtext.endswith("tpu_post_training:0.2.4")
    assert s.training.knobs["num_batches"] == 50 and s.training.knobs["learning_rate"] == 2e-5
    assert s.training.optimizer == "adafactor"
    assert s.workflow.max_restarts == 1, "departs from the tutorial's 0: a reserved slice survives one disruption"
    assert s.bucket_name == "my-proj-123-tpu-rl"


def test_shared_reservation_path_is_kept():
    s = load_settings(
        {**BASE, **TOKEN, "tpu-rl:tpu": '{"reservation": "projects/other-proj/reservations/r"}'}, "t", frozenset(TOKEN)
    )
    assert s.tpu.reservation == "projects/other-proj/reservations/r"
