"""What a terminal shows of a text from elsewhere (``core/terminal.py``), the first pass of every redaction: nothing a
terminal would act on or hide reaches it, and nothing else is changed. The step programs' copy of the pattern
(``workloads/container/shown.py``) is tests/test_container_shown.py's."""

from __future__ import annotations

import tempfile
import unicodedata
from pathlib import Path

import pytest
from hypothesis import Phase, configuration, given, settings
from hypothesis import strategies as st

from core.terminal import HIDDEN, TERMINAL_CONTROLS, visible

pytestmark = pytest.mark.pure
configuration.set_hypothesis_home_dir(
    Path(tempfile.gettempdir()) / "tpu-rl-hypothesis"
)  # not the checkout's .hypothesis

PROPERTIES = settings(
    max_examples=150,
    deadline=None,
    database=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
)
"""The same examples on every run (a CI run cannot fail on a new draw), nothing written to the checkout."""

SEQUENCES = {
    "colour": "\x1b[1;31m",
    "reset": "\x1b[0m",
    "clear-screen": "\x1b[2J\x1b[H",
    "cursor-up-erase": "\x1b[1A\x1b[2K",
    "title": "\x1b]0;owned\x07",
    "hyperlink": "\x1b]8;;https://evil.example/\x1b\\",
    "hyperlink-end": "\x1b]8;;\x07",
    "clipboard": "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07",
    "dcs": "\x1bP1$r0m\x1b\\",
    "apc": "\x1b_payload\x1b\\",
    "reset-terminal": "\x1bc",
    "charset": "\x1b(0",
    "save-cursor": "\x1b7",
}
INVISIBLE = {
    "soft-hyphen": "\u00ad",
    "zero-width-space": "\u200b",
    "zero-width-joiner": "\u200d",
    "rlm": "\u200f",
    "rlo": "\u202e",
    "lri": "\u2066",
    "pdi": "\u2069",
    "word-joiner": "\u2060",
    "bom": "\ufeff",
    "tag-a": "\U000e0041",
    "cancel-tag": "\U000e007f",
    "language-tag": "\U000e0001",
    "variation-selector-1": "\ufe00",
    "variation-selector-17": "\U000e0100",
    "hangul-filler": "\u3164",
    "mongolian-vowel-separator": "\u180e",
    "interlinear-annotation": "\ufff9",
}
CONTROLS = {
    "nul": "\x00",
    "bell": "\x07",
    "backspace": "\b",
    "cr": "\r",
    "del": "\x7f",
    "csi-8bit": "\x9b",
}


@pytest.mark.parametrize("sequence", SEQUENCES.values(), ids=SEQUENCES.keys())
def test_an_escape_sequence_goes_whole(sequence):
    assert visible(f"before {sequence}after") == "before after"


@pytest.mark.parametrize("char", [*INVISIBLE.values(), *CONTROLS.values()], ids=[*INVISIBLE, *CONTROLS])
def test_a_control_or_an_invisible_character_goes(char):
    assert visible(f"hf_{char}_transfer") == "hf__transfer"


def test_an_escape_starts_a_sequence_as_a_terminal_reads_it():
    assert visible("a\x1bcd \x1b") == "ad ", "ESC c resets the terminal; a lone ESC at the end"
    assert visible("\x1b\x1b[31mred") == "red"


def test_a_hyperlink_keeps_its_text_and_loses_its_target():
    assert visible("see \x1b]8;;https://evil.example/\x1b\\the docs\x1b]8;;\x1b\\ now") == "see the docs now"


def test_an_open_string_ends_at_its_line_and_a_c1_introducer_is_one_character():
    assert visible("\x1b]0;a title never closed\nthe error") == "\nthe error"
    assert visible("32 more\x9b needed\x9d0;x\x9c") == "32 more needed0;x", "a UTF-8 terminal starts nothing with C1"


def test_tabs_newlines_and_what_is_drawn_stay():
    assert visible("line\r\nnext\ttab") == "line\nnext\ttab"
    drawn = "naïve café — ok\n\t✓ 中文 עברית ❤️ ©️ 👍🏽 e\u0301"
    assert visible(drawn) == drawn
    assert visible("👨\u200d👩\u200d👧") == "👨👩👧", "a ZWJ sequence's emoji are drawn one by one"


def test_a_variation_selector_stays_only_as_an_emojis_presentation():
    assert visible("\u2764\ufe0f and \u2764\ufe0e") == "\u2764\ufe0f and \u2764\ufe0e"
    assert visible("hf_a\ufe0fbc") == "hf_abc", "after a letter: inside a token"
    smuggled = "\U0001f600" + "".join(chr(0xFE00 + b % 16) + chr(0xE0100 + b) for b in b"hidden")
    assert visible(smuggled) == "\U0001f600", "bytes encoded as selectors (emoji smuggling)"
    assert visible("\u2764\ufe0f\ufe0f") == "\u2764", "a run of selectors goes whole"


def test_line_and_paragraph_separators_are_line_breaks():
    assert visible("one\u2028two\u2029three") == "one\ntwo\nthree"


HIDDEN_CHARS = st.sampled_from([*SEQUENCES.values(), *INVISIBLE.values(), *CONTROLS.values()])
DRAWN = st.text(
    st.characters(
        blacklist_categories=("Cc", "Cf", "Cs", "Zl", "Zp", "Mn"), blacklist_characters="\u115f\u1160\u3164\uffa0"
    )
    | st.sampled_from("\n\t ")
)
"""Text a terminal draws as written: no control, format or line separator character, no mark (a variation selector
is one), no blank letter."""


@PROPERTIES
@pytest.mark.slow
@given(DRAWN, st.lists(st.tuples(st.integers(0, 10_000), HIDDEN_CHARS), max_size=20))
def test_what_is_drawn_is_kept_and_the_rest_goes_wherever_it_is(text, inserts):
    cuts = sorted((at % (len(text) + 1), inserted) for at, inserted in inserts)
    hostile, done = "", 0
    for at, inserted in cuts:
        hostile, done = hostile + text[done:at] + inserted, at
    hostile += text[done:]
    assert visible(text) == text
    assert visible(hostile) == text
    assert visible(visible(hostile)) == visible(hostile)


@PROPERTIES
@pytest.mark.slow
@given(st.text())
def test_nothing_a_terminal_acts_on_is_left(text):
    shown = visible(text)
    assert not TERMINAL_CONTROLS.search(shown) and not HIDDEN.search(shown) and visible(shown) == shown
    assert not [c for c in shown if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") and c not in "\n\t"]
