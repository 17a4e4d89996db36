"""Paid load through the gateway, a local webhook receiver, and the checks that nothing was lost.

The load: paid reads (``getSlot``, ``getBalance``) from each customer, and real signed SOL transfers
sent with ``sendAndConfirm`` to a sink address that an ``account`` webhook watches (docs/api.md,
Sending and Webhooks). Every call is recorded with its phase (the fault under way), its HTTP status
and its ``X-Request-Id``, so the checks can find its history entry.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
from aiohttp import web
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair
from solders.message import Message
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.system_program import TransferParams, transfer
from solders.transaction import Transaction

from tests.integration.service import RunningService, confirm_deposit, create_api_key, deposit_usdc

READS = ("getSlot", "getBalance")
SEND_EVERY_S = 2.0
READ_EVERY_S = 0.1


@dataclass
class Customer:
    name: str
    wallet: Keypair
    api_key: str

    @property
    def headers(self) -> dict[str, str]:
        return {"X-Api-Key": self.api_key, "Content-Type": "application/json"}


@dataclass
class Call:
    phase: str
    kind: str  # "read" or "send"
    status: int  # HTTP status; 0: no answer (connection lost or timed out)
    request_id: str | None
    answered: bool  # a JSON-RPC result (not an error body)
    signature: str | None = None  # sends: the transaction's
    outcome: str | None = None  # sends: the answer's status (confirmed, failed, unknown)
    lamports: int = 0  # sends: the transfer's amount (each different)


async def new_customer(service: RunningService, name: str, usdc_base_units: int) -> Customer:
    wallet = Keypair()
    key = await asyncio.to_thread(create_api_key, service.url, wallet)
    await deposit(service, Customer(name, wallet, key), usdc_base_units)
    return Customer(name, wallet, key)


async def deposit(service: RunningService, customer: Customer, usdc_base_units: int) -> str:
    """A real USDC transfer to the deposit address, confirmed through the gateway; its signature."""
    signature = await asyncio.to_thread(deposit_usdc, service, customer.wallet, usdc_base_units)
    await asyncio.to_thread(confirm_deposit, service, signature, {"X-Api-Key": customer.api_key})
    return signature


class Receiver:
    """A webhook receiver on 127.0.0.1 (docs/api.md, Local receivers): records each event id per
    (event type, transaction signature) and always answers 200."""

    def __init__(self) -> None:
        self.ids: dict[tuple[str, str], set[str]] = {}
        self.posts = 0
        self._runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        doc = json.loads(body)
        self.posts += 1
        data = doc.get("data") or {}
        key = (str(doc.get("type")), str(data.get("signature")))
        self.ids.setdefault(key, set()).add(request.headers.get("X-Webhook-Event-Id", "?"))
        return web.Response(text="ok")

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/hook", self.handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(self._runner, sock).start()
        return f"http://127.0.0.1:{sock.getsockname()[1]}/hook"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


async def create_webhook(url: str, customer: Customer, document: dict[str, Any]) -> int:
    headers = {"X-Api-Key": customer.api_key}
    async with aiohttp.ClientSession() as http, http.post(f"{url}/webhooks", json=document, headers=headers) as resp:
        doc = await resp.json()
        assert resp.status == 201, doc
        return int(doc["id"])


@dataclass
class Load:
    """The load driver: readers per customer and one sender, paused between faults."""

    service: RunningService
    customers: list[Customer]
    payer: Customer
    sink: Pubkey
    phase: str = "warm-up"
    calls: list[Call] = field(default_factory=list)
    running: asyncio.Event = field(default_factory=asyncio.Event)
    _stop: bool = False
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _amount: int = 1_000_000  # lamports of the next transfer (each different, so each a new transaction)
    _http: aiohttp.ClientSession | None = None
    in_flight: int = 0

    async def start(self) -> None:
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
        self._tasks = [asyncio.create_task(self._reads(c)) for c in self.customers]
        self._tasks.append(asyncio.create_task(self._sends()))

    async def close(self) -> None:
        self._stop = True
        self.running.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._http is not None:
            await self._http.close()

    async def rpc(self, customer: Customer, method: str, params: list[Any]) -> tuple[int, Any, str | None]:
        assert self._http is not None
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        self.in_flight += 1
        try:
            async with self._http.post(f"{self.service.url}/", json=body, headers=customer.headers) as resp:
                raw = await resp.read()
                doc = json.loads(raw) if raw else None
                return resp.status, doc, resp.headers.get("X-Request-Id")
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return 0, None, None
        finally:
            self.in_flight -= 1

    async def pause(self) -> None:
        """Stop starting calls and wait for those under way (a send may take its 30 slots)."""
        self.running.clear()
        deadline = time.monotonic() + 120
        while self.in_flight:
            assert time.monotonic() < deadline, "calls still under way after 120 s"
            await asyncio.sleep(0.1)

    async def read_once(self, customer: Customer, method: str) -> Call:
        params: list[Any] = [str(customer.wallet.pubkey())] if method == "getBalance" else []
        status, doc, request_id = await self.rpc(customer, method, params)
        answered = status == 200 and isinstance(doc, dict) and "result" in doc
        return Call(self.phase, "read", status, request_id, answered)

    async def _reads(self, customer: Customer) -> None:
        n = 0
        while not self._stop:
            await self.running.wait()
            if self._stop:
                return
            n += 1
            self.calls.append(await self.read_once(customer, READS[n % len(READS)]))
            await asyncio.sleep(READ_EVERY_S)

    async def send_once(self) -> Call | None:
        """One signed transfer payer → sink raced by ``sendAndConfirm``; None when the node gave no blockhash."""
        tx = await self.transfer_tx()
        if tx is None:
            return None
        phase, amount = self.phase, self._amount
        encoded = base64.b64encode(bytes(tx)).decode()
        status, doc, request_id = await self.rpc(self.payer, "sendAndConfirm", [encoded])
        result = doc.get("result") if isinstance(doc, dict) else None
        outcome = str(result.get("status")) if isinstance(result, dict) else None
        sig = str(tx.signatures[0])
        return Call(phase, "send", status, request_id, result is not None, sig, outcome, amount)

    async def transfer_tx(self) -> Transaction | None:
        try:
            async with AsyncClient(self.service.node_url, timeout=5) as node:
                blockhash = (await node.get_latest_blockhash()).value.blockhash
        except Exception:  # the node is down (a fault): no transaction to send
            return None
        self._amount += 1
        payer = self.payer.wallet
        ix = transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=self.sink, lamports=self._amount))
        return Transaction([payer], Message.new_with_blockhash([ix], payer.pubkey(), blockhash), blockhash)

    async def _sends(self) -> None:
        while not self._stop:
            await self.running.wait()
            if self._stop:
                return
            call = await self.send_once()
            if call is not None:
                self.calls.append(call)
            await asyncio.sleep(SEND_EVERY_S)

    def of(self, phase: str) -> list[Call]:
        return [c for c in self.calls if c.phase == phase]


# -- checks ------------------------------------------------------------------------------------------


def gateway_cli(service: RunningService, *args: str) -> subprocess.CompletedProcess[str]:
    """One of the operator commands (docs/operations.md, Operator commands) against the running stack."""
    gateway = str(Path(sys.executable).with_name("gateway"))
    return subprocess.run([gateway, *args], env=service.env, capture_output=True, text=True, timeout=180, check=False)


async def cli_json(service: RunningService, *args: str) -> Any:
    done = await asyncio.to_thread(gateway_cli, service, *args, "--json")
    assert done.returncode == 0, f"gateway {' '.join(args)}: {done.returncode}\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout)


async def wait_sends_settled(service: RunningService, timeout_s: float = 240.0) -> float:
    """Until ``gateway sends pending`` is empty (the racers and the reconciler settled every hold); the wait."""
    started = time.monotonic()
    while await cli_json(service, "sends", "pending"):
        assert time.monotonic() - started < timeout_s, "send holds still pending"
        await asyncio.sleep(2)
    return time.monotonic() - started


async def chain_outcomes(node_url: str, signatures: list[str]) -> dict[str, bool | None]:
    """Per signature: True landed without error, False landed with one, None not seen by the node."""
    outcomes: dict[str, bool | None] = {}
    async with AsyncClient(node_url, timeout=10) as node:
        for start in range(0, len(signatures), 200):
            chunk = signatures[start : start + 200]
            resp = await node.get_signature_statuses(
                [Signature.from_string(s) for s in chunk], search_transaction_history=True
            )
            for sig, status in zip(chunk, resp.value, strict=True):
                outcomes[sig] = None if status is None else status.err is None
    return outcomes


@dataclass
class Ledger:
    """What the checks found, one fault's worth."""

    unbilled: int = 0
    unbilled_detail: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


async def check_billing(conn: asyncpg.Connection, calls: list[Call], landed: dict[str, bool | None]) -> Ledger:
    """Every read answered with a result has a charged history entry (its X-Request-Id), and every send
    that landed without error was charged (docs/api.md, Billing and refunds; Sending)."""
    found = Ledger()
    reads = [c.request_id for c in calls if c.kind == "read" and c.answered and c.request_id]
    billed = {
        r["request_id"]
        for r in await conn.fetch(
            "SELECT request_id FROM usage_history WHERE request_id = ANY($1::text[]) AND credits > 0", reads
        )
    }
    missing = [r for r in reads if r not in billed]
    found.unbilled += len(missing)
    found.unbilled_detail += [f"read {r}" for r in missing[:5]]
    sends = [c.signature for c in calls if c.kind == "send" and c.signature and landed.get(c.signature)]
    rows = await conn.fetch("SELECT signature, status, charged FROM sends WHERE signature = ANY($1::text[])", sends)
    charged = {r["signature"]: (r["status"], r["charged"]) for r in rows}
    for sig in sends:
        status, credits = charged.get(sig, (None, None))
        if status != "confirmed" or not credits:
            found.unbilled += 1
            found.unbilled_detail.append(f"send {sig}: landed, recorded {status} charged {credits}")
    return found


async def check_sends_match_chain(conn: asyncpg.Connection, landed: dict[str, bool | None]) -> list[str]:
    """Each settled hold agrees with the chain: confirmed iff it landed without error, expired iff it never landed."""
    rows = await conn.fetch(
        "SELECT signature, status, charged, settled_by FROM sends WHERE signature = ANY($1::text[])", list(landed)
    )
    wrong = []
    for row in rows:
        truth = landed[row["signature"]]
        expected = {True: "confirmed", False: "failed", None: "expired"}[truth]
        if row["status"] != expected:
            wrong.append(
                f"send {row['signature']}: chain says {expected}, ledger {row['status']} ({row['settled_by']})"
            )
    return wrong


def check_deliveries(receiver: Receiver, expected: set[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """(events never delivered, events delivered under more than one event id)."""
    lost = sorted(f"{kind} {sig}" for kind, sig in expected if not receiver.ids.get((kind, sig)))
    twice = sorted(f"{kind} {sig}: {sorted(ids)}" for (kind, sig), ids in receiver.ids.items() if len(ids) > 1)
    return lost, twice


async def wait_deliveries(receiver: Receiver, expected: set[tuple[str, str]], timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(receiver.ids.get(key) for key in expected):
            return
        await asyncio.sleep(1)


async def probe(load: Load, customer: Customer) -> bool:
    """One paid getSlot answered with a result."""
    with contextlib.suppress(Exception):
        return (await load.read_once(customer, "getSlot")).answered
    return False
