"""``kueue-queue-fits`` on what Kueue makes of a step before it weighs a flavor, through pulumi-policy's own analyzer
(``tests/analyzer.py``) on small stacks built by hand: how many pods each pod set has (a JobSet's replicated Job
``replicas x min(parallelism, completions)``, a Job's one pod set ``main``), what one pod asks (its containers, its
native sidecars, or its largest init container; a fraction of a core is a quantity, a word is not), which requests
come first (chips before cpu and memory), who runs the step (``spec.managedBy``), which namespaces a ClusterQueue
admits, and which pods bypass the queue (a TPU pod of another kind). A step Kueue would never admit waits until
``pulumi up`` gives up, and one the API server would refuse fails it; so each finding here is the exact line an
operator reads, on the resource it names (a preview's advisory on none), and the near miss passes."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from tests import analyzer
from tools.plan.offline import UNKNOWN

pytestmark = pytest.mark.pure

policies = importlib.import_module("policy.tpu_rl_policies")
POLICY = analyzer.pack_policy("kueue-queue-fits")
KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2"
JOB = "kubernetes:batch/v1:Job"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
CLUSTER_QUEUE = f"{KUEUE}:ClusterQueue"
QUEUE_LABEL = "kubernetes.io/metadata.name"


def urn(type_: str, name: str) -> str:
    return f"urn:pulumi:dev::tpu-rl::{type_}::{name}"


JOB_URN = urn(JOB, "step")
NEVER = ": Kueue would never admit it; size the ClusterQueue to the pools (tpu-rl:kueue)"
REFUSED = ": the API server would refuse it"
CANT_RUN = "can't run policy 'kueue-queue-fits' from policy pack 'tpu-rl-guardrails@v0.0.1' during preview: "
OWN = {"matchLabels": {QUEUE_LABEL: "tpu-rl"}}


def resource(type_: str, name: str, props: dict[str, Any]) -> analyzer.Resource:
    return analyzer.Resource(type_, name, urn(type_, name), props)


def container(name: str = "main", requests: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """A container asking ``requests`` (and the other ``resources`` parts and container fields given)."""
    resources = {key: fields.pop(key) for key in ("limits",) if key in fields}
    if requests is not None:
        resources["requests"] = requests
    return {"name": name, "image": "busybox", "resources": resources, **fields}


def pod(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers) or [container(requests={"cpu": "1"})]}
    if init:
        spec["initContainers"] = list(init)
    return spec


def job(
    spec: dict[str, Any] | None = None, pod_spec: dict[str, Any] | None = None, name: str = "step", queued: bool = True
) -> analyzer.Resource:
    """The Job ``name`` in the stack's namespace (queued on the LocalQueue ``q``): ``spec`` beside its pod template,
    whose pod asks one cpu unless ``pod_spec`` says otherwise."""
    metadata: dict[str, Any] = {"name": name, "namespace": "tpu-rl"}
    if queued:
        metadata["labels"] = {"kueue.x-k8s.io/queue-name": "q"}
    template = {"spec": pod_spec or pod()}
    return resource(JOB, name, {"metadata": metadata, "spec": {**(spec or {}), "template": template}})


def queues(quotas: dict[str, Any], selector: Any = OWN, covered: tuple[str, ...] = ()) -> list[analyzer.Resource]:
    """The LocalQueue ``q`` of the ClusterQueue ``cq`` (namespaces by ``selector``), whose one resource group covers
    ``covered`` (or what ``quotas`` names) with its one flavor ``default``, of nominal quotas ``quotas``; and that
    ResourceFlavor, untainted."""
    local_queue = {"metadata": {"name": "q", "namespace": "tpu-rl"}, "spec": {"clusterQueue": "cq"}}
    flavor = {"name": "default", "resources": [{"name": r, "nominalQuota": q} for r, q in quotas.items()]}
    group = {"coveredResources": list(covered or quotas), "flavors": [flavor]}
    spec = {"namespaceSelector": selector, "resourceGroups": [group]}
    return [
        resource(f"{KUEUE}:LocalQueue", "q", local_queue),
        resource(CLUSTER_QUEUE, "cq", {"metadata": {"name": "cq"}, "spec": spec}),
        resource(f"{KUEUE}:ResourceFlavor", "default", {"metadata": {"name": "default"}, "spec": {}}),
    ]


def found(*resources: analyzer.Resource, preview: bool = False, namespace: str = "") -> list[tuple[str, str]]:
    """(URN, message) of each finding of the stack ``resources`` at ``pulumi up`` (or a preview), every one of
    ``kueue-queue-fits``; the stack's namespace ``tpu-rl:namespace`` when given (else its default, ``tpu-rl``)."""
    config = {"tpu-rl:namespace": namespace} if namespace else {}
    pack = analyzer.Pack({"all": "mandatory"}, policies=[POLICY], stack="dev", stack_config=config, dry_run=preview)
    findings = pack.analyze_stack(resources)
    assert all(f.policy == POLICY.name for f in findings), findings
    return [(f.urn, f.message) for f in findings]


def asks(count: Any, what: str = "cpu", at_most: str = "0", where: str = "Job step (main)") -> str:
    """The finding of the pod set ``where`` that asks for ``count`` of ``what`` in all, more than the queue offers."""
    return (
        f"{where} asks for {count} {what} but ClusterQueue cq offers at most {at_most} on a flavor its pods fit{NEVER}"
    )


# ---------------------------------------------------------------------------------------------
# Quantities the API server refuses


NOT_A_QUANTITY = "is not a Kubernetes quantity the API server accepts"


@pytest.mark.parametrize(
    ("pod_spec", "finding"),
    [
        (pod(container(requests={"cpu": "lots"})), f"container main: requests.cpu 'lots' {NOT_A_QUANTITY}"),
        (pod(container(limits={"memory": "12 Gi"})), f"container main: limits.memory '12 Gi' {NOT_A_QUANTITY}"),
        (pod(container(requests={"cpu": "-1"})), f"container main: requests.cpu '-1' {NOT_A_QUANTITY}"),
        (
            pod(container(requests={"cpu": "x" * 50})),
            f"container main: requests.cpu '{'x' * 40}' {NOT_A_QUANTITY}",
        ),
        (
            pod(init=(container("fetch", requests={"memory": "1GB"}),)),
            f"container fetch: requests.memory '1GB' {NOT_A_QUANTITY}",
        ),
    ],
    ids=["word", "limit-with-space", "negative", "long-value-shown-cut-to-40", "init-container"],
)
def test_a_request_that_is_not_a_quantity_is_refused_on_the_step(pod_spec, finding):
    """The API server refuses the step: the finding names the pod set, the container (an init container's too), the
    part and the value (its first 40 characters), on the step's URN, whether or not the stack has a queue."""
    assert found(job(pod_spec=pod_spec)) == [(JOB_URN, f"Job step: main: {finding}{REFUSED}")]
    assert found(job(pod_spec=pod_spec), *queues({"cpu": "1", "memory": "1Gi"})) == [
        (JOB_URN, f"Job step: main: {finding}{REFUSED}")
    ]


@pytest.mark.parametrize("cpu", ["500m", "0", "0.5", 1], ids=["millicores", "zero", "fraction", "number"])
def test_a_fraction_of_a_core_or_none_is_a_quantity(cpu):
    assert found(job(pod_spec=pod(container(requests={"cpu": cpu}))), *queues({"cpu": "1"})) == []


def test_a_request_not_known_at_a_preview_is_judged_at_up_and_the_others_are_still_checked():
    """At a preview a request may come from a resource not created yet: the policy says it cannot judge it (an
    advisory, on no resource), and still reads the container's other requests: one that is not a quantity is what it
    would report."""
    path = "Job step: .spec.template.spec.containers[0].resources.requests.cpu"
    unknown = job(pod_spec=pod(container(requests={"cpu": UNKNOWN, "memory": "lots"})))
    assert found(unknown, preview=True) == [
        (
            "",
            f"{CANT_RUN}{path} not known until what they come from exists; judged at `pulumi up`; reading them as "
            f"unset it would report: Job step: main: container main: requests.memory 'lots' {NOT_A_QUANTITY}"
            f"{REFUSED}",
        )
    ]
    known_memory = job(pod_spec=pod(container(requests={"cpu": UNKNOWN, "memory": "1Gi"})))
    assert found(known_memory, preview=True) == [
        ("", f"{CANT_RUN}{path} not known until what they come from exists; judged at `pulumi up`")
    ]


@pytest.mark.parametrize(
    ("what", "asked", "offered", "shown", "shown_offered"),
    [
        ("memory", "1Gi", "1023Mi", "1Gi", "1023Mi"),
        ("memory", "1536Mi", "1Gi", "1536Mi", "1Gi"),
        ("memory", "2Ti", "1Ti", "2Ti", "1Ti"),
        ("memory", "1025", "1Ki", "1025", "1Ki"),
        ("memory", "1G", "0", "1000000000", "0"),
        ("ephemeral-storage", "2Gi", "1Gi", "2Gi", "1Gi"),
        ("hugepages-2Mi", "4Mi", "2Mi", "4Mi", "2Mi"),
        ("cpu", "1024", "1000", "1024", "1000"),
        ("cpu", "1500m", "1", "1.5", "1"),
    ],
    ids=[
        "gi",
        "mi-not-whole-gi",
        "ti",
        "bytes-past-a-ki",
        "decimal-bytes",
        "ephemeral",
        "huge-pages",
        "cpu-no-unit",
        "cpu-fraction",
    ],
)
def test_an_amount_is_shown_as_a_person_writes_it(what, asked, offered, shown, shown_offered):
    """Bytes are shown in the largest binary unit that holds them whole (a memory request read as 1.07374e+09 tells
    an operator nothing); counts and cores as the number."""
    step = job(pod_spec=pod(container(requests={what: asked})))
    assert found(step, *queues({what: offered})) == [(JOB_URN, asks(shown, what, at_most=shown_offered))]


# ---------------------------------------------------------------------------------------------
# What one pod asks, and how many pods a pod set has


SIDECAR = container("proxy", requests={"cpu": "1"}, restartPolicy="Always")
"""A native sidecar: an init container that runs for the rest of the pod's life."""


@pytest.mark.parametrize(
    ("init", "cpus"),
    [
        ((SIDECAR,), 2),
        ((container("fetch", requests={"cpu": "1"}),), 1),
        ((container("fetch", requests={"cpu": "3"}),), 3),
        ((SIDECAR, container("fetch", limits={"cpu": "2"})), 3),
    ],
    ids=["native-sidecar-adds", "init-container-before-runs-alone", "larger-init-container", "sidecar-then-init"],
)
def test_a_pod_asks_its_containers_plus_native_sidecars_or_its_largest_init_container(init, cpus):
    """The scheduler's formula, which Kueue uses: a native sidecar (``restartPolicy: Always``) runs beside the
    containers; another init container runs alone before them (beside the sidecars started before it), and a limit
    without a request asks the limit. A queue of just that many cpus admits the pod; one fewer does not."""
    pod_spec = pod(container(requests={"cpu": "1"}), init=init)
    assert found(job(pod_spec=pod_spec), *queues({"cpu": str(cpus - 1)})) == [
        (JOB_URN, asks(cpus, at_most=str(cpus - 1)))
    ]
    assert found(job(pod_spec=pod_spec), *queues({"cpu": str(cpus)})) == []


@pytest.mark.parametrize(
    ("spec", "pods"),
    [
        ({}, 1),
        ({"parallelism": 2}, 2),
        ({"completions": 3}, 1),
        ({"parallelism": 4, "completions": 2}, 2),
        ({"parallelism": 2, "completions": 5}, 2),
    ],
    ids=["defaults", "parallel", "completions-one-at-a-time", "fewer-completions", "more-completions"],
)
def test_a_job_s_pod_set_is_main_with_the_lesser_of_parallelism_and_completions_pods(spec, pods):
    """Kueue's pod set of a Job is ``main``, of ``min(parallelism, completions)`` pods (parallelism 1 and completions
    the parallelism by default): with no cpu quota, the finding names the cpus of them all."""
    assert found(job(spec), *queues({"cpu": "0"})) == [(JOB_URN, asks(pods))]


def test_a_job_of_no_parallelism_asks_nothing():
    """``parallelism: 0`` is a count (a Job that runs no pod yet), not a value the API server refuses."""
    assert found(job({"parallelism": 0}), *queues({"cpu": "0"})) == []


def test_a_jobset_s_pod_sets_are_its_replicated_jobs_each_replicas_times_its_pods():
    """One replica by default; a replicated Job's pods are its replicas times its Job's pods, each pod set judged on
    its own and named in its finding, on the JobSet's URN."""

    def replicated(name: str, job_spec: dict[str, Any], **fields: Any) -> dict[str, Any]:
        return {"name": name, **fields, "template": {"spec": {**job_spec, "template": {"spec": pod()}}}}

    props = {
        "metadata": {"name": "run", "namespace": "tpu-rl", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
        "spec": {
            "replicatedJobs": [
                replicated("leader", {}),
                replicated("workers", {"parallelism": 2, "completions": 2}, replicas=3),
            ]
        },
    }
    run = resource(JOBSET, "run", props)
    assert found(run, *queues({"cpu": "0"})) == [
        (urn(JOBSET, "run"), asks(1, where="JobSet run (leader)")),
        (urn(JOBSET, "run"), asks(6, where="JobSet run (workers)")),
    ]
    assert found(run, *queues({"cpu": "6"})) == []


@pytest.mark.parametrize(
    ("spec", "finding"),
    [
        ({"parallelism": 1.5}, "main: parallelism 1.5 is not a count"),
        ({"parallelism": -1}, "main: parallelism -1 is not a count"),
        ({"parallelism": "2"}, "main: parallelism '2' is not a count"),
        ({"completions": -2}, "main: completions -2 is not a count"),
        ({"parallelism": 2, "completions": True}, "main: completions True is not a count"),
    ],
    ids=["fraction", "negative", "text", "negative-completions", "boolean-completions"],
)
def test_a_count_that_is_not_a_whole_number_is_refused_on_the_step(spec, finding):
    assert found(job(spec), *queues({"cpu": "1"})) == [(JOB_URN, f"Job step: {finding}{REFUSED}")]


def test_a_replicated_job_of_a_negative_replica_count_is_refused_on_the_jobset():
    job_spec = {"template": {"spec": pod()}}
    props = {
        "metadata": {"name": "run", "namespace": "tpu-rl"},
        "spec": {"replicatedJobs": [{"name": "workers", "replicas": -1, "template": {"spec": job_spec}}]},
    }
    assert found(resource(JOBSET, "run", props)) == [
        (urn(JOBSET, "run"), f"JobSet run: workers: replicas -1 is not a count{REFUSED}")
    ]


# ---------------------------------------------------------------------------------------------
# Which requests come first


def test_a_pod_set_s_other_requests_come_before_cpu_and_memory():
    """Chips (any extended resource) before cpu and memory: each resource no group covers is named in that order, and
    in one group the first resource no flavor offers enough of is the one the finding names."""
    gpu_and_memory = pod(container(requests={"memory": "64k", "nvidia.com/gpu": "1"}))
    assert found(job(pod_spec=gpu_and_memory), *queues({"cpu": "1"})) == [
        (JOB_URN, f"Job step (main) asks for nvidia.com/gpu, which ClusterQueue cq does not cover{NEVER}"),
        (JOB_URN, f"Job step (main) asks for memory, which ClusterQueue cq does not cover{NEVER}"),
    ]
    assert found(job(pod_spec=gpu_and_memory), *queues({"memory": "0", "nvidia.com/gpu": "0"})) == [
        (JOB_URN, asks(1, what="nvidia.com/gpu"))
    ]
    assert found(job(pod_spec=gpu_and_memory), *queues({"memory": "0", "nvidia.com/gpu": "1"})) == [
        (JOB_URN, asks(64000, what="memory"))
    ]


# ---------------------------------------------------------------------------------------------
# Who runs the step


MANAGED = (
    " not the {kind} controller: another controller runs its pods where neither Kueue nor the pack sees them; remove "
    "spec.managedBy"
)


@pytest.mark.parametrize(
    ("managed_by", "finding"),
    [
        (None, False),
        ("kubernetes.io/job-controller", False),
        ("jobset.sigs.k8s.io/jobset-controller", True),
        ("example.com/elsewhere", True),
    ],
    ids=["unset", "the-job-controller", "the-jobset-controller", "another"],
)
def test_a_job_run_by_another_controller_is_a_finding_on_it(managed_by, finding):
    spec = {} if managed_by is None else {"managedBy": managed_by}
    message = f"Job step is managed by {managed_by}," + MANAGED.format(kind="Job")
    assert found(job(spec, queued=False)) == ([(JOB_URN, message)] if finding else [])


def test_a_jobset_run_by_its_own_controller_passes():
    job_spec = {"template": {"spec": pod()}}
    spec = {"replicatedJobs": [{"name": "workers", "template": {"spec": job_spec}}]}
    props = {"metadata": {"name": "run", "namespace": "tpu-rl"}, "spec": spec}
    own = {**spec, "managedBy": "jobset.sigs.k8s.io/jobset-controller"}
    assert found(resource(JOBSET, "run", {**props, "spec": own})) == []
    other = {**spec, "managedBy": "kubernetes.io/job-controller"}
    assert found(resource(JOBSET, "run", {**props, "spec": other})) == [
        (
            urn(JOBSET, "run"),
            "JobSet run is managed by kubernetes.io/job-controller," + MANAGED.format(kind="JobSet"),
        )
    ]


def test_a_controller_not_known_at_a_preview_is_judged_at_up():
    assert found(job({"managedBy": UNKNOWN}, queued=False), preview=True) == [
        ("", f"{CANT_RUN}Job step: .spec.managedBy not known until what they come from exists; judged at `pulumi up`")
    ]


def test_a_step_refused_does_not_end_the_check_of_the_next():
    """A step the API server would refuse is reported and not judged further; the steps after it still are."""
    first = job({"parallelism": 1.5}, name="first")
    second = job({"managedBy": "example.com/elsewhere"}, name="second")
    third = job({"parallelism": 2}, name="third")
    assert found(first, second, third, *queues({"cpu": "1"})) == [
        (urn(JOB, "first"), f"Job first: main: parallelism 1.5 is not a count{REFUSED}"),
        (urn(JOB, "second"), "Job second is managed by example.com/elsewhere," + MANAGED.format(kind="Job")),
        (urn(JOB, "third"), asks(2, at_most="1", where="Job third (main)")),
    ]


UNQUEUED = (
    " names no LocalQueue (kueue.x-k8s.io/queue-name) while the stack has one: it bypasses Kueue and competes with "
    "queued runs for the slice"
)


def test_a_step_that_names_no_queue_beside_one_is_a_finding_on_it():
    """Once the stack has a LocalQueue, a step without the queue label runs outside Kueue: the finding is on that
    step, and the queued step beside it passes; in a stack without a queue it is no finding."""
    stray = job(name="stray", queued=False)
    assert found(job(), stray, *queues({"cpu": "1"})) == [(urn(JOB, "stray"), f"Job stray{UNQUEUED}")]
    assert found(stray) == []


# ---------------------------------------------------------------------------------------------
# Which namespaces a ClusterQueue admits


def not_only(selector: Any, namespace: str = "tpu-rl") -> tuple[str, str]:
    wanted = {"matchLabels": {QUEUE_LABEL: namespace}}
    return (
        urn(CLUSTER_QUEUE, "cq"),
        f"ClusterQueue cq selects namespaces by {selector!s}, not the stack's namespace only ({wanted}): pods of "
        "other namespaces would take the slice's quota",
    )


def test_a_cluster_queue_that_selects_more_than_the_stack_s_namespace_is_a_finding_on_it():
    """``{}`` selects every namespace: the finding is on the ClusterQueue (the step it admits still fits); the
    stack's own namespace, by its name label, passes."""
    assert found(job(), *queues({"cpu": "1"}, selector={})) == [not_only({})]
    assert found(job(), *queues({"cpu": "1"})) == []


def test_a_cluster_queue_is_judged_against_the_configured_namespace():
    """With ``tpu-rl:namespace`` set, only that namespace's name label is the stack's own; the default's is not."""
    ml = {"matchLabels": {QUEUE_LABEL: "ml"}}
    assert found(*queues({"cpu": "1"}, selector=ml), namespace="ml") == []
    assert found(*queues({"cpu": "1"}), namespace="ml") == [not_only(OWN, "ml")]


# ---------------------------------------------------------------------------------------------
# TPU pods that bypass the queue


BYPASS = (
    " asks for TPU chips, but tpu-rl's Kueue manages JobSets and Jobs only: its pods bypass the queue and compete "
    "with queued runs for the slice"
)


def deployment(tpu: Any) -> analyzer.Resource:
    """The Deployment ``trainer`` (resource name ``trainer-res``), its pod's container asking ``tpu`` chips."""
    requests = {"cpu": "1"} if tpu is None else {"google.com/tpu": tpu}
    props = {
        "metadata": {"name": "trainer", "namespace": "tpu-rl"},
        "spec": {"template": {"spec": pod(container(requests=requests))}},
    }
    return resource(DEPLOYMENT, "trainer-res", props)


@pytest.mark.parametrize(
    ("tpu", "finding"), [("4", True), ("lots", True), ("0", False), (None, False)], ids=["four", "word", "zero", "none"]
)
def test_a_tpu_pod_of_another_kind_beside_a_queue_is_a_finding_on_it(tpu, finding):
    """Once the stack has a LocalQueue, a Deployment whose pods ask for chips (or for a value that is not a quantity:
    asking may cost the slice) runs outside Kueue; the finding names it by its object name, on its URN. Steps judged
    before it in the stack do not hide it."""
    stack = [job(), deployment(tpu), *queues({"cpu": "1"})]
    assert found(*stack) == ([(urn(DEPLOYMENT, "trainer-res"), f"Deployment trainer{BYPASS}")] if finding else [])


def test_a_tpu_pod_of_another_kind_is_no_finding_in_a_stack_without_a_queue():
    assert found(job(queued=False), deployment("4")) == []
