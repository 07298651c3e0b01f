"""``kueue-queue-fits`` on which flavor of a ClusterQueue a step's pods may get, through pulumi-policy's own analyzer
(``tests/analyzer.py``) on small stacks built by hand: a Job queued on a LocalQueue of a ClusterQueue whose one
resource group lists ResourceFlavors. Kueue gives a pod set a flavor only when its pods tolerate each of the flavor's
``NoSchedule`` and ``NoExecute`` node taints, read as Kubernetes reads a toleration (an empty effect matches every
effect, an empty key with ``Exists`` every taint, ``Exists`` any value, ``Equal`` the same value), and only one flavor
with quota for all the pod set asks; a nominal quota that is not a quantity is a finding, one not known at a preview is
judged at ``pulumi up``. A step Kueue would never admit waits until ``pulumi up`` gives up, so each finding here is the
exact line an operator reads, on the Job's URN (a preview's advisory is on none), and the near miss passes."""

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
JOB_URN = f"urn:pulumi:dev::tpu-rl::{JOB}::step"
NEVER = ": Kueue would never admit it; size the ClusterQueue to the pools (tpu-rl:kueue)"
TPU_TAINT = {"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"}


def resource(type_: str, name: str, props: dict[str, Any]) -> analyzer.Resource:
    return analyzer.Resource(type_, name, f"urn:pulumi:dev::tpu-rl::{type_}::{name}", props)


def job(requests: dict[str, str], tolerations: list[Any] | None = None) -> analyzer.Resource:
    """A Job of one pod in the stack's namespace, queued on the LocalQueue ``q``, asking ``requests``."""
    pod: dict[str, Any] = {"containers": [{"name": "main", "resources": {"requests": requests}}]}
    if tolerations is not None:
        pod["tolerations"] = tolerations
    metadata = {"name": "step", "namespace": "tpu-rl", "labels": {"kueue.x-k8s.io/queue-name": "q"}}
    return resource(JOB, "step", {"metadata": metadata, "spec": {"template": {"spec": pod}}})


def flavor(name: str, quotas: dict[str, Any]) -> dict[str, Any]:
    """A flavor of the ClusterQueue's resource group with ``quotas`` (resource: nominalQuota)."""
    return {"name": name, "resources": [{"name": r, "nominalQuota": q} for r, q in quotas.items()]}


def resource_flavor(name: str, **spec: Any) -> analyzer.Resource:
    return resource(f"{KUEUE}:ResourceFlavor", name, {"metadata": {"name": name}, "spec": spec})


def queues(*flavors: dict[str, Any]) -> list[analyzer.Resource]:
    """The LocalQueue ``q`` of the ClusterQueue ``cq``, which admits the stack's namespace only and covers cpu and
    memory with ``flavors`` in one resource group."""
    local_queue = {"metadata": {"name": "q", "namespace": "tpu-rl"}, "spec": {"clusterQueue": "cq"}}
    spec = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "tpu-rl"}},
        "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": list(flavors)}],
    }
    cluster_queue = {"metadata": {"name": "cq"}, "spec": spec}
    return [resource(f"{KUEUE}:LocalQueue", "q", local_queue), resource(f"{KUEUE}:ClusterQueue", "cq", cluster_queue)]


def found(*resources: analyzer.Resource, preview: bool = False) -> list[tuple[str, str]]:
    """(URN, message) of each finding of the stack ``resources`` at ``pulumi up`` (or a preview), every one of
    ``kueue-queue-fits``."""
    pack = analyzer.Pack({"all": "mandatory"}, policies=[POLICY], stack="dev", stack_config={}, dry_run=preview)
    findings = pack.analyze_stack(resources)
    assert all(f.policy == POLICY.name for f in findings), findings
    return [(f.urn, f.message) for f in findings]


def tainted(*taints: dict[str, Any], tolerations: list[Any] | None = None) -> list[tuple[str, str]]:
    """The findings of a Job asking for one cpu, its pods tolerating ``tolerations``, on a ClusterQueue whose only
    flavor ``tpu`` has one cpu and the node taints ``taints``."""
    return found(
        job({"cpu": "1"}, tolerations),
        *queues(flavor("tpu", {"cpu": "1"})),
        resource_flavor("tpu", nodeTaints=list(taints)),
    )


NO_CPU = f"Job step (main) asks for 1 cpu but ClusterQueue cq offers at most 0 on a flavor its pods fit{NEVER}"
REFUSED = [(JOB_URN, NO_CPU)]
"""The finding when the pods may not get the flavor ``tpu``: no flavor they fit offers the cpu they ask."""


@pytest.mark.parametrize(
    ("tolerations", "admitted"),
    [
        (None, False),
        ([{"key": "google.com/tpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}], True),
        ([{"key": "google.com/tpu", "value": "present"}], True),  # no operator is Equal; no effect matches every one
        ([{"key": "google.com/tpu", "operator": "Equal", "value": "absent"}], False),
        ([{"key": "google.com/tpu", "operator": "Exists"}], True),
        ([{"key": "google.com/tpu", "operator": "Exists", "effect": ""}], True),
        ([{"key": "google.com/tpu", "operator": "Exists", "effect": "NoExecute"}], False),
        (
            [
                {"key": "google.com/tpu", "operator": "Exists", "effect": "NoExecute"},
                {"key": "google.com/tpu", "operator": "Exists", "effect": "NoSchedule"},
            ],
            True,
        ),
        ([{"key": "cloud.google.com/gke-spot", "operator": "Exists"}], False),
        ([{"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "present"}], False),
        ([{"operator": "Exists"}], True),
        ([{"key": "", "operator": "Exists"}], True),
        ([{"key": "", "operator": "Equal", "value": "present"}], False),
        ([{"operator": "Exists", "effect": "NoExecute"}], False),
    ],
    ids=[
        "no-toleration",
        "equal-same-value",
        "default-operator-is-equal",
        "equal-other-value",
        "exists-any-value",
        "empty-effect-matches-every-effect",
        "other-effect",
        "other-effect-then-this-one",
        "exists-other-key",
        "equal-other-key-same-value",
        "exists-without-key-tolerates-everything",
        "exists-with-empty-key-tolerates-everything",
        "equal-with-empty-key",
        "exists-without-key-other-effect",
    ],
)
def test_a_pod_set_gets_a_tainted_flavor_only_when_its_pods_tolerate_the_taint(tolerations, admitted):
    """Kubernetes ``Toleration.ToleratesTaint``: the pods may run on the flavor's nodes only when one toleration has
    the taint's effect (or none), and either no key with ``Exists`` or the taint's key with ``Exists`` or its value;
    otherwise the flavor is skipped and its quota offered to nobody."""
    assert tainted(TPU_TAINT, tolerations=tolerations) == ([] if admitted else REFUSED)


@pytest.mark.parametrize(
    ("effect", "admitted"),
    [("NoSchedule", False), ("NoExecute", False), ("PreferNoSchedule", True)],
    ids=["no-schedule", "no-execute", "prefer-no-schedule"],
)
def test_a_flavor_s_taint_keeps_untolerating_pods_off_unless_it_is_only_a_preference(effect, admitted):
    """Kueue's ``checkFlavorForPodSets`` checks the ``NoSchedule`` and ``NoExecute`` taints: pods that do not tolerate
    one never run on the flavor's nodes; a ``PreferNoSchedule`` taint lets them."""
    assert tainted({"key": "google.com/tpu", "value": "present", "effect": effect}) == ([] if admitted else REFUSED)


def test_every_taint_of_a_flavor_must_be_tolerated():
    """Tolerating one of two taints is not enough; tolerating both is."""
    spot = {"key": "cloud.google.com/gke-spot", "value": "true", "effect": "NoExecute"}
    tpu_only = [{"key": "google.com/tpu", "operator": "Exists"}]
    assert tainted(TPU_TAINT, spot, tolerations=tpu_only) == REFUSED
    both = [*tpu_only, {"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true"}]
    assert tainted(TPU_TAINT, spot, tolerations=both) == []


def test_an_untainted_flavor_takes_any_pods():
    assert tainted() == []


@pytest.mark.parametrize("quota", ["lots", "1 core", True], ids=["word", "with-unit-word", "boolean"])
def test_a_nominal_quota_that_is_not_a_quantity_is_a_finding_and_offers_nothing(quota):
    """The API server refuses the ClusterQueue; the policy names the resource and flavor, and reads the quota as none:
    the pods that ask for that resource are not admitted either."""
    stack = [job({"cpu": "1"}), *queues(flavor("tpu", {"cpu": quota})), resource_flavor("tpu")]
    assert found(*stack) == [
        (JOB_URN, f"ClusterQueue cq: the nominalQuota of cpu on flavor tpu is not a Kubernetes quantity{NEVER}"),
        *REFUSED,
    ]
    near = [job({"cpu": "1"}), *queues(flavor("tpu", {"cpu": "1"})), resource_flavor("tpu")]
    assert found(*near) == []


CANT_RUN = "can't run policy 'kueue-queue-fits' from policy pack 'tpu-rl-guardrails@v0.0.1' during preview: "
SPLIT = f"Job step (main) asks for cpu, memory that no one flavor of ClusterQueue cq offers all of{NEVER}"


def test_a_nominal_quota_not_known_at_a_preview_is_judged_at_up_as_none():
    """At a preview the ClusterQueue's quota may come from a resource not created yet: the policy cannot judge the
    step and says so (an advisory, on no resource), with what it would report reading the quota as unset."""
    stack = [job({"cpu": "1"}), *queues(flavor("tpu", {"cpu": UNKNOWN})), resource_flavor("tpu")]
    assert found(*stack, preview=True) == [
        (
            "",
            f"{CANT_RUN}ClusterQueue cq: .spec.resourceGroups[0].flavors[0].resources[0].nominalQuota not known until "
            f"what they come from exists; judged at `pulumi up`; reading them as unset it would report: {NO_CPU}",
        )
    ]
    known = [job({"cpu": "1"}), *queues(flavor("tpu", {"cpu": "1"})), resource_flavor("tpu")]
    assert found(*known, preview=True) == []


def test_a_flavor_s_other_quotas_count_beside_one_not_known_at_a_preview():
    """A flavor whose cpu quota is not known yet still offers the memory it names: with another flavor that has the
    cpu but no memory, the step would be refused because no one flavor offers all it asks."""
    split = [flavor("spare", {"cpu": UNKNOWN, "memory": "1Gi"}), flavor("cpus", {"cpu": "1", "memory": "0"})]
    stack = [job({"cpu": "1", "memory": "1Gi"}), *queues(*split), resource_flavor("spare"), resource_flavor("cpus")]
    assert found(*stack, preview=True) == [
        (
            "",
            f"{CANT_RUN}ClusterQueue cq: .spec.resourceGroups[0].flavors[0].resources[0].nominalQuota not known until "
            f"what they come from exists; judged at `pulumi up`; reading them as unset it would report: {SPLIT}",
        )
    ]


def test_quota_split_across_flavors_admits_nothing():
    """Kueue gives a pod set one flavor per resource group: one flavor with all the cpu and another with all the
    memory admit nothing, and the finding says no one flavor offers all (not that a resource lacks quota)."""
    split = [flavor("cpus", {"cpu": "1", "memory": "0"}), flavor("memory", {"cpu": "0", "memory": "1Gi"})]
    flavors = [resource_flavor("cpus"), resource_flavor("memory")]
    assert found(job({"cpu": "1", "memory": "1Gi"}), *queues(*split), *flavors) == [(JOB_URN, SPLIT)]
    one = [*split, flavor("both", {"cpu": "1", "memory": "1Gi"})]
    assert found(job({"cpu": "1", "memory": "1Gi"}), *queues(*one), *flavors, resource_flavor("both")) == []
