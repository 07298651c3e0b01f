"""Prod's second `make up`, after its first, with CI set up as the docs say: the access audit `make up` runs first
(``tools/audit.py --before-up``) against the loopback IAM of ``tests/fake_iam.py`` holding what the first `up` made,
laid out from the real program's plan of the very stack file the audit reads (``tests/plan_iam.py``), the CI set-up
of docs/guardrails.md and docs/permissions.md "The CI accounts, per stack" (the deploy and preview accounts with
their project roles, each bound to its environments' principalSets of a Workload Identity pool in prod's own
project), and the state as `make state-bucket` leaves it, the stack file declaring ``tpu-rl:access`` as those pages
say:

- the stack's own (the program's accounts and Workload Identity members, the operator, the CI accounts and their
  principalSets) reach what they reach, and `up` goes on without ``ACCEPT=audit``;
- an outsider granted on the state bucket (a grant of whoever may set its policy, itself included) stops it;
- a pool in dev's project, where dev's deploy account administers it, stops it in one line;
- dev's deploy account holding the pool admin's role on prod's project stops it.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import pytest

from tests.conftest import SENTINEL_TOKEN
from tests.fake_iam import grant, policed_apis
from tests.plan_iam import lay_out_plan
from tests.prod_set_up import (
    AUDITED_BEFORE_UP,
    BUCKET,
    DEPLOY_DEV,
    DEV,
    NUMBERS,
    PROD,
    audit,
    checkout,
    pool,
    prod_file,
    set_up_ci,
)
from tools.plan import plan_stack
from tools.plan.offline import Plan
from tools.stack_files import ROOT

pytestmark = pytest.mark.slow

_CHECKOUTS = tempfile.TemporaryDirectory(prefix="tpu-rl-scenario-audit-")


@functools.cache
def planned() -> Plan:
    """The real program's plan of ``prod_file()`` (what its first `up` creates), once per process."""
    folder = checkout(Path(tempfile.mkdtemp(dir=_CHECKOUTS.name)), prod=prod_file())
    plan, _ = plan_stack(folder / "Pulumi.prod.yaml", stack="prod", secrets={"tpu-rl:hfToken": SENTINEL_TOKEN})
    assert plan.error is None, plan.error
    return plan


@pytest.fixture
def cloud(request):
    """Prod's project after its first `up` (module docstring), and dev's project beside it, each with its own
    deploy account; the pool prod's CI principals come from in prod's project (``request.param``: the project)."""
    pool_project = getattr(request, "param", PROD)
    with policed_apis(PROD) as fake:
        lay_out_plan(fake, planned())
        set_up_ci(fake, pool_project)
        yield fake


def make_up(fake, root: Path, capsys) -> tuple[int, list[str], list[str]]:
    """`make up STACK=prod`'s access audit (no ACCEPT), as the operator, without a reachable cluster."""
    return audit(fake, root, capsys, before_up=True)


def test_a_second_up_with_ci_set_up_as_the_docs_say_goes_on(cloud, tmp_path, capsys):
    steps = ("convert", "export", "publish")
    for step in steps:
        email = f"tpu-rl-prod-{step}@{PROD}.iam.gserviceaccount.com"
        assert cloud.account_policies[email] == [
            {
                "role": "roles/iam.workloadIdentityUser",
                "members": [f"serviceAccount:{PROD}.svc.id.goog[tpu-rl/tpu-rl-prod-{step}]"],
            }
        ], "the plan's Workload Identity bindings are laid out"
    root = checkout(tmp_path / "repo", prod=prod_file())
    assert make_up(cloud, root, capsys) == (0, [AUDITED_BEFORE_UP], [])


def test_an_outsiders_grant_on_the_state_bucket_stops_up(cloud, tmp_path, capsys):
    grant(cloud.bucket_policies, BUCKET, "roles/storage.objectViewer", "user:mallory@acme.example")
    code, out, err = make_up(cloud, checkout(tmp_path / "repo", prod=prod_file()), capsys)
    assert (code, out) == (1, [])
    assert err[0] == (
        "finding: user:mallory@acme.example can read or write stack prod's state (roles/storage.objectViewer on "
        f"gs://{BUCKET})"
    )
    assert len(err) == 2 and err[1].startswith("error: stack prod's access audit found 1 grant(s)")


@pytest.mark.parametrize("cloud", [DEV], indirect=True)
def test_a_pool_in_devs_project_stops_up_in_one_line(cloud, tmp_path, capsys):
    dev = (ROOT / "Pulumi.dev.yaml").read_text().replace("my-tpu-dev-project", DEV)
    root = checkout(tmp_path / "repo", prod=prod_file(pool_project=DEV), dev=dev)
    code, out, err = make_up(cloud, root, capsys)
    assert (code, out) == (1, [])
    assert err[0] == (
        f"finding: stack prod's Workload Identity pool is in project {NUMBERS[DEV]} ({DEV}), which stack dev uses: "
        f"dev's deploy identity can rewrite it; put prod's pool in prod's project ({PROD}) and name it in "
        "tpu-rl:access.workloadIdentityPool (docs/guardrails.md#guardrails-and-pr-review)"
    )
    assert err[1] == (
        f"finding: {DEPLOY_DEV} can rewrite the Workload Identity pool {pool(DEV)} that stack prod's CI principals "
        f"come from (roles/resourcemanager.projectIamAdmin on project {DEV})"
    )


def test_deploy_dev_as_admin_of_prods_pool_stops_up(cloud, tmp_path, capsys):
    grant(cloud.project_policies, PROD, "roles/iam.workloadIdentityPoolAdmin", DEPLOY_DEV)
    code, out, err = make_up(cloud, checkout(tmp_path / "repo", prod=prod_file()), capsys)
    assert (code, out) == (1, [])
    assert err[0] == (
        f"finding: {DEPLOY_DEV} can rewrite the Workload Identity pool {pool(PROD)} that stack prod's CI principals "
        f"come from (roles/iam.workloadIdentityPoolAdmin on project {PROD})"
    )
