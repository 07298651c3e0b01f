"""``tpu-rl``: the operator's tools as one command that exits with the tool's own status.

    tpu-rl status|report|logs|audit|maintenance|plan|rehearse --stack NAME [the tool's arguments]
    tpu-rl pulumi --stack NAME -- PULUMI_ARGS...

``make`` reports every failed recipe as exit 2, whatever the tool said; ``tpu-rl <command>`` runs the same tool
(``main(argv)``, through ``tools.process.entry_point``) and exits with its code: 0 done, 1 what a retry may cure
(or, for ``status``, a step failed), 2 bad input, 70 a fault of tpu-rl's own
(docs/troubleshooting.md#make-status-make-logs-and-make-report).

``tpu-rl pulumi`` runs one Pulumi CLI command in the stack's state home: the home ``make`` gives every pulumi command
(``tools.state`` ``select``, with ``STATE_BACKEND``, ``STATE_ORG``, ``SECRETS_PROVIDER``, ``LOCAL_STATE`` and
``ALLOW_PASSPHRASE`` read from the environment as ``make`` reads them), set as ``PULUMI_BACKEND_URL`` (and a Pulumi
Cloud home's organization as ``PULUMI_DEFAULT_ORGANIZATION``) for that process alone, with ``--stack NAME`` added. A
home it cannot decide is one line with ``select``'s exit code, and pulumi never runs: unlike
``PULUMI_BACKEND_URL=$(...) pulumi ...``, whose failed substitution leaves the variable empty and sends pulumi to the
operator's own login, possibly another stack's backend.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from core.errors import BadInputError, UnavailableError
from tools.process import entry_point

TOOLS: dict[str, tuple[str, str]] = {
    "status": ("tools.status", "each step's state, the step training reached, an ETA (--watch to follow)"),
    "report": ("tools.report", "reward curves, accuracy and chip-hours (default --out build/report-<stack>)"),
    "logs": ("tools.logs", "a step's current or last attempt's logs (--step)"),
    "audit": ("tools.audit", "who outside the stack's own list reaches its state, key, accounts or cluster"),
    "maintenance": ("tools.maintenance", "start the slice's scheduled host maintenance now (--force)"),
    "plan": (
        "tools.plan.cli",
        "offline: every resource and manifest, the cost estimate (default --out build/plan-<stack>)",
    ),
    "rehearse": ("tools.rehearse.rehearsal", "every step rehearsed on CPU before any TPU is billed (--step)"),
}
"""Each command: the module whose ``main(argv)`` it runs, and its line of ``tpu-rl --help``."""
OUT = {"plan": "plan", "report": "report"}
"""The commands whose ``--out`` defaults to ``build/<kind>-<stack>``, as their ``make`` targets give it."""
STATE_VALUES = (
    ("STATE_BACKEND", "--backend"),
    ("STATE_ORG", "--organization"),
    ("SECRETS_PROVIDER", "--secrets-provider"),
)
STATE_FLAGS = (("LOCAL_STATE", "--local-ok"), ("ALLOW_PASSPHRASE", "--allow-passphrase"))
"""The Makefile's variables that ``tools.state select`` is given (``STATE_ARGS``), read from the environment."""
OWN_FLAGS = ("--stack", "-s", "--cwd", "-C")
"""What ``tpu-rl pulumi`` sets itself: the stack, and the folder pulumi runs in (its checkout)."""


def usage() -> str:
    width = max(map(len, TOOLS))
    lines = [f"  {name.ljust(width)}  {about}" for name, (_, about) in TOOLS.items()]
    lines.append(
        f"  {'pulumi'.ljust(width)}  one pulumi command in the stack's state home: pulumi --stack NAME -- ARGS"
    )
    return "usage: tpu-rl COMMAND --stack NAME [ARGS...]\n\n" + "\n".join(lines)


def run(argv: list[str]) -> int:
    """The command ``argv`` names, run; its exit status."""
    if not argv or argv[0] in ("-h", "--help"):
        print(usage(), file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "pulumi":
        pulumi(rest)
    if command not in TOOLS:
        raise BadInputError(f"tpu-rl has no command {command[:40]!r}: {', '.join([*TOOLS, 'pulumi'])}")
    return tool(command)(with_out(command, rest))


def tool(command: str) -> Callable[[list[str]], int]:
    module = TOOLS[command][0]
    try:
        found: Callable[[list[str]], int] = importlib.import_module(module).main
    except ModuleNotFoundError as err:
        if command == "rehearse" and err.name and not err.name.startswith(("tools", "core", "infra", "workloads")):
            raise BadInputError(f"tpu-rl rehearse needs the test tools ({err.name}): run make dev-venv") from None
        raise
    return found


def with_out(command: str, argv: list[str]) -> list[str]:
    """``argv`` with ``--out build/<kind>-<stack>`` (in the checkout) when the command writes one and none is given."""
    kind = OUT.get(command)
    stack = _value(argv, "--stack")
    if kind is None or stack is None or _value(argv, "--out") is not None:
        return argv
    from tools.stack_files import ROOT

    return [*argv, "--out", os.path.relpath(ROOT / "build" / f"{kind}-{stack}")]


def _value(argv: list[str], flag: str) -> str | None:
    for i, word in enumerate(argv):
        if word == flag and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith(f"{flag}="):
            return word.partition("=")[2]
    return None


def pulumi(argv: list[str]) -> NoReturn:
    """Exec the Pulumi CLI with ``argv`` after ``--``, in the stack's home, or raise the refusal (pulumi never runs)."""
    from tools import state
    from tools.stack_files import ROOT

    ours, _, theirs = (argv[: argv.index("--")], "--", argv[argv.index("--") + 1 :]) if "--" in argv else (argv, "", [])
    parser = argparse.ArgumentParser(prog="tpu-rl pulumi", usage="tpu-rl pulumi --stack NAME -- PULUMI_ARGS...")
    parser.add_argument("--stack", required=True, help="the stack: its home, and --stack for pulumi")
    args = parser.parse_args(ours)
    if not theirs:
        raise BadInputError(f"name the pulumi command after --: tpu-rl pulumi --stack {args.stack} -- config set ...")
    mine = [w for w in theirs[: theirs.index("--") if "--" in theirs else None] if w.partition("=")[0] in OWN_FLAGS]
    if mine:
        raise BadInputError(
            f"tpu-rl pulumi sets {mine[0].partition('=')[0]} itself (the stack it is given, its checkout {ROOT}): "
            f"leave it out of the pulumi arguments"
        )
    here = Path.cwd().resolve()
    if here != ROOT and ROOT not in here.parents:
        raise BadInputError(
            f"tpu-rl pulumi runs pulumi in its checkout {ROOT}, whose Pulumi.yaml and stack files name the stack's "
            f"home; {here} is outside it: cd {ROOT} first (or run the tpu-rl of the checkout you are in)"
        )
    given = [*(f for name, flag in STATE_VALUES if os.environ.get(name) for f in (flag, os.environ[name]))]
    given += [flag for name, flag in STATE_FLAGS if os.environ.get(name)]
    home = state.selected(state.parse(["select", "--stack", args.stack, *given]))
    found = shutil.which("pulumi")
    if found is None:
        raise UnavailableError(
            "the Pulumi CLI is required (https://www.pulumi.com/docs/install/): pulumi is not on PATH"
        )
    env = {**os.environ, "PULUMI_BACKEND_URL": home.backend}
    if home.organization:
        env["PULUMI_DEFAULT_ORGANIZATION"] = home.organization
    at = theirs.index("--") if "--" in theirs else len(theirs)
    words = ["pulumi", *theirs[:at], "--stack", args.stack, *theirs[at:]]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(found, words, env)


def main() -> NoReturn:
    """The console script ``tpu-rl`` (pyproject.toml ``[project.scripts]``)."""
    entry_point(lambda: run(sys.argv[1:]))


if __name__ == "__main__":
    main()
