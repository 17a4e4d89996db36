"""``getSendStatus``: what became of a ``sendAndConfirm``, and whether sending again is safe.

Params: ``[<signature>]``. Result: ``null`` for a signature this account never sent through
``sendAndConfirm`` (another account's sends are not shown), else the send's ledger record, settled
first from the chain when the chain can prove its outcome (:mod:`gateway.sending.reconcile`):

- ``status``: ``pending`` (not proven yet: it may still land), ``confirmed``, ``failed`` (landed with
  an execution error), ``expired`` (its blockhash expired and it never landed), ``refused`` (its
  preflight simulation failed: never sent);
- ``retry_safe``: true only when the transaction can never land (``expired``, ``refused``), so a
  new transaction for the same intent cannot execute twice;
- ``held_credits`` and ``charged_credits`` (null while pending), ``slot``, ``error``,
  ``legs_attempted``, ``retry_count``, ``sent_at`` and ``settled_at`` (Unix seconds).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.core.jsonrpc import RpcItem
from gateway.node.http import Upstream
from gateway.pipeline.stages import Call
from gateway.rpc.answers import answer
from gateway.sending.reconcile import UNPROVEN_RELEASE_S, reconcile
from gateway.storage import sends
from gateway.storage.connections import Pool
from gateway.storage.errors import StoreUnavailable
from gateway.storage.sends import SendRecord, SendStatus

RETRY_SAFE = frozenset({SendStatus.EXPIRED, SendStatus.REFUSED})


class SendStatusMethod:
    def __init__(
        self, node: Upstream, pool: Callable[[], Pool | None], release_after_s: float = UNPROVEN_RELEASE_S
    ) -> None:
        self.node = node
        self.pool = pool
        self.release_after_s = release_after_s  # send_unproven_release_s

    async def __call__(self, item: RpcItem, call: Call) -> None:
        pool = self.pool()
        if pool is None:
            raise StoreUnavailable("the credit ledger")
        item.sent = True
        record = await sends.find(pool, item.params[0])
        if record is None or record.pubkey != call.authenticated().pubkey:
            answer(item, None)
            return
        settled = await reconcile(pool, self.node, record, "getSendStatus", self.release_after_s)
        answer(item, status_fields(settled))


def status_fields(record: SendRecord) -> dict[str, Any]:
    return {
        "signature": record.signature,
        "status": record.status.value,
        "retry_safe": record.status in RETRY_SAFE,
        "held_credits": record.held,
        "charged_credits": record.charged,
        "slot": record.slot,
        "error": record.error,
        "legs_attempted": record.legs,
        "retry_count": record.retry_count,
        "sent_at": int(record.created_at.timestamp()),
        "settled_at": None if record.settled_at is None else int(record.settled_at.timestamp()),
    }
