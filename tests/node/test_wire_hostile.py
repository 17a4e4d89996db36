"""The node client's HTTP/1.1 (gateway/node/wire.py) against a hostile node, judged by a reference parser.

The node here is a fake (an asyncio server on 127.0.0.1 writing raw bytes): the hostile node is the
subject, and no real node sends interim answers, stray bytes or broken framing on command. Each case's
bytes go to ``WirePool`` over a real socket and to h11 (the reference: a pure-Python HTTP/1.1 parser),
and both must reach the same verdict: the caller's answer (status and body) or a failure, and whether
the connection may carry the next call. Then a second call on the same pool must get its own answer,
never a byte of the first's. Hypothesis cuts every case into reads at generated places (the same cuts
every run: tests/conftest.py's replay profile).
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass

import h11
import pytest
import uvloop
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.node.wire import MAX_HEAD_BYTES, AnswerBudget, AnswerTooLarge, WireError, WirePool

LIMIT = 4096  # the answer-size bound both sides apply (the gateway's is 64 MiB)
B_ANSWER = b'"B"'  # what the node answers every call after the case's
Verdict = tuple[object, ...]


def ok(body: bytes, *headers: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\n%sContent-Length: %d\r\n\r\n%s" % (
        b"".join(h + b"\r\n" for h in headers),
        len(body),
        body,
    )


def chunked(*chunks: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"".join(
        b"%x\r\n%s\r\n" % (len(c), c) for c in (*chunks, b"")
    )


@dataclass(frozen=True)
class Case:
    name: str
    raw: bytes
    closes: bool = False  # the node closes the connection after writing
    drip: bool = False  # one byte a read, a millisecond apart


A = b'{"jsonrpc":"2.0","id":0,"result":"A"}'
EVIL_199 = b"HTTP/1.1 199 X\r\nContent-Length: 5\r\n\r\nEVIL!" + ok(b"ok")  # issue 63's: was (200, b"EVIL!ok")
CASES = [
    Case("100 Continue before the answer", b"HTTP/1.1 100 Continue\r\n\r\n" + ok(A)),
    Case("102 Processing before the answer", b"HTTP/1.1 102 Processing\r\n\r\n" + ok(A)),
    Case(
        "103 Early Hints before the answer", b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n" + ok(A)
    ),
    Case(
        "several interim answers",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 199 Misc\r\n\r\n" + ok(A),
    ),
    Case("an interim answer with a Content-Length", b"HTTP/1.1 100 Continue\r\nContent-Length: 5\r\n\r\n" + ok(A)),
    # An interim answer has no content (RFC 9110, 15.2), whatever its framing says: the byte after its head
    # begins the next answer. llhttp reads a body for a 1xx other than 100-103 (issue 63).
    Case("an interim answer with a body", EVIL_199),
    Case("a 199 with a Content-Length, then the answer", b"HTTP/1.1 199 X\r\nContent-Length: 5\r\n\r\n" + ok(A)),
    Case("a 104 with a Content-Length, then the answer", b"HTTP/1.1 104 X\r\nContent-Length: 5\r\n\r\n" + ok(A)),
    Case(
        "an interim answer with a Content-Length over the bound",
        b"HTTP/1.1 199 X\r\nContent-Length: %d\r\n\r\n" % (LIMIT + 1) + ok(A),
    ),
    Case(
        "an interim answer whose body is a whole answer",
        b"HTTP/1.1 199 X\r\nContent-Length: %d\r\n\r\n" % len(ok(b"EVIL")) + ok(b"EVIL") + ok(A),
    ),
    Case(
        "an interim answer with chunks",
        b"HTTP/1.1 199 X\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nEVIL!\r\n0\r\n\r\n" + ok(A),
    ),
    Case(
        "an interim answer saying chunked, then the answer",
        b"HTTP/1.1 199 X\r\nTransfer-Encoding: chunked\r\n\r\n" + ok(A),
    ),
    Case("an interim answer with Connection: close", b"HTTP/1.1 199 X\r\nConnection: close\r\n\r\n" + ok(A)),
    Case("an HTTP/1.0 interim answer", b"HTTP/1.0 199 X\r\n\r\n" + ok(A)),
    Case(
        "several framed interim answers",
        b"HTTP/1.1 199 X\r\nContent-Length: 3\r\n\r\nHTTP/1.1 102 Y\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"HTTP/1.1 150 Z\r\nContent-Length: 0\r\n\r\n" + ok(A),
    ),
    Case("a slow drip of an interim answer with a body", EVIL_199, drip=True),
    Case("a slow drip of a framed interim answer", b"HTTP/1.1 199 X\r\nContent-Length: 5\r\n\r\n" + ok(A), drip=True),
    Case("a close after a framed interim answer", b"HTTP/1.1 199 X\r\nContent-Length: 5\r\n\r\nEVI", closes=True),
    Case(
        "101 Switching Protocols with a body",
        b"HTTP/1.1 101 Switching Protocols\r\nContent-Length: 5\r\n\r\nEVIL!" + ok(A),
    ),
    Case(
        "101 Switching Protocols",
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n" + ok(A),
    ),
    Case("bytes after the answer", ok(A) + b"garbage"),
    Case("an empty line after the answer", ok(A) + b"\r\n"),
    Case("a large answer ending with a line feed", ok(b"x" * 4000 + b"\n")),
    Case("an empty line after a large answer", ok(b"x" * 4000 + b"\n") + b"\r\n"),
    Case("two answers in one segment", ok(A) + ok(b'{"jsonrpc":"2.0","id":0,"result":"C"}')),
    Case("the start of a second answer after the answer", ok(A) + b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc"),
    Case("an interim answer after the answer", ok(A) + b"HTTP/1.1 100 Continue\r\n\r\n"),
    Case("bytes after a chunked answer", chunked(A[:10], A[10:]) + b"HTTP/1.1 2"),
    Case("a chunked answer", chunked(A[:10], A[10:])),
    Case("a chunked answer with trailers", chunked(A)[:-2] + b"X-Trailer: 1\r\n\r\n"),
    Case("two different Content-Lengths", b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd"),
    Case(
        "a coding other than chunked",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    ),
    Case(
        "a chunk size past 64 bits",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1ffffffffffffffff\r\nabc\r\n0\r\n\r\n",
        closes=True,
    ),
    Case(
        "a chunk size of 2**64 - 1",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nabc\r\n0\r\n\r\n",
        closes=True,
    ),
    Case(
        "a chunk larger than the bound",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2000\r\n" + b"x" * 5000,
        closes=True,
    ),
    Case("a Content-Length larger than the bound", ok(b"x" * (LIMIT + 1))),
    Case("a head far over the bound", ok(A, b"X-Big: " + b"x" * (3 * MAX_HEAD_BYTES))),
    Case("a head well under the bound", ok(A, b"X-Big: " + b"x" * (MAX_HEAD_BYTES // 4))),
    Case("a slow drip", ok(A), drip=True),
    Case("a slow drip of interim answers", b"HTTP/1.1 103 Early Hints\r\n\r\n" + chunked(A), drip=True),
    Case("a close mid-body", b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + A, closes=True),
    Case("a close mid-head", b"HTTP/1.1 200 OK\r\nContent-Le", closes=True),
    Case("a close after an interim answer", b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n", closes=True),
    Case("a close mid-chunk", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc", closes=True),
    Case("an answer the close delimits", b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + A, closes=True),
    Case("Connection: close", ok(A, b"Connection: close")),
    Case("an HTTP/1.0 answer", b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(A), A)),
    Case("a 204 with bytes after it", b"HTTP/1.1 204 No Content\r\nContent-Length: 2\r\n\r\nok"),
    Case("status 099", b"HTTP/1.1 099 Odd\r\nContent-Length: 2\r\n\r\nok"),
    Case("not HTTP", b"SSH-2.0-OpenSSH_9.6\r\n", closes=True),
]

#: Where wire.py refuses what h11 takes, on purpose: the call fails (502, refunded) and the connection
#: closes; no answer is misread. llhttp refuses these in its strict mode (its lenient one would also take
#: a space before a header's colon, which h11 refuses). Both framings in one answer are what RFC 9112
#: (6.3) says "ought to be handled as an error"; h11 takes the chunked one and keeps the connection.
STRICTER = [
    Case(
        "Content-Length and Transfer-Encoding",
        chunked(A).replace(b"\r\n\r\n", b"\r\nContent-Length: %d\r\n\r\n" % len(A), 1),
    ),
    Case("obs-fold", ok(A, b"X-Folded: a\r\n  b")),
    Case("a control character in a header", ok(A, b"X-Ctl: a\x01b")),
    Case("the same Content-Length twice", ok(A, b"Content-Length: %d" % len(A))),
    Case(
        "Content-Length and Transfer-Encoding on an interim answer",
        b"HTTP/1.1 199 X\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n" + ok(A),
    ),
]


def head_size(event: h11.Response | h11.InformationalResponse) -> int:
    """The head's bytes as wire.py counts them (its status line and fields)."""
    return len(event.reason) + 15 + sum(len(name) + len(value) + 4 for name, value in event.headers)


def reference(parts: list[bytes], closes: bool) -> Verdict:
    """h11's verdict: ("answer", status, body, reusable) or ("failed",)."""
    conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
    conn.send(h11.Request(method="POST", target="/", headers=[("Host", "node"), ("Content-Length", "2")]))
    conn.send(h11.Data(data=b"{}"))
    conn.send(h11.EndOfMessage())
    status, body, head, done = 0, bytearray(), 0, False
    try:
        for part in [*parts, *([b""] if closes else [])]:
            conn.receive_data(part)
            while not done:
                event = conn.next_event()
                if event is h11.NEED_DATA or event is h11.PAUSED:
                    break
                if isinstance(event, h11.InformationalResponse | h11.Response):
                    head += head_size(event)
                    # The size bound is on the final answer's content: an interim answer has none.
                    length = dict(event.headers).get(b"content-length") if isinstance(event, h11.Response) else None
                    if head > MAX_HEAD_BYTES or (length is not None and int(length) > LIMIT):
                        return ("failed",)
                    status = event.status_code
                elif isinstance(event, h11.Data):
                    body += event.data
                    if len(body) > LIMIT:
                        return ("failed",)
                elif isinstance(event, h11.EndOfMessage):
                    done = True
    except h11.RemoteProtocolError:
        return ("failed",)
    if not done:
        return ("failed",)
    reusable = conn.their_state is h11.DONE and conn.trailing_data == (b"", False)
    return ("answer", status, bytes(body), reusable)


class FakeNode:
    """Answers the first call with the case's bytes, cut at ``cuts``; every later call with ``B_ANSWER``."""

    def __init__(self, parts: list[bytes], closes: bool, gap_s: float) -> None:
        self.parts, self.closes, self.gap_s = parts, closes, gap_s
        self.calls = 0
        self.written = asyncio.Event()

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().partition(b"content-length: ")[2].partition(b"\r\n")[0] or 0)
                await reader.readexactly(length)
                self.calls += 1
                if self.calls > 1:
                    writer.write(ok(B_ANSWER))
                    continue
                try:
                    for part in self.parts:
                        writer.write(part)
                        await writer.drain()
                        await asyncio.sleep(self.gap_s)
                finally:
                    self.written.set()
                if self.closes:
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            self.written.set()
            writer.close()


async def wire(parts: list[bytes], closes: bool, gap_s: float) -> Verdict:
    """wire.py's verdict, in the same shape as :func:`reference`; then the next call's own answer."""
    node = FakeNode(parts, closes, gap_s)
    pool = WirePool(await node.start(), limit=LIMIT, budget=AnswerBudget(1 << 20))
    try:
        try:
            status, body = await pool.request("POST", b"{}", 5.0)
            outcome: Verdict = ("answer", status, body)
        except (WireError, AnswerTooLarge):
            outcome = ("failed",)
        await asyncio.wait_for(node.written.wait(), 5.0)
        await asyncio.sleep(0.02)  # what the node wrote last is read (it is on loopback already)
        assert pool.idle_connections <= 1  # the connection went back once, or not at all
        if outcome[0] == "answer":
            outcome = (*outcome, pool.idle_connections == 1)
        assert await pool.request("POST", b"{}", 5.0) == (200, B_ANSWER)  # the next caller's own answer
        assert pool.budget.held == 0
        return outcome
    finally:
        await pool.close()
        node.server.close()


def run_wire(case: Case, parts: list[bytes]) -> Verdict:
    return uvloop.run(wire(parts, case.closes, 0.001))


def cut(raw: bytes, cuts: list[int]) -> list[bytes]:
    points = [0, *sorted(set(cuts)), len(raw)]
    return [raw[a:b] for a, b in itertools.pairwise(points) if b > a]


def split(case: Case) -> list[bytes]:
    return [case.raw[i : i + 1] for i in range(len(case.raw))] if case.drip else [case.raw]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_wire_reaches_h11s_verdict(case: Case) -> None:
    expected = reference(split(case), case.closes)
    assert run_wire(case, split(case)) == expected


def test_an_interim_answer_is_skipped_and_the_connection_kept() -> None:
    """The verdicts above in plain words for the case of the issue: a 103 is not the answer."""
    assert run_wire(CASES[2], [CASES[2].raw]) == ("answer", 200, A, True)


def test_an_interim_answers_body_is_never_the_answers() -> None:
    """Issue 63's case in plain words: a 199 with ``Content-Length: 5`` and ``EVIL!``, then a 200 with
    ``ok``. The 199 has no content, so ``EVIL!`` is where the next answer's status line should be: the
    call fails (502, refunded) as h11 says, where the 199's body was once read as the start of the 200's."""
    assert reference([EVIL_199], False) == ("failed",)
    assert run_wire(Case("199", EVIL_199), [EVIL_199]) == ("failed",)
    framed = b"HTTP/1.1 199 X\r\nContent-Length: 5\r\n\r\n" + ok(b"ok")
    assert run_wire(Case("199 framed", framed), [framed]) == ("answer", 200, b"ok", True)


@pytest.mark.parametrize("case", STRICTER, ids=lambda c: c.name)
def test_wire_refuses_what_h11_takes_on_purpose(case: Case) -> None:
    assert reference([case.raw], case.closes) == ("answer", 200, A, True)
    assert run_wire(case, [case.raw]) == ("failed",)


@pytest.mark.parametrize("case", [c for c in CASES if not c.drip], ids=lambda c: c.name)
@settings(max_examples=12, deadline=None)  # derandomized by tests/conftest.py's replay profile
@given(data=st.data())
def test_any_cut_into_reads_gives_the_same_verdict(case: Case, data: st.DataObject) -> None:
    cuts = data.draw(st.lists(st.integers(1, max(1, len(case.raw) - 1)), max_size=12), label="cuts")
    parts = cut(case.raw, cuts)
    expected = reference(parts, case.closes)
    assert expected == reference([case.raw], case.closes)  # the reference itself does not depend on the cuts
    assert run_wire(case, parts) == expected


def test_a_content_length_of_5000_digits_is_a_lost_answer() -> None:
    """A hostile node (the fake above) sends 5,000 nines: llhttp refuses past 64 bits before int() sees
    it, so the call fails as a transport error (502, refunded) and the next caller gets its own answer."""
    raw = b"HTTP/1.1 200 OK\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n" + A
    assert run_wire(Case("huge", raw), [raw]) == ("failed",)


def test_a_content_length_with_5000_leading_zeros_is_read_without_int_on_it() -> None:
    """5,000 zeros pass llhttp's overflow check; int() on them raised inside the parser (Python's 4,300
    digit limit) and the answer was lost as 'not HTTP'. It is read as the number it spells, bounded."""
    raw = b"HTTP/1.1 200 OK\r\nContent-Length: " + b"0" * 5000 + b"%d\r\n\r\n%s" % (len(A), A)
    assert run_wire(Case("zeros", raw), [raw]) == ("answer", 200, A, True)
    over = b"HTTP/1.1 200 OK\r\nContent-Length: " + b"0" * 5000 + b"%d\r\n\r\n" % (LIMIT + 1)
    assert run_wire(Case("zeros over the bound", over), [over + b"x" * (LIMIT + 1)]) == ("failed",)
