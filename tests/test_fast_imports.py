"""The offline plan's fast SDK loading: same resources, a fraction of the import time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from pulumi import _types as pulumi_types

from infra.plan import fast_imports
from infra.plan.stack_files import ROOT


@pytest.mark.pure
def test_typed_dicts_become_dict_subclasses_and_nothing_else_changes():
    source = (
        b"class NetworkParamsArgsDict(TypedDict):\n"
        b"    x: NotRequired[int]\n"
        b"class NetworkArgs:\n"
        b"    pass\n"
        b"    class Inner(TypedDict):\n"
        b"x = 'class Y(TypedDict):'\n"
    )
    assert fast_imports.sdk_source(source) == source.replace(
        b"class NetworkParamsArgsDict(TypedDict):", b"class NetworkParamsArgsDict(dict):", 1
    )


@pytest.mark.pure
def test_the_code_cache_is_written_whole_or_not_at_all(tmp_path):
    fast_imports._store(tmp_path / "cache" / "a.code", b"code")
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["a.code"]
    assert (tmp_path / "cache" / "a.code").read_bytes() == b"code"
    (tmp_path / "file").write_text("")
    fast_imports._store(tmp_path / "file" / "b.code", b"code")  # cannot create the folder: no cache, no error
    (tmp_path / "cache" / "c.code").mkdir()
    fast_imports._store(tmp_path / "cache" / "c.code", b"code")  # cannot replace: the temporary file goes
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["a.code", "c.code"]


def test_the_sdk_modules_are_compiled_lazily_and_still_typed():
    """In this session the offline plan has loaded pulumi_gcp through the fast loader."""
    import pulumi_gcp.compute

    network = pulumi_gcp.compute.Network  # through the light package shell
    inputs = sys.modules["pulumi_gcp.compute._inputs"]
    assert isinstance(inputs.__loader__, fast_imports._SdkLoader)
    assert issubclass(inputs.NetworkParamsArgsDict, dict)
    assert "pulumi_gcp.compute.address" not in sys.modules, "only the resource modules the program uses"
    # The Pulumi runtime reads the postponed annotations (get_type_hints): they still resolve.
    types = pulumi_types.input_type_types(sys.modules[network.__module__].NetworkArgs)
    assert "NetworkParamsArgs" in str(types["params"]) and "routingMode" in types
    cached = list(fast_imports.CACHE_DIR.glob("*.code"))
    assert cached, "the compiled SDK code is cached"


def test_python_m_infra_plan_is_fast_and_exits_with_the_plans_status(tmp_path):
    """Measured idle on 2 cores: about 1.8 s (the target is 2 s). The bound here is loose because
    the suite runs on both cores at once; losing the fast loading costs over 4 s idle."""
    env = {**os.environ, "TPU_RL_SHARED": "", "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "infra.plan", "--stack", "dev", "--out", str(tmp_path / "plan")]
    subprocess.run(command, cwd=ROOT, env=env, capture_output=True, check=True)  # warm the code cache
    start = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    elapsed = time.monotonic() - start
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "plan" / "plan.json").read_text())["stack"] == "dev"
    assert elapsed < 6.0
    bad = subprocess.run([*command[:-2], "--set", "tpu-rl:tpu.slices=0"], cwd=ROOT, env=env, capture_output=True)
    assert bad.returncode == 2 and bad.stderr.decode().count("\n") == 1
