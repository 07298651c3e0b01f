"""The policy pack as the engine runs it: pulumi-policy's own analyzer (the gRPC servicer ``pulumi policy`` starts,
``pulumi_policy.policy._PolicyAnalyzerServicer``, as ``policy/__main__.py`` builds it) fed the protobuf requests the
engine sends, configured from a policy config file as the engine reads it. The requests and the findings are the PR
preview judge's (``policy/judge_preview.py``: ``properties``, ``options``, ``reconciled``, ``configure_request``,
``findings``, each citing the engine's code), made here from what the program registered (a ``Secret`` with its
value, an SDK ``Unknown``) rather than from a preview's digest, and remembered across the tests.

When the engine sends them (pulumi/pulumi HEAD 1b59498, unchanged since v3.259.0): ``analyzer.ConfigureStack`` with
``dry_run`` (since pulumi 3.19x, #20565), then ``pkg/resource/deploy/step_generator.go`` ``analyzeAll``: ``Analyze``
on a resource's checked inputs before its step, in a preview as in an update; ``AnalyzeResources``: ``AnalyzeStack``
on every resource's *outputs* (``v.Outputs``), which ``deployment_executor.go`` calls only after every step succeeded.

What the pack does with it (pulumi-policy v1.21.0, the lock's): ``_PolicyAnalyzerServicer.Analyze`` /
``AnalyzeStack`` turn each Struct into a dict with ``json_format.MessageToDict`` (every number a float: ``1.0``),
unwrap secrets (``deserialize_properties``) and wrap the dict in ``unknown_checking_proxy``; a policy that raises
``UnknownValueError`` becomes an *advisory* "can't run policy ... during preview" diagnostic.

A provider's Check is taken as the identity: pulumi-kubernetes ``Check`` normalises a Secret's ``stringData`` into
``data`` and adds nothing a policy reads (``provider.go`` ``Check``, ``normalizeInputs``, ``annotateSecrets``);
pulumi-terraform-bridge returns the inputs with defaults the policies do not read.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import os
import pickle
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi_policy.policy
from google.protobuf import json_format, struct_pb2
from pulumi.runtime.proto import analyzer_pb2
from pulumi_policy import Policy
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.proxy import unknown_checking_proxy

from policy.judge_preview import Finding, Secret, configure_request, findings, options, properties, reconciled, wire
from tests.fake_kube import with_state
from tests.frozen import caching, freeze
from tests.k8s_validation import jobset_defaults
from tests.pure_plan import remembering
from tools.plan.offline import SECRET_SIG, SECRET_SIG_KEY, Plan
from tools.stack_files import ROOT

JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"

_FROZEN: dict[int, list[Any]] = {}
"""Values no test changes, by identity: [the value (held, so that no other object takes its id), its pickle once
made or None, what the engine reads of it as it crossed the wire (``_from_wire``) once made or None]."""
_FROZEN_PLANS: dict[int, tuple[Plan, Plan]] = {}
"""A plan given to ``frozen`` (held, by identity) and its frozen copy; a frozen copy maps to itself."""


def frozen(plan: Plan) -> Plan:
    """``plan`` frozen (``tests.frozen.freeze``: a plan the tests share, cached once per process, which a test copies
    before it changes anything; one that changes it in place fails at once), its resources' inputs (and what the
    program sent of them) noted as never changed, so that each is pickled once (``_content``) and read off the wire
    once (``inputs``), not once per judgement (a stack's pickles, and the hash of a 600 kB key, were a tenth of the
    pack's tests)."""
    found = _FROZEN_PLANS.get(id(plan))
    if found is not None and found[0] is plan:
        return found[1]
    shared = freeze(plan)
    for r in shared.resources:
        _freeze(r["inputs"])
    for sent in shared.wire.values():
        for value in sent:
            _freeze(value)
    _FROZEN_PLANS[id(plan)], _FROZEN_PLANS[id(shared)] = (plan, shared), (shared, shared)
    return shared


def _freeze(value: Any) -> None:
    if _FROZEN.get(id(value), (None,))[0] is not value:
        if len(_FROZEN) >= 50_000:
            _FROZEN.clear()  # bounded: a cache, not a record (a plan noted before is noted again)
            _FROZEN_PLANS.clear()
        _FROZEN[id(value)] = [value, None, None]


def _content(value: Any) -> bytes:
    """The pickle of ``value``, its content as a key (made once for a value ``frozen`` holds)."""
    entry = _FROZEN.get(id(value))
    if entry is None or entry[0] is not value:
        return pickle.dumps(value, protocol=5)
    if entry[1] is None:
        entry[1] = pickle.dumps(value, protocol=5)
    return entry[1]


def _read(sent: Any) -> Any:
    """``_from_wire(sent)`` (made once for a value ``frozen`` holds, and itself noted as never changed)."""
    entry = _FROZEN.get(id(sent))
    if entry is None or entry[0] is not sent:
        return _from_wire(sent)
    if entry[2] is None:
        entry[2] = freeze(_from_wire(sent))
        _freeze(entry[2])
    return entry[2]


_MARSHALLED: dict[bytes, bytes] = {}


def marshalled(props: Mapping[str, Any]) -> bytes:
    """``properties(props)``, serialised; remembered by the value's pickle (which tells apart every value ``properties``
    marshals differently: ``True``, ``1`` and ``1.0``, ``'1'``, by type and content; a ``Secret`` by its value; every
    ``Unknown`` pickles, and marshals, the same), so a resource the tests judge in many plans is marshalled once. A
    pickle is some ten times cheaper than a ``repr`` of the same properties; a value that cannot be pickled is
    marshalled afresh each time. A value ``frozen`` holds is pickled once."""
    try:
        key = _content(props)
    except (pickle.PicklingError, TypeError, AttributeError):
        return properties(props).SerializeToString()
    found = _MARSHALLED.get(key)
    if found is None:
        found = properties(props).SerializeToString()
        if len(_MARSHALLED) >= 20_000:
            _MARSHALLED.clear()  # bounded: a cache, not a record
        _MARSHALLED[key] = found
    return found


# ---------------------------------------------------------------------------------------------
# What the servicer makes of a resource's properties, remembered


class _Sent:
    """A resource's properties on their way through what pulumi-policy's servicer makes of them before a policy reads
    them (``Analyze``, ``AnalyzeStack``: ``unknown_checking_proxy(deserialize_properties(MessageToDict(properties)))``),
    with their bytes."""

    __slots__ = ("key", "message")

    def __init__(self, key: bytes, message: struct_pb2.Struct) -> None:
        self.key = key
        self.message = message

    def made(self) -> Any:
        """What the servicer makes of the properties, by pulumi-policy's own functions."""
        return unknown_checking_proxy(deserialize_properties(json_format.MessageToDict(self.message)))


_PROXIES: dict[bytes, Any] = {}
"""What the servicer made of each resource's properties (read-only proxies), by the properties' bytes."""


class _JsonFormat:
    """``json_format`` as ``pulumi_policy.policy`` reads it while the tests' servicer answers: ``MessageToDict`` of a
    Struct hands on the Struct with its bytes (``_Sent``), which ``_deserialized`` passes on and ``_proxied`` makes
    into the proxy (remembered); anything else is ``json_format``'s own."""

    def __getattr__(self, name: str) -> Any:
        return getattr(json_format, name)

    @staticmethod
    def MessageToDict(message: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N802 (json_format's name)
        if args or kwargs or not isinstance(message, struct_pb2.Struct):
            return json_format.MessageToDict(message, *args, **kwargs)
        known = _KNOWN.get(id(message))
        if known is not None and known[0] is message:
            return _Sent(known[1], message)
        return _Sent(message.SerializeToString(deterministic=True), message)


_KNOWN: dict[int, tuple[Any, bytes]] = {}
"""While the tests' analyzer asks (``Pack._answer``): the request's properties, by identity (protobuf hands the same
object for a field while it lives, and this holds it), with the bytes they were parsed from: their key, without
serialising them again. (Any bytes are the key of the one value they parse to.)"""


def _deserialized(props: Any, proxy_secrets: bool = False) -> Any:
    if not isinstance(props, _Sent):
        return deserialize_properties(props, proxy_secrets)
    if proxy_secrets:
        return deserialize_properties(json_format.MessageToDict(props.message), proxy_secrets)
    return props


def _proxied(props: Any) -> Any:
    if not isinstance(props, _Sent):
        return unknown_checking_proxy(props)
    found = _PROXIES.get(props.key) if remembering() else None
    if found is None:
        found = props.made()
        if len(_PROXIES) >= 20_000:
            _PROXIES.clear()  # bounded: a cache, not a record
        _PROXIES[props.key] = found
    return found


def _remembering(method: Any) -> Any:
    """``method`` (the servicer's ``Analyze`` or ``AnalyzeStack``) with the functions it makes properties into a proxy
    by (``pulumi_policy.policy``'s names) those that remember what they made, while it runs."""

    @functools.wraps(method)
    def answer(self: Any, request: Any, context: Any) -> Any:
        module: Any = pulumi_policy.policy
        saved = module.json_format, module.deserialize_properties, module.unknown_checking_proxy
        module.json_format, module.deserialize_properties, module.unknown_checking_proxy = (
            _JsonFormat(),
            _deserialized,
            _proxied,
        )
        try:
            return method(self, request, context)
        finally:
            module.json_format, module.deserialize_properties, module.unknown_checking_proxy = saved

    return answer


@contextlib.contextmanager
def conversions_remembered() -> Iterator[None]:
    """While it lasts, pulumi-policy's servicer (``Analyze``, ``AnalyzeStack``) makes each distinct resource's
    properties into what its policies read once per process, by its own functions (``MessageToDict``,
    ``deserialize_properties``, ``unknown_checking_proxy``: a function of the properties' bytes alone), and hands the
    same read-only proxy to every request that sends them again: the tests send a stack's resources unchanged in
    hundreds of requests, and making them was a quarter of the pack's tests. The pack reads the proxies and writes
    nothing (``properties.plain`` copies what it reads). Its other methods (``Configure``) are its own."""
    servicer: Any = pulumi_policy.policy._PolicyAnalyzerServicer
    saved = servicer.Analyze, servicer.AnalyzeStack
    servicer.Analyze, servicer.AnalyzeStack = _remembering(saved[0]), _remembering(saved[1])
    try:
        yield
    finally:
        servicer.Analyze, servicer.AnalyzeStack = saved


# ---------------------------------------------------------------------------------------------
# The policy config, as the engine reads the file and sends it


def policy_config_file(stack: str) -> dict[str, Any]:
    return json.loads(_config_text(stack))


@functools.cache
def _config_text(stack: str) -> str:
    """The stack's policy config file, read once per process (the tests write none)."""
    return (ROOT / "policy" / "config" / f"{stack}.json").read_text()


def _read_stack_file_config(stack: str) -> dict[str, Any]:
    import yaml

    return dict((yaml.safe_load((ROOT / f"Pulumi.{stack}.yaml").read_text()) or {}).get("config") or {})


@functools.cache
def _stack_file_config(stack: str) -> dict[str, Any]:
    """``Pulumi.<stack>.yaml``'s ``config``, parsed once per process (the tests write no stack file of the project;
    PyYAML's pure-Python parse of a commented stack file took a tenth of the policy tests' time)."""
    return freeze(_read_stack_file_config(stack))


def engine_config(stack: str, *overrides: str) -> dict[str, str]:
    """The stack's configuration as ``ConfigureStack`` sends it (``NewPolicyAnalyzer``: key -> text, an object's value
    as its JSON): ``Pulumi.<stack>.yaml``'s ``config`` with ``--path`` overrides (``key.field=value``)."""
    config = copy.deepcopy(_stack_file_config(stack)) if caching() else _read_stack_file_config(stack)
    for override in overrides:
        path, _, value = override.partition("=")
        namespace, _, rest = path.partition(":")
        key, *fields = rest.split(".")
        if not fields:
            config[f"{namespace}:{key}"] = value
            continue
        node = config.setdefault(f"{namespace}:{key}", {})
        for name in fields[:-1]:
            node = node.setdefault(name, {})
        node[fields[-1]] = value
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}


# ---------------------------------------------------------------------------------------------
# The pack


@dataclass(slots=True)
class Resource:
    """What the engine holds of a resource: its type, name, URN, the properties it analyses and its options. (Not
    frozen: a frozen dataclass's ``__init__`` costs three times as much, and the tests make one per resource of each
    plan they judge; none changes one.)"""

    type: str
    name: str
    urn: str
    props: dict[str, Any]
    protect: bool = False
    delete_before_replace: bool | None = None
    """None: the program did not set it."""
    parent: str = ""


@dataclass(frozen=True, eq=False)
class _Setup:
    """What configures a pack as the engine sends it: ``ConfigureStack``'s request (``stack``) and ``Configure``'s
    (``policies``), serialised, and each policy's description. One object per distinct configuration (``_SETUPS``),
    compared by identity: the pack's part of the key of its answers."""

    stack: bytes
    policies: bytes
    descriptions: dict[str, str]


_SETUPS: dict[tuple[Any, ...], tuple[tuple[Policy, ...], _Setup]] = {}


def _configuration(
    policies: Sequence[Policy],
    config: Mapping[str, Any],
    dry_run: bool,
    stack: str,
    stack_config: Mapping[str, str],
    secret_keys: Sequence[str],
) -> _Setup:
    """The requests that configure a pack, made once per configuration (and mutant of a mutation run): the policies
    (held with it, so that no other object takes one's id), the policy config (by its pickle, which tells ``1`` from
    ``1.0`` and a list from a tuple, as the schema check does), the stack and its configuration. A config the schema
    does not take raises each time (``reconciled``). The config of a policy not among ``policies`` is left out:
    pulumi-policy's ``Configure`` keeps it and no policy reads it."""
    try:
        key: tuple[Any, ...] | None = (
            os.environ.get("MUTANT_UNDER_TEST", ""),
            tuple(id(p) for p in policies),
            pickle.dumps((config, dry_run, stack, stack_config, tuple(secret_keys)), protocol=5),
        )
    except (pickle.PicklingError, TypeError, AttributeError):
        key = None
    found = _SETUPS.get(key) if key is not None and remembering() else None
    if found is not None:
        return found[1]
    names = {p.name for p in policies} | {"all"}
    levels = reconciled(policies, {k: v for k, v in config.items() if k in names})
    request = analyzer_pb2.AnalyzerStackConfigureRequest(
        stack=stack,
        project="tpu-rl",
        dry_run=dry_run,
        config=dict(stack_config),
        config_secret_keys=list(secret_keys),
    )
    setup = _Setup(
        request.SerializeToString(deterministic=True),
        configure_request(levels).SerializeToString(deterministic=True),
        {p.name: p.description for p in policies},
    )
    if key is not None:
        if len(_SETUPS) >= 1_000:
            _SETUPS.clear()  # bounded: a cache, not a record
        _SETUPS[key] = (tuple(policies), setup)
    return setup


class Pack:
    """The pack's analyzer, configured as the engine configures it for one deployment."""

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        dry_run: bool = False,
        policies: Sequence[Policy] | None = None,
        stack: str = "dev",
        stack_config: Mapping[str, str] | None = None,
        secret_keys: Sequence[str] = (),
    ) -> None:
        pack = _pack_module()
        self.policies = list(pack.POLICIES if policies is None else policies)
        self.servicer = pack.servicer(self.policies)
        setup = _configuration(self.policies, config or {}, dry_run, stack, stack_config or {}, secret_keys)
        self._descriptions = setup.descriptions
        self.servicer.ConfigureStack(analyzer_pb2.AnalyzerStackConfigureRequest.FromString(setup.stack), None)
        self.servicer.Configure(analyzer_pb2.ConfigureAnalyzerRequest.FromString(setup.policies), None)
        self._setup = setup

    def analyze(self, resource: Resource) -> list[Finding]:
        props = marshalled(resource.props)
        key = (self._setup, "Analyze", resource.type, resource.urn, resource.name, props, _option_values(resource))
        found = _ANSWERS.get(key) if remembering() else None
        if found is None:
            request = analyzer_pb2.AnalyzeRequest(type=resource.type, urn=resource.urn, name=resource.name)
            request.properties.MergeFromString(props)
            request.options.CopyFrom(options(*_option_values(resource)))
            request = wire(request)
            found = self._answer(key, "Analyze", request, [(request.properties, props)], resource.urn)
        return list(found)

    def analyze_stack(self, resources: Iterable[Resource]) -> list[Finding]:
        entries = tuple((r.type, r.urn, r.name, r.parent, marshalled(r.props), _option_values(r)) for r in resources)
        key = (self._setup, "AnalyzeStack", entries)
        found = _ANSWERS.get(key) if remembering() else None
        if found is None:
            request = analyzer_pb2.AnalyzeStackRequest.FromString(b"".join(_stack_entry(entry) for entry in entries))
            sent = [(r.properties, entry[4]) for r, entry in zip(request.resources, entries, strict=True)]
            found = self._answer(key, "AnalyzeStack", request, sent, stack={entry[1] for entry in entries})
        return list(found)

    def _answer(
        self,
        key: tuple[Any, ...],
        method: str,
        request: Any,
        sent: list[tuple[Any, bytes]],
        urn: str = "",
        stack: frozenset[str] | set[str] = frozenset(),
    ) -> tuple[Finding, ...]:
        """The findings of the servicer's response to a request (its ``method``; parsed from the bytes the engine sends;
        ``findings``: on ``urn`` for an ``Analyze``, among the ``stack``'s URNs for an ``AnalyzeStack``), the request's
        conversions remembered (``conversions_remembered``; each resource's properties known by the bytes ``sent`` they
        were parsed from: ``_KNOWN``); the findings remembered by what makes the request (each resource's type, URN,
        name, marshalled properties and options: ``key``) and what configured the pack (the policies, the levels and
        config, the stack's, and a mutation run's mutant: ``_setup``), so that a resource the tests judge unchanged in
        many plans is analysed once per configuration, and a request answered before is not even built. The pack's
        policies are functions of the request and their configuration alone; a test that patches the pack's code builds
        its own policies (another key)."""
        _KNOWN.update((id(message), (message, props)) for message, props in sent)
        try:
            with conversions_remembered():
                answer = getattr(self.servicer, method)(request, None)
        finally:
            _KNOWN.clear()
        found = tuple(findings(answer, self._descriptions, urn, stack))
        if len(_ANSWERS) >= 50_000:
            _ANSWERS.clear()  # bounded: a cache, not a record
        _ANSWERS[key] = found
        return found


_ANSWERS: dict[tuple[Any, ...], tuple[Finding, ...]] = {}


_ENTRIES: dict[tuple[Any, ...], bytes] = {}


def _stack_entry(entry: tuple[str, str, str, str, bytes, tuple[bool, str, bool | None]]) -> bytes:
    """One resource of an ``AnalyzeStackRequest`` as it crosses the wire: its ``resources`` field (number 1, a
    message: tag ``0x0a``, the length as a varint, the ``AnalyzerResource``'s bytes), which a request's bytes are the
    resources' run of (``test_the_analyzers_stack_request_is_the_one_protobuf_serialises``); remembered by what makes
    it (a resource the tests judge unchanged in many plans is written once)."""
    found = _ENTRIES.get(entry)
    if found is None:
        type_, urn, name, parent, props, option_values = entry
        resource = analyzer_pb2.AnalyzerResource(type=type_, urn=urn, name=name, parent=parent)
        resource.properties.MergeFromString(props)
        resource.options.CopyFrom(options(*option_values))
        body = resource.SerializeToString(deterministic=True)
        size, length = len(body), bytearray()
        while size > 0x7F:
            length.append(size & 0x7F | 0x80)
            size >>= 7
        length.append(size)
        found = b"\x0a" + bytes(length) + body
        if len(_ENTRIES) >= 5_000:
            _ENTRIES.clear()  # bounded: a cache, not a record
        _ENTRIES[entry] = found
    return found


def _option_values(resource: Resource) -> tuple[bool, str, bool | None]:
    """What ``options`` sends of a resource."""
    return resource.protect, resource.parent, resource.delete_before_replace


def _pack_module() -> Any:
    import importlib

    return importlib.import_module("policy.tpu_rl_policies")


def pack_policy(name: str) -> Policy:
    """The pack's policy ``name``."""
    (policy,) = [p for p in _pack_module().POLICIES if p.name == name]
    return policy


def found_at_up(policy: Policy, resource: Resource) -> list[str]:
    """The message of each finding of ``policy`` alone on ``resource`` at `pulumi up`: every one mandatory, judged
    and on the resource asked about."""
    findings = Pack({"all": "mandatory"}, policies=[policy]).analyze(resource)
    assert all(f.level == "mandatory" and not f.unjudged and f.urn == resource.urn for f in findings), findings
    return [f.message for f in findings]


# ---------------------------------------------------------------------------------------------
# A plan, as the engine hands it to the pack at preview and at up


def _urn(plan: Plan, type_: str, name: str) -> str:
    return plan.urns.get(name) or f"urn:pulumi:{plan.stack}::tpu-rl::{type_}::{name}"


def _from_wire(value: Any) -> Any:
    """A value as ``json_format.MessageToDict`` read it off the wire, back to what ``properties`` marshals (an unknown
    sentinel stays a string: the engine sends the string)."""
    if isinstance(value, dict):
        if value.get(SECRET_SIG_KEY) == SECRET_SIG:
            return Secret(_from_wire(value.get("value")))
        return {k: _from_wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_wire(v) for v in value]
    return value


def inputs(plan: Plan, r: Mapping[str, Any]) -> dict[str, Any]:
    """A plan resource's inputs as the engine received them (the program's own Struct when the plan ran the program;
    the builders' plain dict otherwise). Not a copy of the builders' dict: the pack reads what ``properties`` marshals
    from it, so nothing writes it (copying every resource of every plan a test judges cost seconds)."""
    sent = plan.wire.get((r["type"], r["name"]))
    return _read(sent[0]) if sent is not None else r["inputs"]


def outputs(plan: Plan, r: Mapping[str, Any], *, preview: bool) -> dict[str, Any]:
    """What ``AnalyzeStack`` reads of a resource: its outputs. At preview a create returns its inputs and the engine
    marks what the provider computes unknown (the mocks' reply); at ``up`` the live object: a JobSet as the API server
    keeps it (the webhook's defaults, a status), anything else the provider's reply. Read only, as ``inputs``: a live
    JobSet is remembered by what it is made from (``_live_jobset``)."""
    sent = plan.wire.get((r["type"], r["name"]))
    live = _read(sent[1]) if sent is not None else r["inputs"]  # read only, as ``inputs``
    if not preview and r["type"] == JOBSET:
        return _live_jobset(r["name"], live)
    return live


_LIVE: dict[tuple[str, str, bytes], dict[str, Any]] = {}


def _live_jobset(name: str, sent: dict[str, Any]) -> dict[str, Any]:
    """A JobSet the program sent as the API server keeps it running: the webhook's defaults, a status, its uid and
    generation (a shape the API server would refuse stays what the program sent). Remembered by the name and the
    pickle of what was sent (two deep copies cost ten times a pickle; the tests judge a stack's JobSets unchanged in
    many plans); the caller reads it and writes nothing."""
    try:
        key: tuple[str, str, bytes] | None = (os.environ.get("MUTANT_UNDER_TEST", ""), name, _content(sent))
    except (pickle.PicklingError, TypeError, AttributeError):
        key = None
    found = _LIVE.get(key) if key is not None and remembering() else None
    if found is not None:
        return found
    live = sent
    try:
        live = with_state(jobset_defaults(sent), "running")  # each returns a copy
        live["metadata"] = {**live["metadata"], "uid": f"uid-{name}", "generation": 1}
    except (KeyError, TypeError, AttributeError, IndexError):
        pass  # a shape the API server would refuse: the pack judges what the program sent
    if key is not None:
        if len(_LIVE) >= 5_000:
            _LIVE.clear()  # bounded: a cache, not a record
        if live is not sent:
            live = freeze(live)  # the tests' own copy, which nothing changes
            _freeze(live)
        _LIVE[key] = live
    return live


def resources(plan: Plan, *, preview: bool, stack_view: bool) -> list[Resource]:
    out = []
    for r in plan.resources:
        props = outputs(plan, r, preview=preview) if stack_view else inputs(plan, r)
        o = r["options"]
        out.append(
            Resource(
                r["type"],
                r["name"],
                _urn(plan, r["type"], r["name"]),
                props,
                protect=bool(o.get("protect")),
                delete_before_replace=o.get("deleteBeforeReplace"),
                parent=_urn(plan, "", o["parent"]) if o.get("parent") else "",
            )
        )
    return out


def analyze_plan(plan: Plan, pack: Pack, *, preview: bool = False) -> list[Finding]:
    """Every finding of the pack on a plan: ``Analyze`` on each resource's inputs, then ``AnalyzeStack`` on the
    outputs, as one ``pulumi preview --policy-pack`` (``preview``) or ``pulumi up --policy-pack`` shows them."""
    found = []
    for resource in resources(plan, preview=preview, stack_view=False):
        found += pack.analyze(resource)
    found += pack.analyze_stack(resources(plan, preview=preview, stack_view=True))
    return found


def mandatory(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if f.level == "mandatory"]


__all__ = ["Finding", "Pack", "Resource", "Secret", "analyze_plan", "engine_config", "mandatory", "policy_config_file"]


def first_preview(stack: str, *overrides: str) -> Plan:
    """The first ``pulumi preview`` of an example stack, nothing created yet: what the program registers when every
    output a provider computes (ids, emails, endpoints, URLs) is unknown (``run_program``'s ``unknown_outputs``).
    Shared (frozen) and made once per process, unless the caches are off (``remembering``)."""
    return _first_preview(stack, *overrides) if remembering() else frozen(_preview(stack, *overrides))


@functools.lru_cache(maxsize=8)
def _first_preview(stack: str, *overrides: str) -> Plan:
    return frozen(_preview(stack, *overrides))


def _preview(stack: str, *overrides: str) -> Plan:
    from tests.conftest import SENTINEL_TOKEN
    from tools.plan import plan_stack

    plan, _ = plan_stack(
        ROOT / f"Pulumi.{stack}.yaml",
        list(overrides),
        stack=stack,
        preview=True,
        unknown_outputs=True,
        secrets={"tpu-rl:hfToken": SENTINEL_TOKEN},
    )
    return plan
