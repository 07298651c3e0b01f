"""What the grant rules share: the stack's own resources a grant may land on (``own_resources``, read from the stack and
the configuration the engine sends), the principals an IAM resource grants to (``_members``), each grant of an IAM
resource with its role and condition (``grants_of``), and the object-name prefixes a condition bounds it to, read only
in the one shape the program writes (``condition_prefixes``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from .properties import _l, _m, unseen
from .resources import BUCKET, CLUSTER, DEPLOYMENT, Resource

GKE_AGENT = re.compile(r"serviceAccount:service-[0-9]+@container-engine-robot\.iam\.gserviceaccount\.com")
"""The project's GKE service agent: the one principal outside the stack a grant may name, on the stack's Cloud KMS key
(it encrypts Secrets with it: ``infra/gcp/kms.py``)."""
WORKLOAD_PRINCIPAL = re.compile(r"serviceAccount:([a-z0-9-:.]+)\.svc\.id\.goog\[([^/\]]+)/([^\]]+)\]")
"""A Kubernetes service account's Workload Identity principal: ``serviceAccount:<pool project>.svc.id.goog[<namespace>/
<name>]``."""
ACCOUNT = "gcp:serviceaccount/account:Account"
CUSTOM_ROLE = "gcp:projects/iAMCustomRole:IAMCustomRole"
CLUSTER_NAME_DEFAULT = "tpu-rl"
REPOSITORY = "gcp:artifactregistry/repository:Repository"
KEY_RING = "gcp:kms/keyRing:KeyRing"
CRYPTO_KEY = "gcp:kms/cryptoKey:CryptoKey"


def _members(props: Mapping[str, Any]) -> list[Any]:
    """The principals an IAM resource grants to: ``member``, ``members``, or a policy document's bindings."""
    if "member" in props:
        return [props.get("member")]
    if "members" in props:
        return _l(props.get("members"))
    if "policyData" not in props:
        return []
    data = props.get("policyData")
    if unseen(data):
        return []
    if not isinstance(data, str):  # a value that is no text: unreadable, as grants_of reads it
        return ["(a policy document this pack cannot read)"]
    try:
        document = yaml.safe_load(data)
    except yaml.YAMLError:
        return ["(a policy document this pack cannot read)"]
    return [m for b in _l(_m(document).get("bindings")) for m in _l(_m(b).get("members"))]


@dataclass(frozen=True)
class Grant:
    """One role an IAM resource gives: to its members, under its condition (None: unconditional)."""

    role: Any
    members: list[Any]
    condition: Any


def _document(data: Any) -> dict[Any, Any] | None:
    """A policy document's mapping (``policyData``); None when it is unknown or unreadable."""
    if unseen(data) or not isinstance(data, str):
        return None
    try:
        return _m(yaml.safe_load(data))
    except yaml.YAMLError:
        return None


def grants_of(props: Mapping[str, Any]) -> list[Grant]:
    """Every grant an IAM resource makes: its ``role`` to ``member`` or ``members``, or each binding of its policy
    document (``policyData``; one the pack cannot read is a grant of an unreadable role)."""
    if "role" in props:
        members = [props.get("member")] if "member" in props else _l(props.get("members"))
        return [Grant(props.get("role"), members, props.get("condition"))]
    if "policyData" not in props:
        return []
    document = _document(props.get("policyData"))
    if document is None:
        data = props.get("policyData")
        return [] if unseen(data) else [Grant("(a policy document this pack cannot read)", [], None)]
    return [
        Grant(_m(b).get("role"), _l(_m(b).get("members")), _m(b).get("condition")) for b in _l(document.get("bindings"))
    ]


PREFIX_TERM = re.compile(
    r'resource\.name\.startsWith\("projects/_/buckets/([a-z0-9][a-z0-9_.-]{1,220})/objects/([^"\\|&()]+)"\)'
)
"""One term of a prefix condition as ``infra.gcp.access`` writes it: the object names under one prefix of one bucket."""
OR = re.compile(r"\s*\|\|\s*")


def condition_prefixes(condition: Any) -> tuple[str, tuple[str, ...]] | None:
    """The bucket and the object-name prefixes an IAM condition bounds a grant to, read only when the expression is
    the program's shape exactly: ``resource.name.startsWith("projects/_/buckets/<bucket>/objects/<prefix>")`` terms
    joined by ``||``, every term of one bucket, no prefix empty. Anything else (``true``, ``&&``, a negation, another
    attribute, a term of another bucket) is None: a condition the pack cannot bound. An unknown one is noted as read."""
    expression = _m(condition).get("expression")
    if unseen(expression) or not isinstance(expression, str):
        return None
    terms = [PREFIX_TERM.fullmatch(term) for term in OR.split(expression.strip())]
    if not terms or any(term is None for term in terms):
        return None
    buckets = {term.group(1) for term in terms if term is not None}
    if len(buckets) != 1:
        return None
    return buckets.pop(), tuple(term.group(2) for term in terms if term is not None)


@dataclass
class Own:
    """What a grant of this stack may land on."""

    projects: set[str] = field(default_factory=set)
    buckets: set[str] = field(default_factory=set)
    keys: set[str] = field(default_factory=set)
    repositories: set[tuple[str, str, str]] = field(default_factory=set)
    """(project, location, repository id)."""
    accounts: set[str] = field(default_factory=set)
    """Emails."""
    holders: dict[str, str] = field(default_factory=dict)
    """Email -> what the account is (``system``, ``cpu``, ``tpu`` or a step), by its id: ``<clusterName>-<suffix>``
    (``ACCOUNT_SUFFIXES``)."""
    custom_roles: dict[str, Any] = field(default_factory=dict)
    """A custom role the stack declares (``projects/<project>/roles/<id>``) -> its ``permissions``."""
    state_backend: str = ""


def _text(value: Any) -> str:
    return value if isinstance(value, str) and not unseen(value) else ""


ACCOUNT_SUFFIXES = {"sys-np": "system", "cpu-np": "cpu", "tpu-np": "tpu"}
"""A node pool's account id is ``<clusterName>-<suffix>`` (``infra.gcp.naming``); a step's ``<clusterName>-<step>``
(``core.names.step_account``)."""


def _holder(account_id: Any, clusters: set[str]) -> str:
    """What an account is, by its id (``""``: none of the stack's kinds)."""
    if not isinstance(account_id, str):
        return ""
    for cluster in sorted(clusters, key=len, reverse=True):
        suffix = account_id.removeprefix(f"{cluster}-") if account_id.startswith(f"{cluster}-") else ""
        if suffix:
            return ACCOUNT_SUFFIXES.get(suffix, suffix)
    return ""


def own_resources(resources: list[Resource]) -> Own:
    own = Own()
    project = DEPLOYMENT.setting("gcp:project")
    if isinstance(project, str) and project:
        own.projects.add(project)
    else:  # no configuration from the engine: the cluster's project
        own.projects |= {_text(r.props.get("project")) for r in resources if r.resource_type == CLUSTER} - {""}
    rings = [r.props for r in resources if r.resource_type == KEY_RING]
    clusters = {_text(r.props.get("name")) for r in resources if r.resource_type == CLUSTER} - {""}
    named = DEPLOYMENT.setting("tpu-rl:clusterName")
    if isinstance(named, str) and named:
        clusters.add(named)
    clusters = clusters or {CLUSTER_NAME_DEFAULT}
    for r in resources:
        props = r.props
        if r.resource_type == BUCKET:
            own.buckets.add(_text(props.get("name")))
        elif r.resource_type == CRYPTO_KEY:
            name = _text(props.get("name"))
            own.keys.add(f"{_text(props.get('keyRing'))}/cryptoKeys/{name}")
            own.keys |= {
                f"projects/{_text(k.get('project'))}/locations/{_text(k.get('location'))}/keyRings/"
                f"{_text(k.get('name'))}/cryptoKeys/{name}"
                for k in rings
            }
        elif r.resource_type == REPOSITORY:
            own.repositories.add(
                (_text(props.get("project")), _text(props.get("location")), _text(props.get("repositoryId")))
            )
        elif r.resource_type == ACCOUNT:
            email, account_id, in_project = props.get("email"), props.get("accountId"), props.get("project")
            if isinstance(account_id, str) and isinstance(in_project, str) and not isinstance(email, str):
                email = f"{account_id}@{in_project}.iam.gserviceaccount.com"
            if isinstance(email, str):
                own.accounts.add(email)
                own.holders[email] = _holder(account_id, clusters)
        elif r.resource_type == CUSTOM_ROLE:
            role = f"projects/{_text(props.get('project'))}/roles/{_text(props.get('roleId'))}"
            own.custom_roles[role] = props.get("permissions")
    own.buckets.discard("")
    given_key = DEPLOYMENT.setting("tpu-rl:gke", "secretsEncryptionKey")
    if isinstance(given_key, str) and given_key.startswith("projects/"):
        own.keys.add(given_key)
    recorded = DEPLOYMENT.setting("tpu-rl:stateBackend")
    own.state_backend = recorded if isinstance(recorded, str) else ""
    return own
