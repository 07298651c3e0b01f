"""The PR preview is judged by the base branch's policy pack and policy config, installed from hashes, never by the
pull request's own (docs/security.md "Guardrails and PR review"): a branch that weakens a policy is still judged by
the old one.

The last test builds the two trees the workflow has, the branch at the workspace root and the base commit where the
workflow checks it out, weakens the branch's pack (a policy edited to do nothing, its config level ``disabled``),
and runs the pack the workflow's paths name, as the Pulumi CLI runs a pack (its folder on ``sys.path``, ``core``
from the base checkout), against a captured plan: the finding survives.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.pure_plan import pure_plan
from tools.stack_files import ROOT

WORKFLOW = yaml.safe_load((ROOT / ".github" / "workflows" / "preview.yml").read_text())
STEPS: list[dict[str, Any]] = WORKFLOW["jobs"]["preview"]["steps"]
BASE_SHA = "${{ github.event.pull_request.base.sha }}"
STACK = "${{ matrix.stack }}"


def _index(predicate) -> int:
    return next(i for i, s in enumerate(STEPS) if predicate(s))


def _uses(step: dict[str, Any], action: str) -> bool:
    return str(step.get("uses", "")).startswith(f"{action}@")


PR_CHECKOUT = _index(lambda s: _uses(s, "actions/checkout") and "ref" not in (s.get("with") or {}))
BASE_CHECKOUT = _index(lambda s: _uses(s, "actions/checkout") and (s.get("with") or {}).get("ref") == BASE_SHA)
BASE = STEPS[BASE_CHECKOUT]["with"]["path"]
INSTALL = _index(lambda s: "requirements.lock" in str(s.get("run", "")))
PREVIEW = _index(lambda s: _uses(s, "pulumi/actions"))


@pytest.mark.pure
def test_the_base_commit_is_checked_out_beside_the_branch():
    base = STEPS[BASE_CHECKOUT]["with"]
    assert base == {"ref": BASE_SHA, "path": "base", "persist-credentials": False}
    assert STEPS[PR_CHECKOUT]["with"] == {"persist-credentials": False}
    assert PR_CHECKOUT < BASE_CHECKOUT, "the base checkout replaces a base/ folder the branch may bring"


@pytest.mark.pure
def test_the_preview_reads_the_base_pack_and_its_config():
    pulumi = STEPS[PREVIEW]["with"]
    assert pulumi["policyPacks"] == f"{BASE}/policy"
    assert pulumi["policyPackConfigs"] == f"{BASE}/policy/config/{STACK}.json"
    assert pulumi.get("work-dir", "./") in ("./", "."), "the paths are the workspace's (the branch's root)"
    for stack in WORKFLOW["jobs"]["preview"]["strategy"]["matrix"]["stack"]:
        assert (ROOT / "policy" / "config" / f"{stack}.json").exists()


@pytest.mark.pure
def test_the_base_pack_is_installed_from_hashes_before_any_of_the_branchs_code():
    install = STEPS[INSTALL]
    assert install["working-directory"] == BASE
    lines = [line.strip() for line in install["run"].strip().splitlines()]
    pips = [line for line in lines if " pip install " in line]
    assert lines[0] == "python -m venv policy/venv", "PulumiPolicy.yaml's virtualenv, inside the base pack"
    assert yaml.safe_load((ROOT / "policy" / "PulumiPolicy.yaml").read_text())["runtime"]["options"] == {
        "virtualenv": "venv"
    }
    assert pips[0].endswith("--require-hashes --no-deps -r policy/requirements.lock")
    # core/ from the base checkout: nothing fetched, nothing resolved.
    assert pips[1].endswith("--no-deps --no-build-isolation --no-index .")
    assert len(pips) == 2 and all(line.startswith("policy/venv/bin/python -m pip install") for line in pips)
    branch_code = _index(lambda s: "make" in str(s.get("run", "")).split())
    assert BASE_CHECKOUT < INSTALL < branch_code < PREVIEW
    assert STEPS[branch_code].get("working-directory") is None, "the branch's Makefile, in the branch"


@pytest.mark.pure
def test_no_step_before_the_preview_has_a_secret():
    for step in STEPS[:PREVIEW]:
        assert "secrets." not in yaml.safe_dump(step), step
        assert "env" not in step, step
    assert set(STEPS[PREVIEW]["env"]) == {"PULUMI_ACCESS_TOKEN", "PULUMI_CONFIG_PASSPHRASE"}
    assert "env" not in WORKFLOW and "env" not in WORKFLOW["jobs"]["preview"]


def _tree(where: Path) -> None:
    """The pack and the pure layer of this checkout, as a checkout of them has them."""
    for folder in ("policy", "core"):
        shutil.copytree(ROOT / folder, where / folder, ignore=shutil.ignore_patterns("venv", "__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", where / "pyproject.toml")


def _weaken(tree: Path) -> None:
    """What a branch could do to the pack that reviews it: the policy edited to return at once, and its level
    ``disabled`` in the stack's config."""
    module = tree / "policy" / "tpu_rl_policies.py"
    text = module.read_text()
    head = "def _least_privilege_pods(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:\n"
    assert head in text
    module.write_text(text.replace(head, head + "    return\n", 1))
    config = tree / "policy" / "config" / "prod.json"
    entries = json.loads(config.read_text())
    entries["least-privilege-pods"] = "disabled"
    config.write_text(json.dumps(entries))


RUN_PACK = r"""
import copy, json, sys
import pulumi_policy
from pulumi_policy import PolicyCustomTimeouts, PolicyResourceOptions, ResourceValidationArgs
from pulumi_policy.proxy import unknown_checking_proxy

import tpu_rl_policies  # as the CLI runs the pack's __main__.py: the pack's folder is on sys.path
import core

plan, config_path, name = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
config = json.load(open(config_path))
entry = config.get(name, config.get("all"))
level = entry["enforcementLevel"] if isinstance(entry, dict) else entry
policy = next(p for p in tpu_rl_policies.POLICIES if p.name == name)
found = []
if level != "disabled":  # the CLI does not run a disabled policy
    for r in plan:
        options = PolicyResourceOptions(
            protect=False, ignore_changes=[], delete_before_replace=False, aliases=[],
            custom_timeouts=PolicyCustomTimeouts(0, 0, 0), additional_secret_outputs=[], parent=None,
        )
        args = ResourceValidationArgs(
            r["type"], unknown_checking_proxy(copy.deepcopy(r["inputs"])), "urn", r["name"], options, None, {}
        )
        policy.validate(args, lambda message, urn=None: found.append(message))
print(json.dumps({"level": level, "found": found, "pack": tpu_rl_policies.__file__, "core": core.__file__}))
"""


def _judge(workspace: Path, plan_file: Path, stack: str, pack: str, config: str, core_root: Path) -> dict[str, Any]:
    """The pack at ``pack`` (a path of the workspace), with the config at ``config``, on the plan."""
    pack_dir = workspace / pack
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.pathsep.join([str(pack_dir), str(core_root)]),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            RUN_PACK,
            str(plan_file),
            str(workspace / config.replace(STACK, stack)),
            "least-privilege-pods",
        ],
        cwd=pack_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
def test_a_branch_that_weakens_a_policy_is_still_judged_by_the_base_one(tmp_path):
    workspace = tmp_path / "workspace"  # the branch, checked out at the workspace's root
    workspace.mkdir()
    _tree(workspace)
    _weaken(workspace)
    _tree(workspace / BASE)  # the base commit, where the workflow checks it out
    plan = copy.deepcopy(pure_plan("prod"))
    train = next(r for r in plan.resources if r["name"].startswith("gemma4-26b-train-"))
    head = train["inputs"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    head["containers"][0]["securityContext"] = {"privileged": True}  # what the branch's plan asks for
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan.resources))
    pulumi = STEPS[PREVIEW]["with"]
    core_root = workspace / STEPS[INSTALL]["working-directory"]  # `pip install .` there: the base's core/

    judged = _judge(workspace, plan_file, "prod", pulumi["policyPacks"], pulumi["policyPackConfigs"], core_root)
    assert judged["level"] == "mandatory"
    assert judged["found"] == [
        "container workload-container is privileged: root on the node, with the Hugging Face token and a bucket "
        "identity; no Pathways or MaxText container needs it"
    ]
    assert Path(judged["pack"]).is_relative_to(workspace / BASE) and Path(judged["core"]).is_relative_to(core_root)

    # The branch's own pack and config would have let it through: the weakening is real.
    own = _judge(workspace, plan_file, "prod", "policy", f"policy/config/{STACK}.json", workspace)
    assert own["level"] == "disabled" and own["found"] == []
    forced = json.loads((workspace / "policy" / "config" / "prod.json").read_text())
    forced["least-privilege-pods"] = "mandatory"
    (workspace / "policy" / "config" / "prod.json").write_text(json.dumps(forced))
    assert _judge(workspace, plan_file, "prod", "policy", f"policy/config/{STACK}.json", workspace)["found"] == []
