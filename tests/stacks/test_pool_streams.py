"""Streams through ``gateway up --nodes 3`` while the pool's followers fail, each fault done to the real
process: the streams' node killed (kill -9), the next one stopped (SIGSTOP) for ten seconds and resumed, then
every node killed and one restarted on its ports (the stack's own follower, started again from outside as an
operator would). The devnode's generated launch traffic runs (the embedded default), paid reads run all along,
and real clients hold what the gateway streams:

- a ``/ws`` socket (the ``websockets`` client, the API key as the ``auth.<key>`` subprotocol) with
  ``slotSubscribe``, an ``accountSubscribe`` of an account the test transfers to, and a ``signatureSubscribe``
  of a transfer sent during each of the first two faults;
- a gRPC ``Subscribe`` stream (grpcio and geyser_proto's stub, the key as ``x-token``) of every slot status and
  the transactions of that account;
- a ``subscribeSignal`` socket of ``newPair`` events;
- a transaction webhook of that account posting to a receiver on 127.0.0.1 (the embedded devnode's stack
  accepts local receivers).

Asserted, outcomes only (a deadline is a bound on what comes within a few slots or a restart, never a measured
time): no socket closed and no stream ended while another node served; the gRPC stream's PROCESSED slots
contiguous, none missing and none twice, and each transfer once, across the kill and the hang; every ``/ws``
slot newer than the one before it; each signature notified once; the account's notifications never repeated
nor going back, its last value the chain's; every ``newPair`` once; every paid read answered while a node
served; with no node the socket closed 1013 and the stream ended UNAVAILABLE; after the restart new
subscriptions served; every transfer to the account delivered to the webhook once, those sent while no node
served included (the watcher catches up on the node restarted); and the streams did move, to the node after
the one killed and then the one after the one hung (``gateway_upstream_stream_moves_total`` as Ray's metrics
agent exports it).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import grpc
import orjson
import pytest
from aiohttp import web
from solana.rpc.async_api import AsyncClient
from solana.rpc.commitment import Processed
from solders.keypair import Keypair
from solders.message import Message
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.system_program import TransferParams, transfer
from solders.transaction import Transaction

from gateway.runtime.devnode_proc import FOLLOWERS, PIDFILE, DevnodeProcess, recorded_followers
from gateway_client.webhooks import EVENT_ID_HEADER, verify_webhook
from geyser_proto import geyser_pb2 as pb
from geyser_proto import geyser_pb2_grpc
from geyser_proto.filters import PROCESSED
from tests.chain import airdrop, wait_landed
from tests.integration.service import RunningService, service_env, start_service, stop_service
from tests.ws_recorder import WsRecorder, ws_recorder

GATEWAY = Path(sys.executable).with_name("gateway")
NODES = ("node-1", "node-2", "node-3")
WITHIN_S = 60.0  # a bound for what comes within a few slots or a node's restart, never a measured time
HANG_S = 10.0  # how long the second fault keeps its node stopped
RETENTION_SLOTS = 54_000

pytestmark = pytest.mark.integration


@dataclass
class Stack:
    service: RunningService
    restarted: list[DevnodeProcess] = field(default_factory=list)  # followers the test started again


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    home = tmp_path_factory.mktemp("pool-streams")
    env = service_env(
        home,
        GATEWAY_DEVNODE_NODES="3",
        GATEWAY_DEVNODE_RETENTION_SLOTS=str(RETENTION_SLOTS),
        GATEWAY_DEVNODE_FEED="true",  # the embedded default: launches, so the classifier has newPair events
        GATEWAY_HEALTH_POLL_S="0.1",
        GATEWAY_UPSTREAM_PROBE_TIMEOUT_S="0.5",
        GATEWAY_UPSTREAM_OUT_AT_LEAST_S="1",
        GATEWAY_RATE_LIMIT_RPS="100000",  # the paid reads are the load: none refused for the account's rate
    )
    running = Stack(start_service(home, env))
    try:
        yield running
    finally:
        code, alive = stop_service(running.service)
        for node in running.restarted:
            node.stop()
        assert code == 0 and alive == [], (code, alive)


def gateway(service: RunningService, *args: str) -> str:
    done = subprocess.run([str(GATEWAY), *args], env=service.env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def api_key(stack: Stack) -> str:
    return gateway(stack.service, "fund").strip().splitlines()[-1]  # credited through the pool


async def pool_states(service: RunningService) -> dict[str, str]:
    """Each node's state as ``gateway upstreams list`` shows it, in the pool's order."""
    listed = json.loads(await asyncio.to_thread(gateway, service, "upstreams", "list", "--json"))
    return {n["name"]: n["state"] for n in listed["nodes"]}


async def streams_node(service: RunningService) -> str:
    """The node the streams are on: the first in service (a stream's choice, sticky since)."""
    return next(name for name, state in (await pool_states(service)).items() if state == "in service")


async def until(condition: Callable[[], bool], state: Callable[[], object] = str, within_s: float = WITHIN_S) -> None:
    deadline = asyncio.get_running_loop().time() + within_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"condition not reached in time: {state()}"
        await asyncio.sleep(0.05)


async def until_pool(service: RunningService, condition: Callable[[dict[str, str]], bool]) -> None:
    deadline = asyncio.get_running_loop().time() + WITHIN_S
    while not condition(states := await pool_states(service)):
        assert asyncio.get_running_loop().time() < deadline, f"the pool never got there: {states}"
        await asyncio.sleep(0.2)


async def until_answered(service: RunningService, key: str) -> None:
    """Until a paid read is answered (a node serves it in the replica's view of the pool)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "getSlot"}
    deadline = asyncio.get_running_loop().time() + WITHIN_S
    async with aiohttp.ClientSession() as http:
        while True:
            async with http.post(service.url + "/", json=body, headers={"X-Api-Key": key}) as resp:
                if resp.status == 200:
                    return
                assert resp.status == 503 and asyncio.get_running_loop().time() < deadline, await resp.text()
            await asyncio.sleep(0.2)


def moves(service: RunningService) -> Counter[tuple[str, str]]:
    """``gateway_upstream_stream_moves_total`` over every process, by role and the node moved to, as Ray's metrics
    agent exports it."""
    url = f"http://127.0.0.1:{service.env['GATEWAY_METRICS_EXPORT_PORT']}/metrics"
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    total: Counter[tuple[str, str]] = Counter()
    for line in text.splitlines():
        if line.startswith("ray_gateway_upstream_stream_moves_total{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            total[(labels["role"], labels["node"])] += int(float(line.rsplit(" ", 1)[1]))
    return total


def follower_pid(service: RunningService, name: str) -> int:
    return int((service.home / FOLLOWERS / name / PIDFILE).read_text().split()[0])  # the devnode, then its starter


# -- the clients ----------------------------------------------------------------------------------------


@asynccontextmanager
async def served_socket(service: RunningService, key: str) -> AsyncIterator[tuple[WsRecorder, int | str]]:
    """A new socket with a ``slotSubscribe`` once a node serves again: a socket refused while the pool's view
    reaches the replica (-32003, or closed 1013) is opened again, as a client reconnecting with a backoff does."""
    deadline = asyncio.get_running_loop().time() + WITHIN_S
    while True:
        async with ws_recorder(service.url, key) as client:
            answer = await client.ask("slotSubscribe", [])
            if answer is not None and isinstance(answer.get("result"), int):
                yield client, answer["result"]
                return
            refused = answer is None and client.closed is not None and client.closed[0] == 1013
            refused = refused or (answer is not None and answer.get("error", {}).get("code") == -32003)
            assert refused and asyncio.get_running_loop().time() < deadline, (answer, client.closed)
        await asyncio.sleep(0.5)


class GeyserStream:
    """One gRPC ``Subscribe`` stream: every update read, and the status it ended with."""

    def __init__(self, channel: grpc.aio.Channel, key: str, watched: Pubkey) -> None:
        self.call = geyser_pb2_grpc.GeyserStub(channel).Subscribe(metadata=(("x-token", key),))
        self.request = pb.SubscribeRequest(slots={"slots": pb.SubscribeRequestFilterSlots()})
        self.request.transactions["watched"].account_include.append(str(watched))
        self.updates: list[pb.SubscribeUpdate] = []
        self.ended: tuple[grpc.StatusCode, str] | None = None
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            await self.call.write(self.request)
            async for update in self.call:
                self.updates.append(update)
            self.ended = (grpc.StatusCode.OK, "")
        except grpc.aio.AioRpcError as exc:
            self.ended = (exc.code(), exc.details() or "")

    def processed(self) -> list[int]:
        return [u.slot.slot for u in self.updates if u.HasField("slot") and u.slot.status == PROCESSED]

    def signatures(self) -> Counter[str]:
        return Counter(
            str(Signature.from_bytes(u.transaction.transaction.signature))
            for u in self.updates
            if u.HasField("transaction")
        )

    async def first(self) -> None:
        """Until a first slot came, or the stream ended."""
        await until(lambda: bool(self.processed()) or self.ended is not None, lambda: self.ended)

    def close(self) -> None:
        self.call.cancel()
        self._reader.cancel()


async def served_stream(channel: grpc.aio.Channel, key: str, watched: Pubkey) -> GeyserStream:
    """A new stream once a node serves geyser again: one refused UNAVAILABLE while the pool's view reaches the
    stream server is opened again, as a client reconnecting with a backoff does."""
    deadline = asyncio.get_running_loop().time() + WITHIN_S
    while True:
        stream = GeyserStream(channel, key, watched)
        await stream.first()
        if stream.processed():
            return stream
        assert stream.ended is not None and stream.ended[0] == grpc.StatusCode.UNAVAILABLE, stream.ended
        assert asyncio.get_running_loop().time() < deadline, stream.ended
        await asyncio.sleep(0.5)


class Receiver:
    """A webhook receiver on 127.0.0.1: each verified delivery's event id, by the transaction it reports."""

    def __init__(self) -> None:
        self.secret = ""
        self.events: dict[str, set[str]] = {}  # signature -> event ids
        self.posts = 0
        self.refused = 0
        self._runner: web.AppRunner | None = None

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/hook", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(self._runner, sock).start()
        return f"http://127.0.0.1:{sock.getsockname()[1]}/hook"

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.posts += 1
        if not verify_webhook(self.secret, request.headers, body):
            self.refused += 1
            return web.Response(status=401)
        event = orjson.loads(body)
        self.events.setdefault(event["data"]["signature"], set()).add(request.headers[EVENT_ID_HEADER])
        return web.Response(text="ok")

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


class Load:
    """Paid reads (``getSlot``, ``getBalance``) over a few kept-alive connections; statuses by phase."""

    def __init__(self, url: str, key: str, wallet: Pubkey, connections: int = 4, interval_s: float = 0.1) -> None:
        self.url, self.key, self.wallet, self.interval_s = url, key, str(wallet), interval_s
        self.phase = "steady"
        self.statuses: dict[str, Counter[int]] = {}
        self.failures: list[tuple[str, int, bytes]] = []  # (phase, status, the answer's start): what said it
        self._stop = asyncio.Event()
        self._tasks = [asyncio.create_task(self._connection()) for _ in range(connections)]

    async def _connection(self) -> None:
        headers = {"X-Api-Key": self.key, "Content-Type": "application/json"}
        timeout = aiohttp.ClientTimeout(total=60)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1), timeout=timeout) as http:
            n = 0
            while not self._stop.is_set():
                n += 1
                method, params = ("getBalance", [self.wallet]) if n % 2 else ("getSlot", [])
                body = orjson.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params})
                phase = self.phase
                try:
                    async with http.post(self.url, data=body, headers=headers) as resp:
                        raw = await resp.read()
                        doc = orjson.loads(raw)
                        status = -200 if resp.status == 200 and "error" in doc else resp.status
                except orjson.JSONDecodeError:  # not JSON: a failure whatever its status (a 200 counts as 0)
                    status = 0 if resp.status == 200 else resp.status
                except (aiohttp.ClientError, TimeoutError) as exc:
                    status, raw = 0, repr(exc).encode()
                if status != 200 and len(self.failures) < 20:
                    self.failures.append((phase, status, raw[:300]))
                self.statuses.setdefault(phase, Counter())[status] += 1
                await asyncio.sleep(self.interval_s)

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)


class Transfers:
    """Transfers to the watched account, sent to the devnode (the chain's leader, never in the pool): one a
    second while running, or one at a time; every one sent, in order, with the phase it was sent in."""

    def __init__(self, leader: str, payer: Keypair, to: Pubkey) -> None:
        self.client = AsyncClient(leader)
        self.payer, self.to = payer, to
        self.sent: list[tuple[str, str]] = []  # (signature, phase)
        self.phase = "steady"
        self._lamports = 1_000_000  # each one different: the same transfer twice would be one transaction
        self._task: asyncio.Task[None] | None = None

    async def signed(self) -> Transaction:
        """A transfer signed on a fresh blockhash, not sent."""
        self._lamports += 1
        blockhash = (await self.client.get_latest_blockhash()).value.blockhash
        ix = transfer(TransferParams(from_pubkey=self.payer.pubkey(), to_pubkey=self.to, lamports=self._lamports))
        return Transaction([self.payer], Message.new_with_blockhash([ix], self.payer.pubkey(), blockhash), blockhash)

    async def send(self, tx: Transaction | None = None) -> str:
        tx = tx if tx is not None else await self.signed()
        signature = str((await self.client.send_raw_transaction(bytes(tx))).value)
        self.sent.append((signature, self.phase))
        return signature

    def start(self) -> None:
        async def run() -> None:
            while True:
                await self.send()
                await asyncio.sleep(1.0)

        self._task = asyncio.create_task(run())

    async def pause(self) -> None:
        """Stop sending; return once every transfer sent landed, none failed."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        for signature, _ in self.sent:
            status = await wait_landed(self.client, Signature.from_string(signature), timeout_s=WITHIN_S)
            assert status.err is None, status.err

    async def balance(self) -> int:
        return (await self.client.get_balance(self.to, Processed)).value

    async def close(self) -> None:
        await self.pause()
        await self.client.close()


def signature_of(tx: Transaction) -> str:
    return str(tx.signatures[0])


async def create_webhook(url: str, key: str, receiver_url: str, watched: Pubkey) -> tuple[int, str]:
    """An ``account`` webhook of ``watched`` posting to ``receiver_url``: its id and secret."""
    request = {"url": receiver_url, "filter_type": "account", "filter_value": str(watched)}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{url}/webhooks", json=request, headers={"X-Api-Key": key}) as resp,
    ):
        hook = await resp.json()
        assert resp.status == 201, hook
    return int(hook["id"]), str(hook["secret"])


async def webhook_events(url: str, key: str, hook_id: int) -> list[dict[str, Any]]:
    """Every event of the webhook (``GET /webhooks/{id}/deliveries``, all pages)."""
    entries: list[dict[str, Any]] = []
    cursor: str | None = None
    async with aiohttp.ClientSession() as http:
        while True:
            query = "?limit=100" + (f"&cursor={cursor}" if cursor else "")
            async with http.get(f"{url}/webhooks/{hook_id}/deliveries{query}", headers={"X-Api-Key": key}) as resp:
                page = await resp.json()
                assert resp.status == 200, page
            entries += page["entries"]
            cursor = page["next_cursor"]
            if cursor is None:
                return entries


def restart(service: RunningService, name: str) -> DevnodeProcess:
    """The stack's follower ``name`` started again on its ports and data dir, as ``gateway up`` started it."""
    node = {n.name: n for n in recorded_followers(service.home) or []}[name]
    rpc, ws, grpc_port = (urlsplit(str(u)).port or 0 for u in (node.rpc_url, node.ws_url, node.grpc_url))
    slot_ms = int(service.env["GATEWAY_DEVNODE_SLOT_MS"])
    return DevnodeProcess(
        service.home / FOLLOWERS / name, rpc, ws, slot_ms, RETENTION_SLOTS, False, grpc_port=grpc_port,
        follow=service.node_url,
    )  # fmt: skip


def new_pairs(signals: WsRecorder, sub_id: int | str) -> list[tuple[str, str]]:
    return [(e["signature"], e["mint"]) for e in signals.of(sub_id) if e["kind"] == "newPair"]


# -- the test ---------------------------------------------------------------------------------------------


async def test_streams_stay_whole_through_a_kill_and_a_hang_and_end_only_with_no_node(
    stack: Stack, api_key: str
) -> None:
    service, key = stack.service, api_key
    leader = service.node_url
    payer, watched = Keypair(), Keypair().pubkey()
    await airdrop(leader, payer.pubkey(), 10_000_000_000)
    receiver = Receiver()
    hook_id, receiver.secret = await create_webhook(service.url, key, await receiver.start(), watched)
    load = Load(service.url + "/", key, payer.pubkey())
    transfers = Transfers(leader, payer, watched)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{service.env['GATEWAY_GRPC_PORT']}")
    try:
        async with ws_recorder(service.url, key) as ws, ws_recorder(service.url, key) as signals:
            slots = await ws.subscribe("slotSubscribe", [])
            account = await ws.subscribe("accountSubscribe", [str(watched), {"commitment": "processed"}])
            pairs = await signals.subscribe("subscribeSignal", [{"kinds": ["newPair"]}])
            stream = GeyserStream(channel, key, watched)

            def progress(ws_slots: int, grpc_slots: int) -> Callable[[], bool]:
                def reached() -> bool:
                    seen = ws.of(slots)
                    processed = stream.processed()
                    return bool(seen and processed) and seen[-1]["slot"] >= ws_slots and processed[-1] >= grpc_slots

                return reached

            def marks() -> tuple[int, int]:
                return ws.of(slots)[-1]["slot"], stream.processed()[-1]

            def state() -> object:
                return {
                    "ws": (ws.closed, ws.of(slots)[-1:]),
                    "grpc": (stream.ended, stream.processed()[-1:]),
                    "account": len(ws.of(account)),
                    "pairs": len(new_pairs(signals, pairs)),
                    "webhook": len(receiver.events),
                }

            # Steady: everything served, from node-1.
            await until(lambda: len(ws.of(slots)) >= 10 and len(stream.processed()) >= 10, state)
            transfers.start()  # the stream's filters are live: it has slots
            await until(lambda: len(ws.of(account)) >= 1 and len(stream.signatures()) >= 1, state)
            await until(lambda: len(receiver.events) >= 1 and len(new_pairs(signals, pairs)) >= 1, state)

            # 1. The streams' node killed (kill -9), a transfer sent as it dies.
            first = await streams_node(service)
            assert first == "node-1", first  # the first of the pool, while every node serves
            tx = await transfers.signed()
            landed_1 = await ws.subscribe("signatureSubscribe", [signature_of(tx), {"commitment": "confirmed"}])
            at_kill = marks()
            pairs_at_kill = len(new_pairs(signals, pairs))
            load.phase = transfers.phase = "killed"
            os.kill(follower_pid(service, first), signal.SIGKILL)
            await transfers.send(tx)
            await until_pool(service, lambda states: states[first] != "in service")
            await until(progress(at_kill[0] + 30, at_kill[1] + 30), state)
            await until(lambda: len(ws.of(landed_1)) >= 1, state)
            await until(lambda: len(new_pairs(signals, pairs)) > pairs_at_kill, state)
            assert (ws.closed, signals.closed, stream.ended) == (None, None, None), state()

            # 2. The next streams' node stopped (SIGSTOP) for HANG_S, then resumed.
            second = await streams_node(service)
            assert second != first
            hung = follower_pid(service, second)
            tx = await transfers.signed()
            landed_2 = await ws.subscribe("signatureSubscribe", [signature_of(tx), {"commitment": "confirmed"}])
            at_hang = marks()
            load.phase = transfers.phase = "hung"
            os.kill(hung, signal.SIGSTOP)
            try:
                hang_ends = asyncio.get_running_loop().time() + HANG_S
                await transfers.send(tx)
                await until(progress(at_hang[0] + 30, at_hang[1] + 30), state)
                await until(lambda: len(ws.of(landed_2)) >= 1, state)
                await asyncio.sleep(max(0.0, hang_ends - asyncio.get_running_loop().time()))
            finally:
                os.kill(hung, signal.SIGCONT)
            load.phase = transfers.phase = "resumed"
            await until_pool(service, lambda states: states[second] == "in service")
            third = next(name for name in NODES if name not in (first, second))  # where the streams are now
            at_resume = marks()
            pairs_at_resume = len(new_pairs(signals, pairs))
            await until(progress(at_resume[0] + 20, at_resume[1] + 20), state)
            await until(lambda: len(new_pairs(signals, pairs)) > pairs_at_resume, state)
            assert (ws.closed, signals.closed, stream.ended) == (None, None, None), state()

            # What the clients received while a node served: checked with the transfers landed and no more sent.
            await transfers.pause()
            before_none = [signature for signature, _ in transfers.sent]
            phases = dict(transfers.sent)
            await until(
                lambda: set(before_none) <= set(stream.signatures()),
                lambda: [(s, phases[s]) for s in before_none if s not in stream.signatures()],
            )
            expected_balance = await transfers.balance()
            await until(lambda: ws.of(account)[-1]["value"]["lamports"] == expected_balance, state)
            processed = stream.processed()
            twice = sorted(slot for slot, n in Counter(processed).items() if n > 1)
            missing = sorted(set(range(processed[0], processed[-1] + 1)) - set(processed))
            assert (twice, missing) == ([], []), f"gRPC PROCESSED slots twice {twice}, missing {missing}"
            assert processed == sorted(processed)
            received = stream.signatures()
            assert {s: received[s] for s in before_none} == dict.fromkeys(before_none, 1)  # each transfer once
            ws_slots = [n["slot"] for n in ws.of(slots)]
            assert ws_slots == sorted(set(ws_slots)), "a /ws slot came twice or went back"
            assert (len(ws.of(landed_1)), len(ws.of(landed_2))) == (1, 1)
            assert ws.of(landed_1)[0]["value"] == {"err": None} and ws.of(landed_2)[0]["value"] == {"err": None}
            values = [(n["context"]["slot"], n["value"]["lamports"]) for n in ws.of(account)]
            bodies = [orjson.dumps(n) for n in ws.of(account)]
            assert len(bodies) == len(set(bodies)), "an account notification came twice"
            assert values == sorted(values), f"the account's value went back: {values}"

            # 3. Every node killed: no node serves; then one restarted on its ports.
            load.phase = transfers.phase = "none"
            for name in NODES:
                if name != first:
                    os.kill(follower_pid(service, name), signal.SIGKILL)
            await transfers.send()  # the chain goes on: the webhook's watcher catches these up later
            await until(lambda: ws.closed is not None and stream.ended is not None, state)
            assert ws.closed is not None and ws.closed[0] == 1013, ws.closed
            assert stream.ended is not None and stream.ended[0] == grpc.StatusCode.UNAVAILABLE, stream.ended
            await transfers.send()
            again = restart(service, first)
            stack.restarted.append(again)
            await asyncio.to_thread(again.start)
            await until_pool(service, lambda states: states[first] == "in service")
            await until_answered(service, key)  # the replica's view has it too
            load.phase = transfers.phase = "restarted"

            late = await served_stream(channel, key, watched)
            async with served_socket(service, key) as (fresh, new_slots):
                new_account = await fresh.subscribe("accountSubscribe", [str(watched), {"commitment": "processed"}])
                try:
                    await until(lambda: len(fresh.of(new_slots)) >= 10 and len(late.processed()) >= 10, state)
                    sent = await transfers.send()
                    await until(lambda: len(fresh.of(new_account)) >= 1, lambda: fresh.notes)
                    await until(lambda: late.signatures()[sent] >= 1, lambda: late.signatures())
                    assert (fresh.closed, late.ended) == (None, None)
                finally:
                    late.close()
            pairs_now = len(new_pairs(signals, pairs))
            await until(lambda: len(new_pairs(signals, pairs)) > pairs_now, state)  # the classifier went on

            # The webhook: every transfer to the account once, those sent while no node served included.
            await transfers.pause()
            everything = [signature for signature, _ in transfers.sent]
            await until(lambda: set(everything) <= set(receiver.events), lambda: set(everything) - set(receiver.events))
            events = await webhook_events(service.url, key, hook_id)
            seen_pairs = new_pairs(signals, pairs)
            signals_closed = signals.closed
            stream.close()
    finally:
        await load.stop()
        await transfers.close()
        await receiver.stop()
        await channel.close()

    twice_delivered = {s: ids for s, ids in receiver.events.items() if len(ids) > 1}
    assert twice_delivered == {}, f"a transaction delivered as two events: {twice_delivered}"
    assert set(receiver.events) == set(everything), set(receiver.events) ^ set(everything)
    assert len(events) == len(everything), (len(events), len(everything))  # no other event was made
    assert receiver.refused == 0
    assert len(seen_pairs) == len(set(seen_pairs)), f"a newPair came twice: {Counter(seen_pairs).most_common(3)}"
    assert signals_closed is None  # the signal stream needs no node of its own: it stayed open throughout
    served = {phase: statuses for phase, statuses in load.statuses.items() if phase != "none"}
    failed = {phase: {s: n for s, n in statuses.items() if s != 200} for phase, statuses in served.items()}
    assert all(not f for f in failed.values()), f"paid reads failed while a node served: {failed} {load.failures}"
    assert set(load.statuses["none"]) <= {200, 502, 503}, load.statuses["none"]
    # The streams did move: the /ws connections (the replica's, the webhook watcher's) and the gRPC server's
    # subscription each moved to the node after the one killed, then to the one after the one hung.
    wanted = {(role, node) for role in ("pubsub", "geyser") for node in (second, third)}
    deadline = asyncio.get_running_loop().time() + WITHIN_S
    while not wanted <= set(+(counted := await asyncio.to_thread(moves, service))):  # the moves counted
        assert asyncio.get_running_loop().time() < deadline, counted
        await asyncio.sleep(1.0)
