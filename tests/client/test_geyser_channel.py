"""The Python client's gRPC channel (gateway_client.geyser.GeyserStream): TLS to any host elsewhere unless
plaintext is asked by name, so an API key in ``x-token`` never crosses a network in clear by default;
plaintext to this machine (``make up``'s stream). Real grpc channels to real grpc servers on this machine's
loopback and non-loopback addresses; the servers stand in for the gateway's (they record what reached them
and refuse the call), since what is checked is what the client sends before any gateway could answer."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import grpc
import psutil
import pytest
from cryptography import x509

from gateway_client.geyser import GeyserOptions, GeyserStream, _write_opening, is_local_target, pb2, pb2_grpc
from tests.certs import self_signed_pem

TOKEN = "srpc_live_" + "K" * 43
ONCE = GeyserOptions(max_reconnects=0)  # one attempt: the outcome of the first call is raised


def outside_address() -> str:
    """An IPv4 address of this machine that is not loopback (the test needs one to stand for a host elsewhere)."""
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family == socket.AF_INET and not ipaddress.ip_address(address.address).is_loopback:
                return str(address.address)
    pytest.skip("this machine has no non-loopback IPv4 address to stand for a host elsewhere")


def certificate_for(address: str) -> tuple[bytes, bytes]:
    """A self-signed certificate naming ``address``, and its key, as PEM."""
    return self_signed_pem(address, [x509.IPAddress(ipaddress.ip_address(address))])


@asynccontextmanager
async def recording_server(
    address: str, tls: tuple[bytes, bytes] | None = None, *, on_metadata: bool = False
) -> AsyncIterator[tuple[str, list[str | bytes]]]:
    """A gRPC server on ``address`` whose ``geyser.Geyser/Subscribe`` records the ``x-token`` it was sent and
    refuses the call (PERMISSION_DENIED: not one the stream resumes after) once the opening request has
    arrived: refused before, the call may end while the client writes it, and grpc.aio may then report its
    own INTERNAL instead (test_a_refusal_that_races_the_opening_write_reads_as_the_servers_status);
    ``on_metadata``: refused on the metadata alone, as that test needs. Yields its target and the tokens."""
    tokens: list[str | bytes] = []

    async def subscribe(requests: Any, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[bytes]:
        tokens.extend(value for key, value in context.invocation_metadata() or () if key == "x-token")
        if not on_metadata:
            async for _ in requests:  # the opening request: the client's write is done
                break
        await context.abort(grpc.StatusCode.PERMISSION_DENIED, "recorded")
        yield b""  # never reached: makes this an async generator, as a stream handler is

    handler = grpc.stream_stream_rpc_method_handler(subscribe)  # bytes in and out: no (de)serializers
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("geyser.Geyser", {"Subscribe": handler}),))
    listen = f"{address}:0"
    if tls is None:
        port = server.add_insecure_port(listen)
    else:
        port = server.add_secure_port(listen, grpc.ssl_server_credentials([(tls[1], tls[0])]))
    await server.start()
    try:
        yield f"{address}:{port}", tokens
    finally:
        await server.stop(None)


REQUEST = pb2.SubscribeRequest(slots={"s": pb2.SubscribeRequestFilterSlots()})


async def first_status(make: Callable[[], GeyserStream]) -> grpc.StatusCode:
    """The status the stream's first call ends with."""
    async with make() as stream:
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await anext(stream)
    return ended.value.code()


async def test_a_host_elsewhere_is_spoken_to_over_tls_and_never_gets_the_token_in_clear() -> None:
    async with recording_server(outside_address()) as (target, tokens):  # a plaintext server elsewhere
        status = await first_status(lambda: GeyserStream(target, TOKEN, REQUEST, options=ONCE))
    assert tokens == []  # the TLS handshake failed before any header was sent
    assert status == grpc.StatusCode.UNAVAILABLE


async def test_tls_to_a_host_elsewhere_with_the_callers_ca_carries_the_token() -> None:
    address = outside_address()
    cert, key = certificate_for(address)
    async with recording_server(address, (cert, key)) as (target, tokens):
        credentials = grpc.ssl_channel_credentials(root_certificates=cert)
        status = await first_status(lambda: GeyserStream(target, TOKEN, REQUEST, credentials=credentials, options=ONCE))
    assert (status, tokens) == (grpc.StatusCode.PERMISSION_DENIED, [TOKEN])


async def test_plaintext_asked_by_name_reaches_a_host_elsewhere() -> None:
    async with recording_server(outside_address()) as (target, tokens):
        status = await first_status(lambda: GeyserStream(target, TOKEN, REQUEST, plaintext=True, options=ONCE))
    assert (status, tokens) == (grpc.StatusCode.PERMISSION_DENIED, [TOKEN])


async def test_this_machines_stream_stays_plaintext_by_default() -> None:
    async with recording_server("127.0.0.1") as (target, tokens):  # make up's gRPC port: plaintext on loopback
        status = await first_status(lambda: GeyserStream(target, TOKEN, REQUEST, options=ONCE))
        port = target.rsplit(":", 1)[1]
        localhost = await first_status(lambda: GeyserStream(f"localhost:{port}", TOKEN, REQUEST, options=ONCE))
    assert (status, localhost, tokens) == (grpc.StatusCode.PERMISSION_DENIED,) * 2 + ([TOKEN, TOKEN],)


async def test_a_refusal_that_races_the_opening_write_reads_as_the_servers_status() -> None:
    """The server refuses on the metadata while the client's opening write is in flight: grpc.aio fails the
    write and sets a local INTERNAL until the server's status arrives (seen in CI on a loaded machine). The
    race is set up as grpc's own ``_write`` leaves it (``set_internal_error`` on the call, before the status
    is read), since which side wins cannot be chosen from outside."""
    refused = recording_server("127.0.0.1", on_metadata=True)
    async with refused as (target, tokens), grpc.aio.insecure_channel(target) as channel:
        call = pb2_grpc.GeyserStub(channel).Subscribe(metadata=(("x-token", TOKEN),))
        call._cython_call.set_internal_error("the write failed: the call had ended")
        await _write_opening(call, REQUEST)
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await call.read()
    assert (ended.value.code(), tokens) == (grpc.StatusCode.PERMISSION_DENIED, [TOKEN])


def test_plaintext_and_credentials_together_are_refused() -> None:
    with pytest.raises(ValueError, match="plaintext"):
        GeyserStream("127.0.0.1:1", TOKEN, REQUEST, credentials=grpc.ssl_channel_credentials(), plaintext=True)


@pytest.mark.parametrize(
    ("target", "local"),
    [
        ("127.0.0.1:10000", True),
        ("127.1.2.3:10000", True),
        ("localhost:10000", True),
        ("LOCALHOST.:10000", True),
        ("[::1]:10000", True),
        ("::1", True),
        ("dns:///localhost:10000", True),
        ("ipv4:127.0.0.1:10000", True),
        ("unix:/run/gateway.sock", True),
        ("192.0.2.7:10000", False),
        ("[2001:db8::1]:10000", False),
        ("grpc.example.com:443", False),
        ("localhost.example.com:443", False),
        ("127.0.0.1.nip.io:10000", False),
        ("dns://8.8.8.8/localhost:10000", False),
        ("ipv4:127.0.0.1:1,192.0.2.7:1", False),
    ],
)
def test_which_targets_are_this_machine(target: str, local: bool) -> None:
    assert is_local_target(target) is local
