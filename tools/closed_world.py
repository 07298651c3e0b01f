"""Write ``core/data/closed-world.json``: every resource type, Kubernetes kind, IAM role (per grant type), RBAC subject
and image repository the program creates, read from its own offline plans (``tools.plan``) of the example stacks and
of variants that, together, turn on every feature the configuration offers (``VARIANTS``; the keys that change values
only are named in ``tests/test_policy_closed_world.py``, which fails until ``make closed-world`` has run after a change
to what the program creates).

    python -m tools.closed_world [--check]
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pulumi
import yaml

from core.closed_world import (
    ABSENT,
    DATA,
    ClosedWorld,
    Subject,
    fill_value,
    images_in,
    mirror_path,
    paths_in,
    render,
    roles_of,
    segment,
    served,
    templated,
    templated_value,
    unknown_paths,
    upstream_path,
    upstream_uri,
    value_at,
)
from core.config.schema import FIELDS
from core.config.values import Text
from core.errors import BAD_INPUT, TpuRlError
from core.iam_types import grant_kind
from core.names import PROJECT
from core.project_refs import configured_projects, projects_of
from core.redact import scrub
from core.secret_use import Reader, SecretUse
from tools.plan import plan_stack
from tools.plan.offline import UNKNOWN, Plan
from tools.process import entry_point
from tools.stack_files import ROOT, load_stack_config
from tools.world_facts import (
    always_of,
    names_of_resources,
    pod_labels_of,
    secrets_of,
    steps_of,
)

REPOSITORY = "gcp:artifactregistry/repository:Repository"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
VARIANTS: dict[str, tuple[str, ...]] = {
    "dev": ("dev",),
    "prod": ("prod",),
    "prod-publishing-evaluating": ("prod", "tpu-rl:publish.repo=me/model", "tpu-rl:workflow.steps.evaluate=true"),
    "dev-flex-start": ("dev", "tpu-rl:tpu.capacity=flex-start"),
    "prod-pinned-encrypted-mirrored": (
        "prod",
        "tpu-rl:gke.versionPrefix=1.35.",
        "tpu-rl:gke.secretsEncryptionKey=create",
        "tpu-rl:images.mirror=true",
    ),
    "dev-without-kueue": ("dev", "tpu-rl:kueue.enabled=false"),
    "dev-every-option": (
        "dev",
        "tpu-rl:clusterName=tpu-rl-b",
        "tpu-rl:namespace=rl-runs",
        "tpu-rl:images.mirror=true",
        "tpu-rl:images.registries[2]=europe-docker.pkg.dev/my-project/mirror",
        "tpu-rl:images.maxtextCheck=warn",
        "tpu-rl:gke.secretsEncryptionKey=projects/another-project/locations/us-east5/keyRings/keys/cryptoKeys/gke",
        "tpu-rl:gke.holdUpgrades=2026-12-01/2026-12-29",
        "tpu-rl:gke.maintenanceExclusion=none",
        "tpu-rl:model.hubCache=gs://another-project-tpu-rl-hub/hub/",
        "tpu-rl:model.hubCacheWriter=dev",
        "tpu-rl:cpuPool.bootDiskImage=tpu-rl-images-0-2-5",
        "tpu-rl:kueue.enabled=false",
        "tpu-rl:kueue.queue=team-queue",
        "tpu-rl:tpu.capacity=on-demand",
        "tpu-rl:sharedProject=true",
        "tpu-rl:bucketVersioning=true",
        "tpu-rl:workflow.preflight=false",
        "tpu-rl:workflow.capacityCheck=false",
        "tpu-rl:workflow.verifyExport=false",
    ),
    "prod-two-slices-drill-public": (
        "prod",
        "tpu-rl:tpu.slices=2",
        "tpu-rl:training.iciExpertParallelism=1",
        "tpu-rl:training.rolloutTensorParallelism=32",
        "tpu-rl:workflow.restartDrill=true",
        "tpu-rl:workflow.jobsetVersion=0.12.0",
        "tpu-rl:publish.repo=me/model",
        "tpu-rl:publish.private=false",
        "tpu-rl:model.revision=0123456789abcdef0123456789abcdef01234567",
    ),
    "dev-existing-gke": ("dev", "tpu-rl:existingCluster.kubeContext=gke_my-project_us-east5_gke-tpu-v6e"),
    "dev-existing-local": (
        "dev",
        "tpu-rl:existingCluster.kubeContext=tpu-rl-local",
        "tpu-rl:existingCluster.workloadIdentity=false",
    ),
    "dev-without-workflow": ("dev", "tpu-rl:workflow.enabled=false"),
    "dev-renamed": ("dev", "tpu-rl:clusterName=rl-cluster", "tpu-rl:namespace=rl-jobs"),
}
"""Stack -> ``--set`` overrides: the example stacks, ``tests/example_stacks.py``'s variants, and variants that turn
on, together, what those leave off (a renamed cluster and namespace, whose mirrors and subjects the templates must
read alike; a given Secrets key, a shared Hub cache, an external queue, a registry that may be private: the nodes'
registry reader role; two slices, the restart drill, a public publication; no workflow; the dev stack renamed, whose
pinned values the templates must write alike). The registry is widened
without an image in it: an image the configuration selects is its repository's, which the program's defaults name."""
PLACEHOLDER_TOKEN = "hf_closedWorldPlaceholderToken000000000"  # noqa: S105 (a placeholder, not a credential)
PLACEHOLDER_WRITE_TOKEN = "hf_closedWorldPlaceholderWriteToken0000"  # noqa: S105 (a placeholder, not a credential)
SECRETS = {"tpu-rl:hfToken": PLACEHOLDER_TOKEN, "tpu-rl:hfWriteToken": PLACEHOLDER_WRITE_TOKEN}
"""The configured secrets the plans are made with, each its own placeholder: where a value lands is that key's."""


PINNED: dict[str, tuple[str, ...]] = {
    "kubernetes:rbac.authorization.k8s.io/v1:Role": ("rules[]",),
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": ("roleRef",),
    "kubernetes:networking.k8s.io/v1:NetworkPolicy": ("spec",),
    "kubernetes:core/v1:Secret": ("type",),
    "kubernetes:core/v1:ServiceAccount": ("automountServiceAccountToken",),
    "kubernetes:core/v1:Namespace": ("metadata.name", "metadata.labels"),
    "kubernetes:storage.k8s.io/v1:StorageClass": ("provisioner", "parameters", "reclaimPolicy", "volumeBindingMode"),
    "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue": ("spec.namespaceSelector",),
    "kubernetes:helm.sh/v3:Release": ("chart", "createNamespace"),
    "gcp:container/cluster:Cluster": (
        "masterAuth",
        "privateClusterConfig.enablePrivateNodes",
        "datapathProvider",
        "networkingMode",
        "enableShieldedNodes",
        "nodeConfig.shieldedInstanceConfig",
        "nodeConfig.workloadMetadataConfig",
        "nodeConfig.oauthScopes",
        "addonsConfig",
    ),
    "gcp:container/nodePool:NodePool": (
        "nodeConfig.kubeletConfig",
        "nodeConfig.workloadMetadataConfig",
        "nodeConfig.shieldedInstanceConfig",
        "nodeConfig.metadata",
        "nodeConfig.oauthScopes",
        "nodeConfig.sandboxConfig",
    ),
    "gcp:compute/firewall:Firewall": ("allows", "denies", "direction", "sourceTags", "targetTags"),
    "gcp:compute/network:Network": ("autoCreateSubnetworks", "routingMode"),
    "gcp:compute/subnetwork:Subnetwork": ("privateIpGoogleAccess", "purpose"),
    "gcp:storage/bucket:Bucket": ("uniformBucketLevelAccess", "publicAccessPrevention"),
}
"""Type -> the paths whose values decide access and are pinned: what the roles allow, who a binding binds, what a
NetworkPolicy lets through, a Secret's type, whether an account's token is mounted, the namespace's pod security, what
a StorageClass provisions, which namespaces a queue admits, which charts a release installs, the control plane's client
certificates and private nodes, the kubelet's read-only port and the nodes' metadata server. A value the configuration
can move is never pinned: ``collect`` refuses a path whose value one logical resource writes differently in two
variants (beyond the names the templates stand for). A path ending ``[]`` pins each item of the list."""
ENGINE_PROVIDER_INPUTS = ("version",)
"""What the engine adds to a provider's inputs beyond its package's configuration: the plugin version it resolved
(pulumi/pulumi ``pkg/resource/deploy/providers``, ``SetProviderVersion``)."""


@dataclasses.dataclass(frozen=True)
class Variant:
    """What the templates stand for in a variant (``names``), and the texts its configuration sets (``texts``: a key
    of the program's equal to one is a key the configuration chooses, ``*``)."""

    names: dict[str, str]
    texts: frozenset[str]
    config: dict[str, Any]


def variant_of(stack: str, overrides: tuple[str, ...]) -> Variant:
    """A stack's configuration with ``overrides`` (project defaults included)."""
    config, _, _ = load_stack_config(ROOT / f"Pulumi.{stack}.yaml", list(overrides))
    names = {"clusterName": config["tpu-rl:clusterName"], "namespace": config["tpu-rl:namespace"]}
    return Variant(names, frozenset(_texts(config)), config)


def names_of(stack: str, overrides: tuple[str, ...]) -> dict[str, str]:
    """The values the templates stand for, in a stack's configuration with ``overrides``."""
    return variant_of(stack, overrides).names


def _texts(config: Mapping[str, Any]) -> Iterator[str]:
    """The free texts a configuration sets: the values of its keys read as ``Text`` (a name, a path, a reference; not
    a choice or a switch), an object's field read from the object's JSON."""
    for f in FIELDS:
        if not isinstance(f.read, Text) or f.top not in config:
            continue
        value = config[f.top]
        if f.path:
            try:
                value = json.loads(value) if isinstance(value, str) else value
                for part in f.path.split("."):
                    value = value.get(part) if isinstance(value, dict) else None
            except ValueError:
                value = None
        if isinstance(value, str) and value:
            yield value


def shape_of(props: Mapping[str, Any], free: frozenset[str]) -> set[str]:
    """A resource's property paths, a key equal to a text of the configuration (``free``) as ``*``."""
    return set(paths_in(_free_keys(props, free)))


def _free_keys(value: Any, free: frozenset[str]) -> Any:
    if isinstance(value, dict):
        return {_FREE_KEY if k in free else k: _free_keys(v, free) for k, v in value.items()}
    if isinstance(value, list):
        return [_free_keys(v, free) for v in value]
    return value


_FREE_KEY = "\x00free"
"""A key the configuration chooses, written ``.*`` (``segment`` quotes it; ``world_of`` rewrites it)."""
_FREE_WRITTEN = segment(_FREE_KEY)


def world_of(
    plan: Plan, names: dict[str, str], texts: frozenset[str] = frozenset(), secrets: Mapping[str, str] = SECRETS
) -> ClosedWorld:
    """What one plan creates, its derived names as templates and its images as their upstreams' repositories; the
    plan was made with ``secrets`` (configuration key -> value)."""
    mirrors = {}
    for r in plan.find(REPOSITORY):
        props = r["inputs"]
        uri = upstream_uri(props.get("remoteRepositoryConfig") or {})
        if props.get("mode") == "REMOTE_REPOSITORY" and isinstance(uri, str):
            mirrors[mirror_path(props["location"], props["project"], props["repositoryId"])] = upstream_path(uri)
    kinds: set[tuple[str, str]] = set()
    roles: dict[str, set[str]] = {}
    subjects: set[Subject] = set()
    images: set[str] = set()
    shapes: dict[str, set[str]] = {}
    for r in plan.resources:
        type_, props = r["type"], r["inputs"]
        if type_.startswith("kubernetes:") and ("apiVersion" in props or "kind" in props):
            kinds.add((str(props.get("apiVersion")), str(props.get("kind"))))
        if grant_kind(type_) is not None:
            roles.setdefault(type_, set()).update(str(role) for role in roles_of(props) or ())
        if type_.startswith("kubernetes:"):
            for s in props.get("subjects") or ():
                namespace = templated(s["namespace"], names) if s.get("namespace") else ""
                subjects.add(Subject(s["kind"], namespace, templated(s["name"], names)))
        images |= {served(image, mirrors) for _, image in images_in(props)}
        shapes.setdefault(type_, set()).update(p.replace(_FREE_WRITTEN, ".*") for p in shape_of(props, texts))
    types = {r["type"] for r in plan.resources}
    return ClosedWorld(
        frozenset(types),
        frozenset(kinds),
        {t: frozenset(r) for t, r in roles.items()},
        frozenset(subjects),
        frozenset(images),
        shapes={t: frozenset(p) for t, p in shapes.items()},
        namespaces=frozenset(_namespaces(plan, names)),
        namespaced=frozenset(_namespaced(plan)),
        secrets=secrets_of(plan, names, {value: key for key, value in secrets.items()}),
    )


def _namespaces(plan: Plan, names: dict[str, str]) -> Iterator[str]:
    """The namespaces of the plan's Kubernetes objects and Helm releases, as templates."""
    for r in plan.resources:
        metadata = r["inputs"].get("metadata")
        for namespace in (
            metadata.get("namespace") if isinstance(metadata, dict) else None,
            r["inputs"].get("namespace") if r["type"] == HELM_RELEASE else None,
        ):
            if isinstance(namespace, str) and r["type"].startswith("kubernetes:"):
                yield templated(namespace, names)


def _namespaced(plan: Plan) -> set[str]:
    """The Kubernetes types (Helm releases aside) whose every object the plan puts in a namespace."""
    placed: dict[str, bool] = {}
    for r in plan.resources:
        if r["type"].startswith("kubernetes:") and r["type"] != HELM_RELEASE:
            metadata = r["inputs"].get("metadata")
            has = isinstance(metadata, dict) and isinstance(metadata.get("namespace"), str)
            placed[r["type"]] = placed.get(r["type"], True) and has
    return {t for t, has in placed.items() if has}


def union(worlds: list[ClosedWorld], configs: list[dict[str, Any]] = []) -> ClosedWorld:  # noqa: B006 (read only)
    """Every world's entries, with what the engine adds to every stack: its root resource (``pulumi:pulumi:Stack``,
    which takes no property) and a default provider of each package a resource type names (``pulumi:providers:gcp``),
    which the engine registers for a resource the program gives no provider (the program's own component types,
    ``tpu-rl:...``, have none), its properties the package's keys of the configurations (``configs``); and on every
    provider, what the engine adds (``ENGINE_PROVIDER_INPUTS``)."""
    types = {t for w in worlds for t in w.types}
    packages = {t.split(":", 1)[0] for t in types} - {"pulumi", PROJECT}
    defaults = {f"pulumi:providers:{package}" for package in packages} - types
    types |= {"pulumi:pulumi:Stack", *defaults}
    roles: dict[str, set[str]] = {}
    shapes: dict[str, set[str]] = {"pulumi:pulumi:Stack": set()}
    for w in worlds:
        for type_, granted in w.roles.items():
            roles.setdefault(type_, set()).update(granted)
        for type_, paths in w.shapes.items():
            shapes.setdefault(type_, set()).update(paths)
    for provider in defaults:
        package = provider.removeprefix("pulumi:providers:")
        shapes[provider] = {
            segment(k.split(":", 1)[1]).removeprefix(".") for c in configs for k in c if k.startswith(f"{package}:")
        }
    for type_ in types:
        if type_.startswith("pulumi:providers:"):
            shapes.setdefault(type_, set()).update(ENGINE_PROVIDER_INPUTS)
    loose = {t for w in worlds for t in w.types if t.startswith("kubernetes:") and t not in w.namespaced}
    secrets: dict[str, tuple[dict[str, str], set[Reader]]] = {}
    for w in worlds:
        for name, use in w.secrets.items():
            keys, readers = secrets.setdefault(name, ({}, set()))
            keys.update(use.keys)
            readers.update(use.readers)
    return ClosedWorld(
        frozenset(types),
        frozenset(k for w in worlds for k in w.kinds),
        {t: frozenset(r) for t, r in roles.items()},
        frozenset(s for w in worlds for s in w.subjects),
        frozenset(i for w in worlds for i in w.images),
        shapes={t: frozenset(p) for t, p in shapes.items()},
        namespaces=frozenset(n for w in worlds for n in w.namespaces),
        namespaced=frozenset(t for w in worlds for t in w.namespaced) - loose,
        secrets={name: SecretUse(keys, frozenset(readers)) for name, (keys, readers) in secrets.items()},
    )


class MovedError(TpuRlError):
    """A pinned path whose value the configuration moves: it cannot be pinned."""

    exit_code = BAD_INPUT


def pinned_of(planned: list[tuple[str, Plan, Variant]]) -> dict[str, dict[str, tuple[Any, ...]]]:
    """The values of every ``PINNED`` path, as templates, over the variants' plans (``(name, plan, variant)``): one
    value per logical resource, the same in every variant that sets it (``MovedError`` otherwise), and ``ABSENT``
    when a resource of the type leaves the path unset."""
    seen: dict[tuple[str, str, str], list[tuple[str, Any, Variant]]] = {}
    for name, plan, variant in planned:
        for r in plan.resources:
            for path in PINNED.get(r["type"], ()):
                present, value = value_at(r["inputs"], path.removesuffix("[]"))
                seen.setdefault((r["type"], path, r["name"]), []).append((name, value if present else ABSENT, variant))
    pinned: dict[str, dict[str, set[str]]] = {}
    for (type_, path, resource), values in sorted(seen.items()):
        found = {json.dumps(_template(type_, path, resource, values, raw), sort_keys=True) for _, raw, _ in values}
        for text in found:
            value = json.loads(text)
            items = value if path.endswith("[]") and isinstance(value, list) else [value]
            pinned.setdefault(type_, {}).setdefault(path, set()).update(json.dumps(i, sort_keys=True) for i in items)
    return {t: {p: tuple(json.loads(v) for v in values) for p, values in paths.items()} for t, paths in pinned.items()}


def _template(type_: str, path: str, resource: str, values: list[tuple[str, Any, Variant]], raw: Any) -> Any:
    """The one template that writes ``raw`` and every other set value of the resource in its own variant; a value
    left unset (``ABSENT``) stays so."""
    if raw == ABSENT:
        return ABSENT
    written = [(name, value, variant) for name, value, variant in values if value != ABSENT]
    for _, value, variant in written:
        candidate = templated_value(value, variant.names)
        if all(fill_value(candidate, v.names) == other for _, other, v in written):
            return candidate
    moved = sorted({name for name, _, _ in written})
    raise MovedError(
        f"{type_} {resource}: the configuration moves {path} (variants {', '.join(moved)} write it differently), so "
        "it cannot be pinned: take it out of tools/closed_world.py PINNED"
    )


PlanFor = Callable[..., Plan]


def _plan(stack: str, *overrides: str) -> Plan:
    plan, _ = plan_stack(ROOT / f"Pulumi.{stack}.yaml", list(overrides), stack=stack, secrets=SECRETS)
    return plan


def _preview(stack: str, *overrides: str) -> Plan:
    plan, _ = plan_stack(
        ROOT / f"Pulumi.{stack}.yaml",
        list(overrides),
        stack=stack,
        preview=True,
        unknown_outputs=True,
        secrets=SECRETS,
    )
    return plan


def unknowns_of(previews: list[Plan], shapes: Mapping[str, frozenset[str]]) -> dict[str, frozenset[str]]:
    """Type -> the paths of objects (not leaves of ``shapes``) the program sends not known yet at its first
    previews."""
    found: dict[str, set[str]] = {}
    for plan in previews:
        for (type_, _), (sent, _) in plan.wire.items():
            leaves = shapes.get(type_, frozenset())
            found.setdefault(type_, set()).update(
                p for p in unknown_paths(sent, UNKNOWN) if p and any(s.startswith((f"{p}.", f"{p}[")) for s in leaves)
            )
    return {t: frozenset(p) for t, p in found.items() if p}


def collect(plan_for: PlanFor = _plan, preview_for: PlanFor = _preview, secrets: Mapping[str, str] = SECRETS) -> str:
    """The file's text, from ``plan_for(stack, *overrides)`` of every variant (``tools.plan.plan_stack``, made with
    ``secrets``; the tests hand in their cached plans and the secrets they were made with)."""
    planned = []
    for name, args in VARIANTS.items():
        planned.append((name, plan_for(*args), variant_of(args[0], args[1:])))
    worlds = [world_of(plan, variant.names, variant.texts, secrets) for _, plan, variant in planned]
    world = union(worlds, [variant.config for _, _, variant in planned])
    unknowns = unknowns_of([preview_for(*args) for args in VARIANTS.values()], world.shapes)
    plans = [plan for _, plan, _ in planned]
    always, labels, upstream = always_of(plans), pod_labels_of(plans), upstream_projects_of(planned)
    named = [(plan, variant.names) for _, plan, variant in planned]
    world = dataclasses.replace(world, names=names_of_resources(named), steps=steps_of(named))
    world = dataclasses.replace(
        world,
        pinned=pinned_of(planned),
        unknowns=unknowns,
        always=always,
        pod_labels=labels,
        upstream_projects=upstream,
    )
    return render(world, VARIANTS)


def upstream_projects_of(planned: list[tuple[str, Plan, Variant]]) -> frozenset[str]:
    """The projects the plans name beyond each variant's own and those its stack file and overrides name (the
    configuration the engine sends the pack: the project's defaults are not in it)."""
    found: set[str] = set()
    for name, plan, variant in planned:
        stack, *overrides = VARIANTS[name]
        written = yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
        configured = configured_projects({**written, **{o: o.partition("=")[2] for o in overrides}})
        configured.add(variant.config["gcp:project"])
        for r in plan.resources:
            found.update(project for _, project in projects_of(r["inputs"]) if project not in configured)
    return frozenset(found)


def difference(written: str, generated: str) -> list[str]:
    """The lines one text adds (``+``) or removes (``-``) from the other."""
    diff = difflib.unified_diff(written.splitlines(), generated.splitlines(), lineterm="", n=0)
    return [line for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1, naming the difference, when the file differs")
    args = parser.parse_args(argv)
    try:
        text = collect()
    except TpuRlError as error:
        print(f"error: {error.message}", file=sys.stderr)
        return error.exit_code
    except pulumi.RunError as error:  # the program's refusal of a variant's configuration
        print(f"error: a variant's plan failed: {scrub(str(error), limit=400)}", file=sys.stderr)
        return BAD_INPUT
    if args.check:
        changed = difference(DATA.read_text() if DATA.exists() else "", text)
        if changed:
            shown = "; ".join(line.strip() for line in changed[:10])
            more = f" and {len(changed) - 10} more lines" if len(changed) > 10 else ""
            print(
                f"error: {DATA.name} is not what the program creates ({shown}{more}): run `make closed-world`",
                file=sys.stderr,
            )
            return 1
        return 0
    DATA.write_text(text)
    print(f"wrote {DATA}")
    return 0


if __name__ == "__main__":
    entry_point(main)
