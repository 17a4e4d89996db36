"""Credits asked back: an account's balance is spendable from any replica at once.

A lease holds part of an account's balance for one replica until the replica spends it, releases it
idle (``idle_release_s``), or it expires. A client whose calls mostly reach one replica (a keep-alive
connection behind a balancer that favours it) would then be refused while its last credits sat in
another replica's lease. So a replica whose lease request fell short, while the store says other
replicas' live leases hold unspent credits of the account, asks them back on the ``RECALL`` channel;
each holder closes its leases of the account and settles them at once (their unspent part returns to
the balance) and says it did; the asker then leases again. Every replica that hears a return forgets
the account's cached shortness, as for a credited deposit.

The wait is bounded (``credit_recall_wait_s``): a holder that is gone (crashed) answers nothing and its
lease holds its credits until it expires (``lease_ttl_s``), as before. An asker is a call short of
credits on an account with credits leased elsewhere, so an account's recalls are at most one per
replica per negative-cache period (:func:`gateway.credits.decide.wait`).

Messages are :mod:`gateway.credits.recall_messages`' ``Want`` and ``Back``.
"""

from __future__ import annotations

import asyncio
import logging

from gateway.base.stopping import cancel_and_wait
from gateway.credits.meter import Meter
from gateway.credits.recall_messages import Back, Want, encode, parse
from gateway.storage.channels import Channel
from gateway.storage.errors import StoreUnavailable

log = logging.getLogger(__name__)

#: How long a call short of credits waits for another replica to give some back.
RECALL_WAIT_S = 0.25


class CreditRecall:
    def __init__(self, meter: Meter, wait_s: float = RECALL_WAIT_S) -> None:
        self.meter = meter
        self.wait_s = wait_s
        self.channel: Channel | None = None
        self.live = False  # subscribed: returns announced now are heard
        self._returned: dict[str, asyncio.Future[None]] = {}  # accounts this replica waits on
        self._giving: set[str] = set()  # accounts whose give-back runs here (one at a time each)
        self._tasks: set[asyncio.Task[None]] = set()
        self._follow: asyncio.Task[None] | None = None

    def start(self, channel: Channel) -> None:
        self.channel = channel
        self.meter.recall = self.ask
        self._follow = asyncio.get_running_loop().create_task(
            channel.follow(self._on_live, self._on_message, self._on_lost)
        )

    async def stop(self) -> None:
        self.meter.recall = None
        await cancel_and_wait(self._follow, *self._tasks)
        self._follow = None

    async def ask(self, pubkey: str) -> bool:
        """Ask the other replicas for ``pubkey``'s unspent leased credits; whether one gave some back
        within the wait (only the meter's turn at the account lock asks, so one ask per account)."""
        if self.channel is None or not self.live or self.wait_s <= 0:
            return False  # off, or a return would not be heard: not worth the wait
        returned = self._returned[pubkey] = asyncio.get_running_loop().create_future()
        try:
            await self.channel.publish([encode(Want(self.meter.replica_id, pubkey))])
            await asyncio.wait_for(returned, self.wait_s)
            return True
        except (TimeoutError, StoreUnavailable):
            return False
        finally:
            if self._returned.get(pubkey) is returned:
                del self._returned[pubkey]

    def _on_message(self, text: str) -> None:
        message = parse(text)
        if message is None or message.sender == self.meter.replica_id:
            return  # malformed (logged), or this replica's own
        pubkey = message.pubkey
        if isinstance(message, Want):
            if pubkey not in self._giving:
                self._giving.add(pubkey)
                task = asyncio.get_running_loop().create_task(self._give_back(pubkey))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        else:
            self.meter.invalidate(pubkey)
            returned = self._returned.get(pubkey)
            if returned is not None and not returned.done():
                returned.set_result(None)

    async def _give_back(self, pubkey: str) -> None:
        try:
            credits = await self.meter.give_back(pubkey)
            if credits > 0 and self.channel is not None:
                await self.channel.publish([encode(Back(self.meter.replica_id, pubkey, credits))])
        except Exception:  # the asker times out; this replica's leases settle at the next flush
            log.exception("giving back the leased credits of %s failed", pubkey)
        finally:
            self._giving.discard(pubkey)

    def _on_live(self) -> None:
        self.live = True

    def _on_lost(self) -> None:
        self.live = False
