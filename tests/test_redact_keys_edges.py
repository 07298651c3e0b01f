"""Where a PEM body cut from its ``BEGIN`` line starts when it is longer than the 64 KiB looked back from its ``END``
line (``core/redact_keys.py``): at the start of the line the look-back cuts, the text before that line kept as
written."""

from __future__ import annotations

import base64
import hashlib

import pytest

from core.redact_keys import REDACTED_KEY, private_keys

pytestmark = pytest.mark.pure

END = "-----END PRIVATE KEY-----"
LINES = [base64.b64encode(hashlib.sha512(str(i).encode()).digest()[:48]).decode() for i in range(1009)]
"""1,009 lines of 64 base64 characters and a newline: 65,585 characters, so 65,536 back from the ``END`` line falls
49 characters into the first line."""
BODY = "\n".join(LINES)


@pytest.mark.parametrize(
    "before",
    ["I1205 12:00:01 cut key:\n", "\n", ""],
    ids=["after-a-log-line", "after-a-blank-line", "at-the-start"],
)
def test_a_body_longer_than_the_look_back_goes_from_the_start_of_the_line_it_cuts(before):
    """Every character of the cut line is redacted (none of a key's lines is left, not even its first characters),
    and nothing before that line is: not the log line, not a blank line, not the newline that ends them."""
    text = f"{before}{BODY}\n{END}\nI1205 12:00:02 next"
    assert len(f"{BODY}\n") - 65536 == 49
    assert private_keys(text) == f"{before}{REDACTED_KEY}\nI1205 12:00:02 next"


@pytest.mark.parametrize(
    ("run", "known"),
    [
        (base64.b64encode(b"secretkey-and-more").decode(), "secretkey-and-moreX"),
        ("4gRieV5RRJRFF4GVgcodkkjE", "(vI#\ny^QD"),
    ],
    ids=["all-but-the-last-letter", "a-secret-holding-a-newline"],
)
def test_base64_is_redacted_only_when_one_of_its_alignments_holds_the_secret(run, known):
    """Each of a run's four alignments is decoded and searched apart: a secret is not found across two of them (the
    first ends with all of it but its last letter; the secret's newline is where two alignments meet), so the run,
    which holds no secret, is left as it is."""
    assert private_keys(f"data: {run}\n", [known]) == f"data: {run}\n"
