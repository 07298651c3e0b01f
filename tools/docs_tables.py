"""Rewrite the docs' generated tables from their sources: `python -m tools.docs_tables` (`make readme`).

Each table sits in the page that explains it (``PAGES``: docs/configuration.md, docs/upgrades.md,
docs/watching-a-run.md) right under a ``<!-- generated from|by SOURCE ... -->`` marker and ends at the first blank
line. The tests that keep them current (test_project_files.py, test_lifecycle.py, test_docs.py) fail with the new
text when one is stale, and this writes it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from core.config.fields import DERIVED, REQUIRED, Field
from core.config.load import REFUSED_KEYS
from core.config.schema import FIELDS
from core.deadline import BUDGETS
from tools.lifecycle_walk import table, walk
from tools.process import entry_point
from tools.stack_files import ROOT

CONFIGURATION = ROOT / "docs" / "configuration.md"
"""The configuration reference and the refused ``extraArgs`` keys."""
UPGRADES = ROOT / "docs" / "upgrades.md"
"""What re-runs when a key changes."""
WATCHING = ROOT / "docs" / "watching-a-run.md"
"""The network budgets."""


def shown(field: Field) -> str:
    """A field's default as the reference shows it."""
    if field.default is REQUIRED:
        return "(required)"
    if field.default is DERIVED:
        return f"`{field.shown_default}`" if field.shown_default is not None else "(derived)"
    if field.secret:
        return "(secret)"
    if field.default in ("", {}, []):
        return "(empty)"
    if isinstance(field.default, bool):
        return f"`{str(field.default).lower()}`"
    if isinstance(field.default, list):
        return "`" + ", ".join(field.default) + "`"
    return f"`{field.default}`"


def configuration_reference() -> str:
    """docs/configuration.md's configuration reference: every key, its default and what is allowed."""
    lines = ["| key | default | allowed | meaning |", "| --- | --- | --- | --- |"]
    for field in FIELDS:
        allowed = field.read.describe()  # type: ignore[attr-defined]  # every reader describes itself
        lines.append(f"| `{field.key}` | {shown(field)} | {allowed.replace('|', '/')} | {field.doc} |")
    return "\n".join(lines)


def refused_keys() -> str:
    """docs/configuration.md's list of refused keys (rows after its header)."""
    return "\n".join(f"| `{key}` | {reason} |" for key, reason in sorted(REFUSED_KEYS.items()))


def budgets() -> str:
    """docs/watching-a-run.md's table of budgets (rows after its header)."""
    return "\n".join(f"| {b.what} | {b.total:g} s | {b.connect:g} s | {b.read:g} s |" for b in BUDGETS.values())


def lifecycle() -> str:
    """The "what re-runs" table of the prod stack (a walk of every key: a few seconds)."""
    return table(walk("prod"))


PAGES: dict[Path, tuple[tuple[str, Callable[[], str]], ...]] = {
    CONFIGURATION: (("core/config/schema.py", configuration_reference), ("core/config/load.py", refused_keys)),
    UPGRADES: (("tools/lifecycle_walk.py", lifecycle),),
    WATCHING: (("core/deadline.py", budgets),),
}
"""Each page and its tables: the source its ``<!-- generated from|by SOURCE ... -->`` marker names, and the
builder of the table (a whole table, or the rows under the header the page keeps)."""


def replace_table(text: str, source: str, block: str) -> str:
    """``text`` with the table under the marker that names ``source`` replaced by ``block``: the whole table
    when ``block`` has its own header, else every row under the page's header and separator. Found by its
    marker, so a table whose first row changed is rewritten too."""
    marker = re.search(r"^<!-- generated (?:from|by) " + re.escape(source) + r" .*-->\n", text, re.MULTILINE)
    if marker is None:
        raise ValueError(f"no '<!-- generated from {source} ... -->' marker")
    start = marker.end()
    end = text.find("\n\n", start)
    end = len(text) if end < 0 else end
    lines = block.splitlines()
    if len(lines) < 2 or not lines[1].startswith("| ---"):  # rows only: keep the page's header and separator
        header = text[start:end].splitlines()[:2]
        block = "\n".join([*header, *lines])
    return text[:start] + block + text[end:]


def main() -> int:
    for page, builders in PAGES.items():
        text = page.read_text()
        new = text
        for source, build in builders:
            new = replace_table(new, source, build())
        name = page.relative_to(ROOT).as_posix()
        if new != text:
            page.write_text(new)
            print(f"{name}: generated tables rewritten")
        else:
            print(f"{name}: generated tables are current")
    return 0


if __name__ == "__main__":
    entry_point(main)
