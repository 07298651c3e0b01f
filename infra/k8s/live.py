"""Bounded reads of live Kubernetes objects from a kubeconfig (urllib3; no Pulumi).

The program reads the live state of its steps before registering them (is a run still going,
did it fail?). Every read is bounded: the auth plugin (``gke-gcloud-auth-plugin``) gets a
timeout of its own, the connection and each read have socket timeouts, and the whole read has
a deadline checked while the body streams in, so a stalled plugin, a silent server or one that
drips bytes cannot hold `pulumi up`. Every failure is one line naming the server and what to check.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import yaml

from core.redact import scrub

MAX_BODY_BYTES = 8 * 1024 * 1024


class ClusterReadError(Exception):
    """The live object could not be read (network, credentials, permissions); one line."""


@dataclass(frozen=True)
class Budget:
    """Time limits of one read, in seconds (under 30 s in total)."""

    connect: float = 5.0
    read: float = 10.0
    auth: float = 15.0
    total: float = 25.0


@dataclass(frozen=True)
class _Target:
    server: str
    ca_pem: str | None
    insecure: bool
    user: dict[str, Any]


def _target(kubeconfig: str) -> _Target:
    try:
        config = yaml.safe_load(kubeconfig) or {}
        current = config["current-context"]
        context = next(c["context"] for c in config["contexts"] if c["name"] == current)
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        user = next((u["user"] for u in config.get("users") or [] if u["name"] == context.get("user")), {})
    except (yaml.YAMLError, KeyError, TypeError, StopIteration):
        raise ClusterReadError("the stack's kubeconfig is not usable (no current context, cluster or user)") from None
    ca = cluster.get("certificate-authority-data")
    try:
        ca_pem = base64.b64decode(ca).decode() if ca else None
    except (ValueError, UnicodeDecodeError):
        raise ClusterReadError("the kubeconfig's certificate-authority-data is not base64 PEM") from None
    return _Target(str(cluster.get("server", "")), ca_pem, bool(cluster.get("insecure-skip-tls-verify")), user)


def _token(target: _Target, budget: Budget, deadline: float) -> str | None:
    user = target.user
    if user.get("token"):
        return str(user["token"])
    exec_config = user.get("exec")
    if not exec_config:
        return None
    command = [str(exec_config.get("command", "")), *(str(a) for a in exec_config.get("args") or [])]
    env = {**os.environ, **{e["name"]: str(e["value"]) for e in exec_config.get("env") or []}}
    if exec_config.get("provideClusterInfo"):
        cluster: dict[str, Any] = {"server": target.server}
        if target.ca_pem:
            cluster["certificate-authority-data"] = base64.b64encode(target.ca_pem.encode()).decode()
        env["KUBERNETES_EXEC_INFO"] = json.dumps(
            {
                "apiVersion": exec_config.get("apiVersion", "client.authentication.k8s.io/v1beta1"),
                "kind": "ExecCredential",
                "spec": {"cluster": cluster, "interactive": False},
            }
        )
    timeout = max(0.1, min(budget.auth, deadline - time.monotonic()))
    name = os.path.basename(command[0]) or "the kubeconfig's exec plugin"
    try:
        done = subprocess.run(command, env=env, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        hint = exec_config.get("installHint") or f"install {name}"
        raise ClusterReadError(f"{name} was not found: {scrub(str(hint))}") from None
    except subprocess.TimeoutExpired:
        raise ClusterReadError(
            f"{name} did not answer within {timeout:.0f} s: check `{name}` and `gcloud auth application-default login`"
        ) from None
    except OSError as err:
        raise ClusterReadError(f"{name} could not run: {scrub(str(err))}") from None
    if done.returncode != 0:
        detail = scrub(done.stderr.decode(errors="replace")) or f"exit code {done.returncode}"
        raise ClusterReadError(f"{name} failed: {detail}")
    try:
        credential = json.loads(done.stdout)
        return str(credential["status"]["token"])
    except (ValueError, KeyError, TypeError):
        raise ClusterReadError(f"{name} did not print an ExecCredential with a token") from None


def get_json(kubeconfig: str, path: str, *, budget: Budget = Budget()) -> dict[str, Any] | None:
    """GET ``path`` from the kubeconfig's cluster: the object, None on 404, else ``ClusterReadError``."""
    import urllib3

    deadline = time.monotonic() + budget.total
    target = _target(kubeconfig)
    where = urlsplit(target.server).netloc or target.server or "(no server)"
    if not target.server.startswith(("https://", "http://")):
        raise ClusterReadError(f"the kubeconfig's server {target.server!r} is not an http(s) URL")
    token = _token(target, budget, deadline)
    headers = {"Accept": "application/json", "User-Agent": "tpu-rl"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    remaining = max(0.1, deadline - time.monotonic())
    timeout = urllib3.Timeout(connect=min(budget.connect, remaining), read=min(budget.read, remaining))
    if target.server.startswith("https://") and not target.insecure:
        pool = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_cert_data=target.ca_pem, retries=False)
    else:
        pool = urllib3.PoolManager(cert_reqs="CERT_NONE", retries=False)
    reach = (
        f"cannot reach the cluster at {where}: is this machine in tpu-rl:authorizedNetworks, and is "
        "gke-gcloud-auth-plugin installed and logged in (gcloud auth application-default login)?"
    )
    try:
        response = pool.request(
            "GET",
            target.server.rstrip("/") + path,
            headers=headers,
            timeout=timeout,
            preload_content=False,
            redirect=False,
        )
        body = bytearray()
        while chunk := response.read1(64 * 1024):  # returns what arrived: a drip cannot hide the deadline
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                raise ClusterReadError(f"the cluster at {where} sent more than {MAX_BODY_BYTES} bytes for {path}")
            if time.monotonic() > deadline:
                raise ClusterReadError(
                    f"the cluster at {where} did not finish answering {path} within {budget.total:.0f} s"
                )
        response.release_conn()
    except ClusterReadError:
        raise
    except urllib3.exceptions.SSLError as err:
        raise ClusterReadError(
            f"TLS with the cluster at {where} failed ({type(err).__name__}); is the kubeconfig current?"
        ) from None
    except urllib3.exceptions.HTTPError as err:
        reason = type(getattr(err, "reason", None) or err).__name__
        raise ClusterReadError(f"{reach} ({reason})") from None
    finally:
        pool.clear()
    status = response.status
    if status == 404:
        return None
    if 300 <= status < 400:
        raise ClusterReadError(f"the cluster at {where} redirected {path} (HTTP {status}); expected the API server")
    if status in (401, 403):
        raise ClusterReadError(
            f"the cluster at {where} refused to read {path} (HTTP {status}): the identity running `pulumi` needs "
            "container.developer (or read access to the namespace) and a fresh login"
        )
    if status != 200:
        raise ClusterReadError(f"the cluster at {where} answered HTTP {status} for {path}")
    try:
        document = json.loads(bytes(body).decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise ClusterReadError(f"the cluster at {where} answered {path} with something that is not JSON") from None
    if not isinstance(document, dict):
        raise ClusterReadError(f"the cluster at {where} answered {path} with JSON that is not an object")
    return document


def object_path(api_version: str, kind: str, namespace: str, name: str = "") -> str:
    """The REST path of a namespaced object (or of its collection when ``name`` is empty)."""
    plural = {"Job": "jobs", "JobSet": "jobsets"}[kind]
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    path = f"{base}/namespaces/{quote(namespace, safe='')}/{plural}"
    return f"{path}/{quote(name, safe='')}" if name else path


def list_items(kubeconfig: str, path: str, label_selector: str, *, budget: Budget = Budget()) -> list[dict[str, Any]]:
    """Items of a collection matching a label selector (empty when the collection does not exist)."""
    document = get_json(kubeconfig, f"{path}?labelSelector={quote(label_selector, safe='')}", budget=budget)
    items = (document or {}).get("items") or []
    if not isinstance(items, list):
        raise ClusterReadError(f"the list at {path} has no items array")
    return [item for item in items if isinstance(item, dict)]
