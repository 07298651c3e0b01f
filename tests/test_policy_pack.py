"""The policy pack runs for real: its virtualenv is built from policy/requirements.lock by the same make target
the PR workflow uses, and the engine's command starts it and answers the analyzer's gRPC calls."""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import threading
import tomllib

import grpc
import pytest
import yaml
from google.protobuf import empty_pb2
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version
from pulumi.runtime.proto import analyzer_pb2_grpc

from tools.stack_files import ROOT

POLICY = ROOT / "policy"


def test_the_pack_declares_its_own_virtualenv_and_requirements():
    config = yaml.safe_load((POLICY / "PulumiPolicy.yaml").read_text())
    assert config["runtime"] == {"name": "python", "options": {"virtualenv": "venv"}}
    groups = tomllib.loads((ROOT / "pyproject.toml").read_text())["dependency-groups"]
    assert [Requirement(r).name for r in groups["policy"]] == ["pulumi-policy"], "it brings pulumi (requirements.txt's)"
    preview = yaml.safe_load((ROOT / ".github/workflows/preview.yml").read_text())
    runs = [step.get("run", "") for step in preview["jobs"]["preview"]["steps"]]
    assert any("--require-hashes --no-deps -r policy/requirements.lock" in run for run in runs), (
        "the PR workflow installs the pack's environment from its lock"
    )


LOCK_COMMAND = (
    "uv pip compile --universal --generate-hashes --python-version 3.11 --group policy --constraint requirements.lock "
    "--output-file policy/requirements.lock pyproject.toml"
)
HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")


def _lock() -> dict[str, tuple[str, list[str]]]:
    """The lock's entries: name -> (version, hashes), as pip --require-hashes reads them."""
    text = re.sub(r"\\\n", " ", (POLICY / "requirements.lock").read_text())
    entries: dict[str, tuple[str, list[str]]] = {}
    for line in text.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        if not line:
            continue
        spec, *options = re.split(r"\s+(?=--)", line)
        requirement = Requirement(spec)
        assert len(requirement.specifier) == 1, spec
        (pin,) = requirement.specifier
        assert pin.operator == "==", spec
        assert options and all(HASH.fullmatch(o) for o in options), f"{spec}: every file by its sha256"
        entries[canonicalize_name(requirement.name)] = (pin.version, options)
    return entries


def test_the_pack_lock_pins_every_package_with_hashes():
    """policy/requirements.lock is what the PR workflow installs with --require-hashes: each package pinned with its
    hashes, at versions pyproject.toml's group `policy` and tpu-rl-core's dependencies allow; core/ itself is the
    checkout's (left out: it has no file to hash), so nothing of it is an editable or path line."""
    text = (POLICY / "requirements.lock").read_text()
    assert LOCK_COMMAND in text.splitlines()[1], "regenerate it with the command of its header (uv 0.13.8)"
    assert not [line for line in text.splitlines() if line.startswith(("-e", "-r", "--", "file:", "."))]
    pins = _lock()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    ranges = [Requirement(d) for d in [*project["dependency-groups"]["policy"], *project["project"]["dependencies"]]]
    for requirement in ranges:
        name = canonicalize_name(requirement.name)
        assert name in pins, name
        assert requirement.specifier.contains(pins[name][0], prereleases=True), (name, pins[name][0])
    # The build backend of `pip install --no-build-isolation --no-index .` (tpu-rl-core's setuptools>=70).
    assert Version(pins["setuptools"][0]) >= Version("70")
    assert "tpu-rl-core" not in pins


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


@pytest.mark.slow  # builds the pack's own venv (make policy-venv) and starts it
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
    stdout, stderr = process.stdout, process.stderr
    assert stdout is not None and stderr is not None  # both piped
    try:
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(60)
        assert line and line[0].strip().isdigit(), stderr.read() if process.poll() is not None else line
        with grpc.insecure_channel(f"127.0.0.1:{line[0].strip()}") as channel:
            stub = analyzer_pb2_grpc.AnalyzerStub(channel)
            info = stub.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
            from policy.tpu_rl_policies import POLICIES

            assert info.name == "tpu-rl-guardrails"
            assert {p.name for p in info.policies} == {p.name for p in POLICIES}
            _judges_as_the_engine_asks(stub)
    finally:
        process.kill()
        process.wait(10)


def _judges_as_the_engine_asks(stub: analyzer_pb2_grpc.AnalyzerStub) -> None:
    """The pack process, asked as the engine asks (``ConfigureStack`` with ``dry_run``, ``Configure`` with the prod
    policy config, ``Analyze`` with the properties as Structs): the prod stack's training JobSet passes; its image not
    known is advisory at a preview and a mandatory finding at `pulumi up`."""
    from pulumi.runtime.proto import analyzer_pb2
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

    from policy import judge_preview
    from policy.tpu_rl_policies import POLICIES
    from tests import analyzer
    from tests.pure_plan import pure_plan

    train = next(r for r in pure_plan("prod").resources if r["type"].endswith(":JobSet") and "-train-" in r["name"])
    unknown = copy.deepcopy(train)
    head = unknown["inputs"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    head["containers"][0]["image"] = UNKNOWN_STRING_VALUE
    configure = judge_preview.configure_request(judge_preview.reconciled(POLICIES, analyzer.policy_config_file("prod")))
    stub.Configure(configure, timeout=30)

    def analyze(resource: dict, dry_run: bool) -> list[tuple[str, int]]:
        stub.ConfigureStack(analyzer_pb2.AnalyzerStackConfigureRequest(stack="prod", dry_run=dry_run), timeout=30)
        request = analyzer_pb2.AnalyzeRequest(
            type=resource["type"], properties=judge_preview.properties(resource["inputs"]), urn="urn:x", name="train"
        )
        reply = stub.Analyze(request, timeout=60)
        return [(d.policyName, d.enforcementLevel) for d in reply.diagnostics]

    assert analyze(train, False) == []
    assert ("pinned-images", analyzer_pb2.ADVISORY) in analyze(unknown, True)
    assert not [d for d in analyze(unknown, True) if d[1] == analyzer_pb2.MANDATORY]
    assert ("pinned-images", analyzer_pb2.MANDATORY) in analyze(unknown, False)
