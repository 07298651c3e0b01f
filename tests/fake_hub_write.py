"""The loopback Hub (``tools/rehearse/hub.py``, the rehearsal's) with the tests' accounts and a failure switch.

``WritableHub.fresh()`` is a handler class with a Hub of its own: the repositories ``PUBLIC_REPO`` and
``PRIVATE_REPO`` (each a ``main`` branch), alice's tokens (``TOKENS``: classic write and read, fine-grained ones scoped
to the ``acme`` org) and her organisations (``ORG_ROLES``). Its ``repos`` and ``requests`` are the Hub's, and ``fail``
plans failures: endpoint name -> a status to fail its next request with (a list: one status per request, in order).
Names: whoami, create, validate-yaml, branch, preupload, batch, upload, verify, commit, refs, info, tree, auth-check,
commits, settings, resolve."""

from __future__ import annotations

from typing import Any

from tools.rehearse.hub import HubHandler, HubReplyError
from tools.rehearse.hub_repos import Blob, Hub, Repo, new_repo

__all__ = ["FINE_ACME", "FINE_READ", "PRIVATE_REPO", "PUBLIC_REPO", "READ_ONLY", "WRITE", "Blob", "WritableHub"]

USER = "alice"
WRITE = "hf_writeTOKENalice"
"""Classic write token of ``alice``."""
READ_ONLY = "hf_readTOKENalice"
"""Classic read token of ``alice``: reads what alice may read, writes nothing."""
FINE_ACME = "hf_fineTOKENacme"
"""Fine-grained token of ``alice`` scoped to the ``acme`` org with ``repo.content.read`` and ``repo.write``."""
FINE_READ = "hf_fineTOKENreadonly"
"""Fine-grained token of ``alice`` scoped to ``acme`` with ``repo.content.read`` only."""
ORG_ROLES = {"acme": "write", "viewers": "read", "contrib": "contributor", "bosses": "admin"}
"""alice's organisations and her role in each (``contributor``: may create repos, write only to her own)."""
PUBLIC_REPO, PRIVATE_REPO = "acme/public-model", "acme/private-model"
"""The repositories every fresh Hub starts with (a ``main`` branch whose one commit holds ``.gitattributes``)."""


def _scoped(permissions: list[str]) -> dict:
    return {
        "canReadGatedRepos": True,
        "global": [],
        "scoped": [
            {"entity": {"_id": "65f0acme0000000000000001", "type": "org", "name": "acme"}, "permissions": permissions}
        ],
    }


TOKENS: dict[str, dict] = {
    WRITE: {"displayName": "ci-write", "role": "write"},
    READ_ONLY: {"displayName": "ci-read", "role": "read"},
    FINE_ACME: {
        "displayName": "ci-acme",
        "role": "fineGrained",
        "fineGrained": _scoped(["repo.content.read", "repo.write"]),
    },
    FINE_READ: {"displayName": "ci-acme-read", "role": "fineGrained", "fineGrained": _scoped(["repo.content.read"])},
}
"""The ``auth.accessToken`` of each known token (all of them ``alice``'s); any other token is a 401."""


def whoami(token: str) -> dict:
    """The ``/api/whoami-v2`` answer for a known token."""
    orgs = [
        {
            "type": "org",
            "id": f"65f0{name:0>20}",
            "name": name,
            "fullname": name.title(),
            "email": None,
            "canPay": False,
            "periodEnd": None,
            "avatarUrl": f"/avatars/{name}.svg",
            "roleInOrg": role,
            "isEnterprise": False,
        }
        for name, role in ORG_ROLES.items()
    ]
    access = {**TOKENS[token], "createdAt": "2025-01-01T00:00:00.000Z"}
    return {
        "type": "user",
        "id": "65f0a11ce000000000000001",
        "name": USER,
        "fullname": "Alice Example",
        "email": "alice@example.com",
        "emailVerified": True,
        "isPro": False,
        "canPay": False,
        "periodEnd": None,
        "avatarUrl": "/avatars/alice.svg",
        "orgs": orgs,
        "auth": {"type": "access_token", "accessToken": access},
    }


def _permissions(token: str, namespace: str) -> list[str] | None:
    """A fine-grained token's permissions on ``namespace`` (``[]`` if none), None for a classic token."""
    fine = TOKENS[token].get("fineGrained")
    if fine is None:
        return None
    return [p for entry in fine["scoped"] if entry["entity"]["name"] == namespace for p in entry["permissions"]]


def may_read(token: str | None, repo: Repo) -> bool:
    """Public repositories to anyone; private ones to alice's namespace and orgs (and the token's scope)."""
    if not repo.private:
        return True
    if token is None:
        return False
    permissions = _permissions(token, repo.namespace)
    if permissions is not None and "repo.content.read" not in permissions:
        return False
    return repo.namespace == USER or repo.namespace in ORG_ROLES


def may_write(token: str | None, namespace: str, repo: Repo | None = None) -> bool:
    """Whether ``token`` may write to ``repo`` (None: create a repository) under ``namespace``."""
    if token is None or TOKENS[token]["role"] == "read":
        return False
    permissions = _permissions(token, namespace)
    if permissions is not None and "repo.write" not in permissions:
        return False
    if namespace == USER:
        return True
    role = ORG_ROLES.get(namespace)
    return role in ("write", "admin") or (role == "contributor" and (repo is None or repo.created_by == USER))


class Alice:
    """alice's accounts (``TOKENS``, ``ORG_ROLES``): what the Hub's ``Accounts`` asks."""

    user = USER

    def known(self, token: str) -> bool:
        return token in TOKENS

    def whoami(self, token: str) -> dict[str, Any]:
        return whoami(token)

    def may_read(self, token: str | None, repo: Repo) -> bool:
        return may_read(token, repo)

    def may_write(self, token: str | None, namespace: str, repo: Repo | None = None) -> bool:
        return may_write(token, namespace, repo)


class WritableHub(HubHandler):
    """The Hub with alice's accounts and a failure switch; ``fresh()`` for a test's own."""

    fail: dict[str, int | list[int]]
    repos: dict[str, Repo]
    requests: list[str]

    @classmethod
    def fresh(cls) -> type[WritableHub]:
        """A Hub of its own: the two starting repositories, an empty request log, no failures planned."""
        hub = Hub(Alice())
        hub.add(new_repo(PUBLIC_REPO))
        hub.add(new_repo(PRIVATE_REPO, private=True))
        return type("FreshWritableHub", (cls,), {"hub": hub, "repos": hub.repos, "requests": hub.requests, "fail": {}})

    def checkpoint(self, endpoint: str) -> None:
        plan = self.fail.get(endpoint)
        if plan is None:
            return
        if isinstance(plan, list):
            status = plan.pop(0)
            if not plan:
                del self.fail[endpoint]
        else:
            status = plan
            del self.fail[endpoint]
        raise HubReplyError(status, None, f"{endpoint} failed (a failure the test asked for)")
