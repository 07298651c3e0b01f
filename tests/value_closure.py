"""How closed the policy pack is on values: each leaf of the program's own plans of the example stacks, changed, and
the whole pack run on the plan as the engine runs it at `pulumi up` (``tests/analyzer.py``). A change is refused (a
mandatory finding) or its path is open: the pack takes any value there. The open paths are listed, reviewed, in
tests/data/open-value-paths.txt (``python -m tests.value_closure --write`` rewrites it); the slow tier's property
test draws changes and holds the pack to the list (tests/test_policy_value_closure.py).

A leaf is changed to another value of its kind (a text gains a suffix, a number one more, a boolean its opposite, a
null, an empty object or list something) and to other resources' values at the same path (a relabelled pod, a
swapped account). A Secret's data is left alone (the plans hold it as ``[secret]``), as is a
provider's, whose inputs are the engine's."""

from __future__ import annotations

import argparse
import copy
import dataclasses
from collections.abc import Iterator
from typing import Any

from core.closed_world import segment
from tests import analyzer
from tests.conftest import plan_of
from tools.plan.offline import Plan
from tools.stack_files import ROOT

OPEN = ROOT / "tests" / "data" / "open-value-paths.txt"
STACKS = ("dev", "prod")
SKIPPED = ("pulumi:providers:", "kubernetes:core/v1:Secret")


@dataclasses.dataclass(frozen=True)
class Leaf:
    """A leaf of a resource of a stack's plan: where it is (``at``, keys and indices) and its path (``path``: keys,
    ``[]`` for any item), as ``core.closed_world`` writes paths."""

    stack: str
    type: str
    name: str
    at: tuple[Any, ...]
    path: str
    value: Any


def leaves(stack: str) -> Iterator[Leaf]:
    plan = plan_of(stack)
    for r in plan.resources:
        if r["type"].startswith(SKIPPED):
            continue
        for at, path, value in _walk(r["inputs"], (), ""):
            if at:  # a component's inputs are none
                yield Leaf(stack, r["type"], r["name"], at, path, value)


def _walk(node: Any, at: tuple[Any, ...], path: str) -> Iterator[tuple[tuple[Any, ...], str, Any]]:
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from _walk(value, (*at, key), f"{path}{segment(str(key))}")
    elif isinstance(node, list) and node:
        for index, value in enumerate(node):
            yield from _walk(value, (*at, index), f"{path}[]")
    else:
        yield at, path.removeprefix("."), node


def changed(value: Any) -> Any:
    """Another value of the same kind."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return f"{value}-changed" if value else "changed"
    if value == {}:
        return {"changed": "changed"}
    if value == []:
        return ["changed"]
    return "changed"


def with_change(leaf: Leaf, value: Any) -> Plan:
    """The stack's plan with the leaf set to ``value`` (that resource a copy, sent as its inputs)."""
    plan = plan_of(leaf.stack)
    (target,) = [r for r in plan.resources if r["type"] == leaf.type and r["name"] == leaf.name]
    inputs = copy.deepcopy(target["inputs"])
    node = inputs
    for key in leaf.at[:-1]:
        node = node[key]
    node[leaf.at[-1]] = value
    resources = [{**r, "inputs": inputs} if r is target else r for r in plan.resources]
    wire = {key: sent for key, sent in plan.wire.items() if key != (leaf.type, leaf.name)}
    return dataclasses.replace(plan, resources=resources, wire=wire)


def refused(plan: Plan, stack: str) -> bool:
    """Whether the whole pack, as the engine runs it at `pulumi up`, has a mandatory finding on the plan."""
    pack = analyzer.Pack(analyzer.policy_config_file(stack), stack=stack, stack_config=analyzer.engine_config(stack))
    return bool(analyzer.mandatory(analyzer.analyze_plan(plan, pack)))


def key(leaf: Leaf) -> str:
    return f"{leaf.type}\t{leaf.path}"


def open_paths() -> set[str]:
    """The reviewed list: ``<type>\\t<path>`` per line."""
    return {line for line in OPEN.read_text().splitlines() if line and not line.startswith("#")}


def others(stack: str) -> dict[str, list[Any]]:
    """Each path's values in the stack's plan (another resource's value at the same path: a swap)."""
    values: dict[str, list[Any]] = {}
    for leaf in leaves(stack):
        if leaf.value not in values.setdefault(key(leaf), []):
            values[key(leaf)].append(leaf.value)
    return values


def candidates(leaf: Leaf, values: dict[str, list[Any]], swaps: int = 2) -> list[Any]:
    """The changes tried at a leaf: another value of its kind, and up to ``swaps`` other resources' values there."""
    return [changed(leaf.value), *[v for v in values.get(key(leaf), []) if v != leaf.value][:swaps]]


def sweep() -> set[str]:
    """Every path of the example stacks' plans at which a change of one leaf (``candidates``) is not refused."""
    found: set[str] = set()
    for stack in STACKS:
        values = others(stack)
        for leaf in leaves(stack):
            if key(leaf) in found:
                continue
            if not all(refused(with_change(leaf, value), stack) for value in candidates(leaf, values)):
                found.add(key(leaf))
    return found


HEADER = """# The paths of the example stacks' plans at which the policy pack takes a changed value (one line each: the
# type, a tab, the path): the values it does not yet close to the program's (docs/policies.md tells how closed).
# Written by `python -m tests.value_closure --write`; tests/test_policy_value_closure.py holds the pack to it.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    found = sorted(sweep())
    if args.write:
        OPEN.write_text(HEADER + "".join(f"{line}\n" for line in found))
    print(f"{len(found)} open paths")


if __name__ == "__main__":
    main()
