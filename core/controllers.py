"""The JobSet and Kueue releases the stack can install, as ``make controller`` adopted them (plain data).

``core/data/controllers.json`` is written by ``tools/adopt_controller.py`` from each release's git tag (never by
hand; docs/releases.md "Adopting a JobSet or Kueue release"): per controller and version, the tag's commit, the
CRDs the stack's objects are validated against and the facts of its Go source the tests check again (their
vendored copies in ``tests/data/vendor/``) and, for JobSet, the fields of its own its CRD serves
(``infra.k8s.manifests.jobset_crd_problem`` refuses an upgrade whose CRD the cluster lacks). The configuration
accepts exactly these versions (``core.config.schema``), and so does the policy pack's ``reviewed-helm-charts``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Controller = Literal["jobset", "kueue"]
CONTROLLERS: tuple[Controller, ...] = ("jobset", "kueue")
DATA = Path(__file__).parent / "data" / "controllers.json"

API_VERSIONS: dict[Controller, str] = {"jobset": "v1alpha2", "kueue": "v1beta2"}
"""The version of each controller's API the stack's objects are written in (``jobset.x-k8s.io/v1alpha2``,
``kueue.x-k8s.io/v1beta2``): a release whose CRDs do not serve it cannot be adopted."""
CRDS: dict[Controller, tuple[str, ...]] = {
    "jobset": ("jobsets",),
    "kueue": ("resourceflavors", "clusterqueues", "localqueues"),
}
"""The plural of each CRD whose objects the stack creates: the ones a release's copy is vendored of."""
CHART_VALUES: dict[Controller, tuple[tuple[str, ...], ...]] = {
    "jobset": (),
    "kueue": (("controllerManager", "nodeSelector", "*"), ("managerConfig", "controllerManagerConfigYaml")),
}
"""The value paths tpu-rl sets on each chart ("*" is any one key): ``infra.k8s.kueue.helm_values``. The policy pack
allows no other (``reviewed-helm-charts``); a release's chart must still have them."""

Use = Literal["pod label", "pod annotation", "template annotation", "object label", "workload label"]
"""How the stack relies on a controller's label or annotation key: on the pods the controller makes, as a label
(a container's env ``fieldRef`` ``metadata.labels['<key>']``, the live reader's pod selector) or as an annotation
(``metadata.annotations['<key>']``); set by the stack on a replicated Job's template for the controller to read; set
by the stack on its own object (a JobSet's labels) for the controller to read; on the Workload Kueue makes, as a label
(the live reader finds a step's Workload by it)."""
RELIED_ON: dict[Controller, tuple[tuple[str, Use], ...]] = {
    "jobset": (
        ("alpha.jobset.sigs.k8s.io/exclusive-topology", "template annotation"),
        ("jobset.sigs.k8s.io/coordinator", "pod label"),
        ("jobset.sigs.k8s.io/job-index", "pod label"),
        ("jobset.sigs.k8s.io/jobset-name", "pod annotation"),
        ("jobset.sigs.k8s.io/jobset-name", "pod label"),
        ("jobset.sigs.k8s.io/jobset-uid", "pod label"),
        ("jobset.sigs.k8s.io/replicatedjob-name", "pod annotation"),
        ("jobset.sigs.k8s.io/replicatedjob-name", "pod label"),
        ("jobset.sigs.k8s.io/replicatedjob-replicas", "pod label"),
        ("jobset.sigs.k8s.io/restart-attempt", "pod label"),
    ),
    "kueue": (
        ("kueue.x-k8s.io/job-uid", "workload label"),
        ("kueue.x-k8s.io/queue-name", "object label"),
    ),
}
"""Every label and annotation key of a controller the stack's objects and readers rely on, and how: the step manifests'
env ``fieldRef``\\ s (the Pathways head's and workers' ``MEGASCALE_*``, ``JOBSET_NAME``, ``REPLICATED_JOB_NAME``,
the coordinator's address), the exclusive-topology annotation on the TPU workers' and the head's Jobs, the queue
label on every queued JobSet, and what the live readers select pods and Workloads by
(``workloads.observe.pod_state``, ``startup``, ``live_state``; the head's own read of its attempt's pods selects by
the JobSet's UID and the restart count, ``workloads/container/slice_state.py``). ``tests/test_adopt_controller.py``
derives the list from the manifests and readers and fails when they rely on one this does not name; ``make
controller`` refuses a release whose source does not declare and use each one so (``tools/controller_facts.py``
``key_problems``, on the facts it extracts), and the tests check each against every adopted release's facts again."""


@dataclass(frozen=True)
class Release:
    """One adopted release of a controller."""

    version: str
    commit: str
    """The commit its tag ``v<version>`` names."""
    crds: dict[str, str]
    """CRD plural -> its vendored copy, a path under ``tests/data/vendor/`` (``schemas/<name>-v<version>/``)."""
    schema_fields: frozenset[str] = frozenset()
    """JobSet only: JobSet's own fields its CRD serves at ``v1alpha2``, as paths (``spec.volumeClaimPolicies``,
    ``status.replicatedJobsStatus[].jobRestarts``; ``infra.k8s.manifests.jobset_crd_fields``)."""
    facts: str = ""
    """The facts of its Go source, a path under ``tests/data/vendor/`` (``facts_file``): the constants that declare
    the keys of ``RELIED_ON`` and where it uses them, where it writes the words the stack's rules match
    (``core.controller_strings``), for Kueue its ``Configuration``'s fields and the integrations it registers, for
    JobSet the Kubernetes it builds with and how it applies a failure policy's rules (``tools/controller_facts.py``),
    checked again offline by the tests."""


def crd_file(controller: Controller, version: str, plural: str) -> str:
    """Where a release's CRD is vendored: ``schemas/<controller>-v<version>/<group>_<plural>.yaml``."""
    return f"schemas/{controller}-v{version}/{controller}.x-k8s.io_{plural}.yaml"


def facts_file(controller: Controller, version: str) -> str:
    """Where the facts of a release's Go source are vendored: ``schemas/<controller>-v<version>/facts.json``."""
    return f"schemas/{controller}-v{version}/facts.json"


def _release(version: str, entry: dict) -> Release:
    return Release(
        version=version,
        commit=str(entry["commit"]),
        crds={str(k): str(v) for k, v in entry["crds"].items()},
        schema_fields=frozenset(entry.get("schemaFields", ())),
        facts=str(entry["facts"]),
    )


def load(path: Path = DATA) -> dict[Controller, dict[str, Release]]:
    """Every adopted release, by controller and version (oldest first)."""
    data = json.loads(path.read_text())
    return {name: {v: _release(v, e) for v, e in data[name].items()} for name in CONTROLLERS}


RELEASES = load()
JOBSET_VERSIONS: tuple[str, ...] = tuple(RELEASES["jobset"])
"""JobSet charts whose CRD the step manifests are validated against (tests/test_manifests.py; Cluster Toolkit
allow-lists its JobSet versions the same way)."""
KUEUE_VERSIONS: tuple[str, ...] = tuple(RELEASES["kueue"])
"""Kueue charts whose CRDs the stack's flavors and queues are validated against."""
JOBSET_SCHEMA_FIELDS: dict[str, frozenset[str]] = {v: r.schema_fields for v, r in RELEASES["jobset"].items()}
"""JobSet's own fields in each adopted version's CRD: a CRD served without one of its version's fields predates it
(``infra.k8s.manifests.jobset_crd_problem``)."""
