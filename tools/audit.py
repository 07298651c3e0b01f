"""Who, outside a stack's own list, can reach its state, its key, its accounts or its cluster (docs/audit.md).

    python -m tools.audit --stack NAME [--members M] [--readers R] [--backend URL] [--kubeconfig F] [--context C]
    python -m tools.audit --stack NAME --before-up [--accept WORDS]      (what `make up` runs first)

Reads the IAM policies of the stack's project, of its state key's ring and key, of its state and artifact buckets, of
the project of each, of the stack's Secrets key ring and key, and of its accounts (``tools/audit_reads.py``), resolves
every role they bind to its permissions (IAM ``roles.get``, each role once a run), and names, one line each, every
member outside the stack's own list that holds, through any of them (a project's binding reaches every bucket, ring,
key and account in it; a ring's every key of it): decryption with its state key; read or write of its state; IAM
on the project, the rings, the keys, the buckets or the accounts; a token of one of its accounts; administration of
its cluster (GKE's project-level ``container.*`` permissions, and the cluster's RBAC: bindings to ``cluster-admin``,
``admin``, ``edit`` or a role that reads Secrets, read through the stack's kubeconfig); with
``tpu-rl:access.workloadIdentityPool``, a rewrite of that pool (its project's chain and its own policy), and one line
when the pool is in the project of another stack file of the checkout.

The stack's own list is what the program creates and what the stack's configuration declares, never read from a
policy (whoever can write one could name itself there): its node and step accounts and each step account's Kubernetes
service account's Workload Identity member (``infra.gcp.naming``, ``core.names.workload_member``), the members and
readers of ``tpu-rl:access``, and ``--members``/``--readers``. Google's service agents are not members one can act
as.

Exit 0: nothing found; 1: a finding, or a policy that could not be read (each one line); 2: bad input, a project
another stack file names too without both accepting it (``core.config.projects``). An unreachable cluster is one
line and the rest goes on. ``--before-up``: for a protected stack only (``tpu-rl:protect``; skipped with
``tpu-rl:workflow.capacityCheck: false``), a finding stops `make up` (exit 1) unless ``--accept`` holds ``audit``
(``ACCEPT=audit``: the lines become warnings); a read that fails is a warning there.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import BadInputError, TpuRlError
from core.names import PROJECT as PROJECT_KEY
from core.printed_commands import make_target
from core.redact import env_secrets, remember, scrub
from core.settings import Settings
from infra.client_errors import client_errors
from tools.audit_model import Binding, Node, Policy, Reach, Resource, Target, lines, rbac_reaches, reaches
from tools.audit_permissions import CLUSTER, DECRYPT, POOL, SET_IAM, STATE, TOKENS
from tools.process import entry_point, report
from tools.stack_files import ROOT

# google-api-core's notice about Python 3.11's end of life (2027) is not the operator's business (as tools/state.py).
warnings.filterwarnings("ignore", category=FutureWarning, module=r"google\.api_core\.")

HELP = "docs/audit.md"
MAX_DEPTH = 12
"""Folders nest at most 10 deep under an organization (https://cloud.google.com/resource-manager/docs/
creating-managing-folders)."""
ACCOUNT_PROJECT = re.compile(r"[^@]+@([a-z][a-z0-9-]{4,28}[a-z0-9])\.iam\.gserviceaccount\.com")
"""A user-managed service account's email names its project (https://cloud.google.com/iam/docs/service-accounts)."""


class AuditError(BadInputError):
    """The audit cannot start (one line, exit 2)."""


class AuditFailedError(TpuRlError):
    """The audit could not reach Google (no credentials: one line, exit 1)."""


def bucket_resource(bucket: str, name: str = "") -> Resource:
    if name:
        return Resource(
            f"projects/_/buckets/{bucket}/objects/{name}", "storage.googleapis.com/Object", "storage.googleapis.com"
        )
    return Resource(f"projects/_/buckets/{bucket}", "storage.googleapis.com/Bucket", "storage.googleapis.com")


def kms_resource(name: str) -> Resource:
    kind = "CryptoKey" if "/cryptoKeys/" in name else "KeyRing"
    return Resource(name, f"cloudkms.googleapis.com/{kind}", "cloudkms.googleapis.com")


def state_objects(stack: str, prefix: str) -> tuple[str, ...]:
    """Objects of a stack's state (pulumi/pulumi ``pkg/backend/diy``: the checkpoint, a lock, the history)."""
    from tools.state_locks import lock_prefix

    head = f"{prefix}/" if prefix else ""
    names = (f".pulumi/stacks/tpu-rl/{stack}.json", f"{lock_prefix(stack)}x.json", f".pulumi/history/tpu-rl/{stack}/x")
    return tuple(head + name for name in names)


@dataclass
class Audit:
    """One run's reads, in the order made: policies by resource, roles by name, what could not be read."""

    reads: Any
    project: str
    number: str = ""
    """The stack's project's number."""
    projects: dict[str, tuple[Binding, ...] | None] = field(default_factory=dict)
    """Project id (a number for another project's bucket) -> its policy (None: not read)."""
    chains: dict[str, tuple[Policy, ...]] = field(default_factory=dict)
    """Project -> its ancestors' policies and its own, outermost first."""
    ids: dict[str, str] = field(default_factory=dict)
    """Project (an id or a number) -> its id, as ``projects.get`` names it ("" when it could not be read)."""
    nodes: dict[str, tuple[Policy | None, str]] = field(default_factory=dict)
    """``folders/<id>``/``organizations/<id>`` -> its policy and its parent."""
    roles: dict[str, frozenset[str] | None] = field(default_factory=dict)
    unread: list[str] = field(default_factory=list)

    def read(self, call: Any) -> Any:
        """``call()``, or None with its line kept when it fails (None too: the resource does not exist yet)."""
        try:
            return call()
        except TpuRlError as err:
            self.unread.append(scrub(str(err), limit=500))
            return None

    def project_policy(self, project: str) -> tuple[Policy, ...]:
        """``project``'s policy and its ancestors', outermost first (an id or a number; the stack's own project under
        either, read once). A policy that could not be read is left out, its line kept."""
        key = self.project if self.number and project == self.number else project
        if key not in self.chains:
            found = self.read(lambda: self.reads.parent(f"projects/{key}")) or Node("", "")
            number, parent = found.number, found.parent
            self.ids[key] = found.project_id
            if key == self.project:
                self.number = number
            self.projects[key] = self.read(lambda: self.reads.node_policy(f"projects/{key}"))
            bindings = self.projects[key]
            own = () if bindings is None else (Policy(f"project {self.ids[key] or key}", bindings),)
            self.chains[key] = (*self.ancestors(parent), *own)
        return self.chains[key]

    def ancestors(self, parent: str) -> tuple[Policy, ...]:
        """The policies of a project's folders and organization, outermost first (each read once a run)."""
        found: list[Policy] = []
        for _ in range(MAX_DEPTH):
            if not parent:
                break
            if parent not in self.nodes:
                policy = self.read(lambda name=parent: self.reads.node_policy(name))
                up = self.read(lambda name=parent: self.reads.parent(name)) if parent.startswith("folders/") else None
                where = parent.replace("s/", " ", 1)
                self.nodes[parent] = (None if policy is None else Policy(where, policy), up.parent if up else "")
            policy, parent = self.nodes[parent]
            found += [policy] if policy else []
        return tuple(reversed(found))

    def own_project(self) -> tuple[Policy, ...]:
        """The stack's project's chain, and its number (a bucket names its project by number)."""
        return self.project_policy(self.project)

    def permissions(self, role: str) -> frozenset[str] | None:
        """The role's permissions, read once a run (None: could not be read; a role that does not exist holds
        nothing)."""
        if role not in self.roles:
            try:
                self.roles[role] = self.reads.role(role) or frozenset()
            except TpuRlError as err:
                self.unread.append(scrub(str(err), limit=500))
                self.roles[role] = None
        return self.roles[role]


def chain(*policies: Policy | tuple[Policy, ...] | None) -> tuple[Policy, ...]:
    """The policies given (a project's chain spread), outermost first, those not read left out."""
    found: list[Policy] = []
    for policy in policies:
        found += list(policy) if isinstance(policy, tuple) else [policy] if policy is not None else []
    return tuple(found)


def own_members(settings: Settings, explicit: tuple[str, ...]) -> set[str]:
    """The stack's own list (module docstring), lowercased: what the program creates, what ``tpu-rl:access`` names,
    and ``explicit`` (``--members``, ``--readers``)."""
    from core.names import workload_member
    from infra.gcp.naming import names_for

    names = names_for(settings)
    own = {m.lower() for m in (*explicit, *settings.access.members, *settings.access.readers)}
    own |= {f"serviceaccount:{a}@{settings.project}.iam.gserviceaccount.com" for a in names.service_accounts.values()}
    own |= {workload_member(settings.project, settings.namespace, ksa).lower() for ksa in names.ksas.values()}
    return own


def accounts_of(own: set[str]) -> list[str]:
    """The stack's accounts whose tokens matter: its node and step accounts and the own list's other user-managed
    service accounts (its deploy and preview accounts among them)."""
    emails = [m.split(":", 1)[1] for m in sorted(own) if m.startswith("serviceaccount:")]
    return [email for email in emails if ACCOUNT_PROJECT.fullmatch(email)]


def targets(audit: Audit, settings: Settings, home: Any, explicit: tuple[str, ...]) -> tuple[list[Target], set[str]]:
    """Every question of the audit, with the policies read for it, and the stack's own list."""
    project = audit.own_project()
    found: list[Target] = []
    if home.bucket:
        bucket_chain = _bucket(audit, home.bucket)
        objects = tuple(bucket_resource(home.bucket, n) for n in state_objects(settings.stack, home.prefix))
        found.append(Target(f"read or write stack {settings.stack}'s state", STATE, bucket_chain, objects))
        found.append(_set_iam("bucket", f"gs://{home.bucket}", bucket_chain, bucket_resource(home.bucket)))
    if home.key:
        found += _key(audit, home.key, f"decrypt stack {settings.stack}'s state key")
    own = own_members(settings, explicit)
    found.append(
        Target(f"set IAM on project {settings.project}", frozenset({SET_IAM["project"]}), chain(project), (), False)
    )
    found.append(Target(f"administer cluster {settings.cluster_name}", CLUSTER, chain(project), (), False))
    if settings.bucket_name:
        artifacts = _bucket(audit, settings.bucket_name)
        found.append(
            _set_iam("bucket", f"gs://{settings.bucket_name}", artifacts, bucket_resource(settings.bucket_name))
        )
    secrets = _secrets_key(settings)
    if secrets:
        found += _key(audit, secrets, "")
    for email in accounts_of(own):
        found += _account(audit, email)
    if settings.access.workload_identity_pool:
        found.append(_pool(audit, settings.access.workload_identity_pool, settings.stack))
    return found, own


def _pool(audit: Audit, pool: str, stack: str) -> Target:
    """Who can rewrite the stack's Workload Identity pool: through its project's chain, and the pool's own policy,
    which applies to it and its providers (IAM ``workloadIdentityPools.getIamPolicy``)."""
    project = audit.project_policy(pool.split("/")[1])
    bindings = audit.read(lambda: audit.reads.pool_policy(pool))
    own = None if bindings is None else Policy(f"the pool {pool}", bindings)
    can = f"rewrite the Workload Identity pool {pool} that stack {stack}'s CI principals come from"
    return Target(can, POOL, chain(project, own), (), False)


def pool_elsewhere(audit: Audit, settings: Settings, others: dict[str, dict[str, str]]) -> list[str]:
    """The line for a Workload Identity pool in the project of another stack file of the checkout: that stack's
    deploy account, with the project roles docs/permissions.md gives it, can rewrite the pool (none when the pool is
    in the stack's own project, or its project could not be read: that read's line is kept)."""
    pool = settings.access.workload_identity_pool
    number = pool.split("/")[1] if pool else ""
    project = audit.ids.get(audit.project if number == audit.number else number, "")
    if not project or project == settings.project:
        return []
    stack = settings.stack
    return [
        f"stack {stack}'s Workload Identity pool is in project {number} ({project}), which stack {other} uses: "
        f"{other}'s deploy identity can rewrite it; put {stack}'s pool in {stack}'s project ({settings.project}) and "
        f"name it in {PROJECT_KEY}:access.workloadIdentityPool (docs/guardrails.md#guardrails-and-pr-review)"
        for other, config in others.items()
        if config.get("gcp:project") == project
    ]


def _set_iam(kind: str, where: str, chained: tuple[Policy, ...], resource: Resource | None) -> Target:
    resources = (resource,) if resource else ()
    return Target(f"set IAM on {where}", frozenset({SET_IAM[kind]}), chained, resources, resource is not None)


def _bucket(audit: Audit, bucket: str) -> tuple[Policy, ...]:
    """The policies that apply to ``bucket``: its project's chain and its own (none when it does not exist)."""
    number = audit.read(lambda: audit.reads.bucket_project(bucket))
    if number is None:
        return ()
    bindings = audit.read(lambda: audit.reads.bucket_policy(bucket))
    policy = None if bindings is None else Policy(f"gs://{bucket}", bindings)
    return chain(audit.project_policy(number) if number else (), policy)


def _key(audit: Audit, key: str, decrypt: str) -> list[Target]:
    """The key's and its ring's targets (``decrypt``: the decryption target's words, none when "")."""
    ring = key.rsplit("/cryptoKeys/", 1)[0]
    project = audit.project_policy(key.split("/")[1])
    ring_bindings = audit.read(lambda: audit.reads.kms_policy(ring))
    ring_policy = None if ring_bindings is None else Policy(f"key ring {ring}", ring_bindings)
    key_bindings = audit.read(lambda: audit.reads.kms_policy(key)) if ring_bindings is not None else None
    key_policy = None if key_bindings is None else Policy(f"the key {key}", key_bindings)
    found = [_set_iam("ring", f"key ring {ring}", chain(project, ring_policy), kms_resource(ring))]
    if key_policy is not None:
        on_key = chain(project, ring_policy, key_policy)
        found.append(_set_iam("key", f"the key {key}", on_key, kms_resource(key)))
        if decrypt:
            found.insert(0, Target(decrypt, DECRYPT, on_key, (kms_resource(key),)))
    return found if ring_policy is not None else []


def _secrets_key(settings: Settings) -> str:
    """The stack's Secrets key (``tpu-rl:gke.secretsEncryptionKey``: the one it creates, or the one it names)."""
    from infra.gcp.naming import crypto_key_id, names_for

    if settings.gke.secrets_key == "create":
        names = names_for(settings)
        return crypto_key_id(settings.project, settings.region, names.key_ring, names.crypto_key)
    return settings.gke.secrets_key or ""


def _account(audit: Audit, email: str) -> list[Target]:
    bindings = audit.read(lambda: audit.reads.account_policy(email))
    if bindings is None:
        return []
    match = ACCOUNT_PROJECT.fullmatch(email)
    project = audit.project_policy(match.group(1)) if match else None
    on_account = chain(project, Policy(f"the account {email}", bindings))
    return [
        Target(f"mint tokens of {email}", TOKENS, on_account, (), False),
        _set_iam("account", f"the account {email}", on_account, None),
    ]


def basic_roles(audit: Audit) -> dict[str, tuple[str, ...]]:
    """The project's basic roles' holders (unconditioned), for Cloud Storage's convenience members."""
    bindings = audit.projects.get(audit.project) or ()
    held: dict[str, tuple[str, ...]] = {}
    for binding in bindings:
        if binding.role in ("roles/owner", "roles/editor", "roles/viewer") and not binding.condition:
            held[binding.role] = (*held.get(binding.role, ()), *binding.members)
    return held


def findings(audit: Audit, found: list[Target], own: set[str], stack: str) -> list[Reach]:
    frozen = frozenset(own)
    basic = basic_roles(audit)
    reached: list[Reach] = []
    unread: list[tuple[str, str]] = []
    for target in found:
        more, missing = reaches(target, audit.permissions, frozen, basic)
        reached += more
        unread += [m for m in missing if m not in unread]
    audit.unread += [
        f"what {role} holds on {where} is not known (its contents could not be read): run "
        f"`{make_target('audit', stack)}` again"
        for role, where in unread
    ]
    return reached


def cluster_reaches(
    settings: Settings, own: set[str], kubeconfig: Path | None, context: str | None
) -> tuple[list[Reach], str]:
    """The cluster's RBAC findings, or the line saying why it could not be read."""
    from infra.k8s import live
    from tools.audit_reads import RbacReader
    from tools.status import kubeconfig_for

    try:
        reader = RbacReader(kubeconfig_for(settings, kubeconfig, context))
    except TpuRlError as err:
        return [], f"cannot read the cluster's RBAC: {scrub(str(err), limit=300)}"
    try:
        roles: dict[tuple[str, str], Any] = {}
        for role in reader.rbac("clusterroles"):
            roles[("ClusterRole", str((role.get("metadata") or {}).get("name")))] = role.get("rules")
        for role in reader.rbac("roles", settings.namespace):
            roles[("Role", f"{settings.namespace}/{(role.get('metadata') or {}).get('name')}")] = role.get("rules")
        bound = [{**b, "kind": "ClusterRoleBinding"} for b in reader.rbac("clusterrolebindings")]
        bound += [{**b, "kind": "RoleBinding"} for b in reader.rbac("rolebindings", settings.namespace)]
    except live.ClusterReadError as err:
        return [], f"cannot read the cluster's RBAC: {scrub(str(err), limit=300)}"
    finally:
        reader.close()
    return rbac_reaches(bound, roles, settings.cluster_name, frozenset(own)), ""


# ---------------------------------------------------------------------------------------------
# The command


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tools.audit", description=__doc__.splitlines()[0])
    parser.add_argument("--stack", required=True)
    parser.add_argument("--members", default="", help="MEMBERS: more of the stack's own members (comma-separated)")
    parser.add_argument("--readers", default="", help="READERS: more of the stack's own members (comma-separated)")
    parser.add_argument("--backend", default="", help="STATE_BACKEND: the stack's home, when it records none")
    parser.add_argument("--kubeconfig", type=Path, help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    parser.add_argument("--context", help="context of the stack's cluster (default: gke_<project>_<region>_<cluster>)")
    parser.add_argument("--before-up", action="store_true", help="`make up`: a protected stack only; a finding stops")
    parser.add_argument("--accept", default="", help="ACCEPT: with `audit`, a finding is a warning")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _settings(stack: str, root: Path) -> Settings:
    from core.config import ConfigError
    from tools.stack_files import StackFileError, load_stack

    try:
        return load_stack(stack, root / f"Pulumi.{stack}.yaml")[0]
    except (ConfigError, StackFileError) as err:
        raise AuditError(str(err).replace("\n", "; ")) from None


def _others(stack: str, root: Path) -> dict[str, dict[str, str]]:
    """The other stack files' configs, read as the CLI writes them (one that cannot be read is no one's)."""
    from tools.stack_files import StackFileError, load_stack_config
    from tools.state_home import STACK_NAME

    found = {}
    for path in sorted(root.glob("Pulumi.*.yaml")):
        name = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
        if name == stack or not STACK_NAME.fullmatch(name):
            continue
        try:
            found[name] = load_stack_config(path)[0]  # the declarations are this checkout's Pulumi.yaml
        except (StackFileError, OSError):
            continue
    return found


def _home(args: argparse.Namespace) -> Any:
    from tools.state_home import decide

    return decide(
        args.stack,
        args.root,
        env_url=os.environ.get("PULUMI_BACKEND_URL", ""),
        explicit=args.backend,
        organization=os.environ.get("PULUMI_DEFAULT_ORGANIZATION", ""),  # what `make up` exports for a Cloud home
        local_ok=True,
        allow_passphrase=True,
        shared_key_ok=True,
    )


def _reads() -> Any:
    from tools.audit_reads import Reads

    try:
        return Reads()
    except client_errors() as err:
        why = "no Google credentials (gcloud auth application-default login)"
        raise AuditFailedError(
            f"cannot read the stack's IAM: {why if 'Credentials' in type(err).__name__ else scrub(str(err), limit=160)}"
        ) from None


def run(args: argparse.Namespace, reads: Any = None) -> tuple[list[str], list[str], str]:
    """The findings' lines, what could not be read, and the cluster's line (empty when read)."""
    from core.config.projects import refuse_shared
    from tools.state_bucket import parse_members

    settings = _settings(args.stack, args.root)
    others = _others(args.stack, args.root)
    if not args.before_up:
        refuse_shared(args.stack, settings, others)
    explicit = parse_members(args.members, "MEMBERS") + parse_members(args.readers, "READERS")
    home = _home(args)
    reads = reads if reads is not None else _reads()
    audit = Audit(reads, settings.project)
    try:
        found, own = targets(audit, settings, home, explicit)
        reached = findings(audit, found, own, settings.stack)
    finally:
        reads.close()
    on_cluster, cluster_line = cluster_reaches(settings, own, args.kubeconfig, args.context)
    return pool_elsewhere(audit, settings, others) + lines(reached + on_cluster), audit.unread, cluster_line


def main(argv: list[str] | None = None, *, reads: Any = None) -> int:
    remember(*env_secrets(dict(os.environ)))
    args = parse(argv)
    try:
        if args.before_up and not _protected(args):
            return 0
        accept = _accepts_audit(args.accept)
        found, unread, cluster = run(args, reads)
    except TpuRlError as err:
        if args.before_up and isinstance(err, AuditFailedError):
            print(f"warning: {err}; `make up` goes on without the access audit ({HELP})", file=sys.stderr)
            return 0
        return report(err)
    return _report(args, found, unread, cluster, accept)


def _protected(args: argparse.Namespace) -> bool:
    """`make up`'s audit runs for a protected stack whose checks against the world are on (a cheap read first: an
    unprotected stack's `up` loads nothing more)."""
    from tools.state_home import read_stack_file

    own = read_stack_file(args.stack, args.root)
    if own.protect and not own.capacity_check:
        print(f"access audit of stack {args.stack} skipped: tpu-rl:workflow.capacityCheck is false")
    return own.protect and own.capacity_check


def _accepts_audit(words: str) -> bool:
    from program.config import Accept, AcceptError, accepted

    try:
        return Accept.AUDIT in accepted({"TPU_RL_ACCEPT": words})
    except AcceptError as err:
        raise AuditError(str(err)) from None


def _unread(line: str) -> str:
    """A read that failed, as its line says it (``what ... is not known`` already says what)."""
    return line if line.startswith("what ") else f"cannot read {line}"


def _report(args: argparse.Namespace, found: list[str], unread: list[str], cluster: str, accept: bool) -> int:
    stack = args.stack
    if args.before_up:
        for line in [*map(_unread, unread), *([cluster] if cluster else [])]:
            print(f"warning: {line}; the access audit of stack {stack} goes on without it", file=sys.stderr)
        if not found:
            print(f"access audit of stack {stack}: no member outside its own list reaches it")
            return 0
        prefix = "warning" if accept else "finding"
        for line in found:
            print(f"{prefix}: {line}", file=sys.stderr)
        if accept:
            print(
                f"warning: going on past {len(found)} finding(s) of stack {stack}'s access audit (ACCEPT=audit)",
                file=sys.stderr,
            )
            return 0
        print(
            f"error: stack {stack}'s access audit found {len(found)} grant(s) to members outside its own list (above): "
            f"remove them, or name a member as the stack's own ({HELP}); to go on past them: make up STACK={stack} "
            "ACCEPT=audit",
            file=sys.stderr,
        )
        return 1
    for line in found:
        print(f"finding: {line}")
    for line in unread:
        print(f"error: {_unread(line)}", file=sys.stderr)
    if cluster:
        print(f"warning: {cluster}; the rest of the audit went on", file=sys.stderr)
    done = f"{len(found)} finding(s)" if found else "nothing outside its own list"
    if unread:
        done = f"incomplete, {len(unread)} read(s) failed (above); {len(found)} finding(s) in what was read"
    print(f"access audit of stack {stack}: {done} ({HELP})")
    return 1 if found or unread else 0


if __name__ == "__main__":
    entry_point(main)
