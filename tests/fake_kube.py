"""A loopback Kubernetes API server for the program's JobSets: the paths, list pagination, label
selectors, bearer tokens, TLS and the error bodies (``Status`` objects) of the real API server, plus
builders of live objects in each state as the JobSet controller writes them.

Tests (and the scenario harness in ``tests.engine``) change the objects in process; the program and
the tools read them over HTTP(S) with the real client.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import socket
import socketserver
import ssl
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.loopback import LoopbackServer, PromptStop

KINDS = {
    "JobSet": ("jobset.x-k8s.io", "v1alpha2", "jobsets", True),
    "Workload": ("kueue.x-k8s.io", "v1beta2", "workloads", True),
    "ResourceFlavor": ("kueue.x-k8s.io", "v1beta2", "resourceflavors", False),
    "CustomResourceDefinition": ("apiextensions.k8s.io", "v1", "customresourcedefinitions", False),
}
"""Kind -> (group, version, plural, namespaced): the custom objects (and CRDs) served."""
SERVED = {(group, version, plural): (kind, namespaced) for kind, (group, version, plural, namespaced) in KINDS.items()}
PLURALS = {kind: plural for kind, (_group, _version, plural, _namespaced) in KINDS.items()}
WEBHOOKS = {
    "resourceflavors": (
        "mresourceflavor.kb.io",
        "kueue-webhook-service.kueue-system.svc",
        "/mutate-kueue-x-k8s-io-v1beta2-resourceflavor",
    ),
    "jobsets": (
        "mutate-jobset-x-k8s-io-v1alpha2-jobset.x-k8s.io",
        "jobset-webhook-service.jobset-system.svc",
        "/mutate-jobset-x-k8s-io-v1alpha2-jobset",
    ),
}
"""The mutating webhook the API server calls first on a create of each kind (Kueue v0.17.1
``charts/kueue/templates/webhook/manifests.yaml``; JobSet v0.10.1
``charts/jobset/templates/webhook/mutating_webhook_configuration.yaml`` with the release named ``jobset``)."""
UNREACHABLE = {
    "connection refused": "dial tcp 10.52.0.14:443: connect: connection refused",
    "no endpoints": 'no endpoints available for service "{service}"',
}


def webhook_unreachable(plural: str, mode: str = "connection refused") -> dict[str, Any]:
    """The API server's answer to a create whose webhook it cannot call under ``failurePolicy: Fail``:
    ``apierrors.NewInternalError`` of ``ErrCallingWebhook`` (HTTP 500, reason InternalError, the error as the
    one cause), in the words of kubernetes-sigs/kueue#12008 and #7650."""
    webhook, host, path = WEBHOOKS[plural]
    cause = UNREACHABLE[mode].format(service=host.split(".")[0])
    post = f'Post "https://{host}:443{path}?timeout=10s"'
    error = f'failed calling webhook "{webhook}": failed to call webhook: {post}: {cause}'
    return status_body(500, "InternalError", f"Internal error occurred: {error}", {"causes": [{"message": error}]})


CORE = {"pods": "Pod", "events": "Event"}
"""The core collections served (lists only), from ``FakeCluster.core``."""
TOKEN = "test-cluster-token"
T0 = "2026-11-30T05:00:00Z"
T1 = "2026-11-30T05:18:02Z"


def status_body(code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ``metav1.Status`` as the API server sends it with an error code."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return body


def jobset_status(state: str, jobs: list[dict[str, Any]], restarts: int = 0, name: str = "") -> dict[str, Any]:
    """``status`` of a JobSet as its controller (v0.10.1) writes it; a failure names its first failed Job
    (``failure_policy.go`` ``messageWithFirstFailedJob``: ``%s (first failed job: %s)``)."""
    first_job = f"{name}-{jobs[0]['name']}-0"
    rows = []
    for job in jobs:
        n = job.get("replicas", 1)
        rows.append(
            {
                "name": job["name"],
                "ready": n if state == "running" else 0,
                "succeeded": n if state == "completed" else 0,
                "failed": 1 if state == "failed" and job is jobs[0] else 0,
                "active": n if state in ("pending", "running") else 0,
                "suspended": 0,
            }
        )
    status: dict[str, Any] = {"replicatedJobsStatus": rows, "restarts": restarts, "restartsCountTowardsMax": restarts}
    if state == "completed":
        status["terminalState"] = "Completed"
        status["conditions"] = [
            {
                "type": "Completed",
                "status": "True",
                "reason": "AllJobsCompleted",
                "message": "jobset completed successfully",
                "lastTransitionTime": T1,
            }
        ]
    elif state == "failed":
        status["terminalState"] = "Failed"
        status["conditions"] = [
            {
                "type": "Failed",
                "status": "True",
                "reason": "FailedJobs",
                "message": f"jobset failed due to one or more job failures (first failed job: {first_job})",
                "lastTransitionTime": T1,
            }
        ]
    return status


def with_state(manifest: dict[str, Any], state: str, *, restarts: int = 0) -> dict[str, Any]:
    """A copy of a JobSet ``manifest`` with the ``status`` its controller gives it in ``state``
    (pending/running/completed/failed; "complete" is accepted for "completed")."""
    obj = copy.deepcopy(manifest)
    state = {"complete": "completed"}.get(state, state)
    obj["status"] = jobset_status(state, obj["spec"]["replicatedJobs"], restarts, obj["metadata"]["name"])
    return obj


# Kueue 0.17.1's words (pkg/scheduler/flavorassigner/flavorassigner.go lines 1046 and 1063; the pod set
# prefix from Assignment.Message; pkg/controller/core/workload_controller.go 460-519, 995).
KUEUE_MESSAGES = {
    "queued": "couldn't assign flavors to pod set worker: insufficient unused quota for google.com/tpu in flavor "
    "tpu-rl-tpu-slice, 32 more needed",
    "never": "couldn't assign flavors to pod set worker: insufficient quota for google.com/tpu in flavor "
    "tpu-rl-tpu-slice, previously considered podsets requests (0) + current podset request (64) > maximum "
    "capacity (32)",
    "deactivated": "The workload is deactivated due to exceeding the maximum number of re-queuing retries",
}
# The PodsReady condition Kueue 0.17.1's job reconciler writes with waitForPodsReady on (reconciler.go
# generatePodsReadyCondition: its reasons and messages): state -> (status, reason, message).
PODS_READY = {
    "running": ("True", "Started", "All pods reached readiness and the workload is running"),
    "recovering": ("False", "WaitForRecovery", "At least one pod has failed, waiting for recovery"),
    "recovered": ("True", "Recovered", "All pods reached readiness and the workload is running"),
}


def workload(jobset: dict[str, Any], state: str, *, since: str = T1) -> dict[str, Any]:
    """The Workload Kueue 0.17.1 keeps for a queued JobSet, in ``state``: queued (waiting for quota), never
    (can never fit), admitted, deactivated (its pods were not Ready in time, backoffLimitCount 0), or admitted with
    waitForPodsReady's condition (``PODS_READY``): running (every pod Ready), recovering (a pod failed: Kueue waits
    for them, its recovery timeout running from ``since``), recovered (Ready again)."""
    meta = jobset["metadata"]
    conditions: list[dict[str, Any]] = []
    if state in ("queued", "never"):
        conditions.append(
            {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": KUEUE_MESSAGES[state]}
        )
    elif state == "admitted" or state in PODS_READY:
        conditions += [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "Quota reserved"},
            {"type": "Admitted", "status": "True", "reason": "Admitted", "message": "The workload is admitted"},
        ]
        if state in PODS_READY:
            status, reason, message = PODS_READY[state]
            conditions.append({"type": "PodsReady", "status": status, "reason": reason, "message": message})
    else:
        conditions += [
            {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": KUEUE_MESSAGES[state]},
            {
                "type": "Evicted",
                "status": "True",
                "reason": "DeactivatedDueToRequeuingLimitExceeded",
                "message": KUEUE_MESSAGES[state],
            },
        ]
    for entry in conditions:
        entry["lastTransitionTime"] = since if entry["type"] == "PodsReady" else T1
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": f"jobset-{meta['name']}-1a2b3",
            "namespace": meta["namespace"],
            "labels": {"kueue.x-k8s.io/job-uid": meta["uid"]},
            "ownerReferences": [
                {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": meta["name"], "uid": meta["uid"]}
            ],
        },
        "spec": {"queueName": meta["labels"].get("kueue.x-k8s.io/queue-name", ""), "active": state != "deactivated"},
        "status": {"conditions": conditions},
    }


def _selected(obj: dict[str, Any], selector: str) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, selector.split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


# The scheduler's and the cluster autoscaler's words (kube-scheduler ``schedule_one.go`` FitError, GKE's
# cluster-autoscaler pod events ``NotTriggerScaleUp`` / ``FailedScaleUp``).
SCHEDULER_MESSAGE = (
    "0/6 nodes are available: 2 Insufficient memory, 4 node(s) didn't match Pod's node affinity/selector. "
    "preemption: 0/6 nodes are available: 2 No preemption victims found for incoming pod, 4 Preemption is not "
    "helpful for scheduling."
)
AUTOSCALER_MESSAGES = {
    "NotTriggerScaleUp": "pod didn't trigger scale-up: 1 max node group size reached, 2 node(s) didn't match Pod's "
    "node affinity/selector",
    "FailedScaleUp": "Node scale up in zones us-east5-b associated with this pod failed: GCE out of resources. Pod is "
    "at risk of not being scheduled.",
    "TriggeredScaleUp": "pod triggered scale-up: [{https://www.googleapis.com/compute/v1/projects/p/zones/us-east5-b/"
    "instanceGroups/gke-tpu-rl-cpu-np-1a2b3c4d-grp 0->1 (max: 4)}]",
}


def step_pod(
    jobset: dict[str, Any],
    rjob: str,
    state: str,
    *,
    index: int = 0,
    container: str = "",
    message: str = SCHEDULER_MESSAGE,
) -> dict[str, Any]:
    """A pod of ``rjob`` of a step's JobSet as the Job controller makes it (JobSet's labels on it: v0.10.1
    ``labelAndAnnotateObject``, the restart attempt the JobSet's ``status.restarts``) and the kubelet reports it:
    ``unschedulable`` (PodScheduled False, the scheduler's ``message``; not Ready), ``running`` (Ready), or
    ``oomkilled`` (its container ``container`` terminated by the kernel's OOM killer, exit 137)."""
    name = jobset["metadata"]["name"]
    job = f"{name}-{rjob}-0"
    template = next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == rjob)["template"]["spec"]["template"]
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job}-{index}-x7k2p",
            "namespace": jobset["metadata"]["namespace"],
            "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{job}-{index}")),
            "labels": {
                **template["metadata"].get("labels", {}),
                "jobset.sigs.k8s.io/jobset-name": name,
                "jobset.sigs.k8s.io/jobset-uid": jobset["metadata"].get("uid", ""),
                "jobset.sigs.k8s.io/replicatedjob-name": rjob,
                "jobset.sigs.k8s.io/restart-attempt": str((jobset.get("status") or {}).get("restarts", 0)),
                "batch.kubernetes.io/job-name": job,
                "job-name": job,
            },
        },
        "spec": {"nodeSelector": template["spec"].get("nodeSelector", {})},
    }
    if state == "unschedulable":
        pod["status"] = {
            "phase": "Pending",
            "qosClass": "Burstable",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "lastProbeTime": None,
                    "lastTransitionTime": T0,
                    "reason": "Unschedulable",
                    "message": message,
                },
                {"type": "Ready", "status": "False", "lastTransitionTime": T0, "reason": "PodScheduled"},
            ],
        }
    elif state == "oomkilled":
        pod["status"] = {
            "phase": "Failed",
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": T0}],
            "containerStatuses": [
                {
                    "name": container,
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "image": "us-docker.pkg.dev/cloud-tpu-images/maxtext-images/tpu_post_training:0.2.4",
                    "imageID": "",
                    "containerID": "containerd://" + "0" * 64,
                    "lastState": {},
                    "state": {
                        "terminated": {
                            "exitCode": 137,
                            "reason": "OOMKilled",
                            "startedAt": T0,
                            "finishedAt": T1,
                            "containerID": "containerd://" + "0" * 64,
                        }
                    },
                }
            ],
        }
    else:
        pod["status"] = {
            "phase": "Running",
            "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
        }
    return pod


def restarted(pod: dict[str, Any], container: str, reason: str, code: int, *, sidecar: bool = False) -> dict[str, Any]:
    """``pod`` after its ``container`` restarted in place as the kubelet reports it: ``restartCount`` one more and the
    termination in ``lastState.terminated`` (``reason`` ``OOMKilled`` with 137 for the kernel's OOM killer, ``Error``
    for a non-zero exit), running again; a ``sidecar`` (a native sidecar, ``restartPolicy: Always``) is in
    ``initContainerStatuses``."""
    key = "initContainerStatuses" if sidecar else "containerStatuses"
    statuses = pod["status"].setdefault(key, [])
    found = next((s for s in statuses if s["name"] == container), None)
    if found is None:
        found = {"name": container, "ready": True, "restartCount": 0, "started": True, "state": {}, "lastState": {}}
        statuses.append(found)
    found["restartCount"] += 1
    found["lastState"] = {
        "terminated": {"exitCode": code, "reason": reason, "startedAt": T0, "finishedAt": T1, "containerID": "c"}
    }
    found["state"] = {"running": {"startedAt": T1}}
    return pod


def pod_event(pod: dict[str, Any], reason: str, *, at: str = T1) -> dict[str, Any]:
    """A core/v1 Event on ``pod``: ``FailedScheduling`` from the scheduler (written through events.k8s.io, so
    ``source`` is empty and ``reportingComponent`` names it) or an autoscaler event (``source.component``)."""
    scheduler = reason == "FailedScheduling"
    meta = pod["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{abs(hash((reason, at))) % 10**16:x}", "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
        },
        "reason": reason,
        "message": SCHEDULER_MESSAGE if scheduler else AUTOSCALER_MESSAGES[reason],
        "type": "Normal" if reason == "TriggeredScaleUp" else "Warning",
        "source": {} if scheduler else {"component": "cluster-autoscaler"},
        "reportingComponent": "default-scheduler" if scheduler else "cluster-autoscaler",
        "firstTimestamp": None if scheduler else at,
        "lastTimestamp": None if scheduler else at,
        "eventTime": f"{at[:-1]}.000000Z" if scheduler else None,
        "count": 1,
    }


def kubelet_event(pod: dict[str, Any], reason: str, message: str, *, at: str = T1, node: str = "") -> dict[str, Any]:
    """A core/v1 Event the kubelet records on ``pod`` (``Pulling``, ``Pulled``, ``Created``, ``Started``): through the
    core/v1 recorder, so ``source`` names the kubelet and its node, ``firstTimestamp``/``lastTimestamp`` are set and
    ``eventTime`` is null; ``involvedObject.fieldPath`` names the container."""
    meta = pod["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{meta['name']}.{abs(hash((reason, message, at))) % 10**16:x}",
            "namespace": meta["namespace"],
        },
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
            "fieldPath": "spec.containers{workload-container}",
        },
        "reason": reason,
        "message": message,
        "type": "Normal",
        "source": {"component": "kubelet", "host": node or "gke-tpu-rl-cpu-np-1a2b3c4d-x1y2"},
        "reportingComponent": "kubelet",
        "reportingInstance": node or "gke-tpu-rl-cpu-np-1a2b3c4d-x1y2",
        "firstTimestamp": at,
        "lastTimestamp": at,
        "eventTime": None,
        "count": 1,
    }


def tpu_node(
    name: str,
    created: str,
    *,
    accelerator: str = "tpu-v6e-slice",
    chips: int = 4,
    topology: str = "4x8",
    labels: dict[str, str] | None = None,
    ready: str = "True",
) -> dict[str, Any]:
    """A TPU node as GKE registers it: its pool's, accelerator's and topology's labels (and ``labels``: GKE's
    ``cloud.google.com/scheduled-maintenance-time``, say), ``google.com/tpu`` in its capacity, its ``Ready`` condition
    (``False``: the kubelet says so; ``Unknown``: the node controller's, once the kubelet stopped reporting)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
            "creationTimestamp": created,
            "labels": {
                "cloud.google.com/gke-nodepool": "tpu-np",
                "cloud.google.com/gke-tpu-accelerator": accelerator,
                "cloud.google.com/gke-tpu-topology": topology,
                "kubernetes.io/hostname": name,
                **(labels or {}),
            },
        },
        "spec": {"providerID": f"gce://p/us-east5-b/{name}"},
        "status": {
            "capacity": {"cpu": "180", "memory": "742172108Ki", "google.com/tpu": str(chips), "pods": "110"},
            "allocatable": {"cpu": "179", "memory": "721254348Ki", "google.com/tpu": str(chips), "pods": "110"},
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                {
                    "type": "Ready",
                    "status": ready,
                    "reason": {"True": "KubeletReady", "False": "KubeletNotReady"}.get(ready, "NodeStatusUnknown"),
                    "lastHeartbeatTime": created,
                    "lastTransitionTime": created,
                },
            ],
        },
    }


def _fields(obj: dict[str, Any], selector: str) -> bool:
    """The API server's field selectors (``a.b=value``, joined by commas), as events support them."""
    for term in filter(None, selector.split(",")):
        path, _, value = term.partition("=")
        node: Any = obj
        for part in path.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if str(node) != value:
            return False
    return True


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    """Replies go out at once: the headers and the body are two writes, and on a kept-alive connection Nagle's
    algorithm would hold the body until the client's delayed ACK of the headers, 40 ms a request."""
    server: _Server

    def log_message(self, *args: object) -> None:
        pass

    def _json(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        cluster = self.server.cluster
        cluster.requests.append(self.path)
        if self.headers.get("Authorization") != f"Bearer {cluster.token}":
            self._json(401, status_body(401, "Unauthorized", "Unauthorized"))
            return
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        parts = url.path.strip("/").split("/")
        # /api/v1/namespaces/<ns>/{pods,events}: the core objects a step's wait reads
        if len(parts) == 5 and parts[:2] == ["api", "v1"] and parts[2] == "namespaces" and parts[4] in CORE:
            with cluster.lock:
                items = [copy.deepcopy(o) for o in cluster.core.get((parts[4], parts[3]), [])]
            items = [
                o
                for o in items
                if _selected(o, query.get("labelSelector", "")) and _fields(o, query.get("fieldSelector", ""))
            ]
            kind = CORE[parts[4]]
            self._json(
                200, {"apiVersion": "v1", "kind": f"{kind}List", "metadata": {"resourceVersion": "1"}, "items": items}
            )
            return
        # /api/v1/nodes: the cluster's nodes (a list, by label)
        if parts == ["api", "v1", "nodes"]:
            with cluster.lock:
                items = [copy.deepcopy(o) for o in cluster.core.get(("nodes", ""), [])]
            items = [o for o in items if _selected(o, query.get("labelSelector", ""))]
            self._json(
                200, {"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "1"}, "items": items}
            )
            return
        # /apis/<group>/<version>/namespaces/<ns>/<plural>[/<name>], or /apis/<group>/<version>/<plural>[/<name>]
        found = _custom_path(parts, cluster)
        if found is None:
            self._json(404, status_body(404, "NotFound", "the server could not find the requested resource", {}))
            return
        group, version, namespace, plural, name = found
        kind = SERVED[(group, version, plural)][0]
        with cluster.lock:
            if name is not None:
                obj = cluster.objects.get((plural, namespace, name))
                if obj is None:
                    details = {"name": name, "group": group, "kind": plural}
                    self._json(404, status_body(404, "NotFound", f'{plural}.{group} "{name}" not found', details))
                else:
                    self._json(200, obj)
                return
            items = sorted(
                (o for (p, ns, _), o in cluster.objects.items() if p == plural and ns == namespace),
                key=lambda o: o["metadata"]["name"],
            )
        items = [o for o in items if _selected(o, query.get("labelSelector", ""))]
        start = int(query.get("continue") or 0)
        limit = int(query.get("limit") or 0) or len(items) or 1
        page = items[start : start + limit]
        metadata: dict[str, Any] = {"resourceVersion": str(cluster.version)}
        if start + limit < len(items):
            metadata["continue"] = str(start + limit)
        self._json(
            200, {"apiVersion": f"{group}/{version}", "kind": f"{kind}List", "metadata": metadata, "items": page}
        )

    def do_PATCH(self) -> None:  # noqa: N802
        """A node's labels changed (``/api/v1/nodes/<name>``, a JSON merge patch or a strategic merge patch of
        ``metadata.labels``, as `kubectl label` sends one: a null value removes the label); the answer is the node."""
        cluster = self.server.cluster
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        cluster.patches.append((self.path, self.headers.get("Content-Type", ""), body))
        if self.headers.get("Authorization") != f"Bearer {cluster.token}":
            self._json(401, status_body(401, "Unauthorized", "Unauthorized"))
            return
        parts = urlsplit(self.path).path.strip("/").split("/")
        if cluster.patch_refusal:
            code = cluster.patch_refusal
            self._json(code, status_body(code, "Forbidden", f'nodes "{parts[-1]}" is forbidden: User cannot patch'))
            return
        if parts[:3] != ["api", "v1", "nodes"] or len(parts) != 4:
            self._json(404, status_body(404, "NotFound", "the server could not find the requested resource", {}))
            return
        with cluster.lock:
            nodes = cluster.core.get(("nodes", ""), [])
            node = next((n for n in nodes if n["metadata"]["name"] == parts[3]), None)
            if node is not None:
                labels = node["metadata"].setdefault("labels", {})
                for key, value in ((body.get("metadata") or {}).get("labels") or {}).items():
                    if value is None:
                        labels.pop(key, None)
                    else:
                        labels[key] = value
                node = copy.deepcopy(node)
        if node is None:
            self._json(404, status_body(404, "NotFound", f'nodes "{parts[3]}" not found', {"name": parts[3]}))
            return
        self._json(200, node)

    def do_POST(self) -> None:  # noqa: N802
        """A create: only ``dryRun=All`` (the program's webhook wait) is served; it runs the "webhooks" (the
        cluster's ``unreachable`` answers first) and stores nothing."""
        cluster = self.server.cluster
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        cluster.posts.append(self.path)
        if self.headers.get("Authorization") != f"Bearer {cluster.token}":
            self._json(401, status_body(401, "Unauthorized", "Unauthorized"))
            return
        found = _custom_path(url.path.strip("/").split("/"), cluster)
        if found is None or found[4] is not None:
            self._json(404, status_body(404, "NotFound", "the server could not find the requested resource", {}))
            return
        if query.get("dryRun") != "All":
            self._json(405, status_body(405, "MethodNotAllowed", "only dry-run creates are served here"))
            return
        group, _version, namespace, plural, _ = found
        obj = json.loads(body)
        with cluster.lock:
            left = cluster.unreachable.get(plural, (0, ""))
            if left[0] > 0:
                cluster.unreachable[plural] = (left[0] - 1, left[1])
                self._json(500, webhook_unreachable(plural, left[1]))
                return
            exists = (plural, namespace, obj["metadata"]["name"]) in cluster.objects
        if exists:
            name = obj["metadata"]["name"]
            details = {"name": name, "group": group, "kind": plural}
            self._json(409, status_body(409, "AlreadyExists", f'{plural}.{group} "{name}" already exists', details))
            return
        self._json(201, {**obj, "metadata": {**obj["metadata"], "uid": str(uuid.uuid4())}})


def _custom_path(parts: list[str], cluster: FakeCluster) -> tuple[str, str, str, str, str | None] | None:
    """(group, version, namespace ("" when cluster-scoped), plural, name or None) of a served custom object
    path, or None."""
    if len(parts) < 4 or parts[0] != "apis":
        return None
    group, version = parts[1], parts[2]
    if len(parts) in (6, 7) and parts[3] == "namespaces":
        namespace, plural, name = parts[4], parts[5], (parts[6] if len(parts) == 7 else None)
    elif len(parts) in (4, 5):
        namespace, plural, name = "", parts[3], (parts[4] if len(parts) == 5 else None)
    else:
        return None
    served = SERVED.get((group, version, plural))
    if served is None or served[1] != bool(namespace) or group in cluster.missing_groups:
        return None
    return group, version, namespace, plural, name


class _Server(LoopbackServer):
    """Stops at once; its listen backlog of 128 (``PromptStop``) lets a pool of ten connections opened at once by a
    CPU-starved worker connect within a test's half-second connect budget."""

    cluster: FakeCluster


class FakeCluster:
    """The objects of one cluster and the loopback API server that serves them."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.requests: list[str] = []
        self.token = TOKEN
        self.core: dict[tuple[str, str], list[dict[str, Any]]] = {}
        """(pods | events, namespace) -> the objects a list returns; ("nodes", "") -> the cluster's nodes."""
        self.missing_groups: set[str] = set()
        """API groups whose CRD is not installed (the JobSet CRD before the Helm release)."""
        self.posts: list[str] = []
        """The paths of the creates the server was sent (dry runs)."""
        self.patches: list[tuple[str, str, Any]] = []
        """(path, Content-Type, body) of each patch the server was sent (a node's labels)."""
        self.patch_refusal = 0
        """An HTTP code every patch is refused with (0: patches are applied)."""
        self.unreachable: dict[str, tuple[int, str]] = {}
        """plural -> (n, mode): the next n creates of that kind find its webhook unreachable (``webhook_unreachable``:
        "connection refused" or "no endpoints")."""
        self.lock = threading.Lock()
        self.version = 1
        self.url = ""
        self.ca_pem = b""
        self._server: _Server | None = None

    # -- objects -------------------------------------------------------------------------------

    @staticmethod
    def _key(obj: dict[str, Any]) -> tuple[str, str, str]:
        _group, _version, plural, namespaced = KINDS[obj["kind"]]
        return plural, obj["metadata"]["namespace"] if namespaced else "", obj["metadata"]["name"]

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` as the API server would: a UID and timestamps when it is new (kept when it exists)."""
        obj = copy.deepcopy(obj)
        with self.lock:
            self.version += 1
            old = self.objects.get(self._key(obj))
            metadata = obj.setdefault("metadata", {})
            metadata["uid"] = (old or {}).get("metadata", {}).get("uid") or str(uuid.uuid4())
            metadata["creationTimestamp"] = (old or {}).get("metadata", {}).get("creationTimestamp") or T0
            metadata["resourceVersion"] = str(self.version)
            metadata["generation"] = 1
            self.objects[self._key(obj)] = obj
        return copy.deepcopy(obj)

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        plural = PLURALS[kind]
        with self.lock:
            obj = self.objects.get((plural, namespace, name))
        return copy.deepcopy(obj) if obj else None

    def set_state(self, kind: str, namespace: str, name: str, state: str, *, restarts: int = 0) -> dict[str, Any]:
        """The controllers move an existing object to ``state``."""
        obj = self.get(kind, namespace, name)
        assert obj is not None, f"no {kind} {namespace}/{name}"
        return self.put(with_state(obj, state, restarts=restarts))

    def kueue(self, namespace: str, name: str, state: str, *, since: str = T1) -> dict[str, Any]:
        """Kueue acts on a queued JobSet: its Workload in ``state`` (``workload``); the JobSet suspended until
        admitted (Kueue's webhook suspends it at creation; ``startJob`` unsuspends it, ``stopJob`` suspends it
        again)."""
        obj = self.get("JobSet", namespace, name)
        assert obj is not None, f"no JobSet {namespace}/{name}"
        obj["spec"]["suspend"] = state in ("queued", "never", "deactivated")
        obj = self.put(obj)
        self.put(workload(obj, state, since=since))
        return obj

    def delete(self, kind: str, namespace: str, name: str) -> None:
        plural = PLURALS[kind]
        with self.lock:
            gone = self.objects.pop((plural, namespace, name), None)
            if gone and kind == "JobSet":  # the garbage collector follows the Workloads' owner references
                uid = gone["metadata"]["uid"]
                for key, obj in list(self.objects.items()):
                    if key[0] == "workloads" and obj["metadata"]["labels"].get("kueue.x-k8s.io/job-uid") == uid:
                        del self.objects[key]

    # -- serving -------------------------------------------------------------------------------

    @property
    def ca_data(self) -> str:
        """``certificate-authority-data`` for a kubeconfig (base64 of the CA's PEM)."""
        return base64.b64encode(self.ca_pem).decode()

    @property
    def endpoint(self) -> str:
        """``host:port``, as a GKE cluster's ``endpoint`` output."""
        return self.url.split("://", 1)[1]

    def start(self, *, tls: bool = True) -> FakeCluster:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.cluster = self
        if tls:
            import trustme

            ca = trustme.CA()
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ca.issue_cert("127.0.0.1").configure_cert(context)
            # The handshake happens in each connection's own thread (on its first read), not in accept(): there
            # one slow client (a CPU-starved worker) would hold up every other handshake past its connect budget.
            server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
            self.ca_pem = ca.cert_pem.bytes()
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}"
        self._server = server.start()
        return self

    def stop(self) -> None:
        """Stop answering: from now on the address refuses connections (as if unreachable)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def kubeconfig(self, user: dict[str, Any] | None = None, context: str = "test") -> dict[str, Any]:
        """A kubeconfig for this cluster (a bearer token unless ``user`` says otherwise)."""
        cluster: dict[str, Any] = {"server": self.url}
        if self.ca_pem:
            cluster["certificate-authority-data"] = self.ca_data
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": context,
            "clusters": [{"name": context, "cluster": cluster}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
            "users": [{"name": context, "user": user or {"token": self.token}}],
        }


@contextmanager
def fake_cluster(*, tls: bool = True) -> Iterator[FakeCluster]:
    cluster = FakeCluster().start(tls=tls)
    try:
        yield cluster
    finally:
        cluster.stop()


@dataclass
class Relay:
    """A loopback TCP relay in front of a fake cluster (``cutting_handshakes``)."""

    kubeconfig: dict[str, Any]
    """A kubeconfig whose server is the relay (the same certificate: it is issued for 127.0.0.1)."""
    connections: int = 0
    """The TCP connections the client opened: each a TLS handshake tried."""


@contextmanager
def cutting_handshakes(cluster: FakeCluster, cut: int) -> Iterator[Relay]:
    """A loopback TCP relay to ``cluster`` that reads the first ``cut`` connections' ClientHello and closes them
    (an EOF mid-handshake, as a load balancer in front of an upgrading control plane does), then relays the
    rest."""
    target = ("127.0.0.1", int(cluster.endpoint.rsplit(":", 1)[1]))
    relay = Relay(cluster.kubeconfig())
    lock = threading.Lock()

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            with lock:
                relay.connections += 1
                closing = relay.connections <= cut
            if closing:
                self.request.recv(65536)  # read the hello: closing with it unread would be a reset, not an EOF
                return
            with socket.create_connection(target) as upstream:
                for end in (self.request, upstream):  # relayed as it comes (no Nagle: ``_Handler``)
                    end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                pipes = [(self.request, upstream), (upstream, self.request)]
                threads = [threading.Thread(target=pipe, args=ends, daemon=True) for ends in pipes]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join(5)

    server = PromptStop(("127.0.0.1", 0), Handler).start()
    relay.kubeconfig["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{server.server_address[1]}"
    try:
        yield relay
    finally:
        server.shutdown()
        server.server_close()


def pipe(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
        sink.shutdown(socket.SHUT_WR)
