"""The loopback Cloud Storage and Cloud KMS of ``tests/fake_state_apis.py`` with IAM enforced per caller, and the
Resource Manager, IAM and IAM Credentials routes an access audit and an attacker use: every request is made as the
principal its ``Authorization: Bearer <member>`` header names (``as_member``; a token IAM Credentials mints is the
account's own member), and is answered as Google answers a caller without the permission, 403, unless a binding of
the policies that apply to the resource grants it. A request without a token is the projects' owner (what `make
state-bucket` runs as).

The policies that apply, outermost first, as IAM inherits them (https://cloud.google.com/iam/docs/
resource-hierarchy-access-control): the project's (``project_policies``) to everything in it; a key ring's
(``ring_policies``) to its keys; then the resource's own (``bucket_policies``, ``key_policies``, ``account_policies``).
A binding's condition (``holds``: ``resource.name.startsWith(...)`` / ``==``, each possibly negated with ``!``, joined
with ``||``, as ``infra.gcp.access`` and docs/permissions.md write them) is evaluated on the name of the resource
asked about (an object's ``projects/_/buckets/B/objects/N``, a bucket's ``projects/_/buckets/B``, a key's or ring's
name), for the services that recognize resource attributes (Cloud Storage, Cloud KMS); a conditional binding on a
project or an account is taken as granted (an attacker's best case). Cloud Storage's convenience members are not
expanded here.

Routes, besides ``FakeStateApis``' (the official clients' REST paths and JSON):

- google-cloud-storage: ``objects.insert`` (multipart upload), ``objects.get`` (media and metadata),
  ``objects.delete``, ``objects.list``, ``buckets.get`` (with its ``projectNumber``), ``buckets.getIamPolicy`` /
  ``setIamPolicy`` (``GET``/``PUT /storage/v1/b/<b>/iam``) and ``testIamPermissions``, each as the caller;
- google-cloud-kms: ``cryptoKeys.encrypt`` / ``decrypt``, and ``getIamPolicy`` / ``setIamPolicy`` /
  ``testIamPermissions`` of a key or a key ring (``/v1/<resource>:<verb>``);
- Resource Manager v3: ``projects.get`` and ``projects.getIamPolicy`` / ``setIamPolicy`` / ``testIamPermissions``
  (``POST /v3/projects/<p>:<verb>``, https://cloud.google.com/resource-manager/reference/rest/v3/projects);
- IAM v1: ``serviceAccounts.getIamPolicy`` / ``setIamPolicy`` (``POST /v1/projects/<p|->/serviceAccounts/<e>:<verb>``),
  ``workloadIdentityPools.getIamPolicy`` / ``setIamPolicy`` (``POST /v1/projects/<number>/locations/global/
  workloadIdentityPools/<id>:<verb>``, the pool's project by its number as Resource Manager takes it too)
  and ``roles.get`` (``GET /v1/roles/<r>``, ``/v1/projects/<p>/roles/<r>``), which answers ``includedPermissions``
  from ``ROLE_PERMISSIONS`` and ``custom_roles``;
- IAM Credentials v1: ``serviceAccounts.generateAccessToken`` (``POST /v1/projects/-/serviceAccounts/<e>
  :generateAccessToken``, ``iam.serviceAccounts.getAccessToken`` on the account), whose token acts as the account.

``ROLE_PERMISSIONS`` is a reviewed table of the predefined roles the project grants or documents: for each, the
permissions of it that these routes check and the access audit asks about (``tools/audit.py``), from IAM's roles
reference, one page per service (https://cloud.google.com/iam/docs/roles-permissions/storage, .../cloudkms,
.../iam, .../resourcemanager, .../container, .../compute, .../serviceusage, .../artifactregistry) and Cloud Storage's
legacy roles (https://cloud.google.com/storage/docs/access-control/iam-roles). It is each role's subset that matters
here, not the whole role; ``roles/owner`` is every permission of the table (Owner holds nearly every permission)."""

from __future__ import annotations

import base64
import email
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.fake_compute import error
from tests.fake_state_apis import FakeStateApis
from tests.loopback import LoopbackServer, QuietHandler

OBJECT_READ = ("storage.objects.get", "storage.objects.list")
OBJECT_WRITE = ("storage.objects.create", "storage.objects.delete", "storage.objects.update")
BUCKET_IAM = ("storage.buckets.getIamPolicy", "storage.buckets.setIamPolicy")
KMS_ADMIN = (
    "cloudkms.keyRings.create",
    "cloudkms.keyRings.get",
    "cloudkms.keyRings.getIamPolicy",
    "cloudkms.keyRings.setIamPolicy",
    "cloudkms.cryptoKeys.create",
    "cloudkms.cryptoKeys.get",
    "cloudkms.cryptoKeys.update",
    "cloudkms.cryptoKeys.getIamPolicy",
    "cloudkms.cryptoKeys.setIamPolicy",
    "cloudkms.cryptoKeyVersions.list",
    "cloudkms.cryptoKeyVersions.destroy",
)
"""roles/cloudkms.admin: every key ring, key and version permission but their use (it cannot encrypt or decrypt)."""
TOKENS = (
    "iam.serviceAccounts.getAccessToken",
    "iam.serviceAccounts.getOpenIdToken",
    "iam.serviceAccounts.implicitDelegation",
    "iam.serviceAccounts.signBlob",
    "iam.serviceAccounts.signJwt",
)
WORKLOADS = tuple(
    f"container.{kind}.{verb}"
    for kind in (
        "jobs",
        "cronJobs",
        "scheduledJobs",
        "deployments",
        "daemonSets",
        "statefulSets",
        "replicaSets",
        "replicationControllers",
        "configMaps",
        "thirdPartyObjects",
    )
    for verb in ("create", "update")
)
"""GKE's IAM permissions that create or change a workload, the ConfigMaps the steps' scripts are in, or a custom
resource (a JobSet)."""
KUBERNETES = (
    "container.secrets.get",
    "container.secrets.list",
    "container.secrets.update",
    "container.pods.exec",
    "container.pods.attach",
    "container.pods.create",
    "container.pods.update",
    "container.serviceAccounts.createToken",
    *WORKLOADS,
)
"""GKE's IAM permissions on the Kubernetes API that read Secrets, run code in a pod or as its Kubernetes service
account, or create or change a workload (container.admin and container.developer hold them: Kubernetes Engine
Developer "provides access to Kubernetes API objects inside clusters", RBAC's aside)."""
ROLE_PERMISSIONS: dict[str, tuple[str, ...]] = {
    # Cloud Storage (and its legacy roles)
    "roles/storage.admin": (*OBJECT_READ, *OBJECT_WRITE, *BUCKET_IAM, "storage.buckets.get", "storage.buckets.update"),
    "roles/storage.objectAdmin": (*OBJECT_READ, *OBJECT_WRITE, "storage.objects.setIamPolicy"),
    "roles/storage.objectViewer": OBJECT_READ,
    "roles/storage.objectUser": (*OBJECT_READ, *OBJECT_WRITE),
    "roles/storage.objectCreator": ("storage.objects.create",),
    "roles/storage.legacyBucketReader": ("storage.objects.list", "storage.buckets.get"),
    "roles/storage.legacyBucketOwner": (
        "storage.buckets.get",
        "storage.buckets.update",
        *BUCKET_IAM,
        "storage.objects.list",
        "storage.objects.create",
        "storage.objects.delete",
    ),
    "roles/storage.legacyObjectReader": ("storage.objects.get",),
    "roles/storage.legacyObjectOwner": (
        "storage.objects.get",
        "storage.objects.update",
        "storage.objects.setIamPolicy",
    ),
    # Cloud KMS
    "roles/cloudkms.admin": KMS_ADMIN,
    "roles/cloudkms.cryptoKeyEncrypterDecrypter": (
        "cloudkms.cryptoKeyVersions.useToEncrypt",
        "cloudkms.cryptoKeyVersions.useToDecrypt",
    ),
    "roles/cloudkms.cryptoKeyDecrypter": ("cloudkms.cryptoKeyVersions.useToDecrypt",),
    "roles/cloudkms.cryptoKeyEncrypter": ("cloudkms.cryptoKeyVersions.useToEncrypt",),
    # IAM: creating and administering accounts holds no token of them; the token creator's role does
    "roles/iam.serviceAccountAdmin": (
        "iam.serviceAccounts.create",
        "iam.serviceAccounts.delete",
        "iam.serviceAccounts.get",
        "iam.serviceAccounts.update",
        "iam.serviceAccounts.getIamPolicy",
        "iam.serviceAccounts.setIamPolicy",
    ),
    "roles/iam.serviceAccountUser": ("iam.serviceAccounts.actAs", "iam.serviceAccounts.get"),
    "roles/iam.serviceAccountKeyAdmin": (
        "iam.serviceAccountKeys.create",
        "iam.serviceAccountKeys.delete",
        "iam.serviceAccountKeys.get",
        "iam.serviceAccountKeys.list",
        "iam.serviceAccounts.get",
    ),
    "roles/iam.securityReviewer": (
        "iam.serviceAccounts.getIamPolicy",
        "resourcemanager.projects.getIamPolicy",
        "storage.buckets.getIamPolicy",
        "cloudkms.keyRings.getIamPolicy",
        "cloudkms.cryptoKeys.getIamPolicy",
    ),
    "roles/iam.serviceAccountTokenCreator": (*TOKENS, "iam.serviceAccounts.get"),
    "roles/iam.workloadIdentityUser": ("iam.serviceAccounts.getAccessToken", "iam.serviceAccounts.getOpenIdToken"),
    "roles/iam.workloadIdentityPoolAdmin": tuple(
        f"iam.{kind}.{verb}"
        for kind in ("workloadIdentityPools", "workloadIdentityPoolProviders")
        for verb in ("create", "delete", "get", "list", "undelete", "update")
    ),
    # Resource Manager
    "roles/resourcemanager.projectIamAdmin": (
        "resourcemanager.projects.get",
        "resourcemanager.projects.getIamPolicy",
        "resourcemanager.projects.setIamPolicy",
    ),
    "roles/viewer": ("resourcemanager.projects.get", "resourcemanager.projects.getIamPolicy", "container.clusters.get"),
    # GKE
    "roles/container.admin": (
        "container.clusters.create",
        "container.clusters.delete",
        "container.clusters.get",
        "container.clusters.update",
        "container.clusters.impersonate",
        "container.clusterRoleBindings.create",
        "container.clusterRoleBindings.update",
        "container.roleBindings.create",
        "container.roleBindings.update",
        "container.clusterRoles.bind",
        "container.clusterRoles.escalate",
        "container.roles.bind",
        "container.roles.escalate",
        "container.mutatingWebhookConfigurations.create",
        "container.nodes.proxy",
        *KUBERNETES,
    ),
    "roles/container.developer": ("container.clusters.get", *KUBERNETES),
    "roles/container.clusterViewer": ("container.clusters.get", "container.clusters.list"),
    "roles/container.defaultNodeServiceAccount": ("logging.logEntries.create", "monitoring.timeSeries.create"),
    # The rest of what the program's deployer holds (docs/permissions.md "The roles"): nothing the audit asks about
    "roles/serviceusage.serviceUsageAdmin": ("serviceusage.services.enable", "serviceusage.services.get"),
    "roles/serviceusage.serviceUsageConsumer": ("serviceusage.services.use",),
    "roles/compute.networkAdmin": ("compute.networks.create", "compute.subnetworks.create"),
    "roles/compute.securityAdmin": ("compute.firewalls.create",),
    "roles/artifactregistry.admin": (
        "artifactregistry.repositories.create",
        "artifactregistry.repositories.setIamPolicy",
    ),
    "roles/artifactregistry.reader": ("artifactregistry.repositories.downloadArtifacts",),
}
ROLE_PERMISSIONS["roles/owner"] = tuple(sorted({p for held in ROLE_PERMISSIONS.values() for p in held}))
ATOM = re.compile(r'^(!?)resource\.name(?:\.startsWith\("([^"]*)"\)| == "([^"]*)")$')
DEFAULT_NUMBER = "123456789012"
"""The project number of ``tests.fake_state_apis.default_bucket_policy``'s convenience members."""


def holds(condition: dict[str, str] | None, resource: str) -> bool:
    """Whether a binding's condition holds for ``resource`` (an object's ``projects/_/buckets/B/objects/N``, a
    bucket's ``projects/_/buckets/B`` for a bucket-level request, where an object-name condition cannot hold, or a key's
    or ring's name): a ``||`` of ``[!]resource.name.startsWith("...")`` or ``[!]resource.name == "..."``."""
    if not condition:
        return True
    found = []
    for part in condition["expression"].split(" || "):
        match = ATOM.match(part.strip())
        assert match, f"a condition this fake cannot evaluate: {condition['expression']}"
        negated, prefix, equal = match.groups()
        result = resource.startswith(prefix) if prefix is not None else resource == equal
        found.append(result != bool(negated))
    return any(found)


def binding(role: str, member: str, expression: str = "") -> dict[str, Any]:
    """One binding as a policy's JSON holds it."""
    return {
        "role": role,
        "members": [member],
        **({"condition": {"title": "t", "expression": expression}} if expression else {}),
    }


class PolicedApis(FakeStateApis):
    """``FakeStateApis`` whose objects, keys, rings, projects and accounts answer each caller by the policies that
    apply (module docstring)."""

    def __init__(self, project: str = "acme-tpu") -> None:
        super().__init__(project)
        self.lock = threading.RLock()  # type: ignore[assignment]  # a policed route answers with FakeStateApis' own
        self.contents: dict[tuple[str, str], bytes] = {}
        """(bucket, object name) -> its bytes."""
        self.refused: list[tuple[str, str, str]] = []
        """(caller, permission, resource) of every request answered 403."""
        self.numbers: dict[str, str] = {project: DEFAULT_NUMBER}
        """Project id -> number."""
        self.project_policies: dict[str, list[dict[str, Any]]] = {project: []}
        self.ring_policies: dict[str, list[dict[str, Any]]] = {}
        self.account_policies: dict[str, list[dict[str, Any]]] = {}
        """Service account email -> its policy (the accounts that exist)."""
        self.bucket_projects: dict[str, str] = {}
        """Bucket -> its project (default: ``project``)."""
        self.parents: dict[str, str] = {}
        """A project's (by id) or a folder's (``folders/<id>``) parent: ``folders/<id>`` or ``organizations/<id>``."""
        self.node_policies: dict[str, list[dict[str, Any]]] = {}
        """``folders/<id>``/``organizations/<id>`` -> its policy, inherited by every project under it."""
        self.custom_roles: dict[str, tuple[str, ...]] = {}
        """``projects/P/roles/R`` -> its permissions."""
        self.minted: list[tuple[str, str]] = []
        """(caller, account) of every token IAM Credentials made."""
        self.repository_policies: dict[str, list[dict[str, Any]]] = {}
        """Artifact Registry repository -> its policy: held (``tests/plan_iam.py``), not served."""
        self.pool_policies: dict[str, list[dict[str, Any]]] = {}
        """``projects/<number>/locations/global/workloadIdentityPools/<id>`` -> its policy (the pools that exist)."""

    # -- who may

    def role_permissions(self, role: str) -> tuple[str, ...]:
        return ROLE_PERMISSIONS.get(role) or self.custom_roles.get(role, ())

    def permitted(self, caller: str | None, permission: str, bindings: list[dict[str, Any]], resource: str) -> bool:
        if caller is None:
            return True
        return any(
            caller in b.get("members", [])
            and permission in self.role_permissions(b["role"])
            and holds(b.get("condition"), resource)
            for b in bindings
        )

    def project_id(self, project: str) -> str:
        """A project's id, from its id or its number (Resource Manager and a pool's name take either)."""
        return next((p for p, number in self.numbers.items() if number == project), project)

    def project_of(self, resource: str) -> str:
        """The project a resource is in: a bucket's recorded one, a key's, ring's or pool's from its name, an
        account's from its email."""
        if resource.startswith("projects/_/buckets/"):
            return self.bucket_projects.get(resource.split("/")[3], self.project)
        if resource.startswith("projects/"):
            return self.project_id(resource.split("/")[1])
        found = re.fullmatch(r"[^@]+@([^.]+)\.iam\.gserviceaccount\.com", resource)
        return found.group(1) if found else self.project

    def applying(self, resource: str) -> list[dict[str, Any]]:
        """Every binding that applies to ``resource``, outermost first (module docstring)."""
        project = self.project_of(resource)
        bindings = [b for node in self.ancestry(project) for b in self.node_policies.get(node, [])]
        bindings += self.project_policies.get(project, [])
        if resource.startswith("projects/_/buckets/"):
            return bindings + self.bucket_policies.get(resource.split("/")[3], [])
        if "/keyRings/" in resource:
            ring = resource.split("/cryptoKeys/")[0]
            return bindings + self.ring_policies.get(ring, []) + self.key_policies.get(resource, [])
        if "/workloadIdentityPools/" in resource:
            return bindings + self.pool_policies.get(resource, [])
        return bindings + self.account_policies.get(resource, [])

    def ancestry(self, name: str) -> list[str]:
        """The folders and organization above a project or folder, outermost first."""
        found: list[str] = []
        while name in self.parents and len(found) < 12:
            name = self.parents[name]
            found.insert(0, name)
        return found

    def allows(self, caller: str | None, permission: str, resource: str) -> bool:
        """Whether ``caller`` holds ``permission`` on ``resource``; a conditional binding on a project or an account
        holds (module docstring)."""
        bindings = self.applying(resource)
        if not (resource.startswith("projects/_/buckets/") or "/keyRings/" in resource):
            bindings = [{k: v for k, v in b.items() if k != "condition"} for b in bindings]
        return self.permitted(caller, permission, bindings, resource)

    def _deny(self, caller: str, permission: str, resource: str) -> tuple[int, Any]:
        self.refused.append((caller, permission, resource))
        return 403, error(
            403, f"{caller.split(':', 1)[-1]} does not have {permission} access to {resource}.", "forbidden"
        )

    def _check(self, caller: str | None, permission: str, bucket: str, name: str = "") -> tuple[int, Any] | None:
        resource = f"projects/_/buckets/{bucket}" + (f"/objects/{name}" if name else "")
        if self.allows(caller, permission, resource):
            return None
        return self._deny(caller or "", permission, resource)

    def _check_quiet(self, caller: str | None, permission: str, bucket: str) -> bool:
        return self.allows(caller, permission, f"projects/_/buckets/{bucket}")

    # -- routing

    def answer_as(
        self, caller: str | None, method: str, path: str, query: dict[str, list[str]], body: Any, raw: bytes, ctype: str
    ) -> tuple[int, Any]:
        """The reply to ``caller``'s request: JSON, or bytes for a media download."""
        with self.lock:
            if path.startswith("/upload/storage/v1/b/") or path.startswith("/download/storage/v1/b/"):
                return self._media(caller, method, path, query, raw, ctype)
            bucket_path = re.match(r"^/storage/v1/b/([^/]+)(/o(?:/.+)?|/iam/testPermissions|/iam|)$", path)
            if bucket_path and bucket_path.group(1) in self.buckets:
                return self._bucket(caller, method, bucket_path.group(1), bucket_path.group(2).lstrip("/"), query, body)
            admin = self._administer(caller, method, path, body)
            if admin is not None:
                return admin
            verb = path.rpartition(":")[2] if path.startswith("/v1/projects/") and "/keyRings/" in path else ""
            if verb in ("encrypt", "decrypt", "testIamPermissions") and "/cryptoKeys/" in path:
                return self._use_key(caller, path.removeprefix("/v1/").rpartition(":")[0], verb, body)
        if caller is not None:
            return 403, error(403, f"{caller} may not administer {path} in this fake", "forbidden")
        return self.answer(method, path, query, body)

    def _bucket(
        self, caller: str | None, method: str, bucket: str, rest: str, query: dict[str, list[str]], body: Any
    ) -> tuple[int, Any]:
        if rest == "":
            if caller is None and (method != "GET" or query.get("fields") != ["projectNumber"]):
                return self.answer(method, f"/storage/v1/b/{bucket}", query, body)
            denied = self._check(caller, "storage.buckets.get" if method == "GET" else "storage.buckets.update", bucket)
            if denied or method != "GET":
                return denied or self.answer(method, f"/storage/v1/b/{bucket}", query, body)
            number = self.numbers.get(self.bucket_projects.get(bucket, self.project), DEFAULT_NUMBER)
            return denied or (200, {**self.buckets[bucket], "projectNumber": number})
        if rest == "iam":
            permission = BUCKET_IAM[0] if method == "GET" else BUCKET_IAM[1]
            if caller is not None:
                denied = self._check(caller, permission, bucket)
                if denied:
                    return denied
            return self.answer(method, f"/storage/v1/b/{bucket}/iam", query, body)
        return self._objects(caller, method, bucket, rest, query)

    def _administer(self, caller: str | None, method: str, path: str, body: Any) -> tuple[int, Any] | None:
        """Resource Manager, IAM, IAM Credentials, and a key ring's or (as a member) a key's policy; None: not such a
        request."""
        node = re.fullmatch(r"/v3/((?:folders|organizations)/[^/:]+)(?::(getIamPolicy))?", path)
        if node:
            return self._node(caller, node.group(1), node.group(2) or "")
        project = re.fullmatch(r"/v3/projects/([^/:]+)(?::(\w+))?", path)
        if project:
            if caller is None and project.group(2) == "testIamPermissions":
                return None  # FakeStateApis' own answer (``project_held``)
            return self._project(caller, project.group(1), project.group(2) or "", body)
        account = re.fullmatch(r"/v1/projects/[^/]+/serviceAccounts/([^/:]+):(\w+)", path)
        if account:
            return self._account(caller, unquote(account.group(1)), account.group(2), body)
        pool = re.fullmatch(r"/v1/(projects/[^/]+/locations/global/workloadIdentityPools/[^/:]+):(\w+IamPolicy)", path)
        if pool:
            name, verb = pool.groups()
            if name not in self.pool_policies:
                return 404, error(404, f"Requested entity was not found: {name}.", "notFound")
            return self._policy_verb(caller, name, "iam.workloadIdentityPools", verb, self.pool_policies, name, body)
        role = re.fullmatch(r"/v1/((?:projects/[^/]+/)?roles/[^/]+)", path)
        if role and method == "GET":
            permissions = self.role_permissions(unquote(role.group(1)))
            if not permissions:
                return 404, error(404, f"The role named {role.group(1)} was not found.", "notFound")
            return 200, {"name": role.group(1), "includedPermissions": list(permissions), "stage": "GA"}
        kms = re.fullmatch(r"/v1/(projects/[^/]+/locations/[^/]+/keyRings/[^/:]+)(/cryptoKeys/[^/:]+)?:(\w+)", path)
        if kms and kms.group(3) in ("getIamPolicy", "setIamPolicy", "testIamPermissions"):
            ring, key, verb = kms.groups()
            if key is None:
                return self._kms_policy(caller, ring, verb, body)
            if caller is not None and verb != "testIamPermissions":  # the owner's: FakeStateApis' own answer
                return self._kms_policy(caller, ring + key, verb, body)
        return None

    def _policy_verb(
        self, caller: str | None, resource: str, kind: str, verb: str, policies: dict[str, Any], key: str, body: Any
    ) -> tuple[int, Any]:
        """``getIamPolicy``/``setIamPolicy``/``testIamPermissions`` of one resource's policy (``policies[key]``)."""
        if verb == "testIamPermissions":
            asked = (body or {}).get("permissions", [])
            held = [p for p in asked if self.allows(caller, p, resource)]
            return 200, {"permissions": held} if held else {}
        permission = f"{kind}.{'getIamPolicy' if verb == 'getIamPolicy' else 'setIamPolicy'}"
        if not self.allows(caller, permission, resource):
            return self._deny(caller or "", permission, resource)
        if verb == "setIamPolicy":
            policies[key] = [dict(b) for b in (body or {}).get("policy", {}).get("bindings", [])]
        bindings = policies.get(key, [])
        version = 3 if any("condition" in b for b in bindings) else 1
        return 200, {"version": version, "etag": "BwY=", **({"bindings": bindings} if bindings else {})}

    def _project(self, caller: str | None, project: str, verb: str, body: Any) -> tuple[int, Any]:
        project = self.project_id(project)
        if project not in self.project_policies:
            return 403, error(403, f"The caller does not have permission (project {project})", "forbidden")
        if not verb:
            if not self.allows(caller, "resourcemanager.projects.get", f"projects/{project}"):
                return self._deny(caller or "", "resourcemanager.projects.get", f"projects/{project}")
            found = {"name": f"projects/{self.numbers.get(project, DEFAULT_NUMBER)}", "projectId": project}
            return 200, {**found, **({"parent": self.parents[project]} if project in self.parents else {})}
        resource = f"projects/{project}"
        return self._policy_verb(
            caller, resource, "resourcemanager.projects", verb, self.project_policies, project, body
        )

    def _node(self, caller: str | None, name: str, verb: str) -> tuple[int, Any]:
        """A folder's ``get`` or an organization's or folder's ``getIamPolicy`` (only the owner here)."""
        if caller is not None or name not in self.node_policies:
            return 403, error(403, f"The caller does not have permission ({name})", "forbidden")
        if not verb:
            return 200, {"name": name, **({"parent": self.parents[name]} if name in self.parents else {})}
        bindings = self.node_policies[name]
        return 200, {"version": 3, "etag": "BwY=", **({"bindings": bindings} if bindings else {})}

    def _account(self, caller: str | None, email: str, verb: str, body: Any) -> tuple[int, Any]:
        if email not in self.account_policies:
            return 404, error(404, f"Unknown service account {email}.", "notFound")
        if verb == "generateAccessToken":
            if not self.allows(caller, "iam.serviceAccounts.getAccessToken", email):
                return self._deny(caller or "", "iam.serviceAccounts.getAccessToken", email)
            self.minted.append((caller or "", email))
            return 200, {"accessToken": f"serviceAccount:{email}", "expireTime": "2030-01-01T00:00:00Z"}
        return self._policy_verb(caller, email, "iam.serviceAccounts", verb, self.account_policies, email, body)

    def _kms_policy(self, caller: str | None, resource: str, verb: str, body: Any) -> tuple[int, Any]:
        is_key = "/cryptoKeys/" in resource
        if resource not in (self.keys if is_key else self.rings):
            kind = "CryptoKey" if is_key else "KeyRing"
            return 404, error(404, f"{kind} {resource} not found.", "notFound")
        policies = self.key_policies if is_key else self.ring_policies
        kind = "cloudkms.cryptoKeys" if is_key else "cloudkms.keyRings"
        return self._policy_verb(caller, resource, kind, verb, policies, resource, body)

    def _objects(
        self, caller: str | None, method: str, bucket: str, rest: str, query: dict[str, list[str]]
    ) -> tuple[int, Any]:
        if rest == "iam/testPermissions":
            asked = query.get("permissions", [])
            held = [p for p in asked if self._check_quiet(caller, p, bucket)]
            return 200, {"kind": "storage#testIamPermissionsResponse", **({"permissions": held} if held else {})}
        if rest == "o":
            denied = self._check(caller, "storage.objects.list", bucket)
            if denied:
                return denied
            prefix = query.get("prefix", [""])[0]
            names = sorted(n for (b, n) in self.contents if b == bucket and n.startswith(prefix))
            return 200, {"kind": "storage#objects", "items": [self._meta(bucket, n) for n in names]}
        name = unquote(rest.removeprefix("o/"))
        permission = "storage.objects.delete" if method == "DELETE" else "storage.objects.get"
        denied = self._check(caller, permission, bucket, name)
        if denied:
            return denied
        if (bucket, name) not in self.contents:
            return 404, error(404, f"No such object: {bucket}/{name}", "notFound")
        if method == "DELETE":
            del self.contents[(bucket, name)]
            return 204, None
        return 200, self._meta(bucket, name)

    def _meta(self, bucket: str, name: str) -> dict[str, Any]:
        data = self.contents[(bucket, name)]
        return {"kind": "storage#object", "bucket": bucket, "name": name, "size": str(len(data)), "generation": "1"}

    def _media(
        self, caller: str | None, method: str, path: str, query: dict[str, list[str]], raw: bytes, ctype: str
    ) -> tuple[int, Any]:
        parts = path.split("/")  # ["", upload|download, storage, v1, b, <bucket>, o, ...]
        bucket = parts[5]
        if bucket not in self.buckets:
            return 404, error(404, "The specified bucket does not exist.", "notFound")
        if parts[1] == "download":
            name = unquote("/".join(parts[7:]))
            denied = self._check(caller, "storage.objects.get", bucket, name)
            if denied:
                return denied
            if (bucket, name) not in self.contents:
                return 404, error(404, f"No such object: {bucket}/{name}", "notFound")
            return 200, self.contents[(bucket, name)]
        message = email.message_from_bytes(f"Content-Type: {ctype}\r\n\r\n".encode() + raw)
        parts_of: list[Any] = message.get_payload()  # type: ignore[assignment]
        metadata, media = [bytes(part.get_payload(decode=True)) for part in parts_of]
        name = json.loads(metadata)["name"]
        denied = self._check(caller, "storage.objects.create", bucket, name)
        if denied:
            return denied
        if (bucket, name) in self.contents:
            replace = self._check(caller, "storage.objects.delete", bucket, name)
            if replace:
                return replace
        self.contents[(bucket, name)] = media
        return 200, self._meta(bucket, name)

    def _use_key(self, caller: str | None, key: str, verb: str, body: Any) -> tuple[int, Any]:
        if key not in self.keys:
            return 404, error(404, f"CryptoKey {key} not found.", "notFound")
        if verb == "testIamPermissions":
            asked = (body or {}).get("permissions", [])
            held = [p for p in asked if self.allows(caller, p, key)]
            return 200, {"permissions": held} if held else {}
        permission = f"cloudkms.cryptoKeyVersions.useTo{verb.capitalize()}"
        if not self.allows(caller, permission, key):
            self.refused.append((caller or "", permission, key))
            return 403, error(403, f"Permission '{permission}' denied on resource '{key}'.", "forbidden")
        if verb == "encrypt":
            given = base64.b64decode(body["plaintext"])
            wrapped = base64.b64encode(key.encode() + b"|" + given).decode()
            return 200, {"name": f"{key}/cryptoKeyVersions/1", "ciphertext": wrapped}
        made_by, _, plain = base64.b64decode(body["ciphertext"]).partition(b"|")
        if made_by.decode() != key:
            return 400, error(400, "Decryption failed: the ciphertext is invalid.", "badRequest")
        return 200, {"plaintext": base64.b64encode(plain).decode()}


class _Handler(QuietHandler):
    server: Any

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        ctype = self.headers.get("Content-Type") or ""
        body = json.loads(raw) if raw and ctype.startswith("application/json") else None
        auth = self.headers.get("Authorization") or ""
        caller = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None
        parts = urlsplit(self.path)
        status, reply = self.server.fake.answer_as(
            caller, self.command, parts.path, parse_qs(parts.query), body, raw, ctype
        )
        if isinstance(reply, bytes):
            self.send_body(status, reply, "application/octet-stream")
        elif reply is None:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self.send_json(status, reply)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve  # noqa: N815


@contextmanager
def policed_apis(project: str = "acme-tpu") -> Iterator[PolicedApis]:
    fake = PolicedApis(project)
    server = LoopbackServer(("127.0.0.1", 0), _Handler)
    server.fake = fake  # type: ignore[attr-defined]
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    server.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


def as_member(fake: PolicedApis, member: str | None) -> tuple[Any, Any]:
    """A storage and a Cloud KMS client (REST) on the loopback server, acting as ``member`` (None: the owner)."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import kms_v1, storage
    from google.oauth2.credentials import Credentials

    credentials: Any = AnonymousCredentials() if member is None else Credentials(token=member)
    options = {"api_endpoint": fake.url}
    storage_client = storage.Client(project=fake.project, credentials=credentials, client_options=options)
    kms = kms_v1.KeyManagementServiceClient(transport="rest", credentials=credentials, client_options=options)
    return storage_client, kms


class PropagatingApis(PolicedApis):
    """``PolicedApis`` where a binding takes effect only ``delay`` seconds (by ``clock``) after it is granted, as IAM
    applies an access change ("typically 2 minutes, potentially 7 minutes or longer",
    https://cloud.google.com/iam/docs/access-change-propagation): until then every request it alone would allow is
    answered 403. A binding not granted here (the bucket's own) is in effect from the start. Also answers a caller's
    ``buckets.get`` (``GET /storage/v1/b/<bucket>``: ``storage.buckets.get``, ``legacyBucketReader``'s), and 404 for a
    bucket that does not exist (as Cloud Storage does, whoever asks)."""

    def __init__(self, project: str, clock: Any, delay: float) -> None:
        super().__init__(project)
        self.clock = clock
        self.delay = delay
        self.effective_at: dict[int, float] = {}
        """id() of a binding of ``bucket_policies`` -> when it takes effect."""

    def grant(self, bucket: str, role: str, member: str, condition: dict[str, str] | None = None) -> None:
        """One binding of ``member`` on ``bucket`` (with its condition), in effect ``delay`` seconds from now."""
        binding: dict[str, Any] = {"role": role, "members": [member], **({"condition": condition} if condition else {})}
        self.bucket_policies[bucket].append(binding)
        self.effective_at[id(binding)] = self.clock() + self.delay

    def permitted(self, caller: str | None, permission: str, bindings: list[dict[str, Any]], resource: str) -> bool:
        now = self.clock()
        applied = [b for b in bindings if self.effective_at.get(id(b), now) <= now]
        return super().permitted(caller, permission, applied, resource)

    def answer_as(
        self, caller: str | None, method: str, path: str, query: dict[str, list[str]], body: Any, raw: bytes, ctype: str
    ) -> tuple[int, Any]:
        bucket = re.match(r"^/storage/v1/b/([^/]+)(?:/o/.*)?$", path)
        if caller is not None and bucket and bucket.group(1) not in self.buckets:
            return 404, error(404, "The specified bucket does not exist.", "notFound")
        if caller is not None and method == "GET" and bucket and path.count("/") == 4:
            with self.lock:
                denied = self._check(caller, "storage.buckets.get", bucket.group(1))
                return denied or (200, self.buckets[bucket.group(1)])
        return super().answer_as(caller, method, path, query, body, raw, ctype)


@contextmanager
def propagating_apis(project: str, clock: Any, delay: float) -> Iterator[PropagatingApis]:
    """``PropagatingApis`` on loopback, its storage API enabled."""
    fake = PropagatingApis(project, clock, delay)
    fake.services["storage.googleapis.com"] = "ENABLED"
    server = LoopbackServer(("127.0.0.1", 0), _Handler)
    server.fake = fake  # type: ignore[attr-defined]
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    server.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


# ---------------------------------------------------------------------------------------------
# A cluster's RBAC, served by the loopback Kubernetes API (tests/fake_kube.py)

RBAC = "rbac.authorization.k8s.io"
RBAC_KINDS = {
    "ClusterRoleBinding": (RBAC, "v1", "clusterrolebindings", False),
    "ClusterRole": (RBAC, "v1", "clusterroles", False),
    "RoleBinding": (RBAC, "v1", "rolebindings", True),
    "Role": (RBAC, "v1", "roles", True),
}
"""Kind -> (group, version, plural, namespaced), as ``tests.fake_kube.KINDS`` holds the kinds it serves."""


def serve_rbac(monkeypatch: Any) -> None:
    """Let ``tests.fake_kube``'s server hold and list RBAC objects (its registry of kinds, for this test)."""
    from tests import fake_kube

    for kind, entry in RBAC_KINDS.items():
        monkeypatch.setitem(fake_kube.KINDS, kind, entry)
        monkeypatch.setitem(fake_kube.SERVED, entry[:3], (kind, entry[3]))
        monkeypatch.setitem(fake_kube.PLURALS, kind, entry[2])


def role_binding(
    name: str, role: str, subjects: list[tuple[str, str]], namespace: str = "", role_kind: str = "ClusterRole"
) -> dict[str, Any]:
    """A ClusterRoleBinding (or, with ``namespace``, a RoleBinding) of ``subjects`` ((kind, name)) to ``role``."""
    kind = "RoleBinding" if namespace else "ClusterRoleBinding"
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": kind,
        "metadata": {"name": name, **({"namespace": namespace} if namespace else {})},
        "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": role},
        "subjects": [
            {"kind": k, "name": n, **({"apiGroup": RBAC} if k != "ServiceAccount" else {"namespace": "kube-system"})}
            for k, n in subjects
        ],
    }


def gke_defaults() -> list[dict[str, Any]]:
    """Bindings every GKE cluster has (Kubernetes' defaults: ``cluster-admin`` to the group ``system:masters``, the
    controllers' service accounts): none names a Google identity."""
    return [
        role_binding("cluster-admin", "cluster-admin", [("Group", "system:masters")]),
        role_binding(
            "system:controller:clusterrole-aggregation-controller", "admin", [("ServiceAccount", "aggregator")]
        ),
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "view"},
            "rules": [{"apiGroups": [""], "resources": ["pods", "configmaps"], "verbs": ["get", "list", "watch"]}],
        },
    ]


# ---------------------------------------------------------------------------------------------
# A project as its stacks' set-up leaves it


def deployer_roles() -> tuple[str, ...]:
    """The roles docs/permissions.md "The roles" gives the account that runs `pulumi up` (a deploy account), on the
    project."""
    from infra.gcp.permissions import GRANTS

    return tuple(grant.role for grant in GRANTS)


def lay_out_state(
    fake: PolicedApis, project: str, bucket: str, key: str, writers: tuple[str, ...], readers: tuple[str, ...]
) -> None:
    """A stack's state bucket and key in ``project`` as `make state-bucket` leaves them (its APIs on; no convenience
    member; the writers ``objectUser`` and ``cryptoKeyEncrypterDecrypter``, the readers ``objectViewer`` and
    ``cryptoKeyDecrypter``, on the bucket and the key themselves), and every service account named there."""
    from tests.fake_compute import bucket as bucket_reply

    fake.services.update({"storage.googleapis.com": "ENABLED", "cloudkms.googleapis.com": "ENABLED"})
    fake.project_policies.setdefault(project, [])
    fake.numbers.setdefault(project, str(100000000000 + len(fake.numbers)))
    fake.buckets[bucket] = bucket_reply(bucket)
    fake.bucket_projects[bucket] = project
    fake.bucket_policies[bucket] = [
        {"role": "roles/storage.objectUser", "members": list(writers)},
        {"role": "roles/storage.objectViewer", "members": list(readers)},
    ]
    ring = key.split("/cryptoKeys/")[0]
    fake.rings.setdefault(ring, {"name": ring, "createTime": "2026-12-05T09:00:00Z"})
    fake.ring_policies.setdefault(ring, [])
    primary = {"name": f"{key}/cryptoKeyVersions/1", "state": "ENABLED"}
    fake.keys[key] = {"name": key, "purpose": "ENCRYPT_DECRYPT", "primary": primary}
    fake.key_policies[key] = [
        {"role": "roles/cloudkms.cryptoKeyEncrypterDecrypter", "members": list(writers)},
        {"role": "roles/cloudkms.cryptoKeyDecrypter", "members": list(readers)},
    ]
    for member in (*writers, *readers):
        if member.startswith("serviceAccount:"):
            fake.account_policies.setdefault(member.split(":", 1)[1], [])


def grant(policies: dict[str, list[dict[str, Any]]], on: str, role: str, member: str, expression: str = "") -> None:
    """Add ``member`` in ``role`` (with its condition) to the policy of ``on`` in ``policies``."""
    policies.setdefault(on, []).append(binding(role, member, expression))
