"""A stack's plan built from the pure builders alone (no mock runtime): the resources the policies judge.

``test_policy`` proves it equal to what the program registers (for the fields the policies read), so the
policies can be mutation-tested on it in milliseconds.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from typing import Any

from core.images import mirrors_for, repository_args
from core.names import head_ksa
from infra.gcp.access import bucket_grants
from infra.gcp.gke_spec import NodePoolSpec, PoolSite, cluster_args, cpu_pool_args, system_pool_args, tpu_pool_args
from infra.gcp.identities import NODE_PROJECT_ROLES
from infra.gcp.kms import key_name
from infra.gcp.naming import names_for
from infra.gcp.storage import bucket_args
from infra.k8s import kueue
from infra.k8s.manifests import head_access, namespace_manifest, network_policies, service_account_manifest
from tests.frozen import caching, freeze
from tests.lifecycle_walk import settings
from tools.plan.offline import Plan
from workloads.specs.step_specs import plan_workflow

_SNAKE = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)+")
CLUSTER_ID = "projects/p/locations/r/clusters/c"


def camel(value: Any) -> Any:
    """Pulumi's engine names: snake_case keys to camelCase (map keys such as labels keep their spelling)."""
    if isinstance(value, dict):
        return {
            (re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), k) if _SNAKE.fullmatch(k) else k): camel(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [camel(v) for v in value]
    return value


def _options(protect: bool = False, delete_before_replace: bool = False) -> dict[str, Any]:
    return {
        "protect": protect,
        "ignoreChanges": [],
        "deleteBeforeReplace": delete_before_replace,
        "customTimeouts": None,
        "parent": None,
    }


def _resource(type_: str, name: str, inputs: dict[str, Any], **options: Any) -> dict[str, Any]:
    return {"type": type_, "name": name, "inputs": inputs, "options": _options(**options)}


def remembering() -> bool:
    """Whether the tests' caches of what the product computes may answer: not with ``TPU_RL_NO_TEST_CACHE=1``
    (``tests.frozen.caching``), nor in mutmut's stats run (``MUTANT_UNDER_TEST=stats``), where mutmut records which
    tests call each function of the product and later runs only those against the function's mutants; a test that read
    a cached result would not be recorded, nor run."""
    return caching() and os.environ.get("MUTANT_UNDER_TEST") != "stats"


PACK_MUTANTS = "policy."
"""How the mutation run names a mutant of the policy pack (``MUTANT_UNDER_TEST``, its module's dotted path)."""


def product_mutant() -> str:
    """The mutant under test a result of the product alone may depend on: none for a mutant of the policy pack, which
    nothing of the product imports (`make lint`'s contract "the product never imports the policy pack")."""
    name = os.environ.get("MUTANT_UNDER_TEST", "")
    return "" if name.startswith(PACK_MUTANTS) else name


def per_mutant_cache(
    function: Callable[..., Any] | None = None, *, maxsize: int | None = None, product_only: bool = False
) -> Any:
    """``functools.cache`` (``functools.lru_cache(maxsize)`` with a ``maxsize``), with one cache per mutant of a
    mutation run, and none in its stats run or with the caches off (``remembering``); what it hands out is frozen
    (``tests.frozen.freeze``: a test that changes it fails at once, whether or not it came from the cache).

    mutmut forks each mutant's test run from a process that already ran the tests unmutated (it sets
    ``MUTANT_UNDER_TEST`` in the fork); a plain cache would hand every mutant the unmutated result. With
    ``product_only`` (a function of the product alone, which the pack's mutants cannot change: a plan), the tests of
    the pack's thousands of mutants share the unmutated results instead of each computing them (``product_mutant``).
    """

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        cache: dict[tuple[str, tuple[Any, ...]], Any] = {}

        @functools.wraps(function)
        def cached(*args: Any) -> Any:
            if not remembering():
                return freeze(function(*args))
            key = (product_mutant() if product_only else os.environ.get("MUTANT_UNDER_TEST", ""), args)
            if key in cache:
                cache[key] = cache.pop(key)  # the most recently used last
            else:
                if maxsize is not None and len(cache) >= maxsize:
                    del cache[next(iter(cache))]  # the least recently used
                cache[key] = freeze(function(*args))
            return cache[key]

        return cached

    return decorate if function is None else decorate(function)


def _kubernetes_type(obj: dict[str, Any]) -> str:
    """The provider's type token of a manifest (the core group is ``core``)."""
    api = obj["apiVersion"]
    return f"kubernetes:{api if '/' in api else 'core/' + api}:{obj['kind']}"


@per_mutant_cache(product_only=True)
def pure_plan(stack: str, *overrides: str) -> Plan:
    """The cluster, pools, bucket, project IAM and workflow objects of an example stack."""
    s = settings(stack, list(overrides))
    names = names_for(s)

    def email(holder: str) -> str:
        return f"{names.service_accounts[holder]}@{s.project}.iam.gserviceaccount.com"

    def in_cluster(pool: NodePoolSpec) -> dict[str, Any]:
        """A pool's inputs in the cluster (the component passes the cluster it creates)."""
        return camel({**pool, "cluster": CLUSTER_ID})

    site = PoolSite.of(s)

    labels = {"app.kubernetes.io/name": "tpu-rl", "app.kubernetes.io/instance": s.cluster_name}
    key = s.gke.secrets_key
    if key == "create":
        key = key_name(s.project, s.region, names.key_ring, names.crypto_key)
    resources = [
        _resource(
            "gcp:container/cluster:Cluster",
            "cluster",
            camel(cluster_args(s, "net", "sub", email("system"), None, key))
            # the channel's newest of the prefix, as the offline plan's mock answers getEngineVersions
            | ({"minMasterVersion": f"{s.gke.version_prefix}0-gke.0"} if s.gke.version_prefix else {}),
            protect=s.protect,
        ),
        _resource(
            "gcp:container/nodePool:NodePool",
            "system-pool",
            in_cluster(system_pool_args(site, s.system_pool, email("system"))),
        ),
        _resource(
            "gcp:container/nodePool:NodePool", "cpu-pool", in_cluster(cpu_pool_args(site, s.cpu_pool, email("cpu")))
        ),
        *(
            _resource(
                "gcp:container/nodePool:NodePool",
                f"tpu-pool-{i}",
                in_cluster(tpu_pool_args(site, pool, s.slice, s.tpu, email("tpu"))),
                protect=s.protect,
                delete_before_replace=True,
            )
            for i, pool in enumerate(names.tpu_pools)
        ),
        _resource("gcp:storage/bucket:Bucket", "bucket", camel(bucket_args(s)), protect=s.protect),
        *(
            _resource(
                "gcp:projects/iAMMember:IAMMember",
                f"{r}-{role.split('/')[1]}",
                {"project": s.project, "role": role, "member": f"serviceAccount:{email(r)}"},
            )
            for r in ("system", "cpu", "tpu")
            for role in NODE_PROJECT_ROLES
        ),
        *(
            _resource(
                "gcp:serviceaccount/account:Account",
                f"{holder}-sa",
                {"accountId": account_id, "project": s.project, "displayName": f"tpu-rl {holder} ({s.cluster_name})"},
            )
            for holder, account_id in names.service_accounts.items()
        ),
        *(
            _resource(
                "kubernetes:core/v1:ServiceAccount",
                f"{step}-ksa",
                service_account_manifest(s.namespace, ksa, labels, email(step)),
            )
            for step, ksa in names.ksas.items()
        ),
        *(
            _resource(
                "gcp:serviceaccount/iAMMember:IAMMember",
                f"{step}-workload-identity",
                {
                    "serviceAccountId": f"projects/{s.project}/serviceAccounts/{email(step)}",
                    "role": "roles/iam.workloadIdentityUser",
                    "member": f"serviceAccount:{s.project}.svc.id.goog[{s.namespace}/{ksa}]",
                },
            )
            for step, ksa in names.ksas.items()
        ),
        *(
            _resource(
                "gcp:storage/bucketIAMMember:BucketIAMMember",
                grant.resource_name,
                {
                    "bucket": s.bucket_name,
                    "role": grant.role,
                    "member": f"serviceAccount:{email(grant.holder)}",
                    **({"condition": grant.condition(s.bucket_name)} if grant.prefixes else {}),
                },
            )
            for grant in bucket_grants(s.model.spec.name)
        ),
        _resource("kubernetes:core/v1:Namespace", "namespace", namespace_manifest(s.namespace, labels)),
        *(
            _resource(_kubernetes_type(obj), f"train-head-{obj['kind'].lower()}", obj)
            for obj in (head_access(s.namespace, head_ksa(s.cluster_name), labels) if s.workflow.enabled else [])
        ),
        *(
            _resource("kubernetes:networking.k8s.io/v1:NetworkPolicy", f"network-policy-{p['metadata']['name']}", p)
            for p in network_policies(
                s.namespace, {"app.kubernetes.io/name": "tpu-rl", "app.kubernetes.io/instance": s.cluster_name}
            )
        ),
    ]
    if s.images.upstream is not None:  # tpu-rl:images.mirror: the stack's remote repositories (program/stack.py)
        for mirror in mirrors_for(s.images.upstream, s.project, s.region, s.cluster_name).values():
            resources.append(
                _resource(
                    "gcp:artifactregistry/repository:Repository",
                    mirror.repository_id,
                    camel(repository_args(mirror, s.labels)),
                )
            )
    if s.kueue.install:
        for name, manifest in (
            ("kueue-tpu-flavor", kueue.tpu_flavor(s, labels)),
            ("kueue-cpu-flavor", kueue.cpu_flavor(labels)),
            ("kueue-cluster-queue", kueue.cluster_queue(s, labels)),
            ("kueue-local-queue", kueue.local_queue(s, labels)),
        ):
            resources.append(_resource(f"kubernetes:{manifest['apiVersion']}:{manifest['kind']}", name, manifest))
    if s.workflow.enabled:
        for step in plan_workflow(s).steps:
            resources.append(_resource("kubernetes:core/v1:ConfigMap", step.scripts["metadata"]["name"], step.scripts))
            type_ = f"kubernetes:{step.manifest['apiVersion']}:{step.kind}"
            resources.append(_resource(type_, step.name, step.manifest, delete_before_replace=True))
    return Plan(stack=stack, resources=sorted(resources, key=lambda r: (r["type"], r["name"])), outputs={})
