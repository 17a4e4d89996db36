"""Credited deposits and new accounts, told to every replica: the meter stops waiting on accounts it
thought empty, and auth forgets that the account was missing (:attr:`CreditNotices.listeners`).

Whichever path credits a deposit (``POST /account/confirm-deposit`` on any replica, the deposit
watcher, an x402 payment) or creates an account with its first API key (``POST /account/api-key``)
publishes the account on the ``CREDITED`` channel; every replica follows it and forgets the account's
cached shortness and absence. While a replica is not subscribed it may miss a notice, so its meter
then asks the store again after ``negative_ttl_s`` instead of backing off (:mod:`gateway.credits.meter`),
and its listeners are told the channel was lost and found again (:meth:`CreditListener.following`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from gateway.base.stopping import cancel_and_wait
from gateway.credits.meter import Meter
from gateway.storage.channels import Channel
from gateway.storage.errors import StoreUnavailable

log = logging.getLogger(__name__)


class CreditListener(Protocol):
    """Told what the channel tells the meter (auth's :class:`~gateway.auth.cache.NoAccounts`)."""

    def appeared(self, pubkey: str) -> None:
        """``pubkey`` was credited or its account created, here or elsewhere."""

    def following(self, live: bool) -> None:
        """The channel was (re)subscribed (``True``) or lost: notices may have been missed."""


class CreditNotices:
    def __init__(self, channel: Channel | None, meter: Meter | None = None) -> None:
        self.channel = channel
        self.meter = meter
        #: Also told of each account credited or created, and of the channel's state.
        self.listeners: list[CreditListener] = []
        self._task: asyncio.Task[None] | None = None

    async def credited(self, pubkey: str) -> None:
        """A deposit was credited to ``pubkey``, or its account created: tell this replica at once, and
        every other."""
        self._heard(pubkey)
        if self.channel is None:
            return
        try:
            await self.channel.publish([pubkey])
        except StoreUnavailable:  # the others find out within their longest wait
            log.warning("could not announce the credit (or new account) of %s", pubkey)

    def start(self) -> None:
        if self.channel is not None and self.meter is not None and self._task is None:
            follow = self.channel.follow(self._on_live, self._heard, self._on_lost)
            self._task = asyncio.get_running_loop().create_task(follow)

    async def stop(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    def _heard(self, pubkey: str) -> None:
        if self.meter is not None:
            self.meter.invalidate(pubkey)
        for listener in self.listeners:
            listener.appeared(pubkey)

    def _on_live(self) -> None:
        assert self.meter is not None
        self.meter.forget_shortness()  # notices may have been missed while away
        self.meter.hears_credits = True
        for listener in self.listeners:
            listener.following(True)

    def _on_lost(self) -> None:
        assert self.meter is not None
        self.meter.hears_credits = False
        for listener in self.listeners:
            listener.following(False)
