"""What keeps the gRPC stream whole when its geyser subscription moves to another node
(:mod:`gateway.node.geyser`): which updates were delivered already, by keys that are the same on every node
of the chain, and the ``from_slot`` the new node is asked to replay from (:class:`Delivered`).

Hand-written: Yellowstone's clients resume from a slot but leave the repeats to their callers; no library
of the field de-duplicates a geyser feed across nodes.
"""

from __future__ import annotations

from geyser_proto import geyser_pb2
from geyser_proto.fanout import SLOT_DEAD
from geyser_proto.filters import FINALIZED

#: A move's ``from_slot`` reaches at most this far below the newest slot delivered: Solana finalizes a
#: slot about 32 slots after it is processed, and a slot that is never finalized (a dead fork's) holds
#: the resumption back only this far.
MAX_MARGIN_SLOTS = 64
#: The slots whose delivered updates are known by their keys: the margin and a node up to 32 slots behind
#: (one further behind is out of service: ``upstream_max_lag_slots``).
KEYS_WINDOW_SLOTS = MAX_MARGIN_SLOTS + 32
_FINAL_KEY, _DEAD_KEY = hash((0, FINALIZED)), hash((0, SLOT_DEAD))


class Delivered:
    """What the feed delivered lately, by keys that are the same on every node of the chain: an update whose
    key was delivered already is a repeat (the new node's replay of what the old one sent). Keys are kept
    per slot for the newest ``window`` slots, as 64-bit hashes (two updates of one slot colliding would drop
    the second: about one chance in 10^11 for a slot of 20,000 updates); an update of an older slot is not
    recognised and passes.

    It also knows which slots may still get updates: those seen and neither finalized nor dead, and every
    slot after the newest finalized one (:meth:`resume_slot`)."""

    def __init__(self, window: int = KEYS_WINDOW_SLOTS) -> None:
        self.window = window
        self.newest: int | None = None  # the newest slot of any update delivered
        self.finalized: int | None = None  # the newest slot whose finalization was delivered
        self.repeats = 0  # updates dropped as delivered already
        self._keys: dict[int, set[int]] = {}
        self._open: dict[int, None] = {}  # slots seen, neither finalized nor dead yet

    def first(self, update: geyser_pb2.SubscribeUpdate, kind: str | None) -> bool:
        """Whether ``update`` (of ``kind``) was not delivered yet; if so, it is now."""
        closes = False
        if kind == "slot":
            status = update.slot
            slot, key = status.slot, hash((0, status.status))
            closes = status.status in (FINALIZED, SLOT_DEAD)
        elif kind == "account":
            account = update.account
            info = account.account
            slot, key = account.slot, hash((1, info.pubkey, info.txn_signature))
        elif kind == "transaction":
            tx = update.transaction
            slot, key = tx.slot, hash((2, tx.transaction.signature))
        elif kind == "block_meta":
            slot, key = update.block_meta.slot, 3
        elif kind == "transaction_status":
            status_update = update.transaction_status
            slot, key = status_update.slot, hash((4, status_update.signature))
        else:
            return True  # a kind the whole feed never asks for
        newest = self.newest
        if newest is not None and slot <= newest - self.window:
            return True
        keys = self._keys.get(slot)
        if keys is None:
            keys = self._keys[slot] = set()
        elif key in keys:
            self.repeats += 1
            return False
        keys.add(key)
        if closes:
            self._open.pop(slot, None)
            if status.status == FINALIZED and (self.finalized is None or slot > self.finalized):
                self.finalized = slot
        elif slot not in self._open and _FINAL_KEY not in keys and _DEAD_KEY not in keys:
            self._open[slot] = None
        if newest is None or slot > newest:
            self.newest = slot
            self._trim(slot - self.window)
        return True

    def _trim(self, cutoff: int) -> None:
        keys = self._keys
        while keys:
            oldest = next(iter(keys))  # (roughly in slot order: a slot older than the first is kept a little longer)
            if oldest > cutoff:
                break
            del keys[oldest]
        for slot in [s for s in self._open if s <= cutoff]:
            del self._open[slot]

    def resume_slot(self, max_margin: int = MAX_MARGIN_SLOTS) -> int | None:
        """The ``from_slot`` a move asks the new node for: the oldest slot that may still get an update (after
        the newest finalized, or seen and neither finalized nor dead), at most ``max_margin`` below the newest
        slot delivered; None when nothing was delivered."""
        newest = self.newest
        if newest is None:
            return None
        floor = max(0, newest - max_margin)
        if self.finalized is None:
            return floor  # nothing finalized seen yet: which slots are done is not known
        start = min(newest, self.finalized) + 1
        for slot in self._open:
            if floor <= slot < start:
                start = slot
        return max(floor, start)
