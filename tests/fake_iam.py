"""The loopback Cloud Storage and Cloud KMS of ``tests/fake_state_apis.py`` with IAM enforced per caller: every
request is made as the principal its ``Authorization: Bearer <member>`` header names (``as_member``), and is answered
as Google answers a caller without the permission, 403, unless a binding of the bucket's or the key's policy grants
it (its condition, a ``resource.name.startsWith(...)`` disjunction as ``infra.gcp.access`` writes them, evaluated on
the object's resource name). A request without a token is the project's owner (what `make state-bucket` runs as).

Besides the routes of ``FakeStateApis`` it serves what the diy backend does to a stack's state (pulumi/pulumi
``pkg/backend/diy/store.go``, ``lock.go``: the checkpoint and the lock are objects of the state bucket) and what the
``gcpkms://`` secrets provider does with the stack's key (``Decrypt`` of the stack file's ``encryptedkey``, ``Encrypt``
of a new one), through the official clients' REST paths:

- google-cloud-storage: ``objects.insert`` (``POST /upload/storage/v1/b/<b>/o?uploadType=multipart``), ``objects.get``
  media (``GET /download/storage/v1/b/<b>/o/<name>?alt=media``) and metadata (``GET /storage/v1/b/<b>/o/<name>``),
  ``objects.delete`` (``DELETE``), ``objects.list``; ``testIamPermissions`` answers the caller's own;
- google-cloud-kms: ``cryptoKeys.encrypt`` / ``decrypt`` (``POST /v1/<key>:encrypt``, ``:decrypt``), and
  ``testIamPermissions`` the caller's own.

Role -> permissions: the predefined roles' lists (https://cloud.google.com/storage/docs/access-control/iam-roles,
https://cloud.google.com/kms/docs/reference/permissions-and-roles), for the permissions these routes check."""

from __future__ import annotations

import base64
import email
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.fake_compute import error
from tests.fake_state_apis import FakeStateApis
from tests.loopback import LoopbackServer, QuietHandler

OBJECT_READ = ("storage.objects.get", "storage.objects.list")
OBJECT_WRITE = ("storage.objects.create", "storage.objects.delete", "storage.objects.update")
ROLE_PERMISSIONS: dict[str, tuple[str, ...]] = {
    "roles/storage.objectViewer": OBJECT_READ,
    "roles/storage.objectUser": (*OBJECT_READ, *OBJECT_WRITE),
    "roles/storage.objectCreator": ("storage.objects.create",),
    "roles/storage.objectAdmin": (*OBJECT_READ, *OBJECT_WRITE),
    "roles/storage.legacyBucketReader": ("storage.objects.list", "storage.buckets.get"),
    "roles/storage.legacyBucketOwner": ("storage.objects.list", "storage.buckets.get", "storage.buckets.update"),
    "roles/storage.legacyObjectReader": ("storage.objects.get",),
    "roles/storage.legacyObjectOwner": ("storage.objects.get", "storage.objects.update"),
    "roles/cloudkms.cryptoKeyEncrypterDecrypter": (
        "cloudkms.cryptoKeyVersions.useToEncrypt",
        "cloudkms.cryptoKeyVersions.useToDecrypt",
    ),
    "roles/cloudkms.cryptoKeyDecrypter": ("cloudkms.cryptoKeyVersions.useToDecrypt",),
    "roles/cloudkms.cryptoKeyEncrypter": ("cloudkms.cryptoKeyVersions.useToEncrypt",),
}
STARTS_WITH = re.compile(r'^resource\.name\.startsWith\("([^"]*)"\)$')


def holds(condition: dict[str, str] | None, resource: str) -> bool:
    """Whether a binding's condition holds for ``resource`` (an object's ``projects/_/buckets/B/objects/N``, or the
    bucket's ``projects/_/buckets/B`` for a bucket-level request, where an object-name condition cannot hold)."""
    if not condition:
        return True
    found = []
    for part in condition["expression"].split(" || "):
        match = STARTS_WITH.match(part.strip())
        assert match, f"a condition this fake cannot evaluate: {condition['expression']}"
        found.append(resource.startswith(match.group(1)))
    return any(found)


class PolicedApis(FakeStateApis):
    """``FakeStateApis`` whose objects and keys answer each caller by the policies set on them."""

    def __init__(self, project: str = "acme-tpu") -> None:
        super().__init__(project)
        self.contents: dict[tuple[str, str], bytes] = {}
        """(bucket, object name) -> its bytes."""
        self.refused: list[tuple[str, str, str]] = []
        """(caller, permission, resource) of every request answered 403."""

    def permitted(self, caller: str | None, permission: str, bindings: list[dict[str, Any]], resource: str) -> bool:
        if caller is None:
            return True
        return any(
            caller in binding.get("members", [])
            and permission in ROLE_PERMISSIONS.get(binding["role"], ())
            and holds(binding.get("condition"), resource)
            for binding in bindings
        )

    def answer_as(
        self, caller: str | None, method: str, path: str, query: dict[str, list[str]], body: Any, raw: bytes, ctype: str
    ) -> tuple[int, Any]:
        """The reply to ``caller``'s request: JSON, or bytes for a media download."""
        with self.lock:
            if path.startswith("/upload/storage/v1/b/") or path.startswith("/download/storage/v1/b/"):
                return self._media(caller, method, path, query, raw, ctype)
            bucket_path = re.match(r"^/storage/v1/b/([^/]+)/(o(?:/.+)?|iam/testPermissions)$", path)
            if bucket_path and bucket_path.group(1) in self.buckets:
                return self._objects(caller, method, bucket_path.group(1), bucket_path.group(2), query)
            verb = path.rpartition(":")[2] if path.startswith("/v1/projects/") else ""
            if verb in ("encrypt", "decrypt", "testIamPermissions"):
                return self._use_key(caller, path.removeprefix("/v1/").rpartition(":")[0], verb, body)
        if caller is not None:
            return 403, error(403, f"{caller} may not administer {path} in this fake", "forbidden")
        return self.answer(method, path, query, body)

    def _deny(self, caller: str, permission: str, resource: str) -> tuple[int, Any]:
        self.refused.append((caller, permission, resource))
        return 403, error(
            403, f"{caller.split(':', 1)[-1]} does not have {permission} access to {resource}.", "forbidden"
        )

    def _check(self, caller: str | None, permission: str, bucket: str, name: str = "") -> tuple[int, Any] | None:
        resource = f"projects/_/buckets/{bucket}" + (f"/objects/{name}" if name else "")
        if self.permitted(caller, permission, self.bucket_policies[bucket], resource):
            return None
        return self._deny(caller or "", permission, resource)

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

    def _check_quiet(self, caller: str | None, permission: str, bucket: str) -> bool:
        return self.permitted(caller, permission, self.bucket_policies[bucket], f"projects/_/buckets/{bucket}")

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
        bindings = self.key_policies[key]
        if verb == "testIamPermissions":
            asked = (body or {}).get("permissions", [])
            held = [p for p in asked if self.permitted(caller, p, bindings, key)]
            return 200, {"permissions": held} if held else {}
        permission = f"cloudkms.cryptoKeyVersions.useTo{verb.capitalize()}"
        if not self.permitted(caller, permission, bindings, key):
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
