"""tools/controller_facts.py: the facts ``make controller`` extracts from a JobSet or Kueue release's Go source, on
small Go snippets written here (our own text, shaped like the declarations and uses the releases have: a struct
with json tags, inline structs, const and var blocks), and the checks on them: a broken extractor fails here, the
whole command and the committed facts are tests/test_adopt_controller.py's."""

from __future__ import annotations

from typing import Any

import pytest

from tools.controller_facts import (
    CONFIGURATION_TYPES,
    FIX,
    FRAMEWORK_FILES,
    KEY_SOURCES,
    configuration_facts,
    configuration_problems,
    declarations,
    extract,
    fact_problems,
    framework_problems,
    key_facts,
    key_problems,
    unknown_fields,
)

pytestmark = pytest.mark.pure

CONFIGURATION_SNIPPET = """package v1beta2

// Configuration is a sample.
type Configuration struct {
	metav1.TypeMeta `json:",inline"`

	// Namespace is where it runs.
	Namespace *string `json:"namespace,omitempty"`

	ControllerManager `json:",inline"`

	WaitForPodsReady *WaitForPodsReady `json:"waitForPodsReady,omitempty"`
	Integrations     *Integrations     `json:"integrations,omitempty"`
	LeaderElection   *configv1alpha1.LeaderElectionConfiguration `json:"leaderElection,omitempty"`
	Internal         string            `json:"-"`
	Plugins          map[string]Plugin `json:"plugins,omitempty"`
	Open             *Open             `json:"open,omitempty"`
	Named            bool `json:",omitempty"`
}

type ControllerManager struct {
	Webhook ControllerWebhook `json:"webhook,omitempty"`
}

type ControllerWebhook struct {
	Port *int `json:"port,omitempty"`
}

type WaitForPodsReady struct {
	Timeout           metav1.Duration    `json:"timeout"`
	RecoveryTimeout   *metav1.Duration   `json:"recoveryTimeout,omitempty"`
	RequeuingStrategy *RequeuingStrategy `json:"requeuingStrategy,omitempty"`
}

type RequeuingStrategy struct {
	Timestamp *RequeuingTimestamp `json:"timestamp,omitempty"`
	Next      *RequeuingStrategy  `json:"next,omitempty"`
}

type RequeuingTimestamp string

type Integrations struct {
	Frameworks []string `json:"frameworks,omitempty"`
}

type Plugin struct {
	Name string `json:"name"`
}

type Open struct {
	other.Settings `json:",inline"`

	Known bool `json:"known"`
}
"""


def test_the_configurations_fields_are_its_json_paths_inline_structs_merged():
    facts = configuration_facts(CONFIGURATION_SNIPPET)
    assert facts == {
        "type": "Configuration",
        "fields": {
            "apiVersion": "string",
            "kind": "string",
            "namespace": "*string",
            "webhook": "ControllerWebhook",
            "webhook.port": "*int",
            "waitForPodsReady": "*WaitForPodsReady",
            "waitForPodsReady.timeout": "metav1.Duration",
            "waitForPodsReady.recoveryTimeout": "*metav1.Duration",
            "waitForPodsReady.requeuingStrategy": "*RequeuingStrategy",
            "waitForPodsReady.requeuingStrategy.timestamp": "*RequeuingTimestamp",
            "waitForPodsReady.requeuingStrategy.next": "*RequeuingStrategy",
            "integrations": "*Integrations",
            "integrations.frameworks": "[]string",
            "leaderElection": "*configv1alpha1.LeaderElectionConfiguration",
            "plugins": "map[string]Plugin",
            "open": "*Open",
            "Named": "bool",
        },
        "closed": ["", "webhook", "waitForPodsReady", "waitForPodsReady.requeuingStrategy", "integrations"],
    }


def test_what_a_strict_decode_refuses_is_found_and_nothing_else():
    facts = configuration_facts(CONFIGURATION_SNIPPET)
    assert facts is not None
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "webhook": {"port": 9443, "host": "h"},  # from the inline ControllerManager: checked
        "waitForPodsReady": {
            "timeout": "5m",
            "enable": True,
            "requeuingStrategy": {"timestamp": "Eviction", "backoff": 0, "next": {"anything": 1}},
        },
        "integrations": {"frameworks": ["batch/job"], "frameworkz": []},
        "leaderElection": {"leaderElect": True},  # another package's type: not read here
        "plugins": {"any": {"name": "x", "other": 1}},  # a map's values: not checked
        "open": {"anything": 1},  # another package's inline struct: its fields cannot be listed
        "Internal": "x",  # json:"-"
    }
    assert unknown_fields(config, facts) == [
        "webhook.host",
        "waitForPodsReady.enable",
        "waitForPodsReady.requeuingStrategy.backoff",
        "integrations.frameworkz",
        "Internal",
    ]
    assert configuration_problems("0.18.0", facts, {"webhook": {"host": "h"}, "kind": "Configuration"}) == [
        "kueue v0.18.0's Configuration has no webhook.host, which the stack's manager configuration sets "
        "(infra/k8s/kueue.py): Kueue would refuse to start"
    ]
    assert configuration_problems("0.18.0", facts, {"kind": "Configuration"}) == []


def test_a_file_without_the_configuration_struct_has_no_facts():
    assert configuration_facts(CONFIGURATION_SNIPPET.replace("type Configuration struct", "type Config struct")) is None


CONSTANTS_SNIPPET = """package v1alpha2

import "strconv"

const (
	// JobSetNameKey is a label and an annotation.
	JobSetNameKey         string = "jobset.sigs.k8s.io/jobset-name"
	MaxExecTimeLabel             = `kueue.x-k8s.io/max-exec-time-seconds`
	DefaultQueue  kueue.LocalQueueName = "default"
	PrefixOnly    = "provreq.kueue.x-k8s.io/"
	First         = iota
)

var (
	gvk = batchv1.SchemeGroupVersion.WithKind("Job")

	FrameworkName = "batch/job"
)

const CoordinatorKey = "jobset.sigs.k8s.io/coordinator"

func local() string {
	var inside = "jobset.sigs.k8s.io/inside"
	return strconv.Quote(inside)
}
"""


def test_declarations_are_the_package_levels_string_constants_and_variables():
    assert declarations(CONSTANTS_SNIPPET) == {
        "JobSetNameKey": ("jobset.sigs.k8s.io/jobset-name", 7),
        "MaxExecTimeLabel": ("kueue.x-k8s.io/max-exec-time-seconds", 8),
        "DefaultQueue": ("default", 9),
        "PrefixOnly": ("provreq.kueue.x-k8s.io/", 10),
        "FrameworkName": ("batch/job", 17),
        "CoordinatorKey": ("jobset.sigs.k8s.io/coordinator", 20),
    }


JOBSET_TYPES = """package v1alpha2

const (
	JobSetNameKey         string = "jobset.sigs.k8s.io/jobset-name"
	ReplicatedJobReplicas string = "jobset.sigs.k8s.io/replicatedjob-replicas"
	ReplicatedJobNameKey  string = "jobset.sigs.k8s.io/replicatedjob-name"
	JobIndexKey           string = "jobset.sigs.k8s.io/job-index"
	ExclusiveKey          string = "alpha.jobset.sigs.k8s.io/exclusive-topology"
	CoordinatorKey               = "jobset.sigs.k8s.io/coordinator"
	ConditionCompleted           = "Completed"
)
"""
JOBSET_CONTROLLER = """package controllers

func labelAndAnnotate(obj metav1.Object, js *jobset.JobSet, rjob *jobset.ReplicatedJob, jobIdx int) {
	labels := maps.Clone(obj.GetLabels())
	labels[jobset.JobSetNameKey] = js.Name
	labels[jobset.ReplicatedJobNameKey] = rjob.Name
	labels[jobset.ReplicatedJobReplicas] = strconv.Itoa(int(rjob.Replicas))
	labels[jobset.JobIndexKey] = strconv.Itoa(jobIdx); labels[constants.RestartsKey] = "0"

	annotations := maps.Clone(obj.GetAnnotations())
	annotations[jobset.JobSetNameKey] = js.Name
	annotations[jobset.ReplicatedJobNameKey] = rjob.Name
	if js.Spec.Coordinator != nil {
		labels[jobset.CoordinatorKey] = endpoint(js)
	}
	if domain, ok := rjob.Template.Annotations[jobset.ExclusiveKey]; ok {
		annotations[jobset.ExclusiveKey] = domain
	}
}
"""
TYPES_FILE, USES = KEY_SOURCES["jobset"]
CONTROLLER_FILE = USES["pod label"][0]


def _jobset(types: str = JOBSET_TYPES, controller: str = JOBSET_CONTROLLER) -> dict[str, Any]:
    return key_facts("jobset", {TYPES_FILE: types, CONTROLLER_FILE: controller})


def test_the_keys_facts_are_each_key_constant_and_where_it_is_used_so():
    facts = _jobset()
    assert facts["declaredIn"] == TYPES_FILE
    assert facts["constants"]["JobIndexKey"] == {"value": "jobset.sigs.k8s.io/job-index", "line": 7}
    assert facts["constants"]["CoordinatorKey"] == {"value": "jobset.sigs.k8s.io/coordinator", "line": 9}
    assert "ConditionCompleted" not in facts["constants"], "not a label or annotation key"
    assert facts["uses"]["pod label"]["file"] == CONTROLLER_FILE
    assert facts["uses"]["pod label"]["found"]["JobIndexKey"] == [{"line": 8, "code": "labels[jobset.JobIndexKey] ="}]
    assert set(facts["uses"]["pod label"]["found"]) == {
        "JobSetNameKey",
        "ReplicatedJobNameKey",
        "ReplicatedJobReplicas",
        "JobIndexKey",
        "CoordinatorKey",
    }, "another package's constant (constants.RestartsKey) is not one of the file's keys"
    assert set(facts["uses"]["pod annotation"]["found"]) == {"JobSetNameKey", "ReplicatedJobNameKey", "ExclusiveKey"}
    assert facts["uses"]["template annotation"]["found"] == {
        "ExclusiveKey": [{"line": 16, "code": ".Template.Annotations[jobset.ExclusiveKey]"}]
    }
    assert key_problems("jobset", "0.13.0", facts) == []


def test_a_key_without_its_constant_is_refused():
    types = JOBSET_TYPES.replace('\tCoordinatorKey               = "jobset.sigs.k8s.io/coordinator"\n', "")
    assert key_problems("jobset", "0.13.0", _jobset(types=types)) == [
        f"jobset v0.13.0 declares no jobset.sigs.k8s.io/coordinator ({TYPES_FILE}), which the stack relies on: {FIX}"
    ]
    renamed = JOBSET_TYPES.replace("jobset.sigs.k8s.io/job-index", "jobset.sigs.k8s.io/job-number")
    assert key_problems("jobset", "0.13.0", _jobset(types=renamed)) == [
        f"jobset v0.13.0 declares no jobset.sigs.k8s.io/job-index ({TYPES_FILE}), which the stack relies on: {FIX}"
    ]
    inner = 'func f() {\n\tconst inner = "jobset.sigs.k8s.io/job-index"\n}\n\nconst ('
    inside = renamed.replace("const (", inner)
    assert key_problems("jobset", "0.13.0", _jobset(types=inside)) == [
        f"jobset v0.13.0 declares no jobset.sigs.k8s.io/job-index ({TYPES_FILE}), which the stack relies on: {FIX}"
    ], "a function's constant is not the package's"


def test_a_key_no_longer_used_as_the_stack_relies_on_is_refused():
    from_labels = JOBSET_CONTROLLER.replace("rjob.Template.Annotations[", "rjob.Template.Labels[")
    assert key_problems("jobset", "0.13.0", _jobset(controller=from_labels)) == [
        "jobset v0.13.0 does not read from a replicated Job's template alpha.jobset.sigs.k8s.io/exclusive-topology "
        f"(ExclusiveKey in {CONTROLLER_FILE}), which the stack relies on: {FIX}"
    ]
    no_label = JOBSET_CONTROLLER.replace("labels[jobset.JobIndexKey] =", "_ =")
    read_only = JOBSET_CONTROLLER.replace("labels[jobset.JobIndexKey] =", "_ = labels[jobset.JobIndexKey] +")
    for controller in (no_label, read_only):
        assert key_problems("jobset", "0.13.0", _jobset(controller=controller)) == [
            "jobset v0.13.0 does not put on the pods it makes as a label jobset.sigs.k8s.io/job-index (JobIndexKey "
            f"in {CONTROLLER_FILE}), which the stack relies on: {FIX}"
        ]


def test_facts_without_a_use_the_stack_relies_on_ask_for_the_release_again():
    facts = _jobset()
    del facts["uses"]["template annotation"]
    assert key_problems("jobset", "0.10.1", facts) == [
        "the facts of jobset v0.10.1 do not say where it uses a key as a template annotation: adopt it again (make "
        "controller NAME=jobset VERSION=0.10.1)"
    ]


KUEUE_FILES = {
    "pkg/controller/constants/constants.go": (
        'package constants\n\nconst (\n\tQueueLabel = "kueue.x-k8s.io/queue-name"\n\n'
        '\tJobUIDLabel = "kueue.x-k8s.io/job-uid"\n)\n'
    ),
    "pkg/controller/jobframework/interface.go": (
        "func QueueNameForObject(object client.Object) kueue.LocalQueueName {\n"
        "\treturn kueue.LocalQueueName(object.GetLabels()[constants.QueueLabel])\n}\n"
    ),
    "pkg/controller/jobframework/reconciler.go": (
        "func (r *JobReconciler) constructWorkload(wl *kueue.Workload, object client.Object) {\n"
        "\twl.Labels[controllerconsts.JobUIDLabel] = string(object.GetUID())\n}\n"
    ),
    CONFIGURATION_TYPES: CONFIGURATION_SNIPPET,
    FRAMEWORK_FILES["batch/job"]: (
        'var (\n\tgvk = batchv1.SchemeGroupVersion.WithKind("Job")\n\n\tFrameworkName = "batch/job"\n)\n'
    ),
    FRAMEWORK_FILES["jobset.x-k8s.io/jobset"]: 'const FrameworkName = "jobset.x-k8s.io/jobset"\n',
}


def test_a_kueue_releases_facts_from_its_files():
    facts, problems = extract(
        "kueue", "0.18.0", lambda path: KUEUE_FILES[path].encode() if path in KUEUE_FILES else None
    )
    assert problems == []
    assert facts["sources"] == list(KUEUE_FILES)
    assert facts["keys"]["uses"]["object label"]["found"] == {
        "QueueLabel": [{"line": 2, "code": ".GetLabels()[constants.QueueLabel]"}]
    }
    assert facts["keys"]["uses"]["workload label"]["found"] == {
        "JobUIDLabel": [{"line": 2, "code": "wl.Labels[controllerconsts.JobUIDLabel] ="}]
    }
    assert facts["configuration"] == {"file": CONFIGURATION_TYPES, **(configuration_facts(CONFIGURATION_SNIPPET) or {})}
    assert facts["frameworks"] == {
        FRAMEWORK_FILES["batch/job"]: "batch/job",
        FRAMEWORK_FILES["jobset.x-k8s.io/jobset"]: "jobset.x-k8s.io/jobset",
    }
    config = {"kind": "Configuration", "integrations": {"frameworks": []}}
    assert fact_problems("kueue", "0.18.0", facts, config) == []


def test_a_release_without_the_files_is_refused_for_each_and_its_other_facts_checked():
    files = {
        path: text for path, text in KUEUE_FILES.items() if not path.endswith(("reconciler.go", "job_controller.go"))
    }
    files[CONFIGURATION_TYPES] = CONFIGURATION_SNIPPET.replace("type Configuration struct", "type Config struct")
    facts, problems = extract("kueue", "0.18.0", lambda path: files[path].encode() if path in files else None)
    assert problems == [
        "kueue v0.18.0 has no pkg/controller/jobframework/reconciler.go, where tpu-rl checks the keys its objects "
        "rely on",
        f"kueue v0.18.0's {CONFIGURATION_TYPES} declares no struct Configuration",
    ]
    assert "keys" not in facts and "configuration" not in facts
    assert fact_problems("kueue", "0.18.0", facts, {"kind": "Configuration"}) == [
        "kueue v0.18.0 does not register the integration batch/job in pkg/controller/jobs/job/job_controller.go, "
        "which the stack's manager configuration turns on: Kueue would refuse to start"
    ]
    facts, problems = extract("kueue", "0.18.0", lambda path: None)
    assert problems[-1] == f"kueue v0.18.0 has no {CONFIGURATION_TYPES}: the manager configuration is v1beta2"
    assert facts == {"sources": [], "frameworks": {}}


def test_an_integration_named_otherwise_is_refused():
    renamed = {FRAMEWORK_FILES["batch/job"]: "batch/job", FRAMEWORK_FILES["jobset.x-k8s.io/jobset"]: "jobset-v2"}
    assert framework_problems("0.18.0", renamed) == [
        "kueue v0.18.0 does not register the integration jobset.x-k8s.io/jobset in "
        "pkg/controller/jobs/jobset/jobset_controller.go, which the stack's manager configuration turns on: Kueue "
        "would refuse to start"
    ]
