"""Prod in a project of its own, as its set-up leaves it (docs/guardrails.md one-time setup, docs/permissions.md "The CI
accounts, per stack"): its stack file (`pulumi stack init` wrote the secrets provider, `make state-bucket` and `make
stack` the home and ``tpu-rl:access``), the CI set-up and the state laid out in the loopback IAM of
``tests/fake_iam.py`` (the deploy and preview accounts with their project roles, each bound to its environments'
principalSets of a Workload Identity pool), and the access audit as `make up` and `make audit` run it
(``tools/audit.py``). What the program's own `up` adds to that IAM comes from its plan (``tests/plan_iam.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.state_names import state_key
from tests.fake_iam import deployer_roles, grant, lay_out_state
from tests.stack_homes import access_lines
from tools.stack_files import ROOT

PROD, DEV = "acme-tpu-prod", "acme-tpu-dev"
NUMBERS = {PROD: "100000000001", DEV: "200000000002"}
OPS = "user:ops@acme.example"
BUCKET = f"{PROD}-pulumi-state-prod"
KEY = state_key(PROD, "prod")
AUDITED_BEFORE_UP = "access audit of stack prod: no member outside its own list reaches it"
"""What `make up`'s access audit of prod says when it finds nothing (``tools/audit.py`` ``_report``)."""
AUDITED = "access audit of stack prod: nothing outside its own list (docs/audit.md)"
"""What `make audit STACK=prod` says when it finds nothing and read everything."""
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


def checkout(folder: Path, **texts: str) -> Path:
    """A repository holding Pulumi.yaml and each ``stack=text``'s stack file."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    for stack, text in texts.items():
        (folder / f"Pulumi.{stack}.yaml").write_text(text)
    return folder


def set_up_ci(fake: Any, pool_project: str = PROD) -> None:
    """In ``fake`` (``tests.fake_iam.PolicedApis``): prod's state as `make state-bucket` leaves it, the operator
    owning prod's project, deploy-prod (and deploy-dev in dev's project) holding the deployer's roles, preview-prod
    the viewer's, each account bound to its environments' principalSets of the pool in ``pool_project``."""
    fake.numbers.update(NUMBERS)
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


def audit(
    fake: Any, root: Path, capsys: Any, *, before_up: bool, kubeconfig: Path | None = None
) -> tuple[int, list[str], list[str]]:
    """The access audit of stack prod as the operator runs it (``tools.audit.main``): `make up`'s (``before_up``, no
    ACCEPT) or `make audit`'s, reading the cluster through ``kubeconfig`` (None: no reachable cluster, whose line is
    left out of stderr); its exit code and its lines on stdout and stderr."""
    from google.auth.credentials import AnonymousCredentials

    from tools import audit as audit_cli
    from tools.audit_reads import Endpoints, Reads

    reads = Reads(credentials=AnonymousCredentials(), endpoints=Endpoints.at(fake.url))
    argv = ["--stack", "prod", "--root", str(root), "--kubeconfig", str(kubeconfig or root / "none")]
    code = audit_cli.main([*argv, *(["--before-up"] if before_up else [])], reads=reads)
    out, err = capsys.readouterr()
    errors = err.splitlines()
    if kubeconfig is None:
        errors = [line for line in errors if "cluster's RBAC" not in line]
    return code, out.splitlines(), errors
