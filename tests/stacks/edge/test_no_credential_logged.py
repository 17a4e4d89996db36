"""No credential in any log of the real stack (``gateway up``: Ray Serve behind its bundled HAProxy, run
through ``gateway-haproxy``): API keys (valid and not, in ``?api-key=``, ``X-Api-Key`` and a ``/ws``
subprotocol), a session token (valid and not), the wallet signatures of a signed request and of a
session's challenge, sent with requests that succeed, fail, time out at the edge and are abandoned, are
then looked for in every file of the stack's data dir (``gateway up``'s own output, which echoes the
replicas' and actors' stderr, PostgreSQL's and Redis's files and logs), of Ray's session dir (every
worker's and Serve's logs) and of HAProxy's files. The access log is on, so the replicas did log each
request (its request id is found), and the edge logs to HAProxy's output file
(``RAY_SERVE_HAPROXY_LOG_TARGET``; syslog's port otherwise), where its line for the 408 is found: the
search cannot pass on logs that hold nothing. The edge's log on a syslog listener, for more kinds of
errors and aborts: tests/runtime/test_haproxy_edge_logs.py.

The package's stack (conftest.py): the access log on, the edge's log in a file, and a body has 2 s to arrive.
"""

from __future__ import annotations

import contextlib
import http.client
import secrets
import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

import orjson
import psutil
from solders.keypair import Keypair
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect
from websockets.typing import Subprotocol

from gateway_client import WalletSigner
from tests.integration.service import RunningService

GUARD_S = 60.0


Answer = tuple[int, dict[str, str], bytes]


def _call(
    service: RunningService, method: str, target: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> Answer:
    """One request on a connection of its own: the status, header fields (lower-cased) and body."""
    address = urlsplit(service.url)
    connection = http.client.HTTPConnection(address.hostname or "", address.port, timeout=30)
    try:
        connection.request(
            method, target, body=body or None, headers={"Content-Type": "application/json", **(headers or {})}
        )
        answer = connection.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    finally:
        connection.close()


def _raw(service: RunningService, request: bytes, read: bool) -> bytes:
    """``request`` as bytes on a socket: what comes back until the edge closes it, or (``read`` false)
    nothing, the client going away once it is sent."""
    address = urlsplit(service.url)
    with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
        sock.sendall(request)
        if not read:
            time.sleep(0.3)  # the edge has it
            return b""
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


def _socket(service: RunningService, path: str, subprotocols: list[str]) -> str:
    """How a ``/ws`` socket at ``path`` fares with a subscription: answered, closed (its code), refused
    (its status)."""
    url = service.url.replace("http://", "ws://", 1) + path
    try:
        with connect(url, subprotocols=[Subprotocol(p) for p in subprotocols], open_timeout=10) as socket_:
            socket_.send(orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "slotSubscribe"}).decode())
            socket_.recv(timeout=10)
            return "answered"
    except InvalidStatus as refused:
        return f"refused {refused.response.status_code}"
    except ConnectionClosed as closed:
        return f"closed {closed.rcvd.code if closed.rcvd else None}"


def _ray_session_dirs(service: RunningService) -> set[Path]:
    """The session dir of the stack's Ray (``/tmp/ray/session_…``), as its processes were told it."""
    dirs: set[Path] = set()
    for process in service.descendants():
        with contextlib.suppress(psutil.Error):
            for arg in process.cmdline():
                if arg.startswith("--session_dir="):
                    dirs.add(Path(arg.partition("=")[2]))
    return dirs


def _haproxy_dirs(service: RunningService) -> set[Path]:
    """The directory of HAProxy's configuration, answers and output (``-f DIR/haproxy.cfg…``)."""
    dirs: set[Path] = set()
    for process in service.descendants():
        with contextlib.suppress(psutil.Error):
            args = process.cmdline()
            dirs.update(Path(args[i + 1]).parent for i, arg in enumerate(args[:-1]) if arg == "-f")
    return dirs


def _files(dirs: set[Path]) -> list[tuple[Path, bytes]]:
    found = []
    for top in dirs:
        for path in top.rglob("*"):
            with contextlib.suppress(OSError):  # a file removed or unreadable (a socket) meanwhile
                if path.is_file():
                    found.append((path, path.read_bytes()))
    return found


def test_no_credential_reaches_a_log_or_a_file_of_the_stack(service: RunningService) -> None:
    wallet = WalletSigner(bytes(Keypair()))
    body = b"{}"
    signed = wallet.headers("POST", "/account/api-key", body)
    status, _, answer = _call(service, "POST", "/account/api-key", body, signed)
    assert status == 200, answer
    key = str(orjson.loads(answer)["api_key"])
    challenge = orjson.loads(_call(service, "POST", "/auth/challenge", orjson.dumps({"pubkey": wallet.pubkey}))[2])
    challenge_signature = wallet.sign_challenge(challenge["challenge"])
    verify = {"pubkey": wallet.pubkey, "challenge": challenge["challenge"], "signature": challenge_signature}
    status, _, answer = _call(service, "POST", "/auth/verify", orjson.dumps(verify))
    assert status == 200, answer
    token = str(orjson.loads(answer)["token"])
    wrong_key = "srpc_live_" + secrets.token_urlsafe(32)
    wrong_token = secrets.token_hex(32)
    secrets_sent = [key, token, signed["X-Signature"], challenge_signature, wrong_key, wrong_token]

    call = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "getSlot"})
    answers = {
        "info by query key": _call(service, "GET", f"/account/info?api-key={key}"),
        "info by session": _call(service, "GET", "/account/info", headers={"Authorization": f"Bearer {token}"}),
        "call without credits": _call(service, "POST", f"/?api-key={key}", call),
        "not JSON": _call(service, "POST", f"/?api-key={key}&x=1", b"{not json"),
        "unknown key in query": _call(service, "GET", f"/account/info?api-key={wrong_key}"),
        "unknown key in header": _call(service, "POST", "/", call, {"X-Api-Key": wrong_key}),
        "unknown session": _call(service, "GET", "/account/info", headers={"Authorization": f"Bearer {wrong_token}"}),
    }
    statuses = {name: status for name, (status, _, _) in answers.items()}
    assert statuses["info by query key"] == statuses["info by session"] == 200, answers
    assert [name for name, status in statuses.items() if status < 400 and not name.startswith("info by")] == [], (
        statuses
    )
    # The edge's 408 (the body stops coming) and a client that gives up mid-body.
    partial = f"POST /?api-key={key} HTTP/1.1\r\nHost: gw\r\nContent-Length: 100\r\n\r\n{{".encode()
    timed_out = _raw(service, partial, read=True)
    assert timed_out.startswith(b"HTTP/1.1 408"), timed_out
    _raw(service, partial, read=False)
    # Sockets: an unknown key in the query, the key as the subprotocol.
    assert _socket(service, f"/ws?api-key={wrong_key}", []) != "answered"
    _socket(service, "/ws", [f"auth.{key}", "solana-rpc"])

    # Each request a replica answered is in the access log: the search below reads logs that hold them.
    ids = {name: headers["x-request-id"] for name, (_, headers, _) in answers.items() if "x-request-id" in headers}
    assert len(ids) >= 6, answers
    # and the edge's 408 in its log (the edge logs errors only).
    ids["408"] = orjson.loads(timed_out.partition(b"\r\n\r\n")[2])["error"]["requestId"]
    dirs = {service.home, *_ray_session_dirs(service), *_haproxy_dirs(service)}
    assert len(dirs) == 3, dirs
    deadline = time.monotonic() + GUARD_S
    while True:
        files = _files(dirs)
        missing = {name for name, i in ids.items() if not any(i.encode() in text for _, text in files)}
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    leaks = [(str(path), secret) for path, text in files for secret in secrets_sent if secret.encode() in text]
    assert not leaks, leaks
    assert not missing, (missing, ids)
