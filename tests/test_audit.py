"""`make audit` (tools/audit.py) against the loopback IAM, Cloud KMS, Cloud Storage and Resource Manager of
tests/fake_iam.py (project, ring, key, bucket and service-account policies, inherited as IAM inherits them, and the
roles' contents through ``roles.get``) and the loopback Kubernetes API (tests/fake_kube.py) holding the cluster's
RBAC: prod in a project of its own has no finding; each way in, one line; conditions evaluated where they can be and
named where they cannot; an unreachable cluster, a refused read, a hanging or flooding server, each one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from core.deadline import Budget
from tests.fake_iam import (
    deployer_roles,
    gke_defaults,
    grant,
    lay_out_state,
    policed_apis,
    role_binding,
    serve_rbac,
)
from tests.fake_kube import fake_cluster
from tests.loopback import LoopbackServer, QuietHandler
from tests.stack_homes import access_lines, cli_file, repo
from tools import audit
from tools.audit_reads import Endpoints, Reads

PROJECT = "acme-tpu-prod"
OPS = "user:ops@acme.example"


def account(name: str, project: str = PROJECT) -> str:
    return f"serviceAccount:{name}@{project}.iam.gserviceaccount.com"


DEPLOY, PREVIEW = account("deploy-prod"), account("preview-prod")
BUCKET = f"{PROJECT}-pulumi-state-prod"
RING = f"projects/{PROJECT}/locations/global/keyRings/pulumi-state-prod"
KEY = f"{RING}/cryptoKeys/state"
ARTIFACTS = f"{PROJECT}-tpu-rl-prod"
CONTEXT = f"gke_{PROJECT}_us-east5_tpu-rl-prod"
ROOMY = Budget(30.0, 10.0, 10.0, "a test's")
"""Every read's budget but where running out is the point (a stalled host must not end a read that gets its answer)."""


def stack_file(
    project: str = PROJECT,
    *,
    protect: bool = True,
    shared: bool = False,
    check: bool = True,
    members: tuple[str, ...] = (OPS, DEPLOY),
    readers: tuple[str, ...] = (PREVIEW,),
    pool: str = "",
) -> str:
    """Prod's stack file as the CLI writes it, its home and key recorded, its operator and deploy account its
    ``tpu-rl:access`` members and its preview account its reader."""
    config = {"tpu-rl:stateBackend": f"gs://{BUCKET}", **({"tpu-rl:sharedProject": '"true"'} if shared else {})}
    text = cli_file(project=project, provider=f"gcpkms://{KEY}", protect=protect, config=config)
    text = text.replace("tpu-rl:clusterName: tpu-rl-dev", "tpu-rl:clusterName: tpu-rl-prod") + access_lines(
        members, readers, pool
    )
    return text if check else text.replace("  tpu-rl:workflow:\n", "  tpu-rl:workflow:\n    capacityCheck: false\n")


@pytest.fixture
def world():
    """Prod in a project of its own, as its set-up leaves it: the operator owns the project, the deploy account holds
    the deployer's roles there, the preview account the viewer's; the state as `make state-bucket STACK=prod
    MEMBERS=<ops>,<deploy> READERS=<preview>` leaves it."""
    with policed_apis(PROJECT) as fake:
        lay_out_state(fake, PROJECT, BUCKET, KEY, (OPS, DEPLOY), (PREVIEW,))
        grant(fake.project_policies, PROJECT, "roles/owner", OPS)
        for role in deployer_roles():
            grant(fake.project_policies, PROJECT, role, DEPLOY)
        grant(fake.project_policies, PROJECT, "roles/viewer", PREVIEW)
        yield fake


@pytest.fixture
def cluster(monkeypatch, tmp_path):
    """Prod's cluster with GKE's own bindings and the operator's, and a kubeconfig naming it as get-credentials does."""
    serve_rbac(monkeypatch)
    with fake_cluster() as served:
        for obj in [*gke_defaults(), role_binding("ops-admin", "cluster-admin", [("User", "ops@acme.example")])]:
            served.put(obj)
        path = tmp_path / "kubeconfig"
        path.write_text(yaml.safe_dump(served.kubeconfig(context=CONTEXT)))
        served.kubeconfig_path = path  # type: ignore[attr-defined]
        yield served


def run(
    fake: Any, root: Path, capsys, *argv: str, kubeconfig: Path | None = None, **reads: Any
) -> tuple[int, list[str], list[str]]:
    from google.auth.credentials import AnonymousCredentials

    credentials = reads.pop("credentials", AnonymousCredentials())
    made = Reads(credentials=credentials, endpoints=Endpoints.at(fake.url), budget=reads.pop("budget", ROOMY))
    kube = ["--kubeconfig", str(kubeconfig or root / "no-kubeconfig")]
    code = audit.main(["--stack", "prod", "--root", str(root), *kube, *argv], reads=made)
    out, err = capsys.readouterr()
    return code, out.splitlines(), err.splitlines()


def test_prod_in_a_project_of_its_own_has_no_finding(world, cluster, tmp_path, capsys):
    root = repo(tmp_path, prod=stack_file())
    code, out, err = run(world, root, capsys, kubeconfig=cluster.kubeconfig_path)
    assert (code, out, err) == (0, ["access audit of stack prod: nothing outside its own list (docs/audit.md)"], []), (
        out,
        err,
    )


def test_a_token_endpoint_that_does_not_answer_is_a_failure_a_retry_may_cure_not_a_fault_of_ours(
    world, tmp_path, capsys
):
    """Google credentials whose token URI is a closed loopback port: google-auth's TransportError, on every read, is
    each read's line and exit 1, not an internal error (70)."""
    import socket

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from google.oauth2 import service_account

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    info = {"client_email": "ops@acme.iam.gserviceaccount.com", "private_key": key.decode(), "private_key_id": "k"}
    credentials = service_account.Credentials.from_service_account_info(
        {**info, "token_uri": f"http://127.0.0.1:{closed}/token", "type": "service_account"}
    )
    code, out, err = run(world, repo(tmp_path, prod=stack_file()), capsys, credentials=credentials)
    assert code == 1 and out[-1].startswith("access audit of stack prod: incomplete"), (out, err)
    assert err[0] == (
        f"error: cannot read project {PROJECT}: cannot reach the token endpoint of the Google credentials "
        "(ConnectionError): check the network or a proxy, or retry later"
    )
    assert not [line for line in err if "internal error" in line]


def test_each_way_in_is_one_line_naming_the_member_what_it_can_do_and_the_grant(world, cluster, tmp_path, capsys):
    grant(world.ring_policies, RING, "roles/cloudkms.cryptoKeyDecrypter", "user:mallory@acme.example")
    grant(world.project_policies, PROJECT, "roles/storage.objectViewer", "group:data@acme.example")
    grant(
        world.account_policies,
        DEPLOY.split(":")[1],
        "roles/iam.serviceAccountTokenCreator",
        account("ci", "other-proj"),
    )
    grant(world.project_policies, PROJECT, "roles/container.developer", "user:eve@acme.example")
    later = 'request.time < timestamp("2030-01-01T00:00:00Z")'
    grant(world.project_policies, PROJECT, "roles/container.admin", "user:carol@acme.example", later)
    not_state = f'!resource.name.startsWith("projects/_/buckets/{BUCKET}")'
    grant(world.project_policies, PROJECT, "roles/storage.admin", "user:dan@acme.example", not_state)
    cluster.put(role_binding("eve2", "cluster-admin", [("User", "eve2@acme.example"), ("Group", "system:masters")]))
    root = repo(tmp_path, prod=stack_file())
    code, out, err = run(world, root, capsys, kubeconfig=cluster.kubeconfig_path)
    assert code == 1 and err == []
    assert out[:-1] == [
        f"finding: group:data@acme.example can read or write stack prod's state (roles/storage.objectViewer on project "
        f"{PROJECT})",
        f"finding: user:mallory@acme.example can decrypt stack prod's state key (roles/cloudkms.cryptoKeyDecrypter on "
        f"key ring {RING})",
        f"finding: user:eve@acme.example can administer cluster tpu-rl-prod (roles/container.developer on project "
        f"{PROJECT})",
        f"finding: user:carol@acme.example can administer cluster tpu-rl-prod (roles/container.admin on project "
        f"{PROJECT}, conditional, not evaluated: {later})",
        f"finding: {account('ci', 'other-proj')} can mint tokens of deploy-prod@{PROJECT}.iam.gserviceaccount.com "
        f"(roles/iam.serviceAccountTokenCreator on the account deploy-prod@{PROJECT}.iam.gserviceaccount.com)",
        "finding: user:eve2@acme.example can administer cluster tpu-rl-prod (RBAC: ClusterRoleBinding eve2 binds "
        "ClusterRole cluster-admin)",
    ], "dan's condition leaves the state bucket out (and the artifacts bucket does not exist yet)"
    assert out[-1] == "access audit of stack prod: 6 finding(s) (docs/audit.md)"


DEPLOY_EMAIL, PREVIEW_EMAIL = DEPLOY.split(":")[1], PREVIEW.split(":")[1]
EQUAL_PATHS = [
    ("iam.serviceAccountKeys.create", f"mint tokens of {DEPLOY_EMAIL} and {PREVIEW_EMAIL}"),
    ("iam.serviceAccountKeys.upload", f"mint tokens of {DEPLOY_EMAIL} and {PREVIEW_EMAIL}"),
    ("container.configMaps.update", "administer cluster tpu-rl-prod"),
    ("container.thirdPartyObjects.create", "administer cluster tpu-rl-prod"),
    ("container.thirdPartyObjects.update", "administer cluster tpu-rl-prod"),
    ("container.jobs.create", "administer cluster tpu-rl-prod"),
    ("container.cronJobs.create", "administer cluster tpu-rl-prod"),
    ("container.deployments.create", "administer cluster tpu-rl-prod"),
    ("container.daemonSets.create", "administer cluster tpu-rl-prod"),
    ("container.statefulSets.update", "administer cluster tpu-rl-prod"),
    ("container.replicaSets.create", "administer cluster tpu-rl-prod"),
    ("container.replicationControllers.create", "administer cluster tpu-rl-prod"),
    ("container.serviceAccounts.createToken", "administer cluster tpu-rl-prod"),
    ("container.pods.attach", "administer cluster tpu-rl-prod"),
    ("container.pods.update", "administer cluster tpu-rl-prod"),
    ("container.mutatingWebhookConfigurations.create", "administer cluster tpu-rl-prod"),
    ("container.roles.escalate", "administer cluster tpu-rl-prod"),
]
"""A permission that reaches an account or the cluster as surely as the ones named first, and what the audit says it
lets its holder do (a key signs as its account until it is deleted; the steps' scripts are in ConfigMaps and the steps
are JobSets, custom resources; any workload runs a pod as its namespace's accounts)."""


@pytest.mark.parametrize(("permission", "can"), EQUAL_PATHS, ids=[p for p, _ in EQUAL_PATHS])
def test_every_equal_path_to_an_account_or_the_cluster_is_named(world, tmp_path, capsys, permission, can):
    role = f"projects/{PROJECT}/roles/only"
    world.custom_roles[role] = (permission,)
    grant(world.project_policies, PROJECT, role, "user:eve@acme.example")
    code, out, _ = run(world, repo(tmp_path, prod=stack_file()), capsys)
    assert (code, out[:-1]) == (1, [f"finding: user:eve@acme.example can {can} ({role} on project {PROJECT})"])


DEV_PROJECT = "acme-tpu-dev"
DEPLOY_DEV = account("deploy-dev", DEV_PROJECT)


def pool_in(fake: Any, project: str, number: str) -> str:
    """A Workload Identity pool ``github`` in ``project`` (of ``number``), with no binding of its own."""
    fake.numbers[project] = number
    fake.project_policies.setdefault(project, [])
    pool = f"projects/{number}/locations/global/workloadIdentityPools/github"
    fake.pool_policies[pool] = []
    return pool


def test_a_pool_in_another_stacks_project_is_one_line(world, tmp_path, capsys):
    """dev's deploy account administers dev's project, the pool's providers there among it: prod's CI principals
    would be whoever dev's deploy identity says. Compared by the pool project's id, which projects.get of its number
    names (the other stack files name their projects by id)."""
    pool = pool_in(world, DEV_PROJECT, "200000000002")
    for role in deployer_roles():
        grant(world.project_policies, DEV_PROJECT, role, DEPLOY_DEV)
    dev = cli_file(project=DEV_PROJECT)
    root = repo(tmp_path, prod=stack_file(pool=pool), dev=dev)
    code, out, _ = run(world, root, capsys)
    assert code == 1
    assert out[0] == (
        "finding: stack prod's Workload Identity pool is in project 200000000002 (acme-tpu-dev), which stack dev uses: "
        f"dev's deploy identity can rewrite it; put prod's pool in prod's project ({PROJECT}) and name it in "
        "tpu-rl:access.workloadIdentityPool (docs/guardrails.md#guardrails-and-pr-review)"
    )
    assert out[1].startswith(f"finding: {DEPLOY_DEV} can rewrite the Workload Identity pool {pool} that stack prod's ")
    own = pool_in(world, PROJECT, world.numbers[PROJECT])
    root = repo(tmp_path, prod=stack_file(pool=own), dev=dev)
    assert run(world, root, capsys)[:2] == (
        0,
        ["access audit of stack prod: nothing outside its own list (docs/audit.md)"],
    )


def test_who_can_rewrite_the_stacks_pool_is_named_through_its_project_and_its_own_policy(world, tmp_path, capsys):
    pool = pool_in(world, PROJECT, world.numbers[PROJECT])
    grant(world.project_policies, PROJECT, "roles/iam.workloadIdentityPoolAdmin", DEPLOY_DEV)
    grant(world.pool_policies, pool, "roles/iam.workloadIdentityPoolAdmin", "user:eve@acme.example")
    code, out, _ = run(world, repo(tmp_path, prod=stack_file(pool=pool)), capsys)
    can = f"can rewrite the Workload Identity pool {pool} that stack prod's CI principals come from"
    assert (code, out[:-1]) == (
        1,
        [
            f"finding: {DEPLOY_DEV} {can} (roles/iam.workloadIdentityPoolAdmin on project {PROJECT})",
            f"finding: user:eve@acme.example {can} (roles/iam.workloadIdentityPoolAdmin on the pool {pool})",
        ],
    )


def test_a_grant_on_the_projects_folder_or_organization_reaches_down(world, tmp_path, capsys):
    from tests.fake_iam import as_member, binding

    world.parents.update({PROJECT: "folders/9", "folders/9": "organizations/1"})
    world.node_policies["folders/9"] = [binding("roles/cloudkms.cryptoKeyDecrypter", "user:x@acme.example")]
    world.node_policies["organizations/1"] = [binding("roles/container.admin", "group:org-admins@acme.example")]
    _, owner = as_member(world, None)
    sealed = owner.encrypt(name=KEY, plaintext=b"data key").ciphertext
    _, kms = as_member(world, "user:x@acme.example")
    assert kms.decrypt(name=KEY, ciphertext=sealed).plaintext == b"data key", "the fake inherits it too"
    code, out, _ = run(world, repo(tmp_path, prod=stack_file()), capsys)
    assert code == 1
    assert out[:-1] == [
        "finding: user:x@acme.example can decrypt stack prod's state key (roles/cloudkms.cryptoKeyDecrypter on "
        "folder 9)",
        "finding: group:org-admins@acme.example can administer cluster tpu-rl-prod (roles/container.admin on "
        "organization 1)",
    ]


def test_a_convenience_member_is_every_holder_of_its_basic_role(world, tmp_path, capsys):
    world.bucket_policies[BUCKET].append({"role": "roles/storage.legacyObjectReader", "members": ["projectViewer:9"]})
    grant(world.project_policies, PROJECT, "roles/viewer", "user:intern@acme.example")
    code, out, _ = run(world, repo(tmp_path, prod=stack_file()), capsys)
    assert code == 1
    assert out[0] == (
        f"finding: user:intern@acme.example can read or write stack prod's state (roles/storage.legacyObjectReader "
        f"on gs://{BUCKET})"
    ), "the project's viewers, the preview account among them, read the state; the owner and preview are its own"
    assert len(out) == 2


def test_set_iam_on_the_rings_buckets_and_accounts_is_named(world, tmp_path, capsys):
    from tests.fake_compute import bucket as bucket_reply

    world.buckets[ARTIFACTS] = bucket_reply(ARTIFACTS)
    world.bucket_policies[ARTIFACTS] = []
    grant(world.project_policies, PROJECT, "roles/cloudkms.admin", "user:kms@acme.example")
    grant(world.bucket_policies, ARTIFACTS, "roles/storage.admin", "user:data@acme.example")
    grant(world.project_policies, PROJECT, "roles/iam.serviceAccountAdmin", "user:iam@acme.example")
    code, out, _ = run(world, repo(tmp_path, prod=stack_file()), capsys)
    assert code == 1
    assert out[:-1] == [
        f"finding: user:kms@acme.example can set IAM on key ring {RING} and the key {KEY} "
        f"(roles/cloudkms.admin on project {PROJECT})",
        f"finding: user:data@acme.example can set IAM on gs://{ARTIFACTS} (roles/storage.admin on gs://{ARTIFACTS})",
        f"finding: user:iam@acme.example can set IAM on the account deploy-prod@{PROJECT}.iam.gserviceaccount.com and "
        f"the account preview-prod@{PROJECT}.iam.gserviceaccount.com (roles/iam.serviceAccountAdmin on "
        f"project {PROJECT})",
    ]


def test_members_named_as_the_stacks_own_are_not_findings(world, tmp_path, capsys):
    grant(world.account_policies, DEPLOY.split(":")[1], "roles/iam.workloadIdentityUser", "principalSet://gh/repo/1")
    root = repo(tmp_path, prod=stack_file())
    code, out, _ = run(world, root, capsys)
    assert code == 1 and out[0].startswith("finding: principalSet://gh/repo/1 can mint tokens of deploy-prod@")
    code, out, _ = run(world, root, capsys, "--members", "principalSet://gh/repo/1")
    assert code == 0
    declared = repo(tmp_path, prod=stack_file(members=(OPS, DEPLOY, "principalSet://gh/repo/1")))
    assert run(world, declared, capsys)[:2] == (
        0,
        ["access audit of stack prod: nothing outside its own list (docs/audit.md)"],
    )


def test_a_member_granted_on_the_state_who_is_not_the_stacks_own_is_a_finding(world, tmp_path, capsys):
    """The own list is never read from the state bucket's or key's policy: a member granted there, by a self-grant
    of whoever can set the bucket's policy or by `make state-bucket` without being recorded, is named."""
    grant(world.bucket_policies, BUCKET, "roles/storage.objectViewer", "user:mallory@acme.example")
    grant(world.key_policies, KEY, "roles/cloudkms.cryptoKeyDecrypter", "user:mallory@acme.example")
    code, out, _ = run(world, repo(tmp_path, prod=stack_file()), capsys)
    assert code == 1
    assert out[:-1] == [
        f"finding: user:mallory@acme.example can read or write stack prod's state (roles/storage.objectViewer on "
        f"gs://{BUCKET})",
        f"finding: user:mallory@acme.example can decrypt stack prod's state key (roles/cloudkms.cryptoKeyDecrypter on "
        f"the key {KEY})",
    ]
    code, out, _ = run(world, repo(tmp_path, prod=stack_file(members=(OPS,))), capsys)
    assert code == 1 and {line.split(" can ")[0] for line in out[:-1]} == {
        f"finding: {DEPLOY}",
        "finding: user:mallory@acme.example",
    }, "the deploy account the state grants, not named in tpu-rl:access, is not the stack's own"


def test_the_programs_workload_identity_members_are_the_stacks_own(world, tmp_path, capsys):
    """Each CPU step's account grants roles/iam.workloadIdentityUser to its Kubernetes service account's member
    (infra/gcp/cluster.py): the stack's own, as the program makes it; another namespace's is not."""
    email = f"tpu-rl-prod-export@{PROJECT}.iam.gserviceaccount.com"
    world.account_policies[email] = []
    own = f"serviceAccount:{PROJECT}.svc.id.goog[tpu-rl/tpu-rl-prod-export]"
    grant(world.account_policies, email, "roles/iam.workloadIdentityUser", own)
    root = repo(tmp_path, prod=stack_file())
    assert run(world, root, capsys)[0] == 0
    other = f"serviceAccount:{PROJECT}.svc.id.goog[other/tpu-rl-prod-export]"
    grant(world.account_policies, email, "roles/iam.workloadIdentityUser", other)
    code, out, _ = run(world, root, capsys)
    assert (code, out[:-1]) == (
        1,
        [
            f"finding: {other} can mint tokens of {email} (roles/iam.workloadIdentityUser on the account {email})",
        ],
    )


def test_an_unreachable_cluster_is_one_line_and_the_rest_goes_on(world, cluster, tmp_path, capsys):
    cluster.stop()
    grant(world.ring_policies, RING, "roles/cloudkms.cryptoKeyDecrypter", "user:mallory@acme.example")
    code, out, err = run(world, repo(tmp_path, prod=stack_file()), capsys, kubeconfig=cluster.kubeconfig_path)
    assert code == 1 and out[0].startswith("finding: user:mallory@acme.example can decrypt")
    (line,) = err
    assert line.startswith("warning: cannot read the cluster's RBAC: cannot reach the cluster at 127.0.0.1:")
    assert line.endswith("; the rest of the audit went on")


def test_a_refused_read_is_one_line_and_exit_1(world, tmp_path, capsys):
    from google.oauth2.credentials import Credentials

    code, out, err = run(world, repo(tmp_path, prod=stack_file()), capsys, credentials=Credentials(token=PREVIEW))
    assert code == 1
    assert f"error: cannot read gs://{BUCKET}: permission denied (HTTP 403)" in err
    assert all(line.startswith(("error: cannot read", "warning: cannot read the cluster")) for line in err), err
    assert out[-1].startswith("access audit of stack prod: incomplete, ")


class _Hostile(QuietHandler):
    mode = "hang"

    def do_GET(self) -> None:  # noqa: N802
        self._answer()

    def do_POST(self) -> None:  # noqa: N802
        self._answer()

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not self.misbehave(self.mode, drips=40, pause=0.05):
            self.send_body(200, json.dumps({"bindings": [], "pad": "x" * (5 * 1024 * 1024)}).encode())


@pytest.mark.parametrize(
    "mode", [pytest.param("hang", marks=pytest.mark.slow), pytest.param("drip", marks=pytest.mark.slow), "flood"]
)  # hanging and dripping wait on the wall for their budget: the slow tier, with the other hostile servers
def test_a_hanging_dripping_or_flooding_server_is_one_line_within_the_budget(tmp_path, capsys, mode):
    import time

    handler = type("Handler", (_Hostile,), {"mode": mode})
    server = LoopbackServer(("127.0.0.1", 0), handler).start()
    fake = type("Fake", (), {"url": f"http://127.0.0.1:{server.server_address[1]}"})()
    started = time.monotonic()
    try:
        code, _, err = run(fake, repo(tmp_path, prod=stack_file()), capsys, budget=Budget(0.3, 0.15, 0.15))
    finally:
        server.shutdown()
        server.server_close()
    assert code == 1 and time.monotonic() - started < 4.0
    line = next(line for line in err if line.startswith("error:"))  # not a lingering server thread's traceback
    assert line.startswith(f"error: cannot read project {PROJECT}: "), line
    assert (
        ("replied more than 4 MiB" in line) if mode == "flood" else ("no answer within" in line or "no usable" in line)
    )


# ---------------------------------------------------------------------------------------------
# Before `make up`


class NoReads:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"read {name}")


def test_before_up_an_unprotected_stack_reads_nothing(tmp_path, capsys):
    root = repo(tmp_path, prod=stack_file(protect=False))
    assert audit.main(["--stack", "prod", "--root", str(root), "--before-up"], reads=NoReads()) == 0
    assert capsys.readouterr() == ("", "")


def test_before_up_a_protected_stack_without_checks_against_the_world_says_it_skipped(tmp_path, capsys):
    root = repo(tmp_path, prod=stack_file(check=False))
    assert audit.main(["--stack", "prod", "--root", str(root), "--before-up"], reads=NoReads()) == 0
    assert capsys.readouterr().out == "access audit of stack prod skipped: tpu-rl:workflow.capacityCheck is false\n"


def test_before_up_a_finding_stops_unless_accepted(world, tmp_path, capsys):
    grant(world.ring_policies, RING, "roles/cloudkms.cryptoKeyDecrypter", "user:mallory@acme.example")
    root = repo(tmp_path, prod=stack_file())
    code, out, err = run(world, root, capsys, "--before-up")
    assert code == 1 and out == []
    assert err[0].startswith("warning: cannot read the cluster's RBAC: ")
    assert err[1].startswith("finding: user:mallory@acme.example can decrypt stack prod's state key")
    assert err[2] == (
        "error: stack prod's access audit found 1 grant(s) to members outside its own list (above): remove them, or "
        "name a member as the stack's own (docs/audit.md); to go on past them: make up STACK=prod ACCEPT=audit"
    )
    code, out, err = run(world, root, capsys, "--before-up", "--accept", "maintenance,audit")
    assert code == 0 and err[1].startswith("warning: user:mallory@acme.example can decrypt")
    assert err[2] == "warning: going on past 1 finding(s) of stack prod's access audit (ACCEPT=audit)"


def test_before_up_an_unknown_accept_word_is_bad_input(tmp_path, capsys):
    root = repo(tmp_path, prod=stack_file())
    assert (
        audit.main(["--stack", "prod", "--root", str(root), "--before-up", "--accept", "audits"], reads=NoReads()) == 2
    )
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: TPU_RL_ACCEPT (make up's ACCEPT=): 'audits' is not something `up` can be told")


def test_a_project_another_stack_file_names_is_refused_before_any_read(tmp_path, capsys):
    dev = stack_file(protect=False).replace("tpu-rl:clusterName: tpu-rl-prod", "tpu-rl:clusterName: tpu-rl-dev")
    root = repo(tmp_path, prod=stack_file(), dev=dev)
    assert audit.main(["--stack", "prod", "--root", str(root)], reads=NoReads()) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: stacks prod and dev both name project {PROJECT}: in one project prod's deploy")
    assert line.endswith("(Pulumi.prod.yaml and Pulumi.dev.yaml do not)")


# ---------------------------------------------------------------------------------------------
# The make targets


def make_n(*argv: str) -> list[str]:
    import os
    import shutil
    import subprocess

    from tests.fake_pulumi import CLEAN
    from tools.stack_files import ROOT

    command = [shutil.which("make") or "make", "--no-print-directory", "-n", "-o", ".venv/.installed"]
    command += ["-o", "policy/venv/.installed", *argv]
    environment = {k: v for k, v in os.environ.items() if k not in CLEAN}
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True, env=environment)
    return done.stdout.splitlines()


def test_make_audit_runs_the_audit_with_the_stacks_own_members():
    assert make_n("audit", "STACK=prod", "MEMBERS=user:a@x.example", "READERS=group:r@x.example")[-1] == (
        ".venv/bin/python -m tools.audit --stack 'prod'  --members 'user:a@x.example' --readers 'group:r@x.example'"
    )


def test_make_up_runs_the_audit_after_the_lock_check_and_before_anything_else():
    recipe = " ".join(make_n("up", "STACK=prod", "ACCEPT=audit"))
    assert "pulumi up --stack prod" in recipe
    audit_at = recipe.index(".venv/bin/python -m tools.audit --stack 'prod' --before-up --accept 'audit'")
    assert recipe.index("tools.state locks") < audit_at < recipe.index("tools.state releases")
    assert recipe[audit_at:].split(";", 1)[0].endswith("|| exit $?")
