"""The follower's side of the wire: a `Follower` reads a leader's replication stream into a chain of its own.

It loads the base the leader sends (`Chain.load_replica`: the leader's genesis hash, slot position,
transaction count, newest block and accounts) and applies each event as the leader recorded it:
`apply_transaction` (history, indexes, its own listeners: PubSub and geyser notify their subscribers) and
`apply_slot` (the leader's block and blockhash, retention, the Clock sysvar). Nothing is executed again.

Lag: with `lag_slots` N an event of slot S (a transaction landed in S, the slot event opening S) waits in
a buffer until the newest leader slot seen is at least S + N; with 0 it is applied at once. A follower
started against a leader that has logged more than N slots is N behind from its first answer (the base and
the log reach back that far); a lag larger than the leader's window is refused (`FollowError`).

Reconnects: when the stream drops, the follower keeps its state and serves it (stale), and reconnects after
`BACKOFF_S` growing to `MAX_BACKOFF_S`, asking to resume from the first event it has not applied
(buffered events are dropped and sent again). The leader resumes it if its log still holds that event,
else sends a new base, loaded in place (PubSub and geyser subscribers stay connected). A leader of another
genesis is refused: the follower logs an error, stays unhealthy and keeps trying, never switching clusters.

Health, as Agave reports it: ok while the stream is up (or down for at most `DOWN_AFTER_S`) and the
follower is at most `HEALTH_CHECK_SLOT_DISTANCE` slots behind the newest leader slot it knows; behind by N
past that; unknown when the stream is down for longer, never came up, or the leader is of another cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from solders.hash import Hash

from devnode.chain import Chain
from devnode.replication.frames import Base, Event, Frame, Hello, Live, SlotEvent, TxEvent, WriteEvent, decode
from devnode.replication.route import PATH

log = logging.getLogger(__name__)

#: Agave's: a node more slots than this behind the cluster is unhealthy.
HEALTH_CHECK_SLOT_DISTANCE = 128
DOWN_AFTER_S = 1.0
BACKOFF_S = 0.2
MAX_BACKOFF_S = 2.0
#: The follower pings the leader after this long without a frame; no pong within half of it: the stream is down.
HEARTBEAT_S = 1.0
CONNECT_TIMEOUT_S = 5.0
FORWARD_TIMEOUT_S = 5.0
#: Frames applied between two yields to the event loop (a backlog must not starve the RPC server).
YIELD_EVERY = 256


class FollowError(RuntimeError):
    """The follower cannot follow this leader (unreachable at start, a lag beyond its window)."""


class LeaderUnreachable(ConnectionError):
    """A request forwarded to the leader got no answer."""


class _Refused(Exception):
    """The leader is of another cluster, or its window is smaller than the lag: wait and try again."""


def apply_event(chain: Chain, event: Event) -> None:
    """One event of the leader's log applied to a chain that is where the event follows."""
    match event:
        case TxEvent(_, rec, changed):
            chain.apply_transaction(rec, changed)
        case SlotEvent(_, block, next_slot, open_time, _):
            chain.apply_slot(block, next_slot, open_time)
        case WriteEvent(_, _, accounts):
            for key, account in accounts:
                chain.set_genesis_account(key, account)


@dataclass(frozen=True)
class Health:
    """What getHealth and GET /health say."""

    status: str  # "ok", "behind" or "unknown", as Agave's GET /health says it
    slots_behind: int | None  # None when unknown


class Follower:
    """Follows the leader at `leader_url` (its RPC URL) into `chain`; also forwards requests to that leader."""

    def __init__(self, chain: Chain, leader_url: str, *, lag_slots: int = 0) -> None:
        if lag_slots < 0:
            raise ValueError(f"lag_slots must not be negative, not {lag_slots}")
        self.chain = chain
        self.leader_url = leader_url.rstrip("/")
        self.lag_slots = lag_slots
        self.newest_slot = -1  # the newest leader slot seen
        self.cluster_nodes: list[Any] | None = None  # the leader's getClusterNodes answer
        self.resyncs = 0  # bases loaded (the first sync included)
        self._genesis: Hash | None = None
        self._log_id: str | None = None
        self._next_seq: int | None = None  # the first event not applied
        self._received_seq: int | None = None  # the next event expected on the stream
        self._pending: deque[Event] = deque()
        self._connected = False
        self._down_since: float | None = None
        self._ever_live = False
        self._refused: str | None = None
        self._went_live = False  # the current connection got through its backlog
        self._synced = asyncio.Event()
        self._session: aiohttp.ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[None]] = set()

    # ------------------------------------------------------------ lifecycle

    async def start(self, timeout_s: float) -> None:
        """Connect and apply the backlog; returns once live (the chain is where the lag puts it).
        `FollowError` if that does not happen within `timeout_s` or the leader cannot be followed."""
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S))
        self._task = asyncio.create_task(self._run(), name="devnode-follower")
        try:
            async with asyncio.timeout(timeout_s):
                await self._synced.wait()
        except TimeoutError:
            await self.stop()
            raise FollowError(
                f"could not sync from the leader at {self.leader_url} within {timeout_s:g} s"
                + (f": {self._refused}" if self._refused else "")
            ) from None
        if self._refused is not None:
            reason = self._refused
            await self.stop()
            raise FollowError(reason)

    async def stop(self) -> None:
        for task in [self._task, *self._background]:
            if task is not None:
                task.cancel()
        for task in [self._task, *self._background]:
            if task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._task = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    # ------------------------------------------------------------ state

    @property
    def max_slot(self) -> int:
        """The newest leader slot received (getMaxShredInsertSlot): past the chain's own when lagging."""
        return max(self.newest_slot, self.chain.slot)

    @property
    def refused(self) -> str | None:
        """Why the leader cannot be followed now (another cluster, a window smaller than the lag), else None."""
        return self._refused

    @property
    def connected(self) -> bool:
        """Whether the stream from the leader is up now."""
        return self._connected

    def health(self) -> Health:
        down_too_long = self._down_since is not None and time.monotonic() - self._down_since > DOWN_AFTER_S
        if not self._ever_live or down_too_long or self._refused is not None:
            return Health("unknown", None)
        behind = max(0, self.newest_slot - self.chain.slot)
        return Health("behind" if behind > HEALTH_CHECK_SLOT_DISTANCE else "ok", behind)

    # ------------------------------------------------------------ the stream

    async def _run(self) -> None:
        backoff = BACKOFF_S
        while True:
            self._went_live = False
            try:
                await self._follow_once()
            except _Refused as exc:
                self._refused = str(exc)
                self._synced.set()  # start() raises with the reason
                log.error("follower: %s", exc)
                backoff = MAX_BACKOFF_S
            except (aiohttp.ClientError, OSError, TimeoutError, TypeError) as exc:
                log.warning("follower: stream from %s down: %s", self.leader_url, exc or type(exc).__name__)
            except Exception:
                log.exception("follower: stream from %s failed", self.leader_url)
            finally:
                if self._connected:
                    self._down_since = time.monotonic()
                self._connected = False
                self._pending.clear()
                self._received_seq = None
            if self._went_live:
                backoff = BACKOFF_S
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    async def _follow_once(self) -> None:
        assert self._session is not None
        params: dict[str, str] = {}
        if self._genesis is not None:
            params["genesis"] = str(self._genesis)
        if self._log_id is not None and self._next_seq is not None:
            params["log"], params["seq"] = self._log_id, str(self._next_seq)
        ws = await asyncio.wait_for(
            self._session.ws_connect(
                self.leader_url + PATH, params=params, heartbeat=HEARTBEAT_S, max_msg_size=0, autoping=True
            ),
            CONNECT_TIMEOUT_S,
        )
        try:
            hello = decode(await asyncio.wait_for(ws.receive_bytes(), CONNECT_TIMEOUT_S))
            if not isinstance(hello, Hello):
                raise ValueError(f"the leader's first frame is not a hello: {hello!r}")
            self._check(hello)
            self._refused = None
            self._connected, self._down_since = True, None
            self.newest_slot = hello.slot if hello.resync else max(self.newest_slot, hello.slot)
            self._received_seq = self._next_seq
            self._spawn(self._fetch_cluster_nodes())
            applied = 0
            async for msg in ws:
                if msg.type is not aiohttp.WSMsgType.BINARY:
                    break
                self._on_frame(decode(msg.data), hello)
                applied += 1
                if applied % YIELD_EVERY == 0:
                    await asyncio.sleep(0)
            if ws.exception() is not None:
                raise ConnectionError(str(ws.exception()))
            raise ConnectionError(f"closed by the leader ({ws.close_code})")
        finally:
            await ws.close()

    def _check(self, hello: Hello) -> None:
        if self._genesis is not None and hello.genesis_hash != self._genesis:
            raise _Refused(
                f"the leader at {self.leader_url} is of another cluster (genesis {hello.genesis_hash}, this follower "
                f"follows {self._genesis}): not switching"
            )
        if self.lag_slots > hello.window:
            raise _Refused(
                f"lag of {self.lag_slots} slots is more than the leader's replication window of {hello.window} slots"
            )

    def _on_frame(self, frame: Frame, hello: Hello) -> None:
        match frame:
            case Base(snapshot, next_seq):
                self.chain.load_replica(snapshot)
                self._genesis, self._log_id = snapshot.genesis_hash, hello.log_id
                self._next_seq = self._received_seq = next_seq
                self._pending.clear()
                self.resyncs += 1
                log.info("follower: loaded %s's state at slot %d", self.leader_url, snapshot.slot)
            case Live(slot):
                self.newest_slot = max(self.newest_slot, slot)
                self._ever_live = self._went_live = True
                self._synced.set()
                log.info("follower: live from %s at slot %d (leader at %d)", self.leader_url, self.chain.slot, slot)
            case TxEvent() | SlotEvent() | WriteEvent():
                if frame.seq != self._received_seq:
                    self._log_id = None  # resync on the next connection
                    raise ValueError(f"event {frame.seq} out of order (expected {self._received_seq})")
                self._received_seq = frame.seq + 1
                self._pending.append(frame)
                if isinstance(frame, SlotEvent):
                    self.newest_slot = max(self.newest_slot, frame.next_slot)
                self._apply_due()
            case Hello():
                raise ValueError("a second hello")

    def _apply_due(self) -> None:
        pending = self._pending
        while pending and pending[0].slot + self.lag_slots <= self.newest_slot:
            event = pending.popleft()
            try:
                apply_event(self.chain, event)
            except Exception:
                self._log_id = None  # the state is not the leader's any more: resync
                raise
            self._next_seq = event.seq + 1

    # ------------------------------------------------------------ the leader's RPC

    async def forward(self, body: bytes) -> bytes:
        """POST a JSON-RPC body to the leader; its answer's body as it is. `LeaderUnreachable` without one."""
        if self._session is None:
            raise LeaderUnreachable("not following")
        try:
            async with self._session.post(
                self.leader_url,
                data=body,
                headers={"Content-Type": "application/json"},
                timeout=aiohttp.ClientTimeout(total=FORWARD_TIMEOUT_S),
            ) as resp:
                if resp.status != 200:
                    raise LeaderUnreachable(f"the leader answered HTTP {resp.status}")
                return await resp.read()
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise LeaderUnreachable(str(exc) or type(exc).__name__) from exc

    async def _fetch_cluster_nodes(self) -> None:
        request = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "getClusterNodes"})
        with contextlib.suppress(LeaderUnreachable, orjson.JSONDecodeError):
            answer = orjson.loads(await self.forward(request))
            if isinstance(answer, dict) and isinstance(answer.get("result"), list):
                self.cluster_nodes = answer["result"]

    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
