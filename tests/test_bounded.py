"""The one bounded read (``core.bounded``): the policy alone, then each transport's adapter (``infra.transports``)
against a loopback server, and that every reader of the project reads through it. The readers' own lines against
hostile servers are in tests/test_hostile_servers.py (every client, every mode) and tests/test_capacity_hostile.py.
"""

from __future__ import annotations

import ast
import gzip
import zlib
from pathlib import Path

import pytest

from core import bounded, hf_model
from core.bounded import Cap, ReplyEncodingError, ReplyTooLargeError
from core.errors import TpuRlError
from tests.loopback import QuietHandler, serve
from tests.source_files import nodes

ROOT = Path(__file__).resolve().parent.parent
CAP = Cap(10, "check the fix")
BODY = b'{"a": 1}'


# ---------------------------------------------------------------------------------------------
# The policy (pure)


@pytest.mark.pure
def test_one_exception_for_both_sides():
    """The containers' programs raise hf_model's class; every other reader the one core.bounded names: the same."""
    assert ReplyTooLargeError is hf_model.ReplyTooLargeError
    assert issubclass(ReplyTooLargeError, TpuRlError) and issubclass(ReplyEncodingError, TpuRlError)


@pytest.mark.pure
def test_the_line_names_what_the_cap_and_the_fix():
    assert str(Cap(4 << 20, "check a proxy").exceeded("GET https://h/p")) == (
        "GET https://h/p replied more than 4 MiB (check a proxy)"
    )
    assert bounded.size(64 * 1024) == "64 KiB"
    assert bounded.size(100_001) == "100001 bytes"
    assert str(CAP.exceeded("GET \x1b[31mx\n")) == "GET x replied more than 10 bytes (check the fix)", "scrubbed"


@pytest.mark.pure
def test_plain_gzip_and_deflate_bodies_within_the_cap():
    assert bounded.read([BODY], "", CAP, "w") == BODY
    assert bounded.read([BODY], "identity", CAP, "w") == BODY
    assert bounded.read([gzip.compress(BODY)], "gzip", Cap(100, ""), "w") == BODY
    assert bounded.read([gzip.compress(BODY)], " X-GZIP ", Cap(100, ""), "w") == BODY
    assert bounded.read([zlib.compress(BODY)], "deflate", Cap(100, ""), "w") == BODY
    assert bounded.read([b"x" * 10], "", CAP, "w") == b"x" * 10, "exactly the cap is allowed"


@pytest.mark.pure
def test_past_the_cap_received_or_inflated_is_one_line():
    with pytest.raises(ReplyTooLargeError, match=r"^GET u replied more than 10 bytes \(check the fix\)$"):
        bounded.read([b"x" * 6, b"x" * 5], "", CAP, "GET u")
    with pytest.raises(ReplyTooLargeError):  # few bytes received, many inflated
        bounded.read([gzip.compress(b"\0" * 1000)], "gzip", Cap(100, ""), "w")
    padded = gzip.compress(b"x") + b"\0" * 200  # little inflated, more received than the cap
    with pytest.raises(ReplyTooLargeError):
        bounded.read([padded], "gzip", Cap(100, ""), "w")


@pytest.mark.pure
def test_a_gzip_bomb_is_inflated_up_to_the_cap_only():
    inflated: list[int] = []
    cap = Cap(1 << 20, "")
    bomb = gzip.compress(b"\0" * (16 << 20), compresslevel=1)  # 16 MiB of zeros in about 70 KB
    with pytest.raises(ReplyTooLargeError):
        for chunk in bounded.streamed([bomb[i : i + 4096] for i in range(0, len(bomb), 4096)], "gzip", cap, "w"):
            inflated.append(len(chunk))
    assert sum(inflated) <= cap.limit, "never the bomb's 16 MiB"


@pytest.mark.pure
def test_an_encoding_not_asked_for_or_that_does_not_inflate():
    with pytest.raises(ReplyEncodingError, match="content encoding 'br'"):
        bounded.read([BODY], "br", CAP, "w")
    with pytest.raises(ReplyEncodingError, match="gzip that does not inflate"):
        bounded.read([b"not gzip at all"], "gzip", Cap(100, ""), "w")


@pytest.mark.pure
def test_a_cut_cap_keeps_the_first_bytes():
    cut = Cap(10, "", cut=True)
    assert bounded.read([b"x" * 6, b"y" * 6, b"z" * 6], "", cut, "w") == b"x" * 6 + b"y" * 4
    assert bounded.read([gzip.compress(b"a" * 1000)], "gzip", cut, "w") == b"a" * 10
    assert bounded.read([b"x" * 4], "", cut, "w") == b"x" * 4


@pytest.mark.pure
def test_one_byte_range_caps_at_its_length():
    cap = Cap(1000, "f")
    assert cap.for_range("bytes=0-7").limit == 8
    assert cap.for_range(" bytes=10-19 ").limit == 10
    assert cap.for_range("bytes=0-99999").limit == 1000, "never above the reader's cap"
    for header in (None, "", "bytes=5-1", "bytes=0-", "bytes=0-1,4-5", "items=0-1"):
        assert cap.for_range(header) is cap, header


# ---------------------------------------------------------------------------------------------
# Every reader reads through it


PACKAGES = ("core", "infra", "workloads", "tools", "program", "policy/tpu_rl_policies")
ONE_EXCEPTION = {
    "ReplyTooLargeError": "core/hf_model.py",
    "ReplyEncodingError": "core/bounded.py",
}


def _defined_classes(path: Path) -> set[str]:
    return {node.name for node in nodes(path, ast.ClassDef) if isinstance(node, ast.ClassDef)}


@pytest.mark.pure
def test_the_exceptions_are_defined_once():
    """No reader defines its own: the one home is core.bounded (hf_model's class re-exported)."""
    for path in sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text()
        for name, home in ONE_EXCEPTION.items():
            if name in text and name in _defined_classes(path):  # a file without the name defines no such class
                assert rel == home, f"{rel} defines its own {name}; use core.bounded's"


READERS = {
    "infra/gcp/capacity/reads.py": "cap_session(",
    "workloads/observe/artifacts.py": "cap_session(",
    "workloads/preflight.py": "capped_transport(",
    "infra/k8s/live.py": "read_response(",
    "tools/logs.py": "read_response(",
}
"""Each client of the project and the adapter it mounts (``infra.transports``)."""


@pytest.mark.pure
def test_every_reader_mounts_an_adapter_and_reads_no_reply_by_hand():
    for rel, adapter in READERS.items():
        text = (ROOT / rel).read_text()
        assert adapter in text, f"{rel} does not read through {adapter.rstrip('(')}"
        assert ".read(MAX_" not in text and "decompressobj" not in text, f"{rel} reads a reply by hand"


# ---------------------------------------------------------------------------------------------
# Each transport's adapter (infra.transports) against a loopback server


PLAIN = b"p" * 5000
PACKED = gzip.compress(b"\0" * 100_000)  # about 100 bytes that inflate to 100 kB


class Replies(QuietHandler):
    """``/plain``: 5000 plain bytes; ``/packed``: gzip that inflates to 100 kB; both ignore ``Range``."""

    def do_GET(self) -> None:  # noqa: N802
        if self.path.split("?")[0] == "/packed":
            self.send_body(200, PACKED, **{"Content-Encoding": "gzip"})
        else:
            self.send_body(200, PLAIN)


@pytest.fixture
def server():
    with serve(Replies) as url:
        yield url


FIX = "check the test server"


def test_requests_every_reply_within_the_cap_a_streamed_one_passed_on(server):
    import requests

    from infra.transports import cap_session

    with requests.Session() as session:
        cap_session(session, Cap(6000, FIX))
        assert session.get(f"{server}/plain?token=secret", timeout=5).content == PLAIN
        with pytest.raises(ReplyTooLargeError) as err:
            session.get(f"{server}/packed?token=secret", timeout=5)
        assert str(err.value) == f"GET {server}/packed replied more than 6000 bytes ({FIX})", "no query shown"
        with pytest.raises(ReplyTooLargeError, match="replied more than 8 bytes"):
            session.get(f"{server}/plain", headers={"Range": "bytes=0-7"}, timeout=5)
        # A media download (stream=True) is its reader's to bound (core.bounded.read_object's sink).
        with session.get(f"{server}/packed", stream=True, timeout=5) as streamed:
            assert len(streamed.content) == 100_000


def test_httpx_the_hub_client_reads_through_the_cap(server):
    import httpx2

    from infra.transports import capped_transport

    with httpx2.Client(transport=capped_transport(Cap(6000, FIX)), timeout=5) as client:
        assert client.get(f"{server}/plain").content == PLAIN
        with pytest.raises(ReplyTooLargeError, match=f"^GET {server}/packed replied more than 6000 bytes"):
            client.get(f"{server}/packed")
        with pytest.raises(ReplyTooLargeError, match="replied more than 8 bytes"):
            client.get(f"{server}/plain", headers={"Range": "bytes=0-7"})


def test_urllib3_the_cluster_reads_through_the_cap(server):
    import urllib3

    from infra.transports import read_response

    pool = urllib3.PoolManager()

    def get(path: str) -> object:
        return pool.request("GET", f"{server}{path}", preload_content=False, timeout=5)

    assert read_response(get("/plain"), Cap(6000, FIX), "GET /plain") == PLAIN
    with pytest.raises(
        ReplyTooLargeError, match=r"^GET /packed replied more than 6000 bytes \(check the test server\)$"
    ):
        read_response(get("/packed"), Cap(6000, FIX), "GET /packed")
    assert read_response(get("/packed"), Cap(6000, FIX, cut=True), "GET /packed") == b"\0" * 6000
    assert read_response(get("/plain"), Cap(6000, FIX), "GET /plain") == PLAIN, "the pool still serves"


def test_the_storage_client_reads_its_json_through_the_cap(gcs, monkeypatch):
    """storage_client's session: a listing past the cap is one line; an object larger than the JSON cap is read
    whole (a media download, bounded by read_object)."""
    from workloads.observe import artifacts
    from workloads.observe.artifacts import StorageError, storage_client

    gcs.create_bucket("bkt")
    gcs.bucket("bkt").blob("big").upload_from_string(b"x" * 70_000)
    monkeypatch.setattr(artifacts, "REPLY_CAP", Cap(300, "check STORAGE_EMULATOR_HOST or a proxy in the way"))
    client = storage_client()
    assert type(client._http.get_adapter("http://127.0.0.1/")).__name__ == "CappedAdapter"
    blob = client.bucket("bkt").blob("big")
    assert len(bounded.read_object(blob, 100_000, "reading gs://bkt/big")) == 70_000
    with pytest.raises(StorageError, match=r"^listing gs://bkt/: GET http://[^ ]+/storage/v1/b/bkt/o replied more"):
        artifacts.bounded(client, "listing gs://bkt/", lambda call: [b.name for b in client.list_blobs("bkt", **call)])
