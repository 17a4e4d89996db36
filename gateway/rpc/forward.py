"""The last JSON-RPC stages: parse and plan the body, then answer what is left.

Items already answered (invalid, denied, refused by a later stage) are not sent. Methods the gateway
answers itself (``local``: :mod:`gateway.rpc.answers`) run their handlers; the rest go to the nodes of
the pool (:mod:`gateway.node.pool`): the reads in one request to a node in service for their role,
with ids replaced by their positions so duplicate client ids cannot mix answers up (the client's ids
are put back on the way out), each ``sendTransaction`` to every node that serves sends. ``X-Upstream``
names the node that answered. A caller's reads go only to nodes known to be at or past what its
earlier answers showed (:mod:`gateway.core.slots`). In a batch, the parts run at once, and a failure
of one part (no node, a handler's error) becomes those items' errors: it never takes the others' answers.
With the response cache on (:mod:`gateway.rpc.response_cache`), the node's items are first looked up
there: a cached answer answers its item, which is then not sent, and the node's answers are kept
after; ``X-Cache`` says whether the cache answered the call.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Mapping
from typing import Any

import orjson

from gateway.core.errors import ProxyError, RpcError, backend_unavailable, service_unavailable, timed_out
from gateway.core.jsonrpc import Failure, RpcItem, RpcPayload, parse_payload
from gateway.core.methods import CLASS_TIMEOUT_S, REPLAYABLE_CLASSES, MethodClass, PriceTable, Registry
from gateway.core.slots import needs, raise_to, request_terms, shown
from gateway.core.upstreams import Role, role_of
from gateway.node.http import Upstream, UpstreamTimeout, UpstreamTooLarge, UpstreamUnavailable
from gateway.node.nodes import Nodes, nodes_of
from gateway.node.pool import NodePool, NoNode
from gateway.pipeline.declaration import LocalMethod
from gateway.pipeline.stages import UPSTREAM_HEADER, Call, Handler, Reply
from gateway.rpc.metrics import CACHE_LOOKUPS
from gateway.rpc.planning import plan_items
from gateway.rpc.response_cache import HEADER, MISS, ResponseCache
from gateway.storage.errors import StoreUnavailable

log = logging.getLogger(__name__)


class ParseStage:
    """Parse the body and apply per-method rules; free rejections happen here."""

    def __init__(self, methods: Registry[Any], prices: PriceTable) -> None:
        self.methods = methods
        self.prices = prices

    async def __call__(self, call: Call, next_handler: Handler) -> Reply:
        payload = parse_payload(call.body)
        call.payload = payload
        plan_items(payload.items, self.methods, self.prices)
        return await next_handler(call)


class Forwarder:
    """Endpoint: answer pending items (the gateway's own methods here, the rest at the nodes)."""

    def __init__(
        self,
        upstream: Upstream | NodePool,
        local: Mapping[str, LocalMethod] | None = None,
        cache: ResponseCache | None = None,
    ) -> None:
        self.nodes: Nodes = nodes_of(upstream)
        self.local = dict(local or {})
        self.cache = cache

    async def __call__(self, call: Call) -> Reply:
        payload = call.payload
        assert payload is not None
        local: list[RpcItem] = []
        remote: list[RpcItem] = []
        for item in payload.items:  # one pass: a batch's items are sorted with no intermediate list
            if item.pending:
                (local if item.method in self.local else remote).append(item)
        cached = None
        if self.cache is not None and (local or remote):
            if self.cache.may_answer(remote):
                cached = await self.cache.answer(remote)
                header = cached.header(len(local) + len(remote))
                remote = [item for item in remote if item.pending]
            else:  # no method here is ever cached (a getSlot): no lookup, and no coroutine to run one
                header = MISS
            call.response_headers[HEADER] = header
            CACHE_LOOKUPS.inc((header,))
        if not payload.is_batch and local:
            await self.local[local[0].method](local[0], call)  # a single call: its errors are the call's
        elif local:
            await asyncio.gather(self._forward_part(remote, payload, call), *(self._run_local(i, call) for i in local))
        elif remote:
            await self._forward(remote, payload, call)
        if self.cache is not None and cached is not None and cached.lookups:
            self.cache.keep(cached)
        return Reply(200, payload.answer_bytes())

    async def _run_local(self, item: RpcItem, call: Call) -> None:
        """A batch item's handler; what it raises is that item's error."""
        try:
            await self.local[item.method](item, call)
        except ProxyError as exc:
            item.error = exc.rpc_error()
        except StoreUnavailable as exc:
            item.failure = item.failure or Failure.INTERNAL
            item.error = service_unavailable(f"{exc}; retry later", 5).rpc_error()
        except Exception:
            log.exception("%s failed", item.method)
            item.failure = item.failure or Failure.INTERNAL
            item.error = RpcError(-32603, f"Internal error: {item.method} failed")

    async def _forward_part(self, items: list[RpcItem], payload: RpcPayload, call: Call) -> None:
        """A part of a batch: a failure is these items' errors, not the others'."""
        if not items:
            return
        try:
            await self._forward(items, payload, call)
        except ProxyError as exc:
            for item in items:
                item.error = exc.rpc_error()

    def _forward(self, items: list[RpcItem], payload: RpcPayload, call: Call) -> Awaitable[None]:
        """The node's items in one request when one node takes them all (a pool of one: nothing to choose,
        split or broadcast); else the reads, the heavy reads and each send apart (a send goes to every node
        that serves sends). A plain function: no coroutine of its own on the hot path."""
        if not self.nodes.one_node and not self.nodes.together({role_of(i.method_class) for i in items}):
            return self._split(items, payload, call)
        return self._ask(items, payload, call)

    async def _split(self, items: list[RpcItem], payload: RpcPayload, call: Call) -> None:
        parts = [[i for i in items if role_of(i.method_class) is role] for role in (Role.READS, Role.HEAVY)]
        parts = [part for part in parts if part]
        parts += [[i] for i in items if role_of(i.method_class) is Role.SENDS]
        if len(parts) == 1:
            await self._ask(parts[0], payload, call)
        else:
            await asyncio.gather(*(self._forward_part(part, payload, call) for part in parts))

    async def _ask(self, items: list[RpcItem], payload: RpcPayload, call: Call) -> None:
        classes = {i.method_class for i in items}  # a batch's timeout: its slowest class's
        timeout = max(CLASS_TIMEOUT_S.get(c or MethodClass.READ_CHEAP, 5.0) for c in classes)
        calls = [{"jsonrpc": "2.0", "id": i.index, "method": i.method, "params": i.params} for i in items]
        body = orjson.dumps(calls if payload.is_batch else calls[0])
        one = self.nodes.one_node
        roles = {Role.READS} if one else {role_of(c) for c in classes}
        send = roles == {Role.SENDS} and len(items) == 1
        role = Role.HEAVY if Role.HEAVY in roles else Role.READS
        floor = None if send or one else self._floor(call, role)
        terms = None if floor is None else [request_terms(i.params) for i in items]
        for item in items:
            item.sent = True  # from here on the node may see it, whatever happens next
        try:
            if send:
                answer = await self.nodes.send(body, timeout)
            else:
                key = items[0].method if len(items) == 1 else "batch"
                need = None if floor is None or terms is None else needs(floor, terms, self.nodes.best_position(role))
                replayable = classes <= REPLAYABLE_CLASSES
                caller = call.identity.pubkey if call.identity is not None else None
                heavy = any(role_of(c) is Role.HEAVY for c in classes)  # its time is the caller's (even on one node)
                answer = await self.nodes.read(
                    body, timeout, role, key=key, need=need, parse=not one, retry=replayable, caller=caller, heavy=heavy
                )
        except NoNode as exc:
            for item in items:
                item.sent = False
            _failed(items, Failure.UNREACHABLE)
            raise service_unavailable(f"{exc}; retry later", NO_NODE_RETRY_S) from exc
        except UpstreamTooLarge as exc:
            for item in items:  # answered by the node, so charged (docs/api.md, Limits)
                item.response = too_large(item, exc.limit)
            return
        except UpstreamTimeout as exc:
            _failed(items, Failure.TIMED_OUT)
            raise timed_out(items[0].method if len(items) == 1 else "batch", timeout) from exc
        except UpstreamUnavailable as exc:
            _failed(items, Failure.LOST if exc.sent else Failure.UNREACHABLE)
            raise backend_unavailable(f"upstream node unavailable: {exc}") from exc
        if answer.node is not None:
            _name_node(call, answer.node)
        try:
            answers = answer.json()
        except orjson.JSONDecodeError as exc:
            _failed(items, Failure.LOST)
            raise backend_unavailable("upstream node sent a body that is not JSON") from exc
        _attach(items, answers)
        if floor is not None and terms is not None and answer.node is not None:
            self._shown(floor, answer.node, items, terms)

    def _floor(self, call: Call, role: Role) -> list[int] | None:
        """The caller's floor, when its calls of ``role`` may move between nodes."""
        if call.identity is None or not self.nodes.several(role):
            return None
        return self.nodes.floors.of(call.identity.pubkey)

    def _shown(self, floor: list[int], node: str, items: list[RpcItem], terms: list[tuple[int, int | None]]) -> None:
        """Raise the caller's floor, and what ``node`` is known to be at, to what its answers showed."""
        for item, (commitment, _) in zip(items, terms, strict=True):
            position = shown(item.method, commitment, item.response)
            if position is not None:
                index, value = position
                raise_to(floor, index, value)
                self.nodes.learned(node, index, value)


#: The retry hint of a call no node was in service for (docs/api.md, Errors).
NO_NODE_RETRY_S = 2


def _name_node(call: Call, node: str) -> None:
    """``X-Upstream``: the node (or nodes, in the order they answered parts of a batch) that answered."""
    named = call.response_headers.get(UPSTREAM_HEADER)
    if named is None:
        call.response_headers[UPSTREAM_HEADER] = node
    elif node not in named.split(", "):
        call.response_headers[UPSTREAM_HEADER] = f"{named}, {node}"


#: The code of an answer over the gateway's size limit: the node's own for results past its scan limit.
TOO_LARGE_CODE = -32012


def too_large(item: RpcItem, limit: int) -> dict[str, Any]:
    """The answer of a call whose node answer was over ``limit`` bytes: an error in the node's place."""
    message = (
        f"Scan error: the node's answer is larger than {limit >> 20} MiB, the gateway's limit; "
        "ask for less (fewer calls per batch, transactionDetails 'signatures' or 'none', a dataSlice)"
    )
    return {"jsonrpc": "2.0", "error": {"code": TOO_LARGE_CODE, "message": message}, "id": item.id}


def _failed(items: list[RpcItem], failure: Failure) -> None:
    for item in items:
        item.failure = failure


def _attach(items: list[RpcItem], answers: Any) -> None:
    """Give each item its answer from the node's (ids are the items' positions), or its error."""
    if type(answers) is list and _in_order(items, answers):
        for item, answer in zip(items, answers, strict=True):
            answer["id"] = item.id
            item.response = answer
        return
    _attach_by_id(items, answers)


def _attach_by_id(items: list[RpcItem], answers: Any) -> None:
    by_index: dict[int, dict[str, Any]] = {}
    if isinstance(answers, list):
        by_index = {a["id"]: a for a in answers if isinstance(a, dict) and isinstance(a.get("id"), int)}
    elif isinstance(answers, dict) and isinstance(answers.get("id"), int):
        by_index = {answers["id"]: answers}
    whole_error = answers.get("error") if isinstance(answers, dict) and answers.get("id") is None else None
    for item in items:
        answer = by_index.get(item.index)
        if answer is not None:
            answer["id"] = item.id
            item.response = answer
        elif isinstance(whole_error, dict):
            item.error = RpcError(whole_error.get("code", -32603), str(whole_error.get("message", "")))
        else:
            item.error = RpcError(-32603, "Internal error: the node sent no answer for this call")


def _in_order(items: list[RpcItem], answers: list[Any]) -> bool:
    """Whether the node answered each item once, in the order sent (the common case): the answer at
    each position is an object whose id is that item's position in the request."""
    if len(answers) != len(items):
        return False
    for item, answer in zip(items, answers, strict=True):
        if type(answer) is not dict:
            return False
        index = answer.get("id")
        if type(index) is not int or index != item.index:
            return False
    return True
