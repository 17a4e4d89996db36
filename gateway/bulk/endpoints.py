"""The bulk lookups: ``POST /bulk/getBalances``, ``/bulk/getTokenBalances``, ``/bulk/getTransactions``.

REST endpoints behind the auth stage (an account is needed). One request carries up to
:data:`~gateway.bulk.rules.MAX_BULK_ITEMS` keys; the gateway looks up each distinct valid key with the
node's multi-item forms, so a list costs the node a round trip, not one per item:

- balances: ``getMultipleAccounts`` per 100 addresses (``dataSlice`` of length 0: lamports only);
- token balances: ``getTokenAccountsByOwner`` of every owner for SPL Token and Token-2022, all in
  ONE JSON-RPC batch;
- transactions: every ``getTransaction`` in ONE JSON-RPC batch.

All at ``confirmed`` commitment, each within its class's timeout (balances READ_CHEAP, the others
READ_MEDIUM, the classes their prices are). Billing (:mod:`gateway.bulk.metering`): every valid item
reserved at once or the request refused; an item the node answered is charged (an absent account or
transaction too: the node did the lookup), an item whose lookup failed is refunded and listed in
``errors``, an invalid key is listed in ``errors`` and never charged. When the node answered none of
the valid items the request fails whole (502, nothing charged): a 200 made only of failures would
read as a result.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError

from gateway.bulk.metering import BulkMetering, Reservation
from gateway.bulk.models import BalancesRequest, TokenBalancesRequest, TransactionsRequest
from gateway.bulk.rules import (
    BULK_CREDITS,
    MAX_BULK_ITEMS,
    TOKEN_PROGRAMS,
    ItemError,
    account_lamports,
    chunks,
    split_keys,
    token_accounts,
)
from gateway.core.errors import ProxyError, invalid_request
from gateway.core.methods import CLASS_TIMEOUT_S, MethodClass
from gateway.node.http import ChainError, Upstream, UpstreamTimeout, UpstreamUnavailable, rpc_batch, rpc_call
from gateway.pipeline.stages import Call, Reply, json_reply

COMMITMENT = "confirmed"
#: What one item's lookup found (its result fields beside the key), or why it found nothing.
Found = dict[str, Any] | ItemError
Lookup = Callable[[list[str]], Awaitable[dict[str, Found]]]


class BulkEndpoint:
    """One bulk route: ``{<field>: [keys]}`` in, ``{results: [...], errors: [...]}`` out."""

    def __init__(
        self,
        name: str,
        field: str,
        key: str,
        model: type[BaseModel],
        signatures: bool,
        lookup: Lookup,
        metering: BulkMetering,
        price: int,
    ) -> None:
        self.name = name  # getBalances...: the usage history records ``bulk/<name>`` per item
        self.field = field  # the request's list: addresses, owners, signatures
        self.key = key  # each entry's key: address, owner, signature
        self.model = model
        self.signatures = signatures
        self.lookup = lookup
        self.metering = metering
        self.price = price

    async def __call__(self, call: Call) -> Reply:
        keys = self._parse(call.body)
        split = split_keys(keys, self.signatures)
        errors: list[dict[str, Any]] = [{self.key: k, "error": e.to_json()} for k, e in split.invalid]
        results: list[dict[str, Any]] = []
        prices = [self.price] * len(split.valid)
        async with self.metering.reserve(call, f"bulk/{self.name}", prices) as reservation:
            found = await self._lookup(split.valid, reservation) if split.valid else {}
            for index, key in enumerate(split.valid):
                entry = found.get(key)
                if entry is None:
                    entry = ItemError("UPSTREAM_ERROR", "the node did not answer this item")
                if isinstance(entry, ItemError):
                    reservation.complete(index, refunded=True)
                    errors.append({self.key: key, "error": entry.to_json()})
                else:
                    reservation.complete(index, refunded=False)
                    results.append({self.key: key, **entry})
            if split.valid and not results:
                raise _nothing_answered(len(split.valid), errors)
        return json_reply(200, {"results": results, "errors": errors})

    async def _lookup(self, keys: list[str], reservation: Reservation) -> dict[str, Found]:
        reservation.sent = True  # from here on the lookup may reach the node
        return await self.lookup(keys)

    def _parse(self, body: bytes) -> list[str]:
        """The request's keys, or 400 INVALID_REQUEST (before any billing) naming what is wrong."""
        shape = f'{{"{self.field}": ["...", ...]}} with 1 to {MAX_BULK_ITEMS} {self.field}'
        try:
            doc = orjson.loads(body) if body else None
        except orjson.JSONDecodeError as exc:
            raise invalid_request(f"body must be JSON: {shape}") from exc
        listed = doc.get(self.field) if isinstance(doc, dict) else None
        if isinstance(listed, list) and len(listed) > MAX_BULK_ITEMS:
            raise invalid_request(
                f"too many {self.field}: {len(listed)}; at most {MAX_BULK_ITEMS} per request (nothing was charged)"
            )
        if isinstance(listed, list) and not listed:
            raise invalid_request(f"no {self.field} given: at least one per request")
        try:
            parsed = self.model.model_validate(doc)
        except ValidationError as exc:
            raise invalid_request(f"body must be {shape}, each a string") from exc
        keys: list[str] = getattr(parsed, self.field)
        return keys


def _nothing_answered(count: int, errors: list[dict[str, Any]]) -> ProxyError:
    return ProxyError(
        502,
        "UPSTREAM_ERROR",
        f"the node answered none of the {count} lookups; nothing was charged",
        data={"errors": errors},
    )


def _failure(exc: ChainError | UpstreamUnavailable | UpstreamTimeout, timeout_s: float) -> ItemError:
    if isinstance(exc, UpstreamTimeout):
        return ItemError("TIMEOUT", f"the node did not answer within {timeout_s:g} s")
    if isinstance(exc, UpstreamUnavailable):
        return ItemError("UPSTREAM_ERROR", f"the node is unavailable ({exc})")
    return ItemError("UPSTREAM_ERROR", f"the node answered an error: {exc.code}: {exc.message}")


def _malformed(what: str) -> ItemError:
    return ItemError("UPSTREAM_ERROR", f"the node's answer is not {what}")


class NodeLookups:
    """The three lookups against the node: each takes distinct valid keys and answers each key's entry."""

    def __init__(self, node: Upstream) -> None:
        self.node = node

    async def balances(self, addresses: list[str]) -> dict[str, Found]:
        timeout = CLASS_TIMEOUT_S[MethodClass.READ_CHEAP]
        parts = await asyncio.gather(*(self._balance_chunk(chunk, timeout) for chunk in chunks(addresses)))
        return {key: found for part in parts for key, found in part.items()}

    async def _balance_chunk(self, chunk: list[str], timeout_s: float) -> dict[str, Found]:
        config = {"encoding": "base64", "dataSlice": {"offset": 0, "length": 0}, "commitment": COMMITMENT}
        try:
            answer = await rpc_call(self.node, "getMultipleAccounts", [chunk, config], timeout_s)
        except (ChainError, UpstreamUnavailable, UpstreamTimeout) as exc:
            failure = _failure(exc, timeout_s)
            return dict.fromkeys(chunk, failure)
        lamports = account_lamports(answer, len(chunk))
        if lamports is None:
            return dict.fromkeys(chunk, _malformed("a list of accounts"))
        return {key: {"lamports": n} for key, n in zip(chunk, lamports, strict=True)}

    async def token_balances(self, owners: list[str]) -> dict[str, Found]:
        timeout = CLASS_TIMEOUT_S[MethodClass.READ_MEDIUM]
        programs = list(TOKEN_PROGRAMS)
        calls = [
            (
                "getTokenAccountsByOwner",
                [owner, {"programId": program}, {"encoding": "jsonParsed", "commitment": COMMITMENT}],
            )
            for owner in owners
            for program in programs
        ]
        try:
            answers = await rpc_batch(self.node, calls, timeout)
        except (ChainError, UpstreamUnavailable, UpstreamTimeout) as exc:
            return dict.fromkeys(owners, _failure(exc, timeout))
        out: dict[str, Found] = {}
        for index, owner in enumerate(owners):
            accounts: list[dict[str, Any]] = []
            failure: ItemError | None = None
            for offset, program in enumerate(programs):
                answer = answers[index * len(programs) + offset]
                if isinstance(answer, ChainError):
                    failure = _failure(answer, timeout)
                    break
                parsed = token_accounts(answer, program)
                if parsed is None:
                    failure = _malformed("a list of parsed token accounts")
                    break
                accounts.extend(parsed)
            out[owner] = failure or {"token_accounts": accounts}
        return out

    async def transactions(self, signatures: list[str]) -> dict[str, Found]:
        timeout = CLASS_TIMEOUT_S[MethodClass.READ_MEDIUM]
        config = {"encoding": "json", "maxSupportedTransactionVersion": 0, "commitment": COMMITMENT}
        calls = [("getTransaction", [signature, config]) for signature in signatures]
        try:
            answers = await rpc_batch(self.node, calls, timeout)
        except (ChainError, UpstreamUnavailable, UpstreamTimeout) as exc:
            return dict.fromkeys(signatures, _failure(exc, timeout))
        out: dict[str, Found] = {}
        for signature, answer in zip(signatures, answers, strict=True):
            if isinstance(answer, ChainError):
                out[signature] = _failure(answer, timeout)
            elif answer is None or isinstance(answer, dict):
                out[signature] = {"transaction": answer}  # null: the node has no such transaction (charged)
            else:
                out[signature] = _malformed("a transaction")
        return out


def bulk_endpoints(node: Upstream, metering: BulkMetering) -> dict[str, BulkEndpoint]:
    """The three endpoints by route name (``getBalances``...), mounted under ``/bulk/``."""
    lookups = NodeLookups(node)
    return {
        "getBalances": BulkEndpoint(
            "getBalances",
            "addresses",
            "address",
            BalancesRequest,
            False,
            lookups.balances,
            metering,
            BULK_CREDITS["getBalances"],
        ),
        "getTokenBalances": BulkEndpoint(
            "getTokenBalances",
            "owners",
            "owner",
            TokenBalancesRequest,
            False,
            lookups.token_balances,
            metering,
            BULK_CREDITS["getTokenBalances"],
        ),
        "getTransactions": BulkEndpoint(
            "getTransactions",
            "signatures",
            "signature",
            TransactionsRequest,
            True,
            lookups.transactions,
            metering,
            BULK_CREDITS["getTransactions"],
        ),
    }
