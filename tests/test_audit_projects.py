"""One Google project per stack unless both stack files accept sharing one (core/config/projects.py): the stack files
read from a checkout with limits, and the program's preflight refusing before anything is registered."""

from __future__ import annotations

import pulumi
import pytest

from tests.conftest import SENTINEL_TOKEN
from tests.stack_homes import cli_file, repo
from tools.plan import plan_stack

pytestmark = pytest.mark.slow

PROJECT = "acme-tpu"


def text(stack: str, *, shared: bool = False, project: str = PROJECT) -> str:
    config = {"tpu-rl:sharedProject": '"true"'} if shared else {}
    return cli_file(project=project, config=config).replace("tpu-rl-dev", f"tpu-rl-{stack}")


@pytest.mark.pure
def test_the_other_stack_files_are_read_as_written_and_an_unreadable_one_is_no_ones(tmp_path):
    from core.config.projects import stack_configs

    root = repo(tmp_path, dev=text("dev"), prod=text("prod", shared=True), bad="config: [", empty="")
    (root / "Pulumi.yaml").write_text("name: tpu-rl\n")
    (root / "Pulumi.a b.yaml").write_text("config: {gcp:project: acme-tpu}\n")
    found = stack_configs(root, "dev")
    assert sorted(found) == ["prod"]
    assert found["prod"]["gcp:project"] == PROJECT and found["prod"]["tpu-rl:sharedProject"] == "true"


def _up(root, stack: str, monkeypatch):
    """The program as in `pulumi up` (preflight on, nothing live), its stack files in ``root``."""
    monkeypatch.setattr("program.stack.STACK_FILES", root)
    return plan_stack(
        root / f"Pulumi.{stack}.yaml",
        ["tpu-rl:workflow.preflight=false"],
        stack=stack,
        preflight=True,
        secrets={"tpu-rl:hfToken": SENTINEL_TOKEN},
        raise_errors=False,
    )[0]


def test_the_program_refuses_a_shared_project_before_anything_is_registered(tmp_path, monkeypatch):
    root = repo(tmp_path, dev=text("dev"), prod=text("prod"))
    plan = _up(root, "dev", monkeypatch)
    assert isinstance(plan.error, pulumi.RunError) and plan.resources == []
    (line,) = str(plan.error).splitlines()
    assert line.startswith(f"preflight: stacks dev and prod both name project {PROJECT}: in one project dev's deploy")
    assert line.endswith("(Pulumi.dev.yaml and Pulumi.prod.yaml do not)")


def test_the_program_goes_on_when_both_accept_it_or_the_projects_differ(tmp_path, monkeypatch):
    root = repo(tmp_path, dev=text("dev", shared=True), prod=text("prod", shared=True))
    assert _up(root, "dev", monkeypatch).error is None
    (tmp_path / "apart").mkdir()
    root = repo(tmp_path / "apart", dev=text("dev"), prod=text("prod", project="acme-tpu-prod"))
    assert _up(root, "dev", monkeypatch).error is None
