"""SessionAuth against a running gateway: renewed once on a 401 (a request sent again), once on a /ws close
1008 (the signal stream connects again with the new token), never in a loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import aiohttp
import pytest

from gateway_client import AuthFailed, GatewayClient, SessionAuth, WalletSigner, solana_client


async def _log_out(url: str, token: str) -> None:
    """End the token at the gateway behind the client's back (as another tab's logout would)."""
    async with aiohttp.ClientSession() as http:
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        async with http.post(f"{url}/auth/logout", data=b"{}", headers=headers) as resp:
            assert resp.status == 200, await resp.text()


async def _until(condition: Callable[[], bool], timeout_s: float) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():  # noqa: ASYNC110  # counters of the stream, polled: no event to wait on
            await asyncio.sleep(0.05)


async def test_a_refused_session_is_renewed_and_the_call_sent_again(url: str, signer: WalletSigner) -> None:
    async with GatewayClient(url, signer=signer, use_session=True) as gw:
        assert isinstance(await gw.rpc("getSlot"), int)
        assert gw.session is not None and gw.session.opened == 1
        first = gw.session.current
        assert first is not None
        await _log_out(url, first)
        assert isinstance(await gw.rpc("getSlot"), int)  # 401, a new challenge signed, sent again
        assert gw.session.opened == 2 and gw.session.current != first


class RefusedTokens(SessionAuth):
    """A session whose every token the gateway refuses: a real 401 each time."""

    async def _open(self) -> str:
        self.opened += 1
        return f"not-a-session-{self.opened}"


async def test_a_session_refused_again_is_raised_not_looped(url: str, signer: WalletSigner) -> None:
    session = RefusedTokens(url, signer)
    try:
        async with GatewayClient(url, session=session) as gw:
            with pytest.raises(AuthFailed):
                await gw.rpc("getSlot")
        assert session.opened == 2  # the first token, one renewal, then the error
    finally:
        await session.close()


async def test_solana_py_with_a_session_that_renews(url: str, signer: WalletSigner) -> None:
    session = SessionAuth(url, signer)
    try:
        async with solana_client(url, session=session) as client:
            assert (await client.get_slot()).value > 0
            token = session.current
            assert token is not None
            await _log_out(url, token)
            assert (await client.get_slot()).value > 0
        assert session.opened == 2
    finally:
        await session.close()


async def test_the_signal_stream_reconnects_with_a_new_token_after_a_close_1008(url: str, signer: WalletSigner) -> None:
    async with GatewayClient(url, signer=signer) as gw:  # a wallet-only client: the socket uses a session
        stream = gw.signals(kinds="newPair")
        reading = asyncio.create_task(anext(stream))  # no launches on this chain: it waits, connected
        try:
            await _until(lambda: stream.connects == 1, 15)
            assert gw.session is not None and gw.session.opened == 1
            first = gw.session.current
            assert first is not None
            await _log_out(url, first)  # the socket closes 1008 within a second or two
            await _until(lambda: stream.connects == 2, 20)
            assert gw.session.opened == 2 and gw.session.current != first
            assert not reading.done()  # still streaming: the close was not raised
        finally:
            reading.cancel()
            await stream.aclose()
