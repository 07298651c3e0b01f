"""A step's pod is what the program makes of that step (``step-pods``), from the closed world's ``steps``
(``core/data/closed-world.json``, written by ``make closed-world`` from the program's own plans).

A pod's step label decides which NetworkPolicies and queues take it (the evaluation's egress, the training pods' own
traffic); its Kubernetes service account decides which Google account it acts as. The program makes them together: a
pod labelled as a step runs as that step's account, and a pod relabelled as another step's to take its network or
queue is refused. The programs of its ConfigMap are the very texts the program ships for it (a step runs only that
code; ``run.sh`` and ``train.json``, which the configuration writes, are judged by the other policies). Its containers
are the step's, each with the env names the program sets there, and where the
program reads a value from elsewhere (a Secret, a field of the pod) that same source, and its command and arguments
the program's where the configuration does not move them: a name the program never sets
(``HF_ENDPOINT``, a proxy, ``LD_PRELOAD``) could send a step's token elsewhere or run other code with it.
"""

from __future__ import annotations

from collections.abc import Callable
from hashlib import sha256
from typing import Any

from pulumi_policy import EnforcementLevel, Severity, StackValidationArgs, StackValidationPolicy

from core.closed_world import fill, fill_value, load
from core.names import COMPONENT_LABEL

from .closed_world import _names
from .pods import _name, kind_of, pod_containers, pods
from .properties import _l, _m, judging, unseen
from .resources import CONFIG_MAP, Report, Resource, _guarded_stack

STEPS = load().steps


def _env(step: str, container: dict[str, Any], allowed: dict[str, tuple[Any, ...]], say: Callable[[str], None]) -> None:
    name = container.get("name")
    for entry in _l(container.get("env")):
        entry = _m(entry)
        variable, value_from = entry.get("name"), entry.get("valueFrom")
        if unseen(variable) or unseen(value_from):
            continue
        if variable not in allowed:
            say(
                f"container {name} sets env {variable}, which the program never sets on step {step}'s container "
                f"{name} ({', '.join(sorted(allowed)) or 'none'})"
            )
        elif value_from not in allowed[variable]:
            source = "a literal value" if value_from is None else f"valueFrom {value_from}"
            say(f"container {name}: env {variable} takes {source}, not what the program gives it on step {step}")


def _files(r: Resource, say: Callable[[str], None]) -> None:
    """A step's ConfigMap ships the files the program ships for that step, each program the very text it ships."""
    step = _m(_m(r.props.get("metadata")).get("labels")).get(COMPONENT_LABEL)
    found = STEPS.get(step) if isinstance(step, str) else None
    if found is None:
        return
    for key, text in _m(r.props.get("data")).items():
        if unseen(text):
            continue
        if key not in found.files:
            say(f"file {key} is not one the program ships for step {step} ({', '.join(sorted(found.files))})")
        elif found.files[key] is not None and sha256(str(text).encode()).hexdigest() != found.files[key]:
            say(f"file {key} is not the program's {key} for step {step}: a step runs only the code the program ships")


def _step_pods(args: StackValidationArgs, resources: list[Resource], report: Report) -> None:
    stacks = _names(resources)
    for r in resources:

        def say(message: str, urn: str = r.urn, r: Resource = r) -> None:
            report(f"{kind_of(r.resource_type)} {_name(r)}: {message}", urn)

        if r.resource_type == CONFIG_MAP:
            with judging():
                _files(r, say)

        for pod in pods(r.resource_type, r.props):
            with judging():
                step, account = _m(pod.metadata.get("labels")).get(COMPONENT_LABEL), pod.spec.get("serviceAccountName")
                if unseen(step) or unseen(account) or step is None:
                    continue  # a pod without its step label is always-made's
                found = STEPS.get(step) if isinstance(step, str) else None
                if found is None:
                    say(f"pod {pod.where} is labelled as step {step}, which the program does not have")
                    continue
                accounts = sorted({fill(a, n) for a in found.service_accounts for n in stacks})
                if (account or "") not in accounts:
                    say(
                        f"pod {pod.where} of step {step} runs as {account or 'no account'}; the program runs that "
                        f"step's pods as {' or '.join(a or 'no account' for a in accounts)} (a pod takes a step's "
                        "network and queue by its label)"
                    )
                for field, values in found.pod.items():
                    value = pod.spec.get(field)
                    if not unseen(value) and value not in values:
                        shown = " or ".join("unset" if v is None else str(v) for v in values)
                        say(
                            f"pod {pod.where} of step {step} has {field} {value}; the program's pods of that step have "
                            f"{shown}"
                        )
                for container in pod_containers(pod.spec):
                    name = container.get("name")
                    if unseen(name):
                        continue
                    env = found.env.get(name) if isinstance(name, str) else None
                    if env is None:
                        say(f"pod {pod.where}: container {name} is not one of step {step}'s ({', '.join(found.env)})")
                        continue
                    filled = {v: tuple(fill_value(x, n) for x in xs for n in stacks) for v, xs in env.items()}
                    _env(step, container, filled, say)
                    for field, value in found.argv.get(str(name), {}).items():
                        written = container.get(field)
                        if not unseen(written) and written not in [fill_value(value, n) for n in stacks]:
                            say(f"container {name}: its {field} is not what the program runs in step {step} ({value})")


step_pods = StackValidationPolicy(
    name="step-pods",
    description=(
        "A pod labelled as a step runs as that step's account, its containers are the step's, with the env names the "
        "program sets there and the sources it reads them from, and its ConfigMap ships the program's own code."
    ),
    severity=Severity.CRITICAL,
    enforcement_level=EnforcementLevel.MANDATORY,
    remediation_steps=(
        "Keep the steps' pods as workloads/specs/ makes them; after a change to the program, run `make closed-world`."
    ),
    validate=_guarded_stack(_step_pods),
)
