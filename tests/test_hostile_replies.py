"""Hostile replies never crash a tool: each reply a review found ending a check in a traceback (a tool's exit 70), in
the wrong exit code or with raw terminal controls in a line, served by the project's fakes (the loopback Hub and
cluster, fake-gcs-server, tensorboardX's event files), and the one line with its exit code it is now."""

from __future__ import annotations

import struct

import pytest
import yaml

from tests.conftest import put
from tests.fake_hub import COMMIT, GOOD, REPO, FakeHub
from tests.fake_kube import fake_cluster, with_state
from tests.hf_files import LANGUAGE, model_files
from tests.lifecycle_walk import settings
from tests.loopback import serve
from workloads.specs.step_specs import plan_workflow

DEV = plan_workflow(settings("dev", []))
CONTEXT = "gke_my-tpu-dev-project_us-east5_tpu-rl-dev"
DEEP = b'{"a": ' * 5_000 + b"1" + b"}" * 5_000
"""JSON nested past Python's recursion limit: ``json.loads`` raises ``RecursionError``, no ``ValueError``."""
EXPORT = "gs://bkt/gemma4-26b/export/0123456789/"


def upload(gcs, uri: str, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        put(gcs, uri, name, data=data)


def read_export(gcs):
    from workloads.observe.artifacts import call_options
    from workloads.observe.exported import read_exported

    return read_exported(gcs, EXPORT, **call_options())


def hub_header(raw: bytes) -> bytes:
    """A shard as the Hub serves it whose header is ``raw`` (its length first, as the format says)."""
    return struct.pack("<Q", len(raw)) + raw


# ---------------------------------------------------------------------------------------------
# 1. JSON nested past Python's limit: a shard's header, a config, an index, a record


@pytest.mark.parametrize("name", ["config.json", "model.safetensors.index.json"])
def test_deep_json_in_the_export_is_one_problem_of_the_export_check(gcs, name):
    files = model_files(LANGUAGE, 2)
    files[name] = DEEP
    upload(gcs, EXPORT, files)
    found = read_export(gcs)
    assert found.layout is None and found.problems == [f"{name} is nested deeper than 64 levels"]


@pytest.mark.parametrize(
    ("name", "data", "words"),
    [
        ("config.json", DEEP, "config.json is nested deeper than 64 levels"),
        ("model-00001-of-00001.safetensors", hub_header(DEEP), "with JSON nested too deeply; check HF_ENDPOINT"),
    ],
    ids=["config", "a-shards-header"],
)
def test_deep_json_from_the_hub_stops_the_export_check_in_one_line_exit_2(name, data, words):
    """The base model's files on the Hub: a config this check parses, a header the Hub client parses. A retry
    reads the same bytes: exit 2, not the ``retry later`` of exit 1 (nor a ``RecursionError`` out of `pulumi up`)."""
    from workloads.preflight import PreflightError, base_model_layout

    files = model_files(LANGUAGE, 1)
    files[name] = data
    with serve(FakeHub.serving(files)) as url, pytest.raises(PreflightError) as err:
        base_model_layout(REPO, COMMIT, GOOD, url)
    assert err.value.exit_code == 2 and words in str(err.value) and "\n" not in str(err.value)


def status(tmp_path, cluster) -> int:
    from tools import status as status_cli

    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(cluster.kubeconfig(context=CONTEXT)))
    return status_cli.main(["--stack", "dev", "--kubeconfig", str(path)])


def test_a_conversion_record_nested_past_pythons_limit_never_crashes_make_status(gcs, tmp_path, capsys):
    put(gcs, DEV.convert.output_uri, "source.json", data=DEEP)
    with fake_cluster() as cluster:
        cluster.put(with_state(DEV.convert.manifest, "completed"))
        assert status(tmp_path, cluster) == 0
    assert f"no record at {DEV.convert.output_uri}source.json" in capsys.readouterr().out
