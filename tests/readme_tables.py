"""Rewrite the README's generated blocks from their sources: `python -m tests.readme_tables` (`make readme`).

Each block starts with its table's header line and ends at the first blank line; the tests that keep
them current (test_project_files.py, test_lifecycle.py) fail with the new text when one is stale, and
this writes it.
"""

from __future__ import annotations

from collections.abc import Callable

from core.config.load import refused_keys_table
from core.config.schema import reference_table as config_table
from core.deadline import reference_table as budget_table
from tests.lifecycle_walk import table as lifecycle_table
from tests.lifecycle_walk import walk
from tools.stack_files import ROOT

README = ROOT / "README.md"
BLOCKS: tuple[Callable[[], str], ...] = (
    config_table,
    refused_keys_table,
    budget_table,
    lambda: lifecycle_table(walk("prod")),
)


def replace_block(text: str, block: str) -> str:
    """``text`` with the block that starts with ``block``'s first line replaced by ``block``."""
    header = block.splitlines()[0]
    start = text.index(header)
    end = text.index("\n\n", start)
    return text[:start] + block + text[end:]


def main() -> None:
    text = README.read_text()
    new = text
    for block in BLOCKS:
        new = replace_block(new, block())
    if new != text:
        README.write_text(new)
        print("README.md: generated blocks rewritten")
    else:
        print("README.md: generated blocks are current")


if __name__ == "__main__":
    main()
