"""tools/controller_facts.py: the facts ``make controller`` extracts from a JobSet or Kueue release's Go source, on
small Go snippets written here (our own text, shaped like the declarations and uses the releases have: a struct
with json tags, inline structs, const and var blocks), and the checks on them: a broken extractor fails here, the
whole command and the committed facts are tests/test_adopt_controller.py's."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from core.controller_strings import (
    AUTOSCALER,
    CONTAINERD,
    KUBERNETES,
    KUBERNETES_API,
    KUBERNETES_MINORS,
    KUEUE_TYPES,
    STRINGS,
    Matched,
    Source,
    checked_sources,
    job_failure_reasons,
    matches,
)
from tools.controller_facts import (
    CONFIGURATION_TYPES,
    FAILURE_POLICY,
    FIX,
    FRAMEWORK_FILES,
    GO_MOD,
    JOBSET_WEBHOOK,
    KEY_SOURCES,
    configuration_facts,
    configuration_problems,
    declarations,
    extract,
    fact_problems,
    framework_problems,
    go_strings,
    jobset_facts,
    jobset_problems,
    key_facts,
    key_problems,
    kubernetes_minor,
    string_facts,
    string_problems,
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
	JobSetUIDKey          string = "jobset.sigs.k8s.io/jobset-uid"
)
"""
JOBSET_CONSTANTS = 'package constants\n\nconst (\n\tRestartsKey = "jobset.sigs.k8s.io/restart-attempt"\n)\n'
"""``pkg/constants/constants.go``: the restart count's key is declared there, not with the API's."""
JOBSET_CONTROLLER = """package controllers

func labelAndAnnotate(obj metav1.Object, js *jobset.JobSet, rjob *jobset.ReplicatedJob, jobIdx int) {
	labels := maps.Clone(obj.GetLabels())
	labels[jobset.JobSetNameKey] = js.Name; labels[jobset.JobSetUIDKey] = string(js.UID)
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
(TYPES_FILE, CONSTANTS_FILE), USES = KEY_SOURCES["jobset"]
CONTROLLER_FILE = USES["pod label"][0]
DECLARED = f"{TYPES_FILE}, {CONSTANTS_FILE}"


def _jobset(
    types: str = JOBSET_TYPES, controller: str = JOBSET_CONTROLLER, constants: str = JOBSET_CONSTANTS
) -> dict[str, Any]:
    return key_facts("jobset", {TYPES_FILE: types, CONSTANTS_FILE: constants, CONTROLLER_FILE: controller})


def test_the_keys_facts_are_each_key_constant_and_where_it_is_used_so():
    facts = _jobset()
    assert facts["declaredIn"] == [TYPES_FILE, CONSTANTS_FILE]
    assert facts["constants"]["JobIndexKey"] == {"value": "jobset.sigs.k8s.io/job-index", "line": 7, "file": TYPES_FILE}
    assert facts["constants"]["CoordinatorKey"] == {
        "value": "jobset.sigs.k8s.io/coordinator",
        "line": 9,
        "file": TYPES_FILE,
    }
    assert "ConditionCompleted" not in facts["constants"], "not a label or annotation key"
    assert facts["uses"]["pod label"]["file"] == CONTROLLER_FILE
    assert facts["uses"]["pod label"]["found"]["JobIndexKey"] == [{"line": 8, "code": "labels[jobset.JobIndexKey] ="}]
    assert set(facts["uses"]["pod label"]["found"]) == {
        "JobSetNameKey",
        "JobSetUIDKey",
        "ReplicatedJobNameKey",
        "ReplicatedJobReplicas",
        "JobIndexKey",
        "RestartsKey",
        "CoordinatorKey",
    }
    assert facts["constants"]["RestartsKey"]["file"] == CONSTANTS_FILE
    assert facts["uses"]["pod label"]["found"]["RestartsKey"] == [
        {"line": 8, "code": "labels[constants.RestartsKey] ="}
    ], "declared in pkg/constants/constants.go, used as the pods' label"
    undeclared = _jobset(constants="package constants\n")
    assert "RestartsKey" not in undeclared["uses"]["pod label"]["found"], "a constant no declaring file has"
    assert set(facts["uses"]["pod annotation"]["found"]) == {"JobSetNameKey", "ReplicatedJobNameKey", "ExclusiveKey"}
    assert facts["uses"]["template annotation"]["found"] == {
        "ExclusiveKey": [{"line": 16, "code": ".Template.Annotations[jobset.ExclusiveKey]"}]
    }
    assert key_problems("jobset", "0.13.0", facts) == []


def test_a_key_without_its_constant_is_refused():
    types = JOBSET_TYPES.replace('\tCoordinatorKey               = "jobset.sigs.k8s.io/coordinator"\n', "")
    assert key_problems("jobset", "0.13.0", _jobset(types=types)) == [
        f"jobset v0.13.0 declares no jobset.sigs.k8s.io/coordinator ({DECLARED}), which the stack relies on: {FIX}"
    ]
    renamed = JOBSET_TYPES.replace("jobset.sigs.k8s.io/job-index", "jobset.sigs.k8s.io/job-number")
    assert key_problems("jobset", "0.13.0", _jobset(types=renamed)) == [
        f"jobset v0.13.0 declares no jobset.sigs.k8s.io/job-index ({DECLARED}), which the stack relies on: {FIX}"
    ]
    inner = 'func f() {\n\tconst inner = "jobset.sigs.k8s.io/job-index"\n}\n\nconst ('
    inside = renamed.replace("const (", inner)
    assert key_problems("jobset", "0.13.0", _jobset(types=inside)) == [
        f"jobset v0.13.0 declares no jobset.sigs.k8s.io/job-index ({DECLARED}), which the stack relies on: {FIX}"
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


def words_file(sources: tuple[Source, ...]) -> str:
    """A Go file that writes each literal once, in a var block (our text)."""
    return "var (\n" + "".join(f"\t_ = {json.dumps(source.literal)}\n" for source in sources) + ")\n"


for _file, _sources in checked_sources("kueue").items():
    KUEUE_FILES[_file] = KUEUE_FILES.get(_file, "") + words_file(_sources)


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
    ], "a file read for two checks is missing once"
    assert "keys" not in facts and "configuration" not in facts and "strings" not in facts
    assert fact_problems("kueue", "0.18.0", facts, {"kind": "Configuration"}) == [
        "kueue v0.18.0 does not register the integration batch/job in pkg/controller/jobs/job/job_controller.go, "
        "which the stack's manager configuration turns on: Kueue would refuse to start"
    ]
    facts, problems = extract("kueue", "0.18.0", lambda path: None)
    assert f"kueue v0.18.0 has no {CONFIGURATION_TYPES}: the manager configuration is v1beta2" in problems
    assert problems[-1] == (
        "kueue v0.18.0 has no pkg/scheduler/flavorassigner/flavorassigner.go, where tpu-rl checks the words its rules "
        "match"
    )
    assert facts == {"sources": [], "frameworks": {}}


def test_an_integration_named_otherwise_is_refused():
    renamed = {FRAMEWORK_FILES["batch/job"]: "batch/job", FRAMEWORK_FILES["jobset.x-k8s.io/jobset"]: "jobset-v2"}
    assert framework_problems("0.18.0", renamed) == [
        "kueue v0.18.0 does not register the integration jobset.x-k8s.io/jobset in "
        "pkg/controller/jobs/jobset/jobset_controller.go, which the stack's manager configuration turns on: Kueue "
        "would refuse to start"
    ]


# ---------------------------------------------------------------------------------------------
# The words the rules match (core.controller_strings)

GO_LITERALS = r"""package x

// A comment's "quoted" words are no literal, nor /* this */ one.
const (
	Plain   = "Admitted"
	Escaped = "say \"hi\"\tthen\\go \x41\101\u00e9"
	Raw     = `flavor %s
not found`
)

/* a block comment
   with "words" */
var r = '"'
var after = "doesn't match node affinity" // "trailing"
"""


def test_go_string_literals_are_decoded_with_their_lines_comments_and_runes_skipped():
    assert go_strings(GO_LITERALS) == [
        ("Admitted", 5),
        ('say "hi"\tthen\\go AAé', 6),
        ("flavor %s\nnot found", 7),
        ("doesn't match node affinity", 14),
    ]


def test_a_words_facts_are_each_literals_first_line_and_0_for_one_not_written():
    wanted = {"f.go": (Source("f.go", "Admitted"), Source("f.go", "Gone"), Source("f.go", "Raw"))}
    text = 'x := "Admitted"\ny := `Raw`\nz := "Admitted"\n'
    assert string_facts({"f.go": text}, wanted) == {"f.go": {"Admitted": 1, "Gone": 0, "Raw": 2}}
    assert string_facts({}, wanted) == {}, "a file not read has no facts"


def _kueue_words() -> dict[str, dict[str, int]]:
    files = {file: words_file(sources) for file, sources in checked_sources("kueue").items()}
    return string_facts(files, checked_sources("kueue"))


def test_a_release_that_no_longer_writes_a_word_the_rules_match_is_one_line():
    facts = _kueue_words()
    assert string_problems("kueue", "0.18.0", facts) == []
    facts[KUEUE_TYPES]["WaitForRecovery"] = 0
    assert string_problems("kueue", "0.18.0", facts) == [
        f"kueue v0.18.0 no longer writes 'WaitForRecovery' in {KUEUE_TYPES}, from which the rules of "
        "workloads/observe/recovery.py match 'WaitForRecovery' (a Workload's PodsReady reason): read what it writes "
        "now, then change those rules and core/controller_strings.py"
    ]
    del facts[KUEUE_TYPES]["WaitForRecovery"]
    assert string_problems("kueue", "0.18.0", facts) == [
        f"the facts of kueue v0.18.0 do not say whether it writes 'WaitForRecovery' in {KUEUE_TYPES}: adopt it again "
        "(make controller NAME=kueue VERSION=0.18.0)"
    ], "a row added since the release was adopted"


GO_MOD_SNIPPET = "module sigs.k8s.io/jobset\n\ngo 1.24\n\nrequire (\n\tgithub.com/x/y v1.2.3\n\tk8s.io/api v0.36.0\n)\n"
WEBHOOK_SNIPPET = """var validOnJobFailureReasons = []string{
	batchv1.JobReasonBackoffLimitExceeded,
	batchv1.JobReasonDeadlineExceeded,
	batchv1.JobReasonPodFailurePolicy,
}
"""
FAILURE_POLICY_SNIPPET = """func ruleIsApplicable(rule FailurePolicyRule, reason, message string) bool {
	applies := len(rule.OnJobFailureReasons) == 0 || slices.Contains(rule.OnJobFailureReasons, reason)
	return applies && anyMatchFound(rule.OnJobFailureMessagePatterns, message)
}

func anyMatchFound(patterns []string, message string) bool {
	for _, pattern := range patterns {
		if match, err := regexp.MatchString(pattern, message); err == nil && match {
			return true
		}
	}
	return false
}
"""


def _jobset_files(changed: dict[str, str] | None = None) -> dict[str, Any]:
    files = {GO_MOD: GO_MOD_SNIPPET, JOBSET_WEBHOOK: WEBHOOK_SNIPPET, FAILURE_POLICY: FAILURE_POLICY_SNIPPET}
    return jobset_facts(files | (changed or {}))


def test_jobsets_kubernetes_its_accepted_reasons_and_how_it_matches_a_rule_are_its_facts():
    facts = _jobset_files()
    assert facts["kubernetesApi"] == {"file": "go.mod", "version": "v0.36.0"}
    assert facts["jobFailureReasons"]["accepted"] == [
        "JobReasonBackoffLimitExceeded",
        "JobReasonDeadlineExceeded",
        "JobReasonPodFailurePolicy",
    ]
    assert facts["failurePolicy"]["found"] == {
        "reasons": {"line": 2, "code": "slices.Contains(rule.OnJobFailureReasons, reason)"},
        "patterns": {"line": 8, "code": "regexp.MatchString(pattern, message)"},
    }
    assert jobset_problems("0.13.0", facts) == []
    assert kubernetes_minor("v0.36.0") == "1.36" and "1.36" in KUBERNETES_MINORS


def test_a_jobset_built_with_another_kubernetes_refusing_a_reason_or_matching_otherwise_is_refused():
    facts = _jobset_files()
    facts["kubernetesApi"]["version"] = "v0.37.1"
    facts["jobFailureReasons"]["accepted"].remove("JobReasonDeadlineExceeded")
    facts["failurePolicy"]["found"]["patterns"] = None
    assert jobset_problems("0.13.0", facts) == [
        "jobset v0.13.0 builds with Kubernetes 1.37 (go.mod: k8s.io/api v0.37.1), where the Kubernetes words the "
        "stack's rules match were not read (core/controller_strings.py KUBERNETES_MINORS: "
        f"{', '.join(KUBERNETES_MINORS)}): read their sources at 1.37, then add it",
        "jobset v0.13.0's webhook does not accept the Job failure reason DeadlineExceeded (batchv1."
        "JobReasonDeadlineExceeded is not in validOnJobFailureReasons, pkg/webhooks/jobset_webhook.go), which the "
        "training JobSet's failure policy names: it would refuse every training step "
        "(workloads/specs/step_manifests.py)",
        "jobset v0.13.0 no longer matches a failed Job's message by searching it for each of "
        "onJobFailureMessagePatterns as a regular expression (regexp.MatchString(pattern, message) in anyMatchFound, "
        "pkg/controllers/failure_policy.go), as the training JobSet's rules rely on: read how it matches them now, "
        "then change workloads/specs/step_manifests.py train_failure_policy",
    ]
    unknown = _jobset_files({GO_MOD: "module sigs.k8s.io/jobset\n"})
    assert jobset_problems("0.13.0", unknown) == [
        "jobset v0.13.0's go.mod requires no k8s.io/api: its Kubernetes is not known"
    ]


KUBERNETES_READ: dict[str, str] = {
    KUBERNETES_API: "tags v0.33.0, v0.34.1, v0.35.3 and v0.36.0",
    KUBERNETES: "pod_failure_policy.go matchPodFailurePolicy at commits 2b02db1b and 95f08499 (the same format in "
    "both); scheduler/schedule_one.go handleSchedulingFailure, kubelet/events/event.go PulledImage and "
    "kubelet/images/image_manager.go EnsureImageExists in every copy read, none pinned to a tag",
    AUTOSCALER: "eventing_scale_up_processor.go at commit 16c271a3 (EventingScaleUpStatusProcessor.Process)",
    CONTAINERD: "internal/cri/server/helpers.go (oomExitReason), the runtime of GKE's nodes",
}
"""Where each repository of core/controller_strings.py's Kubernetes rows was read (none of them is a dependency of
JobSet or Kueue whose tag ``make controller`` could read)."""

_VERB = re.compile(r"%%|%[-+# 0]*[0-9]*(?:\.[0-9]+)?[a-zA-Z]")


def format_pattern(literal: str) -> re.Pattern[str]:
    """A Go format string as a regular expression of what it prints (each verb any text; ``%d`` digits, ``%q`` a
    quoted string)."""
    parts, at = [], 0
    for verb in _VERB.finditer(literal):
        parts.append(re.escape(literal[at : verb.start()]))
        token = verb.group()
        parts.append({"%%": "%", "%d": "-?[0-9]+", "%q": '"[^"]*"'}.get(token, ".+?"))
        at = verb.end()
    parts.append(re.escape(literal[at:]))
    return re.compile("".join(parts))


def written_by_sources(row: Matched) -> bool:
    """Whether the row's example is what its sources print: each literal is in it (a format's verbs filled)."""
    return all(format_pattern(source.literal).search(row.example) for source in row.sources)


def test_every_row_is_matched_in_its_example_and_its_example_is_what_its_sources_write():
    """The table's own consistency: a row's example is matched as its rules match it, and holds each source literal
    (a format's verbs filled); a row without sources says why; Kubernetes' rows say where they were read."""
    for row in STRINGS:
        assert matches(row, row.example), row.text
        assert written_by_sources(row), row.text
        assert row.sources or row.unread, row.text
        assert row.rules and all(Path(rule).is_file() for rule in row.rules), row.text
        if row.writer == "kubernetes":
            assert all(source.repo in KUBERNETES_READ for source in row.sources), row.text
        else:
            assert all(not source.repo for source in row.sources), "Kueue's and JobSet's own repositories"
    assert not matches(next(r for r in STRINGS if r.text == "DeactivatedDueTo"), "Deactivated"), "a prefix, not less"
    assert set(job_failure_reasons()) == {"BackoffLimitExceeded", "PodFailurePolicy", "DeadlineExceeded"}


def test_a_go_format_is_read_as_what_it_prints():
    pattern = format_pattern("Container %s for pod %s/%s failed with exit code %v matching %v rule at index %d")
    assert pattern.fullmatch("Container w for pod ns/p-0 failed with exit code 77 matching FailJob rule at index 2")
    assert not pattern.fullmatch("Container w for pod ns/p-0 failed with exit code 77 matching FailJob rule at index x")
    assert format_pattern("image %q is 100%%").fullmatch('image "a:b" is 100%')
