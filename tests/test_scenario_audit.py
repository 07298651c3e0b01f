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
from typing import Any

import pytest

from core.state_names import state_key
from tests.conftest import SENTINEL_TOKEN
from tests.fake_iam import deployer_roles, grant, lay_out_state, policed_apis
from tests.plan_iam import lay_out_plan
from tests.stack_homes import access_lines
from tools.plan import plan_stack
from tools.plan.offline import Plan
from tools.stack_files import ROOT

PROD, DEV = "acme-tpu-prod", "acme-tpu-dev"
NUMBERS = {PROD: "100000000001", DEV: "200000000002"}
OPS = "user:ops@acme.example"
BUCKET = f"{PROD}-pulumi-state-prod"
KEY = state_key(PROD, "prod")
ENCRYPTED_KEY = "CiQAiRhdlQ7ogTYJFm9rET0XjWwP05Af8jmhoJXyD5OVZQz5OAsSSQCO2yJKaySKHpJOj9CuLhqUkqMwXxiMthCQD540f66IbcZQ="


def account(name: str, project: str = PROD) -> str:
    return f"serviceAccount:{name}@{project}.iam.gserviceaccount.com"


def pool(project: str) -> str:
    return f"projects/{NUMBERS[project]}/locations/global/workloadIdentityPools/github"


def principal_set(project: str, environment: str) -> str:
    """The CI environment's principalSet of the pool in ``project`` (docs/guardrails.md, one-time setup)."""
    return f"principalSet://iam.googleapis.com/{pool(project)}/attribute.environment/{environment}"


DEPLOY, PREVIEW, DEPLOY_DEV = account("deploy-prod"), account("preview-prod"), account("deploy-dev", DEV)


def ci(project: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Prod's members and readers as the docs have them: the operator, deploy-prod and its two environments'
    principalSets; preview-prod and its environment's (of the pool in ``project``)."""
    members = (OPS, DEPLOY, principal_set(project, "deploy-prod"), principal_set(project, "deploy-prod-continued"))
    return members, (PREVIEW, principal_set(project, "preview-prod"))


def prod_file(pool_project: str = PROD) -> str:
    """The example prod stack file in project acme-tpu-prod as its set-up leaves it: `pulumi stack init` wrote the
    secrets provider, `make state-bucket` and `make stack` the home and ``tpu-rl:access``."""
    text = (ROOT / "Pulumi.prod.yaml").read_text().replace("my-tpu-prod-project", PROD)
    members, readers = ci(pool_project)
    text += f"  tpu-rl:stateBackend: gs://{BUCKET}\n" + access_lines(members, readers, pool(pool_project))
    return f"secretsprovider: gcpkms://{KEY}\nencryptedkey: {ENCRYPTED_KEY}\n{text}"


_CHECKOUTS = tempfile.TemporaryDirectory(prefix="tpu-rl-scenario-audit-")


def checkout(folder: Path, **texts: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    for stack, text in texts.items():
        (folder / f"Pulumi.{stack}.yaml").write_text(text)
    return folder


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
        fake.numbers.update(NUMBERS)
        lay_out_plan(fake, planned())
        members, readers = ci(pool_project)
        lay_out_state(fake, PROD, BUCKET, KEY, members, readers)
        grant(fake.project_policies, PROD, "roles/owner", OPS)
        for role in deployer_roles():
            grant(fake.project_policies, PROD, role, DEPLOY)
            grant(fake.project_policies, DEV, role, DEPLOY_DEV)
        for role in ("roles/viewer", "roles/iam.securityReviewer", "roles/container.clusterViewer"):
            grant(fake.project_policies, PROD, role, PREVIEW)
        for principal in members[2:]:
            grant(fake.account_policies, DEPLOY.split(":")[1], "roles/iam.workloadIdentityUser", principal)
        grant(fake.account_policies, PREVIEW.split(":")[1], "roles/iam.workloadIdentityUser", readers[1])
        fake.project_policies.setdefault(pool_project, [])
        fake.pool_policies[pool(pool_project)] = []
        yield fake


def make_up(fake: Any, root: Path, capsys) -> tuple[int, list[str], list[str]]:
    """`make up STACK=prod`'s access audit (no ACCEPT), as the operator, without a reachable cluster."""
    from google.auth.credentials import AnonymousCredentials

    from tools import audit
    from tools.audit_reads import Endpoints, Reads

    reads = Reads(credentials=AnonymousCredentials(), endpoints=Endpoints.at(fake.url))
    argv = ["--stack", "prod", "--root", str(root), "--kubeconfig", str(root / "none"), "--before-up"]
    code = audit.main(argv, reads=reads)
    out, err = capsys.readouterr()
    return code, out.splitlines(), [line for line in err.splitlines() if "cluster's RBAC" not in line]


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
    assert make_up(cloud, root, capsys) == (
        0,
        ["access audit of stack prod: no member outside its own list reaches it"],
        [],
    )


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
