"""What the controllers make of a step's JobSet, derived with their own formulas (plain data, no client).

The API server validates the JobSet we send; the objects JobSet, the Job controller and Kueue create from it
are validated only when *they* create them, long after `pulumi up` applied the JobSet. A name that fits our
object can overflow a label in theirs: a training JobSet whose coordinator label is 73 characters is accepted by
JobSet 0.10.1, which then has every child Job refused (no pod ever starts), and refused itself by 0.12.0. This
module derives those objects and checks them with Kubernetes' rules (``core.kubernetes_rules``), so such a stack
is refused before anything is created.

Formulas, by controller and version (``core.controllers.JOBSET_VERSIONS``; both allowed versions derive the
same objects, only their validating webhooks differ):

- JobSet v0.10.1 and v0.12.0, ``pkg/controllers/jobset_controller.go``: child Jobs ``<jobset>-<replicatedJob>-<job
  index>`` (``placement.GenJobName``); ``labelAndAnnotateObject`` puts the same keys on each Job and its pod
  template, as labels and annotations (``JOBSET_KEYS``), the coordinator ``<jobset>-<replicatedJob>-<job>-<pod>.
  <subdomain>`` only with ``spec.coordinator`` (``coordinatorEndpoint``; ``CoordinatorEndpoint`` in 0.12.0); the
  subdomain is ``spec.network.subdomain`` or else the JobSet's name (``GetSubdomain``), set on the pods only
  with DNS hostnames (``constructJob``); the headless Service is named like the subdomain, selecting
  ``jobset-name`` (``createHeadlessSvcIfNecessary``).
- JobSet's validating webhook (``pkg/webhooks/jobset_webhook.go`` ``ValidateCreate``, both versions): the
  subdomain a DNS-1123 subdomain and a DNS-1035 label; the longest Job name and the longest pod name plus
  ``-abcde`` DNS-1035 labels. Since v0.11.0 (kubernetes-sigs/jobset#1079) also the coordinator label's value
  (``validateCoordinatorLabelValue``); v0.10.1 accepts it and the API server refuses every child Job instead.
- The Job controller (kubernetes ``pkg/controller/job/job_controller.go`` ``manageJob``,
  ``indexed_job_utils.go`` ``podGenerateNameWithIndex``): an Indexed Job's pod is ``<job>-<index>-`` plus five
  random characters (the prefix cut to 58 characters, keeping ``-<index>-``), hostname ``<job>-<index>``, the
  label and annotation ``batch.kubernetes.io/job-completion-index``; the API server adds ``job-name``,
  ``batch.kubernetes.io/job-name``, ``controller-uid``, ``batch.kubernetes.io/controller-uid`` to the template
  (``pkg/registry/batch/job/strategy.go`` ``generateSelector``), and refuses an Indexed Job whose last hostname
  ``<job>-<completions - 1>`` is not a DNS-1123 label (``pkg/apis/batch/validation`` ``ValidateJob``).
- Kueue v0.17.1: the Workload ``jobset-<jobset>-<5 of a sha1>`` (``jobframework/workload_names.go``
  ``GenerateWorkloadNameWithExtra``, cut to 253), one PodSet per replicated Job named after it in lower case
  (at most 8, each a DNS-1123 label: ``apis/kueue/v1beta2/workload_types.go``); at admission the pods get the
  labels ``kueue.x-k8s.io/podset``, ``kueue.x-k8s.io/local-queue-name`` and (when it is a DNS-1123 label)
  ``kueue.x-k8s.io/cluster-queue-name``, and the annotation ``kueue.x-k8s.io/workload``
  (``jobs/jobset/jobset_controller.go`` ``RunWithPodSetsInfo``, ``podset.FromAssignment``).

Values that depend on the cluster (UIDs, the random suffix) are stand-ins of their real length. Of each
replicated Job's Jobs and each Job's pods only the first and the last are derived: every value that differs
between them grows with the index (its digits), so the ones in between are no longer than the last one's.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from core import kubernetes_rules as rules
from core.names import CLUSTER_QUEUE, QUEUE_LABEL

COORDINATOR_CHECKED_SINCE = (0, 11, 0)
"""The first JobSet release whose webhook checks the coordinator label's value (kubernetes-sigs/jobset#1079)."""
UID = "00000000-0000-0000-0000-000000000000"
"""A stand-in UID (every Kubernetes UID is 36 characters)."""
RANDOM_SUFFIX = "abcde"
"""The five random characters of a generated name (apiserver ``names.SimpleNameGenerator``)."""
MAX_GENERATED_PREFIX = 58
"""``names.MaxGeneratedNameLength``: 63 minus the random suffix."""
PREFIX = "jobset.sigs.k8s.io/"
COORDINATOR_KEY = PREFIX + "coordinator"
EXCLUSIVE_KEY = "alpha.jobset.sigs.k8s.io/exclusive-topology"
MAX_POD_SETS = 8
WORKLOAD_NAME_MAX = 253


@dataclass(frozen=True)
class Derived:
    """One object a controller creates from a step's JobSet, as far as Kubernetes validates its names."""

    kind: str
    name: str
    by: str
    """The controller function that makes it."""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    hostname: str | None = None
    subdomain: str | None = None
    pod_sets: tuple[str, ...] = ()


@dataclass(frozen=True)
class Problem:
    """A derived value Kubernetes (or a webhook) refuses: what, where, and why."""

    what: str
    value: str
    why: str

    def __str__(self) -> str:
        return f"{self.what} {self.value!r} ({len(self.value)} characters): {self.why}"


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def subdomain_of(jobset: dict[str, Any]) -> str:
    """``GetSubdomain``: ``spec.network.subdomain``, or else the JobSet's name."""
    return ((jobset["spec"].get("network") or {}).get("subdomain")) or jobset["metadata"]["name"]


def dns_hostnames(jobset: dict[str, Any]) -> bool:
    """``dnsHostnamesEnabled``, after the webhook's default (``enableDNSHostnames`` true when unset)."""
    return (jobset["spec"].get("network") or {}).get("enableDNSHostnames", True) is not False


def coordinator_endpoint(jobset: dict[str, Any]) -> str | None:
    """``coordinatorEndpoint``: the coordinator label's value, None without ``spec.coordinator``."""
    coordinator = jobset["spec"].get("coordinator")
    if coordinator is None:
        return None
    return (
        f"{jobset['metadata']['name']}-{coordinator['replicatedJob']}-{coordinator.get('jobIndex', 0)}-"
        f"{coordinator.get('podIndex', 0)}.{subdomain_of(jobset)}"
    )


def job_name(jobset: str, replicated_job: str, index: int) -> str:
    """``placement.GenJobName``."""
    return f"{jobset}-{replicated_job}-{index}"


def pod_generate_name(job: str, index: int) -> str:
    """``podGenerateNameWithIndex``: ``<job>-<index>-``, cut to 58 characters keeping ``-<index>-``."""
    suffix = f"-{index}-"
    prefix = job + suffix
    if len(prefix) > MAX_GENERATED_PREFIX:
        prefix = prefix[: MAX_GENERATED_PREFIX - len(suffix)] + suffix
    return prefix


def workload_name(jobset: str) -> str:
    """Kueue's ``GenerateWorkloadNameWithExtra`` for a JobSet (the hash over a stand-in UID)."""
    digest = hashlib.sha1(f"JobSet\njobset.x-k8s.io\n{jobset}\n{UID}".encode()).hexdigest()[:5]
    return f"{('jobset-' + jobset)[: WORKLOAD_NAME_MAX - 6]}-{digest}"


def _jobset_keys(jobset: dict[str, Any], rjob: dict[str, Any], index: int, global_index: int) -> dict[str, str]:
    """``labelAndAnnotateObject``'s keys on a child Job and its pod template (the worst restart count)."""
    spec = jobset["spec"]
    replicas = [j.get("replicas", 1) for j in spec["replicatedJobs"]]
    name, namespace = jobset["metadata"]["name"], jobset["metadata"].get("namespace", "default")
    group = rjob.get("groupName", "default")
    group_jobs = [j for j in spec["replicatedJobs"] if j.get("groupName", "default") == group]
    keys = {
        "jobset-name": name,
        "jobset-uid": UID,
        "replicatedjob-name": rjob["name"],
        "restart-attempt": str((spec.get("failurePolicy") or {}).get("maxRestarts", 0)),
        "replicatedjob-replicas": str(rjob.get("replicas", 1)),
        "global-replicas": str(sum(replicas)),
        "job-index": str(index),
        "job-key": hashlib.sha1(f"{namespace}/{job_name(name, rjob['name'], index)}".encode()).hexdigest(),
        "job-global-index": str(global_index),
        "group-name": group,
        "group-replicas": str(sum(j.get("replicas", 1) for j in group_jobs)),
        "job-group-index": str(index),
    }
    found = {PREFIX + key: value for key, value in keys.items()}
    endpoint = coordinator_endpoint(jobset)
    if endpoint is not None:
        found[COORDINATOR_KEY] = endpoint
    return found


def _ends(count: int) -> list[int]:
    """The first and the last index of ``count`` (module docstring)."""
    return sorted({0, count - 1}) if count > 0 else []


def derive(jobset: dict[str, Any], *, cluster_queue: str | None = CLUSTER_QUEUE) -> list[Derived]:
    """Every object the controllers create from ``jobset``: its headless Service, each child Job, each pod and
    (queued to Kueue) its Workload. ``cluster_queue``: the ClusterQueue that admits it (None: not known, a
    LocalQueue of another team's)."""
    name = jobset["metadata"]["name"]
    spec = jobset["spec"]
    queue = (jobset["metadata"].get("labels") or {}).get(QUEUE_LABEL)
    found: list[Derived] = []
    if dns_hostnames(jobset):
        service = subdomain_of(jobset)
        found.append(Derived("Service", service, "createHeadlessSvcIfNecessary", labels={PREFIX + "jobset-name": name}))
    workload = workload_name(name) if queue else None
    if workload is not None:
        pod_sets = tuple(j["name"].lower() for j in spec["replicatedJobs"])
        found.append(Derived("Workload", workload, "GenerateWorkloadNameWithExtra", pod_sets=pod_sets))
    global_index = 0
    for rjob in spec["replicatedJobs"]:
        job_spec = rjob["template"]["spec"]
        template = job_spec["template"]
        template_meta = template.get("metadata") or {}
        job_annotations = dict((rjob["template"].get("metadata") or {}).get("annotations") or {})
        exclusive = {
            k: v
            for k, v in {**(jobset["metadata"].get("annotations") or {}), **job_annotations}.items()
            if k == EXCLUSIVE_KEY
        }
        for index in _ends(rjob.get("replicas", 1)):
            job = job_name(name, rjob["name"], index)
            keys = _jobset_keys(jobset, rjob, index, global_index + index)
            job_labels = {**((rjob["template"].get("metadata") or {}).get("labels") or {}), **keys}
            found.append(
                Derived(
                    "Job",
                    job,
                    "labelAndAnnotateObject",
                    labels=job_labels,
                    annotations={**job_annotations, **keys, **exclusive},
                )
            )
            completions = job_spec.get("completions", job_spec.get("parallelism", 1))
            pod_labels = {
                **(template_meta.get("labels") or {}),
                **keys,
                "job-name": job,
                "batch.kubernetes.io/job-name": job,
                "controller-uid": UID,
                "batch.kubernetes.io/controller-uid": UID,
            }
            pod_annotations = {**(template_meta.get("annotations") or {}), **keys, **exclusive}
            if workload is not None:
                pod_labels["kueue.x-k8s.io/podset"] = rjob["name"].lower()
                pod_labels["kueue.x-k8s.io/local-queue-name"] = queue or ""
                if cluster_queue is not None and not rules.dns1123_label(cluster_queue):
                    pod_labels["kueue.x-k8s.io/cluster-queue-name"] = cluster_queue
                pod_annotations["kueue.x-k8s.io/workload"] = workload
            for pod in _ends(completions):
                indexed = job_spec.get("completionMode", "Indexed") == "Indexed"
                found.append(
                    Derived(
                        "Pod",
                        (pod_generate_name(job, pod) if indexed else f"{job}-") + RANDOM_SUFFIX,
                        "manageJob",
                        labels={
                            **pod_labels,
                            **({"batch.kubernetes.io/job-completion-index": str(pod)} if indexed else {}),
                        },
                        annotations={
                            **pod_annotations,
                            **({"batch.kubernetes.io/job-completion-index": str(pod)} if indexed else {}),
                        },
                        hostname=f"{job}-{pod}" if indexed else None,
                        subdomain=subdomain_of(jobset) if dns_hostnames(jobset) else None,
                    )
                )
        global_index += rjob.get("replicas", 1)
    return found


def _named(what: str, value: str, problems: list[str]) -> list[Problem]:
    return [Problem(what, value, problem) for problem in problems]


def webhook_problems(jobset: dict[str, Any], version: str) -> list[Problem]:
    """What JobSet ``version``'s validating webhook refuses at create (``ValidateCreate``)."""
    name = jobset["metadata"]["name"]
    spec = jobset["spec"]
    found: list[Problem] = []
    subdomain = (spec.get("network") or {}).get("subdomain")
    if subdomain:
        found += _named("spec.network.subdomain", subdomain, rules.dns1123_subdomain(subdomain))
        found += _named("spec.network.subdomain", subdomain, rules.dns1035_label(subdomain))
    for rjob in spec["replicatedJobs"]:
        longest = job_name(name, rjob["name"], rjob.get("replicas", 1) - 1)
        found += _named("the longest Job name JobSet generates", longest, rules.dns1035_label(longest))
        job_spec = rjob["template"]["spec"]
        if job_spec.get("completionMode", "Indexed") == "Indexed" and "completions" in job_spec:
            pod = f"{longest}-{job_spec['completions'] - 1}-{RANDOM_SUFFIX}"
            found += _named("the longest pod name JobSet checks", pod, rules.dns1035_label(pod))
    endpoint = coordinator_endpoint(jobset)
    if endpoint is not None and _version(version) >= COORDINATOR_CHECKED_SINCE:
        found += _named(f"label {COORDINATOR_KEY}", endpoint, rules.label_value(endpoint))
    return found


def object_problems(obj: Derived) -> list[Problem]:
    """What the API server refuses of a derived object (its name, labels, annotations, hostname, subdomain)."""
    what = f"{obj.kind} ({obj.by})"
    found: list[Problem] = []
    name_rule = rules.dns1035_label if obj.kind == "Service" else rules.dns1123_subdomain
    found += _named(f"{what} name", obj.name, name_rule(obj.name))
    for key, value in obj.labels.items():
        found += _named(f"{what} label {key}", value, rules.label_value(value))
        found += _named(f"{what} label key", key, rules.label_key(key))
    found += [Problem(f"{what} annotations", obj.name, p) for p in rules.annotation_problems(obj.annotations)]
    if obj.hostname is not None:
        found += _named(f"{what} hostname", obj.hostname, rules.dns1123_label(obj.hostname))
    if obj.subdomain is not None:
        found += _named(f"{what} subdomain", obj.subdomain, rules.dns1123_label(obj.subdomain))
    if obj.kind == "Workload":
        if len(obj.pod_sets) > MAX_POD_SETS:
            found.append(Problem(f"{what} podSets", ",".join(obj.pod_sets), f"must have at most {MAX_POD_SETS} items"))
        for pod_set in obj.pod_sets:
            found += _named(f"{what} podSet name", pod_set, rules.dns1123_label(pod_set))
    return found


def job_validation_problems(jobset: dict[str, Any]) -> list[Problem]:
    """``ValidateJob``: an Indexed Job's last hostname ``<job>-<completions - 1>`` must be a DNS-1123 label."""
    name = jobset["metadata"]["name"]
    found: list[Problem] = []
    for rjob in jobset["spec"]["replicatedJobs"]:
        job_spec = rjob["template"]["spec"]
        if job_spec.get("completionMode", "Indexed") != "Indexed" or "completions" not in job_spec:
            continue
        for index in _ends(rjob.get("replicas", 1)):
            last = f"{job_name(name, rjob['name'], index)}-{job_spec['completions'] - 1}"
            found += _named("the last pod hostname of an Indexed Job", last, rules.dns1123_label(last))
    return found


def problems(jobset: dict[str, Any], version: str, *, cluster_queue: str | None = CLUSTER_QUEUE) -> list[Problem]:
    """Every value of ``jobset`` or of what the controllers derive from it that JobSet ``version``'s webhook
    or the API server refuses (empty: every object can be created)."""
    found = webhook_problems(jobset, version) + job_validation_problems(jobset)
    for obj in derive(jobset, cluster_queue=cluster_queue):
        found += object_problems(obj)
    return list(dict.fromkeys(found))
