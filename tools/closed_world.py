"""Write ``core/data/closed-world.json``: every resource type, Kubernetes kind, IAM role (per grant type), RBAC subject
and image repository the program creates, read from its own offline plans (``tools.plan``) of the example stacks and
of variants that, together, turn on every feature the configuration offers (``VARIANTS``; ``VALUE_ONLY`` names the
keys that change values only). ``make closed-world`` after a change to what the program creates;
``tests/test_policy_closed_world.py`` fails until then.

    python -m tools.closed_world [--check]
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Callable

import pulumi

from core.closed_world import (
    DATA,
    ClosedWorld,
    Subject,
    images_in,
    mirror_path,
    render,
    roles_of,
    served,
    templated,
    upstream_path,
    upstream_uri,
)
from core.errors import BAD_INPUT, TpuRlError
from core.iam_types import grant_kind
from core.names import PROJECT
from core.redact import scrub
from tools.plan import plan_stack
from tools.plan.offline import Plan
from tools.stack_files import ROOT, load_stack_config

REPOSITORY = "gcp:artifactregistry/repository:Repository"
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
    "dev-without-workflow": ("dev", "tpu-rl:workflow.enabled=false"),
}
"""Stack -> ``--set`` overrides: the example stacks, ``tests/example_stacks.py``'s variants, and variants that turn
on, together, what those leave off (a renamed cluster and namespace, whose mirrors and subjects the templates must
read alike; a given Secrets key, a shared Hub cache, an external queue, a registry that may be private: the nodes'
registry reader role; two slices, the restart drill, a public publication; no workflow). The registry is widened
without an image in it: an image the configuration selects is its repository's, which the program's defaults name."""
VALUE_ONLY: dict[str, str] = {
    "tpu-rl:tpu.version": "one TPU generation (v6e)",
    "tpu-rl:gke.releaseChannel": "the cluster's channel: a value of the Cluster",
    "tpu-rl:model.name": "the model: values of the steps",
    "tpu-rl:kueue.version": "one Kueue release",
    "tpu-rl:hfToken": "a Secret's value",
    "tpu-rl:hfWriteToken": "a Secret's value (the publishing variants plan with a placeholder)",
    "tpu-rl:stateOrganization": "where the state lives (Pulumi Cloud): read by make, not by the program",
}
"""The feature keys of the configuration (booleans, choices, optional texts) that no variant sets, each with why: a
change of one changes values of what the program creates, not what it creates."""
PLACEHOLDER_TOKEN = "hf_closedWorldPlaceholderToken000000000"  # noqa: S105 (a placeholder, not a credential)


def names_of(stack: str, overrides: tuple[str, ...]) -> dict[str, str]:
    """The values the templates stand for, in a stack's configuration with ``overrides`` (project defaults
    included)."""
    config, _, _ = load_stack_config(ROOT / f"Pulumi.{stack}.yaml", list(overrides))
    return {"clusterName": config["tpu-rl:clusterName"], "namespace": config["tpu-rl:namespace"]}


def world_of(plan: Plan, names: dict[str, str]) -> ClosedWorld:
    """What one plan creates, its derived names as templates and its images as their upstreams' repositories."""
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
    types = {r["type"] for r in plan.resources}
    return ClosedWorld(
        frozenset(types),
        frozenset(kinds),
        {t: frozenset(r) for t, r in roles.items()},
        frozenset(subjects),
        frozenset(images),
    )


def union(worlds: list[ClosedWorld]) -> ClosedWorld:
    """Every world's entries, with what the engine adds to every stack: its root resource (``pulumi:pulumi:Stack``)
    and a default provider of each package a resource type names (``pulumi:providers:gcp``), which the engine
    registers for a resource the program gives no provider (the program's own component types, ``tpu-rl:...``, have
    none)."""
    types = {t for w in worlds for t in w.types}
    packages = {t.split(":", 1)[0] for t in types} - {"pulumi", PROJECT}
    types |= {"pulumi:pulumi:Stack", *(f"pulumi:providers:{package}" for package in packages)}
    roles: dict[str, set[str]] = {}
    for w in worlds:
        for type_, granted in w.roles.items():
            roles.setdefault(type_, set()).update(granted)
    return ClosedWorld(
        frozenset(types),
        frozenset(k for w in worlds for k in w.kinds),
        {t: frozenset(r) for t, r in roles.items()},
        frozenset(s for w in worlds for s in w.subjects),
        frozenset(i for w in worlds for i in w.images),
    )


PlanFor = Callable[..., Plan]


def _plan(stack: str, *overrides: str) -> Plan:
    plan, _ = plan_stack(
        ROOT / f"Pulumi.{stack}.yaml", list(overrides), stack=stack, secrets={"tpu-rl:hfToken": PLACEHOLDER_TOKEN}
    )
    return plan


def collect(plan_for: PlanFor = _plan) -> str:
    """The file's text, from ``plan_for(stack, *overrides)`` of every variant (``tools.plan.plan_stack``; the tests
    hand in their cached plans)."""
    worlds = [world_of(plan_for(*args), names_of(args[0], args[1:])) for args in VARIANTS.values()]
    return render(union(worlds), VARIANTS)


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
    raise SystemExit(main())
