"""What two stacks of one Google project must not share, read from the repository's stack files (plain functions, no
network; ``tools/state.py`` runs them before `pulumi stack init` and before each `up` and preview).

Every GCP name of a stack derives from ``tpu-rl:clusterName`` (``infra.gcp.naming.names_for``: the cluster, its node
pools, network, service accounts, key ring, image mirrors), and the artifacts bucket from it unless
``tpu-rl:bucketName`` names one. Two stacks of one project with the same cluster name or bucket register the same
objects and the same IAM members (the same role, member and resource): the second stack's creates fail with 409 after
its grants on the first's objects may exist, and the provider's delete of a member removes it whoever else holds it
(terraform-provider-google ``resourceIamMemberDelete``: ``subtractFromBindings``), so a destroy of either would strip
the other's grants. A shared Hub cache (``tpu-rl:model.hubCache``) has one writer: stacks that share it must name the
same ``tpu-rl:model.hubCacheWriter``, or two of them would write it.

A conflict is one line (``StateRefusedError``, exit 2) naming both stack files and the command that ends it; nothing is
created. Stacks of other projects, and a file whose project is unset or the example's placeholder, are not compared.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.config.formats import CLUSTER_NAME
from core.config.placeholders import EXAMPLE_PROJECTS
from core.names import PROJECT
from core.printed_commands import pulumi_config_set
from tools.stack_files import StackFileError, load_stack_config
from tools.state_home import STACK_NAME, StateRefusedError

HELP = "docs/state.md#two-stacks-in-one-project"


@dataclass(frozen=True)
class Names:
    """What one stack file names that another stack of its project must not."""

    stack: str
    file: str
    project: str
    cluster: str
    bucket: str
    hub_cache: str
    writer: str


def _object(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def names_of(stack: str, root: Path) -> Names | None:
    """The names of ``Pulumi.<stack>.yaml`` (None: the file cannot be read, or names no project of yours)."""
    path = root / f"Pulumi.{stack}.yaml"
    try:
        config, _, _ = load_stack_config(path, root=root)
    except (StackFileError, OSError):
        return None
    project = (config.get("gcp:project") or "").strip()
    if not project or project in EXAMPLE_PROJECTS:
        return None
    cluster = (config.get(f"{PROJECT}:clusterName") or "").strip()
    bucket = (config.get(f"{PROJECT}:bucketName") or "").strip() or f"{project}-{cluster}"
    model = _object(config.get(f"{PROJECT}:model"))
    cache = str(model.get("hubCache") or "").strip()
    return Names(stack, path.name, project, cluster, bucket, cache, str(model.get("hubCacheWriter") or "").strip())


def problem(stack: str, root: Path) -> str | None:
    """One line naming what ``stack`` shares with another stack file of its project (None: nothing)."""
    own = names_of(stack, root)
    if own is None:
        return None
    for path in sorted(root.glob("Pulumi.*.yaml")):
        name = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
        if name == stack or not STACK_NAME.fullmatch(name):
            continue
        other = names_of(name, root)
        if other is None or other.project != own.project:
            continue
        if other.cluster == own.cluster:
            fresh = f"{PROJECT}-{stack}"
            fresh = fresh if CLUSTER_NAME.matches(fresh) and fresh != own.cluster else "<name>"
            return (
                f"stack {stack}'s {PROJECT}:clusterName {own.cluster} is stack {name}'s too ({other.file}), in project "
                f"{own.project}: every name of a stack derives from it (cluster, node pools, network, service "
                "accounts, key ring, bucket), so the two would hold the same objects and IAM grants, and a destroy of "
                f"either would remove the other's; give {stack} a name of its own: "
                f"`{pulumi_config_set(stack, f'{PROJECT}:clusterName', fresh)}` ({HELP})"
            )
        if other.bucket == own.bucket:
            return (
                f"stack {stack}'s artifacts bucket gs://{own.bucket} is stack {name}'s too ({other.file}): its runs, "
                "grants and destroy would be the other's; give it a bucket of its own: "
                f"`{pulumi_config_set(stack, f'{PROJECT}:bucketName', '<name>')}` (or leave it unset: "
                f"<gcp:project>-<clusterName>) ({HELP})"
            )
        if own.hub_cache and other.hub_cache.rstrip("/") == own.hub_cache.rstrip("/") and other.writer != own.writer:
            writer = f"{PROJECT}:model.hubCacheWriter"
            return (
                f"stacks {stack} and {name} share the Hub cache {own.hub_cache} but name different writers "
                f"({PROJECT}:model.hubCacheWriter: {own.writer or '(unset)'} in {own.file}, "
                f"{other.writer or '(unset)'} in {other.file}): a cache has one writer; set the same one in both: "
                f"`{pulumi_config_set(stack, writer, '<writer-stack>')}` and "
                f"`{pulumi_config_set(name, writer, '<writer-stack>')}` ({HELP})"
            )
    return None


def refuse_shared(stack: str, root: Path) -> None:
    """StateRefusedError (exit 2) when ``stack`` shares a name with another stack of its project."""
    found = problem(stack, root)
    if found:
        raise StateRefusedError(found)
