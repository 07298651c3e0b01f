"""What the grant rules share: the stack's own resources a grant may land on (``own_resources``, read from the stack and
the configuration the engine sends), and the principals an IAM resource grants to (``_members``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from core.state_names import backend_bucket

from .properties import _l, _m, unseen
from .resources import BUCKET, CLUSTER, DEPLOYMENT, Resource

GKE_AGENT = re.compile(r"serviceAccount:service-[0-9]+@container-engine-robot\.iam\.gserviceaccount\.com")
"""The project's GKE service agent: the one principal outside the stack a grant may name, on the stack's Cloud KMS key
(it encrypts Secrets with it: ``infra/gcp/kms.py``)."""
ACCOUNT = "gcp:serviceaccount/account:Account"
REPOSITORY = "gcp:artifactregistry/repository:Repository"
KEY_RING = "gcp:kms/keyRing:KeyRing"
CRYPTO_KEY = "gcp:kms/cryptoKey:CryptoKey"


def _members(props: Mapping[str, Any]) -> list[Any]:
    """The principals an IAM resource grants to: ``member``, ``members``, or a policy document's bindings."""
    if "member" in props:
        return [props.get("member")]
    if "members" in props:
        return _l(props.get("members"))
    data = props.get("policyData")
    if unseen(data) or not isinstance(data, str):
        return []
    try:
        document = yaml.safe_load(data)
    except yaml.YAMLError:
        return ["(a policy document this pack cannot read)"]
    return [m for b in _l(_m(document).get("bindings")) for m in _l(_m(b).get("members"))]


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
    cache_bucket: str = ""
    state_backend: str = ""


def _text(value: Any) -> str:
    return value if isinstance(value, str) and not unseen(value) else ""


def own_resources(resources: list[Resource]) -> Own:
    own = Own()
    project = DEPLOYMENT.setting("gcp:project")
    if isinstance(project, str) and project:
        own.projects.add(project)
    else:  # no configuration from the engine: the cluster's project
        own.projects |= {_text(r.props.get("project")) for r in resources if r.resource_type == CLUSTER} - {""}
    rings = [r.props for r in resources if r.resource_type == KEY_RING]
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
            if isinstance(email, str):
                own.accounts.add(email)
            elif isinstance(account_id, str) and isinstance(in_project, str):
                own.accounts.add(f"{account_id}@{in_project}.iam.gserviceaccount.com")
    own.buckets.discard("")
    given_key = DEPLOYMENT.setting("tpu-rl:gke", "secretsEncryptionKey")
    if isinstance(given_key, str) and given_key.startswith("projects/"):
        own.keys.add(given_key)
    cache = DEPLOYMENT.setting("tpu-rl:model", "hubCache")
    if isinstance(cache, str) and cache.startswith("gs://"):
        own.cache_bucket = backend_bucket(cache)
    recorded = DEPLOYMENT.setting("tpu-rl:stateBackend")
    own.state_backend = recorded if isinstance(recorded, str) else ""
    return own
