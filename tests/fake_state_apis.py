"""A loopback Cloud Storage (buckets, their IAM policies, object listings), Cloud KMS (key rings, keys, their IAM
policies) and Service Usage API, for ``make state-bucket`` and the permission checks (tools/state_bucket.py,
tools/state_access.py). The REST paths and JSON are the ones the official clients call and parse:

- google-cloud-storage: ``buckets.get`` (``GET /storage/v1/b/<b>``, the bucket's ``projectNumber`` its project's),
  ``insert`` (``POST /storage/v1/b?project=``), ``patch`` (``PATCH``), ``getIamPolicy``/``setIamPolicy``
  (``GET``/``PUT /storage/v1/b/<b>/iam``), ``testIamPermissions`` (``GET /storage/v1/b/<b>/iam/testPermissions``),
  ``objects.list`` (``GET /storage/v1/b/<b>/o``, with ``prefix`` and ``delimiter``: the objects of one level and the
  folders below it as ``prefixes``, https://cloud.google.com/storage/docs/json_api/v1/objects/list); a new bucket's
  policy is the one Cloud Storage gives it, the project's convenience members in the legacy roles
  (https://cloud.google.com/storage/docs/access-control/iam#convenience-values: "When you create a bucket, ... the
  following IAM roles are granted"); a bucket named in ``forbidden`` answers Google's 403 to every request (another
  project's, which this account may not read);
- Resource Manager v3: ``projects.get`` (``GET /v3/projects/<id>``: the project's ``name``, ``projects/<number>``)
  and ``projects.testIamPermissions``;
- google-cloud-kms (``key_management_service/transports/rest_base.py``): ``keyRings`` ``get``/``create``,
  ``cryptoKeys`` ``get``/``create``/``patch``, and ``:getIamPolicy``, ``:setIamPolicy``, ``:testIamPermissions`` of a
  key; a new key has an empty policy (an ``etag`` only);
- google-cloud-service-usage: ``services.get`` and ``services.enable`` (an Operation, done at once, with its
  ``EnableServiceResponse``).

While Cloud KMS or Cloud Storage is disabled in the project, its routes answer Google's 403 ``SERVICE_DISABLED``
(tests/fake_compute.py ``error``). ``held``: the permissions the caller holds on every bucket and key (None: all)."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fake_compute import bucket as bucket_reply
from tests.fake_compute import bucket_not_found, error
from tests.loopback import LoopbackServer, QuietHandler


def default_bucket_policy(project_number: str) -> list[dict[str, Any]]:
    """The bindings Cloud Storage gives a new bucket (the project's convenience members)."""
    owners = [f"projectEditor:{project_number}", f"projectOwner:{project_number}"]
    viewers = [f"projectViewer:{project_number}"]
    return [
        {"role": "roles/storage.legacyBucketOwner", "members": owners},
        {"role": "roles/storage.legacyBucketReader", "members": viewers},
        {"role": "roles/storage.legacyObjectOwner", "members": owners},
        {"role": "roles/storage.legacyObjectReader", "members": viewers},
    ]


class FakeStateApis:
    def __init__(self, project: str = "acme-tpu") -> None:
        self.project = project
        self.services = {"storage.googleapis.com": "DISABLED", "cloudkms.googleapis.com": "DISABLED"}
        """API -> ENABLED | DISABLED: a fresh project."""
        self.buckets: dict[str, dict[str, Any]] = {}
        self.bucket_policies: dict[str, list[dict[str, Any]]] = {}
        self.objects: dict[str, list[str]] = {}
        """Bucket -> object names, for ``objects.list``."""
        self.rings: dict[str, dict[str, Any]] = {}
        self.keys: dict[str, dict[str, Any]] = {}
        self.key_policies: dict[str, list[dict[str, Any]]] = {}
        self.held: set[str] | None = None
        self.project_held: set[str] | None = None
        """What the caller holds on the project (Resource Manager ``projects.testIamPermissions``); None: all."""
        self.project_number = "123456789012"
        """The project's number (``projects.get``), which the buckets it creates carry as ``projectNumber``."""
        self.forbidden: set[str] = set()
        """Buckets this caller may not read: every request on them answers 403."""
        self.unapplied = False
        """``setIamPolicy`` answers as if it applied the policy, and keeps the old one (the read-back must see it)."""
        self.held_after: int = 0
        """Answer ``testIamPermissions`` with nothing this many times first (IAM propagating)."""
        self.requests: list[str] = []
        self.url = ""
        self.lock = threading.Lock()

    # -- routing

    def answer(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        with self.lock:
            self.requests.append(f"{method} {path}")
            if path.startswith("/v3/projects/") and path.endswith(":testIamPermissions"):
                asked = (body or {}).get("permissions", [])
                held = [p for p in asked if self.project_held is None or p in self.project_held]
                return 200, {"permissions": held} if held else {}
            if path.startswith("/v3/projects/") and method == "GET":
                if self.project_held is not None and "resourcemanager.projects.get" not in self.project_held:
                    return 403, error(403, "The caller does not have permission", "forbidden")
                project = path.removeprefix("/v3/projects/")
                return 200, {"name": f"projects/{self.project_number}", "projectId": project, "state": "ACTIVE"}
            if path.startswith("/storage/v1/"):
                return self._disabled("storage.googleapis.com") or self._storage(method, path, query, body)
            if "/services/" in path:
                return self._service(method, path)
            if path.startswith("/v1/projects/"):
                return self._disabled("cloudkms.googleapis.com") or self._kms(method, path, query, body)
            return 404, error(404, f"no route {path}", "notFound")

    def _disabled(self, api: str) -> tuple[int, Any] | None:
        if self.services.get(api) == "ENABLED":
            return None
        message = f"{api} has not been used in project {self.project} before or it is disabled."
        return 403, error(403, message, "accessNotConfigured", service=api)

    def _service(self, method: str, path: str) -> tuple[int, Any]:
        name = path.removeprefix("/v1/").removesuffix(":enable")
        api = name.rsplit("/", 1)[1]
        if method == "POST":
            self.services[api] = "ENABLED"
            response = {
                "@type": "type.googleapis.com/google.api.serviceusage.v1.EnableServiceResponse",
                "service": {"name": name, "state": "ENABLED"},
            }
            return 200, {"name": "operations/acat.p2-42-enable", "done": True, "response": response}
        return 200, {"name": name, "config": {"name": api}, "state": self.services.get(api, "ENABLED")}

    def _granted(self, asked: list[str]) -> list[str]:
        if self.held_after > 0:
            self.held_after -= 1
            return []
        return [p for p in asked if self.held is None or p in self.held]

    def _storage(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        parts = path.removeprefix("/storage/v1/b").strip("/").split("/")
        name = parts[0] if parts[0] else ""
        if name in self.forbidden or (not name and method == "POST" and body["name"] in self.forbidden):
            message = "ops@acme.example does not have storage.buckets.get access to the Google Cloud Storage bucket."
            return 403, error(403, message, "forbidden")
        if not name and method == "POST":
            name = body["name"]
            if name in self.buckets:
                return 409, error(409, "Your previous request to create the named bucket succeeded", "conflict")
            reply = {**bucket_reply(name), "projectNumber": self.project_number}
            self.buckets[name] = {**reply, **body, "location": body.get("location", "US").upper()}
            self.bucket_policies[name] = default_bucket_policy("123456789012")
            return 200, self.buckets[name]
        if name not in self.buckets:
            return bucket_not_found()
        rest = parts[1:]
        if rest == [] and method == "GET":
            return 200, self.buckets[name]
        if rest == [] and method == "PATCH":
            self.buckets[name].update(body)
            return 200, self.buckets[name]
        if rest == ["iam"] and method == "GET":
            return 200, self._bucket_policy(name)
        if rest == ["iam"] and method == "PUT":
            if not self.unapplied:
                self.bucket_policies[name] = [dict(b) for b in body.get("bindings", [])]
            return 200, self._bucket_policy(name)
        if rest == ["iam", "testPermissions"]:
            held = self._granted(query.get("permissions", []))
            return 200, {"kind": "storage#testIamPermissionsResponse", **({"permissions": held} if held else {})}
        if rest == ["o"]:
            return 200, self._list(name, query.get("prefix", [""])[0], query.get("delimiter", [""])[0])
        return 404, error(404, f"no route {path}", "notFound")

    def _list(self, bucket: str, prefix: str, delimiter: str) -> dict[str, Any]:
        """``objects.list``: the objects under ``prefix``; with a ``delimiter``, those of that level alone and the
        folders below it as ``prefixes``."""
        names = [n for n in self.objects.get(bucket, []) if n.startswith(prefix)]
        folders = sorted(
            {
                n[: len(prefix) + n[len(prefix) :].index(delimiter) + 1]
                for n in names
                if delimiter and delimiter in n[len(prefix) :]
            }
        )
        level = [n for n in names if not delimiter or delimiter not in n[len(prefix) :]]
        items = [{"kind": "storage#object", "name": n, "bucket": bucket, "size": "2"} for n in level]
        return {"kind": "storage#objects", "items": items, **({"prefixes": folders} if folders else {})}

    def _bucket_policy(self, name: str) -> dict[str, Any]:
        bindings = self.bucket_policies[name]
        return {
            "kind": "storage#policy",
            "resourceId": f"projects/_/buckets/{name}",
            "version": 3 if any("condition" in b for b in bindings) else 1,
            "etag": base64.b64encode(f"{len(self.requests)}".encode()).decode(),
            "bindings": bindings,
        }

    def _kms(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        resource, _, verb = path.removeprefix("/v1/").partition(":")
        if verb:
            return self._key_iam(resource, verb, body)
        if method == "POST" and resource.endswith("/keyRings"):
            name = f"{resource}/{query['keyRingId'][0]}"
            self.rings[name] = {"name": name, "createTime": "2026-12-05T09:00:00Z"}
            return 200, self.rings[name]
        if method == "POST" and resource.endswith("/cryptoKeys"):
            ring = resource.removesuffix("/cryptoKeys")
            if ring not in self.rings:
                return 404, error(404, f"KeyRing {ring} not found.", "notFound")
            name = f"{resource}/{query['cryptoKeyId'][0]}"  # .../keyRings/R/cryptoKeys/K
            primary = {"name": f"{name}/cryptoKeyVersions/1", "state": "ENABLED"}
            self.keys[name] = {**body, "name": name, "primary": primary, "createTime": "2026-12-05T09:00:01Z"}
            self.key_policies[name] = []
            return 200, self.keys[name]
        if method == "PATCH" and resource in self.keys:
            assert query.get("updateMask") == ["labels"], query
            self.keys[resource]["labels"] = body.get("labels", {})
            return 200, self.keys[resource]
        found = self.keys.get(resource) or self.rings.get(resource)
        if method == "GET" and found:
            return 200, found
        kind = "CryptoKey" if "/cryptoKeys/" in resource else "KeyRing"
        return 404, error(404, f"{kind} {resource} not found.", "notFound")

    def _key_iam(self, key: str, verb: str, body: Any) -> tuple[int, Any]:
        if key not in self.keys:
            return 404, error(404, f"CryptoKey {key} not found.", "notFound")
        if verb == "setIamPolicy" and not self.unapplied:
            self.key_policies[key] = [dict(b) for b in body["policy"].get("bindings", [])]
        if verb == "testIamPermissions":
            held = self._granted((body or {}).get("permissions", []))
            return 200, {"permissions": held} if held else {}
        bindings = self.key_policies[key]
        etag = base64.b64encode(f"BwY{len(self.requests)}".encode()).decode()
        return 200, {"version": 1, "etag": etag, **({"bindings": bindings} if bindings else {})}


class _Handler(QuietHandler):
    server: Any

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        parts = urlsplit(self.path)
        status, reply = self.server.fake.answer(self.command, parts.path, parse_qs(parts.query), body)
        self.send_json(status, reply)

    do_GET = do_POST = do_PUT = do_PATCH = _serve  # noqa: N815


@contextmanager
def fake_state_apis(project: str = "acme-tpu") -> Iterator[FakeStateApis]:
    fake = FakeStateApis(project)
    server = LoopbackServer(("127.0.0.1", 0), _Handler)
    server.fake = fake  # type: ignore[attr-defined]
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    server.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


def admin_clients(fake: FakeStateApis) -> tuple[Any, Any, Any, Any]:
    """``clients`` and a Resource Manager ``projects.testIamPermissions`` client, as `make state-bucket` makes them."""
    from google.auth.credentials import AnonymousCredentials

    from tools.state_bucket import ProjectRecord

    permissions = ProjectRecord(credentials=AnonymousCredentials(), client_options={"api_endpoint": fake.url})
    return (*clients(fake), permissions)


def clients(fake: FakeStateApis) -> tuple[Any, Any, Any]:
    """A storage, Cloud KMS and Service Usage client, anonymous, on the loopback server."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import kms_v1, service_usage_v1, storage

    options = {"api_endpoint": fake.url}
    credentials = AnonymousCredentials()
    storage_client = storage.Client(project="acme-tpu", credentials=credentials, client_options=options)
    kms = kms_v1.KeyManagementServiceClient(transport="rest", credentials=credentials, client_options=options)
    services = service_usage_v1.ServiceUsageClient(transport="rest", credentials=credentials, client_options=options)
    return storage_client, kms, services
