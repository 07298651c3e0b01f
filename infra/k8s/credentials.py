"""A kubeconfig read with limits and its credentials (no Pulumi): the text parsed and its shape checked before the
Kubernetes client's loader (``kubernetes.config.load_kube_config_from_dict``) sees it, and its exec plugin
(``gke-gcloud-auth-plugin``) run within the ``auth-plugin`` budget of ``core.deadline``, the token it prints handed to
the loader, and its inline certificates and key written to files of this process for it (``_as_files``)
(``infra.k8s.live.ClusterReader`` reads with them).

The plugin is run here, not through the client's ``ExecProvider``: ``ExecProvider.run``
(``kubernetes/config/exec_provider.py``) waits on the plugin's ``communicate()`` with no timeout, so a caller that
stops waiting at its deadline leaves the plugin, and the gcloud it starts, running until they end on their own. Here
the plugin runs in a session of its own, and at the deadline, or on a Ctrl-C, the whole session is killed. What it is
given and what it must print is client-go's exec protocol (``k8s.io/client-go/plugin/pkg/client/auth/exec``; the
ExecCredential API, ``client.authentication.k8s.io/v1beta1`` and ``v1``): ``KUBERNETES_EXEC_INFO`` holds an
ExecCredential whose spec says it is not interactive and, with ``provideClusterInfo``, the cluster (the kubeconfig's
fields, its ``client.authentication.k8s.io/exec`` extension as ``config``); the plugin prints an ExecCredential of the
same ``apiVersion`` whose ``status`` holds a token or a client certificate and key."""

from __future__ import annotations

import atexit
import base64
import binascii
import contextlib
import json
import os
import selectors
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import Field

from core import deadline
from core.boundary import BoundaryError, Model, parse
from core.errors import BAD_INPUT, TpuRlError
from core.inputs import InputError, parse_yaml, read_file
from core.redact import scrub

MAX_KUBECONFIG_BYTES = 1024 * 1024


class ClusterReadError(TpuRlError):
    """The live object could not be read (network, credentials, permissions); one line."""


def _entries(config: dict[str, Any], section: str, body: str) -> dict[str, dict[str, Any]]:
    entries = config.get(section) or []
    if not isinstance(entries, list):
        raise ClusterReadError(f"the kubeconfig is not usable: {section} is not a list")
    found: dict[str, dict[str, Any]] = {}
    for entry in entries:
        if not (isinstance(entry, dict) and isinstance(entry.get("name"), str) and isinstance(entry.get(body), dict)):
            raise ClusterReadError(f"the kubeconfig is not usable: an entry of {section} has no name or {body}")
        found.setdefault(entry["name"], entry[body])  # kubectl: the first definition of a name wins
    return found


class ExecVar(Model):
    """One ``env`` entry of an exec plugin, as client-go's ``ExecEnvVar`` (both fields required)."""

    name: str = Field(min_length=1)
    value: str


class ExecPlugin(Model):
    """A kubeconfig user's exec credential plugin (client-go ``ExecConfig``): the fields ``run_plugin`` reads
    (``args`` a list of strings, ``env`` a list of ``{name, value}``, ``apiVersion`` text), checked before it reads
    them. Only checked: the plugin runs with the values as written, never scrubbed."""

    command: str = Field(min_length=1)
    api_version: str = Field(min_length=1)
    args: list[str] | None = None
    env: list[ExecVar] | None = None
    provide_cluster_info: bool | None = None


def check_kubeconfig(config: Any, context: str | None = None) -> dict[str, Any]:
    """A kubeconfig whose chosen context, cluster and user have the shapes the client expects."""
    if not isinstance(config, dict):
        raise ClusterReadError("the kubeconfig is not usable: it is not a mapping")
    current = context or config.get("current-context")
    if not isinstance(current, str) or not current:
        raise ClusterReadError("the kubeconfig is not usable: no current context")
    contexts = _entries(config, "contexts", "context")
    chosen = contexts.get(current)
    if chosen is None:
        raise ClusterReadError(f"the kubeconfig is not usable: no context {scrub(current, limit=80)}")
    cluster = _entries(config, "clusters", "cluster").get(str(chosen.get("cluster")))
    if cluster is None or not isinstance(cluster.get("server"), str):
        raise ClusterReadError("the kubeconfig is not usable: the context's cluster has no server")
    problem = server_problem(cluster["server"])
    if problem:
        raise ClusterReadError(f"the kubeconfig is not usable: the cluster's server {problem}", exit_code=BAD_INPUT)
    user = _entries(config, "users", "user").get(str(chosen.get("user")), {})
    exec_config = user.get("exec")
    if exec_config is not None and not (isinstance(exec_config, dict) and isinstance(exec_config.get("command"), str)):
        raise ClusterReadError("the kubeconfig is not usable: the user's exec plugin has no command")
    if exec_config is not None:
        try:
            parse(ExecPlugin, exec_config, "the kubeconfig is not usable: the user's exec plugin")
        except BoundaryError as err:
            raise ClusterReadError(str(err)) from None
    for key in ("token", "certificate-authority-data"):
        where = user if key == "token" else cluster
        if key in where and not isinstance(where[key], str):
            raise ClusterReadError(f"the kubeconfig is not usable: {key} is not text")
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": current,
        "contexts": [{"name": current, "context": chosen}],
        "clusters": [{"name": str(chosen.get("cluster")), "cluster": cluster}],
        "users": [{"name": str(chosen.get("user")), "user": user}],
    }


def server_problem(server: str) -> str | None:
    """Why a cluster's ``server`` is no URL the client can connect to (None: it is one): a scheme but http(s), a port
    out of range, a bracket not closed, a host urllib3 cannot parse (a space in it). Bad input, found before any
    connection, so that every run of the same kubeconfig says the same (a connection attempt would read as a host
    that cannot be reached, which a retry may cure)."""
    from urllib.parse import urlsplit

    from urllib3.exceptions import LocationParseError
    from urllib3.util import parse_url

    if not server.startswith(("https://", "http://")):
        return "is not an http(s) URL"
    shown = scrub(server, limit=100)
    try:
        parts = urlsplit(server)
        _ = parts.port  # ValueError past 65535
        parse_url(server)
    except (ValueError, LocationParseError) as err:
        return f"{shown} is not a URL ({scrub(str(err), limit=100)})"
    if not parts.hostname:
        return f"{shown} names no host"
    return None


def parse_kubeconfig(text: str, context: str | None = None) -> dict[str, Any]:
    """The program's kubeconfig text (built from the cluster's outputs), checked."""
    if len(text.encode()) > MAX_KUBECONFIG_BYTES:
        raise ClusterReadError(f"the kubeconfig is larger than {MAX_KUBECONFIG_BYTES} bytes")
    try:
        return check_kubeconfig(parse_yaml(text, "the kubeconfig"), context)
    except InputError as err:
        raise ClusterReadError(str(err)) from None


def kubeconfig_from_files(paths: list[Path], context: str) -> dict[str, Any]:
    """The kubeconfig ``kubectl`` would use with ``--context context``: the files merged in order (the
    first definition of each name wins), each read with limits. Raises ``ClusterReadError``."""
    merged: dict[str, Any] = {"contexts": [], "clusters": [], "users": []}
    found = False
    for path in paths:
        try:
            document = parse_yaml(read_file(path, MAX_KUBECONFIG_BYTES).decode("utf-8"), str(path))
        except InputError as err:
            if "No such file" in str(err):
                continue
            raise ClusterReadError(str(err)) from None
        except UnicodeDecodeError:
            raise ClusterReadError(f"{path} is not UTF-8 text") from None
        if document is None:
            continue
        if not isinstance(document, dict):
            raise ClusterReadError(f"{path} is not a kubeconfig (not a mapping)")
        for section in ("contexts", "clusters", "users"):
            entries = document.get(section) or []
            if not isinstance(entries, list):
                raise ClusterReadError(f"{path} is not a kubeconfig ({section} is not a list)")
            merged[section] += entries
        found = found or any(isinstance(c, dict) and c.get("name") == context for c in document.get("contexts") or [])
    if not found:
        raise ClusterReadError(f"no context {context} in {', '.join(map(str, paths))}")
    return check_kubeconfig(merged, context)


def load_client() -> None:
    """Import the client modules a reader uses, in the caller's thread: a first import of them from two
    threads at once can deadlock on Python's module locks."""
    import urllib3  # noqa: F401
    from kubernetes.client import ApiClient  # noqa: F401
    from kubernetes.client.api.core_v1_api import CoreV1Api  # noqa: F401
    from kubernetes.client.api.custom_objects_api import CustomObjectsApi  # noqa: F401
    from kubernetes.client.exceptions import ApiException  # noqa: F401
    from kubernetes.config.kube_config import load_kube_config_from_dict  # noqa: F401


def _plugin_name(exec_config: dict[str, Any]) -> str:
    return Path(str(exec_config.get("command", ""))).name or "the kubeconfig's exec plugin"


EXEC_EXTENSION = "client.authentication.k8s.io/exec"
"""The cluster extension client-go hands an exec plugin as the cluster's ``config`` (``exec.go``)."""


def exec_info(exec_config: dict[str, Any], cluster: dict[str, Any]) -> str:
    """``KUBERNETES_EXEC_INFO`` for the plugin: an ExecCredential of the plugin's ``apiVersion`` whose spec says the
    call is not interactive and, with ``provideClusterInfo``, holds ``cluster`` (its exec extension as ``config``)."""
    spec: dict[str, Any] = {"interactive": False}
    if exec_config.get("provideClusterInfo"):
        fields = {key: value for key, value in cluster.items() if key != "extensions"}
        for extension in cluster.get("extensions") or []:
            if isinstance(extension, dict) and extension.get("name") == EXEC_EXTENSION:
                fields["config"] = extension.get("extension")
                break
        spec["cluster"] = fields
    return json.dumps({"apiVersion": exec_config["apiVersion"], "kind": "ExecCredential", "spec": spec})


def _end(process: subprocess.Popen[bytes]) -> None:
    """Kill the plugin's session (the plugin and what it started) and reap the plugin."""
    with contextlib.suppress(ProcessLookupError):  # the session is gone already
        os.killpg(process.pid, signal.SIGKILL)
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()
    process.wait()


OUTPUT_LIMIT = 1024 * 1024
"""The most a plugin may print on each of its outputs, in bytes: a token, or a certificate and key, is a few KB."""


def _collect(process: subprocess.Popen[bytes], name: str, seconds: float) -> tuple[bytes, bytes]:
    """What the plugin ``name`` prints on its stdout and stderr until it closes both and ends, within ``seconds`` and
    ``OUTPUT_LIMIT`` bytes each; else ``ClusterReadError``, the plugin left running (``run_plugin`` ends it)."""
    deadline = time.monotonic() + seconds
    assert process.stdout is not None and process.stderr is not None  # both are pipes (run_plugin)
    printed = {process.stdout.fileno(): bytearray(), process.stderr.fileno(): bytearray()}
    with selectors.DefaultSelector() as selector:
        for fd in printed:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            ready = selector.select(left) if left > 0 else []
            if not ready:
                raise _late(name, seconds)
            for key, _ in ready:
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fd)
                elif len(printed[key.fd]) + len(chunk) > OUTPUT_LIMIT:
                    raise ClusterReadError(f"{name} printed more than {OUTPUT_LIMIT} bytes, no credential")
                else:
                    printed[key.fd] += chunk
    try:
        process.wait(max(0.0, deadline - time.monotonic()))  # its outputs closed, it may still run
    except subprocess.TimeoutExpired:
        raise _late(name, seconds) from None
    return bytes(printed[process.stdout.fileno()]), bytes(printed[process.stderr.fileno()])


def _late(name: str, seconds: float) -> ClusterReadError:
    return ClusterReadError(
        f"{name} did not answer within {seconds:.0f} s: check `{name}` and `gcloud auth application-default login`"
    )


def run_plugin(exec_config: dict[str, Any], cluster: dict[str, Any], seconds: float) -> Any:
    """The ``status`` of the ExecCredential the exec plugin prints, the plugin run with ``exec_info`` in a session of
    its own, killed whole if it has not ended within ``seconds`` (or on a Ctrl-C) or prints more than ``OUTPUT_LIMIT``.
    Raises ``ClusterReadError``."""
    name = _plugin_name(exec_config)
    env = {**os.environ, **{var["name"]: var["value"] for var in exec_config.get("env") or []}}
    env["KUBERNETES_EXEC_INFO"] = exec_info(exec_config, cluster)
    argv = [exec_config["command"], *(exec_config.get("args") or [])]
    try:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
    except FileNotFoundError:
        hint = exec_config.get("installHint") or f"install {name}"
        raise ClusterReadError(f"{name} was not found: {scrub(str(hint))}") from None
    except OSError as err:
        raise ClusterReadError(f"{name} failed: {scrub(str(err))}") from None
    finished = False
    try:
        out, said = _collect(process, name, seconds)
        finished = True
    finally:
        if not finished:  # past its budget or its output limit, or a Ctrl-C
            _end(process)
    if process.returncode != 0:
        stderr = said.decode(errors="replace").strip()
        message = f"{name} failed: process returned {process.returncode}" + (f". {stderr}" if stderr else "")
        raise ClusterReadError(scrub(message))
    return _status(name, exec_config["apiVersion"], out)


def _status(name: str, api_version: str, out: bytes) -> Any:
    try:
        printed = json.loads(out.decode(errors="replace"))
    except ValueError:
        raise ClusterReadError(f"{name} failed: what it printed is not JSON") from None
    if not (isinstance(printed, dict) and printed.get("kind") == "ExecCredential" and "status" in printed):
        raise ClusterReadError(f"{name} did not print an ExecCredential with a token")
    if printed.get("apiVersion") != api_version:
        said = scrub(str(printed.get("apiVersion")), limit=80)
        raise ClusterReadError(f"{name} failed: it printed apiVersion {said}, not {api_version}")
    return printed["status"]


def _credential(config: dict[str, Any], budget: deadline.Budget) -> dict[str, Any]:
    """Run the user's exec plugin (if any, ``run_plugin``); return the user entry the loader gets (a token or client
    certificate instead of the exec block)."""
    user = config["users"][0]["user"]
    exec_config = user.get("exec")
    if not exec_config:
        return user
    name = _plugin_name(exec_config)
    exec_config = {"apiVersion": "client.authentication.k8s.io/v1beta1", **exec_config}
    status = run_plugin(exec_config, config["clusters"][0]["cluster"], budget.total)
    if not isinstance(status, dict):
        raise ClusterReadError(f"{name} did not print an ExecCredential with a token")
    if isinstance(status.get("token"), str) and status["token"]:
        return {"token": status["token"]}
    if isinstance(status.get("clientCertificateData"), str) and isinstance(status.get("clientKeyData"), str):
        return {
            "client-certificate-data": base64.b64encode(status["clientCertificateData"].encode()).decode(),
            "client-key-data": base64.b64encode(status["clientKeyData"].encode()).decode(),
        }
    raise ClusterReadError(f"{name} did not print an ExecCredential with a token")


INLINE_FILES = (
    ("clusters", "cluster", "certificate-authority"),
    ("users", "user", "client-certificate"),
    ("users", "user", "client-key"),
)
"""The kubeconfig's ``<key>-data`` entries (base64) the client needs as files."""
_FILES: dict[bytes, str] = {}
_FILES_LOCK = threading.Lock()


def _file_holding(data: bytes) -> str:
    """A private file with ``data``, written whole before its name is given out, once per content and process.

    The Kubernetes client would write it itself (kubernetes 37.0.2 ``config/kube_config.py``
    ``_create_temp_file_with_content``), but it records the file's name before writing the content, so a second
    reader loading the same kubeconfig in another thread can take the still-empty file: its TLS then fails with
    ``NO_CERTIFICATE_OR_CRL_FOUND`` (seen in this suite; `up` reads the cluster from several threads)."""
    with _FILES_LOCK:
        name = _FILES.get(data)
        if name is None:
            fd, name = tempfile.mkstemp(prefix="tpu-rl-kube-")  # 0600
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            _FILES[data] = name
            if len(_FILES) == 1:
                atexit.register(_remove_files)
        return name


def _remove_files() -> None:
    for name in _FILES.values():
        with contextlib.suppress(OSError):
            os.remove(name)


def _as_files(config: dict[str, Any]) -> None:
    """Each ``<key>-data`` of the (checked, copied) kubeconfig's cluster and user as ``<key>``, a file holding the
    decoded bytes (``_file_holding``), so the client reads the file and writes none. Raises ``ClusterReadError``."""
    for section, kind, key in INLINE_FILES:
        entry = config[section][0][kind]
        data = entry.get(f"{key}-data")
        if data is None:
            continue
        try:
            decoded = base64.standard_b64decode(str(data))  # as the client decodes it (``FileOrData``)
        except (binascii.Error, ValueError):
            raise ClusterReadError(f"the kubeconfig is not usable: {key}-data is not base64") from None
        entry[key] = _file_holding(decoded)
        del entry[f"{key}-data"]
