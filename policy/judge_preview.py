"""Judge a pull request's preview with this policy pack, once every process of the branch has ended.

``.github/workflows/preview.yml`` runs the branch's program once, as the unprivileged user ``tpu-rl-branch``, in
``pulumi preview --json --show-sames`` with no policy pack, its standard output a file that user can neither open nor
write; it ends every process of that user, then runs this file from the base's pack folder, with the pack's venv, as
the runner's user: the verdict comes from code and data the branch never touched, the stack's configuration included,
which is the base's stack file (the names and projects the pack takes as the stack's own are the base's: a branch that
changes them is judged against them; docs/guardrails.md "Guardrails and PR review"). Usage::

    judge_preview.py STACK DIGEST [--stack-file Pulumi.STACK.yaml] [--summary FILE]

It prints one line per finding, then one line of totals, and exits 1 if any finding is mandatory, 0 otherwise; bad
input (an unreadable or invalid digest, a digest with no steps, a step it cannot read, a policy config the pack's
schemas refuse, a stack file that is not one) is one line on standard error and exit 2. ``--stack-file`` is the base's
stack file, sent as the engine sends a stack's configuration (``ConfigureStack``'s ``config``: the names the closed
world's templates stand for, the stack's projects); without it the pack is sent none, as for a stack of defaults.
``--summary`` writes the verdict, the preview's steps and the findings as Markdown, for the pull request's comment.

What the digest is (pulumi/pulumi at 1b59498, ``pkg/backend/display/json.go``): ``ShowPreviewDigest`` collects a
``display.PreviewDigest`` (``pkg/display/json.go``: ``steps``, ``diagnostics``, ``changeSummary``...) and prints it
once, when the engine's events end; ``getPreviewMetadataStep`` makes each ``PreviewStep`` (``op``, ``urn``,
``oldState``, ``newState``) from a ``ResourcePreEvent``, the states serialised by ``stateForJSONOutput`` (secrets
replaced by the string ``[secret]``: ``massagePropertyValue``) and ``stack.SerializeResource`` (an
``apitype.ResourceV3``: ``type``, ``inputs``, ``outputs``, ``parent``, ``protect``...; an unknown value is
``computedValuePlaceholder``, the engine's own unknown string, ``pkg/resource/stack/deployment.go``
``SerializePropertyValue``). ``shouldShow`` (``display.go``) drops ``same`` steps unless ``--show-sames``: the
workflow passes it, since the stack's validations need every resource.

What the pack is sent, as the engine sends it (``sdk/go/common/resource/plugin/analyzer_plugin.go``, ``rpc.go``
``MarshalPropertyValue`` with KeepUnknowns, KeepSecrets, SkipInternalKeys; ``pkg/resource/deploy/step_generator.go``):

- ``Analyze`` for every resource the program registered, on its inputs as the provider's Check returned them (the
  digest's ``newState.inputs``: ``continueStepsFromImport`` sets ``new.Inputs`` to them, and sends them to the
  analyzers, before the step and its pre-event);
- ``AnalyzeStack`` once, on every resource of the new stack (``deployment.news``: not deletes, not reads) with its
  outputs: a ``same`` step's are its old ones (``SameStep.Apply``: ``new.Outputs = old.Outputs``, the digest's
  ``oldState.outputs``); a create's or an update's at preview are what the provider previews, which the digest does
  not hold (its state is taken before the step runs: ``step_generator.go`` makes ``new`` with ``Outputs: nil``), so
  its inputs stand in for them (both providers echo the inputs in a preview; a value only the provider computes is
  missing here, where the engine would send it unknown);
- every number a double; a ``[secret]`` a secret of unknown value, and the unknown placeholder the engine's unknown
  sentinel (the same text): never a harmless value, an advisory "can't run policy ... during preview" at a preview;
- ``ConfigureStack`` with ``dry_run`` (a preview), ``Configure`` with each policy's level and properties from
  ``config/<stack>.json`` as ``pkg/resource/analyzer/config.go`` reconciles them; a ``remediate`` finding counts as
  mandatory (``analyze_snapshot.go`` ``analyzeResource``; ``AnalyzeResources``).

``tests/test_judge_preview.py`` builds digests as the CLI writes them and shows the judge finds what the pack finds
when the engine runs it (``tests/analyzer.py``).
"""

from __future__ import annotations

import argparse
import json
import re
import struct
import sys
from collections import Counter
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from google.protobuf import message as protobuf_message
from google.protobuf import struct_pb2
from pulumi.output import Unknown
from pulumi.runtime.proto import analyzer_pb2

from core.errors import BAD_INPUT, BadInputError

if __package__:  # imported as policy.judge_preview (the tests)
    from .tpu_rl_policies import POLICIES, servicer
else:  # run as a file from the pack's folder, as the workflow runs it (and the CLI runs __main__.py)
    from tpu_rl_policies import POLICIES, servicer  # type: ignore[no-redef]

PACK = Path(__file__).resolve().parent
PROJECT = "tpu-rl"
STACK_NAME = re.compile(r"[A-Za-z0-9_.-]+")

SIG_KEY = "4dabf18193072939515e22adb298388d"
"""``sdk/go/common/resource/sig/sig.go`` ``Key``: an object with this key is a typed value."""
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
RESOURCE_REFERENCE_SIG = "5cf8f73096256a8f31e491e813e4eb8e"
ASSET_SIG = "c44067f5952c0a294b673a41bacd8c17"
ARCHIVE_SIG = "0def7320c3a5731c473e5ecbe6d01bc7"
FLOAT_SIG = "8ad145fe-0d11-4827-bfd7-1abcbf086f5c"
"""``deployment.go`` ``floatSignature``: a NaN or an infinity, its bits in hexadecimal."""
SECRET = "[secret]"
"""``json.go`` ``massagePropertyValue``: every secret value, without ``--show-secrets``."""
UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
"""``deployment.go`` ``computedValuePlaceholder``, the same text as ``rpc.go`` ``UnknownStringValue``."""

IN_STACK = ("same", "create", "update", "replace", "create-replacement", "import", "import-replacement")
"""Steps whose new state is in the stack after the deployment (``step_executor.go``: ``news``)."""
NOT_IN_STACK = (
    "delete",
    "delete-replaced",
    "read",
    "read-replacement",
    "refresh",
    "discard",
    "discard-replaced",
    "remove-pending-replace",
)
"""Steps the pack does not judge: a deletion, a read (``reads``, not ``news``), a refresh (its resource has its own
step)."""

LEVELS = {
    analyzer_pb2.ADVISORY: "advisory",
    analyzer_pb2.MANDATORY: "mandatory",
    analyzer_pb2.REMEDIATE: "mandatory",  # analyze_snapshot.go analyzeResource; AnalyzeResources
    analyzer_pb2.DISABLED: "disabled",
}
WIRE_LEVELS = {
    "advisory": analyzer_pb2.ADVISORY,
    "mandatory": analyzer_pb2.MANDATORY,
    "remediate": analyzer_pb2.REMEDIATE,
    "disabled": analyzer_pb2.DISABLED,
}
CANT_RUN = "can't run policy '"
"""How pulumi-policy words the advisory of a policy that read a value not known at a preview."""


@dataclass(frozen=True)
class Resource:
    """One resource as the engine hands it to the pack: what ``Analyze`` reads (``inputs``) and what
    ``AnalyzeStack`` reads (``outputs``), as wire values."""

    op: str
    urn: str
    type: str
    name: str
    parent: str
    protect: bool
    inputs: struct_pb2.Struct
    outputs: struct_pb2.Struct


@dataclass(frozen=True)
class Secret:
    """A value the program made secret (``pulumi.Output.secret``): the engine sends it sig-wrapped, its value with it
    (KeepSecrets); the digest's ``[secret]`` is one whose value is unknown."""

    value: Any


@dataclass(frozen=True)
class Finding:
    """One diagnostic of the pack, as the engine reports it (``findings``): the policy's own words, without the
    description pulumi-policy puts before them."""

    policy: str
    level: str
    message: str
    urn: str
    unjudged: bool = False
    """pulumi-policy's "can't run policy ... during preview": the policy read a value not known yet."""

    def line(self) -> str:
        where = _shown(self.urn) if self.urn else "the stack"
        text = " ".join(self.message.split())
        return f"{self.level}: {self.policy}: {where}: {text}"


def _shown(urn: str) -> str:
    """A URN as ``<type>::<name>`` (its parents' types left out)."""
    parts = urn.split("::", 3)
    return f"{parts[2].rsplit('$', 1)[-1]}::{parts[3]}" if len(parts) == 4 else urn


@dataclass(frozen=True)
class Verdict:
    stack: str
    resources: list[Resource]
    steps: list[tuple[str, str]]
    """(op, URN) of every step of the digest, in its order."""
    findings: list[Finding]

    @property
    def mandatory(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "mandatory"]


# ---------------------------------------------------------------------------------------------
# The digest, read as data


def _value(value: Any, path: str, errors: list[str], digest: bool) -> struct_pb2.Value:
    """A property value as ``rpc.go`` ``MarshalPropertyValue`` (KeepUnknowns, KeepSecrets) sends it to the pack: every
    number a double, a secret ``{SIG_KEY: SECRET_SIG, "value": v}``, an unknown the sentinel string. ``digest``: a
    value of the preview digest, where ``[secret]`` is a secret of unknown value and an object with ``SIG_KEY`` a
    typed value (``_signed``); otherwise a value as the program registered it (a ``Secret``, an SDK ``Unknown``)."""
    out = struct_pb2.Value()
    if isinstance(value, str):
        if digest and value == SECRET:
            return _value(Secret(UNKNOWN), path, errors, False)
        out.string_value = value  # the unknown placeholder is the engine's unknown sentinel as it is
    elif isinstance(value, Secret):
        out.struct_value.fields[SIG_KEY].string_value = SECRET_SIG
        out.struct_value.fields["value"].CopyFrom(_value(value.value, path, errors, digest))
    elif isinstance(value, Unknown):
        out.string_value = UNKNOWN
    elif value is None:
        out.null_value = struct_pb2.NULL_VALUE
    elif isinstance(value, bool):
        out.bool_value = value
    elif isinstance(value, (int, float)):
        out.number_value = float(value)
    elif isinstance(value, Mapping):
        if digest and SIG_KEY in value:
            return _signed(value, path, errors)
        out.struct_value.CopyFrom(_struct(value, path, errors, digest))
    elif isinstance(value, Sequence):
        out.list_value.values.extend(_value(v, f"{path}[{i}]", errors, digest) for i, v in enumerate(value))
    else:
        errors.append(f"{path}: the engine sends no {type(value).__name__}")
    return out


def _signed(value: Mapping[str, Any], path: str, errors: list[str]) -> struct_pb2.Value:
    """A typed value of ``SerializePropertyValue`` as the engine sends it: a secret (its value unknown: the digest
    holds none), a resource reference (its ID, unknown without one: ``rpc.go`` without KeepResources), an asset or
    archive (its own signed object), a NaN or an infinity (a double)."""
    out = struct_pb2.Value()
    sig = value[SIG_KEY]
    if sig == SECRET_SIG:
        return _value(Secret(UNKNOWN), path, errors, False)
    if sig == RESOURCE_REFERENCE_SIG:
        ref_id = value.get("id")
        out.string_value = ref_id if isinstance(ref_id, str) and ref_id else UNKNOWN
    elif sig in (ASSET_SIG, ARCHIVE_SIG):
        out.struct_value.CopyFrom(_struct(value, path, errors, True))
    elif sig == FLOAT_SIG and isinstance(value.get("value"), str) and re.fullmatch(r"[0-9a-f]{16}", value["value"]):
        out.number_value = struct.unpack(">d", bytes.fromhex(value["value"]))[0]
    else:
        errors.append(f"{path}: a signed value the engine does not write ({str(sig)[:40]})")
    return out


def _struct(
    props: Mapping[str, Any], path: str, errors: list[str], digest: bool, *, top: bool = False
) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    for key, value in props.items():
        if top and str(key).startswith("__"):
            continue  # SkipInternalKeys: the top level only
        out.fields[str(key)].CopyFrom(_value(value, f"{path}.{key}", errors, digest))
    return out


def properties(props: Mapping[str, Any]) -> struct_pb2.Struct:
    """A resource's properties as the program registered them, as ``analyzer_plugin.go`` ``Analyze`` sends them
    (``MarshalProperties``: KeepUnknowns, KeepSecrets, SkipInternalKeys); ``TypeError`` on a value no engine holds."""
    errors: list[str] = []
    out = _struct(props, "", errors, False, top=True)
    if errors:
        raise TypeError("; ".join(errors))
    return out


def _urn_parts(urn: Any, stack: str) -> tuple[str, str] | None:
    """(type, name) of a URN of this stack and project (``urn:pulumi:<stack>::<project>::<type>::<name>``)."""
    if not isinstance(urn, str):
        return None
    parts = urn.split("::", 3)
    if len(parts) != 4 or parts[0] != f"urn:pulumi:{stack}" or parts[1] != PROJECT or not parts[3]:
        return None
    return parts[2].rsplit("$", 1)[-1], parts[3]


def _state(step: Mapping[str, Any], key: str, where: str, errors: list[str]) -> Mapping[str, Any] | None:
    state = step.get(key)
    if not isinstance(state, dict):
        errors.append(f"{where}: no {key}")
        return None
    for field in ("inputs", "outputs"):
        if not isinstance(state.get(field, {}), dict):
            errors.append(f"{where}: {key}.{field} is not an object")
            return None
    return state


def read_digest(digest: Any, stack: str) -> tuple[list[Resource], list[tuple[str, str]]]:
    """The resources the pack judges, and every step (op, URN), from a ``PreviewDigest``; raises ``BadInputError``
    with every complaint."""
    if not isinstance(digest, dict):
        raise BadInputError("the preview digest is not a JSON object (the digest of a preview in JSON is one)")
    steps = digest.get("steps")
    if not isinstance(steps, list) or not steps:
        raise BadInputError("the preview digest has no steps (a preview writes its stack's step at least)")
    errors: list[str] = []
    shown: list[tuple[str, str]] = []
    judged: dict[str, Resource] = {}
    for i, step in enumerate(steps):
        where = f"steps[{i}]"
        if not isinstance(step, dict):
            errors.append(f"{where}: not an object")
            continue
        op, urn = step.get("op"), step.get("urn")
        parts = _urn_parts(urn, stack)
        if parts is None or not isinstance(urn, str):
            errors.append(f"{where}: urn {str(urn)[:120]!r} is not a URN of stack {stack} of {PROJECT}")
            continue
        where = f"{where} ({parts[1]})"
        if op in NOT_IN_STACK:
            shown.append((str(op), urn))
            continue
        if not isinstance(op, str) or op not in IN_STACK:
            errors.append(f"{where}: op {str(op)[:40]!r} is not a step the engine takes")
            continue
        shown.append((op, urn))
        new = _state(step, "newState", where, errors)
        old = _state(step, "oldState", where, errors) if op == "same" else new
        if new is None or old is None:
            continue
        if new.get("urn", urn) != urn or not isinstance(new.get("type"), str):
            errors.append(f"{where}: newState is not the state of {parts[1]} (its urn or type)")
            continue
        count = len(errors)
        inputs = _struct(new.get("inputs", {}), f"{where}.inputs", errors, True, top=True)
        outputs = _struct(
            old.get("outputs" if op == "same" else "inputs", {}), f"{where}.outputs", errors, True, top=True
        )
        if len(errors) > count:
            continue
        parent = new.get("parent", "")
        judged[urn] = Resource(
            op,
            urn,
            new["type"],
            parts[1],
            parent if isinstance(parent, str) else "",
            new.get("protect") is True,
            inputs,
            outputs,
        )
    if errors:
        shown_errors = "; ".join(errors[:20]) + (f"; and {len(errors) - 20} more" if len(errors) > 20 else "")
        raise BadInputError(f"the preview digest cannot be judged: {shown_errors}")
    return list(judged.values()), shown


# ---------------------------------------------------------------------------------------------
# The policy config, as the engine reconciles it


_SCHEMA_TYPES: dict[str, Any] = {
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
    "boolean": lambda v: isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def _schema_errors(value: Any, schema: Mapping[str, Any], path: str) -> list[str]:
    """JSON Schema's ``type``, ``items``, ``minLength`` and ``pattern`` (searched, as JSON Schema's is unanchored), the
    keywords the pack's schemas use; any other is refused."""
    other = set(schema) - {"type", "items", "default", "description", "minLength", "pattern"}
    if other:
        return [f"{path}: the judge does not read the schema keywords {sorted(other)}"]
    kind = schema.get("type")
    if kind is not None and (kind not in _SCHEMA_TYPES or not _SCHEMA_TYPES[kind](value)):
        return [f"{path}: {json.dumps(value)[:60]} is not of type {kind}"]
    if isinstance(value, str) and len(value) < schema.get("minLength", 0):
        return [f"{path}: {json.dumps(value)[:60]} is shorter than {schema['minLength']}"]
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        return [f"{path}: {json.dumps(value)[:60]} does not match {schema['pattern']}"]
    items = schema.get("items")
    if isinstance(items, dict) and isinstance(value, list):
        return [e for i, v in enumerate(value) for e in _schema_errors(v, items, f"{path}[{i}]")]
    return []


def reconciled(policies: Sequence[Any], config: Any) -> dict[str, tuple[str, dict[str, Any]]]:
    """``ReconcilePolicyPackConfig``: each policy's level and properties (its schema's defaults, then ``all``'s
    level, then its own entry), checked against its schema; raises ``BadInputError`` with every complaint."""
    if not isinstance(config, dict):
        raise BadInputError("the policy config is not a JSON object")
    result: dict[str, tuple[str, dict[str, Any]]] = {}
    for policy in policies:
        schema = policy.config_schema
        defaults = {k: v["default"] for k, v in (schema.properties if schema else {}).items() if "default" in v}
        result[policy.name] = (policy.enforcement_level.value if policy.enforcement_level else "advisory", defaults)
    entries = dict(config)
    all_level = entries.pop("all", None)
    if isinstance(all_level, str):
        result = {name: (all_level, props) for name, (_, props) in result.items()}
    errors = []
    for name, entry in entries.items():
        if name not in result:
            errors.append(f"{name}: no policy of the pack has this name")
            continue
        level, props = result[name]
        if isinstance(entry, str):
            level = entry
        elif isinstance(entry, dict):
            entry = dict(entry)
            level = entry.pop("enforcementLevel", level)
            props = {**props, **entry}
        else:
            errors.append(f"{name}: neither a level nor an object")
            continue
        result[name] = (level, props)
    for policy in policies:
        level, props = result[policy.name]
        if level not in WIRE_LEVELS:
            errors.append(f"{policy.name}: level {level!r} is not one of {', '.join(WIRE_LEVELS)}")
        schema = policy.config_schema
        properties = dict(schema.properties) if schema else {}
        for key, value in props.items():
            if key in properties:
                errors += _schema_errors(value, properties[key], f"{policy.name}.{key}")
        required = (schema.required or []) if schema else []
        errors += [f"{policy.name}: {key} is required" for key in required if key not in props]
    if errors:
        raise BadInputError(f"the policy config cannot be used: {'; '.join(errors)}")
    return result


def configure_request(levels: Mapping[str, tuple[str, Mapping[str, Any]]]) -> Any:
    """``analyzer.Configure``'s request: each policy's level, its properties as ``structpb.NewStruct`` makes them
    (present even when empty, as the engine sends them)."""
    request = analyzer_pb2.ConfigureAnalyzerRequest()
    for name, (level, props) in levels.items():
        entry = request.policyConfig[name]
        entry.enforcementLevel = WIRE_LEVELS[level]
        entry.properties.CopyFrom(struct_pb2.Struct())
        entry.properties.update(json.loads(json.dumps(props)))
    return request


# ---------------------------------------------------------------------------------------------
# The judgement


def wire(message: Any) -> Any:
    """A request as it crosses the wire (serialised and parsed again)."""
    return type(message).FromString(message.SerializeToString())


def options(protect: bool, parent: str, delete_before_replace: bool | None = None) -> Any:
    """``analyzer_plugin.go`` ``marshalResourceOptions``: ``deleteBeforeReplace`` defined only when the program set it
    (the digest holds it not), ``customTimeouts`` always present."""
    timeouts, dbr = analyzer_pb2.AnalyzerResourceOptions.CustomTimeouts(), delete_before_replace
    return analyzer_pb2.AnalyzerResourceOptions(
        protect=protect, deleteBeforeReplace=bool(dbr), deleteBeforeReplaceDefined=dbr is not None,
        customTimeouts=timeouts, parent=parent,
    )  # fmt: skip


def findings(
    response: Any, descriptions: Mapping[str, str], urn: str = "", stack: Set[str] = frozenset()
) -> list[Finding]:
    """The diagnostics of a response as the engine reports them: a remediate one mandatory, each of an ``Analyze`` on
    the analysed resource's ``urn`` (``analyze_snapshot.go`` ``analyzeResource``: ``OnPolicyViolation(r.URN, d)``),
    each of an ``AnalyzeStack`` on the URN the policy gives if it is one of the ``stack``'s resources, else on the
    stack, here no URN (``step_generator.go`` ``AnalyzeResources``, ``resolveStackPolicyViolationURN``)."""
    response = analyzer_pb2.AnalyzeResponse.FromString(response.SerializeToString())
    found = []
    for d in response.diagnostics:
        message = d.message.removeprefix(descriptions.get(d.policyName, "") + "\n")
        level, unjudged = LEVELS[d.enforcementLevel], d.message.startswith(CANT_RUN)
        found.append(Finding(d.policyName, level, message, urn or (d.urn if d.urn in stack else ""), unjudged))
    return found


def stack_settings(text: str) -> tuple[dict[str, str], list[str]]:
    """A stack file's configuration as ``ConfigureStack`` sends it (``analyzer_plugin.go`` ``NewPolicyAnalyzer``):
    key -> text, an object's value as its JSON; and the keys it marks secret (``secure:`` values), whose values the
    judge never holds (the pack drops a secret key's value: ``resources.Deployment``). Raises ``BadInputError``."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise BadInputError(f"the stack file is not YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(document, dict | None):
        raise BadInputError("the stack file is not a mapping (pulumi config set writes one)")
    config = (document or {}).get("config")
    if not isinstance(config, dict | None):
        raise BadInputError("the stack file's config is not a mapping (pulumi config set writes one)")
    settings: dict[str, str] = {}
    secret: list[str] = []
    for key, value in (config or {}).items():
        if isinstance(value, dict) and set(value) == {"secure"}:
            secret.append(str(key))
        else:
            settings[str(key)] = value if isinstance(value, str) else json.dumps(value)
    return settings, secret


def judge(digest: Any, stack: str, config: Any, policies: Sequence[Any] | None = None, stack_file: str = "") -> Verdict:
    """The pack's findings on a preview digest, as one ``pulumi preview --policy-pack`` of the same resources would
    have them: ``Analyze`` on each resource's inputs, then ``AnalyzeStack`` on the stack, the stack file's
    configuration sent as the engine sends it; raises ``BadInputError``."""
    policies = list(POLICIES if policies is None else policies)
    levels = reconciled(policies, config)
    settings, secret = stack_settings(stack_file)
    resources, steps = read_digest(digest, stack)
    analyzer = servicer(policies)
    configure = analyzer_pb2.AnalyzerStackConfigureRequest(
        stack=stack, project=PROJECT, dry_run=True, config=settings, config_secret_keys=secret
    )
    analyzer.ConfigureStack(wire(configure), None)
    analyzer.Configure(wire(configure_request(levels)), None)
    descriptions = {p.name: p.description for p in policies}
    found: list[Finding] = []
    for r in resources:
        request = analyzer_pb2.AnalyzeRequest(type=r.type, properties=r.inputs, urn=r.urn, name=r.name)
        request.options.CopyFrom(options(r.protect, r.parent))
        found += findings(analyzer.Analyze(wire(request), None), descriptions, r.urn)
    stack_request = analyzer_pb2.AnalyzeStackRequest()
    for r in resources:
        entry = stack_request.resources.add(type=r.type, properties=r.outputs, urn=r.urn, name=r.name, parent=r.parent)
        entry.options.CopyFrom(options(r.protect, r.parent))
    found += findings(analyzer.AnalyzeStack(wire(stack_request), None), descriptions, stack={r.urn for r in resources})
    return Verdict(stack, resources, steps, found)


# ---------------------------------------------------------------------------------------------
# What it says


def _fenced(lines: Sequence[str]) -> list[str]:
    """A code block no line of the program's can close (names are the program's)."""
    longest = max((len(run) for line in lines for run in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, *lines, fence]


def summary(verdict: Verdict, limit: int = 50_000) -> str:
    """The verdict, the preview's steps and the findings, in Markdown (no value of a resource: names and types)."""
    mandatory = len(verdict.mandatory)
    counts = Counter(op for op, _ in verdict.steps)
    lines = [
        f"**Verdict of the base branch's pack on the {verdict.stack} preview: "
        + (f"{mandatory} mandatory finding{'s' * (mandatory != 1)}**" if mandatory else "no mandatory finding**"),
        "",
        f"{len(verdict.findings)} finding{'s' * (len(verdict.findings) != 1)} on {len(verdict.resources)} resources; "
        "steps: " + ", ".join(f"{op} {n}" for op, n in sorted(counts.items())),
        "",
    ]
    if verdict.findings:
        ordered = sorted(verdict.findings, key=lambda f: (f.level != "mandatory", f.policy))
        lines += ["Findings:", "", *_fenced([f.line() for f in ordered]), ""]
    steps = [f"{op:<20} {_shown(urn)}" for op, urn in verdict.steps if op != "same"]
    lines += [f"Steps other than `same` ({len(steps)}):", "", *_fenced(steps or ["(none)"])]
    text = "\n".join(lines) + "\n"
    return text if len(text) <= limit else text[:limit] + "\n\n(cut: the job's log has every finding)\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Judge a preview's JSON digest with this policy pack.")
    parser.add_argument("stack")
    parser.add_argument("digest", type=Path)
    parser.add_argument("--stack-file", type=Path, help="the base's stack file (the stack's own configuration)")
    parser.add_argument("--summary", type=Path, help="write the verdict in Markdown here, for the comment")
    args = parser.parse_args(argv)
    try:
        if not STACK_NAME.fullmatch(args.stack):
            raise BadInputError(f"the stack name {args.stack!r} is not a plain name")
        config_path = PACK / "config" / f"{args.stack}.json"
        try:
            config = json.loads(config_path.read_text())
        except (OSError, ValueError) as err:
            raise BadInputError(f"{config_path}: {err}") from None
        try:
            digest = json.loads(args.digest.read_bytes())
        except OSError as err:
            raise BadInputError(f"{args.digest}: cannot read the preview digest ({err.strerror})") from None
        except (ValueError, RecursionError) as err:
            raise BadInputError(f"{args.digest}: not JSON the judge reads ({err}); no whole digest") from None
        try:
            stack_file = args.stack_file.read_text() if args.stack_file else ""
        except (OSError, UnicodeDecodeError) as err:
            raise BadInputError(f"{args.stack_file}: cannot read the stack file ({err})") from None
        try:
            verdict = judge(digest, args.stack, config, stack_file=stack_file)
        except (RecursionError, protobuf_message.Error) as err:
            raise BadInputError(f"{args.digest}: a value nested deeper than the pack reads ({err})") from None
    except BadInputError as err:
        print(f"error: {err}", file=sys.stderr)
        if args.summary is not None:
            args.summary.write_text(f"**No verdict on the {args.stack} preview**: {err}\n")
        return BAD_INPUT
    for finding in verdict.findings:
        print(finding.line())
    mandatory = len(verdict.mandatory)
    print(
        f"{args.stack}: {len(verdict.resources)} resources judged by the pack at {PACK}: {mandatory} mandatory, "
        f"{len(verdict.findings) - mandatory} other findings"
    )
    if args.summary is not None:
        args.summary.write_text(summary(verdict))
    return 1 if mandatory else 0


if __name__ == "__main__":
    sys.exit(main())
