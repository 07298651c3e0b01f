"""Kubeconfigs: a GKE cluster's, using the gke-gcloud-auth-plugin exec plugin (a plain function), and an existing
cluster's context, as the user's kubeconfig holds it."""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from core.errors import BadInputError
from core.redact import scrub


def build_kubeconfig(context: str, endpoint: str, ca_certificate: str) -> str:
    """A kubeconfig whose credentials refresh through ``gke-gcloud-auth-plugin``.

    A static access token expires after about an hour; training runs for many
    hours while ``pulumi up`` awaits it, so the exec plugin is required.
    """
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": context,
        "clusters": [
            {
                "name": context,
                "cluster": {"server": f"https://{endpoint}", "certificate-authority-data": ca_certificate},
            }
        ],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
        "users": [
            {
                "name": context,
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": "gke-gcloud-auth-plugin",
                        # Application Default Credentials, as the gcp provider and the README use; what
                        # `gcloud container clusters get-credentials` writes with
                        # container/use_application_default_credentials (googlecloudsdk kubeconfig.py).
                        "args": ["--use_application_default_credentials"],
                        "installHint": "Install gke-gcloud-auth-plugin: "
                        "gcloud components install gke-gcloud-auth-plugin",
                        "provideClusterInfo": True,
                    }
                },
            }
        ],
    }
    return yaml.safe_dump(config, sort_keys=False)


SHOWN_CONTEXTS = 10
"""The contexts a refusal names (the first, sorted)."""
KUBECONFIG_FILE_FIELDS = {
    "clusters": ("cluster", ("certificate-authority",)),
    "users": ("user", ("client-certificate", "client-key")),
}
"""Where a kubeconfig names a file, which ``context_kubeconfig`` inlines as the field's ``-data`` twin."""


def context_kubeconfig(context: str, environ: Mapping[str, str], home: Path) -> str:
    """The kubeconfig of one ``context`` as ``kubectl config view --minify --flatten --context <context>`` writes it:
    the files of ``KUBECONFIG`` (``:``-separated; default ``~/.kube/config``) merged as kubectl merges them (the first
    file that names a context, cluster or user wins), only that context, its cluster and its user, each file they
    name inlined (a relative path is relative to its kubeconfig). ``BadInputError`` (one line) when no file names the
    context."""
    paths = [Path(p).expanduser() for p in environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    paths = paths or [home / ".kube" / "config"]
    found: dict[str, dict[str, tuple[dict[str, Any], Path]]] = {"contexts": {}, "clusters": {}, "users": {}}
    for path in paths:
        try:
            loaded = yaml.safe_load(path.read_text()) if path.is_file() else None
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
            raise BadInputError(
                f"kubeconfig {path}: {type(err).__name__}: cannot read it ({scrub(str(err))})"
            ) from None
        for kind, entries in found.items():
            for entry in (loaded or {}).get(kind) or [] if isinstance(loaded, dict) else []:
                if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                    entries.setdefault(entry["name"], (entry, path))
    where = ":".join(str(p) for p in paths)
    if context not in found["contexts"]:
        known = ", ".join(scrub(name, limit=80) for name in sorted(found["contexts"])[:SHOWN_CONTEXTS]) or "none"
        raise BadInputError(
            f"tpu-rl:existingCluster.kubeContext: no context {context} in the kubeconfig ({where}); it has {known}"
        )
    chosen, _ = found["contexts"][context]
    spec = chosen.get("context") or {}
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": context,
        "contexts": [{"name": context, "context": spec}],
    }
    named = {kind: str(spec.get(key)) for kind, (key, _) in KUBECONFIG_FILE_FIELDS.items()}
    for kind, name in named.items():
        if name not in found[kind]:
            raise BadInputError(
                f"tpu-rl:existingCluster.kubeContext: the context {context} names the "
                f"{KUBECONFIG_FILE_FIELDS[kind][0]} {scrub(name, limit=80)}, which no kubeconfig ({where}) has"
            )
    for kind, name in named.items():
        entry, path = found[kind][name]
        config[kind] = [_inlined(entry, path.parent, *KUBECONFIG_FILE_FIELDS[kind])]
    return yaml.safe_dump(config, sort_keys=False)


def _inlined(entry: dict[str, Any], base: Path, inner: str, fields: tuple[str, ...]) -> dict[str, Any]:
    """``entry`` with each file ``fields`` name read into its ``-data`` field (base64)."""
    body = dict(entry.get(inner) or {})
    for field in fields:
        named = body.pop(field, None)
        if isinstance(named, str) and named and f"{field}-data" not in body:
            path = base / Path(named).expanduser()
            try:
                body[f"{field}-data"] = base64.b64encode(path.read_bytes()).decode()
            except OSError as err:
                raise BadInputError(f"kubeconfig: {field} {path}: {err.strerror or err}") from None
    return {"name": entry["name"], inner: body}
