"""Settling a held send from what the chain can prove, after its race (or its racer) gave up on it.

A send left ``pending`` (its race ended ``unknown``, or the racer running it went away) is settled by
the chain, not by a clock: it landed (``confirmed`` or ``failed``, at its price), or its blockhash is no
longer valid and it is nowhere to be found, so it can never land (``expired``, the base fee: it was
broadcast, docs/api.md sendAndConfirm). The order of the
reads matters: the blockhash is checked first, so a status read after it that finds nothing proves the
transaction will not land later; and a node that still keeps the blocks from the send's hold on
(``getFirstAvailableBlock``, read last) proves it did not land before either. Anything else (the node
cannot say, only ``processed`` so far) leaves it pending for the next pass. The one exception to "not
by a clock": a send whose blocks the node no longer keeps (a limited ledger, a restart) can be proven
neither way; it stays pending ``UNPROVEN_RELEASE_S``, then is released as ``expired`` at the base fee,
marked ``<by>:unproven`` (never charged the landing price for a landing that cannot be proven; recorded,
not silently). A landing at a slot before the
send's hold (the history read finds an earlier send's landing of the same transaction) settles it at
that status with nothing charged, as the race's settlement does
(:func:`gateway.storage.sends.landed_before`).

With a pool of several nodes, the reads of one settlement all go to the node first for reads
(:func:`gateway.node.pool.one_node_of`): the order of the proof holds only within one node's view (a
blockhash invalid on one node proves nothing about a status read on another, a few slots behind).

Used by the reconciler actor (:mod:`gateway.sending.reconciler_actor`) for every stale pending send, and by
``getSendStatus`` for the one a caller asks about.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from gateway.node.http import ChainError, Upstream, UpstreamTimeout, UpstreamUnavailable, rpc_call
from gateway.node.pool import NoNode, one_node_of
from gateway.sending.race import LANDED
from gateway.storage import sends
from gateway.storage.connections import Pool
from gateway.storage.sends import SendRecord, SendStatus

log = logging.getLogger(__name__)

READ_TIMEOUT_S = 5.0
#: A send no node can prove landed or lost (its history purged past the hold) is released at the base fee after this
#: (the default of the setting ``send_unproven_release_s``).
UNPROVEN_RELEASE_S = 600.0


async def reconcile(
    pool: Pool, node: Upstream, record: SendRecord, by: str, release_after_s: float = UNPROVEN_RELEASE_S
) -> SendRecord:
    """Settle ``record`` if the chain proves its outcome; the record as it now stands. ``release_after_s``:
    the setting ``send_unproven_release_s``."""
    if record.status is not SendStatus.PENDING:
        return record
    try:
        node = await one_node_of(node)  # the proof's reads, in order, of one node's view (a pool of several)
        valid = await rpc_call(
            node, "isBlockhashValid", [record.blockhash, {"commitment": "processed"}], READ_TIMEOUT_S
        )
        statuses = await rpc_call(
            node, "getSignatureStatuses", [[record.signature], {"searchTransactionHistory": True}], READ_TIMEOUT_S
        )
    except (ChainError, UpstreamUnavailable, UpstreamTimeout, NoNode) as exc:
        log.debug("send %s stays pending: the node could not say (%s)", record.signature, exc)
        return record
    status = _first(statuses)
    settled: SendRecord | None = None
    if status is None and not _value(valid) and not await _history_reaches(node, record):
        return await _release_unproven(pool, record, by, release_after_s)  # it may have landed in what is purged
    if status is not None and status.get("confirmationStatus") in LANDED:
        err = status.get("err")
        outcome = SendStatus.FAILED if err is not None else SendStatus.CONFIRMED
        error = None if err is None else str(err)
        settled = await sends.settle(
            pool, record.signature, outcome, slot=status.get("slot"), error=error, settled_by=by
        )
    elif status is None and not _value(valid):
        settled = await sends.settle(pool, record.signature, SendStatus.EXPIRED, settled_by=by)
    return settled or record


async def _release_unproven(pool: Pool, record: SendRecord, by: str, after_s: float) -> SendRecord:
    """Pending until ``after_s`` old, then released at the base fee and marked (see the module's docstring)."""
    if datetime.now(UTC) - record.created_at < timedelta(seconds=after_s):
        return record
    error = "the node no longer keeps the blocks since the hold: released unproven"
    released = await sends.settle(pool, record.signature, SendStatus.EXPIRED, error=error, settled_by=f"{by}:unproven")
    return released or record


async def _history_reaches(node: Upstream, record: SendRecord) -> bool:
    """Whether the node still keeps the blocks from the send's hold on (read after the status, so that
    what it kept then it kept at the status read too): a node that purged them (limited ledger, or a
    restart) finds nothing of a transaction that landed there, which proves nothing."""
    if record.hold_slot is None:  # a send held before the hold slot was kept: as before
        return True
    try:
        first = await rpc_call(node, "getFirstAvailableBlock", [], READ_TIMEOUT_S)
    except (ChainError, UpstreamUnavailable, UpstreamTimeout) as exc:
        log.debug("send %s stays pending: the node could not say what it keeps (%s)", record.signature, exc)
        return False
    if isinstance(first, int) and first <= record.hold_slot:
        return True
    log.warning(
        "send %s stays pending: the node keeps blocks from %s on, after its hold at slot %d; "
        "a node with the history must settle it",
        record.signature,
        first,
        record.hold_slot,
    )
    return False


def _value(answer: Any) -> Any:
    return answer.get("value") if isinstance(answer, dict) else None


def _first(answer: Any) -> dict[str, Any] | None:
    value = _value(answer)
    first = value[0] if isinstance(value, list) and value else None
    return first if isinstance(first, dict) else None
