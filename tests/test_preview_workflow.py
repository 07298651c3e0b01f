"""The PR preview is judged by the base branch's policy pack and policy config, installed from hashes where the branch's
code cannot write, never by the pull request's own, and only once every process of the branch has ended
(docs/guardrails.md "Guardrails and PR review").

The workflow's steps are read as data: which step runs the branch's code (its ``make venv`` and the ``pulumi
preview`` that runs its program, as the unprivileged user ``tpu-rl-branch`` through sudo), which installs the pack (as
root, under ``/var/lib/tpu-rl-preview``), which checks the branch's project files, where the preview's digest is
written and which step judges it (the base's ``policy/judge_preview.py``, as the runner's user, after the branch's
processes are ended), in which order and with what. The base's project check (``tools/check_pulumi_project.py``) is
run on the repository's own files and on hostile variants of them; ``tests/test_judge_preview.py`` runs the judge's
step in bash.

The slow test builds the two trees the workflow has, the branch's and the base's, weakens the branch's pack (a policy
edited to do nothing, its config level ``disabled``), installs the base's where the workflow does, and runs the pack the
judge's command names, as the Pulumi CLI runs a pack (its folder on ``sys.path``, ``core`` as installed), against a
captured plan: the finding survives.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.project_check import plain_yaml_once  # noqa: F401 (an autouse fixture)
from tests.pure_plan import pure_plan
from tools import check_pulumi_project
from tools.stack_files import ROOT

WORKFLOW = yaml.safe_load((ROOT / ".github" / "workflows" / "preview.yml").read_text())
JOB: dict[str, Any] = WORKFLOW["jobs"]["preview"]
STEPS: list[dict[str, Any]] = JOB["steps"]
BASE_SHA = "${{ github.event.pull_request.base.sha }}"
STACK = "${{ matrix.stack }}"
USER = "tpu-rl-branch"
TRUSTED = "/var/lib/tpu-rl-preview"
"""Root's: the base's pack, its venv and config, the base's project check, the Pulumi CLI."""
WORK = "/var/lib/tpu-rl-branch"
"""Root's folder holding the branch user's copy of the branch (project/), its PULUMI_HOME and credentials."""
NAMES = f"user={USER} trusted={TRUSTED} work={WORK}"
BASE_STACK = f"{TRUSTED}/base"
"""Root's copy of the base commit's ``Pulumi.<stack>.yaml``: the backend the preview reads, what the branch keeps."""
VARIABLES = {"$user": USER, "$trusted": TRUSTED, "$work": WORK, "$stack": STACK}
SEPARATORS = {"|", "||", "&&", "&", ";", ";;", "(", ")"}


def _run(step: dict[str, Any]) -> str:
    return str(step.get("run", ""))


def _lines(step: dict[str, Any]) -> list[str]:
    """The step's script, one logical line each (continuations joined), comments and blank lines dropped."""
    lines = (line.strip() for line in re.sub(r"\\\n\s*", " ", _run(step)).splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _commands(line: str) -> list[list[str]]:
    """The simple commands of a line, as the shell splits its words (quotes removed), the workflow's own variables
    written out."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;()")
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    for word in lexer:
        if word in SEPARATORS:
            commands.append([])
            continue
        for name, value in VARIABLES.items():
            word = word.replace(name, value)
        commands[-1].append(word)
    return [c for c in commands if c]


def _program(words: list[str]) -> int:
    """Where the program a command runs is among its words, past ``sudo`` and ``env`` and their options."""
    i = 0
    if words[i] == "sudo":
        i += 1
        while words[i].startswith("-"):
            i += 2 if words[i] == "-u" else 1
    if words[i] == "/usr/bin/env":
        i += 1
        while words[i].startswith(("-", "${")) or "=" in words[i]:
            i += 2 if words[i] == "-C" else 1
    return i


def _branch_commands(step: dict[str, Any]) -> list[list[str]]:
    """The commands that run the branch's Makefile or the Pulumi CLI (which runs the branch's program)."""
    return [
        words
        for line in _lines(step)
        for words in _commands(line)
        if Path(words[_program(words)]).name in ("make", "pulumi")
    ]


def _index(predicate) -> int:
    return next(i for i, s in enumerate(STEPS) if predicate(s))


def _uses(step: dict[str, Any], action: str) -> bool:
    return str(step.get("uses", "")).startswith(f"{action}@")


BRANCH_STEPS = [i for i, step in enumerate(STEPS) if _branch_commands(step)]
FIRST_BRANCH = BRANCH_STEPS[0]
BRANCH_CHECKOUT = _index(lambda s: _uses(s, "actions/checkout") and "ref" not in (s.get("with") or {}))
BASE_CHECKOUT = _index(lambda s: _uses(s, "actions/checkout") and (s.get("with") or {}).get("ref") == BASE_SHA)
SETUP = _index(lambda s: "useradd" in _run(s))
CHECK = _index(lambda s: "check_pulumi_project.py" in _run(s) and "useradd" not in _run(s))
MAKE_VENV = _index(lambda s: any(c[-2:] == ["/usr/bin/make", "venv"] for c in _branch_commands(s)))
AUTH = _index(lambda s: _uses(s, "google-github-actions/auth"))
PREVIEW = _index(lambda s: any("preview" in c for c in _branch_commands(s)))
JUDGE = _index(lambda s: "judge_preview.py" in _run(s))
COMMENT = _index(lambda s: "gh pr comment" in _run(s))
DIGEST = "$RUNNER_TEMP/preview.json"
"""The preview's digest: a file of the runner's, in the runner's work folder (the setup step checks the branch's user
can write nothing there)."""
SETUP_LINES = _lines(STEPS[SETUP])
UNSET_OIDC = "unset ACTIONS_ID_TOKEN_REQUEST_URL ACTIONS_ID_TOKEN_REQUEST_TOKEN"
"""What each step that runs the branch's code does first after PATH (tests/test_preview_credentials.py)."""


@pytest.mark.pure
def test_the_branch_and_the_base_commit_are_checked_out_apart_as_data():
    assert STEPS[BRANCH_CHECKOUT]["with"] == {"path": "branch", "persist-credentials": False}
    assert STEPS[BASE_CHECKOUT]["with"] == {"ref": BASE_SHA, "path": "base", "persist-credentials": False}
    assert sum(_uses(s, "actions/checkout") for s in STEPS) == 2
    assert max(BRANCH_CHECKOUT, BASE_CHECKOUT) < SETUP < FIRST_BRANCH
    assert SETUP_LINES[0] == f'{NAMES} stack="{STACK}"'
    copy_branch = SETUP_LINES.index(
        'tar -C branch --exclude=./.git -cf - . | sudo -u "$user" tar -xf - -C "$work/project"'
    )
    # Deleted once copied: actions/checkout's post step returns when <path>/.git/config is gone, before it looks git
    # up on the PATH (src/git-source-provider.ts `cleanup`, v4.4.0), where the branch's user may have put one.
    assert SETUP_LINES.index("rm -rf branch base") == copy_branch + 1
    assert SETUP_LINES[copy_branch - 2 : copy_branch] == [
        'sudo install -d -m 0755 "$work"',  # root's: the user cannot replace project/ in it, nor add pulumi-home
        'sudo install -d -o "$user" -g "$user" -m 0755 "$work/project"',
    ]


@pytest.mark.pure
def test_the_base_pack_is_installed_as_root_where_the_branch_cannot_write_before_any_of_its_code():
    pack = [
        'sudo cp -R base/policy "$trusted/policy"',  # PulumiPolicy.yaml and config/ with it
        'sudo cp -R base/core base/pyproject.toml "$trusted/build/"',
        'sudo cp base/tools/check_pulumi_project.py "$trusted/check_pulumi_project.py"',
        'sudo cp base/tools/metadata_server.py "$trusted/metadata_server.py"',  # the branch's Google credential
        'sudo /usr/bin/python3 -m venv "$trusted/policy/venv"',  # PulumiPolicy.yaml's virtualenv: venv
        '(cd "$trusted" && sudo "${pip[@]}" --require-hashes --no-deps -r policy/requirements.lock)',
        '(cd "$trusted" && sudo "${pip[@]}" --no-deps --no-build-isolation --no-index ./build)',
        'sudo rm -rf "$trusted/build"',
    ]
    positions = [SETUP_LINES.index(line) for line in pack]
    assert positions == sorted(positions)
    assert any(line.startswith('pip=("$trusted/policy/venv/bin/python" -m pip install ') for line in SETUP_LINES)
    assert yaml.safe_load((ROOT / "policy" / "PulumiPolicy.yaml").read_text())["runtime"] == {
        "name": "python",
        "options": {"virtualenv": "venv"},
    }
    # Root's and writable by root alone, after the last thing written into it.
    owned = SETUP_LINES.index('sudo chown -R root:root "$trusted"')
    assert SETUP_LINES[owned + 1] == 'sudo chmod -R go-w "$trusted"'
    writes = [
        i
        for i, line in enumerate(SETUP_LINES)
        if "$trusted" in line and "sudo" in line and "/usr/bin/python" not in line and "sudo -u" not in line
    ]
    assert max(writes) == owned + 1
    # Not where the hosted image lets every user write (actions/runner-images, configure-system.sh: /opt and
    # /usr/share are chmod -R 777, so are /usr/local/bin and the tool cache), nor under the branch user's folders.
    for shared in ("/opt/", "/usr/share/", "/usr/local/", "/home/", "/tmp/", f"{WORK}/"):
        assert not f"{TRUSTED}/".startswith(shared), shared
    assert SETUP < CHECK < FIRST_BRANCH
    # Only the auth action (Node, running no command: its main and post steps) comes after the branch's first
    # command; every tool an action installs in the world-writable tool cache is installed before it.
    later = {str(s["uses"]).split("@")[0] for s in STEPS[FIRST_BRANCH:] if "uses" in s}
    assert later == {"google-github-actions/auth"}


@pytest.mark.pure
def test_the_branchs_user_has_no_sudo_no_group_and_no_later_jobs():
    assert SETUP_LINES[1] == 'sudo useradd --create-home --user-group --shell /bin/bash "$user"'
    assert any(
        line.startswith('[[ "$(sudo -l -U "$user")" == *"is not allowed to run sudo"* ]] ||') for line in SETUP_LINES
    )
    assert any(line.startswith('[ "$(id -Gn "$user")" = "$user" ] ||') for line in SETUP_LINES), "no sudo, adm, docker"
    assert 'echo "$user" | sudo tee -a /etc/cron.deny /etc/at.deny >/dev/null' in SETUP_LINES
    text = "\n".join(line for step in STEPS for line in _lines(step))
    for grant in ("usermod", "gpasswd", "sudoers", "adduser", "setcap", "chmod u+s", "chmod +s", "visudo"):
        assert grant not in text, grant
    # Yama: a process may ptrace (or write through /proc/<pid>/mem) only its own descendants, and the analyzer is not
    # one of the program's.
    scope = SETUP_LINES.index("scope=$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo missing)")
    assert SETUP_LINES[scope + 1].startswith('case "$scope" in 1|2|3) ;; *) echo "error: ')


@pytest.mark.pure
def test_the_branchs_code_runs_only_as_that_user_in_an_environment_set_here():
    for step in STEPS:
        if _uses(step, "pulumi/actions"):
            assert "command" not in step["with"], "install only: the CLI runs as the branch's user, not in an action"
        for words in _branch_commands(step):
            assert words[0] == "sudo" and words[words.index("-u") + 1] == USER, words
            env = words[words.index("/usr/bin/env") :]
            assert env[1:3] == ["-C", f"{WORK}/project"]
            assert env[3:5] == [f"HOME=/home/{USER}", f"PATH=$(cat {TRUSTED}/branch-path)"]
    # No program of the branch's checkout or of its copy is run, by anyone: the branch's code runs through make and
    # the Pulumi CLI alone.
    for step in STEPS:
        for words in (words for line in _lines(step) for words in _commands(line)):
            assert not words[_program(words)].startswith(("branch/", "./", f"{WORK}/")), words
    (make,) = _branch_commands(STEPS[MAKE_VENV])
    assert make[_program(make) :] == ["/usr/bin/make", "venv"]
    assert "secrets." not in yaml.safe_dump(STEPS[MAKE_VENV]) and "env" not in STEPS[MAKE_VENV]
    assert MAKE_VENV < AUTH < PREVIEW, "no Google credential exists while the branch's Makefile runs"


@pytest.mark.pure
def test_the_branchs_user_can_write_nothing_the_trusted_side_runs():
    loop = next(line for line in SETUP_LINES if line.startswith("for top in "))
    places = _commands(loop)[0][3:]
    assert places[:2] == [TRUSTED, "$stdlib"] and {"/usr/bin", "/usr/lib/x86_64-linux-gnu", "/etc", "$runner"} < set(
        places
    )
    assert "$(dirname $RUNNER_TEMP)" in places, "the runner's work folder: the actions, the step scripts, GITHUB_ENV"
    checks = SETUP_LINES[SETUP_LINES.index(loop) :]
    assert 'while [ "$dir" != / ]; do' in checks, "every folder above each, too"
    assert 'if sudo -u "$user" test -w "$dir"; then echo "error: $user can write $dir" >&2; exit 1; fi' in checks
    assert 'found=$(sudo -u "$user" find -H "$top" ! -type l -writable -print -quit 2>/dev/null || true)' in checks
    assert SETUP_LINES.index(loop) > SETUP_LINES.index('sudo chmod -R go-w "$trusted"')
    assert SETUP_LINES.index(loop) > SETUP_LINES.index("rm -rf branch base")


@pytest.mark.pure
def test_the_preview_runs_the_trusted_cli_once_with_no_pack_and_writes_its_digest():
    """``pulumi preview --json --show-sames`` (pulumi 1b59498 ``pkg/backend/display/json.go`` ``ShowPreviewDigest``:
    one JSON document, printed once the engine's events end; ``display.go`` ``shouldShow``: ``same`` steps only with
    ``--show-sames``), secrets left ``[secret]`` (no ``--show-secrets``), and no policy pack: an analyzer in the
    preview would be a process of tpu-rl-branch, whose remediations the engine writes into the inputs the digest
    records (``step_generator.go``: ``new.Inputs`` from ``Remediate``)."""
    (preview,) = _branch_commands(STEPS[PREVIEW])
    assert preview[:4] == ["sudo", "--preserve-env=PULUMI_ACCESS_TOKEN,PULUMI_CONFIG_PASSPHRASE", "-u", USER]
    cli = _program(preview)
    assert preview[cli:] == [
        f"{TRUSTED}/pulumi/pulumi",
        "preview",
        "--stack",
        STACK,
        "--json",
        "--show-sames",
        "--non-interactive",
        "--color",
        "never",
        ">",
        "$digest",
    ]
    # The digest is the document, not a stream of events (env.go EnableStreamingJSONPreview).
    assert "PULUMI_ENABLE_STREAMING_JSON_PREVIEW=false" in preview[:cli]
    # The language host the CLI starts is the one beside it: none from the PATH, none from a PULUMI_HOME the branch
    # prepared (the step makes it, in root's folder, after ending the branch's processes).
    assert "PULUMI_IGNORE_AMBIENT_PLUGINS=true" in preview[:cli]
    assert f"PULUMI_HOME={WORK}/pulumi-home" in preview[:cli]
    lines = _lines(STEPS[PREVIEW])
    home = lines.index('sudo /usr/bin/install -d -o "$user" -g "$user" -m 0700 "$work/pulumi-home"')
    assert lines.index('/usr/bin/bash "$trusted/end-branch-processes"') < home
    assert 'sudo cp -R "$cli"/pulumi "$cli"/pulumi-* "$trusted/pulumi/"' in SETUP_LINES


@pytest.mark.pure
def test_the_digest_is_a_file_the_branchs_user_can_neither_write_nor_open_again():
    """The runner's shell opens the digest (the redirection is the shell's, before sudo runs) in the runner's work
    folder, which the setup step checks tpu-rl-branch cannot write, nor any folder above it; the file is made empty,
    mode 0600, by the runner's user before the CLI starts: reopening it through ``/proc/<pid>/fd/1`` checks the
    file's own mode (proc(5); ptrace(2) "Ptrace access mode checking": Yama restricts attaching, not that), and the
    CLI hands its plugins pipes of their own (``sdk/go/common/resource/plugin/plugin.go`` ``newPlugin``:
    ``cmd.Stdout`` an ``io.Pipe``), so no process of the branch has it open."""
    lines = _lines(STEPS[PREVIEW])
    assert f'digest="{DIGEST}"' in lines
    made = lines.index('/usr/bin/install -m 0600 /dev/null "$digest"')
    (cli_line,) = [i for i, line in enumerate(lines) if "$trusted/pulumi/pulumi" in line]
    assert lines.index(f'digest="{DIGEST}"') < made < cli_line
    assert lines[cli_line].endswith('> "$digest"') and lines[cli_line].count(">") == 1
    assert lines[made].startswith("/usr/bin/install "), "the runner's file, not root's nor the branch's"
    loop = next(line for line in SETUP_LINES if line.startswith("for top in "))
    assert "$(dirname $RUNNER_TEMP)" in _commands(loop)[0], "the branch's user can write nothing in the work folder"
    assert DIGEST.startswith("$RUNNER_TEMP/")
    # The configuration the judge sends the pack is the base's stack file, root's copy: nothing of the branch's.
    assert not any("$RUNNER_TEMP/stack.yaml" in line for line in lines)
    # Nothing else writes it: the one redirection, and the judge reads it.
    text = "\n".join(_run(step) for step in STEPS)
    assert text.count("$RUNNER_TEMP/preview.json") == 2 and text.count('"$digest"') == 2


@pytest.mark.pure
def test_the_judge_reads_the_digest_only_after_every_process_of_the_branch_has_ended():
    """The verdict is the base's ``policy/judge_preview.py`` run by the runner's user with the pack's venv (root's
    files), after ``end-branch-processes``: nothing of the branch is left to write what it reads. Its status is the
    step's (``-e``, nothing after it): a mandatory finding, or a digest it cannot read, fails the job."""
    assert PREVIEW < JUDGE < COMMENT
    step = STEPS[JUDGE]
    assert step["id"] == "judge" and "continue-on-error" not in step and "env" not in step
    assert (
        step["if"]
        == STEPS[COMMENT]["if"]
        == ("${{ !cancelled() && (steps.preview.outcome == 'success' || steps.preview.outcome == 'failure') }}")
    )
    lines = _lines(step)
    assert lines[:3] == [
        "PATH=/usr/bin:/bin",
        f'trusted={TRUSTED} stack="{STACK}"',
        '/usr/bin/bash "$trusted/end-branch-processes"',
    ]
    (judge,) = _commands(lines[3])
    assert judge == [
        f"{TRUSTED}/policy/venv/bin/python",
        f"{TRUSTED}/policy/judge_preview.py",
        STACK,
        DIGEST,
        "--stack-file",
        f"{TRUSTED}/base/Pulumi.{STACK}.yaml",
        "--summary",
        "$RUNNER_TEMP/verdict.md",
    ]
    assert len(lines) == 4 and not _branch_commands(step)
    assert not any("sudo" in words for line in lines for words in _commands(line)), "the runner's user, not root"
    assert "-euo" in JOB["defaults"]["run"]["shell"].split()
    # The judge is the base's: copied with policy/ into the trusted folder before the branch's first command.
    assert 'sudo cp -R base/policy "$trusted/policy"' in SETUP_LINES and SETUP < FIRST_BRANCH
    assert (ROOT / "policy" / "judge_preview.py").is_file()
    # The comment is the judge's summary, its verdict the judge step's outcome.
    comment = _run(STEPS[COMMENT])
    assert '"$RUNNER_TEMP/verdict.md"' in comment and "${{ steps.judge.outcome }}" in comment
    assert "preview.txt" not in comment and "preview.json" not in comment, "no property value in the comment"


@pytest.mark.pure
def test_the_bases_project_check_runs_before_the_branchs_code_and_again_right_before_the_preview():
    (check,) = [words for line in _lines(STEPS[CHECK]) for words in _commands(line)]
    assert check == [
        f"{TRUSTED}/policy/venv/bin/python",
        f"{TRUSTED}/check_pulumi_project.py",
        f"{WORK}/project",
        STACK,
        "--base",
        BASE_STACK,
    ]
    assert CHECK < FIRST_BRANCH, "the base's copy, with the pack's interpreter (PyYAML from its lock)"
    lines = _lines(STEPS[PREVIEW])
    assert lines[:5] == [
        "PATH=/usr/bin:/bin",
        UNSET_OIDC,
        f'{NAMES} stack="{STACK}"',
        '/usr/bin/bash "$trusted/end-branch-processes"',
        '"$trusted/policy/venv/bin/python" "$trusted/check_pulumi_project.py" "$work/project" "$stack" --base '
        '"$trusted/base"',
    ], "no process of the branch between the check and the CLI's reading of the project"


@pytest.mark.pure
def test_what_the_branch_leaves_running_is_ended_before_the_next_step():
    setup = _run(STEPS[SETUP])
    for line in (
        "'PATH=/usr/bin:/bin'",
        """'  ps -o stat= -u tpu-rl-branch -U tpu-rl-branch | grep -q -v "^Z" || exit 0'""",
        "'  sudo -u tpu-rl-branch /usr/bin/kill -KILL -- -1 2>/dev/null || true'",
        "'exit 1' | sudo tee \"$trusted/end-branch-processes\" >/dev/null",
    ):
        assert line in setup, line
    trap = """trap '/usr/bin/bash "$trusted/end-branch-processes" || exit 1' EXIT"""
    assert trap in _lines(STEPS[MAKE_VENV])
    # The preview's also ends the metadata server it started (tests/test_preview_credentials.py runs it).
    server = """trap 'kill "$server" 2>/dev/null; /usr/bin/bash "$trusted/end-branch-processes" || exit 1' EXIT"""
    assert server in _lines(STEPS[PREVIEW])
    assert _lines(STEPS[JUDGE])[2] == '/usr/bin/bash "$trusted/end-branch-processes"'
    assert _lines(STEPS[COMMENT])[1] == "/usr/bin/bash /var/lib/tpu-rl-preview/end-branch-processes"


@pytest.mark.pure
def test_from_the_branchs_first_command_on_nothing_is_looked_up_on_the_images_path():
    """The branch's user can write the image's /usr/local/bin, /opt/pipx_bin and the tool cache, all on the runner's
    PATH: a later step of the runner's must not run what it finds there (sudo looks its command up on secure_path,
    /usr/local/bin first)."""
    assert JOB["defaults"]["run"]["shell"] == "/usr/bin/bash --noprofile --norc -euo pipefail {0}"
    assert not any("shell" in step for step in STEPS)
    for step in STEPS[FIRST_BRANCH:]:
        if "run" not in step:
            continue
        lines = _lines(step)
        assert lines[0] == "PATH=/usr/bin:/bin", step["name"]
        for words in (words for line in lines for words in _commands(line)):
            if "sudo" in words:
                sudo = words[words.index("sudo") :]
                assert sudo[_program(sudo)].startswith("/"), words


@pytest.mark.pure
def test_the_preview_steps_secrets_and_the_comments_token():
    for step in STEPS[:PREVIEW]:
        assert "secrets." not in yaml.safe_dump(step), step
        assert "env" not in step, step
    assert STEPS[PREVIEW]["env"] == {
        "PULUMI_ACCESS_TOKEN": "${{ secrets.PULUMI_ACCESS_TOKEN }}",
        "PULUMI_CONFIG_PASSPHRASE": "${{ secrets.PULUMI_CONFIG_PASSPHRASE }}",
        "GOOGLE_ACCESS_TOKEN": "${{ steps.auth.outputs.access_token }}",
        "SERVICE_ACCOUNT": "${{ vars.GCP_PREVIEW_SERVICE_ACCOUNT }}",
        "TOKEN_LIFETIME": "1800",
    }
    assert STEPS[COMMENT]["env"] == {"GH_TOKEN": "${{ secrets.GITHUB_TOKEN }}"}
    assert len(STEPS) - 1 == COMMENT and not _branch_commands(STEPS[COMMENT])
    assert not any("sudo" in words for line in _lines(STEPS[COMMENT]) for words in _commands(line))
    assert "secrets." not in yaml.safe_dump(STEPS[JUDGE]) and "env" not in STEPS[JUDGE]
    assert "env" not in WORKFLOW and "env" not in JOB
    assert JOB["runs-on"] == "ubuntu-24.04", "the image whose python3, sudo and Yama default the job relies on"


# The base's project check, on the repository's own files and on hostile variants.

PROJECT = (ROOT / "Pulumi.yaml").read_text()
ALLOWED_KEYS = "allowed: config, description, name, runtime"


def _project(where: Path, text: str = PROJECT, stack_text: str | None = None) -> Path:
    where.mkdir(exist_ok=True)
    (where / "Pulumi.yaml").write_text(text)
    (where / "Pulumi.prod.yaml").write_text(
        (ROOT / "Pulumi.prod.yaml").read_text() if stack_text is None else stack_text
    )
    return where


def _refusal(project: Path, stack: str = "prod") -> str:
    with pytest.raises(check_pulumi_project.ProjectRefusedError) as refused:
        check_pulumi_project.check(project, stack)
    message = str(refused.value)
    assert "\n" not in message
    return message


def _replace(old: str, new: str) -> str:
    assert PROJECT.count(old) >= 1, old
    return PROJECT.replace(old, new, 1)


HOSTILE_PROJECTS = {
    "a plugins section": (
        PROJECT + "plugins:\n  providers:\n    - name: gcp\n      path: ./bin\n",
        f"Pulumi.yaml: `plugins` is not allowed (the CLI would start the plugin binaries it names); {ALLOWED_KEYS}",
    ),
    "another runtime": (
        _replace("  name: python\n", "  name: nodejs\n"),
        "Pulumi.yaml: runtime.name is 'nodejs'; the preview runs the python runtime only",
    ),
    "the short runtime form": (
        _replace(
            "runtime:\n  name: python\n  options:\n    toolchain: pip\n    virtualenv: venv\n", "runtime: python\n"
        ),
        "Pulumi.yaml: runtime is 'python'; it must be the mapping "
        "{name: python, options: {toolchain: pip, virtualenv: venv}}",
    ),
    "an extra option": (
        _replace("    virtualenv: venv\n", "    virtualenv: venv\n    typechecker: mypy\n"),
        "Pulumi.yaml: runtime.options.typechecker is not allowed; the options are exactly toolchain: pip and "
        "virtualenv: venv",
    ),
    "another virtualenv": (
        _replace("    virtualenv: venv\n", "    virtualenv: /tmp/elsewhere\n"),
        "Pulumi.yaml: runtime.options.virtualenv is '/tmp/elsewhere', not venv (the program's own environment, made "
        "by make venv)",
    ),
    "another toolchain": (
        _replace("    toolchain: pip\n", "    toolchain: uv\n"),
        "Pulumi.yaml: runtime.options.toolchain is 'uv', not pip (the program's own environment, made by make venv)",
    ),
    "no toolchain": (
        _replace("    toolchain: pip\n", ""),
        "Pulumi.yaml: runtime.options.toolchain is missing (it must be pip)",
    ),
    "main elsewhere": (
        PROJECT + "main: ../elsewhere/\n",
        f"Pulumi.yaml: `main` is not allowed (the CLI would run the program from another directory); {ALLOWED_KEYS}",
    ),
    "packages": (
        PROJECT + "packages:\n  evil: https://example.com/evil\n",
        f"Pulumi.yaml: `packages` is not allowed (the CLI would generate and install the SDKs it names); "
        f"{ALLOWED_KEYS}",
    ),
    "another backend": (
        PROJECT + "backend:\n  url: https://example.com\n",
        "Pulumi.yaml: `backend` is not allowed (the CLI would send the stack's credentials to another state "
        f"backend); {ALLOWED_KEYS}",
    ),
    "another project": (
        _replace("name: tpu-rl\n", "name: other\n"),
        "Pulumi.yaml: name is 'other', not tpu-rl (the project whose stacks are read)",
    ),
    "a key given twice": (
        PROJECT + "runtime:\n  name: python\n",
        f"Pulumi.yaml: `runtime` is given twice (line {PROJECT.count(chr(10)) + 1})",
    ),
    "an anchor": (
        _replace("  name: python\n", "  name: &p python\n"),
        "Pulumi.yaml: a YAML anchor (&p) is not allowed",
    ),
    "an explicit tag": (
        _replace("name: tpu-rl\n", "name: !!str tpu-rl\n"),
        "Pulumi.yaml: an explicit YAML tag (tag:yaml.org,2002:str) is not allowed",
    ),
    "a merge key": (
        _replace("runtime:\n", "runtime:\n  <<: {name: nodejs}\n"),
        "Pulumi.yaml: a YAML merge key (<<) is not allowed",
    ),
    "a namespaced config key": (
        _replace("config:\n", "config:\n  gcp:project:\n    default: elsewhere\n"),
        "Pulumi.yaml: config key 'gcp:project' is not allowed: only the project's own keys are declared here",
    ),
    "another field of a config key": (
        _replace("  clusterName:\n", "  clusterName:\n    value: x\n"),
        "Pulumi.yaml: config.clusterName: `value` is not allowed (not in the allow-list); allowed: default, "
        "description, items, secret, type",
    ),
}


@pytest.mark.pure
def test_the_project_check_accepts_the_repositorys_own_files(tmp_path):
    for stack in JOB["strategy"]["matrix"]["stack"]:
        check_pulumi_project.check(ROOT, stack)
    check_pulumi_project.check(_project(tmp_path, stack_text=""), "prod")  # an empty stack file
    (tmp_path / "Pulumi.prod.yaml").unlink()
    check_pulumi_project.check(tmp_path, "prod")  # none (a Pulumi Cloud stack may have none)


@pytest.mark.pure
@pytest.mark.parametrize("variant", sorted(HOSTILE_PROJECTS))
def test_the_project_check_refuses_a_hostile_pulumi_yaml_in_one_line(tmp_path, variant):
    text, message = HOSTILE_PROJECTS[variant]
    assert _refusal(_project(tmp_path, text)) == message


@pytest.mark.pure
def test_the_project_check_refuses_other_project_files_links_and_an_esc_environment(tmp_path):
    project = _project(tmp_path / "json")
    (project / "Pulumi.json").write_text('{"name": "tpu-rl", "runtime": "nodejs"}')
    assert _refusal(project) == (
        "Pulumi.json: not allowed beside Pulumi.yaml (the CLI would read the first of Pulumi.json, Pulumi.yaml, "
        "Pulumi.yml it finds)"
    )
    project = _project(tmp_path / "yml")
    (project / "Pulumi.yml").symlink_to("Pulumi.yaml")
    assert _refusal(project).startswith("Pulumi.yml: not allowed beside Pulumi.yaml")
    project = _project(tmp_path / "link")
    (project / "Pulumi.yaml").rename(project / "real.yaml")
    (project / "Pulumi.yaml").symlink_to("real.yaml")
    assert _refusal(project) == (
        "Pulumi.yaml: not a regular file (a symbolic link or a device may read differently later)"
    )
    project = _project(tmp_path / "esc", stack_text="environment:\n  - evil\nconfig: {}\n")
    assert _refusal(project) == (
        "Pulumi.prod.yaml: `environment` is not allowed (the CLI would set the variables of Pulumi ESC environments "
        "in its own environment, the policy pack's analyzer's); allowed: config, encryptedkey, encryptionsalt, "
        "secretsprovider"
    )
    assert _refusal(_project(tmp_path / "missing"), "../prod") == "the stack name '../prod' is not a plain name"


@pytest.mark.pure
def test_the_project_check_runs_as_a_script_on_the_standard_library_pyyaml_and_cores_errors(tmp_path):
    """As the workflow runs it: a file of its own, with the pack's interpreter (PyYAML and the base's ``core``
    installed in it); one line either way."""
    source = ROOT / "tools" / "check_pulumi_project.py"
    imported = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(str(node.module))
    assert {name for name in imported if name.split(".")[0] not in sys.stdlib_module_names} == {"yaml", "core.errors"}
    script = tmp_path / "check_pulumi_project.py"  # copied out, as the workflow copies it: no package around it
    shutil.copy(source, script)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    accepted = subprocess.run(
        [sys.executable, str(script), str(ROOT), "prod"], capture_output=True, text=True, env=env, timeout=30
    )
    assert accepted.returncode == 0 and accepted.stderr == "" and accepted.stdout.count("\n") == 1
    text, message = HOSTILE_PROJECTS["a plugins section"]
    refused = subprocess.run(
        [sys.executable, str(script), str(_project(tmp_path / "p", text)), "prod"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert (refused.returncode, refused.stdout, refused.stderr) == (2, "", f"error: {message}\n")


# The base pack judges a branch that weakens its own.


def _tree(where: Path) -> None:
    """The pack and the pure layer of this checkout, as a checkout of them has them."""
    for folder in ("policy", "core"):
        shutil.copytree(ROOT / folder, where / folder, ignore=shutil.ignore_patterns("venv", "__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", where / "pyproject.toml")


def _weaken(tree: Path) -> None:
    """What a branch could do to the pack that reviews it: the policy edited to return at once, and its level
    ``disabled`` in the stack's config."""
    module = tree / "policy" / "tpu_rl_policies" / "workloads.py"
    text = module.read_text()
    head = "def _least_privilege_pods(args: ResourceValidationArgs, props: dict[str, Any], report: Report) -> None:\n"
    assert head in text
    module.write_text(text.replace(head, head + "    return\n", 1))
    config = tree / "policy" / "config" / "prod.json"
    entries = json.loads(config.read_text())
    entries["least-privilege-pods"] = "disabled"
    config.write_text(json.dumps(entries))


RUN_PACK = r"""
import copy, json, sys
import pulumi_policy
from pulumi_policy import PolicyCustomTimeouts, PolicyResourceOptions, ResourceValidationArgs
from pulumi_policy.proxy import unknown_checking_proxy

import tpu_rl_policies  # as the CLI runs the pack's __main__.py: the pack's folder is on sys.path
import core

plan, config_path, name = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
config = json.load(open(config_path))
entry = config.get(name, config.get("all"))
level = entry["enforcementLevel"] if isinstance(entry, dict) else entry
policy = next(p for p in tpu_rl_policies.POLICIES if p.name == name)
found = []
if level != "disabled":  # the CLI does not run a disabled policy
    for r in plan:
        options = PolicyResourceOptions(
            protect=False, ignore_changes=[], delete_before_replace=False, aliases=[],
            custom_timeouts=PolicyCustomTimeouts(0, 0, 0), additional_secret_outputs=[], parent=None,
        )
        args = ResourceValidationArgs(
            r["type"], unknown_checking_proxy(copy.deepcopy(r["inputs"])), "urn", r["name"], options, None, {}
        )
        policy.validate(args, lambda message, urn=None: found.append(message))
print(json.dumps({"level": level, "found": found, "pack": tpu_rl_policies.__file__, "core": core.__file__}))
"""


def _judge(pack: Path, config: Path, plan_file: Path, core_root: Path) -> dict[str, Any]:
    """The pack at ``pack``, with the config at ``config``, on the plan."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.pathsep.join([str(pack), str(core_root)]),
    }
    done = subprocess.run(
        [sys.executable, "-c", RUN_PACK, str(plan_file), str(config), "least-privilege-pods"],
        cwd=pack,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
def test_a_branch_that_weakens_a_policy_is_still_judged_by_the_base_one(tmp_path):
    branch = tmp_path / "branch"  # the pull request's checkout (path: branch), weakened
    base = tmp_path / "base"  # the base commit's (path: base)
    _tree(branch)
    _weaken(branch)
    _tree(base)
    # The setup step: base/policy copied to the trusted folder, base/core installed (copied) into its venv.
    assert 'sudo cp -R base/policy "$trusted/policy"' in SETUP_LINES
    trusted = tmp_path / TRUSTED.lstrip("/")
    shutil.copytree(base / "policy", trusted / "policy")
    site = tmp_path / "site-packages"
    shutil.copytree(base / "core", site / "core")
    plan = copy.deepcopy(pure_plan("prod"))
    train = next(r for r in plan.resources if r["name"].startswith("gemma4-26b-train-") and "JobSet" in r["type"])
    head = train["inputs"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    head["containers"][0]["securityContext"] = {"privileged": True}  # what the branch's plan asks for
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan.resources))
    (words,) = _commands(_lines(STEPS[JUDGE])[3])

    def inside(path: str) -> Path:
        return tmp_path / path.replace(STACK, "prod").lstrip("/")

    pack = inside(words[1]).parent  # the judge's folder: it reads config/<stack>.json beside it
    config = pack / "config" / f"{words[2].replace(STACK, 'prod')}.json"
    judged = _judge(pack, config, plan_file, site)
    assert judged["level"] == "mandatory"
    assert judged["found"] == [
        "container workload-container is privileged: root on the node, with the Hugging Face token and a bucket "
        "identity; no Pathways or MaxText container needs it"
    ]
    assert Path(judged["pack"]).is_relative_to(trusted) and Path(judged["core"]).is_relative_to(site)

    # The branch's own pack and config would have let it through: the weakening is real.
    own = _judge(branch / "policy", branch / "policy" / "config" / "prod.json", plan_file, branch)
    assert own["level"] == "disabled" and own["found"] == []
    forced = json.loads((branch / "policy" / "config" / "prod.json").read_text())
    forced["least-privilege-pods"] = "mandatory"
    (branch / "policy" / "config" / "prod.json").write_text(json.dumps(forced))
    assert _judge(branch / "policy", branch / "policy" / "config" / "prod.json", plan_file, branch)["found"] == []


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv to run as two other users"
)
def test_a_process_of_the_branchs_user_cannot_open_the_digest_again_through_proc(tmp_path):
    """On this machine's kernel: the CLI (here ``sleep``, as one uid) holds the digest as its standard output, a file of
    another uid (the runner's), mode 0600, as the preview step makes it. A process of the CLI's uid reads where
    ``/proc/<pid>/fd/1`` points (a ptrace "read" check, which the same uid passes) but cannot open it, to write or
    to read: the open checks the file's own mode (fs/namei.c ``may_open``). The control: mode 0666 opens."""
    runner, branch = 2001, 2002
    digest = tmp_path / "preview.json"
    digest.touch(mode=0o600)
    os.chown(digest, runner, runner)
    tmp_path.chmod(0o755)
    as_branch = ["setpriv", f"--reuid={branch}", f"--regid={branch}", "--clear-groups"]
    with digest.open("w") as stdout:  # opened by this shell, handed to the CLI's stand-in as its stdout
        cli = subprocess.Popen([*as_branch, "/bin/sleep", "60"], stdout=stdout)
    try:
        probe = (
            "import os, sys\n"
            "link = f'/proc/{sys.argv[1]}/fd/1'\n"
            "print(os.readlink(link))\n"
            "for name, flags in (('write', os.O_WRONLY), ('read', os.O_RDONLY)):\n"
            "    try:\n"
            "        os.close(os.open(link, flags)); print(name, 'opened')\n"
            "    except OSError as err:\n"
            "        print(name, err.strerror)\n"
        )
        run = [*as_branch, sys.executable, "-I", "-c", probe, str(cli.pid)]
        refused = subprocess.run(run, capture_output=True, text=True, timeout=30)
        assert refused.stdout.splitlines() == [str(digest), "write Permission denied", "read Permission denied"]
        digest.chmod(0o666)
        opened = subprocess.run(run, capture_output=True, text=True, timeout=30)
        assert opened.stdout.splitlines() == [str(digest), "write opened", "read opened"]
    finally:
        cli.kill()
        cli.wait(timeout=10)
