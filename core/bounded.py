"""One bounded read: the exception and the cap policy of every network read the project makes (pure: no network
library; ``infra/transports.py`` applies it to each transport the clients use).

The policy, per reply:

- a ``Cap``: at most ``limit`` bytes, chosen by the reader for what its replies hold, and for a request of one
  byte range (``Range: bytes=a-b``) at most ``b - a + 1`` (``Cap.for_range``);
- the limit holds twice, for the bytes received and for the bytes inflated: a reply in gzip or deflate (all a
  reader asks for, ``ACCEPT_ENCODING``) is inflated here at most ``limit + 1`` bytes at a time (``zlib``'s
  ``max_length``), so a gzip bomb costs the cap, never its inflated size; any other content encoding is
  ``ReplyEncodingError``;
- a reply over its cap is ``ReplyTooLargeError``, one line: ``<what> replied more than <N> MiB (<fix>)``;
  a reader whose server may send a little more than it asked for (a pod's log: ``limitBytes`` "may return slightly
  more") keeps the first ``limit`` bytes instead (``Cap.cut``).

``ReplyTooLargeError`` is ``core.hf_model``'s class, re-exported, not a second one: the step containers' programs
raise and catch it and import nothing of the project but core's files shipped beside them (``core/hf_model.py``
among them). One class: a reader catches one exception whichever side raised it.

A GCS object read is ``read_object``, also hf_model's, re-exported: google-cloud-storage's ``Blob.download_to_file``
into a sink that holds at most the cap (for a range, its length) and stops the download at the first chunk past it;
its line keeps hf_model's words (``<what>: the server sent more than the <N> bytes asked for``), which the
containers print for the same reads.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from core.errors import TpuRlError
from core.hf_model import ReplyTooLargeError, read_object
from core.redact import scrub

__all__ = [
    "ACCEPT_ENCODING",
    "Cap",
    "ReplyEncodingError",
    "ReplyTooLargeError",
    "inflatable",
    "read",
    "read_object",
    "size",
    "streamed",
]

MiB = 1024 * 1024
ACCEPT_ENCODING = "gzip, deflate"
"""What every reader asks for (``Accept-Encoding``): the encodings ``streamed`` inflates within the cap."""
_INFLATED = frozenset({"gzip", "x-gzip", "deflate"})
_PLAIN = frozenset({"", "identity"})
_RANGE = re.compile(r"bytes=(\d{1,18})-(\d{1,18})")


class ReplyEncodingError(TpuRlError):
    """A reply in a content encoding the reader did not ask for, or that does not inflate (one line)."""


def size(n: int) -> str:
    """``n`` bytes as the messages say it: MiB when whole, else KiB when whole, else bytes."""
    for unit, name in ((MiB, "MiB"), (1024, "KiB")):
        if n >= unit and n % unit == 0:
            return f"{n // unit} {name}"
    return f"{n} bytes"


@dataclass(frozen=True)
class Cap:
    """The bound of one reader's replies: ``limit`` bytes received and inflated; ``fix``, what the line tells the
    operator to check; ``cut``: keep the first ``limit`` bytes instead of refusing the reply."""

    limit: int
    fix: str
    cut: bool = False

    def exceeded(self, what: str) -> ReplyTooLargeError:
        """The one line for a reply of ``what`` (a request, ``GET <url>``) past the cap."""
        return ReplyTooLargeError(f"{scrub(what, limit=200)} replied more than {size(self.limit)} ({self.fix})")

    def for_range(self, header: str | None) -> Cap:
        """This cap for a request with ``Range: header``: one byte range ``bytes=a-b`` holds at most its
        ``b - a + 1`` bytes (a server that ignores the range stops there, not at the whole file)."""
        found = _RANGE.fullmatch(header.strip()) if header else None
        if found is None or int(found.group(2)) < int(found.group(1)):
            return self
        return replace(self, limit=min(self.limit, int(found.group(2)) - int(found.group(1)) + 1))


def inflatable(encoding: str) -> str:
    """A reply's ``Content-Encoding`` as ``streamed`` reads it ("" for none); ``ReplyEncodingError`` for one it
    does not inflate (a reader asks for ``ACCEPT_ENCODING`` only)."""
    encoding = encoding.strip().lower()
    if encoding in _PLAIN:
        return ""
    if encoding not in _INFLATED:
        raise ReplyEncodingError(f"content encoding {scrub(encoding, limit=20)!r}")
    return encoding


def streamed(chunks: Iterable[bytes], encoding: str, cap: Cap, what: str) -> Iterator[bytes]:
    """The reply's bytes as they arrive (``chunks``, as sent: compressed when ``encoding`` says so), inflated,
    within ``cap``: ``ReplyTooLargeError`` (or, ``cap.cut``, the end) as soon as more than ``cap.limit`` bytes were
    received or inflated; never more than ``cap.limit + 1`` inflated bytes in memory at once."""
    encoding = inflatable(encoding)
    decoder = zlib.decompressobj(32 + zlib.MAX_WBITS) if encoding else None  # gzip or zlib, by its header
    limit = cap.limit
    received = produced = 0
    for chunk in chunks:
        received += len(chunk)
        if received > limit and not cap.cut:
            raise cap.exceeded(what)
        if decoder is not None:
            try:
                chunk = decoder.decompress(chunk, limit + 1 - produced)
            except zlib.error:
                raise ReplyEncodingError(f"{encoding} that does not inflate") from None
            over = bool(decoder.unconsumed_tail)
        else:
            over = False
        produced += len(chunk)
        if over or produced > limit or received > limit:
            if not cap.cut:
                raise cap.exceeded(what)
            yield chunk[: max(0, len(chunk) - (produced - limit))]
            return
        yield chunk


def read(chunks: Iterable[bytes], encoding: str, cap: Cap, what: str) -> bytes:
    """The whole reply, inflated, within ``cap`` (``streamed``)."""
    return b"".join(streamed(chunks, encoding, cap, what))
