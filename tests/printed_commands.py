"""Every command the product prints or the docs give, found and judged: is it bound to its stack?

Dev and prod are two state homes and two clusters; a printed command that leaves either to the operator's shell acts
on whichever the shell points at (``core.printed_commands``, the one home that builds them). The texts read
(``every_text``):

- every string literal and f-string of the product's Python files (``tests.source_files``; an f-string's replacement
  fields as ``{expression}``), but a docstring, which no one is told to run, and ``core/printed_commands.py``, whose
  builders tests/test_printed_commands.py runs;
- README.md, CONTRIBUTING.md and every page under docs/; the stack files ``Pulumi*.yaml`` (their comments and
  descriptions); the Makefile, whose comments and echoed lines are printed and whose recipe lines run in the stack's
  home (``$(call home)`` exports it for the line).

A text is split into its inline code spans and fenced lines, read as code, and the rest, read as prose. In code a
command starts at ``tpu-rl``, ``pulumi``, ``kubectl``, ``helm`` or ``make`` and runs to a backtick, the end of the
line, ``;``, ``|``, ``&&``, ``)``, ``,`` or `` (`` outside quotes; in prose it starts only at a subcommand the tool has
and ends at the first word that is no argument (``prose_words``), so "pulumi goes on" or "make status reads" are
words. A command that gives nothing but its name (``pulumi up``, ``pulumi config set``, ``kubectl logs``, ``make
up``) names it and is not judged. The rules (``problems``):

- ``pulumi``, but the commands of ``NO_STACK``: run as ``tpu-rl pulumi --stack <stack> -- <arguments>``, which gives
  it the stack's home and ``--stack`` or runs no pulumi; or ``--stack`` (or ``-s``; ``stack select|init|rm`` take
  the stack as their argument; ``stack ls`` lists a backend and names none) with a home written in front,
  ``PULUMI_BACKEND_URL=<url>``, else it acts on whatever backend the shell is logged in to (a Makefile recipe line has
  its home already). A home in front that a command substitution gives, ``PULUMI_BACKEND_URL=$(...)``, fails open:
  when the substitution fails the variable is empty and pulumi goes to the operator's own login. A ``config
  set|get|rm`` of a nested key goes with ``--path``;
- ``tpu-rl <tool>`` with ``--stack``;
- ``kubectl`` with ``--context``, ``helm`` with ``--kube-context`` (but the helm commands of ``NO_CLUSTER``);
- ``make <target>`` of a target that acts on a stack with ``STACK=``: the Makefile's default is dev.

``ALLOWED`` is the reviewed list of the commands that may stay unbound, each with its reason.
"""

from __future__ import annotations

import ast
import copy
import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

from core.config.fields import DERIVED, REQUIRED, Field
from core.config.schema import FIELDS
from core.names import PROJECT
from tests.source_files import nodes, parsed, product_files, rel
from tools.stack_files import ROOT, parse_property_path

HELPER = "core/printed_commands.py"
"""The one home of a printed command's binding, tested through its builders rather than its text."""

PAGES = (ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md")))
STACK_FILES = tuple(sorted(ROOT.glob("Pulumi*.yaml")))
MAKEFILE = ROOT / "Makefile"

START = re.compile(r"(?<![\w./$-])(?:tpu-rl|pulumi|kubectl|helm|make)(?= +[a-z{-])")
BACKEND = re.compile(r"PULUMI_BACKEND_URL=(?:\$\([^()]*\)|\"[^\"]*\"|'[^']*'|\S+)\s+(?:[A-Z_][A-Z0-9_]*=\S+\s+)*$")
"""``PULUMI_BACKEND_URL=<url>`` (or a command substitution, which fails open), maybe more variables, right in
front."""
SUBSTITUTED = re.compile(r"PULUMI_BACKEND_URL=[\"']?(?:\$\(|`)")
"""A home in front that a command substitution gives: empty when the substitution fails."""
TOOLS = {"status", "report", "logs", "audit", "maintenance", "plan", "rehearse", "pulumi"}
"""The commands of ``tpu-rl`` (tools/tpu_rl.py)."""
SPAN = re.compile(r"(?<!`)`([^`\n]+(?:\n[^`\n]+)?)`(?!`)")
"""An inline code span, which Markdown lets run over one line break."""
FENCE = re.compile(r"^[ \t]*```[^\n]*\n(.*?)^[ \t]*```", re.M | re.S)
"""A fenced block, indented too (in a list item)."""

SUBCOMMANDS = {
    "config": {"set", "get", "rm", "set-all", "rm-all", "refresh", "cp", "env"},
    "stack": {
        *("init", "select", "rm", "ls", "export", "import", "output", "rename", "change-secrets-provider"),
        *("history", "tag", "unselect", "graph"),
    },
    "state": {"delete", "unprotect", "protect", "rename", "move", "edit", "repair", "taint", "untaint", "upgrade"},
    "plugin": {"install", "ls", "rm"},
    "org": {"set-default", "get-default"},
    "policy": {"publish", "enable", "disable", "ls", "new", "validate-config", "rm"},
}
"""The pulumi commands of two words (``pulumi config set``): their name is both words."""
VERBS = {
    "pulumi": {
        *SUBCOMMANDS,
        *("up", "preview", "refresh", "destroy", "cancel", "import", "login", "logout", "whoami", "new", "about"),
        *("version", "install", "watch", "logs", "console", "env", "schema", "package", "convert", "deployment"),
    },
    "kubectl": {
        *("get", "delete", "apply", "logs", "label", "create", "describe", "edit", "patch", "annotate", "rollout"),
        *("exec", "cordon", "drain", "uncordon", "top", "port-forward", "debug", "auth", "config", "scale", "wait"),
        *("run", "cp", "replace", "taint"),
    },
    "helm": {
        *("install", "upgrade", "uninstall", "rollback", "list", "ls", "status", "history", "get", "show", "repo"),
        *("template", "test", "pull", "search", "version"),
    },
    "tpu-rl": TOOLS,
}
"""What each tool takes as its first word: prose that names the tool otherwise ("pulumi goes on") is no command."""
NO_STACK = {"login", "logout", "whoami", "version", "about", "plugin", "new", "install", "org", "policy", "convert"}
"""The pulumi commands that act on no stack and read no backend's stacks."""
POSITIONAL_STACK = {("stack", "select"), ("stack", "init"), ("stack", "rm")}
"""The pulumi commands whose argument is the stack (``pulumi stack select prod``)."""
NO_CLUSTER = {"show", "repo", "search", "template", "version", "pull", "package", "lint", "create", "dependency"}
"""The helm commands that read no cluster."""
STOP = {
    *("a", "after", "again", "and", "as", "at", "before", "by", "first", "for", "from", "if", "in", "instead", "is"),
    *("it", "of", "on", "once", "or", "so", "that", "the", "then", "to", "until", "when", "which", "with"),
}
"""Prose after a command's name: the command ended."""


def make_targets() -> set[str]:
    """The Makefile's targets (``.PHONY``)."""
    phony = re.search(r"^\.PHONY:(.*)$", MAKEFILE.read_text(), re.M)
    assert phony, "the Makefile lists its targets in .PHONY"
    return set(phony.group(1).split())


STACK_TARGETS = {
    *("up", "stack", "preview", "policy-preview", "plan", "destroy", "refresh", "unlock", "state-bucket"),
    *("state-move", "audit", "logs", "status", "report", "maintenance"),
}
"""The make targets that act on a stack (``STACK ?= dev`` otherwise)."""


@dataclass(frozen=True)
class Found:
    """A command as printed: where (file and line), what stands in front of it on its line, its text, and whether it
    runs in the stack's home (a Makefile recipe line)."""

    where: str
    before: str
    command: str
    in_home: bool = False

    def __str__(self) -> str:
        return f"{self.where}: {self.command}"


def words_of(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def _end(text: str, start: int) -> int:
    """Where the command starting at ``start`` ends: a terminator outside quotes."""
    quote, i = "", start
    while i < len(text):
        char = text[i]
        if quote:
            if char == quote:
                quote = ""
            elif char == "\n":
                return i
        elif char in "'\"" and text[i - 1] in " =[":
            quote = char
        elif text.startswith("$(", i):  # a command substitution: its parenthesis is not the end
            close = text.find(")", i)
            i = close if close > 0 else i
        elif char in "`\n;|)\t" or text.startswith(("&&", " (", " # ", ". ", ", "), i):
            return i
        i += 1
    return i


def _argument(word: str) -> bool:
    """A word that can only be an argument, never prose: a flag, a placeholder, a key, a path, a number."""
    return bool(re.search(r"^[-'\"<{$\[]|[:=/@{}<>\[\]0-9_.]|^[A-Z][A-Z0-9_]*$|[a-z]-[a-z]", word))


def prose_words(words: list[str]) -> list[str]:
    """The command at the start of prose ``words``: its name, then what reads as its arguments (a flag's value, one
    name after a kubectl or helm verb, a ``config set``'s key and value)."""
    tool = words[0]
    if len(words) < 2 or not (words[1] in VERBS.get(tool, ()) or words[1].startswith("{")):
        if tool == "make" and len(words) > 1 and words[1] in make_targets():
            pass
        else:
            return words[:1]
    size = 3 if tool == "pulumi" and words[1] in SUBCOMMANDS and words[2:3] and words[2] in SUBCOMMANDS[words[1]] else 2
    out = words[:size]
    plain = 1 if tool in ("kubectl", "helm") else 0
    setting = words[1:3] == ["config", "set"]
    for word in words[size:]:
        if word.lower() in STOP:
            break
        flag_value = out[-1].startswith("-") and "=" not in out[-1] and out[-1] not in ("--yes", "--path", "--secret")
        if _argument(word) or flag_value:
            out.append(word)
        elif plain:
            plain -= 1
            out.append(word)
        elif setting and any(_argument(w) and not w.startswith("-") for w in out[3:]):
            out.append(word)  # the value after the key
            setting = False
        else:
            break
    return out


def commands_in(text: str, code: bool) -> Iterator[tuple[int, str, str]]:
    """Each command of ``text``: (its offset, what stands in front of it on its line, the command)."""
    for match in START.finditer(text):
        start = match.start()
        line = text[text.rfind("\n", 0, start) + 1 : start]
        if line.endswith("tpu-rl "):
            continue  # the pulumi of `tpu-rl pulumi`: that command's
        command = text[start : _end(text, start)].rstrip(" .:")
        if not code:
            command = " ".join(prose_words(command.split()))
        yield start, line[line.rfind("`") + 1 :], command


def through_cli(words: list[str]) -> list[str] | None:
    """The pulumi command ``tpu-rl pulumi --stack <stack> -- <arguments>`` runs, as pulumi sees it (``pulumi
    <arguments> --stack <stack>``); None when ``words`` do not say both the stack and ``--``."""
    rest = words[2:]
    if len(rest) < 3 or rest[0] != "--stack" or rest[2] != "--":
        return None
    return ["pulumi", *rest[3:], "--stack", rest[1]]


def named_only(words: list[str]) -> bool:
    """The command gives its name and nothing more (``pulumi up``, ``pulumi config set``, ``helm uninstall``)."""
    if words[:2] == ["tpu-rl", "pulumi"]:
        return len(words) <= 2
    if words[0] == "pulumi":
        size = 3 if len(words) > 2 and words[1] in SUBCOMMANDS and words[2] in SUBCOMMANDS[words[1]] else 2
        return len(words) <= size
    return len(words) <= 2


def problems(found: Found) -> list[str]:
    """What is unbound in one command; empty when it names its stack, its home and its cluster, or needs none."""
    words = words_of(found.command)
    if named_only(words):
        return []
    if words[0] == "tpu-rl":
        if words[1] != "pulumi":
            return [] if words[1] not in TOOLS or _has(words[2:], "--stack") else ["names no stack (--stack)"]
        inner = through_cli(words)
        if inner is None:
            return ["names its stack before -- (tpu-rl pulumi --stack <stack> -- <pulumi arguments>)"]
        return problems(Found(found.where, found.before, shlex.join(inner), in_home=True))
    tool, rest = words[0], words[1:]
    out: list[str] = []
    named = [w for w in rest if not w.startswith("-")]
    if tool == "pulumi":
        verb = tuple(named[:2])
        if not verb or verb[0] in NO_STACK:
            return []
        if verb == ("stack", "ls"):
            stacked = True
        elif verb in POSITIONAL_STACK:
            stacked = len(named) > 2 or _has(rest, "--stack", "-s")
        else:
            stacked = _has(rest, "--stack", "-s")
        if not stacked:
            out.append("names no stack (--stack)")
        if not found.in_home and not BACKEND.search(found.before):
            out.append("names no state home (tpu-rl pulumi --stack <stack> -- <pulumi arguments>)")
        elif not found.in_home and SUBSTITUTED.search(found.before):
            out.append(
                "fails open: an empty PULUMI_BACKEND_URL when the substitution fails sends pulumi to the operator's "
                "own login (tpu-rl pulumi --stack <stack> -- <pulumi arguments>)"
            )
        if verb[:1] == ("config",) and verb[1:2] in (("set",), ("get",), ("rm",)) and "--path" not in rest:
            keys = [w for w in named[2:] if ":" in w or "." in w]
            if keys and re.search(r"[.\[]", keys[0].partition(":")[2]):
                out.append(f"sets the flat key {keys[0]}, not the field (--path)")
    elif tool == "kubectl":
        if not _has(rest, "--context"):
            out.append("names no cluster (kubectl --context <the stack's context>)")
    elif tool == "helm":
        if (named[:1] or [""])[0] not in NO_CLUSTER and not _has(rest, "--kube-context"):
            out.append("names no cluster (helm --kube-context <the stack's context>)")
    elif tool == "make":
        target = (named[:1] or [""])[0]
        if target in STACK_TARGETS and not any(w.startswith("STACK=") for w in rest):
            out.append("names no stack (STACK=; the Makefile's default is dev)")
    return out


def _has(words: list[str], *flags: str) -> bool:
    return any(w in flags or w.startswith(tuple(f"{f}=" for f in flags if f.startswith("--"))) for w in words)


# -- the texts ---------------------------------------------------------------------------------------------------


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset)


def pieces(text: str) -> Iterator[tuple[int, str, bool]]:
    """(offset, text, code) of each inline code span (code) and of the prose around them (spans blanked out, so that
    offsets stay)."""
    prose = list(text)
    for span in SPAN.finditer(text):
        yield span.start(1), re.sub(r"\s*\n\s*", " ", span.group(1)), True  # a span over a line break: one line
        prose[span.start() : span.end()] = " " * (span.end() - span.start())
    yield 0, "".join(prose), False


def _found(where: str, base: int, text: str, code: bool | None = None, in_home: bool = False) -> Iterator[Found]:
    """Every command of ``text`` (``code``: all of it is code; None: its spans are, the rest prose), its line ``base``
    plus the lines before it."""
    parts = [(0, text, code)] if code is not None else pieces(text)
    for offset, part, is_code in parts:
        for at, before, command in commands_in(part, bool(is_code)):
            yield Found(f"{where}:{base + _line(text, offset + at)}", before, command, in_home)


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of every string that is a statement of its own (a docstring, a module's, a class's, a function's or
    an attribute's): never printed."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, (ast.Constant, ast.JoinedStr))
    }


def rendered(node: ast.Constant | ast.JoinedStr) -> str:
    """A string literal's text; an f-string's with each replacement field as ``{its expression}``."""
    if isinstance(node, ast.Constant):
        return str(node.value)
    return "".join(
        str(value.value) if isinstance(value, ast.Constant) else "{" + ast.unparse(value.value) + "}"  # type: ignore[attr-defined]
        for value in node.values
    )


@cache
def product_commands() -> tuple[Found, ...]:
    found: list[Found] = []
    for path in product_files():
        if rel(path) == HELPER:
            continue
        skip = _docstrings(parsed(path))
        inner = {id(v) for node in nodes(path, ast.JoinedStr) for v in node.values}  # type: ignore[attr-defined]
        for node in nodes(path, ast.Constant, ast.JoinedStr):
            if id(node) in skip or id(node) in inner or not isinstance(getattr(node, "value", ""), str):
                continue
            text = rendered(node)  # type: ignore[arg-type]
            if START.search(text):
                found += _found(rel(path), node.lineno, text)  # type: ignore[attr-defined]
    return tuple(found)


def page_commands() -> Iterator[Found]:
    """A page's fenced lines are code (a comment after `` # `` is prose with spans), the rest spans and prose."""
    for path in PAGES:
        text = path.read_text()
        outside = list(text)
        for fence in FENCE.finditer(text):
            outside[fence.start() : fence.end()] = re.sub(r"[^\n]", " ", fence.group(0))
            first = _line(text, fence.start(1)) + 1
            for n, line in _joined(fence.group(1)):
                code, _, comment = line.partition(" # ")
                yield from _found(rel(path), first + n, code, code=True)
                yield from _found(rel(path), first + n, comment)
        yield from _found(rel(path), 1, "".join(outside))


def _joined(block: str) -> Iterator[tuple[int, str]]:
    """A fenced block's lines, a shell continuation (``\\`` at the end) joined to the next: (first line, text)."""
    held, first = "", 0
    for n, line in enumerate(block.splitlines()):
        if not held:
            first = n
        if line.endswith("\\"):
            held += line[:-1] + " "
            continue
        yield first, " ".join((held + line).split()) if held else line
        held = ""


def stack_file_commands() -> Iterator[Found]:
    """A stack file's comment that is indented after its ``#`` is an example command (code); the rest spans and
    prose."""
    for path in STACK_FILES:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            example = re.match(r"#   (\S.*)$", line)
            if example:
                code, _, comment = example.group(1).partition(" # ")
                yield from _found(rel(path), n, code, code=True)
                yield from _found(rel(path), n, comment)
            else:
                yield from _found(rel(path), n, line)


ECHO = re.compile(r"""echo\s+(?P<q>["'])(?P<text>.*?)(?<!\\)(?P=q)""")


def makefile_commands() -> Iterator[Found]:
    """The Makefile's comments and echoed lines are printed (spans and prose); the rest of a recipe line runs in the
    stack's home."""
    for n, line in enumerate(MAKEFILE.read_text().splitlines(), 1):
        line = re.sub(r"(?<!\$)\$\(([A-Z_]+)\)", lambda m: f"<{m.group(1).lower()}>", line)  # $(STACK): <stack>
        line = line.replace("\\`", "`").replace("$$", "$").replace('\\"', '"')
        if line.lstrip().startswith("#"):
            yield from _found("Makefile", n, line)
            continue
        for echo in ECHO.finditer(line):
            yield from _found("Makefile", n, echo.group("text"))
        yield from _found("Makefile", n, ECHO.sub("", line), code=True, in_home=True)


RUN_AGAIN = re.compile(r"`pulumi up`,? again|next `pulumi up`|`pulumi up` (?:will retry|runs \w+ again)")
"""A line that sends the operator to ``pulumi up`` by hand to run again: it skips what ``make up`` adds (the access
audit, the policy pack, the image pins the state holds)."""


def bare_runs_again() -> list[str]:
    """``where: text`` of every product string (but a docstring) and reviewed message that says to run ``pulumi up``
    again (the container programs', which cannot import ``core.printed_commands``, write ``make up STACK=<stack>``)."""
    found = []
    for path in product_files():
        skip = _docstrings(parsed(path))
        for node in nodes(path, ast.Constant, ast.JoinedStr):
            if id(node) not in skip and isinstance(getattr(node, "value", ""), str):
                text = rendered(node)  # type: ignore[arg-type]
                if RUN_AGAIN.search(text):
                    found.append(f"{rel(path)}:{node.lineno}: {text}")  # type: ignore[attr-defined]
    for path in MESSAGES:
        found += [f"{rel(path)}: {line}" for line in path.read_text().splitlines() if RUN_AGAIN.search(line)]
    return found


MESSAGES = tuple(sorted((ROOT / "tests" / "data").glob("*-messages.tsv")))
"""The reviewed messages, as the product renders them (the source's f-strings hold ``{kubectl(...)}``, these the
command itself)."""


def message_commands() -> Iterator[Found]:
    for path in MESSAGES:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            yield from _found(rel(path), n, line.partition("\t")[2].replace('\\"', '"'))


def every_command() -> list[Found]:
    return [
        *product_commands(),
        *message_commands(),
        *page_commands(),
        *stack_file_commands(),
        *makefile_commands(),
    ]


ALLOWED: dict[str, str] = {
    "docs/guardrails.md: pulumi preview --json --show-sames": (
        "what the preview workflow runs (.github/workflows/preview.yml, in the stack's home from its stack file "
        "through make's tools.state select), described, not given to run"
    ),
}
"""``path: command`` -> why it may stay unbound."""


def unbound() -> list[str]:
    """``where: command: problem`` for every command that is not bound, but those ``ALLOWED``."""
    return [
        f"{found}: {problem}"
        for found in every_command()
        if f"{found.where.rsplit(':', 1)[0]}: {found.command}" not in ALLOWED
        for problem in problems(found)
    ]


# -- what `pulumi config set` writes into the stack file ----------------------------------------------------------


@dataclass(frozen=True)
class ConfigSet:
    """One printed ``pulumi config set``: its stack (``--stack``), key, value (None: prompted for) and flags."""

    stack: str
    key: str
    value: str | None
    path: bool
    secret: bool


VALUE_FLAGS = {"--stack", "-s", "--type", "--config-file", "-C", "--cwd"}


def config_set(command: str) -> ConfigSet | None:
    """The ``pulumi config set`` a printed command is (None: another command)."""
    words = words_of(re.sub(r"\$\([^()]*\)", "HOME", command))
    if words[:2] == ["tpu-rl", "pulumi"]:
        words = through_cli(words) or []
    if words[:3] != ["pulumi", "config", "set"]:
        return None
    flags: dict[str, str] = {}
    named: list[str] = []
    rest = iter(words[3:])
    for word in rest:
        if word.partition("=")[0] in VALUE_FLAGS:
            flag, _, value = word.partition("=")
            flags[flag] = value or next(rest, "")
        elif word.startswith("-"):
            flags[word] = ""
        else:
            named.append(word)
    if not named:
        return None
    stack = flags.get("--stack", flags.get("-s", ""))
    return ConfigSet(stack, named[0], named[1] if len(named) > 1 else None, "--path" in flags, "--secret" in flags)


def coerce(value: str) -> Any:
    """A ``--path`` value as the CLI types it: ``true``/``false`` a bool, base-10 digits not starting with 0 a number,
    anything else a string (``sdk/go/common/resource/config/object.go`` ``coerce``, through ``Value.coerceObject``)."""
    if value in ("true", "false"):
        return value == "true"
    if re.fullmatch(r"[1-9][0-9]*|0", value) and int(value) < 2**64:
        return int(value)
    return value


def stored(setting: ConfigSet, value: str) -> tuple[str, tuple[str | int, ...], Any]:
    """Where and what ``pulumi config set`` writes in the stack file's ``config:``: (the entry's key, the path inside
    its value, the value), as the CLI does it (read in pulumi/pulumi at
    1b5949891b3cefcb9974752b24a5ecef0acc86c8, v3.259.0 and 14 commits):

    - ``pkg/cmd/pulumi/config/io.go`` ``parseConfigKey``: with ``--path`` the namespace is read from the key's first
      segment (up to the first ``.`` or ``[``), the rest kept as the name; a key without ``:`` is the project's;
    - ``sdk/go/common/resource/config/key.go`` ``ParseKey``: ``<namespace>:<name>``, the name everything after the
      ``:``, dots included;
    - ``sdk/go/common/resource/config/map.go`` ``Map.Set``: without ``--path`` ``m[k] = v``, the whole name one flat
      key (``workflow.enabled``); with it ``parseKeyPath`` (``resource.ParsePropertyPathStrict``) makes the first
      element the entry's key and sets the value inside it, creating the objects and lists on the way; a path of one
      element is set as typed, a longer one coerced (``coerce``); ``--secret`` stores ``secure:`` ciphertext."""
    key = setting.key
    if setting.path:
        cuts = [i for i in (key.find("."), key.find("[")) if i > 0]
        top = key[: min(cuts)] if cuts else key
        key = key if ":" in top else f"{PROJECT}:{key}"
    elif ":" not in key:
        key = f"{PROJECT}:{key}"
    namespace, _, name = key.partition(":")
    if ":" in name:
        raise ValueError(f"could not parse {key} as a configuration key")
    written: Any = {"secure": "v1:ciphertext"} if setting.secret else value
    if not setting.path:
        return key, (), written
    elements = tuple(parse_property_path(name))
    head = f"{namespace}:{elements[0]}"
    if len(elements) == 1:
        return head, (), written
    return head, elements[1:], written if setting.secret else coerce(value)


def _nested(root: Any, path: tuple[str | int, ...], value: Any) -> Any:
    """``root`` (an object or a list, or None) with ``value`` set at ``path``: a new object or list where none is."""
    head, rest = path[0], path[1:]
    kind = dict if isinstance(head, str) else list
    container = copy.deepcopy(root) if isinstance(root, kind) else kind()
    current = container.get(head) if isinstance(container, dict) else None
    if isinstance(container, list) and isinstance(head, int) and head < len(container):
        current = container[head]
    child = _nested(current, rest, value) if rest else value
    if isinstance(container, dict):
        container[head] = child
        return container
    assert isinstance(head, int)
    if head > len(container):
        raise ValueError(f"index {head} past the end of a list of {len(container)}")
    container[head : head + 1] = [child]  # an item replaced, or one appended at the end
    return container


def written_config(config: dict[str, Any], setting: ConfigSet, value: str) -> dict[str, Any]:
    """A stack file's ``config:`` after the command."""
    key, path, item = stored(setting, value)
    out = copy.deepcopy(config)
    out[key] = _nested(out.get(key), path, item) if path else item
    return out


PLACEHOLDER = re.compile(r"<[^<>]*>|\{[^{}]*\}|\.\.\.|\b[A-Z][A-Z0-9_]{2,}(?:-[A-Z0-9_]+)*\b")
"""A value or key segment to be filled in: ``<your-ip>``, ``{writer}``, ``hf_...``, ``VALUE``, ``NEW-BUCKET``."""


def field_of(key: str) -> Field | None:
    """The schema's field a key sets (an item of a list: the list's; a ``<field>`` placeholder: the first field of
    its object, with a sample)."""
    base = key.split("[", 1)[0]
    if PLACEHOLDER.search(base):
        prefix = PLACEHOLDER.split(base, 1)[0]
        return next((f for f in FIELDS if f.key.startswith(prefix) and sample(f) is not None), None)
    return next((f for f in FIELDS if f.key == base), None)


def sample(field: Field) -> Any:
    """A valid value of a field: its first sample, else the lifecycle walk's first candidate (None: none)."""
    from tools.lifecycle_walk import candidates

    if field.samples:
        return field.samples[0]
    default = None if field.default in (REQUIRED, DERIVED) else field.read(field.key, field.default)
    return next(candidates(field, default), None)


def as_text(value: Any) -> str:
    """A sample as typed on the command line."""
    value = getattr(value, "value", value)  # an enum's (core.tpu.Capacity)
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value)


def filled(setting: ConfigSet) -> tuple[ConfigSet, str]:
    """The command with its placeholders filled from the schema's samples, and the value it sets (a prompted-for
    value: a sample too)."""
    field = field_of(setting.key)
    assert field is not None, f"{setting.key} is not a key of the schema (core/config/schema.py)"
    key = setting.key if not PLACEHOLDER.search(setting.key.split("[", 1)[0]) else field.key
    value = setting.value
    if value is None or PLACEHOLDER.search(value):
        example = sample(field)
        assert example is not None, f"{field.key} has no sample to fill {setting.value!r} with"
        value = as_text(example[0] if "[" in key and isinstance(example, list) else example)
    return ConfigSet(setting.stack, key, value, setting.path, setting.secret), value
