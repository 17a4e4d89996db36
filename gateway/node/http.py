"""The one seam to a Solana node: ``Upstream.post(body, timeout)``, and :class:`HttpUpstream`, one node
reached over HTTP (the pool of nodes, :mod:`gateway.node.pool`, holds one per node and is an
``Upstream`` too).

Requests go over :mod:`gateway.node.wire` (kept-alive HTTP/1.1 connections, one pool per node URL,
one budget of buffered answer bytes over them): the nearest maintained client, pyreqwest, cost about
twice its CPU a call, aiohttp four times, httpcore far more (bench/README.md). Transport failures are
mapped at this boundary to :class:`UpstreamUnavailable` / :class:`UpstreamTimeout`, so no transport
exception travels further in.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import orjson

from gateway.base.log_throttle import LogThrottle
from gateway.node.wire import DEFAULT_BUFFERED_BYTES, AnswerBudget, AnswerTooLarge, BufferFull, WireError, WirePool

log = logging.getLogger(__name__)
#: A failure while the node is down repeats with every call (gateway/base/log_throttle.py).
throttled = LogThrottle(log)


class UpstreamUnavailable(Exception):
    """The node could not be reached, or its answer was lost. ``sent`` is False only when nothing can
    have reached it (the connection was never made); ``status``: the node's HTTP status when it answered
    one that is not a JSON-RPC answer. The message names the failure, never the node's address: it is
    shown to callers."""

    def __init__(self, message: str, *, sent: bool, status: int | None = None) -> None:
        super().__init__(message)
        self.sent = sent
        self.status = status


class UpstreamTooLarge(UpstreamUnavailable):
    """The node answered more than the gateway reads (``limit`` bytes): the rest was left unread."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the node's answer is larger than {limit:,} bytes, the gateway's limit", sent=True)
        self.limit = limit


class UpstreamBusy(UpstreamUnavailable):
    """The node answered, but this process already holds as many answer bytes as it may (its
    ``AnswerBudget``): the gateway's own state, which says nothing of the node."""

    def __init__(self) -> None:
        super().__init__("the gateway holds too many node answers at once", sent=True)


class UpstreamTimeout(Exception):
    """The node did not answer within the method's timeout."""


class Upstream(Protocol):
    """``replayable``: the body may reach the node twice with the effect of once (reads only); such a
    body lost on a connection the node closed while idle is sent once more (docs/reliability.md), and
    the pool of nodes may ask another node (a ``sendTransaction`` it sends on every node)."""

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


class HttpUpstream:
    """One node (or a service of the same shape: the block engine's endpoints) reached over HTTP.

    ``headers`` go with every request (a provider's key: never logged); ``name``: the node's name in the
    pool, which the log says. ``budget``: the buffered answer bytes this client shares with others (the
    pool's nodes share one); default, one of its own."""

    def __init__(
        self,
        url: str,
        *,
        connections: int = 512,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
        buffered_answer_bytes: int = DEFAULT_BUFFERED_BYTES,
        budget: AnswerBudget | None = None,
        ca_file: str | None = None,
        headers: Mapping[str, str] | None = None,
        name: str = "node",
    ) -> None:
        self.url = url
        self.name = name  # how the log names it (its URL may hold a provider's key)
        self.max_answer_bytes = max_answer_bytes
        #: every answer this client is reading at once (docs/configuration.md)
        self.budget = budget or AnswerBudget(buffered_answer_bytes)
        self._wire = WirePool(
            url,
            connections=connections,
            limit=max_answer_bytes,
            budget=self.budget,
            ca_file=ca_file,  # a PEM file of CAs trusted for https:// beside the system's (upstream_ca_file)
            headers=headers,
        )

    async def post(self, body: bytes, timeout_s: float, *, replayable: bool = False) -> bytes:
        status, payload = await self.exchange(body, timeout_s, replayable=replayable)
        if status != 200 and not payload.startswith((b"{", b"[")):
            raise UpstreamUnavailable(f"the node answered HTTP {status}", sent=True, status=status)
        return payload

    async def get(self, timeout_s: float) -> bytes:
        """``GET`` the URL itself (a REST document of the same service), errors mapped as for ``post``."""
        status, payload = await self.exchange(None, timeout_s, replayable=True, method="GET")
        if status != 200:
            raise UpstreamUnavailable(f"answered HTTP {status}", sent=True, status=status)
        return payload

    async def exchange(
        self, body: bytes | None, timeout_s: float, *, replayable: bool = False, method: str = "POST"
    ) -> tuple[int, bytes]:
        """The answer's HTTP status and body, whatever the status; never more than ``max_answer_bytes`` of
        it read."""
        try:
            return await self._wire.request(method, body, timeout_s, replayable=replayable)
        except TimeoutError as exc:
            raise UpstreamTimeout(f"no answer within {timeout_s:g} s") from exc
        except AnswerTooLarge as exc:
            raise UpstreamTooLarge(self.max_answer_bytes) from exc
        except BufferFull as exc:  # the node did answer: sent, as a lost answer (docs/configuration.md)
            throttled.warning(
                f"dropped {self.name}",
                "node %s: answer dropped, %s answer bytes already held",
                self.name,
                f"{self.budget.held:,}",
            )
            raise UpstreamBusy() from exc
        except WireError as exc:  # details go to the log, not to callers (they would name the node)
            throttled.warning(f"failed {self.name}", "node %s: request failed: %s", self.name, exc)  # each node's own
            if not exc.sent:
                raise UpstreamUnavailable("could not connect to the node", sent=False) from exc
            raise UpstreamUnavailable("the connection to the node failed", sent=True) from exc

    @property
    def open_connections(self) -> int:
        return self._wire.open_connections

    async def close(self) -> None:
        await self._wire.close()
