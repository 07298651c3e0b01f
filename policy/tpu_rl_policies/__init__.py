"""tpu-rl guardrails: TPU- and ML-aware CrossGuard policies (importable; ``__main__.py`` builds the pack).

Every policy has a name, a one-line description, a severity and a remediation in its
messages. Enforcement levels come from the policy config files (``config/<stack>.json``).

The policies judge the pod wherever it is: ``pods`` finds every pod spec of a resource of any kind by the
API paths of that kind (Pod, PodTemplate, Deployment, DaemonSet, StatefulSet, ReplicaSet,
ReplicationController, Job, CronJob, JobSet, their ``List`` forms, and any other object by the shape of a pod
spec), and every container list of it (``containers``, ``initContainers``, ``ephemeralContainers``). A Helm
release renders objects the pack cannot see: only the charts tpu-rl installs are allowed
(``reviewed-helm-charts``). Environment variables from the stack's own ConfigMaps and Secrets are resolved as
the kubelet resolves them before a policy reads them (``container_env``), and so are the files a container runs
from a ConfigMap volume (``Mounts``: tpu-rl's steps run ``bash /tpu-rl/run.sh`` from their own ConfigMap). A
hostile or malformed shape is a finding or ignored, never a traceback: each policy reads plain copies of the props
(an unknown preview value is ``UNKNOWN``) and a failure inside one is reported as a finding (``_guarded``).

The modules, each importing only those above it:

- ``values``: plain props, the values the engine does not know yet (``Unseen``) and the scopes they are judged in;
- ``resources``: the type tokens, ``Resource``, the analyzer (``Analyzer``, ``DEPLOYMENT``) and how a check runs
  (``_judged``, ``_guarded_resource``, ``_guarded_stack``);
- ``pods``: pod specs and containers of any kind; ``env``: a container's environment, ConfigMap files and argv;
- ``grants``: what a grant of the stack may land on (its own resources, from the stack and the configuration the engine
  sends) and the principals an IAM resource names;
- ``scripts``: the runs a TPU container starts through tpu-rl's launcher, with the overrides of its ``train.json``
  (``core.step_config``; what the budget reads);
- the rules, one module per concern: ``closed_world`` (only the types, kinds, roles, RBAC subjects and images the
  program creates: ``core/data/closed-world.json``, or what the policy config admits with a reason),
  ``closed_shapes`` (of those, only the property paths, namespaces and pinned values the program writes), ``secrets``,
  ``always_made`` (what the program makes whatever the configuration is there), ``own_projects`` (every project a
  resource names is the stack's, its configuration's or the program's upstream), ``step_pods`` (a step's pods as the
  program makes them: label, account, containers, env), ``secret_holders`` (where the
  configured secrets are kept and who reads them),
  ``cluster`` (TPU pools, the control plane), ``network``, ``iam`` (identities, Google Cloud's and the cluster's),
  ``storage`` (the bucket, the KMS key), ``workloads`` (Jobs, pods, images), ``pod_bindings`` (each pod's namespace,
  service account and claims), ``targets`` (where every grant lands),
  ``helm``, ``publish``, ``labels``, ``budget``, ``kueue``.

Inside the package, imports are relative: the Pulumi CLI runs ``policy/__main__.py`` with ``policy/`` on
``sys.path`` (the package is the top-level ``tpu_rl_policies``), the tests import ``policy.tpu_rl_policies``.
"""

from __future__ import annotations

from .always_made import always_made
from .budget import tpu_budget
from .closed_shapes import closed_world_shapes
from .closed_world import closed_world
from .cluster import gke_control_plane, tpu_node_pool_shape
from .helm import reviewed_helm_charts
from .iam import (
    iam_grants,
    no_admission_webhooks,
    no_broad_project_iam,
    no_broad_rbac,
    stack_principals,
)
from .kueue import kueue_queue_fits
from .labels import cost_attribution_labels
from .network import no_exposed_services, no_open_control_plane
from .own_projects import own_names, own_projects
from .pod_bindings import pod_bindings
from .publish import private_publish
from .resources import PACK_LEVEL, PACK_NAME, Analyzer, servicer
from .secret_holders import secret_holders
from .secrets import no_secrets_in_workloads
from .step_pods import step_pods
from .storage import bucket_deletion_guard, bucket_hardening, scoped_bucket_grants, secrets_encryption
from .targets import grant_targets
from .workloads import (
    bounded_retries,
    known_workload_kinds,
    least_privilege_pods,
    model_revision_pinned,
    no_ttl_on_managed_jobs,
    pinned_images,
    trusted_registries,
)

POLICIES = [
    closed_world,
    closed_world_shapes,
    always_made,
    own_projects,
    own_names,
    step_pods,
    no_secrets_in_workloads,
    tpu_node_pool_shape,
    gke_control_plane,
    no_open_control_plane,
    no_broad_project_iam,
    iam_grants,
    stack_principals,
    grant_targets,
    scoped_bucket_grants,
    secrets_encryption,
    bucket_hardening,
    bucket_deletion_guard,
    no_ttl_on_managed_jobs,
    bounded_retries,
    pinned_images,
    trusted_registries,
    least_privilege_pods,
    pod_bindings,
    known_workload_kinds,
    reviewed_helm_charts,
    private_publish,
    secret_holders,
    no_broad_rbac,
    no_admission_webhooks,
    no_exposed_services,
    model_revision_pinned,
    cost_attribution_labels,
    tpu_budget,
    kueue_queue_fits,
]

__all__ = [
    "PACK_LEVEL",
    "PACK_NAME",
    "POLICIES",
    "Analyzer",
    "servicer",
]
