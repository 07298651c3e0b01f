"""Start and stop the local cluster: ``make local-cluster`` and ``make local-cluster-down``.

The parts run as processes of this machine on loopback ports chosen when the cluster starts, each with its log under
the cluster's folder (``build/local-cluster/`` unless ``TPU_RL_LOCAL_CLUSTER`` names another) and its process id in
``state.json``; ``down`` stops every one it recorded and deletes the folder, so nothing runs or stays behind. Each
part's readiness is waited for with a bound; a part that does not come up is one line naming it and its log's last
line, and the parts already started are stopped."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from core.errors import TpuRlError
from core.kueue_manager import configuration as kueue_configuration
from tools.local_cluster import pki, seed
from tools.local_cluster.build import build_all, go_command, module_dir
from tools.local_cluster.components import COMPONENTS
from tools.process import entry_point

FOLDER = Path("build/local-cluster")
READY_SECONDS = {"etcd": 60, "kube-apiserver": 120, "default": 90}
"""How long each part may take to answer ready (the API server's first start migrates etcd: tens of seconds)."""
STOP_SECONDS = 20
CONTEXT = "tpu-rl-local"
PARTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "jobset", "kueue")


@dataclass
class Layout:
    folder: Path

    @property
    def state(self) -> Path:
        return self.folder / "state.json"

    @property
    def kubeconfig(self) -> Path:
        return self.folder / "kubeconfig"

    def log(self, part: str) -> Path:
        return self.folder / "logs" / f"{part}.log"


@dataclass
class State:
    ports: dict[str, int] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)

    def save(self, layout: Layout) -> None:
        layout.state.write_text(json.dumps({"ports": self.ports, "pids": self.pids}, indent=1))

    @classmethod
    def load(cls, layout: Layout) -> State | None:
        if not layout.state.is_file():
            return None
        data = json.loads(layout.state.read_text())
        return cls(dict(data["ports"]), dict(data["pids"]))


def folder() -> Path:
    return Path(os.environ.get("TPU_RL_LOCAL_CLUSTER") or FOLDER).absolute()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie of ours still answers kill 0: ask /proc whether it is one.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return True


def _last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "(no log)"
    return lines[-1][:300] if lines else "(empty log)"


def _get(url: str, context: ssl.SSLContext | None = None) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=3, context=context) as reply:  # noqa: S310 (loopback URLs we made)
            return reply.read() if reply.status == 200 else None
    except (urllib.error.URLError, OSError, ssl.SSLError):
        return None


def kubeconfig(api_port: int, keys: pki.Pki) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": CONTEXT,
        "clusters": [
            {
                "name": CONTEXT,
                "cluster": {"server": f"https://127.0.0.1:{api_port}", "certificate-authority": str(keys.ca)},
            }
        ],
        "users": [
            {
                "name": "admin",
                "user": {"client-certificate": str(keys.path("admin.crt")), "client-key": str(keys.path("admin.key"))},
            }
        ],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": "admin"}}],
    }


def commands(
    bins: dict[str, Path], layout: Layout, keys: pki.Pki, ports: dict[str, int], node_grace: int | None = None
) -> dict[str, list[str]]:
    """Each part's command line (a plain function of where things are: ``tests/test_local_cluster.py`` reads it)."""
    kube = str(layout.kubeconfig)
    etcd = f"http://127.0.0.1:{ports['etcd']}"
    peer = f"http://127.0.0.1:{ports['etcd-peer']}"
    k8s = bins["kubernetes"]
    return {
        "etcd": [
            str(bins["etcd"] / "server"),
            "--name=local",
            f"--data-dir={layout.folder / 'etcd'}",
            f"--listen-client-urls={etcd}",
            f"--advertise-client-urls={etcd}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=local={peer}",
            "--log-level=warn",
        ],
        "kube-apiserver": [
            str(k8s / "kube-apiserver"),
            f"--etcd-servers={etcd}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={ports['kube-apiserver']}",
            f"--tls-cert-file={keys.path('apiserver.crt')}",
            f"--tls-private-key-file={keys.path('apiserver.key')}",
            f"--client-ca-file={keys.ca}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={keys.path('sa.pub')}",
            f"--service-account-signing-key-file={keys.path('sa.key')}",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--authorization-mode=Node,RBAC",
            "--allow-privileged=true",
        ],
        "kube-controller-manager": [
            str(k8s / "kube-controller-manager"),
            f"--kubeconfig={kube}",
            f"--authentication-kubeconfig={kube}",
            f"--authorization-kubeconfig={kube}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports['kube-controller-manager']}",
            "--leader-elect=false",
            f"--service-account-private-key-file={keys.path('sa.key')}",
            f"--root-ca-file={keys.ca}",
            f"--cluster-signing-cert-file={keys.ca}",
            f"--cluster-signing-key-file={keys.path('ca.key')}",
            *([f"--node-monitor-grace-period={node_grace}s"] if node_grace else []),
        ],
        "kube-scheduler": [
            str(k8s / "kube-scheduler"),
            f"--kubeconfig={kube}",
            f"--authentication-kubeconfig={kube}",
            f"--authorization-kubeconfig={kube}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports['kube-scheduler']}",
            "--leader-elect=false",
        ],
        "kwok": [
            str(bins["kwok"] / "kwok"),
            f"--kubeconfig={kube}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={'='.join(seed.KWOK_NODE)}",
            f"--config={layout.folder / 'kwok.yaml'}",
            "--cidr=10.64.0.1/16",
            "--node-ip=10.128.0.1",
            f"--server-address=127.0.0.1:{ports['kwok']}",
            "--node-lease-duration-seconds=0",  # status heartbeats instead (kwok_config)
        ],
        "jobset": [str(bins["jobset"] / "jobset"), f"--config={layout.folder / 'jobset.yaml'}"],
        "kueue": [str(bins["kueue"] / "kueue"), f"--config={layout.folder / 'kueue.yaml'}"],
    }


KUEUE_TIMEOUTS = (1800, 16200)
"""Kueue's ``waitForPodsReady`` timeout and recovery timeout (seconds): the example stacks' (30 minutes, 4h30)."""


def controller_configs(
    layout: Layout, keys: pki.Pki, ports: dict[str, int], kueue_timeouts: tuple[int, int] = KUEUE_TIMEOUTS
) -> dict[str, dict[str, Any]]:
    """JobSet's and Kueue's manager configurations: the program's Kueue configuration (``core.kueue_manager``) with
    what a loopback run changes: the webhooks' loopback address and the local CA's certificates (JobSet's rotation
    off: there is no Service to route to; Kueue's, see ``kueue_certificates``), no metrics endpoint, no leader
    election."""
    loopback = {"leaderElection": {"leaderElect": False}, "metrics": {"bindAddress": "0"}}
    jobset = {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        **loopback,
        "internalCertManagement": {"enable": False},
        "webhook": {"port": ports["jobset"], "host": "127.0.0.1", "certDir": str(keys.webhook_dir)},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports['jobset-health']}"},
        "clientConnection": {"qps": 500, "burst": 500},
    }
    kueue = {
        **kueue_configuration(*kueue_timeouts),
        **loopback,
        "namespace": "kueue-system",
        "internalCertManagement": {
            "enable": True,
            "webhookServiceName": KUEUE_SERVICE,
            "webhookSecretName": KUEUE_SECRET,
        },
        # The pair the Secret holds, where its volume would mount it: the rotator waits for the file.
        "webhook": {"port": ports["kueue"], "host": "127.0.0.1", "certDir": str(keys.webhook_dir)},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports['kueue-health']}"},
        "featureGates": {"VisibilityOnDemand": False},
    }
    return {"jobset": jobset, "kueue": kueue}


def kwok_config(module_dir: Path, node_grace: int | None = None) -> list[dict[str, Any]]:
    """kwok's stages: its own release's node stages and its fast pod stages but ``pod-complete``, and ours that ends a
    pod as a test asks (``seed.EXIT_ANNOTATION``) and that stops a running pod being deleted before kwok removes it
    (``seed.pod_stop_stage``). The nodes' heartbeat is kwok's status heartbeat (no leases: kwok
    renews a node's lease for as long as the node exists), paused on a node labelled ``seed.LOST_LABEL`` (its kubelet
    gone), and with a shorter ``node_grace`` beating well within it."""
    names = [
        "node/fast/node-initialize.yaml",
        "node/heartbeat/node-heartbeat.yaml",
        "node/chaos/node-not-ready.yaml",
        "pod/fast/pod-ready.yaml",
        "pod/fast/pod-delete.yaml",
    ]
    stages = [yaml.safe_load((module_dir / "kustomize/stage" / name).read_text()) for name in names]
    heartbeat = stages[1]["spec"]
    heartbeat["selector"]["matchExpressions"].append(
        {"key": f'.metadata.labels["{seed.LOST_LABEL}"]', "operator": "DoesNotExist"}
    )
    if node_grace:
        beat = node_grace * 1000 // 5
        heartbeat["delay"] = {"durationMilliseconds": beat, "jitterDurationMilliseconds": beat}
    # kwok's pod-delete empties every finalizer, the Job controller's too, so a Job's pod could vanish before the Job
    # controller counted it (a kubelet leaves finalizers to their owners); and a running pod is stopped first
    # (seed.pod_stop_stage).
    delete = stages[4]["spec"]
    delete["next"].pop("finalizers", None)
    delete["selector"]["matchExpressions"].append({"key": ".status.phase", "operator": "NotIn", "values": ["Running"]})
    return [*stages, seed.pod_exit_stage(), seed.pod_stop_stage()]


def _readiness(part: str, ports: dict[str, int], keys: pki.Pki) -> Callable[[], bool]:
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE  # the components' self-signed serving certificates, on loopback
    if part == "etcd":
        return lambda: b"true" in (_get(f"http://127.0.0.1:{ports['etcd']}/health") or b"")
    if part == "kube-apiserver":
        trusted = ssl.create_default_context(cafile=str(keys.ca))
        trusted.load_cert_chain(str(keys.path("admin.crt")), str(keys.path("admin.key")))
        return lambda: _get(f"https://127.0.0.1:{ports['kube-apiserver']}/readyz", trusted) == b"ok"
    if part in ("kube-controller-manager", "kube-scheduler"):
        return lambda: _get(f"https://127.0.0.1:{ports[part]}/healthz", insecure) == b"ok"
    if part == "kwok":
        return lambda: _get(f"http://127.0.0.1:{ports['kwok']}/healthz") is not None
    return lambda: _get(f"http://127.0.0.1:{ports[part + '-health']}/readyz") is not None


def wait_for(what: str, ready: Callable[[], bool], seconds: float, log: Path, pid: int | None = None) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ready():
            return
        if pid is not None and not _alive(pid):
            raise TpuRlError(f"local cluster: {what} exited while starting: {_last_line(log)} (log: {log})")
        time.sleep(0.5)
    raise TpuRlError(f"local cluster: {what} not ready after {seconds:.0f} s: {_last_line(log)} (log: {log})")


def _start(part: str, argv: Sequence[str], layout: Layout) -> int:
    log = layout.log(part)
    with log.open("ab") as out:
        process = subprocess.Popen(  # noqa: S603 (our binaries, our arguments)
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "KUBECONFIG": str(layout.kubeconfig)},
        )
    return process.pid


def _apply(client: Any, docs: Sequence[dict[str, Any]]) -> None:
    from kubernetes.dynamic import DynamicClient

    dynamic = DynamicClient(client)
    for doc in docs:
        api = dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        api.server_side_apply(
            body=doc,
            name=doc["metadata"]["name"],
            namespace=doc["metadata"].get("namespace"),
            field_manager="tpu-rl-local-cluster",
            force_conflicts=True,
        )


def up(
    root: Path | None = None,
    *,
    kueue_timeouts: tuple[int, int] = KUEUE_TIMEOUTS,
    node_grace: int | None = None,
    out: TextIO = sys.stdout,
) -> Layout:
    """Build what is missing, start every part, wait for each, register the nodes, CRDs and webhooks. A scenario
    that plays Kueue's recovery budget gives shorter ``kueue_timeouts``, and one that loses a host a shorter
    ``node_grace`` (seconds without a heartbeat before the node lifecycle controller calls a node lost; Kubernetes'
    default, 50 s, when None)."""
    layout = Layout(root or folder())
    state = State.load(layout)
    if state and all(_alive(state.pids.get(p, -1)) for p in PARTS):
        print(f"local cluster: already running (kubeconfig: {layout.kubeconfig})", file=out)
        return layout
    if state:
        down(layout.folder, out=out)
    bins = build_all(out=out)
    go = go_command()
    parts = {c.name: c for c in COMPONENTS}
    modules = {n: module_dir(go, parts[n], parts[n].module) for n in ("kwok", "jobset", "kueue")}
    (layout.folder / "logs").mkdir(parents=True, exist_ok=True)
    keys = pki.make(layout.folder / "pki")
    names = [*PARTS, "etcd-peer", "jobset-health", "kueue-health"]
    state = State(ports={name: _free_port() for name in names})
    state.save(layout)
    layout.kubeconfig.write_text(yaml.safe_dump(kubeconfig(state.ports["kube-apiserver"], keys)))
    for name, config in controller_configs(layout, keys, state.ports, kueue_timeouts).items():
        (layout.folder / f"{name}.yaml").write_text(yaml.safe_dump(config))
    (layout.folder / "kwok.yaml").write_text(yaml.safe_dump_all(kwok_config(modules["kwok"], node_grace)))
    argv = commands(bins, layout, keys, state.ports, node_grace)
    started = time.monotonic()
    try:
        for part in PARTS:
            if part == "kwok":
                _register(layout, keys, state, modules)
            state.pids[part] = _start(part, argv[part], layout)
            state.save(layout)
            seconds = READY_SECONDS.get(part, READY_SECONDS["default"])
            wait_for(part, _readiness(part, state.ports, keys), seconds, layout.log(part), state.pids[part])
        _wait_nodes(layout)
    except BaseException:
        down(layout.folder, out=out, keep=True)
        raise
    print(
        f"local cluster: up in {time.monotonic() - started:.0f} s, {len(PARTS)} parts on loopback; "
        f"KUBECONFIG={layout.kubeconfig} (context {CONTEXT}); stop it with `make local-cluster-down`",
        file=out,
    )
    return layout


def client(layout: Layout) -> Any:
    from kubernetes import config as kube_config

    return kube_config.new_client_from_config(str(layout.kubeconfig), context=CONTEXT)


def _register(layout: Layout, keys: pki.Pki, state: State, modules: dict[str, Path]) -> None:
    """Before kwok and the controllers: the nodes, the controllers' CRDs and webhooks, their namespaces."""
    ca = keys.ca.read_bytes()
    api = client(layout)
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in ("jobset-system", "kueue-system")
    ]
    docs += seed.nodes(seed.Shape())
    docs += seed.crds(modules["jobset"], state.ports["jobset"], ca)
    docs += seed.crds(modules["kueue"], state.ports["kueue"], ca)
    docs.append(kueue_certificates(keys))
    docs += seed.webhooks(modules["jobset"], "jobset", state.ports["jobset"], ca)
    docs += seed.webhooks(modules["kueue"], "kueue", state.ports["kueue"], ca)
    _apply(api, docs)


KUEUE_SECRET = "kueue-webhook-server-cert"
KUEUE_SERVICE = "kueue-webhook-service"


def kueue_certificates(keys: pki.Pki) -> dict[str, Any]:
    """Kueue's certificate Secret, made before Kueue starts. Kueue 0.17 reads a metrics certificate from a fixed
    ``/etc/kueue/metrics/certs`` whenever its own certificate management is off (``cmd/kueue/main.go``), so it stays
    on; its rotator (open-policy-agent/cert-controller ``refreshCertIfNeeded``) keeps a Secret whose CA and serving
    certificate are valid for its names (``pki``: the CA is also ``kueue-ca``, the serving certificate also
    ``kueue-webhook-service.kueue-system.svc``) and only injects that CA, the local one, into the webhooks."""
    data = {
        "ca.crt": keys.ca.read_bytes(),
        "ca.key": keys.path("ca.key").read_bytes(),
        "tls.crt": (keys.webhook_dir / "tls.crt").read_bytes(),
        "tls.key": (keys.webhook_dir / "tls.key").read_bytes(),
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": KUEUE_SECRET, "namespace": "kueue-system"},
        "type": "Opaque",
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }


def _wait_nodes(layout: Layout) -> None:
    from kubernetes import client as kube

    core = kube.CoreV1Api(client(layout))

    def ready() -> bool:
        nodes = core.list_node(_request_timeout=5).items
        return bool(nodes) and all(
            any(c.type == "Ready" and c.status == "True" for c in (n.status.conditions or [])) for n in nodes
        )

    wait_for("kwok's nodes", ready, READY_SECONDS["default"], layout.log("kwok"))


def down(root: Path | None = None, *, out: TextIO = sys.stdout, keep: bool = False) -> None:
    """Stop every part the cluster's state records (TERM, then KILL past ``STOP_SECONDS``), then delete its folder
    (``keep``: leave the logs of a start that failed)."""
    layout = Layout(root or folder())
    state = State.load(layout)
    pids = list((state.pids if state else {}).items())
    # The controllers first, then the control plane, then etcd: each part's clients gone before it stops.
    for part, pid in reversed(pids):
        if not _alive(pid):
            _reap(pid)
            continue
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_SECONDS
        while _alive(pid) and time.monotonic() < deadline:
            _reap(pid)
            time.sleep(0.1)
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            print(f"local cluster: {part} did not stop in {STOP_SECONDS} s: killed", file=out)
        _reap(pid)
    if keep:
        layout.state.unlink(missing_ok=True)
    elif layout.folder.exists():
        shutil.rmtree(layout.folder)
    if pids and not keep:
        print(f"local cluster: stopped {len(pids)} parts; {layout.folder} deleted", file=out)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def main(argv: Sequence[str] = tuple(sys.argv[1:])) -> int:
    if list(argv) == ["down"]:
        down()
    else:
        up()
    return 0


if __name__ == "__main__":
    entry_point(main)
