"""The one seam to the Solana node: ``Upstream.post(body, timeout)`` and a health monitor.

Requests go over :mod:`gateway.node.wire` (kept-alive HTTP/1.1 connections, one pool per node URL,
one budget of buffered answer bytes over them): the nearest maintained client, pyreqwest, cost about
twice its CPU a call, aiohttp four times, httpcore far more (bench/README.md). Transport failures are
mapped at this boundary to :class:`UpstreamUnavailable` / :class:`UpstreamTimeout`, so no transport
exception travels further in.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from gateway import metrics
from gateway.log_throttle import LogThrottle
from gateway.node.wire import DEFAULT_BUFFERED_BYTES, AnswerBudget, AnswerTooLarge, BufferFull, WireError, WirePool
from gateway.stopping import cancel_and_wait

log = logging.getLogger(__name__)
#: A failure while the node is down repeats with every call (gateway/log_throttle.py).
throttled = LogThrottle(log)


class UpstreamUnavailable(Exception):
    """The node could not be reached, or its answer was lost. ``sent`` is False only when nothing can
    have reached it (the connection was never made). The message names the failure, never the
    node's address: it is shown to callers."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


class UpstreamTooLarge(UpstreamUnavailable):
    """The node answered more than the gateway reads (``limit`` bytes): the rest was left unread."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the node's answer is larger than {limit:,} bytes, the gateway's limit", sent=True)
        self.limit = limit


class UpstreamTimeout(Exception):
    """The node did not answer within the method's timeout."""


class Upstream(Protocol):
    """``replayable``: the body may reach the node twice with the effect of once (reads only); such a
    body lost on a connection the node closed while idle is sent once more (docs/reliability.md)."""

    async def post(self, body: bytes, timeout_s: float, *, replayable: bool = False) -> bytes: ...


DEFAULT_CALL_TIMEOUT_S = 15.0
#: The most of one node answer a replica reads (docs/api.md, Limits): a full block is a few MiB.
DEFAULT_MAX_ANSWER_BYTES = 64 << 20


class ChainError(Exception):
    """The node answered a JSON-RPC error (it was reachable; the request itself failed).

    ``code``, ``message`` and ``data`` are the node's own, to pass on as they are; ``str()`` adds the method."""

    def __init__(self, code: int | None, message: str, data: Any = None, method: str | None = None) -> None:
        super().__init__(f"{method}: {code}: {message}" if method else f"{code}: {message}")
        self.code = code
        self.message = message
        self.data = data


async def rpc_call(
    upstream: Upstream, method: str, params: list[Any], timeout_s: float = DEFAULT_CALL_TIMEOUT_S
) -> Any:
    """One JSON-RPC call to the node; its ``result``, or :class:`ChainError` for an error answer."""
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    raw = await upstream.post(body, timeout_s, replayable=is_read(method))
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UpstreamUnavailable(f"{method}: node answered something that is not JSON", sent=True) from exc
    if not isinstance(doc, dict):
        raise UpstreamUnavailable(f"{method}: node answered something that is not a JSON-RPC response", sent=True)
    error = _chain_error(doc, method)
    if error is not None:
        raise error
    return doc.get("result")


async def rpc_batch(
    upstream: Upstream, calls: Sequence[tuple[str, list[Any]]], timeout_s: float = DEFAULT_CALL_TIMEOUT_S
) -> list[Any]:
    """Several JSON-RPC calls to the node in ONE batch request (one round trip, not one per call).

    Returns each call's ``result`` in the order of ``calls``, or its :class:`ChainError` in its place
    when the node answered that call with an error: the caller decides what one failed call means.
    Raises :class:`ChainError` when the node refused the batch as a whole, and
    :class:`UpstreamUnavailable` when its answer is not a batch answer or leaves a call out."""
    if not calls:
        return []
    body = orjson.dumps([{"jsonrpc": "2.0", "id": i, "method": m, "params": p} for i, (m, p) in enumerate(calls)])
    raw = await upstream.post(body, timeout_s, replayable=all(is_read(m) for m, _ in calls))
    what = f"batch of {len(calls)} {calls[0][0]}"
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UpstreamUnavailable(f"{what}: node answered something that is not JSON", sent=True) from exc
    if isinstance(doc, dict):  # one error object for the whole batch (too large, batches disabled...)
        error = _chain_error(doc, what)
        raise error or UpstreamUnavailable(f"{what}: node answered one response to a batch", sent=True)
    if not isinstance(doc, list):
        raise UpstreamUnavailable(f"{what}: node answered something that is not a JSON-RPC response", sent=True)
    answers = {a.get("id"): a for a in doc if isinstance(a, dict)}
    out: list[Any] = []
    for i, (method, _) in enumerate(calls):
        answer = answers.get(i)
        if answer is None:
            raise UpstreamUnavailable(f"{what}: node left call {i} unanswered", sent=True)
        error = _chain_error(answer, method)
        out.append(error if error is not None else answer.get("result"))
    return out


def is_read(method: str) -> bool:
    """Whether a node method only reads (Solana's reads are named so): the gateway's own calls to the
    node are replayable by this rule, the forwarded ones by their class (gateway/core/methods.py)."""
    return method.startswith(("get", "is", "simulate", "explain")) or method == "minimumLedgerSlot"


def _chain_error(doc: dict[str, Any], method: str) -> ChainError | None:
    """The :class:`ChainError` of a JSON-RPC response that is an error, else None."""
    error = doc.get("error")
    if error is None:
        return None
    code = error.get("code") if isinstance(error, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    data = error.get("data") if isinstance(error, dict) else None
    return ChainError(code if isinstance(code, int) else None, str(message or error), data, method)


@dataclass
class NodeStatus:
    """What the last health probe of one node found."""

    healthy: bool = False
    ever_healthy: bool = False
    slot: int | None = None  # the newest finalized slot
    block_height: int | None = None
    version: str | None = None
    checked_at: float = 0.0


class HttpUpstream:
    """A node reached over HTTP, with an optional fallback used while the primary is unhealthy."""

    def __init__(
        self,
        url: str,
        fallback_url: str | None = None,
        connections: int = 512,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
        buffered_answer_bytes: int = DEFAULT_BUFFERED_BYTES,
        ca_file: str | None = None,
    ) -> None:
        self.url = url
        #: a PEM file of CAs trusted for this node's https:// URLs beside the system's (``upstream_ca_file``)
        self.ca_file = ca_file
        self.max_answer_bytes = max_answer_bytes
        #: every answer this client is reading at once, over both nodes (docs/configuration.md)
        self.budget = AnswerBudget(buffered_answer_bytes)
        self.fallback_url = fallback_url
        self._connections = connections
        self._pools: dict[str, WirePool] = {}
        self.primary = NodeStatus()
        self.fallback = NodeStatus()
        self.use_fallback = False

    def _pool(self, url: str) -> WirePool:
        pool = self._pools.get(url)
        if pool is None:
            pool = self._pools[url] = WirePool(
                url,
                connections=self._connections,
                limit=self.max_answer_bytes,
                budget=self.budget,
                ca_file=self.ca_file,
            )
        return pool

    @property
    def finalized_slot(self) -> int | None:
        """The newest finalized slot the last probe of the serving node saw."""
        return (self.fallback if self.use_fallback else self.primary).slot

    @property
    def active_url(self) -> str:
        if self.use_fallback and self.fallback_url:
            return self.fallback_url
        return self.url

    async def post(self, body: bytes, timeout_s: float, *, replayable: bool = False) -> bytes:
        return await self._post_to(self.active_url, body, timeout_s, replayable)

    async def get(self, timeout_s: float) -> bytes:
        """``GET`` the URL itself (a REST document of the same service), errors mapped as for ``post``."""
        status, payload = await self._request(self.active_url, "GET", None, timeout_s, True)
        if status != 200:
            raise UpstreamUnavailable(f"answered HTTP {status}", sent=True)
        return payload

    async def _post_to(self, url: str, body: bytes, timeout_s: float, replayable: bool) -> bytes:
        status, payload = await self._request(url, "POST", body, timeout_s, replayable)
        if status != 200 and not payload.startswith((b"{", b"[")):
            raise UpstreamUnavailable(f"the node answered HTTP {status}", sent=True)
        return payload

    async def _request(
        self, url: str, method: str, body: bytes | None, timeout_s: float, replayable: bool
    ) -> tuple[int, bytes]:
        """The answer's status and body, never more than ``max_answer_bytes`` of it read."""
        try:
            return await self._pool(url).request(method, body, timeout_s, replayable=replayable)
        except TimeoutError as exc:
            raise UpstreamTimeout(f"no answer within {timeout_s:g} s") from exc
        except AnswerTooLarge as exc:
            raise UpstreamTooLarge(self.max_answer_bytes) from exc
        except BufferFull as exc:  # the node did answer: sent, as a lost answer (docs/configuration.md)
            throttled.warning("dropped", "node answer dropped: %s answer bytes already held", f"{self.budget.held:,}")
            raise UpstreamUnavailable("the gateway holds too many node answers at once", sent=True) from exc
        except WireError as exc:  # details go to the log, not to callers (they would name the node)
            throttled.warning("failed", "node request failed: %s", exc)
            if not exc.sent:
                raise UpstreamUnavailable("could not connect to the node", sent=False) from exc
            raise UpstreamUnavailable("the connection to the node failed", sent=True) from exc

    async def close(self) -> None:
        for pool in self._pools.values():
            await pool.close()

    async def probe(self, timeout_s: float = 2.0) -> None:
        """Refresh both nodes' status and choose which one serves traffic."""
        await self._probe_one(self.url, self.primary, timeout_s)
        if self.fallback_url:
            await self._probe_one(self.fallback_url, self.fallback, timeout_s)
        self.use_fallback = bool(self.fallback_url) and not self.primary.healthy and self.fallback.healthy
        metrics.upstream_probed(
            self.primary.healthy, self.fallback.healthy if self.fallback_url else None, self.use_fallback
        )

    async def _probe_one(self, url: str, status: NodeStatus, timeout_s: float) -> None:
        batch = [
            {"jsonrpc": "2.0", "id": 0, "method": "getHealth"},
            {"jsonrpc": "2.0", "id": 1, "method": "getSlot", "params": [{"commitment": "finalized"}]},
            {"jsonrpc": "2.0", "id": 2, "method": "getBlockHeight"},
            {"jsonrpc": "2.0", "id": 3, "method": "getVersion"},
        ]
        status.checked_at = time.time()
        try:
            raw = await self._post_to(url, orjson.dumps(batch), timeout_s, True)
            answers = {a.get("id"): a for a in orjson.loads(raw) if isinstance(a, dict)}
        except (UpstreamUnavailable, UpstreamTimeout, orjson.JSONDecodeError, TypeError) as exc:
            log.debug("health probe of %s failed: %s", url, exc)
            status.healthy = False
            return
        status.healthy = answers.get(0, {}).get("result") == "ok"
        status.slot = _result_int(answers.get(1))
        status.block_height = _result_int(answers.get(2))
        version = answers.get(3, {}).get("result")
        status.version = version.get("solana-core") if isinstance(version, dict) else None
        status.ever_healthy = status.ever_healthy or status.healthy


def _result_int(answer: dict[str, Any] | None) -> int | None:
    value = answer.get("result") if answer else None
    return value if isinstance(value, int) else None


@dataclass
class HealthMonitor:
    """Probes the upstream every ``interval_s`` in the background of one replica."""

    upstream: HttpUpstream
    interval_s: float = 2.0
    _task: asyncio.Task[None] | None = field(default=None, init=False)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            try:
                await self.upstream.probe()
            except Exception:  # the loop must survive anything a probe does
                log.exception("health probe crashed")
            await asyncio.sleep(self.interval_s if self.upstream.primary.ever_healthy else 0.25)

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)
