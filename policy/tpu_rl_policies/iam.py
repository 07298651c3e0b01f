"""Identities: who may act as what, in Google Cloud (no broad project roles, grants to the stack's own service
accounts, each Kubernetes service account named as the account it acts as) and in the cluster (the Hub write token,
RBAC, admission control)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from core.iam_types import IAM_TYPES, grant_kind
from core.iam_types import VERSION as IAM_TYPES_VERSION

from .grants import GKE_AGENT, WORKLOAD_PRINCIPAL, _members, own_resources
from .pods import kind_of
from .properties import _l, _m, judging, unseen
from .resources import CLUSTER, DEPLOYMENT, NODE_POOL, Report, Resource, _guarded_resource, _guarded_stack

PROJECT_IAM = (
    "gcp:projects/iAMMember:IAMMember",
    "gcp:projects/iAMBinding:IAMBinding",
)


BROAD_ROLES = ("roles/storage.admin", "roles/owner", "roles/editor")


def _broad_iam(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    if args.resource_type in PROJECT_IAM and props.get("role") in BROAD_ROLES:
        report(
            f"project-level {props['role']} is too broad; grant roles/storage.objectUser on the bucket "
            "(gcp.storage.BucketIAMMember) or a narrower project role"
        )


no_broad_project_iam = ResourceValidationPolicy(
    name="no-broad-project-iam",
    description="No project-level roles/storage.admin, roles/owner or roles/editor grants.",
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Scope storage access to the artifacts bucket (see infra/gcp/identities.py).",
    validate=_guarded_resource(_broad_iam),
)


IAM_LIKE = re.compile(r"gcp:[^:]+:[A-Za-z0-9]*iam(member|binding|policy)", re.IGNORECASE)
"""A type token shaped like an IAM grant in any spelling: one the pinned provider's list lacks is refused
(``iam-service-accounts-only``), so a newer provider's grant type is never passed unjudged."""
KMS_KEY_IAM = "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember"
ACCOUNT = "gcp:serviceaccount/account:Account"
SERVICE_ACCOUNT = "kubernetes:core/v1:ServiceAccount"


def _iam_grants(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    """Grants name service accounts, never people, groups, domains, the public or federated identities; and they add
    a member, never replace a role's or a resource's members (an IAMBinding or IAMPolicy removes every grant the stack
    does not make, the project owners' among them)."""
    kind = grant_kind(args.resource_type)
    if kind is None:
        if IAM_LIKE.fullmatch(args.resource_type):
            report(
                f"{args.resource_type} is an IAM grant type the pack's list of pulumi-gcp {IAM_TYPES_VERSION}'s "
                "types lacks, so no rule judges it: run `make iam-types` with the provider the program uses"
            )
        return
    name = args.resource_type.rpartition(":")[2]
    if kind != "Member":
        report(
            f"{name} replaces every other grant of its role or resource (authoritative); grant with the matching "
            f"{name.removesuffix(kind)}Member, as infra/gcp/ does"
        )
    for member in _members(props):
        if unseen(member):
            continue
        if not isinstance(member, str) or not member.startswith("serviceAccount:"):
            report(
                f"{member!s} is not a service account: tpu-rl grants roles to its own service accounts only (a "
                "person, a group, a domain, allUsers or a federated identity would reach the stack's bucket, key or "
                "accounts)"
            )


iam_grants = ResourceValidationPolicy(
    name="iam-service-accounts-only",
    description="IAM grants name service accounts only, and add a member rather than replace a role's members.",
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep the grants of infra/gcp/access.py and infra/gcp/identities.py (IAMMember to accounts).",
    validate=_guarded_resource(_iam_grants),
)


def _own_principals(resources: list[Resource]) -> tuple[dict[str, str], set[tuple[str, str]]]:
    """The stack's own principals: its Google accounts (email -> account id) and its Kubernetes service accounts in its
    namespace (``tpu-rl:namespace``), (namespace, name)."""
    emails: dict[str, str] = {}
    for r in resources:
        if r.resource_type != ACCOUNT:
            continue
        account_id, project, email = r.props.get("accountId"), r.props.get("project"), r.props.get("email")
        if isinstance(email, str):  # no id (the program always sets one): named by its email, which no KSA matches
            emails[email] = account_id if isinstance(account_id, str) else email
        elif isinstance(account_id, str) and isinstance(project, str):
            emails[f"{account_id}@{project}.iam.gserviceaccount.com"] = account_id
    namespace = DEPLOYMENT.namespace()
    ksas = set()
    for r in resources:
        if r.resource_type == SERVICE_ACCOUNT:
            meta = _m(r.props.get("metadata"))
            if meta.get("namespace") == namespace:
                ksas.add((namespace, str(meta.get("name"))))
    return emails, ksas


NODE_HOLDERS = frozenset(("system", "cpu", "tpu"))
"""The stack's accounts nodes run as (``grants.ACCOUNT_SUFFIXES``): a step's account on a node would give it to every
pod the node runs, through the kubelet."""


def _node_accounts(resources: list[Resource], holders: dict[str, str], report: Report) -> None:
    """The cluster's default nodes and every node pool run as one of the stack's own node accounts."""
    for r in resources:
        if r.resource_type not in (CLUSTER, NODE_POOL):
            continue
        account = _m(r.props.get("nodeConfig")).get("serviceAccount")
        if unseen(account) or account is None:
            continue  # unset, or no nodeConfig (a cluster whose nodes are its pools'): gke-private-cluster judges it
        if holders.get(str(account)) not in NODE_HOLDERS:
            report(
                f"{r.name}'s nodes run as {account}, which is not one of this stack's node accounts "
                f"({', '.join(sorted(a for a, h in holders.items() if h in NODE_HOLDERS)) or 'none declared'}): "
                "every pod on them would act with its roles through the kubelet",
                r.urn,
            )


def _stack_principals(args: StackValidationArgs, resources: list[Resource], report: Report) -> None:
    accounts, ksas = _own_principals(resources)
    own = own_resources(resources)
    pools = {f"{project}.svc.id.goog" for project in own.projects}
    _judge_grants(resources, accounts, ksas, pools, report)
    _node_accounts(resources, own.holders, report)


def _judge_grants(
    resources: list[Resource], accounts: dict[str, str], ksas: set[tuple[str, str]], pools: set[str], report: Report
) -> None:
    for r in resources:
        if r.resource_type not in IAM_TYPES:
            continue
        for member in _members(r.props):
            if unseen(member) or not isinstance(member, str) or not member.startswith("serviceAccount:"):
                continue  # not known yet, or not an account at all (iam-service-accounts-only)
            if r.resource_type == KMS_KEY_IAM and GKE_AGENT.fullmatch(member):
                continue
            principal = WORKLOAD_PRINCIPAL.fullmatch(member)
            if principal is None:
                if member.removeprefix("serviceAccount:") not in accounts:
                    report(
                        f"{r.name} grants {_m(r.props).get('role')} to {member}, which is not one of this stack's "
                        "accounts: another stack's or a person's account would reach this stack's resources",
                        r.urn,
                    )
                continue
            namespace, ksa = principal.group(2), principal.group(3)
            if f"{principal.group(1)}.svc.id.goog" not in pools:
                report(
                    f"{r.name} lets {namespace}/{ksa} of the identity pool {principal.group(1)}.svc.id.goog act as a "
                    f"Google account: only the stack's own project's pool ({', '.join(sorted(pools)) or 'none known'}) "
                    "holds its Kubernetes service accounts; another project's cluster would take the identity",
                    r.urn,
                )
                continue
            if (namespace, ksa) not in ksas:
                report(
                    f"{r.name} lets {namespace}/{ksa} act as a Google account, but this stack makes no such "
                    "Kubernetes service account: a pod of another cluster in the project could take the identity",
                    r.urn,
                )
                continue
            bound = r.props.get("serviceAccountId")
            if unseen(bound):
                continue
            account = accounts.get(str(bound).rpartition("/")[2])
            if account is not None and ksa != account:
                report(
                    f"{r.name} binds {namespace}/{ksa} to the account {account}: a Kubernetes service account is named "
                    "as the account it acts as, which IAM keeps unique in the project, so no stack's pod can take "
                    "another stack's identity (core.names.step_ksa)",
                    r.urn,
                )


stack_principals = StackValidationPolicy(
    name="stack-principals",
    description=(
        "IAM grants go to the stack's own accounts and Kubernetes service accounts, each named as the account it acts "
        "as (the project's GKE agent only on the stack's key); nodes run as the stack's node accounts."
    ),
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Keep the identities of infra/gcp/identities.py and infra/gcp/cluster.py.",
    validate=_guarded_stack(_stack_principals),
)


ADMIN_ROLES = frozenset(("cluster-admin", "admin", "edit"))
"""The built-in ClusterRoles that give a subject write access to most of a namespace or the cluster."""
BUILT_IN = ADMIN_ROLES | {"view"}
"""The built-in user-facing roles and bindings (and every ``system:`` one), which a stack neither binds nor patches."""
ESCALATING_VERBS = frozenset(("escalate", "bind", "impersonate"))
"""Verbs that let a subject grant itself more (Kubernetes RBAC "privilege escalation prevention")."""
ESCALATING_RESOURCES: dict[str, tuple[frozenset[str], str]] = {
    "pods": (
        frozenset(("create",)),
        "a pod it creates runs as any service account of the namespace, with any Secret mounted",
    ),
    "pods/exec": (frozenset(), "it runs commands in any pod of the namespace, as that pod's identity"),
    "pods/attach": (frozenset(), "it reads and writes any running container's terminal"),
    "pods/portforward": (frozenset(), "it reaches any pod's ports, past the network policies"),
    "pods/ephemeralcontainers": (frozenset(), "it adds a container of its own to any running pod"),
    "secrets": (frozenset(), "it reads or changes the namespace's Secrets, the Hugging Face tokens among them"),
    "serviceaccounts/token": (
        frozenset(("create",)),
        "it mints a token of any service account of the namespace, and with it that account's Google identity",
    ),
    "nodes/proxy": (frozenset(), "it reaches every kubelet's API, exec into any pod of the node among it"),
}
"""Resources whose verbs (any verb where the set is empty) let a role's subject take another identity or its
secrets: one line each naming the escalation (Kubernetes "RBAC good practices", privilege escalation risks)."""
BROAD_SUBJECTS = re.compile(r"system:(anonymous|unauthenticated|authenticated|serviceaccounts(:.*)?)")
"""Who every spelling of "everyone" names: the anonymous user or group, every (un)authenticated user, every service
account of the cluster or of a namespace (Kubernetes "Using RBAC Authorization", Referring to subjects)."""
ROLES = ("Role", "ClusterRole")
BINDINGS = ("RoleBinding", "ClusterRoleBinding")
RBAC_GROUP = "kubernetes:rbac.authorization.k8s.io/"
SYSTEM_NAMESPACES = frozenset(("kube-system", "kube-public"))
"""The namespaces the cluster's own Roles live in (Kubernetes ``plugin/pkg/auth/authorizer/rbac/bootstrappolicy``
``namespace_policy.go``)."""


def _rbac_objects(resource_type: str, props: dict[str, Any]) -> list[tuple[str, dict[Any, Any]]]:
    """The RBAC objects a resource holds, as (kind, object): itself, its ``...Patch`` (the kind with ``Patch``) or each
    item of its ``...List``."""
    if not resource_type.startswith(RBAC_GROUP):
        return []
    kind = resource_type.rpartition(":")[2]
    if kind.endswith("List"):
        return [(kind.removesuffix("List"), _m(item)) for item in _l(props.get("items"))]
    return [(kind, props)]


def _spelled(name: Any) -> str:
    """A name as the API server would compare it once a hostile spelling is undone (case, surrounding space)."""
    return str(name).strip().lower()


def _built_in(name: Any) -> bool:
    return _spelled(name).startswith("system:") or _spelled(name) in BUILT_IN


def _changes_clusters_own(kind: str, name: Any, obj: dict[Any, Any]) -> str:
    """How declaring the RBAC object ``obj`` would change one of the cluster's own ('' when it would not): a patch of
    a built-in name, and, since the stack's Kubernetes provider upserts (``upsertExistingObjects``,
    ``infra/gcp/cluster.py``: a create of an object that exists applies to it), a cluster-wide one of a built-in name,
    or one of any name in a namespace the cluster's own live in (not all of theirs are ``system:``:
    ``extension-apiserver-authentication-reader``)."""
    namespace = _m(obj.get("metadata")).get("namespace")
    if namespace in SYSTEM_NAMESPACES:
        return f"is in {namespace}, where declaring it changes the cluster's own of that name"
    if _built_in(name) and (kind.endswith("Patch") or kind.startswith("Cluster")):
        return "has a built-in name, and declaring it changes the cluster's own"
    return ""


def _judge_rules(kind: str, name: Any, obj: dict[Any, Any], say: Callable[[str], None]) -> None:
    for index, rule in enumerate(_l(obj.get("rules"))):
        rule = _m(rule)
        for field_name in ("apiGroups", "resources", "verbs", "nonResourceURLs"):
            values = [str(v) for v in _l(rule.get(field_name))]
            if "*" in values or (
                field_name == "resources" and any(v.startswith("*/") or v.endswith("/*") for v in values)
            ):
                say(f"{kind} {name} rule {index} grants every {field_name[:-1]} ('*'): list what it needs")
        verbs = {str(v) for v in _l(rule.get("verbs"))} & ESCALATING_VERBS
        if verbs:
            say(f"{kind} {name} rule {index} grants {', '.join(sorted(verbs))}: a way to any permission")
        granted = {str(v) for v in _l(rule.get("verbs"))}
        for resource in sorted({str(v) for v in _l(rule.get("resources"))} & ESCALATING_RESOURCES.keys()):
            verbs_of, escalation = ESCALATING_RESOURCES[resource]
            if granted & verbs_of if verbs_of else granted:
                say(f"{kind} {name} rule {index} grants {', '.join(sorted(granted))} on {resource}: {escalation}")
    if _m(obj.get("aggregationRule")).get("clusterRoleSelectors"):
        say(f"{kind} {name} aggregates other roles (aggregationRule): list its rules instead")


def _judge_subjects(kind: str, name: Any, obj: dict[Any, Any], ksas: set[tuple[str, str]], say: Any) -> None:
    # A RoleBinding's ServiceAccount subject without a namespace is the binding's namespace's (Kubernetes
    # pkg/registry/rbac/validation/rule.go, appliesToUser); a ClusterRoleBinding's has none.
    default = _m(obj.get("metadata")).get("namespace") if kind == "RoleBinding" else None
    for subject in _l(obj.get("subjects")):
        subject = _m(subject)
        who = subject.get("name")
        account = subject.get("kind") == "ServiceAccount"
        namespace = (subject.get("namespace") or default) if account else None  # a user's or group's has no meaning
        if BROAD_SUBJECTS.fullmatch(_spelled(who)):
            say(f"{kind} {name} binds {who!s}: everyone who can reach the API server, or every service account")
        elif not account or (str(namespace), str(who)) not in ksas:
            say(
                f"{kind} {name} binds {subject.get('kind')!s} {f'{namespace}/' if namespace else ''}{who!s}, not one "
                "of the stack's Kubernetes service accounts in its namespace: bind the account of the step that "
                "needs it"
            )


def _judge_binding(kind: str, obj: dict[Any, Any], ksas: set[tuple[str, str]], roles: set[Any], say: Any) -> None:
    meta = _m(obj.get("metadata"))
    name = meta.get("name")
    changes = _changes_clusters_own(kind, name, obj)
    if changes:
        say(f"{kind} {name} {changes}: bind a role of the stack's in a binding of its own, in the stack's namespace")
    kind = kind.removesuffix("Patch")
    ref = _m(obj.get("roleRef"))
    if not ref:
        say(f"{kind} {name} names no roleRef: the role it grants is whatever the binding it patches holds; declare it")
    elif ref.get("kind") == "ClusterRole" and _spelled(ref.get("name")) in ADMIN_ROLES:
        say(f"{kind} {name} binds the built-in {ref.get('name')} role: bind a role with the rules it needs")
    elif _built_in(ref.get("name")):
        say(
            f"{kind} {name} binds the built-in {ref.get('name')} role: bind a role of the stack's with the rules "
            "it needs"
        )
    elif (ref.get("kind"), ref.get("name"), meta.get("namespace") if ref.get("kind") == "Role" else None) not in roles:
        say(
            f"{kind} {name} binds the {ref.get('kind')} {ref.get('name')}, which the stack does not declare: its rules "
            "are not judged; bind a role of the stack's"
        )
    _judge_subjects(kind, name, obj, ksas, say)


def _rbac(args: StackValidationArgs, resources: list[Resource], report: Report) -> None:
    """No wildcard or escalating RBAC rule; a binding binds a role the stack declares to the stack's own Kubernetes
    service accounts only: never everyone, a built-in role, nor a patch of a built-in binding or role, nor a role of
    a built-in name the provider's upsert would apply to the cluster's own."""
    _, ksas = _own_principals(resources)
    roles: set[Any] = set()
    found = [(r, kind, obj) for r in resources for kind, obj in _rbac_objects(r.resource_type, r.props)]
    for _, kind, obj in found:
        meta = _m(obj.get("metadata"))
        if kind in ROLES:
            roles.add((kind, meta.get("name"), meta.get("namespace") if kind == "Role" else None))
    for r, kind, obj in found:
        with judging():

            def say(message: str, urn: str = r.urn) -> None:
                report(message, urn)

            name = _m(obj.get("metadata")).get("name") or r.name
            if kind.removesuffix("Patch") in ROLES:
                changes = _changes_clusters_own(kind, name, obj)
                if changes:
                    say(f"{kind} {name} {changes}: declare a role of the stack's in the stack's namespace")
                _judge_rules(kind.removesuffix("Patch"), name, obj, say)
            elif kind.removesuffix("Patch") in BINDINGS:
                _judge_binding(kind, obj, ksas, roles, say)


no_broad_rbac = StackValidationPolicy(
    name="no-broad-rbac",
    description=(
        "RBAC binds roles the stack declares, with no '*' or escalate, bind, impersonate, to its own Kubernetes "
        "service accounts only."
    ),
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "Give a workload a Role with the verbs and resources it uses: tpu-rl's training head gets and lists its "
        "namespace's pods (infra/k8s/manifests.py head_access), and nothing else needs one."
    ),
    validate=_guarded_stack(_rbac),
)


ADMISSION_KINDS = frozenset(
    (
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding",
    )
)


def _admission(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:
    kind = kind_of(args.resource_type)
    if kind in ADMISSION_KINDS:
        name = _m(props.get("metadata")).get("name") or args.name
        report(
            f"{kind} {name} sees or changes every object it matches, Secrets and pods among them: the stack installs "
            "admission control only through the reviewed charts (JobSet's and Kueue's webhooks)"
        )


no_admission_webhooks = ResourceValidationPolicy(
    name="no-admission-webhooks",
    description="The stack registers no admission webhook or admission policy of its own.",
    severity=Severity.HIGH,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps="Remove the object; the reviewed Helm charts install the webhooks JobSet and Kueue need.",
    validate=_guarded_resource(_admission),
)
