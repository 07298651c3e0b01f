"""The README stays a newcomer's page and the docs/ pages hold the rest, one question per page: every relative
link and anchor resolves, every page is linked from the README and links back, each opens with its summary and is
read in one sitting (under 400 lines), every ``docs/<page>.md "Section"`` or ``docs/<page>.md#anchor`` that code, a
message, the Makefile or a workflow cites names a page and a heading that exist, and the generated tables sit where
tools/docs_tables.py writes them."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest

from tools.stack_files import ROOT

pytestmark = pytest.mark.pure  # files only

README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
MAX_README_LINES = 250
"""A newcomer reads it in minutes."""
MAX_PAGE_LINES = 400
"""A page answers one question and is read in one sitting; more than this is two questions."""
CITED_IN = ("core", "infra", "workloads", "policy", "tools", "program", "tests", ".github", ".ci", "docs")
"""The folders whose code, comments, messages and pages cite a docs page (with the top-level files)."""
TEXT = {".py", ".md", ".yml", ".yaml", ".tsv", ".toml", ".txt", ".json", ".sh"}
NOT_OURS = {"venv", ".venv", "build", "__pycache__", "node_modules", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
CITATION = re.compile(
    r"docs/(?P<page>[\w.-]+?\.md)"
    r"(?:#(?P<anchor>[\w-]+)|(?:,?\s+\(?|\s*\()(?P<quote>\\?[\"'])(?P<section>(?:(?!(?P=quote))[^\\]){1,80}?)(?P=quote))?"
)
"""``docs/<page>.md#anchor``, or ``docs/<page>.md "Section"`` (``'Section'``, ``, "Section"``, ``("Section")``, and
``\\"Section\\"`` in a shell string); a bare ``docs/<page>.md`` names the page only."""
CONTINUATION = re.compile(r"\s*\n\s*(?:#+\s*)?")
"""A line break, its indentation and a comment marker: a citation wrapped across comment or docstring lines."""

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6}) +(.+?) *#*$", re.MULTILINE)
GENERATED = "<!-- generated "


def prose(path: Path) -> str:
    """The page without its fenced code blocks (a link or a heading in an example is not one)."""
    return _prose(path.read_text())


@functools.lru_cache(maxsize=256)
def _prose(text: str) -> str:
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (backticks included), spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a page's headings make (a repeated heading gets -1, -2, ... as on GitHub); each text's once per
    process (the citations name the same pages hundreds of times)."""
    return set(_anchors(prose(path)))


@functools.lru_cache(maxsize=256)
def _anchors(text: str) -> frozenset[str]:
    seen: dict[str, int] = {}
    out = set()
    for match in HEADING.finditer(text):
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return frozenset(out)


def local_links(path: Path) -> list[str]:
    """The page's links that point into the repository (not to a web page or an e-mail address)."""
    return [
        target
        for target in LINK.findall(prose(path))
        if not re.match(r"[a-z][a-z0-9+.-]*:", target)  # https:, mailto:
    ]


def test_the_slug_is_githubs():
    assert slug("What `pulumi up` does") == "what-pulumi-up-does"
    assert slug("What happens when...") == "what-happens-when"
    assert slug("Destroy, and `up` again") == "destroy-and-up-again"
    assert slug("Where the tutorial's values change") == "where-the-tutorials-values-change"
    assert slug("Queues (Kueue)") == "queues-kueue"


@pytest.mark.parametrize("path", [README, ROOT / "CONTRIBUTING.md", *PAGES], ids=lambda p: p.name)
def test_every_relative_link_and_anchor_resolves(path):
    broken = []
    for target in local_links(path):
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            broken.append(f"{target}: no file {linked.relative_to(ROOT) if linked.is_relative_to(ROOT) else linked}")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading with the anchor #{anchor} in {linked.relative_to(ROOT)}")
    assert broken == [], f"{path.relative_to(ROOT)}: broken links: {broken}"


def test_the_readme_is_a_newcomers_page():
    lines = README.read_text().count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; move detail to a page under docs/"
    headings = [match.group(2) for match in HEADING.finditer(prose(README)) if match.group(1) == "##"]
    for section in ("The two set-up commands", "Daily use", "Deviations from the tutorial", "Where to go next"):
        assert section in headings, section
    assert GENERATED not in README.read_text(), "generated tables belong in docs/ (tools/docs_tables.py)"


def test_the_readme_keeps_the_two_set_up_commands():
    """The developer guide: `make up STACK=dev` runs the main job, `make test` passes the tests."""
    text = README.read_text()
    block = text.split("## The two set-up commands\n", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines() if not line.startswith(" ")]
    assert commands == ["make up STACK=dev", "make test"]


def test_every_page_is_linked_from_the_readme_and_links_back():
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in local_links(README)}
    assert PAGES, "docs/ has no pages"
    assert [p.name for p in PAGES if p.resolve() not in linked] == [], "pages the README does not link"
    for page in PAGES:
        back = {(page.parent / target.partition("#")[0]).resolve() for target in local_links(page)}
        assert README.resolve() in back, f"{page.name} does not link back to the README"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_page_opens_with_a_title_and_a_summary(page):
    blocks = [b for b in page.read_text().split("\n\n") if b.strip()]
    assert blocks[0].startswith("# ") and "\n" not in blocks[0].strip(), f"{page.name}: a title first"
    summary = blocks[1]
    assert summary[0].isalpha() and len(summary) > 200, f"{page.name}: a paragraph that says what the page holds"


def test_the_generated_tables_are_where_make_readme_writes_them():
    from tools.docs_tables import PAGES as GENERATED_PAGES

    marked = {page: page.read_text().count(GENERATED) for page in PAGES}
    assert {page: count for page, count in marked.items() if count} == {
        page: len(builders) for page, builders in GENERATED_PAGES.items()
    }
    for page in GENERATED_PAGES:
        for marker in re.finditer(re.escape(GENERATED) + r".*-->\n(.*)\n", page.read_text()):
            assert marker.group(1).startswith("| "), f"{page.name}: a table right after {marker.group(0)!r}"


def test_a_stale_table_is_rewritten_and_nothing_else():
    """Rows-only tables too: the page keeps its header, and a changed first row is found by the marker."""
    from tools.docs_tables import CONFIGURATION, WATCHING, budgets, configuration_reference, replace_table

    text = WATCHING.read_text()
    rows = budgets()
    first = rows.splitlines()[0]
    stale = text.replace(first, first.replace("| 30 s |", "| 31 s |"), 1)
    assert stale != text and rows not in stale, "the budget table's first row changed: update this test"
    assert replace_table(stale, "core/deadline.py", rows) == text
    fewer = text.replace(rows, "\n".join(rows.splitlines()[1:]), 1)
    assert replace_table(fewer, "core/deadline.py", rows) == text
    page, whole = CONFIGURATION.read_text(), configuration_reference()  # a whole table, header included
    shorter = page.replace(whole, "\n".join(whole.splitlines()[:-1]), 1)
    assert shorter != page and replace_table(shorter, "core/config/schema.py", whole) == page
    with pytest.raises(ValueError, match="no '<!-- generated from nowhere.py"):
        replace_table(text, "nowhere.py", rows)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_page_is_read_in_one_sitting(page):
    lines = page.read_text().count("\n")
    assert lines < MAX_PAGE_LINES, f"{page.name} has {lines} lines: split it by the question each part answers"


def cited_files() -> list[Path]:
    """Every text file of ours that may cite a docs page: the top-level files and those under ``CITED_IN``."""
    files = [p for p in ROOT.iterdir() if p.is_file() and (p.suffix in TEXT or p.name == "Makefile")]
    for folder in CITED_IN:
        files += [
            p
            for p in (ROOT / folder).rglob("*")
            if p.suffix in TEXT and p.is_file() and not NOT_OURS.intersection(p.relative_to(ROOT).parts)
        ]
    return files


def dead_citations(text: str) -> list[str]:
    """The ``docs/<page>.md`` citations in ``text`` whose page, anchor or section heading does not exist."""
    dead = []
    for match in CITATION.finditer(CONTINUATION.sub(" ", text)):
        page = DOCS / match.group("page")
        if not page.exists():
            dead.append(f"{match.group(0)}: no page docs/{match.group('page')}")
            continue
        wanted = match.group("anchor") or (match.group("section") and slug(match.group("section")))
        if wanted and wanted not in anchors(page):
            dead.append(f"{match.group(0)}: no heading of docs/{match.group('page')} has the anchor #{wanted}")
    return dead


def test_a_cited_page_and_section_exist():
    text = 'see docs/testing.md "Test tiers"; docs/first-run.md#quota-rules (docs/cost.md\n# "Cost warning")'
    assert dead_citations(text) == []
    for stale in (
        f'{"docs"}/gone.md "Quota rules"',  # not one literal: test_project_files checks every path the tree names
        'docs/first-run.md "Quota rule"',
        "docs/first-run.md#quota",
        'docs/first-run.md, "GKE upgrades"',
        'echo "(docs/cost.md \\"Costs\\")"',
        "docs/cost.md\n    ('Start-up, before')",
    ):
        assert len(dead_citations(stale)) == 1, stale


def test_every_cited_docs_page_and_section_exists():
    dead = {}
    for path in cited_files():
        name = path.relative_to(ROOT).as_posix()
        if name == "tests/test_docs.py":  # its stale examples
            continue
        if found := dead_citations(path.read_text(errors="replace")):
            dead[name] = found
    assert dead == {}, 'cite a page and a heading that exist (docs/<page>.md "Section" or docs/<page>.md#anchor)'
