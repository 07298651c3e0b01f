"""What the closed world records of each resource the program makes, derived from its plans (``tools/closed_world.py``
calls these and writes ``core/data/closed-world.json``): where each configured secret is kept and who reads it, what
each step's pods and ConfigMap are, the names of the Google Cloud resources named after the cluster, what every plan
holds, and the labels on every step's pod. Each takes the plans with the names the templates stand for in each."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from hashlib import sha256

from core.closed_world import POD_FIELDS, StepPods, templated, templated_value
from core.errors import BAD_INPUT, TpuRlError
from core.names import COMPONENT_LABEL, PROJECT
from core.secret_use import Reader, SecretUse, reader_of, secret_reads, secret_values
from tools.plan.offline import Plan

SECRET = "kubernetes:core/v1:Secret"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"


class UnknownSecretError(TpuRlError):
    """A Secret of the program's holds a value that is no configured secret's placeholder."""

    exit_code = BAD_INPUT


def secrets_of(plan: Plan, names: dict[str, str], keys_of: Mapping[str, str]) -> dict[str, SecretUse]:
    """Each Secret of the plan (its name a template): the configuration key whose value each data key holds
    (``keys_of``: value -> key), and the containers of the plan's pods that read it."""
    keys: dict[str, dict[str, str]] = {}
    for r in plan.find(SECRET):
        props = plan.raw_inputs.get(r["name"], r["inputs"])
        name = templated(props["metadata"]["name"], names)
        keys[name] = {}
        for _, key, value in secret_values(props):
            if value not in keys_of:
                raise UnknownSecretError(
                    f"Secret {name} key {key} holds no configured secret's value: plan with a placeholder for each "
                    "(tools/closed_world.py SECRETS)"
                )
            keys[name][key] = keys_of[value]
    readers: dict[str, set[Reader]] = {}
    for r in plan.find(JOBSET):
        for job in r["inputs"]["spec"]["replicatedJobs"]:
            pod = job["template"]["spec"]["template"]
            for container, secret, _ in secret_reads(pod["spec"]):
                reader = reader_of(pod["metadata"], pod["spec"], container)
                templated_reader = dataclasses.replace(reader, service_account=templated(reader.service_account, names))
                readers.setdefault(templated(secret, names), set()).add(templated_reader)
    return {name: SecretUse(keys.get(name, {}), frozenset(readers.get(name, ()))) for name in keys.keys() | readers}


def steps_of(planned: Sequence[tuple[Plan, Mapping[str, str]]]) -> dict[str, StepPods]:
    """Each step's pods over the plans: the accounts they run as, each container's env, command and args, and the
    files of its ConfigMap (``StepPods``; what differs between variants is the configuration's)."""
    accounts: dict[str, set[str]] = {}
    env: dict[str, dict[str, dict[str, set[str]]]] = {}
    argv: dict[str, dict[str, dict[str, set[str]]]] = {}
    pod_fields: dict[str, dict[str, set[str]]] = {}
    for plan, names in planned:
        for r in plan.find(JOBSET):
            for job in r["inputs"]["spec"]["replicatedJobs"]:
                pod = job["template"]["spec"]["template"]
                step = pod["metadata"]["labels"][COMPONENT_LABEL]
                accounts.setdefault(step, set()).add(templated(pod["spec"].get("serviceAccountName", ""), names))
                for field in POD_FIELDS:
                    pod_fields.setdefault(step, {}).setdefault(field, set()).add(json.dumps(pod["spec"].get(field)))
                for container in [*pod["spec"].get("initContainers", ()), *pod["spec"]["containers"]]:
                    for field in ("command", "args"):
                        argv.setdefault(step, {}).setdefault(container["name"], {}).setdefault(field, set()).add(
                            json.dumps(templated_value(container.get(field), names), sort_keys=True)
                        )
                    variables = env.setdefault(step, {}).setdefault(container["name"], {})
                    for entry in container.get("env", ()):
                        value_from = templated_value(entry.get("valueFrom"), names)
                        variables.setdefault(entry["name"], set()).add(json.dumps(value_from, sort_keys=True))
    files: dict[str, dict[str, set[str]]] = {}
    for plan, _ in planned:
        for r in plan.find(CONFIG_MAP):
            step = (r["inputs"]["metadata"].get("labels") or {}).get(COMPONENT_LABEL)
            if not isinstance(step, str):
                continue
            for key, text in (r["inputs"].get("data") or {}).items():
                files.setdefault(step, {}).setdefault(key, set()).add(sha256(text.encode()).hexdigest())
    return {
        step: StepPods(
            service_accounts=frozenset(accounts[step]),
            env={c: {n: tuple(json.loads(v) for v in sorted(vs)) for n, vs in e.items()} for c, e in env[step].items()},
            pod={f: tuple(json.loads(v) for v in sorted(vs)) for f, vs in pod_fields[step].items()},
            argv={
                c: {f: json.loads(next(iter(vs))) for f, vs in fields.items() if len(vs) == 1}
                for c, fields in argv[step].items()
            },
            files={
                key: next(iter(digests)) if len(digests) == 1 else None for key, digests in files.get(step, {}).items()
            },
        )
        for step in accounts
    }


NAME_FIELDS = ("name", "accountId")
"""The fields that name a Google Cloud resource of the program's (an account's id); a mirror's repository id is its
upstream's path, which the configuration moves."""


def names_of_resources(planned: Sequence[tuple[Plan, Mapping[str, str]]]) -> dict[str, dict[str, frozenset[str]]]:
    """Type -> naming field -> the names the plans give, as templates: of the Google Cloud types whose every name,
    in every variant, is the stack's cluster's (``{clusterName}`` or ``{clusterName}-...``)."""
    found: dict[tuple[str, str], set[str]] = {}
    for plan, names in planned:
        for r in plan.resources:
            if r["type"].startswith("gcp:"):
                for field in NAME_FIELDS:
                    if isinstance(r["inputs"].get(field), str):
                        found.setdefault((r["type"], field), set()).add(templated(r["inputs"][field], names))
    named: dict[str, dict[str, frozenset[str]]] = {}
    for (type_, field), templates in found.items():
        if all(t == "{clusterName}" or t.startswith("{clusterName}-") for t in templates):
            named.setdefault(type_, {})[field] = frozenset(templates)
    return named


def always_of(plans: list[Plan]) -> frozenset[tuple[str, str]]:
    """(type, logical name) of what every plan holds: what the program makes whatever the configuration, in the cloud
    and the cluster (the program's own component types, ``tpu-rl:...``, make nothing there). A Secret is made when
    its secret is configured (the plans are all made with placeholders), so none is among them."""
    made = [
        {
            (r["type"], r["name"])
            for r in plan.resources
            if r["type"] != SECRET and not r["type"].startswith(f"{PROJECT}:")
        }
        for plan in plans
    ]
    return frozenset(set.intersection(*made))


def pod_labels_of(plans: list[Plan]) -> frozenset[str]:
    """The label keys every pod of every plan's steps carries."""
    keys: set[str] | None = None
    for plan in plans:
        for r in plan.find(JOBSET):
            for job in r["inputs"]["spec"]["replicatedJobs"]:
                labels = set(job["template"]["spec"]["template"]["metadata"].get("labels") or {})
                keys = labels if keys is None else keys & labels
    return frozenset(keys or ())
