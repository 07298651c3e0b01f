"""The judge of the PR preview (``policy/judge_preview.py``) on preview digests written as ``pulumi preview --json
--show-sames`` writes them (``tests/preview_digest.py``: from an offline plan, with the field names of pulumi's Go
structs and the values its JSON display writes), against the pack as the engine runs it (``tests/analyzer.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from pulumi.output import Unknown

from policy import judge_preview
from tests import analyzer
from tests.analyzer import Pack
from tests.conftest import plan_of
from tests.preview_digest import HOSTILE, JOBSET, digest, hostile, image, load_balancer, written
from tests.pure_plan import per_mutant_cache, pure_plan
from tools.plan.offline import SECRET_SIG, SECRET_SIG_KEY, UNKNOWN, Plan
from tools.stack_files import ROOT

pytestmark = pytest.mark.slow

STACKS = ("dev", "prod")


def judged(document: Mapping[str, Any], stack: str, *, remembered: bool = True) -> list[judge_preview.Finding]:
    """The judge's findings on the digest as the CLI writes it. ``remembered``: pulumi-policy's servicer makes each
    distinct resource's properties into its proxy once per process (``analyzer.conversions_remembered``, as the tests'
    engine does); otherwise afresh for each policy, as the judge runs in the workflow."""
    with analyzer.conversions_remembered() if remembered else contextlib.nullcontext():
        return judge_preview.judge(
            json.loads(written(document)), stack, analyzer.policy_config_file(stack), stack_file=_stack_file(stack)
        ).findings


def _stack_file(stack: str) -> str:
    """The base's stack file, as the workflow hands it to the judge (``--stack-file``)."""
    return (ROOT / f"Pulumi.{stack}.yaml").read_text()


def _key(findings: Any) -> list[tuple[str, str, str, bool]]:
    """What a finding says (not where: the digest's URN of a component's child may differ from the plan's). Of a
    "can't run", the policy and level: the values it names may differ in their path where the judge reads a create's
    inputs for its outputs (a provider may mark a secret higher up in what it returns)."""
    return sorted((f.policy, f.level, "can't run" if f.unjudged else f.message, f.unjudged) for f in findings)


def _blinded(value: Any) -> Any:
    """A value as the digest leaves it to the judge: every secret's value unknown (the digest has ``[secret]``)."""
    if isinstance(value, analyzer.Secret):
        return analyzer.Secret(Unknown())
    if isinstance(value, dict):
        return {k: _blinded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_blinded(v) for v in value]
    return value


def engine_findings(plan: Plan, stack: str, *, live: bool = False, blind: bool = True) -> list[analyzer.Finding]:
    """What ``pulumi preview --policy-pack`` shows of the plan: a preview (``dry_run``), ``AnalyzeStack`` on the
    previewed outputs, or on the live objects when nothing changes (``live``). ``blind``: every secret's value
    unknown, as the digest leaves it (the engine itself sends the pack secrets' values)."""
    pack = Pack(
        analyzer.policy_config_file(stack), dry_run=True, stack=stack, stack_config=analyzer.engine_config(stack)
    )
    view = (lambda r: dataclasses.replace(r, props=_blinded(r.props))) if blind else (lambda r: r)
    found = []
    for r in analyzer.resources(plan, preview=not live, stack_view=False):
        found += pack.analyze(view(r))
    found += pack.analyze_stack([view(r) for r in analyzer.resources(plan, preview=not live, stack_view=True)])
    return found


def assert_only_secrets_differ(found: list[judge_preview.Finding], plan: Plan, stack: str, *, live: bool = False):
    """Against the pack as the engine runs it, secrets known: the same mandatory findings, and anything else the
    judge says is that it cannot see a value (a secret's, which the digest does not hold)."""
    engine = engine_findings(plan, stack, live=live, blind=False)
    assert sorted(f.message for f in found if f.level == "mandatory") == sorted(
        f.message for f in engine if f.level == "mandatory"
    )
    extra = set(_key(found)) - set(_key(engine))
    assert all(unjudged and level == "advisory" for _, level, _, unjudged in extra), extra


# ---------------------------------------------------------------------------------------------
# The example stacks


@pytest.mark.program
@pytest.mark.parametrize("stack", [pytest.param("dev", marks=pytest.mark.slow), "prod"])
def test_the_first_preview_of_each_example_stack_is_judged_as_the_engine_runs_the_pack(stack):
    """Every resource a create, every output a provider computes unknown: the judge finds what the pack finds in the
    preview when every secret's value is unknown (the digest holds none): the same policies, levels and messages, no
    mandatory finding, and what it cannot see named; against the engine, which sends secrets' values, only "can't run"
    advisories differ."""
    plan = analyzer.first_preview(stack)
    # dev's as the workflow runs the judge, each policy's conversions its own: against the tests' engine, which
    # remembers them (``analyzer.conversions_remembered``), the same findings
    found = judged(digest(plan), stack, remembered=stack != "dev")
    assert _key(found) == _key(engine_findings(plan, stack))
    assert_only_secrets_differ(found, plan, stack)
    assert [f for f in found if f.level == "mandatory"] == []
    unjudged = [f for f in found if f.unjudged]
    assert unjudged and {f.level for f in unjudged} == {"advisory"}
    assert any(".member" in f.message for f in unjudged if f.policy == "stack-principals")


@pytest.mark.program
@pytest.mark.parametrize("stack", [pytest.param("dev", marks=pytest.mark.slow), "prod"])
def test_an_unchanged_preview_of_each_example_stack_judges_every_same_step(stack):
    """A preview that changes nothing: only ``same`` steps, which the digest holds with ``--show-sames`` (``shouldShow``
    drops them otherwise). The stack validations read their old outputs (the live JobSets, a status included): the
    same findings as the pack in the engine, and none mandatory."""
    plan = plan_of(stack)
    document = digest(plan, "same")
    found = judged(document, stack)
    assert _key(found) == _key(engine_findings(plan, stack, live=True))
    assert_only_secrets_differ(found, plan, stack, live=True)
    assert [f for f in found if f.level == "mandatory"] == []
    resources, steps = judge_preview.read_digest(json.loads(written(document)), stack)
    assert len(resources) == len(steps) == len(plan.resources) + 1  # every resource and the stack


# ---------------------------------------------------------------------------------------------
# Hostile plans: the findings of the pack in the engine


def _hostile(change) -> Plan:
    return hostile(pure_plan("prod"), change)


@per_mutant_cache
def clean_engine_findings() -> tuple[analyzer.Finding, ...]:
    """``engine_findings`` of prod's builders' plan, judged once per process (per mutant in a mutation run): each
    hostile case compares with it. A tuple, so no case changes what the next one reads."""
    return tuple(engine_findings(pure_plan("prod"), "prod"))


@pytest.mark.pure
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_preview_gets_the_findings_of_the_pack_in_the_engine(case):
    change, expected = HOSTILE[case]
    plan = _hostile(change)
    found = judged(digest(plan), "prod")
    assert _key(found) == _key(engine_findings(plan, "prod"))
    pack = Pack(
        analyzer.policy_config_file("prod"), dry_run=True, stack="prod", stack_config=analyzer.engine_config("prod")
    )
    assert _key(found) == _key(analyzer.analyze_plan(plan, pack, preview=True))  # no secret in the builders' plan
    assert_only_secrets_differ(found, plan, "prod")
    base = {f.policy for f in clean_engine_findings() if f.level == "mandatory"}
    new = {f.policy for f in found if f.level == "mandatory"} - base
    assert new and (expected is None or expected <= new), new


@pytest.mark.pure
@pytest.mark.parametrize("placeholder", [UNKNOWN, judge_preview.SECRET], ids=["unknown", "secret"])
def test_a_value_the_digest_does_not_show_is_not_judged_harmless(placeholder):
    """The unknown placeholder and ``[secret]`` (a secret's value, never in the digest) reach the pack as the engine's
    unknown (inside a secret, for ``[secret]``): the policies that read it say they cannot judge it (advisory, "can't
    run policy ... during preview"), as they do in the engine, and the verdict says so; a known forbidden image in the
    same place is mandatory."""
    plan = _hostile(image(placeholder))
    found = judged(digest(plan), "prod")
    images = [f for f in found if f.policy in ("trusted-registries", "pinned-images")]
    assert images and all(f.unjudged and f.level == "advisory" for f in images), images
    assert all("image" in f.message for f in images)
    if placeholder == UNKNOWN:
        assert _key(found) == _key(engine_findings(_hostile(image(Unknown())), "prod"))


@pytest.mark.pure
def test_a_token_passed_as_a_secret_value_is_reported_but_not_failed_the_known_limit():
    """The limit docs/guardrails.md names: the engine sends the pack a secret's value, the digest does not hold it. A
    token the program passes in a container's arguments as a secret value fails the pack in the engine; the judge sees
    ``[secret]`` there and says it cannot judge it (advisory, naming the argument), never that it is harmless."""
    from tests.conftest import SENTINEL_TOKEN

    def change(plan: Plan) -> None:
        train = next(r for r in plan.resources if r["type"] == JOBSET)
        pod = train["inputs"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        container = pod["containers"][0]
        container["args"] = [*(container.get("args") or []), analyzer.Secret(f"--token={SENTINEL_TOKEN}")]

    plan = _hostile(change)
    engine = [f for f in engine_findings(plan, "prod", blind=False) if f.policy == "no-secrets-in-workloads"]
    assert [(f.level, f.unjudged) for f in engine] == [("mandatory", False)]
    assert "args contains secret material (a Hugging Face token)" in engine[0].message
    found = [f for f in judged(digest(plan), "prod") if f.policy == "no-secrets-in-workloads"]
    assert [(f.level, f.unjudged) for f in found] == [("advisory", True)]
    assert "containers[0].args[0] not known" in found[0].message
    assert SENTINEL_TOKEN not in written(digest(plan))


@pytest.mark.pure
def test_numbers_arrive_as_doubles_and_typed_values_as_the_engine_sends_them():
    errors: list[str] = []
    sent = judge_preview._struct(
        {
            "count": 8,
            "share": 0.5,
            "ref": {judge_preview.SIG_KEY: judge_preview.RESOURCE_REFERENCE_SIG, "urn": "urn:x", "id": "id-1"},
            "component": {judge_preview.SIG_KEY: judge_preview.RESOURCE_REFERENCE_SIG, "urn": "urn:x"},
            "nan": {judge_preview.SIG_KEY: judge_preview.FLOAT_SIG, "value": "7ff8000000000001"},
            "encrypted": {judge_preview.SIG_KEY: SECRET_SIG, "ciphertext": "v1:abc"},
            "__defaults": ["skipped at the top level"],
            "nested": {"__kept": True},
        },
        "inputs",
        errors,
        True,
        top=True,
    )
    assert errors == []
    assert sent.fields["count"].number_value == 8.0 and sent.fields["count"].WhichOneof("kind") == "number_value"
    assert sent.fields["ref"].string_value == "id-1" and sent.fields["component"].string_value == UNKNOWN
    assert sent.fields["nan"].number_value != sent.fields["nan"].number_value  # NaN
    secret = sent.fields["encrypted"].struct_value.fields
    assert secret[SECRET_SIG_KEY].string_value == SECRET_SIG and secret["value"].string_value == UNKNOWN
    assert "__defaults" not in sent.fields and sent.fields["nested"].struct_value.fields["__kept"].bool_value
    judge_preview._struct({"odd": {judge_preview.SIG_KEY: "feedface"}}, "inputs", errors, True)
    assert errors == ["inputs.odd: a signed value the engine does not write (feedface)"]


@pytest.mark.pure
def test_a_programs_values_are_sent_as_the_engine_holds_them_not_as_the_digest_writes_them():
    """What the program registered (the tests' engine): a secret sent with its value, an SDK unknown the sentinel, and
    ``[secret]`` or an object with the signature key plain values (only the digest's JSON stands for typed values)."""
    signed = {judge_preview.SIG_KEY: SECRET_SIG, "ciphertext": "v1:abc"}
    sent = judge_preview.properties(
        {"token": judge_preview.Secret("t"), "later": Unknown(), "text": judge_preview.SECRET, "object": signed}
    )
    secret = sent.fields["token"].struct_value.fields
    assert secret[SECRET_SIG_KEY].string_value == SECRET_SIG and secret["value"].string_value == "t"
    assert sent.fields["later"].string_value == UNKNOWN and sent.fields["text"].string_value == judge_preview.SECRET
    assert sent.fields["object"].struct_value.fields["ciphertext"].string_value == "v1:abc"
    with pytest.raises(TypeError, match=r"^.odd: the engine sends no object$"):
        judge_preview.properties({"odd": object()})


def _schema_refusals(policies: Any, properties: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """What a whole JSON Schema validator refuses of each policy's properties (the engine's is gojsonschema:
    ``config.go`` ``validatePolicyConfig``, on ``convertSchema``'s object of the policy's schema)."""
    refused = []
    for policy in policies:
        schema = policy.config_schema
        if schema is not None and policy.name in properties:
            document = {"type": "object", "properties": schema.properties, "required": schema.required or []}
            validator = jsonschema.Draft7Validator(document)
            refused += [f"{policy.name}: {e.message}" for e in validator.iter_errors(properties[policy.name])]
    return refused


@pytest.mark.pure
def test_the_policy_config_is_reconciled_as_the_engine_does():
    """Each stack's config reconciled (defaults, ``all``, its own entries) is what a whole JSON Schema validator takes;
    what the judge's schema check refuses, it refuses too."""
    policies = analyzer._pack_module().POLICIES
    for stack in STACKS:
        levels = judge_preview.reconciled(policies, analyzer.policy_config_file(stack))
        assert set(levels) == {p.name for p in policies}
        assert _schema_refusals(policies, {name: props for name, (_, props) in levels.items()}) == []
    assert _schema_refusals(policies, {"bounded-retries": {"maxRestarts": "3"}}) == [
        "bounded-retries: '3' is not of type 'integer'"
    ]
    with pytest.raises(judge_preview.BadInputError) as refused:
        judge_preview.reconciled(
            policies, {"all": "mandatory", "bounded-retries": {"maxRestarts": "3"}, "no-such-policy": "advisory"}
        )
    assert str(refused.value) == (
        "the policy config cannot be used: no-such-policy: no policy of the pack has this name; "
        'bounded-retries.maxRestarts: "3" is not of type integer'
    )
    with pytest.raises(judge_preview.BadInputError, match="level 'strict' is not one of"):
        judge_preview.reconciled(policies, {"all": "strict"})


@pytest.mark.pure
def test_the_policy_config_s_texts_are_held_to_their_length_and_pattern():
    """``trusted-registries``' entries are non-empty text, ``grant-targets``' Hub caches ``gs://`` paths: the judge
    refuses what the engine's schema check refuses, naming each value."""
    policies = analyzer._pack_module().POLICIES
    config = {
        "trusted-registries": {"registries": ["us-docker.pkg.dev/cloud-tpu-images", ""]},
        "grant-targets": {"hubCaches": ["gs://cache/hub/", "s3://cache/hub/"]},
    }
    with pytest.raises(judge_preview.BadInputError) as refused:
        judge_preview.reconciled(policies, config)
    assert str(refused.value) == (
        'the policy config cannot be used: grant-targets.hubCaches[1]: "s3://cache/hub/" does not match '
        '^gs://[a-z0-9][a-z0-9_.-]+/.+; trusted-registries.registries[1]: "" is shorter than 1'
    )
    assert len(_schema_refusals(policies, config)) == 2
    fine = {"trusted-registries": {"registries": ["a"]}, "grant-targets": {"hubCaches": ["gs://cache/hub/"]}}
    levels = judge_preview.reconciled(policies, fine)
    assert levels["trusted-registries"][1]["registries"] == ["a"]
    assert _schema_refusals(policies, {name: props for name, (_, props) in levels.items()}) == []


# ---------------------------------------------------------------------------------------------
# As the workflow runs it: a file of the pack's folder, one line per finding, the exit status the verdict


def _pack_copy(where: Path) -> tuple[Path, dict[str, str]]:
    """The base's pack as the workflow installs it: policy/ (config with it), and core/ importable (the venv's)."""
    pack = where / "policy"
    shutil.copytree(ROOT / "policy", pack, ignore=shutil.ignore_patterns("venv", "__pycache__"))
    site = where / "site"
    shutil.copytree(ROOT / "core", site / "core", ignore=shutil.ignore_patterns("__pycache__"))
    return pack, {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}


def _run(pack: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(pack / "judge_preview.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
        timeout=60,
    )


@pytest.mark.slow
def test_the_judge_runs_as_a_file_of_the_pack_and_fails_on_a_mandatory_finding(tmp_path):
    pack, env = _pack_copy(tmp_path)
    clean, hostile = tmp_path / "clean.json", tmp_path / "hostile.json"
    clean.write_text(written(digest(pure_plan("prod"))))
    hostile.write_text(written(digest(_hostile(load_balancer))))
    summary = tmp_path / "verdict.md"

    stack_file = ("--stack-file", str(ROOT / "Pulumi.prod.yaml"))
    passed = _run(pack, env, "prod", str(clean), *stack_file, "--summary", str(summary))
    assert passed.returncode == 0, passed.stderr
    assert passed.stderr == ""
    assert passed.stdout.splitlines()[-1].startswith(f"prod: 52 resources judged by the pack at {pack}: 0 mandatory")
    assert "no mandatory finding" in summary.read_text()

    failed = _run(pack, env, "prod", str(hostile), *stack_file, "--summary", str(summary))
    assert failed.returncode == 1, failed.stderr
    lines = failed.stdout.splitlines()
    assert (
        "mandatory: no-exposed-services: kubernetes:core/v1:Service::exposed: Service exposed of type LoadBalancer "
        "opens its pods beyond the cluster (the Pathways proxy, a step's port): use a ClusterIP Service"
    ) in lines
    text = summary.read_text()
    assert text.startswith("**Verdict of the base branch's pack on the prod preview: 3 mandatory findings**")
    assert "mandatory: no-exposed-services: kubernetes:core/v1:Service::exposed" in text


BAD = {
    "not JSON (a preview the branch ended)": ('{"steps": [', "not JSON"),
    "empty (the CLI wrote nothing)": ("", "not JSON"),
    "a line before the digest (anything else on the CLI's output)": (
        'listening on 127.0.0.1:1\n{"steps": []}',
        "not JSON",
    ),
    "a second document after it": ('{"steps": []}\n{"steps": []}', "not JSON"),
    "not an object": ("[]", "the preview digest is not a JSON object (the digest of a preview in JSON is one)"),
    "no steps": ('{"steps": []}', "the preview digest has no steps (a preview writes its stack's step at least)"),
    "steps it cannot read": (
        json.dumps(
            {
                "steps": [
                    {"op": "create", "urn": "urn:pulumi:dev::tpu-rl::pulumi:pulumi:Stack::tpu-rl-dev"},
                    {"op": "teleport", "urn": "urn:pulumi:prod::tpu-rl::kubernetes:core/v1:Service::x"},
                    {"op": "create", "urn": "urn:pulumi:prod::other::kubernetes:core/v1:Service::y"},
                ]
            }
        ),
        "the preview digest cannot be judged: steps[0]: urn 'urn:pulumi:dev::tpu-rl::pulumi:pulumi:Stack::tpu-rl-dev' "
        "is not a URN of stack prod of tpu-rl; steps[1] (x): op 'teleport' is not a step the engine takes; steps[2]: "
        "urn 'urn:pulumi:prod::other::kubernetes:core/v1:Service::y' is not a URN of stack prod of tpu-rl",
    ),
}


@pytest.mark.pure
@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_exits_2_in_one_line(tmp_path, case):
    text, message = BAD[case]
    document = tmp_path / "preview.json"
    document.write_text(text)
    summary = tmp_path / "verdict.md"
    assert judge_preview.main(["prod", str(document), "--summary", str(summary)]) == 2
    assert message in summary.read_text()


@pytest.mark.pure
@pytest.mark.parametrize("depth", [500, 5000])
def test_a_value_nested_deeper_than_the_judge_reads_exits_2_in_one_line(tmp_path, capsys, depth):
    """A program may register a value nested thousands deep: the judge fails closed, in one line, never a traceback
    (the exit status 1 of a traceback would read as a finding)."""
    value = "{" + '"a": {' * depth + '"b": 1' + "}" * depth + "}"
    step = '{"op": "create", "urn": "urn:pulumi:dev::tpu-rl::kubernetes:core/v1:ConfigMap::c", "newState": '
    document = tmp_path / "preview.json"
    document.write_text('{"steps": [' + step + '{"type": "kubernetes:core/v1:ConfigMap", "inputs": ' + value + "}}]}")
    assert judge_preview.main(["dev", str(document)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {document}: ") and ("nested deeper" in err or "not JSON" in err)
    assert err.count("\n") == 1


@pytest.mark.pure
def test_an_unreadable_digest_and_a_stack_without_config_exit_2(tmp_path, capsys):
    assert judge_preview.main(["prod", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {tmp_path / 'missing.json'}: cannot read the preview digest (No such file or directory)\n"
    (tmp_path / "p.json").write_text("{}")
    assert judge_preview.main(["../prod", str(tmp_path / "p.json")]) == 2
    assert capsys.readouterr().err == "error: the stack name '../prod' is not a plain name\n"
    assert judge_preview.main(["staging", str(tmp_path / "p.json")]) == 2
    assert capsys.readouterr().err.startswith(f"error: {judge_preview.PACK / 'config' / 'staging.json'}: ")


@pytest.mark.pure
def test_the_summary_names_steps_and_findings_and_no_value():
    """The comment shows ops, types, names and the pack's messages: no property value (a secret is never in the
    digest; the program's other values stay out of the comment too)."""
    plan = _hostile(load_balancer)
    secret_like = "hf_NOTINTHECOMMENTabcdefghijklmnopqrstuvwx"
    next(r for r in plan.resources if r["name"] == "exposed")["inputs"]["metadata"]["annotations"] = {
        "note": secret_like
    }
    document = json.loads(written(digest(plan)))
    with analyzer.conversions_remembered():
        verdict = judge_preview.judge(
            document, "prod", analyzer.policy_config_file("prod"), stack_file=_stack_file("prod")
        )
    text = judge_preview.summary(verdict)
    assert secret_like not in text
    assert "create               kubernetes:core/v1:Service::exposed" in text
    # A name cannot close the code block it is shown in.
    document["steps"][-1]["urn"] = document["steps"][-1]["newState"]["urn"] = (
        "urn:pulumi:prod::tpu-rl::kubernetes:core/v1:Service::a````b"
    )
    with analyzer.conversions_remembered():
        text = judge_preview.summary(
            judge_preview.judge(document, "prod", analyzer.policy_config_file("prod"), stack_file=_stack_file("prod"))
        )
    assert "\n`````\n" in text


@pytest.mark.pure
def test_the_judge_reads_nothing_outside_the_pack_and_core():
    """The import contract "the policy pack reads the pure layer only" (pyproject.toml) holds for it too, and it runs
    on the pack's lock: no package the lock lacks."""
    import ast

    imported = set()
    for node in ast.walk(ast.parse((ROOT / "policy" / "judge_preview.py").read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            imported.add(str(node.module).split(".")[0])
    assert imported - set(sys.stdlib_module_names) == {"core", "google", "pulumi", "tpu_rl_policies", "yaml"}
    lock = (ROOT / "policy" / "requirements.lock").read_text()
    assert "\npyyaml==" in lock and "\nprotobuf==" in lock and "\npulumi==" in lock and "\npulumi-policy==" in lock


# ---------------------------------------------------------------------------------------------
# The workflow's step, in bash


WORKFLOW = yaml.safe_load((ROOT / ".github" / "workflows" / "preview.yml").read_text())
STEPS = WORKFLOW["jobs"]["preview"]["steps"]
TRUSTED = "/var/lib/tpu-rl-preview"


def _judge_step(tmp_path: Path, stack: str) -> tuple[Path, Path, dict[str, str]]:
    """The judge's step as the runner runs it: its script with the trusted folder in ``tmp_path`` (the pack copied,
    its venv's python the test's, ``end-branch-processes`` a stand-in that notes when it ran)."""
    (step,) = [s for s in STEPS if "judge_preview.py" in str(s.get("run", ""))]
    trusted = tmp_path / "trusted"
    pack, env = _pack_copy(trusted)
    log = tmp_path / "order.log"
    python = pack / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(
        f'#!/usr/bin/bash\necho judged >> {log}\nPYTHONPATH={env["PYTHONPATH"]} exec {sys.executable} "$@"\n'
    )
    python.chmod(0o755)
    (trusted / "end-branch-processes").write_text(f"echo ended >> {log}\n")
    script = tmp_path / "step.sh"
    script.write_text(str(step["run"]).replace("${{ matrix.stack }}", stack).replace(TRUSTED, str(trusted)))
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    (trusted / "base").mkdir()
    (trusted / "base" / f"Pulumi.{stack}.yaml").write_text(_stack_file(stack))  # the setup step copied the base's
    shell = WORKFLOW["jobs"]["preview"]["defaults"]["run"]["shell"].replace(" {0}", "").split()
    return temp, log, {"argv": " ".join([*shell, str(script)]), "RUNNER_TEMP": str(temp)}


def _run_step(how: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "RUNNER_TEMP": how["RUNNER_TEMP"]}
    return subprocess.run(how["argv"].split(), capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.slow
def test_the_workflows_judge_step_ends_the_branch_first_and_fails_the_job_on_a_mandatory_finding(tmp_path):
    """The step's own script, in bash with the job's shell options: ``end-branch-processes`` runs before the judge
    reads the digest, a clean preview passes, a mandatory finding or a digest the preview did not finish fails the
    step (the job), and the comment's summary is written either way."""
    temp, log, how = _judge_step(tmp_path, "prod")
    digest_file = temp / "preview.json"

    digest_file.write_text(written(digest(pure_plan("prod"))))
    passed = _run_step(how)
    assert passed.returncode == 0, passed.stderr
    assert log.read_text() == "ended\njudged\n"
    assert "no mandatory finding" in (temp / "verdict.md").read_text()

    digest_file.write_text(written(digest(_hostile(load_balancer))))
    failed = _run_step(how)
    assert failed.returncode == 1
    assert "mandatory: no-exposed-services: kubernetes:core/v1:Service::exposed:" in failed.stdout
    assert "3 mandatory findings" in (temp / "verdict.md").read_text()

    digest_file.write_text(written(digest(pure_plan("prod")))[:-200])  # the CLI ended before its last bytes
    cut = _run_step(how)
    assert cut.returncode == 2 and cut.stderr.startswith(f"error: {digest_file}: not JSON")
    assert (temp / "verdict.md").read_text().startswith("**No verdict on the prod preview**")
    assert log.read_text() == "ended\njudged\n" * 3


@pytest.mark.pure
def test_the_stack_file_is_sent_as_the_engine_sends_it():
    """Key -> text, an object as its JSON, a ``secure:`` value only named as a secret key (the judge never holds it);
    what is not a stack file is bad input."""
    text = "config:\n  gcp:project: p\n  tpu-rl:model:\n    revision: abc\n  tpu-rl:hfToken:\n    secure: v1:x\n"
    assert judge_preview.stack_settings(text) == (
        {"gcp:project": "p", "tpu-rl:model": '{"revision": "abc"}'},
        ["tpu-rl:hfToken"],
    )
    assert judge_preview.stack_settings("") == ({}, [])
    for bad, said in (("- a\n", "not a mapping"), ("config: [1]\n", "config is not a mapping"), ("a: [", "not YAML")):
        with pytest.raises(judge_preview.BadInputError, match=said):
            judge_preview.stack_settings(bad)


def test_the_closed_world_s_names_come_from_the_stack_file():
    """The dev stack names its cluster: judged without its stack file, the pack reads the defaults and its Namespace's
    labels are not the program's; with it, they are."""
    document = digest(pure_plan("dev"))
    config = analyzer.policy_config_file("dev")
    without = judge_preview.judge(document, "dev", config).mandatory
    assert [f.policy for f in without] == ["closed-world-shapes"] * 2, without
    assert judge_preview.judge(document, "dev", config, stack_file=_stack_file("dev")).mandatory == []


def test_a_branch_that_renames_the_stacks_cluster_is_judged_against_the_bases_names():
    """The workflow hands the judge the base's stack file: the names the branch's stack file would make the stack's
    own (its cluster's, its accounts') are judged against the base's, so editing the stack file widens nothing."""
    renamed = digest(pure_plan("dev", "tpu-rl:clusterName=tpu-rl-prod"))
    config = analyzer.policy_config_file("dev")
    document = yaml.safe_load(_stack_file("dev"))
    document["config"]["tpu-rl:clusterName"] = "tpu-rl-prod"
    as_the_branch_says = judge_preview.judge(renamed, "dev", config, stack_file=yaml.safe_dump(document)).mandatory
    assert as_the_branch_says == []
    against_the_base = judge_preview.judge(renamed, "dev", config, stack_file=_stack_file("dev")).mandatory
    policies = {f.policy for f in against_the_base}
    assert policies == {"closed-world", "closed-world-shapes", "own-names", "secret-holders", "step-pods"}
