"""``sendTransaction`` on every node of the pool that serves sends (:class:`Broadcast`).

With ``skipPreflight`` every node at once: the answer is the first acceptance (a node's "already processed"
is one: the transaction's signature), a refusal only when every node refused (the first node's, in the
pool's order), a failure only when every node failed. Without it the first node that answers runs the
preflight: its refusal is the answer and nothing was broadcast; its acceptance is the answer and the
others get the transaction with ``skipPreflight``, in the background (at most ``MAX_BACKGROUND_SENDS`` on
their way at once). A send is never asked twice of a node that may have received it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

import orjson

from gateway.base import metrics
from gateway.base.log_throttle import LogThrottle
from gateway.base.stopping import cancel_and_wait
from gateway.core.transactions import decode_transaction
from gateway.node.http import UpstreamTimeout, UpstreamTooLarge, UpstreamUnavailable
from gateway.node.members import Answer, PoolNode

log = logging.getLogger(__name__)
throttled = LogThrottle(log)

#: Sends to the other nodes still on their way after the answer: at most this many per process.
MAX_BACKGROUND_SENDS = 1024


class Attempt(Protocol):
    """One request to one node, tallied (the pool's): a send is never replayed."""

    async def __call__(
        self, node: PoolNode, body: bytes, timeout_s: float, parse: bool, *, replayable: bool = True
    ) -> Answer: ...


class Broadcast:
    def __init__(self, attempt: Attempt) -> None:
        self._attempt = attempt
        self._background: set[asyncio.Task[Answer]] = set()

    @property
    def on_their_way(self) -> int:
        """Sends to other nodes not answered yet."""
        return len(self._background)

    async def close(self) -> None:
        for task in list(self._background):
            await cancel_and_wait(task)

    async def send(self, nodes: list[PoolNode], body: bytes, timeout_s: float) -> Answer:
        """``body`` (one ``sendTransaction``) to ``nodes``, those in service for sends."""
        if len(nodes) == 1:
            answer = await self._attempt(nodes[0], body, timeout_s, False, replayable=False)
            metrics.UPSTREAM_BROADCASTS.inc((nodes[0].name, "accepted"))
            return answer
        request = orjson.loads(body)
        params = request.get("params") if isinstance(request, dict) else None
        config = params[1] if isinstance(params, list) and len(params) > 1 and isinstance(params[1], dict) else {}
        deadline = asyncio.get_running_loop().time() + timeout_s
        if config.get("skipPreflight"):
            return await self._everywhere(nodes, body, request, deadline)
        return await self._checked(nodes, body, request, config, deadline)

    async def _everywhere(self, nodes: list[PoolNode], body: bytes, request: dict[str, Any], deadline: float) -> Answer:
        """Every node at once: the first acceptance, else the first node's refusal, else its failure."""
        loop = asyncio.get_running_loop()
        remaining = max(0.001, deadline - loop.time())
        tasks = {loop.create_task(self._attempt(n, body, remaining, True, replayable=False)): n for n in nodes}
        pending = set(tasks)
        ends: dict[str, Answer | BaseException] = {}
        accepted: Answer | None = None
        try:
            while pending and accepted is None:
                done, pending = await asyncio.wait(pending, return_when="FIRST_COMPLETED")
                for task in done:  # every one that ended is counted, whichever is answered
                    end = ends[tasks[task].name] = _settle(task, tasks[task], request)
                    if accepted is None and isinstance(end, Answer) and _outcome(end) == "accepted":
                        accepted = end
            if accepted is not None:
                for rest in pending:  # the others still deliver it; their answers are not waited for
                    self._keep(rest, tasks[rest], request)
                pending = set()
                return accepted
        finally:
            for task in pending:
                task.cancel()
        for node in nodes:  # every node refused or failed: the first refusal, in the pool's order
            refusal = ends.get(node.name)
            if isinstance(refusal, Answer):
                return refusal
        raise _send_failure({name: end for name, end in ends.items() if isinstance(end, BaseException)})

    async def _checked(
        self, nodes: list[PoolNode], body: bytes, request: dict[str, Any], config: dict[str, Any], deadline: float
    ) -> Answer:
        """The first node that answers runs the preflight; once it accepted, the others get it unchecked."""
        loop = asyncio.get_running_loop()
        failures: dict[str, BaseException] = {}
        kept: Answer | None = None
        for i, node in enumerate(nodes):
            try:
                remaining = max(0.001, deadline - loop.time())
                answer = _accepted(await self._attempt(node, body, remaining, True, replayable=False), request)
            except (UpstreamUnavailable, UpstreamTimeout) as exc:
                failures[node.name] = exc
                metrics.UPSTREAM_BROADCASTS.inc((node.name, "failed"))
                if isinstance(exc, UpstreamTooLarge):
                    raise
                continue
            outcome = _outcome(answer)
            metrics.UPSTREAM_BROADCASTS.inc((node.name, outcome))
            if answer.retryable:  # unhealthy or behind: its preflight says nothing; the next node's will
                kept = kept or answer
                continue
            if outcome == "refused":  # the preflight refused it: nothing was broadcast
                return answer
            unchecked = _with_config(request, {**config, "skipPreflight": True})
            for other in nodes[i + 1 :] + [n for n in nodes[:i] if n.name in failures]:
                remaining = max(0.001, deadline - loop.time())
                task = loop.create_task(self._attempt(other, unchecked, remaining, True, replayable=False))
                self._keep(task, other, request)
            return answer
        if kept is not None:
            return kept
        raise _send_failure(failures)

    def _keep(self, task: asyncio.Task[Answer], node: PoolNode, request: dict[str, Any]) -> None:
        """A send still on its way to ``node`` after the caller was answered: counted when it ends."""

        def done(finished: asyncio.Task[Answer]) -> None:
            self._background.discard(finished)
            if not finished.cancelled():
                _settle(finished, node, request)

        if len(self._background) >= MAX_BACKGROUND_SENDS:
            task.cancel()
            throttled.warning(
                "sends", "upstream pool: %d sends on their way already; one was not sent on", len(self._background)
            )
        self._background.add(task)
        task.add_done_callback(done)


def _settle(task: asyncio.Task[Answer], node: PoolNode, request: dict[str, Any]) -> Answer | BaseException:
    """How a send to ``node`` ended (its answer, an "already processed" made an acceptance, or its failure),
    counted in ``gateway_upstream_broadcast_sends_total``."""
    error = task.exception()
    if error is not None:
        metrics.UPSTREAM_BROADCASTS.inc((node.name, "failed"))
        return error
    answer = _accepted(task.result(), request)
    metrics.UPSTREAM_BROADCASTS.inc((node.name, _outcome(answer)))
    return answer


def _outcome(answer: Answer) -> str:
    """``accepted`` or ``refused`` (an error, the node's "unhealthy" included)."""
    return "refused" if answer.retryable or "error" in answer.json() else "accepted"


def is_send(body: bytes) -> bool:
    """Whether ``body`` is one ``sendTransaction`` request."""
    try:
        request = orjson.loads(body)
    except orjson.JSONDecodeError:
        return False
    return isinstance(request, dict) and request.get("method") == "sendTransaction"


def _accepted(answer: Answer, request: dict[str, Any]) -> Answer:
    """A node's "already processed" is an acceptance: the transaction's signature as its result."""
    doc = answer.json()
    error = doc.get("error") if isinstance(doc, dict) else None
    if not isinstance(error, dict) or not _already_processed(error):
        return answer
    params = request.get("params")
    config = params[1] if isinstance(params, list) and len(params) > 1 and isinstance(params[1], dict) else {}
    wire = decode_transaction(params[0] if isinstance(params, list) and params else None, config.get("encoding"))
    if isinstance(wire, str):
        return answer
    accepted = {"jsonrpc": "2.0", "result": wire.signature, "id": request.get("id")}
    return Answer(orjson.dumps(accepted), answer.node, accepted)


def _already_processed(error: dict[str, Any]) -> bool:
    text = str(error.get("message", "")) + str(error.get("data", ""))
    return "AlreadyProcessed" in text or "already been processed" in text


def _with_config(request: dict[str, Any], config: dict[str, Any]) -> bytes:
    params = list(request.get("params") or [])
    params[1:2] = [config]
    return orjson.dumps({**request, "params": params})


def _send_failure(failures: dict[str, BaseException]) -> BaseException:
    """Every node failed: unreachable (refunded) only when none of them can have got it."""
    if any(isinstance(e, UpstreamTimeout) for e in failures.values()):
        return UpstreamTimeout("no node answered the send in time")
    sent = any(isinstance(e, UpstreamUnavailable) and e.sent for e in failures.values())
    return UpstreamUnavailable(
        "the connection to every node failed" if sent else "could not connect to any node", sent=sent
    )
