"""The access audit's reads of the world (``tools/audit.py``), each bounded and parsed where it is read.

Google's IAM policies and roles come through google-auth's ``AuthorizedSession`` (the session every google-cloud
REST client uses; Resource Manager and IAM have no client among the project's dependencies), one session for every
API, its replies through the one bounded read (``infra.gcp.capacity.reads.cap_replies``: the size cap, a JSON
object), each read within the ``iam-audit`` budget and retried on 429/5xx (``bounded_read``), every failure one
``ReadFailedError`` line naming what was read and the API:

- Resource Manager v3 ``projects.get`` and ``folders.get`` (a project's number and its parents), and the
  ``getIamPolicy`` of a project, a folder and an organization (``POST .../v3/projects/P:getIamPolicy``,
  https://cloud.google.com/resource-manager/reference/rest/v3/projects/getIamPolicy: a node's own policy, so each
  ancestor's is read too);
- Cloud KMS ``keyRings.getIamPolicy`` and ``cryptoKeys.getIamPolicy`` (``GET .../v1/<resource>:getIamPolicy``,
  https://cloud.google.com/kms/docs/reference/rest/v1/projects.locations.keyRings/getIamPolicy);
- Cloud Storage ``buckets.get`` (its ``projectNumber``) and ``buckets.getIamPolicy`` (``GET .../b/B/iam``,
  https://cloud.google.com/storage/docs/json_api/v1/buckets/getIamPolicy);
- IAM ``serviceAccounts.getIamPolicy`` (``POST .../v1/projects/-/serviceAccounts/E:getIamPolicy``,
  https://cloud.google.com/iam/docs/reference/rest/v1/projects.serviceAccounts/getIamPolicy),
  ``workloadIdentityPools.getIamPolicy`` (``POST .../v1/projects/N/locations/global/workloadIdentityPools/ID
  :getIamPolicy``, https://cloud.google.com/iam/docs/reference/rest/v1/projects.locations.workloadIdentityPools/
  getIamPolicy: a pool has a policy of its own, and its providers are in it) and ``roles.get``
  (``GET .../v1/roles/R`` or ``.../v1/projects/P/roles/R``, https://cloud.google.com/iam/docs/reference/rest/v1/
  roles/get: a predefined role's ``includedPermissions``).

Every policy is asked at version 3, so that conditional bindings come with their conditions. The cluster's RBAC is
read through the kubernetes client with the stack's kubeconfig (``infra.k8s.live.ClusterReader``: bounded, one line
on failure), as `make status` reads the cluster.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

from core import deadline
from infra.gcp.capacity.reads import ReadFailedError, bounded_read, cap_replies
from infra.k8s import live
from tools.audit_model import Binding, Node, bindings_of, permissions_of

T = TypeVar("T")
SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
RBAC = ("rbac.authorization.k8s.io", "v1")


@dataclass(frozen=True)
class Endpoints:
    """Where each API answers (tests point them all at one loopback server)."""

    resource_manager: str = "https://cloudresourcemanager.googleapis.com"
    kms: str = "https://cloudkms.googleapis.com"
    storage: str = "https://storage.googleapis.com"
    iam: str = "https://iam.googleapis.com"

    @staticmethod
    def at(url: str) -> Endpoints:
        return Endpoints(url, url, url, url)


class Reads:
    """The IAM reads of one audit, on one capped ``AuthorizedSession``; ``None`` from a read: the resource does not
    exist (HTTP 404)."""

    def __init__(
        self, credentials: Any = None, endpoints: Endpoints | None = None, budget: deadline.Budget | None = None
    ) -> None:
        from google.auth.transport.requests import AuthorizedSession

        if credentials is None:
            import google.auth

            credentials, _project = google.auth.default(scopes=SCOPES)
        self.endpoints = endpoints or Endpoints()
        self.budget = budget or deadline.BUDGETS["iam-audit"]
        self._session = AuthorizedSession(credentials)
        cap_replies(self._session)
        self.broken = ""
        """Why every later read fails at once: one read had no answer in time (a server that hangs is asked once,
        not once per policy)."""

    def close(self) -> None:
        self._session.close()

    def _read(
        self, what: str, source: str, method: str, url: str, parse: Callable[[Any], T], body: Any = None
    ) -> T | None:
        from google.api_core import exceptions as api
        from requests import exceptions as requests_errors
        from urllib3 import exceptions as urllib3_errors

        def call(options: dict[str, Any]) -> T:
            def once() -> T:
                try:
                    response = self._session.request(method, url, json=body, timeout=options["timeout"])
                except urllib3_errors.HTTPError as err:  # a reset while the capped adapter reads the body
                    raise requests_errors.ConnectionError(type(err).__name__) from None
                if response.status_code >= 400:
                    raise api.from_http_response(response)
                return parse(json.loads(response.content))

            result: T = options["retry"](once)()
            return result

        if self.broken:
            raise ReadFailedError(f"{what}: not asked ({self.broken})")
        try:
            return bounded_read(what, source, call, self, self.budget)  # type: ignore[arg-type]
        except api.NotFound:
            return None
        except ReadFailedError as err:
            if "no answer within" in str(err) or "no usable answer in time" in str(err):
                self.broken = f"an earlier read of {source} had no answer in time"
            raise

    def parent(self, name: str) -> Node | None:
        """A project's number, id and parent, or a folder's parent (``projects/<id or number>`` or ``folders/<id>``:
        Resource Manager v3 ``projects.get``, ``folders.get``, whose ``name`` is ``projects/<number>``)."""

        def named(reply: Any) -> Node:
            found = reply if isinstance(reply, dict) else {}
            number, parent, project = found.get("name"), found.get("parent"), found.get("projectId")
            number = number.rpartition("/")[2] if isinstance(number, str) else ""
            parent = parent if isinstance(parent, str) and parent.startswith(("folders/", "organizations/")) else ""
            return Node(number, parent, project if isinstance(project, str) else "")

        url = f"{self.endpoints.resource_manager}/v3/{quote(name)}"
        return self._read(name.replace("s/", " ", 1), "Resource Manager", "GET", url, named)

    def node_policy(self, name: str) -> tuple[Binding, ...] | None:
        """The policy of ``projects/<p>``, ``folders/<id>`` or ``organizations/<id>`` (Resource Manager v3
        ``getIamPolicy``)."""
        url = f"{self.endpoints.resource_manager}/v3/{quote(name)}:getIamPolicy"
        what = f"the IAM policy of {name.replace('s/', ' ', 1)}"
        body = {"options": {"requestedPolicyVersion": 3}}
        return self._read(what, "Resource Manager", "POST", url, lambda r: bindings_of(r, what), body)

    def kms_policy(self, resource: str) -> tuple[Binding, ...] | None:
        """A key ring's or key's policy (``projects/P/locations/L/keyRings/R[/cryptoKeys/K]``)."""
        url = f"{self.endpoints.kms}/v1/{quote(resource)}:getIamPolicy?options.requestedPolicyVersion=3"
        what = f"the IAM policy of {resource}"
        return self._read(what, "Cloud KMS", "GET", url, lambda r: bindings_of(r, what))

    def bucket_project(self, bucket: str) -> str | None:
        """The number of the project that owns ``bucket`` ("" when the reply names none)."""

        def number(reply: Any) -> str:
            value = reply.get("projectNumber") if isinstance(reply, dict) else None
            return str(value) if isinstance(value, (str, int)) and str(value).isdigit() else ""

        url = f"{self.endpoints.storage}/storage/v1/b/{quote(bucket, safe='')}?fields=projectNumber"
        return self._read(f"gs://{bucket}", "Cloud Storage", "GET", url, number)

    def bucket_policy(self, bucket: str) -> tuple[Binding, ...] | None:
        url = f"{self.endpoints.storage}/storage/v1/b/{quote(bucket, safe='')}/iam?optionsRequestedPolicyVersion=3"
        what = f"the IAM policy of gs://{bucket}"
        return self._read(what, "Cloud Storage", "GET", url, lambda r: bindings_of(r, what))

    def account_policy(self, email: str) -> tuple[Binding, ...] | None:
        resource = f"projects/-/serviceAccounts/{quote(email, safe='@')}"
        url = f"{self.endpoints.iam}/v1/{resource}:getIamPolicy?options.requestedPolicyVersion=3"
        what = f"the IAM policy of the account {email}"
        return self._read(what, "IAM", "POST", url, lambda r: bindings_of(r, what), {})

    def pool_policy(self, pool: str) -> tuple[Binding, ...] | None:
        """A Workload Identity pool's own policy (``projects/N/locations/global/workloadIdentityPools/ID``)."""
        url = f"{self.endpoints.iam}/v1/{quote(pool)}:getIamPolicy"
        what = f"the IAM policy of the Workload Identity pool {pool}"
        body = {"options": {"requestedPolicyVersion": 3}}
        return self._read(what, "IAM", "POST", url, lambda r: bindings_of(r, what), body)

    def role(self, role: str) -> frozenset[str] | None:
        """The permissions a role holds (a predefined ``roles/R``, or a custom ``projects/P/roles/R`` or
        ``organizations/O/roles/R``); None: the role does not exist (it grants nothing)."""
        url = f"{self.endpoints.iam}/v1/{quote(role)}"
        return self._read(f"the role {role}", "IAM", "GET", url, lambda r: permissions_of(r, role))


class RbacReader(live.ClusterReader):
    """``ClusterReader`` with the RBAC lists the audit reads (every page, bounded, one line on failure)."""

    def rbac(self, plural: str, namespace: str = "") -> live.Objects:
        """``clusterrolebindings``/``clusterroles`` (cluster-wide), or ``rolebindings``/``roles`` of ``namespace``."""
        group, version = RBAC
        if namespace:
            path = f"/apis/{group}/{version}/namespaces/{namespace}/{plural}"
            return self._pages(path, lambda api: api.custom.list_namespaced_custom_object, (*RBAC, namespace, plural))
        path = f"/apis/{group}/{version}/{plural}"
        return self._pages(path, lambda api: api.custom.list_cluster_custom_object, (*RBAC, plural))
