"""What JobSet, the Job controller and Kueue make of the steps' JobSets, derived with their own formulas
(``workloads.specs.derived``) and checked with Kubernetes' own rules (``core.kubernetes_rules``), for every
configuration the config allows. Pure."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import math

import pytest

from core import kubernetes_rules as rules
from core.config import ConfigError
from core.controllers import JOBSET_VERSIONS
from core.models import MODELS
from core.tpu import CATALOGUE
from tests.lifecycle_walk import settings
from workloads.specs import derived
from workloads.specs.step_specs import plan_workflow

pytestmark = pytest.mark.pure

PROD = settings("prod", [])

# apimachinery v0.35.0's own cases (pkg/util/validation/validation_test.go, pkg/api/validate/content tests).
DNS1123_LABELS = (
    ["a", "ab", "abc", "a1", "a-1", "a--1--2--b", "0", "01", "012", "1a", "1-a", "1--a--b--2", "a" * 63],
    ["", "A", "ABC", "aBc", "A1", "A-1", "1-A", "-", "a-", "-a", "1-", "-1", "_", "a_", "_a", "a_b", "1_", "_1",
     "1_2", ".", "a.", ".a", "a.b", "1.", ".1", "1.2", " ", "a ", " a", "a b", "1 ", " 1", "1 2", "a" * 64],
)  # fmt: skip
DNS1123_SUBDOMAINS = (
    ["a", "ab", "abc", "a1", "a-1", "a--1--2--b", "0", "01", "012", "1a", "1-a", "1--a--b--2", "a.a", "ab.a",
     "abc.a", "a1.a", "a-1.a", "a--1--2--b.a", "a.1", "ab.1", "abc.1", "a1.1", "a-1.1", "0.a", "01.a", "1-a.1",
     "a.b.c.d.e", "aa.bb.cc.dd.ee", "1.2.3.4.5", "11.22.33.44.55", "a" * 253],
    ["", "A", "ABC", "aBc", "A1", "A-1", "1-A", "-", "a-", "-a", "1-", "-1", "_", "a_", "_a", "a_b", "1_", "_1",
     "1_2", ".", "a.", ".a", "a..b", "1.", ".1", "1..2", " ", "a ", " a", "a b", "1 ", " 1", "1 2", "A.a", "aB.a",
     "ab.A", "A1.a", "a1.A", "A.1", "aB.1", "A1.1", "1A.1", "0.A", "01.A", "012.A", "1A.a", "1a.A", "A.B.C.D.E",
     "AA.BB.CC.DD.EE", "a.B.c.d.e", "aa.bB.cc.dd.ee", "a@b", "a,b", "a_b", "a;b", "a:b", "a%b", "a?b", "a$b",
     "a" * 254],
)  # fmt: skip
DNS1035_LABELS = (
    ["a", "ab", "abc", "a1", "a-1", "a--1--2--b", "a" * 63],
    ["0", "01", "012", "1a", "1-a", "1--a--b--2", "", "A", "ABC", "aBc", "A1", "A-1", "1-A", "-", "a-", "-a", "1-",
     "-1", "_", "a_", "_a", "a_b", "1_", "_1", "1_2", ".", "a.", ".a", "a.b", "1.", ".1", "1.2", " ", "a ", " a",
     "a b", "1 ", " 1", "1 2", "a" * 64],
)  # fmt: skip
LABEL_VALUES = (
    ["simple", "now-with-dashes", "1-starts-with-num", "end-with-num-1", "1234", "UPPERCASE", "lowercase",
     "with.dots", "with_underscores", "", "a" * 63],
    ["nospecialchars%^=@", "Tama-nui-te-rā.is.Māori.sun", "\\backslashes\\are\\bad", "-starts-with-dash",
     "ends-with-dash-", ".starts.with.dot", "ends.with.dot.", "a" * 64, "ā" * 32],
)  # fmt: skip
LABEL_KEYS = (
    ["simple", "now-with-dashes", "1-starts-with-num", "1234", "simple/simple", "now-with-dashes/simple",
     "now-with-dashes/now-with-dashes", "now.with.dots/simple", "now-with.dashes-and.dots/simple",
     "1-num.2-num/3-num", "1234/5678", "1.2.3.4/5678", "Uppercase_Is_OK_123", "example.com/Uppercase_Is_OK_123",
     "requests.storage-foo", "a" * 63, "a" * 253 + "/" + "b" * 63],
    ["nospecialchars%^=@", "cantendwithadash-", "-cantstartwithadash-", "only/one/slash", "Example.com/abc",
     "example_com/abc", "example.com/", "/simple", "a" * 64, "a" * 254 + "/abc"],
)  # fmt: skip


@pytest.mark.parametrize(
    ("rule", "cases"),
    [
        (rules.dns1123_label, DNS1123_LABELS),
        (rules.dns1123_subdomain, DNS1123_SUBDOMAINS),
        (rules.dns1035_label, DNS1035_LABELS),
        (rules.label_value, LABEL_VALUES),
        (rules.label_key, LABEL_KEYS),
    ],
    ids=["dns1123-label", "dns1123-subdomain", "dns1035-label", "label-value", "label-key"],
)
def test_kubernetes_rules_agree_with_apimachinerys_own_cases(rule, cases):
    good, bad = cases
    assert [v for v in good if rule(v)] == []
    assert [v for v in bad if not rule(v)] == []


def test_rule_messages_are_the_api_servers():
    assert rules.label_value("a" * 64) == ["must be no more than 63 bytes"]
    assert rules.dns1123_label("a.b") == ["must not contain dots"]
    assert rules.dns1035_label("1a") == [
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
        "character, and end with an alphanumeric character"
    ]
    assert rules.label_value("-x") == [
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
        "start and end with an alphanumeric character"
    ]
    assert rules.label_key("a/b/c") and rules.label_key("example.com/") == ["name part must be non-empty"]


def test_annotations_hold_at_most_256_kib_counting_keys_and_values():
    key = "k"
    fits = {key: "v" * (256 * 1024 - len(key))}
    assert rules.annotation_problems(fits) == []
    assert rules.annotation_problems({key: fits[key] + "v"}) == [
        f"annotations: Too long: may not be more than 262144 bytes ({256 * 1024 + 1})"
    ]
    assert rules.annotation_problems({"Bad Key": ""})[0].startswith("annotation key 'Bad Key': ")


def test_the_training_jobsets_derived_objects():
    """The prod training JobSet, as the controllers make it: its Service, both Jobs, their pods, the Workload."""
    train = plan_workflow(PROD).train
    name, step_id = train.name, train.step_id
    found = derived.derive(train.manifest)
    by_kind = {kind: [o for o in found if o.kind == kind] for kind in ("Service", "Workload", "Job", "Pod")}
    (service,) = by_kind["Service"]
    assert service.name == f"rl-{step_id}" and service.labels == {"jobset.sigs.k8s.io/jobset-name": name}
    assert [j.name for j in by_kind["Job"]] == [f"{name}-pathways-head-0", f"{name}-worker-0"]
    pods = by_kind["Pod"]
    # The first and the last of each Job's pods (the ones between derive no longer values).
    assert [p.hostname for p in pods] == [f"{name}-pathways-head-0-0", f"{name}-worker-0-0", f"{name}-worker-0-7"]
    assert {p.subdomain for p in pods} == {f"rl-{step_id}"} and pods[0].name == f"{name}-pathways-head-0-0-abcde"
    coordinator = f"{name}-pathways-head-0-0.rl-{step_id}"
    assert len(coordinator) == 59 and all(p.labels["jobset.sigs.k8s.io/coordinator"] == coordinator for p in pods)
    head = pods[0].labels
    assert head["jobset.sigs.k8s.io/job-key"] == hashlib.sha1(f"tpu-rl/{name}-pathways-head-0".encode()).hexdigest()
    assert head["batch.kubernetes.io/job-name"] == head["job-name"] == f"{name}-pathways-head-0"
    assert head["kueue.x-k8s.io/podset"] == "pathways-head" and head["kueue.x-k8s.io/cluster-queue-name"] == "tpu-rl"
    assert pods[2].labels["jobset.sigs.k8s.io/job-global-index"] == "1" and pods[2].labels["job-name"].endswith("-0")
    assert pods[2].labels["batch.kubernetes.io/job-completion-index"] == "7"
    (workload,) = by_kind["Workload"]
    assert workload.name.startswith(f"jobset-{name}-") and len(workload.name) == len(name) + 13
    assert workload.pod_sets == ("pathways-head", "worker")
    assert pods[0].annotations["kueue.x-k8s.io/workload"] == workload.name
    assert derived.problems(train.manifest, "0.10.1") == derived.problems(train.manifest, "0.12.0") == []


def test_a_cpu_step_has_no_service_no_subdomain_and_no_coordinator():
    convert = plan_workflow(PROD).convert
    found = derived.derive(convert.manifest)
    assert [o.kind for o in found] == ["Workload", "Job", "Pod"]
    pod = found[-1]
    assert pod.hostname == f"{convert.name}-convert-0-0" and pod.subdomain is None
    assert "jobset.sigs.k8s.io/coordinator" not in pod.labels


@pytest.mark.parametrize("version", JOBSET_VERSIONS)
def test_the_jobset_default_subdomain_would_overflow_the_coordinator_label(version):
    """The issue as it was: without a subdomain of its own, the coordinator label is
    <jobset>-pathways-head-0-0.<jobset>, 73 characters. JobSet 0.12.0's webhook refuses the JobSet; 0.10.1 accepts
    it and the API server refuses every child Job (its labels) and so every pod."""
    manifest = copy.deepcopy(plan_workflow(PROD).train.manifest)
    del manifest["spec"]["network"]["subdomain"]
    found = derived.problems(manifest, version)
    assert found and all(p.what.endswith("jobset.sigs.k8s.io/coordinator") for p in found)
    assert {len(p.value) for p in found} == {73}
    webhook = [p for p in found if p.what == "label jobset.sigs.k8s.io/coordinator"]
    assert bool(webhook) == (derived._version(version) >= derived.COORDINATOR_CHECKED_SINCE)
    assert {p.what.split(" (")[0] for p in found if p not in webhook} == {"Job", "Pod"}


def test_the_generated_pod_name_keeps_its_index_when_the_job_name_is_long():
    """podGenerateNameWithIndex: the prefix is cut to 58 characters, keeping -<index>-."""
    assert derived.pod_generate_name("j" * 54, 7) == "j" * 54 + "-7-"
    assert derived.pod_generate_name("j" * 56, 7) == "j" * 55 + "-7-"
    assert len(derived.pod_generate_name("j" * 80, 12)) == 58


def test_the_webhooks_own_checks():
    manifest = copy.deepcopy(plan_workflow(PROD).train.manifest)
    manifest["spec"]["network"]["subdomain"] = "1bad"
    assert [p.what for p in derived.webhook_problems(manifest, "0.10.1")] == ["spec.network.subdomain"]
    manifest["spec"]["network"]["subdomain"] = "rl-" + "a" * 61
    assert {(p.what, p.why) for p in derived.webhook_problems(manifest, "0.12.0")} == {
        ("spec.network.subdomain", "must be no more than 63 characters"),
        ("label jobset.sigs.k8s.io/coordinator", "must be no more than 63 bytes"),
    }
    assert {p.what for p in derived.webhook_problems(manifest, "0.10.1")} == {"spec.network.subdomain"}
    manifest["metadata"]["name"] = "n" * 40
    found = {p.what for p in derived.webhook_problems(manifest, "0.10.1")}
    assert found == {"spec.network.subdomain", "the longest pod name JobSet checks"}


def test_a_workload_holds_at_most_eight_pod_sets():
    manifest = copy.deepcopy(plan_workflow(PROD).convert.manifest)
    job = manifest["spec"]["replicatedJobs"][0]
    manifest["spec"]["replicatedJobs"] = [{**copy.deepcopy(job), "name": f"j{i}"} for i in range(9)]
    assert "must have at most 8 items" in {p.why for p in derived.problems(manifest, "0.10.1")}


def _allowed():
    """The stacks whose derived names are longest: every model, every TPU version's largest topology, one
    and 2 slices, Kueue of our own or another team's queue (63 characters), with a publication."""
    queue = ["tpu-rl:kueue.enabled=false", f"tpu-rl:kueue.queue={'q' * 63}"]
    for model, version, slices, queued in itertools.product(sorted(MODELS), sorted(CATALOGUE), (1, 2), (0, 1)):
        machine = CATALOGUE[version].machine(CATALOGUE[version].default_machine_type)
        assert machine is not None
        topology = max(machine.topologies, key=lambda t: math.prod(int(d) for d in t.split("x")))
        overrides = [f"tpu-rl:model.name={model}", f"tpu-rl:tpu.version={version}", f"tpu-rl:tpu.topology={topology}"]
        overrides.append(f"tpu-rl:tpu.machineType={machine.name}")
        overrides += [f"tpu-rl:tpu.slices={slices}", "tpu-rl:publish.repo=org/model", *(queue if queued else [])]
        yield overrides


@pytest.mark.parametrize("version", JOBSET_VERSIONS)
@pytest.mark.slow
def test_every_allowed_configuration_derives_valid_objects(version):
    """The issue's promise: the coordinator label (and every other derived name) fits for every configuration
    the config accepts, at the pinned JobSet and the newest tpu-rl:workflow.jobsetVersion allows."""
    checked = 0
    for overrides in _allowed():
        try:
            s = settings("prod", [*overrides, f"tpu-rl:workflow.jobsetVersion={version}"])
        except ConfigError as err:
            assert "tpu-rl:model.name" not in str(err), err  # refused for another reason (a mesh, a machine)
            continue
        cluster_queue = "tpu-rl" if s.kueue.install else None
        for step in plan_workflow(s).steps:
            assert derived.problems(step.manifest, version, cluster_queue=cluster_queue) == [], overrides
        checked += 1
    assert checked >= len(MODELS) * len(CATALOGUE) * 2, "most combinations are valid configurations"


def test_a_step_the_controllers_could_not_create_is_refused_before_anything_is_created():
    """plan_workflow (which the program calls before it registers a resource) refuses it with one line."""
    long = dataclasses.replace(PROD.model.spec, name="gemma4-26b-long-name")
    with pytest.raises(ConfigError, match=r"^tpu-rl:model.name = \"gemma4-26b-long-name\" is invalid: the train"):
        plan_workflow(dataclasses.replace(PROD, model=dataclasses.replace(PROD.model, spec=long)))
