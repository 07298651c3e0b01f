"""Rewrite the docs' generated tables from their sources: `python -m tests.readme_tables` (`make readme`).

Each table sits in the page that explains it (``PAGES``: docs/configuration.md, docs/upgrades.md,
docs/watching-a-run.md) right under a ``<!-- generated from|by SOURCE ... -->`` marker and ends at the first blank
line. The tests that keep them current (test_project_files.py, test_lifecycle.py, test_docs.py) fail with the new
text when one is stale, and this writes it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from core.config.load import refused_keys_table
from core.config.schema import reference_table as config_table
from core.deadline import reference_table as budget_table
from tests.lifecycle_walk import table as lifecycle_table
from tests.lifecycle_walk import walk
from tools.stack_files import ROOT

CONFIGURATION = ROOT / "docs" / "configuration.md"
"""The configuration reference and the refused ``extraArgs`` keys."""
UPGRADES = ROOT / "docs" / "upgrades.md"
"""What re-runs when a key changes."""
WATCHING = ROOT / "docs" / "watching-a-run.md"
"""The network budgets."""


def lifecycle() -> str:
    """The "what re-runs" table of the prod stack (a walk of every key: a few seconds)."""
    return lifecycle_table(walk("prod"))


PAGES: dict[Path, tuple[tuple[str, Callable[[], str]], ...]] = {
    CONFIGURATION: (("core/config/schema.py", config_table), ("core/config/load.py", refused_keys_table)),
    UPGRADES: (("tests/lifecycle_walk.py", lifecycle),),
    WATCHING: (("core/deadline.py", budget_table),),
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


def main() -> None:
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


if __name__ == "__main__":
    main()
