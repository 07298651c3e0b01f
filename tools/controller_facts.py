"""The facts of a JobSet or Kueue release's Go source that the stack's checks need, extracted when the release is
adopted (``tools/adopt_controller.py``), and the checks on them.

The repository holds no Go source: ``make controller`` reads the release's files at its tag, writes what is below
as ``tests/data/vendor/schemas/<name>-v<version>/facts.json`` (``core.controllers.facts_file``), and refuses the
release when a check fails; the tests run the same checks on every adopted release's facts, offline.

- ``keys``: the Go constants of the files that declare the controller's label and annotation keys whose value is
  such a key (``<prefix>/<name>``), each with its value and line, and for each way the stack relies on a key
  (``core.controllers.Use``) the file read and, per constant, where that file uses it so (line and the code
  matched): what ``key_problems`` checks ``core.controllers.RELIED_ON`` against.
- ``configuration`` (Kueue): the JSON fields of its ``Configuration`` (``apis/config/v1beta2/configuration_types.go``)
  as paths with their Go types, and the objects whose every field is listed (``closed``; ``""`` is the
  Configuration itself): what ``unknown_fields`` checks the stack's manager configuration against.
- ``frameworks`` (Kueue): the ``FrameworkName`` each integration's file declares (``FRAMEWORK_FILES``).
- ``strings``: for each file of the release ``core.controller_strings`` names, the line of each Go string literal the
  stack's rules match the words of (0: not in the file): what ``string_problems`` checks ``STRINGS`` against.
- JobSet: ``kubernetesApi``, the ``k8s.io/api`` its ``go.mod`` requires (the Kubernetes its webhook's lists come
  from); ``jobFailureReasons``, the constants of ``k8s.io/api`` its webhook accepts in ``onJobFailureReasons``
  (``validOnJobFailureReasons``); ``failurePolicy``, where it matches a failed Job's reason and message against a
  rule (``ruleIsApplicable``, ``anyMatchFound``): what ``jobset_problems`` checks the failure policy's rows against.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from core.controller_strings import KUBERNETES_MINORS, Source, checked_sources, job_failure_reasons, rows_of
from core.controllers import RELIED_ON, Controller, Use
from core.kueue_manager import FRAMEWORKS

CONFIGURATION_TYPES = "apis/config/v1beta2/configuration_types.go"
CONFIGURATION = "Configuration"
JOBSET_CONTROLLER = "pkg/controllers/jobset_controller.go"
KEY_SOURCES: dict[Controller, tuple[tuple[str, ...], dict[Use, tuple[str, str]]]] = {
    "jobset": (
        ("api/jobset/v1alpha2/jobset_types.go", "pkg/constants/constants.go"),
        {
            "pod label": (JOBSET_CONTROLLER, r"\blabels\[\w+\.(\w+)\][ \t]*="),
            "pod annotation": (JOBSET_CONTROLLER, r"\bannotations\[\w+\.(\w+)\][ \t]*="),
            "template annotation": (JOBSET_CONTROLLER, r"\.Template\.Annotations\[\w+\.(\w+)\]"),
        },
    ),
    "kueue": (
        ("pkg/controller/constants/constants.go",),
        {
            "object label": ("pkg/controller/jobframework/interface.go", r"\.GetLabels\(\)\[\w+\.(\w+)\]"),
            "workload label": ("pkg/controller/jobframework/reconciler.go", r"\bwl\.Labels\[\w+\.(\w+)\][ \t]*="),
        },
    ),
}
"""Where a release says the keys of ``core.controllers.RELIED_ON``: the files that declare them as Go constants, and
for each use the file and the code that uses a constant so (group 1: the constant's name). JobSet v0.10.1 and
v0.12.0 ``labelAndAnnotateObject`` puts its keys on each child Job and its pod template as labels and annotations
(``labels[jobset.JobIndexKey] = ...``; the restart count's, ``labels[constants.RestartsKey]``, is declared in
``pkg/constants/constants.go``) and copies the exclusive-topology annotation from a replicated Job's template
(``rjob.Template.Annotations[jobset.ExclusiveKey]``); Kueue v0.17.1 and v0.17.8 ``QueueNameForObject`` reads the
queue label (``object.GetLabels()[constants.QueueLabel]``) and its reconciler labels a Workload with its job's UID
(``wl.Labels[controllerconsts.JobUIDLabel] = ...``)."""
USES: dict[Use, str] = {
    "pod label": "put on the pods it makes as a label",
    "pod annotation": "put on the pods it makes as an annotation",
    "template annotation": "read from a replicated Job's template",
    "object label": "read from a job's labels",
    "workload label": "put on a Workload as a label",
}
FRAMEWORK_FILES = {
    "batch/job": "pkg/controller/jobs/job/job_controller.go",
    "jobset.x-k8s.io/jobset": "pkg/controller/jobs/jobset/jobset_controller.go",
}
"""Where Kueue names each integration the stack turns on (``core.kueue_manager.FRAMEWORKS``): ``FrameworkName``, which
its configuration's validation requires of every name in ``integrations.frameworks`` (``pkg/config/validation.go``
``validateIntegrations``)."""
FIX = "the stack cannot run on it as it is (core/controllers.py RELIED_ON)"

QUALIFIED_KEY = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
"""A label or annotation key with its prefix (``jobset.sigs.k8s.io/job-index``)."""
STRING = r'(?:"([^"\\\n]*)"|`([^`]*)`)'
BLOCK = re.compile(r"^(?:const|var) \($\n(.*?)^\)", re.M | re.S)
IN_BLOCK = re.compile(rf"^\t(\w+)(?:[ \t]+[\w.]+)?[ \t]*=[ \t]*{STRING}", re.M)
SINGLE = re.compile(rf"^(?:const|var)[ \t]+(\w+)(?:[ \t]+[\w.]+)?[ \t]*=[ \t]*{STRING}", re.M)


def declarations(source: str) -> dict[str, tuple[str, int]]:
    """The package-level Go constants and variables ``source`` gives a string literal (``const ( ... )`` and ``var
    ( ... )`` blocks, ``const X = "..."``): name -> (value, line)."""
    found: list[tuple[int, str, str]] = []
    for block in BLOCK.finditer(source):
        for match in IN_BLOCK.finditer(source, block.start(1), block.end(1)):
            found.append((match.start(), match[1], match[2] if match[2] is not None else match[3]))
    for match in SINGLE.finditer(source):
        found.append((match.start(), match[1], match[2] if match[2] is not None else match[3]))
    return {name: (value, _line(source, at)) for at, name, value in sorted(found)}


def _line(source: str, at: int) -> int:
    return source.count("\n", 0, at) + 1


def key_facts(name: Controller, texts: dict[str, str]) -> dict[str, Any]:
    """The ``keys`` facts (the module's docstring) from the files of ``KEY_SOURCES`` (path -> text)."""
    declared_in, uses = KEY_SOURCES[name]
    constants: dict[str, dict[str, Any]] = {}
    for file in declared_in:
        for constant, (value, line) in declarations(texts[file]).items():
            if QUALIFIED_KEY.fullmatch(value) and constant not in constants:
                constants[constant] = {"value": value, "line": line, "file": file}
    said: dict[str, Any] = {}
    for use, (where, pattern) in uses.items():
        found: dict[str, list[dict[str, Any]]] = {}
        for match in re.finditer(pattern, texts[where]):
            if match[1] in constants:
                found.setdefault(match[1], []).append({"line": _line(texts[where], match.start()), "code": match[0]})
        said[use] = {"file": where, "found": found}
    return {"declaredIn": list(declared_in), "constants": constants, "uses": said}


def key_problems(name: Controller, version: str, keys: dict[str, Any]) -> list[str]:
    """A problem for each key of ``RELIED_ON`` the release does not declare, or does not use as the stack relies on
    it, by its ``keys`` facts."""
    problems = []
    for key, use in RELIED_ON[name]:
        constants = [constant for constant, said in keys["constants"].items() if said["value"] == key]
        used = keys["uses"].get(use)
        if not constants:
            problems.append(
                f"{name} v{version} declares no {key} ({', '.join(keys['declaredIn'])}), which the stack relies on: "
                f"{FIX}"
            )
        elif used is None:
            problems.append(
                f"the facts of {name} v{version} do not say where it uses a key as a {use}: adopt it again (make "
                f"controller NAME={name} VERSION={version})"
            )
        elif not any(constant in used["found"] for constant in constants):
            problems.append(
                f"{name} v{version} does not {USES[use]} {key} ({', '.join(constants)} in {used['file']}), which the "
                f"stack relies on: {FIX}"
            )
    return problems


# ---------------------------------------------------------------------------------------------
# Kueue's Configuration

STRUCT = re.compile(r"^type (\w+) struct \{\n(.*?)^\}", re.M | re.S)
FIELD = re.compile(r'^\t(?:(\w+)[ \t]+)?([\w.*\[\]]+)[ \t]+`[^`\n]*?\bjson:"([^"]*)"[^`\n]*`', re.M)
TYPE_META = "metav1.TypeMeta"
Member = tuple[str, str, bool]
"""A struct's field as JSON sees it: its JSON name, its Go type, and whether it is inline (its type's fields are
the struct's own)."""


def go_structs(source: str) -> dict[str, list[Member]]:
    """Each struct type of a Go file and its fields with a ``json`` tag (``json:"-"`` ones left out: JSON ignores
    them). A field with no name in its tag is inline when it is embedded (``metav1.TypeMeta `json:",inline"```),
    else named as in Go."""
    structs: dict[str, list[Member]] = {}
    for name, body in STRUCT.findall(source):
        members = []
        for go_name, kind, tag in FIELD.findall(body):
            json_name, _, options = tag.partition(",")
            if json_name == "-" and not options:
                continue
            inline = "inline" in options.split(",") or (not go_name and not json_name)
            members.append((json_name or go_name or kind, kind, inline))
        structs[name] = members
    return structs


def _members(struct: str, structs: dict[str, list[Member]], seen: frozenset[str]) -> list[tuple[str, str]] | None:
    """The JSON fields of ``struct`` (name, Go type), inline ones' fields included; None when an inline field's
    type is another package's (``metav1.TypeMeta`` aside) or its own: its fields cannot be listed here."""
    fields: list[tuple[str, str]] = []
    for json_name, kind, inline in structs[struct]:
        if not inline:
            fields.append((json_name, kind))
            continue
        bare = kind.removeprefix("*")
        if bare == TYPE_META:
            fields += [("apiVersion", "string"), ("kind", "string")]
        elif bare in structs and bare not in seen:
            inner = _members(bare, structs, seen | {bare})
            if inner is None:
                return None
            fields += inner
        else:
            return None
    return fields


def configuration_facts(source: str) -> dict[str, Any] | None:
    """The ``configuration`` facts (the module's docstring) of a ``configuration_types.go`` (None: it declares no
    ``Configuration`` struct). A field whose type is a struct of the file (``T`` or ``*T``) is an object listed field
    by field; lists, maps and other packages' types (``metav1.Duration``) are not: a strict decode checks them,
    this does not."""
    structs = go_structs(source)
    if CONFIGURATION not in structs:
        return None
    fields: dict[str, str] = {}
    closed: list[str] = []

    def walk(struct: str, at: str, seen: frozenset[str]) -> None:
        members = _members(struct, structs, seen)
        if members is None:
            return
        closed.append(at)
        for json_name, kind in members:
            path = f"{at}.{json_name}" if at else json_name
            fields[path] = kind
            bare = kind.removeprefix("*")
            if bare in structs and bare not in seen:
                walk(bare, path, seen | {bare})

    walk(CONFIGURATION, "", frozenset({CONFIGURATION}))
    return {"type": CONFIGURATION, "fields": fields, "closed": closed}


def unknown_fields(value: Any, facts: dict[str, Any], at: str = "") -> list[str]:
    """The keys of ``value`` (the object at path ``at`` of a manager configuration) that the ``configuration``
    facts do not declare: what Kueue's strict decode refuses (``pkg/config/config.go`` ``fromFile``,
    ``serializer.EnableStrict``). Below an object not ``closed`` nothing is checked."""
    if not isinstance(value, dict) or at not in facts["closed"]:
        return []
    found = []
    for key, item in value.items():
        path = f"{at}.{key}" if at else key
        if path not in facts["fields"]:
            found.append(path)
        else:
            found += unknown_fields(item, facts, path)
    return found


def configuration_problems(version: str, facts: dict[str, Any], configuration: dict[str, Any]) -> list[str]:
    """A problem when the Configuration lacks a field of the stack's manager configuration."""
    unknown = unknown_fields(configuration, facts)
    if not unknown:
        return []
    return [
        f"kueue v{version}'s Configuration has no {', '.join(unknown)}, which the stack's manager configuration sets "
        "(infra/k8s/kueue.py): Kueue would refuse to start"
    ]


def framework_problems(version: str, frameworks: dict[str, str]) -> list[str]:
    """A problem for each integration the stack turns on that Kueue does not register, by its ``frameworks`` facts
    (file -> the ``FrameworkName`` it declares)."""
    return [
        f"kueue v{version} does not register the integration {framework} in {FRAMEWORK_FILES[framework]}, which "
        "the stack's manager configuration turns on: Kueue would refuse to start"
        for framework in FRAMEWORKS
        if frameworks.get(FRAMEWORK_FILES[framework]) != framework
    ]


# ---------------------------------------------------------------------------------------------
# The words the stack's rules match (core.controller_strings.STRINGS)

_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92, "'": 39, '"': 34}


def _interpreted(source: str, at: int) -> tuple[str, int]:
    """The value of the interpreted string or rune literal opening at ``at`` and where it ends (Go's escapes
    decoded; a literal that a newline ends early is cut there, as Go would refuse it)."""
    quote, out, index = source[at], bytearray(), at + 1
    while index < len(source) and source[index] not in (quote, "\n"):
        char = source[index]
        escape = source[index + 1 : index + 2]
        if char != "\\":
            out += char.encode()
            index += 1
        elif escape in _ESCAPES:
            out.append(_ESCAPES[escape])
            index += 2
        elif escape == "x":
            out.append(int(source[index + 2 : index + 4], 16))
            index += 4
        elif escape and escape in "01234567":
            out.append(int(source[index + 1 : index + 4], 8) & 0xFF)
            index += 4
        elif escape in ("u", "U"):
            digits = 4 if escape == "u" else 8
            out += chr(int(source[index + 2 : index + 2 + digits], 16)).encode()
            index += 2 + digits
        else:
            out += char.encode()
            index += 1
    return out.decode(errors="replace"), index + 1


def go_strings(source: str) -> list[tuple[str, int]]:
    """Every Go string literal of ``source`` and its line: interpreted ones (``"..."``) decoded, raw ones (`` `...` ``)
    as written less their carriage returns; comments and rune literals skipped."""
    found: list[tuple[str, int]] = []
    at, line, end = 0, 1, len(source)
    while at < end:
        char = source[at]
        if source.startswith("//", at):
            stop = source.find("\n", at)
            at = end if stop < 0 else stop
        elif source.startswith("/*", at):
            stop = source.find("*/", at + 2)
            stop = end if stop < 0 else stop + 2
            line += source.count("\n", at, stop)
            at = stop
        elif char == "`":
            stop = source.find("`", at + 1)
            stop = end if stop < 0 else stop
            found.append((source[at + 1 : stop].replace("\r", ""), line))
            line += source.count("\n", at, stop)
            at = stop + 1
        elif char in "\"'":
            value, at = _interpreted(source, at)
            if char == '"':
                found.append((value, line))
        else:
            line += char == "\n"
            at += 1
    return found


def string_facts(texts: Mapping[str, str], wanted: Mapping[str, tuple[Source, ...]]) -> dict[str, dict[str, int]]:
    """The ``strings`` facts: for each file of ``wanted`` (file -> the sources looked for in it) that ``texts`` holds,
    the line of each literal's first occurrence as a Go string literal (0: none)."""
    facts: dict[str, dict[str, int]] = {}
    for file, sources in wanted.items():
        if file not in texts:
            continue
        first: dict[str, int] = {}
        for value, line in go_strings(texts[file]):
            first.setdefault(value, line)
        facts[file] = {source.literal: first.get(source.literal, 0) for source in sources}
    return facts


def string_problems(name: Controller, version: str, facts: dict[str, dict[str, int]]) -> list[str]:
    """A problem for each literal of ``core.controller_strings.STRINGS`` the release no longer writes in its file, by
    its ``strings`` facts (one whose facts do not say is adopted again)."""
    problems: list[str] = []
    for file, sources in checked_sources(name).items():
        for source in sources:
            rows = [row for row in rows_of(name) if source in row.sources]
            line = facts.get(file, {}).get(source.literal)
            if line is None:
                problems.append(
                    f"the facts of {name} v{version} do not say whether it writes {source.literal!r} in {file}: adopt "
                    f"it again (make controller NAME={name} VERSION={version})"
                )
            elif line == 0:
                matched = ", ".join(repr(row.text) for row in rows)
                problems.append(
                    f"{name} v{version} no longer writes {source.literal!r} in {file}, from which the rules of "
                    f"{', '.join(dict.fromkeys(r for row in rows for r in row.rules))} match {matched} "
                    f"({rows[0].what}): read what it writes now, then change those rules and "
                    "core/controller_strings.py"
                )
    return problems


# ---------------------------------------------------------------------------------------------
# JobSet's failure policy: the Kubernetes it builds with, the reasons its webhook accepts, how it matches them

GO_MOD = "go.mod"
KUBERNETES_API_MODULE = "k8s.io/api"
REQUIRE = re.compile(rf"^\s*(?:require\s+)?{re.escape(KUBERNETES_API_MODULE)}\s+(v[0-9]+\.[0-9]+\.[0-9]+\S*)", re.M)
JOBSET_WEBHOOK = "pkg/webhooks/jobset_webhook.go"
ACCEPTED = re.compile(r"\bvalidOnJobFailureReasons\s*=\s*\[\]string\s*\{(.*?)\}", re.S)
FAILURE_POLICY = "pkg/controllers/failure_policy.go"
JOBSET_FILES = [GO_MOD, JOBSET_WEBHOOK, FAILURE_POLICY]
MATCHING: dict[str, tuple[str, str, str]] = {
    "reasons": (
        r"slices\.Contains\(rule\.OnJobFailureReasons,\s*\w+\)",
        "slices.Contains(rule.OnJobFailureReasons, reason) in ruleIsApplicable",
        "a failed Job's reason as one of onJobFailureReasons, whole",
    ),
    "patterns": (
        r"regexp\.MatchString\(\w+,\s*\w+\)",
        "regexp.MatchString(pattern, message) in anyMatchFound",
        "a failed Job's message by searching it for each of onJobFailureMessagePatterns as a regular expression",
    ),
}
"""How JobSet v0.10.1 and v0.12.0 apply a rule to a failed Job (``ruleIsApplicable``, ``anyMatchFound``): the code
found, by what the training JobSet's rules rely on (``workloads/specs/step_manifests.py`` ``train_failure_policy``)."""


def kubernetes_minor(version: str) -> str:
    """The Kubernetes minor a ``k8s.io/api`` version is published from (``v0.36.0``: ``1.36``)."""
    return "1." + version.removeprefix("v").split(".")[1]


def jobset_facts(texts: dict[str, str]) -> dict[str, Any]:
    """JobSet's ``kubernetesApi``, ``jobFailureReasons`` and ``failurePolicy`` facts (the module's docstring), from
    the files of ``texts`` (path -> text) that hold them."""
    facts: dict[str, Any] = {}
    if GO_MOD in texts:
        required = REQUIRE.search(texts[GO_MOD])
        facts["kubernetesApi"] = {"file": GO_MOD, "version": required[1] if required else ""}
    if JOBSET_WEBHOOK in texts:
        listed = ACCEPTED.search(texts[JOBSET_WEBHOOK])
        names = re.findall(r"\bbatchv1\.(\w+)", listed[1]) if listed else []
        facts["jobFailureReasons"] = {"file": JOBSET_WEBHOOK, "accepted": names}
    if FAILURE_POLICY in texts:
        source = texts[FAILURE_POLICY]
        found = {}
        for what, (pattern, _, _) in MATCHING.items():
            match = re.search(pattern, source)
            found[what] = {"line": _line(source, match.start()), "code": match[0]} if match else None
        facts["failurePolicy"] = {"file": FAILURE_POLICY, "found": found}
    return facts


def jobset_problems(version: str, facts: dict[str, Any]) -> list[str]:
    """A problem when JobSet builds with a Kubernetes whose words were not read (``KUBERNETES_MINORS``), when its
    webhook refuses a Job failure reason the failure policy names, or when it matches a rule otherwise."""
    problems = []
    built_with = (facts.get("kubernetesApi") or {}).get("version", "")
    if "kubernetesApi" in facts and not built_with:
        problems.append(f"jobset v{version}'s go.mod requires no {KUBERNETES_API_MODULE}: its Kubernetes is not known")
    elif built_with and kubernetes_minor(built_with) not in KUBERNETES_MINORS:
        minor = kubernetes_minor(built_with)
        problems.append(
            f"jobset v{version} builds with Kubernetes {minor} (go.mod: {KUBERNETES_API_MODULE} {built_with}), where "
            "the Kubernetes words the stack's rules match were not read (core/controller_strings.py "
            f"KUBERNETES_MINORS: {', '.join(KUBERNETES_MINORS)}): read their sources at {minor}, then add it"
        )
    accepted = (facts.get("jobFailureReasons") or {}).get("accepted")
    for reason, source in job_failure_reasons().items():
        if accepted is not None and source.constant not in accepted:
            problems.append(
                f"jobset v{version}'s webhook does not accept the Job failure reason {reason} (batchv1."
                f"{source.constant} is not in validOnJobFailureReasons, {JOBSET_WEBHOOK}), which the training "
                "JobSet's failure policy names: it would refuse every training step (workloads/specs/step_manifests.py)"
            )
    for what, found in ((facts.get("failurePolicy") or {}).get("found") or {}).items():
        if found is None:
            problems.append(
                f"jobset v{version} no longer matches {MATCHING[what][2]} ({MATCHING[what][1]}, {FAILURE_POLICY}), "
                "as the training JobSet's rules rely on: read how it matches them now, then change "
                "workloads/specs/step_manifests.py train_failure_policy"
            )
    return problems


# ---------------------------------------------------------------------------------------------
# A release's facts, from its files


def extract(name: Controller, version: str, read: Callable[[str], bytes | None]) -> tuple[dict[str, Any], list[str]]:
    """The release's facts, from ``read`` (a path at its tag -> its content, None: no such file), and a problem for
    each file it lacks; a section whose files are missing is left out. ``sources``: the files read, each once."""
    facts: dict[str, Any] = {"sources": []}
    problems: list[str] = []
    read_once: dict[str, str | None] = {}
    said_missing: set[str] = set()

    def text(path: str) -> str | None:
        if path not in read_once:
            content = read(path)
            if content is not None:
                facts["sources"].append(path)
            read_once[path] = None if content is None else content.decode(errors="replace")
        return read_once[path]

    def texts_of(paths: list[str], why: str) -> dict[str, str]:
        """The texts of ``paths``; a problem for each the tag lacks, said once whatever reads it again."""
        found = {path: text(path) for path in dict.fromkeys(paths)}
        for path in (path for path, got in found.items() if got is None and path not in said_missing):
            said_missing.add(path)
            problems.append(f"{name} v{version} has no {path}, {why}")
        return {path: got for path, got in found.items() if got is not None}

    declared_in, uses = KEY_SOURCES[name]
    key_files = [*declared_in, *(where for where, _ in uses.values())]
    texts = texts_of(key_files, "where tpu-rl checks the keys its objects rely on")
    if name == "kueue":
        facts |= _kueue_facts(version, text, problems)
    wanted = checked_sources(name)
    words = texts_of(list(wanted), "where tpu-rl checks the words its rules match")
    if name == "jobset":
        facts |= jobset_facts(texts_of(JOBSET_FILES, "where tpu-rl checks how JobSet matches its failure policy"))
    if len(texts) == len(set(key_files)):
        facts["keys"] = key_facts(name, texts)
    if len(words) == len(wanted):
        facts["strings"] = string_facts(words, wanted)
    return facts, problems


def _kueue_facts(version: str, text: Callable[[str], str | None], problems: list[str]) -> dict[str, Any]:
    """Kueue's ``configuration`` and ``frameworks`` facts (a problem added for each file it lacks)."""
    facts: dict[str, Any] = {}
    source = text(CONFIGURATION_TYPES)
    said = None if source is None else configuration_facts(source)
    if source is None:
        problems.append(f"kueue v{version} has no {CONFIGURATION_TYPES}: the manager configuration is v1beta2")
    elif said is None:
        problems.append(f"kueue v{version}'s {CONFIGURATION_TYPES} declares no struct {CONFIGURATION}")
    else:
        facts["configuration"] = {"file": CONFIGURATION_TYPES, **said}
    facts["frameworks"] = {}
    for where in FRAMEWORK_FILES.values():
        framework = declarations(text(where) or "").get("FrameworkName")
        if framework is not None:
            facts["frameworks"][where] = framework[0]
    return facts


def fact_problems(
    name: Controller, version: str, facts: dict[str, Any], configuration: dict[str, Any] | None
) -> list[str]:
    """Every check of the release's facts: the manager configuration ``configuration`` (Kueue) and the
    integrations, the keys the stack relies on, the words its rules match, and JobSet's failure policy."""
    problems = []
    if "configuration" in facts and configuration is not None:
        problems += configuration_problems(version, facts["configuration"], configuration)
    if name == "kueue":
        problems += framework_problems(version, facts.get("frameworks", {}))
    if "keys" in facts:
        problems += key_problems(name, version, facts["keys"])
    if "strings" in facts:
        problems += string_problems(name, version, facts["strings"])
    if name == "jobset":
        problems += jobset_problems(version, facts)
    return problems
