"""The PubSub WebSocket (mainnet's subscription methods and notification shapes).

Simplified timing: account, program and logs notifications go out when the transaction lands
(whatever commitment was asked); signature notifications honour the requested commitment, which
this node reaches one (confirmed) and two (finalized) slots after landing."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import base58
import orjson
from solders.account import Account
from solders.pubkey import Pubkey
from solders.signature import Signature
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from devnode.chain import Chain
from devnode.chain.constants import COMMITMENT_NAMES, FINALIZED
from devnode.encoding import check_account_encoding, encode_account
from devnode.errors import INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, RpcError, invalid_params
from devnode.records import TxRecord
from devnode.rpc.accounts import account_matches

log = logging.getLogger(__name__)
SYSTEM_PROGRAM = Pubkey.default()
MAX_QUEUED = 10_000
_VOTE_PROGRAM = Pubkey.from_string("Vote111111111111111111111111111111111111111")


@dataclass(eq=False)
class _Conn:
    ws: ServerConnection
    queue: asyncio.Queue[bytes] = field(default_factory=asyncio.Queue)
    subs: set[int] = field(default_factory=set)


@dataclass(eq=False)
class _Sub:
    id: int
    kind: str
    conn: _Conn
    key: Any = None  # Pubkey (account/program), Signature, logs filter
    config: dict[str, Any] = field(default_factory=dict)
    commitment: int = FINALIZED


def _commitment(cfg: dict[str, Any]) -> int:
    name = cfg.get("commitment") or "finalized"
    aliases = {
        "recent": "processed",
        "single": "confirmed",
        "singleGossip": "confirmed",
        "root": "finalized",
        "max": "finalized",
    }
    name = aliases.get(name, name)
    if name not in COMMITMENT_NAMES:
        raise invalid_params(f"Invalid params: unknown variant `{name}`")
    return COMMITMENT_NAMES.index(name)


def _cfg(params: list[Any], i: int) -> dict[str, Any]:
    value = params[i] if len(params) > i else None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid_params("Invalid params: expected a config object")
    return value


def _pubkey(value: Any) -> Pubkey:
    try:
        return Pubkey.from_string(value)
    except (ValueError, TypeError) as exc:
        raise invalid_params(f"Invalid param: {exc}") from exc


class PubSub:
    """Subscriptions per connection; a `ChainListener` that queues notifications (never blocks)."""

    def __init__(self, chain: Chain) -> None:
        self.chain = chain
        self._ids = itertools.count(1)
        self._subs: dict[int, _Sub] = {}
        self._by_kind: dict[str, dict[int, _Sub]] = {
            k: {} for k in ("account", "program", "logs", "signature", "slot", "root", "slotsUpdates")
        }
        self._last_root = -1
        self._server: Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def subscription_count(self) -> int:
        return len(self._subs)

    # ------------------------------------------------------------ server

    async def start(self, host: str, port: int) -> int:
        self._server = await serve(self._serve_conn, host, port, max_size=2**20, ping_interval=25)
        self.chain.add_listener(self)
        return int(next(iter(self._server.sockets)).getsockname()[1])

    async def stop(self) -> None:
        self.chain.remove_listener(self)
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve_conn(self, ws: ServerConnection) -> None:
        conn = _Conn(ws)
        writer = asyncio.create_task(self._writer(conn))
        try:
            async for raw in ws:
                self._handle_frame(conn, raw)
        except ConnectionClosed:
            pass
        finally:
            for sub_id in list(conn.subs):
                self._drop(sub_id)
            writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await writer

    async def _writer(self, conn: _Conn) -> None:
        try:
            while True:
                await conn.ws.send((await conn.queue.get()).decode())
        except ConnectionClosed:
            pass

    def _send(self, conn: _Conn, message: dict[str, Any]) -> None:
        if conn.queue.qsize() >= MAX_QUEUED:
            log.warning("pubsub client too slow, closing")
            task = asyncio.ensure_future(conn.ws.close(1008, "notification queue overflow"))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        conn.queue.put_nowait(orjson.dumps(message))

    # ------------------------------------------------------------ requests

    def _handle_frame(self, conn: _Conn, raw: str | bytes) -> None:
        try:
            payload = orjson.loads(raw)
        except orjson.JSONDecodeError:
            self._send(conn, {"jsonrpc": "2.0", "error": {"code": PARSE_ERROR, "message": "Parse error"}, "id": None})
            return
        for req in payload if isinstance(payload, list) else [payload]:
            self._send(conn, self._handle_request(conn, req))

    def _handle_request(self, conn: _Conn, req: Any) -> dict[str, Any]:
        req_id = req.get("id") if isinstance(req, dict) else None
        try:
            if not isinstance(req, dict) or not isinstance(req.get("method"), str):
                raise RpcError(INVALID_REQUEST, "Invalid request")
            params = req.get("params") or []
            if not isinstance(params, list):
                raise invalid_params("Invalid params: expected a sequence")
            result = self._dispatch(conn, req["method"], params)
        except RpcError as exc:
            return {"jsonrpc": "2.0", "error": exc.to_json(), "id": req_id}
        return {"jsonrpc": "2.0", "result": result, "id": req_id}

    def _dispatch(self, conn: _Conn, method: str, params: list[Any]) -> Any:
        if method.endswith("Unsubscribe"):
            kind = method[: -len("Unsubscribe")]
            if kind not in self._by_kind:
                raise RpcError(METHOD_NOT_FOUND, "Method not found")
            sub_id = params[0] if params else None
            sub = self._subs.get(sub_id) if isinstance(sub_id, int) else None
            if sub is None or sub.conn is not conn or sub.kind != kind:
                raise invalid_params("Invalid subscription id.")
            self._drop(sub.id)
            return True
        if not method.endswith("Subscribe") or method[: -len("Subscribe")] not in self._by_kind:
            raise RpcError(METHOD_NOT_FOUND, "Method not found")
        kind = method[: -len("Subscribe")]
        sub = getattr(self, f"_new_{kind}")(conn, params)
        self._subs[sub.id] = sub
        self._by_kind[kind][sub.id] = sub
        conn.subs.add(sub.id)
        if kind == "signature":
            self._check_signature_soon(sub)
        return sub.id

    def _drop(self, sub_id: int) -> None:
        sub = self._subs.pop(sub_id, None)
        if sub is not None:
            self._by_kind[sub.kind].pop(sub_id, None)
            sub.conn.subs.discard(sub_id)

    def _new_account(self, conn: _Conn, params: list[Any]) -> _Sub:
        if not params:
            raise invalid_params("Invalid params: missing field `pubkey`")
        cfg = _cfg(params, 1)
        check_account_encoding(cfg.get("encoding") or "binary")
        return _Sub(next(self._ids), "account", conn, _pubkey(params[0]), cfg, _commitment(cfg))

    def _new_program(self, conn: _Conn, params: list[Any]) -> _Sub:
        if not params:
            raise invalid_params("Invalid params: missing field `program_id`")
        cfg = _cfg(params, 1)
        check_account_encoding(cfg.get("encoding") or "binary")
        for flt in cfg.get("filters") or []:
            account_matches(b"", flt)  # validates the filter's shape
        return _Sub(next(self._ids), "program", conn, _pubkey(params[0]), cfg, _commitment(cfg))

    def _new_logs(self, conn: _Conn, params: list[Any]) -> _Sub:
        flt = params[0] if params else None
        key: Any
        if flt in ("all", "allWithVotes"):
            key = flt
        elif isinstance(flt, dict) and isinstance(flt.get("mentions"), list):
            if len(flt["mentions"]) != 1:
                raise invalid_params("Invalid Request: Only 1 address supported")
            key = _pubkey(flt["mentions"][0])
        else:
            raise invalid_params('Invalid params: expected "all", "allWithVotes" or {"mentions": [address]}')
        cfg = _cfg(params, 1)
        return _Sub(next(self._ids), "logs", conn, key, cfg, _commitment(cfg))

    def _new_signature(self, conn: _Conn, params: list[Any]) -> _Sub:
        if not params:
            raise invalid_params("Invalid params: missing field `signature`")
        try:
            sig = Signature.from_string(params[0])
        except (ValueError, TypeError) as exc:
            raise invalid_params("Invalid param: Invalid") from exc
        cfg = _cfg(params, 1)
        return _Sub(next(self._ids), "signature", conn, sig, cfg, _commitment(cfg))

    def _new_slot(self, conn: _Conn, params: list[Any]) -> _Sub:
        return _Sub(next(self._ids), "slot", conn)

    def _new_root(self, conn: _Conn, params: list[Any]) -> _Sub:
        return _Sub(next(self._ids), "root", conn)

    def _new_slotsUpdates(self, conn: _Conn, params: list[Any]) -> _Sub:
        return _Sub(next(self._ids), "slotsUpdates", conn)

    # ------------------------------------------------------------ notifications

    def _notify(self, sub: _Sub, method: str, result: Any) -> None:
        self._send(
            sub.conn,
            {"jsonrpc": "2.0", "method": method, "params": {"result": result, "subscription": sub.id}},
        )

    def _ctx(self, slot: int, value: Any) -> dict[str, Any]:
        return {"context": {"slot": slot}, "value": value}

    def _encode(self, sub: _Sub, account: Account) -> dict[str, Any]:
        encoding = sub.config.get("encoding") or "binary"
        if encoding == "binary":  # pubsub sends full legacy base58 (no 128-byte limit)
            rendered = encode_account(account, "base64", sub.config.get("dataSlice"))
            raw = bytes(account.data)
            rendered["data"] = base58.b58encode(raw).decode()
            return rendered
        return encode_account(account, encoding, sub.config.get("dataSlice"), self.chain.get_account)

    def on_transaction(self, rec: TxRecord, changed: list[tuple[Pubkey, Account | None]]) -> None:
        slot = rec.slot
        for sub in list(self._by_kind["logs"].values()):
            if sub.key == "all" or sub.key == "allWithVotes" or sub.key in rec.account_keys:
                if sub.key == "all" and _VOTE_PROGRAM in rec.account_keys:
                    continue
                self._notify(
                    sub,
                    "logsNotification",
                    self._ctx(slot, {"err": rec.err, "logs": rec.log_messages, "signature": str(rec.signature)}),
                )
        if self._by_kind["account"] or self._by_kind["program"]:
            for key, account in changed:
                shown = account if account is not None else Account(0, b"", SYSTEM_PROGRAM)
                for sub in list(self._by_kind["account"].values()):
                    if sub.key == key:
                        self._notify(sub, "accountNotification", self._ctx(slot, self._encode(sub, shown)))
                if account is None:
                    continue
                for sub in list(self._by_kind["program"].values()):
                    if sub.key == account.owner and all(
                        account_matches(bytes(account.data), f) for f in sub.config.get("filters") or []
                    ):
                        value = {"account": self._encode(sub, account), "pubkey": str(key)}
                        self._notify(sub, "programNotification", self._ctx(slot, value))
        self._check_signatures()

    def on_slot(self, slot: int, parent: int, root: int) -> None:
        for sub in list(self._by_kind["slot"].values()):
            self._notify(sub, "slotNotification", {"parent": parent, "root": root, "slot": slot})
        now_ms = int(time.time() * 1000)
        # Of Agave's slot updates this node has only two: a bank created per slot, and the new root.
        for sub in list(self._by_kind["slotsUpdates"].values()):
            update = {"parent": parent, "slot": slot, "timestamp": now_ms, "type": "createdBank"}
            self._notify(sub, "slotsUpdatesNotification", update)
        if root != self._last_root:
            self._last_root = root
            for sub in list(self._by_kind["root"].values()):
                self._notify(sub, "rootNotification", root)
            for sub in list(self._by_kind["slotsUpdates"].values()):
                self._notify(sub, "slotsUpdatesNotification", {"slot": root, "timestamp": now_ms, "type": "root"})
        self._check_signatures()

    def _check_signature_soon(self, sub: _Sub) -> None:
        # Deferred so that the subscription's own response goes out first.
        asyncio.get_running_loop().call_soon(self._signature_subscribed, sub)

    def _signature_subscribed(self, sub: _Sub) -> None:
        if sub.id not in self._subs:
            return
        if sub.config.get("enableReceivedNotification") and sub.key not in self.chain.txs:
            self._notify(sub, "signatureNotification", self._ctx(self.chain.slot, "receivedSignature"))
        self._check_signatures()  # a signature that already landed notifies at once

    def _check_signatures(self) -> None:
        for sub in list(self._by_kind["signature"].values()):
            rec = self.chain.txs.get(sub.key)
            if rec is None or self.chain.commitment_of(rec) < sub.commitment:
                continue
            self._notify(sub, "signatureNotification", self._ctx(rec.slot, {"err": rec.err}))
            self._drop(sub.id)  # one notification, then auto-unsubscribe, as mainnet
