"""Each configured secret where the program keeps it, and read only by the containers the program gives it to
(``secret-holders``), from the closed world's ``secrets`` (``core/data/closed-world.json``, written by ``make
closed-world`` from the program's own plans; ``core.secret_use``).

A secret is known by what it is, not by a name:
- a stack holds only the Secrets the program makes, with the data keys it writes;
- where the engine sends the configured secrets' values (``ConfigureStack``: at `pulumi up`, and at a preview the
  engine runs), each of those Secrets holds the value the program puts there (the write token in the read token's
  Secret would give it to every step that reads that one), and no other text of any resource (an env value, an
  annotation, a ConfigMap, a Helm value, another Secret) holds a configured secret's value, as written, escaped or in
  base64, nested too (``core.secret_search.holds``);
- a container reads a Secret (by env, envFrom or a mounted volume) only if the program gives that Secret to it: its
  pod's step label, its Kubernetes service account and its own name, together. A pod relabelled as another step's
  runs as its own account, and so is no reader of that step's Secrets.
A message names the resource, the path and which configured key, never a value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from pulumi_policy import EnforcementLevel, Severity, StackValidationArgs, StackValidationPolicy

from core.closed_world import fill, load
from core.names import COMPONENT_LABEL
from core.secret_search import holds
from core.secret_use import Reader, SecretUse, reader_of, secret_reads, secret_values

from .closed_world import _names
from .pods import _name, kind_of, pods
from .properties import Unseen, _l, _m, judging, unseen
from .resources import DEPLOYMENT, SECRET, Report, Resource, _guarded_stack
from .secrets import _key

USES = load().secrets


def _uses(resources: list[Resource]) -> dict[str, SecretUse]:
    """The program's Secrets by the names they take in this stack (its cluster's name filled in)."""
    uses: dict[str, SecretUse] = {}
    for names in _names(resources) or [{}]:
        for name, use in USES.items():
            readers = frozenset(Reader(r.component, fill(r.service_account, names), r.container) for r in use.readers)
            uses[fill(name, names)] = SecretUse(use.keys, readers)
    return uses


def _holders(uses: dict[str, SecretUse]) -> str:
    return ", ".join(sorted(uses)) or "none"


def _secret_objects(r: Resource, uses: dict[str, SecretUse], say: Callable[[str], None]) -> set[tuple[str, str]]:
    """A Secret is one the program makes, with its keys and, where the engine sent it, its configured value; the
    (field, key) entries that hold what the program puts there."""
    name = _m(r.props.get("metadata")).get("name")
    if unseen(name):
        return set()
    use = uses.get(name) if isinstance(name, str) else None
    if use is None:
        say(
            f"Secret {name} is not one the program makes ({_holders(uses)}): it keeps the configured secrets there "
            "and nowhere else; remove it"
        )
        return set()
    own = set()
    for field, key, value in secret_values(r.props):
        configured = use.keys.get(key)
        if configured is None:
            say(f"{field} key {key} of Secret {name} is not one the program writes ({', '.join(sorted(use.keys))})")
            continue
        secret = DEPLOYMENT.secrets.get(configured)
        if secret is None or unseen(value):
            continue
        if value != secret:
            say(f"{field} {key} of Secret {name} does not hold {configured}'s value, the one the program puts there")
        else:
            own.add((field, key))
    return own


def _by_content(r: Resource, own: set[tuple[str, str]], uses: dict[str, SecretUse], say: Callable[[str], None]) -> None:
    """No text of the resource holds a configured secret's value but where the program keeps it."""
    if not DEPLOYMENT.secrets:
        return
    for path, text in _texts(r.props, ""):
        if r.resource_type == SECRET and path in ("metadata.name", "type"):
            continue
        field, _, key = path.partition(".")
        if r.resource_type == SECRET and (field, key) in own:
            continue
        for configured, secret in sorted(DEPLOYMENT.secrets.items()):
            if holds(text, secret):
                where = (
                    f"{kind_of(r.resource_type) or r.resource_type} {_name(r) if kind_of(r.resource_type) else r.name}"
                )
                say(
                    f"{path} of {where} holds the value of {configured}, which the program keeps only in Secret "
                    f"{_holders({n: u for n, u in uses.items() if configured in u.keys.values()})}; remove it"
                )


def _texts(node: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every text of ``node`` (keys too) with its path, a key that holds a secret shown as ``<secret>``; one not known
    yet is passed over without a note: it is judged at `pulumi up`, where the engine knows it (a note at every preview
    would bury the others)."""
    if isinstance(node, Unseen):
        return
    if isinstance(node, str):
        yield path or ".", node
    elif isinstance(node, dict):
        for key, value in node.items():
            shown = "<secret>" if any(holds(str(key), v) for v in DEPLOYMENT.secrets.values()) else _key(key)
            here = f"{path}.{shown}" if path else shown
            if isinstance(key, str):
                yield here, key
            yield from _texts(value, here)
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _texts(item, f"{path}[{index}]")


def _readers(r: Resource, uses: dict[str, SecretUse], say: Callable[[str], None]) -> None:
    for pod in pods(r.resource_type, r.props):
        with judging():
            for container, secret, route in secret_reads(pod.spec, _m, _l):
                labels = _m(pod.metadata.get("labels"))
                said = (secret, container.get("name"), labels.get(COMPONENT_LABEL), pod.spec.get("serviceAccountName"))
                if any([unseen(value) for value in said]):
                    continue
                reader = reader_of(pod.metadata, pod.spec, container)
                use = uses.get(secret) if isinstance(secret, str) else None
                shown = f"{kind_of(r.resource_type)} {_name(r)}: container {reader.container} ({pod.where})"
                if use is None:
                    say(f"{shown} reads Secret {secret} ({route}), which the program does not make: remove it")
                elif reader not in use.readers:
                    keys = ", ".join(sorted(set(use.keys.values()))) or "nothing configured"
                    allowed = "; ".join(
                        f"container {a.container} of step {a.component} as {a.service_account}"
                        for a in sorted(use.readers)
                    )
                    say(
                        f"{shown} reads Secret {secret} ({route}), which holds {keys}; the program gives it only to "
                        f"{allowed or 'no container'} (the step label, the service account and the container together)"
                    )


def _secret_holders(args: StackValidationArgs, resources: list[Resource], report: Report) -> None:
    uses = _uses(resources)
    for r in resources:

        def say(message: str, urn: str = r.urn) -> None:
            report(message, urn)

        own: set[tuple[str, str]] = set()
        if r.resource_type == SECRET:
            with judging():
                own = _secret_objects(r, uses, say)
        with judging():
            _by_content(r, own, uses, say)
        _readers(r, uses, say)


secret_holders = StackValidationPolicy(
    name="secret-holders",
    description=(
        "The configured secrets only in the Secrets the program makes, each holding the value the program puts there, "
        "and read only by the containers the program gives them to (step label, service account and container)."
    ),
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "Keep the Hub tokens in the program's Secrets and read them from the steps that need them "
        "(workloads/specs/step_specs.py); after a change to the program, run `make closed-world`."
    ),
    validate=_guarded_stack(_secret_holders),
)
