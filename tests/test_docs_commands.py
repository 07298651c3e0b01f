"""Every command the docs give that deletes data, parsed: none can delete more than it says.

The README, CONTRIBUTING and every page under docs/ are read; each fenced block's lines (continuations joined) and
each inline code span that is a command are split into simple commands and judged:

- `gcloud storage rm` and `gsutil rm` never name a bucket root: `gcloud storage rm --recursive gs://b/` "deletes all
  versions of all resources in my-bucket and then deletes the bucket" (gcloud storage rm's reference; gsutil rm: "-r
  gs://bucket ... and then deletes the bucket"), after which the stack's destroy fails with 404. Objects go by name,
  by a wildcard under a folder, or with `--recursive` on a folder (`gs://b/folder/`);
- no `gcloud storage buckets delete`, `gsutil rb`: the stack deletes its bucket itself;
- `pulumi refresh` and `pulumi destroy` (by themselves or through `tpu-rl pulumi --stack <stack> --`) run with
  `--run-program=false`: with the program, the engine runs it as in an
  `up`, which waits hours for a running step (docs/destroy.md "Refresh").
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tools.stack_files import ROOT

PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
SPAN = re.compile(r"(?<!`)`([^`\n]+(?:\n[^`\n]+)?)`(?!`)")
"""An inline code span, which Markdown lets run over one line break."""
SEPARATORS = re.compile(r"\s*(?:&&|\|\||;|\|)\s*")


def commands(text: str) -> list[str]:
    """The simple commands of a page: every fenced block's lines and the inline spans that start with a command
    word and give more than the command's name."""
    found: list[str] = []
    for block in FENCE.findall(text):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = " ".join(line.split(" # ", 1)[0].split())
            found += [part for part in SEPARATORS.split(line) if part]
    prose = FENCE.sub("", text)
    for span in SPAN.findall(prose):
        for part in SEPARATORS.split(" ".join(span.split())):
            words = words_of(part)  # after the variables in front, and as `tpu-rl pulumi` runs pulumi
            if len(words) > 2 and words[0] in {"gcloud", "gsutil", "pulumi"}:
                found.append(part)
    return found


def words_of(command: str) -> list[str]:
    command = re.sub(r"\$\([^()]*\)", "HOME", command)  # a command substitution is one word
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):  # an environment assignment in front
        words = words[1:]
    if words[:3] == ["tpu-rl", "pulumi", "--stack"] and words[4:5] == ["--"]:  # tools/tpu_rl.py: pulumi in the home
        words = ["pulumi", *words[5:], "--stack", words[3]]
    return words


def problems(command: str) -> list[str]:
    """What is wrong with one simple command; empty when nothing."""
    words = words_of(command)
    found = []
    if words[:3] == ["gcloud", "storage", "rm"] or (words[:1] == ["gsutil"] and "rm" in words[1:3]):
        recursive = any(w in ("-r", "-R", "--recursive") or re.fullmatch(r"-[a-zA-Z]*[rR][a-zA-Z]*", w) for w in words)
        for url in (w for w in words if w.startswith("gs://")):
            path = url.removeprefix("gs://").partition("/")[2]
            if not path:
                found.append(
                    f"{command}: deletes the bucket {url} itself; delete its folders (gs://<bucket>/<folder>/)"
                )
            elif recursive and not url.endswith("/"):
                found.append(f"{command}: --recursive on {url}, not a folder (end it with /)")
    if words[:4] == ["gcloud", "storage", "buckets", "delete"] or words[:2] == ["gsutil", "rb"]:
        found.append(f"{command}: deletes a bucket; the stack's destroy deletes its own")
    if words[:2] in (["pulumi", "refresh"], ["pulumi", "destroy"]) and "--run-program=false" not in words:
        found.append(f"{command}: without --run-program=false the engine runs the program as in an up")
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_command_in_the_docs_deletes_more_than_it_says(page: Path):
    wrong = [problem for command in commands(page.read_text()) for problem in problems(command)]
    assert wrong == [], f"{page.relative_to(ROOT)}:\n" + "\n".join(wrong)


def test_the_docs_have_the_commands_this_checks():
    every = [command for page in PAGES for command in commands(page.read_text())]
    assert any(words_of(c)[:2] == ["pulumi", "refresh"] for c in every)
    assert any(words_of(c)[:3] == ["gcloud", "storage", "rm"] for c in every), "the bucket clean-up advice"


@pytest.mark.parametrize(
    "command",
    [
        "gcloud storage rm -r gs://<bucket>",
        "gcloud storage rm --recursive gs://my-bucket/",
        "gcloud storage rm gs://b",
        "gsutil -m rm -r gs://bucket",
        "gsutil rm -ra gs://bucket/",
        "gcloud storage rm --recursive gs://b/gemma4-26b",
        "gcloud storage buckets delete gs://b",
        "gsutil rb gs://b",
        "pulumi refresh --yes",
        "pulumi refresh --clear-pending-creates --yes",
        "PULUMI_K8S_DELETE_UNREACHABLE=true pulumi refresh --stack dev",
        "pulumi destroy --stack prod --skip-preview",
        "tpu-rl pulumi --stack dev -- refresh --yes",
        "PULUMI_K8S_DELETE_UNREACHABLE=true tpu-rl pulumi --stack dev -- destroy",
    ],
)
def test_a_command_that_deletes_too_much_is_named(command):
    assert problems(command), command


@pytest.mark.parametrize(
    "command",
    [
        "gcloud storage rm --recursive gs://<bucket>/<model>/",
        "gcloud storage rm 'gs://b/gemma4-26b/train/**'",
        "gcloud storage rm gs://b/x/config.json",
        "pulumi refresh --stack dev --run-program=false",
        "PULUMI_K8S_DELETE_UNREACHABLE=true pulumi refresh --stack dev --run-program=false",
        "pulumi destroy --stack dev --run-program=false",
        "PULUMI_K8S_DELETE_UNREACHABLE=true tpu-rl pulumi --stack dev -- refresh --run-program=false",
        "gcloud storage ls gs://b",
    ],
)
def test_a_command_that_deletes_what_it_says_passes(command):
    assert problems(command) == []


def test_commands_are_found_in_blocks_with_continuations_and_in_spans():
    text = "Run `pulumi refresh --yes` then:\n\n```bash\ngcloud storage rm \\\n  -r gs://b   # all\nmake up\n```\n"
    assert commands(text) == ["gcloud storage rm -r gs://b", "make up", "pulumi refresh --yes"]
    bound = "`tpu-rl pulumi --stack dev -- refresh --yes`"
    assert commands(bound) == [bound.strip("`")], "a command run in its state home is still read"
    assert commands("`pulumi destroy` runs a preview first") == [], "a command's name is not a command"
