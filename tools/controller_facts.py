"""The facts of a JobSet or Kueue release's Go source that the stack's checks need, extracted when the release is
adopted (``tools/adopt_controller.py``), and the checks on them.

The repository holds no Go source: ``make controller`` reads the release's files at its tag, writes what is below
as ``tests/data/vendor/schemas/<name>-v<version>/facts.json`` (``core.controllers.facts_file``), and refuses the
release when a check fails; the tests run the same checks on every adopted release's facts, offline.

- ``keys``: the Go constants of the file that declares the controller's label and annotation keys whose value is
  such a key (``<prefix>/<name>``), each with its value and line, and for each way the stack relies on a key
  (``core.controllers.Use``) the file read and, per constant, where that file uses it so (line and the code
  matched): what ``key_problems`` checks ``core.controllers.RELIED_ON`` against.
- ``configuration`` (Kueue): the JSON fields of its ``Configuration`` (``apis/config/v1beta2/configuration_types.go``)
  as paths with their Go types, and the objects whose every field is listed (``closed``; ``""`` is the
  Configuration itself): what ``unknown_fields`` checks the stack's manager configuration against.
- ``frameworks`` (Kueue): the ``FrameworkName`` each integration's file declares (``FRAMEWORK_FILES``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from core.controllers import RELIED_ON, Controller, Use
from infra.k8s.kueue import FRAMEWORKS

CONFIGURATION_TYPES = "apis/config/v1beta2/configuration_types.go"
CONFIGURATION = "Configuration"
JOBSET_CONTROLLER = "pkg/controllers/jobset_controller.go"
KEY_SOURCES: dict[Controller, tuple[str, dict[Use, tuple[str, str]]]] = {
    "jobset": (
        "api/jobset/v1alpha2/jobset_types.go",
        {
            "pod label": (JOBSET_CONTROLLER, r"\blabels\[\w+\.(\w+)\][ \t]*="),
            "pod annotation": (JOBSET_CONTROLLER, r"\bannotations\[\w+\.(\w+)\][ \t]*="),
            "template annotation": (JOBSET_CONTROLLER, r"\.Template\.Annotations\[\w+\.(\w+)\]"),
        },
    ),
    "kueue": (
        "pkg/controller/constants/constants.go",
        {
            "object label": ("pkg/controller/jobframework/interface.go", r"\.GetLabels\(\)\[\w+\.(\w+)\]"),
            "workload label": ("pkg/controller/jobframework/reconciler.go", r"\bwl\.Labels\[\w+\.(\w+)\][ \t]*="),
        },
    ),
}
"""Where a release says the keys of ``core.controllers.RELIED_ON``: the file that declares them as Go constants, and
for each use the file and the code that uses a constant so (group 1: the constant's name). JobSet v0.10.1 and
v0.12.0 ``labelAndAnnotateObject`` puts its keys on each child Job and its pod template as labels and annotations
(``labels[jobset.JobIndexKey] = ...``) and copies the exclusive-topology annotation from a replicated Job's template
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
"""Where Kueue names each integration the stack turns on (``infra.k8s.kueue.FRAMEWORKS``): ``FrameworkName``, which
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
    constants = {
        constant: {"value": value, "line": line}
        for constant, (value, line) in declarations(texts[declared_in]).items()
        if QUALIFIED_KEY.fullmatch(value)
    }
    said: dict[str, Any] = {}
    for use, (where, pattern) in uses.items():
        found: dict[str, list[dict[str, Any]]] = {}
        for match in re.finditer(pattern, texts[where]):
            if match[1] in constants:
                found.setdefault(match[1], []).append({"line": _line(texts[where], match.start()), "code": match[0]})
        said[use] = {"file": where, "found": found}
    return {"declaredIn": declared_in, "constants": constants, "uses": said}


def key_problems(name: Controller, version: str, keys: dict[str, Any]) -> list[str]:
    """A problem for each key of ``RELIED_ON`` the release does not declare, or does not use as the stack relies on
    it, by its ``keys`` facts."""
    problems = []
    for key, use in RELIED_ON[name]:
        constants = [constant for constant, said in keys["constants"].items() if said["value"] == key]
        used = keys["uses"].get(use)
        if not constants:
            problems.append(
                f"{name} v{version} declares no {key} ({keys['declaredIn']}), which the stack relies on: {FIX}"
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
# A release's facts, from its files


def extract(name: Controller, version: str, read: Callable[[str], bytes | None]) -> tuple[dict[str, Any], list[str]]:
    """The release's facts, from ``read`` (a path at its tag -> its content, None: no such file), and a problem for
    each file it lacks; a section whose files are missing is left out. ``sources``: the files read."""
    facts: dict[str, Any] = {"sources": []}
    problems: list[str] = []

    def text(path: str) -> str | None:
        content = read(path)
        if content is not None:
            facts["sources"].append(path)
        return None if content is None else content.decode(errors="replace")

    declared_in, uses = KEY_SOURCES[name]
    key_files = list(dict.fromkeys([declared_in, *(where for where, _ in uses.values())]))
    texts: dict[str, str] = {}
    for path in key_files:
        found = text(path)
        if found is None:
            problems.append(f"{name} v{version} has no {path}, where tpu-rl checks the keys its objects rely on")
        else:
            texts[path] = found
    if name == "kueue":
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
    if len(texts) == len(key_files):
        facts["keys"] = key_facts(name, texts)
    return facts, problems


def fact_problems(
    name: Controller, version: str, facts: dict[str, Any], configuration: dict[str, Any] | None
) -> list[str]:
    """Every check of the release's facts: the manager configuration ``configuration`` (Kueue) and the
    integrations, then the keys the stack relies on."""
    problems = []
    if "configuration" in facts and configuration is not None:
        problems += configuration_problems(version, facts["configuration"], configuration)
    if name == "kueue":
        problems += framework_problems(version, facts.get("frameworks", {}))
    if "keys" in facts:
        problems += key_problems(name, version, facts["keys"])
    return problems
