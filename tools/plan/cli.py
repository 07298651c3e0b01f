"""Offline plan: what `pulumi up` would create, without the CLI, the cloud or the network.

    python -m tools.plan (--stack NAME | --config-file FILE) [--set KEY=VALUE ...] [--out DIR]

Prints a table of resources, and on stderr what the program warns of (``pulumi.log.warn``, as `pulumi preview` shows
it); with ``--out`` writes ``DIR/plan.json`` and one YAML file per Kubernetes object under ``DIR/manifests/``. A
config error exits 2 with one line on stderr.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from core.errors import TpuRlError
from core.estimate import describe
from core.outdir import check, write_files
from core.redact import scrub_lines
from infra.stop import StopError
from tools.plan.offline import Plan, is_kubernetes_object, run_program
from tools.process import exit_now, report
from tools.stack_files import ROOT, load_stack_config, stack_name

if TYPE_CHECKING:
    from program.world import World


def plan_stack(
    stack_file: Path,
    overrides: Sequence[str] = (),
    *,
    stack: str | None = None,
    preflight: bool = False,
    world: Callable[[], World] | None = None,
    secrets: dict[str, str] | None = None,
    **run_options: Any,
) -> tuple[Plan, list[str]]:
    """Plan a stack file with overrides (and secret values, e.g. a test sentinel token). ``world`` makes what the
    program reads beyond its configuration (``program.world``), called inside the run, where the stack's configuration
    is; without it the plan reads nothing but, with ``preflight``, the Hub, with the tokens of the environment
    (``program.world.environment_hub``: the offline plan never decrypts)."""
    from program import main
    from program.world import OFFLINE, World, environment_hub

    def offline() -> World:
        return World(hub=environment_hub(os.environ)) if preflight else OFFLINE

    config, secret_keys, notes = load_stack_config(stack_file, list(overrides))
    for key, value in (secrets or {}).items():
        config[key] = value
        secret_keys.add(key)
        notes = [n for n in notes if not n.startswith(key)]
    name = stack or stack_name(stack_file)
    make_world = world or offline
    plan = run_program(lambda: main(make_world(), preflight=preflight), name, config, secret_keys, **run_options)
    return plan, notes


class _ManifestDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """Multi-line strings (container scripts) as literal blocks, so a PR diff reads like the script; emitted by
    libyaml where PyYAML has it (some twenty times faster than its Python emitter; the same data)."""


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_ManifestDumper.add_representer(str, _str_representer)


def manifest_filename(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    parts = [obj.get("kind", "Object"), meta.get("namespace") or "cluster", meta.get("name", "unnamed")]
    return "-".join(str(p) for p in parts).lower() + ".yaml"


def write_plan(plan: Plan, out: Path) -> None:
    """``plan.json`` plus one manifest per Kubernetes object (secrets already redacted), through
    ``core.outdir``: all or nothing, never through a link; stale manifests this tool wrote are removed,
    a user's own files are left alone."""
    files: dict[str, bytes | str] = {"plan.json": json.dumps(plan.to_json(), indent=2, sort_keys=True) + "\n"}
    for resource in plan.resources:
        if is_kubernetes_object(resource["type"]):
            obj = resource["inputs"]
            head = {k: obj[k] for k in ("apiVersion", "kind", "metadata") if k in obj}
            ordered = {**head, **{k: v for k, v in sorted(obj.items()) if k not in head}}
            files[f"manifests/{manifest_filename(obj)}"] = yaml.dump(ordered, Dumper=_ManifestDumper, sort_keys=False)
    write_files(out, files, owned="manifests")


def render_table(plan: Plan) -> str:
    """A readable table: type, name, parent and notable options."""
    rows = [("TYPE", "NAME", "PARENT", "OPTIONS")]
    for r in plan.resources:
        o = r["options"]
        flags = []
        if o["protect"]:
            flags.append("protect")
        if o["deleteBeforeReplace"]:
            flags.append("deleteBeforeReplace")
        if o["replaceOnChanges"]:
            flags.append("replaceOnChanges=" + ",".join(o["replaceOnChanges"]))
        if o["ignoreChanges"]:
            flags.append("ignoreChanges=" + ",".join(o["ignoreChanges"]))
        if o["customTimeouts"]:
            flags.append("timeouts=" + "/".join(f"{k}:{v}" for k, v in o["customTimeouts"].items()))
        if o["deletedWith"]:
            flags.append(f"deletedWith={o['deletedWith']}")
        rows.append((r["type"], r["name"], o["parent"] or "", " ".join(flags)))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = ["  ".join(cell.ljust(widths[i]) if i < 3 else cell for i, cell in enumerate(row)).rstrip() for row in rows]
    lines.append(f"\n{len(plan.resources)} resources in stack {plan.stack}")
    for key, value in plan.outputs.items():
        if key == "estimate":
            continue
        if isinstance(value, (dict, list)):
            value = json.dumps(value)
        lines.append(f"  output {key}: {value}")
    if "estimate" in plan.outputs:
        lines.append("\n" + describe(plan.outputs["estimate"]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.plan", description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--stack", help="plan Pulumi.<STACK>.yaml")
    source.add_argument("--config-file", type=Path, help="plan this stack config file")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a key (a field by its path, tpu-rl:a.b or tpu-rl:a[0], as --path names it)",
    )
    parser.add_argument("--out", type=Path, help="write plan.json and manifests/ here")
    parser.add_argument(
        "--preflight",
        action="store_true",
        help="also run the Hugging Face preflight (needs the network and the real token)",
    )
    args = parser.parse_args(argv)
    # Loading the provider SDKs builds about 7,000 classes; the cyclic garbage collector would walk them
    # over and over while they load, and once more at exit. Nothing the plan makes needs collecting, so
    # the collector is off while it runs and what exists afterwards is frozen (gc.freeze: ignored by
    # every later collection). This halves the time of `make plan`.
    gc.disable()
    try:
        return _plan(args)
    finally:
        gc.freeze()
        gc.enable()


def _plan(args: argparse.Namespace) -> int:
    stack_file = args.config_file or ROOT / f"Pulumi.{args.stack}.yaml"
    try:
        if args.out:
            check(args.out)  # a bad --out is one line before anything runs (nothing is created)
        plan, notes = plan_stack(stack_file, args.set, stack=args.stack, preflight=args.preflight)
    except (TpuRlError, StopError) as err:  # StopError: the program's own stop, as the engine shows it
        return report(err)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    for warning in plan.warnings():  # what the program says through pulumi.log.warn: `pulumi preview` shows it too
        for line in scrub_lines(warning, limit=1000):
            print(f"warning: {line}", file=sys.stderr)
    if args.out:
        try:
            write_plan(plan, args.out)
        except TpuRlError as err:
            return report(err)
    print(render_table(plan))
    if args.out:
        print(f"\nwrote {args.out / 'plan.json'} and {args.out / 'manifests'}/")
    return 0


if __name__ == "__main__":
    exit_now(main())
