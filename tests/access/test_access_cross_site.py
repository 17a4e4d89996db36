"""An origin rule and the browser's ``Sec-Fetch-Site`` (docs/api.md, "Access rules"): for a key or session
whose rules list origins, a request a browser sent from another site's page without an ``Origin`` (an
``<img>``'s or a ``<script>``'s GET: ``Sec-Fetch-Site: cross-site``) is refused 403 ACCESS_DENIED and not
billed, on every kind of route and at the ``/ws`` upgrade, and ends a socket it holds when the rule comes;
a request with neither header (a server) and the gateway's own page's (``same-origin``) pass."""

from __future__ import annotations

import aiohttp
import asyncpg
from websockets.asyncio.client import connect

from gateway.access.rules import ACCESS_DENIED_CLOSE
from tests.access.conftest import Owner, rpc
from tests.access.test_access_http import denied, usage_rows
from tests.auth.helpers import request
from tests.pubsub.test_ws import ask, close_code, ws_url
from tests.support import RunningGateway

ORIGINS = {"origins": ["https://app.example.com"], "webhooks": ["list"]}
CROSS_SITE = {"Sec-Fetch-Site": "cross-site"}


async def test_a_cross_site_request_without_an_origin_is_refused_and_not_billed_on_every_route(
    gateway: RunningGateway, http: aiohttp.ClientSession, owner: Owner, db: asyncpg.Connection
) -> None:
    assert (await owner.put_rules(http, ORIGINS)).status == 200
    tip_floor = gateway.url + "/relay/tipFloor"
    for name, credential in owner.credentials().items():
        for site in ("cross-site", "same-site"):
            browser = {**credential, "Sec-Fetch-Site": site}
            denied(await rpc(http, gateway.url, browser), f"Sec-Fetch-Site: {site}")
            denied(await request(http, "GET", tip_floor, headers=browser), "without an Origin")
        keyed = await request(http, "GET", tip_floor, params={"api-key": owner.key}, headers=CROSS_SITE)
        denied(keyed, "without an Origin")  # the key in the URL, as an <img src> carries it
        bulk = await request(
            http,
            "POST",
            gateway.url + "/bulk/getBalances",
            body=b'{"addresses":[]}',
            headers={**credential, **CROSS_SITE},
        )
        denied(bulk, "without an Origin")
        hooks = await request(http, "GET", gateway.url + "/webhooks", headers={**credential, **CROSS_SITE})
        denied(hooks, "without an Origin")
        info = await request(http, "GET", gateway.url + "/account/info", headers={**credential, **CROSS_SITE})
        denied(info, "without an Origin")
        # the gateway's own page (same-origin), a typed address (none), a server (neither): as before
        for passing in ({"Sec-Fetch-Site": "same-origin"}, {"Sec-Fetch-Site": "none"}, {}):
            assert (await rpc(http, gateway.url, {**credential, **passing})).status == 200, (name, passing)
            relay = await request(http, "GET", tip_floor, headers={**credential, **passing})
            assert relay.status == 200, (name, passing, relay)
        listed = await request(http, "GET", gateway.url + "/webhooks", headers={**credential, "Sec-Fetch-Site": "none"})
        assert listed.status == 200, listed
        allowed = {**credential, **CROSS_SITE, "Origin": "https://app.example.com"}  # a listed page's fetch
        assert (await rpc(http, gateway.url, allowed)).status == 200
    wallet = {**owner.wallet("POST", "/", b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}'), **CROSS_SITE}
    assert (await rpc(http, gateway.url, wallet)).status == 200  # the owner's own proof is never bound
    assert await usage_rows(gateway, db, owner.signer.pubkey) == 2 * (3 * 2 + 1) + 1  # refused ones cost nothing


async def test_a_cross_site_socket_without_an_origin_is_refused_at_the_upgrade_and_ended_by_a_new_rule(
    gateway: RunningGateway, http: aiohttp.ClientSession, owner: Owner
) -> None:
    url = f"{ws_url(gateway)}?api-key={owner.key}"
    async with connect(url, additional_headers=CROSS_SITE) as held:  # no rule yet: it opens
        assert isinstance((await ask(held, "getSlot"))["result"], int)
        assert (await owner.put_rules(http, ORIGINS)).status == 200
        code, reason = await close_code(held)  # re-checked under the new rule with the header it came with
    assert code == ACCESS_DENIED_CLOSE and reason is not None and reason.startswith("ACCESS_DENIED"), (code, reason)
    async with connect(url, additional_headers=CROSS_SITE) as ws:
        code, reason = await close_code(ws)
    assert code == ACCESS_DENIED_CLOSE and reason is not None and "Sec-Fetch-Site" in reason, (code, reason)
    async with connect(url, additional_headers={"Sec-Fetch-Site": "same-origin"}) as ws:
        assert isinstance((await ask(ws, "getSlot"))["result"], int)
    async with connect(url) as ws:  # a server's socket: neither header
        assert isinstance((await ask(ws, "getSlot"))["result"], int)
