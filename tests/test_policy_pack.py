"""The policy pack runs for real: its virtualenv is built from policy/requirements.txt by the same make target
the PR workflow uses, and the engine's command starts it and answers the analyzer's gRPC calls."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading

import grpc
import pytest
import yaml
from google.protobuf import empty_pb2
from pulumi.runtime.proto import analyzer_pb2_grpc

from tools.stack_files import ROOT

POLICY = ROOT / "policy"


def test_the_pack_declares_its_own_virtualenv_and_requirements():
    config = yaml.safe_load((POLICY / "PulumiPolicy.yaml").read_text())
    assert config["runtime"] == {"name": "python", "options": {"virtualenv": "venv"}}
    requirements = (POLICY / "requirements.txt").read_text()
    assert "pulumi-policy" in requirements and "pulumi>=" in requirements
    preview = yaml.safe_load((ROOT / ".github/workflows/preview.yml").read_text())
    runs = [step.get("run", "") for step in preview["jobs"]["preview"]["steps"]]
    assert any("policy-venv" in run for run in runs), "the PR workflow builds the pack's environment"


@pytest.fixture(scope="module")
def policy_python():
    if not shutil.which("make"):
        pytest.skip("make is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    done = subprocess.run(
        ["make", "--no-print-directory", "policy-venv"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    return POLICY / "venv" / "bin" / "python"


def test_the_engine_can_start_the_pack_from_its_virtualenv(policy_python):
    """What the Python language host runs for a policy pack (sdk/python/cmd/pulumi-language-python, RunPlugin):
    `<venv>/bin/python -u -m pulumi.policy <engine> <pack dir>` in the pack's folder; it prints its port."""
    process = subprocess.Popen(
        [str(policy_python), "-u", "-m", "pulumi.policy", "127.0.0.1:1", str(POLICY)],
        cwd=POLICY,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        text=True,
    )
    try:
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(60)
        assert line and line[0].strip().isdigit(), process.stderr.read() if process.poll() is not None else line
        with grpc.insecure_channel(f"127.0.0.1:{line[0].strip()}") as channel:
            info = analyzer_pb2_grpc.AnalyzerStub(channel).GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
        from policy.tpu_rl_policies import POLICIES

        assert info.name == "tpu-rl-guardrails"
        assert {p.name for p in info.policies} == {p.name for p in POLICIES}
    finally:
        process.kill()
        process.wait(10)
