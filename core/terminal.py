"""What a terminal would draw of a text from elsewhere, and nothing it would act on or hide: the first pass of every
redaction (``core.redact``), so the secret rules read the text a person reads.

Removed, not shown as a marker: a marker inside a token (``hf_ab<U+200B>cd...``) would cut it into halves that no rule
recognises, and the text left is what the reader sees with the controls inert (bidirectional text in its logical
order, no hidden payload): the removal hides nothing the terminal would have shown.

- ANSI escape sequences, whole: CSI (colours, cursor moves, clear-screen), OSC (window titles, OSC 8 hyperlinks and
  their targets, OSC 52 clipboard writes), DCS, SOS, PM and APC strings, and the other ``ESC`` sequences (``ESC c``
  resets the terminal). A string left open ends at the end of its line.
- The C0 and C1 control characters but tab and newline (``\\r`` too: a CRLF end reads as LF, and a lone one cannot
  overwrite what came before it on its line).
- Invisible characters: every format character (Unicode category Cf: the soft hyphen, zero-width space and joiners,
  bidirectional marks, embeddings, overrides and isolates, the word joiner, invisible operators, the byte order mark,
  interlinear annotations, the tag characters U+E0000-E007F) and the characters that draw as nothing (the combining
  grapheme joiner, Hangul fillers, Khmer inherent vowels, Mongolian free variation selectors).
- Variation selectors where they can carry text: every one (U+FE00-FE0F, U+E0100-E01EF) but a single text or emoji
  presentation selector (U+FE0E, U+FE0F) right after a symbol or an emoji (``❤️`` stays; a run of selectors, the
  "emoji smuggling" encoding of bytes, goes, and so does a selector after a letter or a digit, inside a token).

The line and paragraph separators (U+2028, U+2029) are line breaks: newlines.

The step programs that print text from elsewhere (``workloads/container/``: a Hub or GCS error, a record's field, a line
of train_rl's log) remove ``HIDDEN`` too, through the one module they share, ``workloads/container/shown.py``: they
cannot import ``core``, so it holds the pattern as written here, and ``tests/test_container_shown.py`` checks that it is
this one.
"""

from __future__ import annotations

import re

ESCAPE_SEQUENCES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"  # CSI: parameters, intermediates, the final byte
    r"|\x1b[]PX^_][^\n\x07\x1b\x9c]*(?:\x1b\\|\x9c|\x07)?"  # OSC, DCS, SOS, PM, APC strings, to ST or BEL
    r"|\x1b[ -/]*[0-~]"  # every other ESC sequence (charsets, ESC 7/8, ESC c)
)
"""ANSI (ECMA-48) escape sequences, whole; an open string (no ``ST`` or ``BEL``) to the end of its line. A C1
introducer (U+009B, U+009D...) is a control character alone (``CONTROLS``): a UTF-8 terminal does not start a sequence
with it, so what follows it is text."""
CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""The C0 and C1 control characters but tab (``\\t``) and newline (``\\n``)."""
TERMINAL_CONTROLS = re.compile(f"{ESCAPE_SEQUENCES.pattern}|{CONTROLS.pattern}")
"""What a terminal acts on: the escape sequences, then any control character left."""
INVISIBLE = re.compile(
    "[\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160\u17b4\u17b5\u180b-\u180f"
    "\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufeff\uffa0\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e007f]"
)
"""Characters a terminal draws as nothing (the module's docstring): every format character (Cf) of Unicode 15, and the
blank letters and marks."""
LINE_SEPARATORS = str.maketrans({"\u2028": "\n", "\u2029": "\n"})
"""The Unicode line and paragraph separators, which are line breaks (``str.split`` folds them as whitespace)."""
VARIATION_SELECTORS = re.compile(
    "[\ufe00-\ufe0d\U000e0100-\U000e01ef]"
    "|(?<![\u00a9\u00ae\u203c\u2049\u2100-\u2bff\u3030\u303d\u3297\u3299\U0001f000-\U0001faff])[\ufe0e\ufe0f]"
    "|[\ufe0e\ufe0f](?=[\ufe00-\ufe0f\U000e0100-\U000e01ef])"
)
"""Every variation selector but a lone U+FE0E or U+FE0F right after a symbol or emoji (the module's docstring)."""
HIDDEN = re.compile("|".join(p.pattern for p in (ESCAPE_SEQUENCES, CONTROLS, INVISIBLE, VARIATION_SELECTORS)))
"""All of it in one pattern, one pass: at each character an escape sequence first, whole, then a control character,
an invisible character, a variation selector. ``workloads/container/shown.py`` holds this pattern as written here (the
step programs cannot import ``core``)."""


def visible(text: str) -> str:
    """``text`` as a terminal would draw it, nothing it would act on or hide (the module's docstring). Newlines and
    tabs stay."""
    if text.isascii():
        return TERMINAL_CONTROLS.sub("", text)  # HIDDEN's, faster: the rest of HIDDEN is of other characters
    return HIDDEN.sub("", text).translate(LINE_SEPARATORS)
