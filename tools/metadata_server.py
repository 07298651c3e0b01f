"""The PR preview's Google credential for the branch's program: one OAuth 2.0 access token, served on 127.0.0.1 as the
Compute Engine metadata server serves a VM's token (docs/guardrails.md "Guardrails and PR review").

The preview workflow's auth step mints the token alone (google-github-actions/auth with ``token_format:
access_token`` and ``create_credentials_file: false``: no credentials file, so nothing that holds the job's OIDC
request token). The preview step starts this file, copied from the base commit to where the branch cannot write,
as the runner's user, with the token on its standard input (never on a command line), and gives the branch's
processes ``GCE_METADATA_HOST`` and ``GCE_METADATA_IP`` naming it. Application Default Credentials then find the token
here in every client the preview starts: google-auth's, for the program's own reads (``compute_engine/_metadata.py``:
the ping at ``GCE_METADATA_IP``, the reads at ``GCE_METADATA_HOST``), and Go's, for the Pulumi CLI's backend and
secrets provider, the gcp provider and gke-gcloud-auth-plugin (``cloud.google.com/go/compute/metadata``: a set
``GCE_METADATA_HOST`` means on Compute Engine, and the token is read from it). What the branch can take away is that
one token, until it expires; nothing here can mint another::

    python metadata_server.py SERVICE_ACCOUNT_EMAIL LIFETIME_SECONDS < token

It prints the port it listens on (one line) and serves until it is ended. As the real server does, it answers a GET
only when it carries ``Metadata-Flavor: Google`` and no ``X-Forwarded-For``, and every answer carries
``Metadata-Flavor: Google``; it answers the paths the clients ask for (the token, the account's email and scopes,
the project, the universe) and nothing else (404); once the lifetime has passed, the token path answers 503 (the
token would be refused anyway). Nothing is logged. Standard library only, run as a file with ``-I``.
"""

from __future__ import annotations

import json
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

ROOT = "/computeMetadata/v1/"
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
"""The scope google-github-actions/auth mints with by default (``access_token_scopes``)."""
EMAIL = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]@([a-z][a-z0-9-]{4,28}[a-z0-9])\.iam\.gserviceaccount\.com\Z")
"""A service account of a project: ``<account>@<project>.iam.gserviceaccount.com`` (the project is the account's)."""
TOKEN = re.compile(r"[A-Za-z0-9._~+/=-]{16,4096}\Z")
MAX_LIFETIME = 43_200
"""12 hours: the most an access token may live (``constraints/iam.allowServiceAccountCredentialLifetimeExtension``)."""


def answers(email: str, token: str, deadline: float, now: float) -> dict[str, tuple[int, str, str]]:
    """Each path's answer (status, content type, body) at ``now``: the account under ``default`` and its email, the
    project the account's (``email`` is one ``EMAIL`` matches)."""
    project = email.split("@", 1)[1].removesuffix(".iam.gserviceaccount.com")
    left = int(deadline - now)
    if left > 0:
        body = {"access_token": token, "expires_in": left, "token_type": "Bearer"}
        issued = (200, "application/json", json.dumps(body))
    else:
        issued = (503, "text/plain", "the preview's access token has expired")
    found: dict[str, tuple[int, str, str]] = {
        "": (200, "application/text", ""),
        ROOT + "project/project-id": (200, "application/text", project),
        ROOT + "universe/universe-domain": (200, "application/text", "googleapis.com"),
    }
    for name in ("default", email):
        account = f"{ROOT}instance/service-accounts/{name}/"
        info = json.dumps({"aliases": ["default"], "email": email, "scopes": [SCOPE]})
        found[account] = (200, "application/json", info)
        found[account + "email"] = (200, "application/text", email)
        found[account + "scopes"] = (200, "application/text", SCOPE + "\n")
        found[account + "token"] = issued
    return found


def handler(email: str, token: str, deadline: float) -> type[BaseHTTPRequestHandler]:
    class Metadata(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.headers.get("Metadata-Flavor") != "Google" or "X-Forwarded-For" in self.headers:
                self._send(403, "text/plain", "Metadata-Flavor: Google is required")
                return
            path = urlsplit(self.path).path.rstrip("/")
            table = answers(email, token, deadline, time.monotonic())
            self._send(*table.get(path, table.get(path + "/", (404, "text/plain", "not found"))))

        def _send(self, status: int, kind: str, body: str) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Metadata-Flavor", "Google")
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (http.server's name)
            """Nothing is logged (a line could carry what a client sent)."""

    return Metadata


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not EMAIL.fullmatch(argv[0]) or not argv[1].isdigit():
        print("usage: metadata_server.py SERVICE_ACCOUNT_EMAIL LIFETIME_SECONDS < token", file=sys.stderr)
        return 2
    lifetime = int(argv[1])
    token = sys.stdin.readline(4097).strip()
    if not 0 < lifetime <= MAX_LIFETIME or not TOKEN.fullmatch(token):
        print(f"error: no access token on standard input, or a lifetime not in 1..{MAX_LIFETIME} s", file=sys.stderr)
        return 2
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler(argv[0], token, time.monotonic() + lifetime))
    print(server.server_address[1], flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
