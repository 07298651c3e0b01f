"""Hostile replies never crash a tool: each reply a review found ending a check in a traceback (a tool's exit 70), in
the wrong exit code or with raw terminal controls in a line, served by the project's fakes (the loopback Hub and
cluster, fake-gcs-server, tensorboardX's event files), and the one line with its exit code it is now. The shapes of
each parser family, generated: ``tests/test_hostile_reply_properties.py``."""

from __future__ import annotations

import json
import math
import struct
import tempfile
from pathlib import Path

import pytest
import yaml

from core.hf_model import Tensor
from tests.conftest import put
from tests.fake_hub import COMMIT, GOOD, REPO, FakeHub
from tests.fake_kube import fake_cluster, with_state
from tests.hf_files import CONFIG, LANG, LANGUAGE, model_files, shard_bytes
from tests.lifecycle_walk import settings
from tests.loopback import QuietHandler, serve
from tests.run_files import START, upload_run, write_raw_events
from workloads.specs.step_specs import plan_workflow

DEV = plan_workflow(settings("dev", []))
CONTEXT = "gke_my-tpu-dev-project_us-east5_tpu-rl-dev"
DEEP = b'{"a": ' * 5_000 + b"1" + b"}" * 5_000
"""JSON nested past Python's recursion limit: ``json.loads`` raises ``RecursionError``, no ``ValueError``."""
ESC = "\x1b]8;;https://evil.example\x07click\x1b]8;;\x07\x1b[2J\u202e"
"""An OSC 8 hyperlink, a screen clear and a right-to-left override: what a terminal would act on or hide."""
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


# ---------------------------------------------------------------------------------------------
# 2. A Hub reply of another shape, where the check reads it


def shaped_hub(info: dict) -> type[FakeHub]:
    """The loopback Hub whose model info holds ``info``'s fields in place of its own."""

    class Shaped(FakeHub.serving(model_files(LANGUAGE, 1))):  # type: ignore[misc]
        def send_json(self, status: int, value: object) -> None:
            if isinstance(value, dict) and "siblings" in value:
                value = {**value, **info}
            super().send_json(status, value)

    return Shaped


@pytest.mark.parametrize(
    ("info", "field"),
    [({"tags": 5}, "tags"), ({"sha": ["x"]}, "sha"), ({"private": "no"}, "private")],
    ids=["tags-a-number", "sha-a-list", "private-text"],
)
def test_a_model_reply_of_another_shape_is_one_line_naming_the_field(info, field):
    from workloads.preflight import PreflightError, check_model_access

    with serve(shaped_hub(info)) as url, pytest.raises(PreflightError) as err:
        check_model_access(REPO, "main", GOOD, endpoint=url)
    line = str(err.value)
    assert err.value.exit_code == 2 and "\n" not in line
    assert f"/revision/main with a reply of another shape: {field}: " in line and line.endswith(
        "HF_ENDPOINT or a proxy in the way"
    )


@pytest.mark.parametrize(
    ("shape", "field"),
    [([2, None], "shape.1"), (5, "shape"), ([-1], "shape.0")],
    ids=["a-null-dimension", "a-number", "a-negative-dimension"],
)
def test_a_header_of_another_shape_from_the_hub_is_one_line_naming_the_tensor(shape, field):
    """``parse_safetensors_file_metadata`` takes a tensor's shape as the JSON has it; the check reads it as whole
    numbers (before: ``int(None)`` or a number iterated, a ``TypeError`` out of the export check; a negative
    dimension taken as it came)."""
    from workloads.preflight import PreflightError, base_model_layout

    raw = json.dumps({f"{LANG}norm.weight": {"dtype": "BF16", "shape": shape, "data_offsets": [0, 8]}}).encode()
    files = {"config.json": json.dumps(CONFIG).encode(), "model.safetensors": hub_header(raw) + b"\0" * 8}
    with serve(FakeHub.serving(files)) as url, pytest.raises(PreflightError) as err:
        base_model_layout(REPO, COMMIT, GOOD, url)
    assert err.value.exit_code == 2 and f"tensors.{LANG}norm.weight.{field}: " in str(err.value)


def test_a_header_from_the_hub_is_read_as_whole_numbers():
    from workloads.preflight import base_model_layout

    files = model_files(LANGUAGE, 1)
    with serve(FakeHub.serving(files)) as url:
        found = base_model_layout(REPO, COMMIT, GOOD, url)
    assert found.tensors == {n: Tensor(d, tuple(s)) for n, (d, s) in LANGUAGE.items()}


# ---------------------------------------------------------------------------------------------
# 3. The publication's preflight on an account of another shape


WRITE = "hf_" + "W" * 34


def account_hub(who: object) -> type[QuietHandler]:
    """A Hub for the dev stack's preflight whose ``/api/whoami-v2`` answers ``who``."""
    from core.models import MODELS

    repo = MODELS["gemma4-e4b"].hf_repo
    parquet = [{"rfilename": f"main/{split}-00000-of-00001.parquet"} for split in ("train", "test")]

    class Accounts(QuietHandler):
        def do_GET(self):  # noqa: N802
            path = self.path.split("?")[0]
            if path == "/api/whoami-v2":
                self.send_json(200, who)
            elif path == f"/api/models/{repo}/revision/main":
                self.send_json(200, {"id": repo, "sha": COMMIT})
            elif path == "/api/datasets/openai/gsm8k/revision/main":
                self.send_json(200, {"id": "openai/gsm8k", "sha": COMMIT, "siblings": parquet})
            else:
                self.send_body(404, b'{"error": "not found"}', **{"X-Error-Code": "RepoNotFound"})

        def do_HEAD(self):  # noqa: N802
            self.send_body(200, b"", **{"X-Repo-Commit": COMMIT, "ETag": '"abc"'})

    return Accounts


@pytest.mark.parametrize(
    ("who", "field"),
    [
        ({"name": "alice", "orgs": 5, "auth": {"accessToken": {"role": "write"}}}, "orgs"),
        ({"name": "alice", "orgs": [{"name": ["acme"]}]}, "orgs.0.name"),
        (
            {
                "name": "acme",
                "auth": {"accessToken": {"role": "fineGrained", "fineGrained": {"scoped": [{"permissions": 5}]}}},
            },
            "auth.accessToken.fineGrained.scoped.0.permissions",
        ),
        (["alice"], "expected an object"),
    ],
    ids=["orgs-a-number", "an-orgs-name-a-list", "permissions-a-number", "a-list"],
)
def test_an_odd_account_stops_the_publication_preflight_in_one_line_exit_2(who, field, monkeypatch, capsys):
    """`python -m tools.plan --preflight` as `pulumi up` runs it (before: a ``TypeError``, exit 70)."""
    from tools.plan.cli import main as plan_main

    monkeypatch.setenv("HF_TOKEN", "hf_" + "R" * 34)
    monkeypatch.setenv("HF_WRITE_TOKEN", WRITE)
    with serve(account_hub(who)) as url:
        monkeypatch.setenv("HF_ENDPOINT", url)
        code = plan_main(
            [
                "--stack",
                "dev",
                "--preflight",
                "--set",
                "gcp:project=real-project-1",
                "--set",
                "tpu-rl:publish.repo=acme/m",
            ]
        )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and WRITE not in err, err
    assert (
        err.startswith("error: preflight: the Hub at ")
        and f"/api/whoami-v2 with a reply of another shape: {field}" in err
    )


# ---------------------------------------------------------------------------------------------
# 4 and 5. An event file's wall times and tags, through `make report`


@pytest.mark.slow  # the whole report, plots drawn: 1.6 s
@pytest.mark.filterwarnings("error:Glyph:UserWarning")  # a control character drawn in a plot
def test_an_absurd_wall_time_or_an_escape_in_a_tag_never_breaks_the_report(gcs, tmp_path, capsys):
    """Wall times no clock shows (1e300, NaN, negative, infinite) left out and counted, not a datetime overflow
    (before: exit 70); the run's own reward tag printed as a terminal draws it (before: the escapes raw)."""
    from tools import report as report_cli

    run = DEV.train.output_uri
    upload_run(gcs, run, steps=[], logs=False)
    tag = f"rewards/{ESC}/sum"
    walls = [START, 1e300, math.nan, -5.0, math.inf, START + 60]
    bucket, _, prefix = run.removeprefix("gs://").partition("/")
    with tempfile.TemporaryDirectory() as folder:
        write_raw_events(Path(folder), [(tag, step, wall, 0.5) for step, wall in enumerate(walls)])
        for path in Path(folder).iterdir():
            gcs.bucket(bucket).blob(f"{prefix}rl/tensorboard/{path.name}").upload_from_filename(str(path))
    out = tmp_path / "report"
    assert report_cli.main(["--run-uri", run, "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "\x1b" not in captured.out + captured.err and "\u202e" not in captured.out
    assert "reward tag rewards/click/sum)" in captured.out
    report = json.loads((out / "report.json").read_text())
    assert report["untimed"] == 4 and [(a["start"], a["end"]) for a in report["attempts"]] == [(START, START + 60)]
    assert report["scalars"][tag] == [[0, 0.5], [5, 0.5]], "the data keeps the tag as the run wrote it"
    assert "4 TensorBoard events are left out" in (out / "report.html").read_text()


# ---------------------------------------------------------------------------------------------
# 5. Text from elsewhere in what `pulumi up` prints


def test_an_escape_in_a_shards_header_reaches_pulumi_ups_line_as_a_terminal_draws_it(gcs):
    """A tensor's name is the header's text; the export check's line names it, and the engine prints a stop's text
    as it is (before: the hyperlink, the screen clear and the override reached the terminal)."""
    from infra.stop import StopError
    from workloads.observe.artifacts import incomplete_export
    from workloads.wiring import retried

    files = model_files(LANGUAGE, 1)
    files["model-00001-of-00001.safetensors"] = shard_bytes({**LANGUAGE, f"{LANG}x{ESC}": ("BF16", [2])})
    upload(gcs, EXPORT, files)
    problems = read_export(gcs).problems
    assert any(ESC in p for p in problems), "the problem holds the name as the header wrote it"
    problem = incomplete_export(EXPORT, problems)
    assert problem is not None
    with pytest.raises(StopError) as stopped:
        retried(DEV.export, problem)
    line = str(stopped.value)
    assert line.isprintable() and f"{LANG}xclick" in line and "export finished but" in line


def test_every_line_the_program_logs_is_drawn_as_a_terminal_draws_it(monkeypatch):
    import pulumi

    from infra.stop import log_info, log_warn

    said: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda message, *_, **__: said.append(message))
    monkeypatch.setattr(pulumi.log, "info", lambda message, *_, **__: said.append(message))
    log_warn(f"a record's title {ESC}\nits second line")
    log_info(f"published {ESC}", ephemeral=True)
    assert said == ["a record's title click\nits second line", "published click"]


def test_the_program_logs_only_through_the_one_that_scrubs():
    """Every warning and note of the program goes through ``infra.stop.log_info``/``log_warn`` (a stop through
    ``StopError``): no other module calls ``pulumi.log`` or raises a ``RunError`` of its own."""
    root = Path(__file__).resolve().parent.parent
    found = [
        f"{path.relative_to(root)}:{number}"
        for folder in ("program", "workloads", "infra", "core")
        for path in sorted((root / folder).rglob("*.py"))
        if path != root / "infra" / "stop.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "pulumi.log." in line or "RunError(" in line
    ]
    assert found == []


# ---------------------------------------------------------------------------------------------
# 6. A cluster object of another shape: `make status` exits as docs/troubleshooting.md says


@pytest.mark.parametrize(
    "change",
    [lambda o: o["status"].update(conditions=5), lambda o: o.update(status=[1])],
    ids=["conditions-a-number", "status-a-list"],
)
def test_a_jobset_of_another_shape_exits_2_as_the_docs_say(change, gcs, tmp_path, capsys):
    obj = with_state(DEV.convert.manifest, "completed")
    change(obj)
    with fake_cluster() as cluster:
        cluster.put(obj)
        code = status(tmp_path, cluster)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"error: cannot read the cluster: JobSet tpu-rl/{DEV.convert.name}: ")
    assert err.count("\n") == 1
