"""Pulumi.yaml declares every key with the defaults the code applies; the stack files are valid."""

from __future__ import annotations

import re

import yaml

from infra.config import (
    CPU_POOL_DEFAULTS,
    DEFAULT_IMAGES,
    DEFAULT_TIMEOUTS,
    PROJECT_KEYS,
    SYSTEM_POOL_DEFAULTS,
)
from infra.offline import ROOT, project_declarations
from workloads.knobs import KNOBS_BY_FIELD


def test_every_project_key_is_declared_with_a_description():
    declared = project_declarations()
    assert {k.split(":", 1)[1] for k in declared if k.startswith("tpu-rl:")} == set(PROJECT_KEYS)
    for key, decl in declared.items():
        assert decl.get("description"), key
        assert "default" in decl, f"{key} needs a default"


def test_declared_defaults_equal_code_defaults():
    d = {k.split(":", 1)[1]: v.get("default") for k, v in project_declarations().items()}
    assert d["clusterName"] == "tpu-rl" and d["authorizedNetworks"] == ["0.0.0.0/0"]
    assert d["tpu"] == {
        "version": "v6e",
        "machineType": "ct6e-standard-4t",
        "topology": "4x8",
        "slices": 1,
        "capacity": "reservation",
    }
    for name, defaults in (("systemPool", SYSTEM_POOL_DEFAULTS), ("cpuPool", CPU_POOL_DEFAULTS)):
        assert d[name] == {
            "machineType": defaults.machine_type,
            "minNodes": defaults.min_nodes,
            "maxNodes": defaults.max_nodes,
            "diskSizeGb": defaults.disk_size_gb,
        }
    assert d["images"] == DEFAULT_IMAGES
    assert d["workflow"]["timeouts"] == DEFAULT_TIMEOUTS
    assert d["workflow"]["enabled"] is True and d["workflow"]["maxRestarts"] == 0
    for field, value in d["training"].items():
        if field in KNOBS_BY_FIELD:
            assert KNOBS_BY_FIELD[field].default == value, field
    assert d["training"]["optimizer"] == "adafactor" and d["training"]["dataset"] == "openmathinstruct2"
    assert d["model"] == {"name": "gemma4-26b", "revision": "main"}


def test_runtime_is_python_with_pip_and_venv():
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    assert project["name"] == "tpu-rl"
    assert project["runtime"] == {"name": "python", "options": {"toolchain": "pip", "virtualenv": "venv"}}


def test_example_stacks_use_placeholders_and_no_secrets():
    for stack in ("dev", "prod"):
        text = (ROOT / f"Pulumi.{stack}.yaml").read_text()
        assert "secure:" not in text and not re.search(r"hf_[A-Za-z0-9]{20,}", text)
        config = yaml.safe_load(text)["config"]
        assert config["gcp:project"].startswith("my-tpu-")
    prod = yaml.safe_load((ROOT / "Pulumi.prod.yaml").read_text())["config"]
    assert prod["tpu-rl:protect"] is True and "0.0.0.0/0" not in prod["tpu-rl:authorizedNetworks"]


def test_pr_workflows_run_the_tests_and_the_policy_preview():
    tests = yaml.safe_load((ROOT / ".github/workflows/test.yml").read_text())
    assert any(step.get("run") == "make test" for step in tests["jobs"]["test"]["steps"])
    preview = yaml.safe_load((ROOT / ".github/workflows/preview.yml").read_text())
    job = preview["jobs"]["preview"]
    assert preview["permissions"]["id-token"] == "write", "Workload Identity Federation, no keys"
    assert job["strategy"]["matrix"]["stack"] == ["dev", "prod"]
    pulumi_step = next(s for s in job["steps"] if s.get("uses", "").startswith("pulumi/actions@"))
    assert pulumi_step["with"]["command"] == "preview" and pulumi_step["with"]["comment-on-pr"] is True
    assert pulumi_step["with"]["policyPacks"] == "policy"
    assert pulumi_step["with"]["policyPackConfigs"] == "policy/config/${{ matrix.stack }}.json"
    auth = next(s for s in job["steps"] if s.get("uses", "").startswith("google-github-actions/auth@"))
    assert "workload_identity_provider" in auth["with"] and "credentials_json" not in auth["with"]
    for stack in ("dev", "prod"):
        assert (ROOT / "policy" / "config" / f"{stack}.json").exists()
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_make_up_selects_a_stack_with_a_local_backend_fallback_and_runs_pulumi_up():
    import shutil
    import subprocess

    if not shutil.which("make"):
        import pytest

        pytest.skip("make is not installed")
    import os

    # Outside any parent make (CI runs the tests from `make test`).
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}

    def dry_run(*args: str) -> str:
        command = ["make", "--no-print-directory", "-n", *args]
        return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout

    out = dry_run("up", "STACK=dev")
    assert "pulumi whoami" in out and "pulumi login file://" in out
    assert "pulumi stack select dev 2>/dev/null || pulumi stack init dev" in out
    assert out.rstrip().splitlines()[-1] == "pulumi up --stack dev"
    test = dry_run("test")
    assert "ruff check" in test and "-m pytest" in test
