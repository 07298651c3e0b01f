"""The optional evaluation step (``tpu-rl:workflow.steps.evaluate``), the demonstration that a step is data: its
entry in ``core/steps.py``, its builder in ``workloads/specs/step_specs.py`` and its program
``workloads/container/evaluate_export.py`` are all it has. Everything else follows from the entry: the config keys, its
own identity and grants (only where it runs, after they propagate), the check of its record, the status, the
report and the model card (a step record, ``core/records.py``). Off, nothing of it exists.
"""

from __future__ import annotations

import json
import shlex

import pytest

from core.config.schema import FIELDS
from core.estimate import estimate_for
from core.records import MAX_RECORD_BYTES, MAX_ROWS, RECORD, parse_record
from core.steps import STEPS
from infra.gcp.access import access, bucket_grants
from tests.conftest import plan_of, put
from tests.lifecycle_walk import settings
from workloads.container.evaluate_export import parse_spec
from workloads.container.evaluate_grader import GRADER
from workloads.specs.commands import program
from workloads.specs.step_specs import HELD_OUT, plan_workflow

FIELD = {f.key: f for f in FIELDS}
"""The configuration's fields by key."""

ON = ["tpu-rl:workflow.steps.evaluate=true"]
PUBLISHING = ["tpu-rl:publish.repo=acme/gemma4-grpo"]
RECORDED = {
    "title": "Held-out questions",
    "summary": f"1 of 2 correct ({GRADER}, math-verify 0.9.0)",
    "columns": ["question", "expected", "answer", "correct"],
    "rows": [["What is 2 + 2?", "4", "4", "yes"], ["A | B <script>", "3", "*7*", "no"]],
}


def container(step) -> dict:
    return step.manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]


def spec_of(step) -> str:
    """The spec the step's script hands its program: the last word of its ``exec python3`` line."""
    script = step.script
    words = shlex.split(script[script.index("exec python3 /tpu-rl/evaluate_export.py ") :])
    assert words[:3] == ["exec", "python3", "/tpu-rl/evaluate_export.py"]
    assert step.scripts["data"]["evaluate_export.py"] == program("evaluate_export.py")
    return words[-1]


@pytest.mark.pure
@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_off_by_default_nothing_of_it_exists(stack):
    assert "evaluate" not in settings(stack, []).workflow.steps
    assert FIELD["tpu-rl:workflow.steps.evaluate"].default is False
    assert not [r["name"] for r in plan_of(stack).resources if "evaluate" in r["name"]]


@pytest.mark.pure
def test_on_it_reads_the_export_and_the_publication_comes_after_it_unchanged():
    off, on = plan_workflow(settings("prod", PUBLISHING)), plan_workflow(settings("prod", [*PUBLISHING, *ON]))
    assert [s.step for s in on] == ["convert", "train", "export", "evaluate", "publish"]
    assert {s.step: s.name for s in off} == {s.step: s.name for s in on if s.step != "evaluate"}, "nothing re-runs"
    step = on["evaluate"]
    assert step.input_uri == on.export.artifact_uri and step.output == "record"
    assert step.artifact_uri == step.output_uri + RECORD and step.output_uri.endswith(f"/evaluate/{step.step_id}/")
    assert (
        step.manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["activeDeadlineSeconds"] == 3 * 3600
        and step.container == "evaluate"
    )
    pod = step.manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "tpu-rl-prod-evaluate", "its Google account's name (core.names.step_ksa)"
    env = {e["name"]: e for e in container(step)["env"]}
    assert "HF_TOKEN" not in env, "it reads GCS only: no Hub token"
    assert env["HF_HUB_OFFLINE"]["value"] == "1"
    volume = next(v for v in pod["volumes"] if v["name"] == "scratch")
    assert volume["emptyDir"]["sizeLimit"] == "72Gi", "one copy of gemma4-26b's 52 GiB of weights + 20"
    image = settings("prod", ON).images.maxtext
    assert container(step)["image"] == image == container(on["export"])["image"], (
        "MaxText's post-training image: its math-verify and sympy grade the answers (MaxText 0.2.5's RL evaluation)"
    )
    assert settings("prod", ON).workflow.steps == ("convert", "train", "export", "evaluate")
    assert "evaluate" not in settings("prod", [*ON, "tpu-rl:workflow.enabled=false"]).workflow.steps


@pytest.mark.pure
def test_the_spec_the_builder_writes_is_the_one_the_program_reads():
    step = plan_workflow(settings("prod", ON))["evaluate"]
    spec = parse_spec(spec_of(step))
    text = json.loads(spec_of(step))
    assert [(q["question"], q["answer"]) for q in text["questions"]] == list(HELD_OUT)
    assert text["answerStart"] == "<answer>" and text["answerEnd"] == "</answer>"
    knobs = settings("prod", ON).training.knobs
    assert text["maxNewTokens"] == int(knobs["max_target_length"]) - int(knobs["max_prefill_predict_length"]) > 0
    assert (
        "between <reasoning> and </reasoning>" in text["system"] and "between <answer> and </answer>" in text["system"]
    )
    assert spec is not None
    # A stack that trains with other answer markers is graded with them: another spec, another step.
    other = plan_workflow(settings("prod", [*ON, "tpu-rl:training.extraArgs.solution_start_token=ANSWER:"]))
    assert json.loads(spec_of(other["evaluate"]))["answerStart"] == "ANSWER:"
    assert other["evaluate"].step_id != step.step_id


@pytest.mark.pure
def test_its_identity_exists_only_where_it_runs_and_touches_only_its_prefixes():
    assert "evaluate" not in access(("convert", "train", "export"))
    entry = access(("convert", "train", "export", "evaluate"))["evaluate"]
    assert entry.write == ("evaluate",) and entry.read == ("export",) and entry.step
    grants = {(g.holder, g.role): g.prefixes for g in bucket_grants("m", ("evaluate",))}
    assert grants[("evaluate", "roles/storage.objectUser")] == ("m/evaluate/",)
    assert grants[("evaluate", "roles/storage.objectViewer")] == ("m/export/",)
    assert len(bucket_grants("m", ("evaluate",))) == len(bucket_grants("m")) + 3

    plan = plan_of("dev", *ON)
    by_name = {r["name"]: r for r in plan.resources}
    assert by_name["evaluate-sa"]["inputs"]["accountId"] == "tpu-rl-dev-evaluate"
    assert "evaluate-access-propagation" not in by_name, "its first use waits for its grants (mark_folder.py)"
    assert {"evaluate-workload-identity", "evaluate-bucket-objectUser", "evaluate-bucket-objectViewer"} <= set(
        by_name["evaluate-ksa"]["options"]["dependsOn"]
    ), "its account is made once its binding and grants exist"
    assert by_name["evaluate-ksa"]["inputs"]["metadata"]["name"] == "tpu-rl-dev-evaluate"
    jobsets = {r["name"]: r for r in plan.resources if r["type"] == "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"}
    waiting = {name for name, r in jobsets.items() if "evaluate-ksa" in r["options"]["dependsOn"]}
    assert {n for n in jobsets if "-evaluate-" in n} <= waiting, "the evaluation waits for its account"


@pytest.mark.pure
def test_the_two_catalogues_list_the_same_steps_in_the_same_order():
    from workloads.specs.step_specs import SPECS

    assert tuple(spec.name for spec in SPECS) == tuple(STEPS)


@pytest.mark.pure
def test_its_keys_are_generated_from_the_entry_and_it_is_estimated():
    """Its hours are the model's entry's (gemma4-26b: 1.5 h); on a reservation the slice bills them too."""
    assert FIELD["tpu-rl:workflow.timeouts.evaluate"].default == STEPS["evaluate"].timeout == "3h"
    assert "held-out" in FIELD["tpu-rl:workflow.steps.evaluate"].doc
    on, off = (estimate_for(settings("prod", keys)).to_output() for keys in (ON, []))
    assert list(on["steps"]) == [*off["steps"], "evaluate"]
    assert on["steps"]["evaluate"] == {"hours": 1.5, "holdsTpu": False, "tpuChipHours": 48.0, "usd": 90.72}
    assert on["totalHours"] == round(off["totalHours"] + 1.5, 2)
    assert round(on["totalUsd"] - off["totalUsd"], 2) == round(32 * 1.5 * 1.89, 2)


# ---------------------------------------------------------------------------------------------
# The step record: parsed once, with bounds


@pytest.mark.pure
def test_a_record_parses_within_its_bounds_and_nothing_else_does():
    record = parse_record(json.dumps(RECORDED).encode())
    assert record is not None and record.to_json() == RECORDED
    bad = [
        b"not json",
        json.dumps({**RECORDED, "rows": [["only one cell"]]}).encode(),
        json.dumps({**RECORDED, "rows": [["a", "b", "c", "d"]] * (MAX_ROWS + 1)}).encode(),
        json.dumps({**RECORDED, "columns": []}).encode(),
        json.dumps({**RECORDED, "title": "t" * 81}).encode(),
        json.dumps({**RECORDED, "summary": 3}).encode(),
        json.dumps({k: v for k, v in RECORDED.items() if k != "rows"}).encode(),
        json.dumps([RECORDED]).encode(),
        b"[" * 200_000,  # nested too deeply for the JSON parser: not a record, not a crash
    ]
    assert [parse_record(data) for data in bad] == [None] * len(bad)
    shown = parse_record(json.dumps({**RECORDED, "summary": "two\nlines\x1b[31m"}).encode())
    assert shown is not None and shown.summary.isprintable(), "outside text is made printable once, where it is read"


@pytest.mark.pure
def test_a_record_of_exactly_its_byte_bound_is_read_and_one_byte_more_is_not():
    text = json.dumps(RECORDED)
    at_bound = (text[:-1] + " " * (MAX_RECORD_BYTES - len(text.encode())) + "}").encode()
    assert len(at_bound) == MAX_RECORD_BYTES
    record = parse_record(at_bound)
    assert record is not None and record.to_json() == RECORDED
    assert parse_record(at_bound[:-1] + b" }") is None


def test_the_artifact_check_and_the_status_read_the_record(gcs):
    from tools.status import DETAILS
    from workloads.observe.artifacts import call_options, step_problem

    step = plan_workflow(settings("dev", ON))["evaluate"]
    missing = step_problem(gcs, "record", step.artifact_uri, **call_options())
    assert missing == f"the step finished but its record {step.artifact_uri} is missing or is not a step record"
    assert DETAILS["record"](gcs, step) == f"no record at {step.artifact_uri}"
    bucket, _, name = step.artifact_uri.removeprefix("gs://").partition("/")
    put(gcs, f"gs://{bucket}/", name, data=b'{"title": "x"}')
    assert step_problem(gcs, "record", step.artifact_uri, **call_options()) == missing, "not a record"
    put(gcs, f"gs://{bucket}/", name, data=json.dumps(RECORDED).encode())
    assert step_problem(gcs, "record", step.artifact_uri, **call_options()) is None
    assert DETAILS["record"](gcs, step) == f"Held-out questions: 1 of 2 correct ({GRADER}, math-verify 0.9.0)"


@pytest.mark.pure
def test_the_report_shows_each_record_escaped_or_that_it_is_not_there_yet():
    from tools.report import RunInfo
    from tools.report_html import _record_sections

    info = RunInfo(output_uri="gs://b/m/train/h/", record_uris={"evaluate": "gs://b/m/evaluate/h/record.json"})
    assert "not recorded yet" in _record_sections(info)
    info.records["evaluate"] = RECORDED
    page = _record_sections(info)
    assert f"<h2>Held-out questions (evaluate)</h2><p>1 of 2 correct ({GRADER}, math-verify 0.9.0)</p>" in page
    assert "<td>A | B &lt;script&gt;</td>" in page and "<script>" not in page
    assert _record_sections(RunInfo(output_uri="gs://b/m/train/h/")) == "", "a stack without one: no section"


@pytest.mark.pure
def test_the_step_is_named_in_its_three_files_only():
    """No other product module names it (the config, the identities, the checks, the status, the report and the card
    follow from its entry): a step is data."""
    import re

    from tools.stack_files import ROOT

    named = re.compile(r"""["']evaluate["'/]|evaluate_export""")
    product = [
        p
        for folder in ("core", "infra", "workloads", "tools", "program", "policy")
        for p in (ROOT / folder).rglob("*.py")
        if "venv" not in p.relative_to(ROOT).parts
    ]
    found = {str(p.relative_to(ROOT)) for p in [*product, ROOT / "__main__.py"] if named.search(p.read_text())}
    assert found == {"core/steps.py", "workloads/specs/step_specs.py", "workloads/container/evaluate_export.py"}
