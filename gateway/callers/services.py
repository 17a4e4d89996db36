"""What every serving process builds the same way to know its callers and bill them: the stores, auth,
the credit meter, the per-account limits, and the two credit channels (deposits credited elsewhere,
leases recalled). A replica (:class:`gateway.app.replica.GatewayApp`) and a gRPC stream server
(:class:`gateway.grpc.server.GrpcStreamServer`) each hold one, built, started and stopped here only.
"""

from __future__ import annotations

from typing import Any

from gateway.auth.access_hook import AccessCheck
from gateway.auth.services import AuthServices
from gateway.auth.settings import AuthSettings
from gateway.auth.strategies import FundsCheck
from gateway.base.stopping import Step
from gateway.credits.meter import Meter
from gateway.credits.notices import CreditNotices
from gateway.credits.recall import CreditRecall
from gateway.credits.settings import CreditSettings
from gateway.limits.rules import AccountLimits, Limiter
from gateway.limits.settings import LimitSettings
from gateway.limits.slices import ShardClient, SlicedLimiter
from gateway.storage.channels import CREDITED, RECALL, Channel
from gateway.storage.connections import Connections


class AccountSettings(AuthSettings, CreditSettings, LimitSettings):
    """What :class:`AccountServices` reads: auth's, metering's and the limits' settings."""


class AccountServices:
    """Args:
    settings: the resolved settings (auth, metering, limits).
    shards: the account-shard actors (``account_shards`` > 0): each account's rate and concurrency are
        then one whole shared by every process; None: each process enforces its share of them.
    sweeps_expiry: whether this process's meter sweeps expired credit batches (the replicas do; the
        gRPC stream servers leave it to them).
    access, unfunded: :class:`AuthServices`'s (the serving process's access rules, and what the meter
        knows of an account that cannot pay).
    auth_options: extra :class:`AuthServices` options (tests pass short lifetimes and hooks).
    """

    def __init__(
        self,
        settings: AccountSettings,
        shards: ShardClient | None,
        *,
        sweeps_expiry: bool,
        access: AccessCheck | None = None,
        unfunded: FundsCheck | None = None,
        **auth_options: Any,
    ) -> None:
        self.settings = settings
        self.conn = Connections()
        self.meter = Meter(
            replicas=settings.share_replicas,
            lease_ttl_s=settings.lease_ttl_s,
            flush_interval_s=settings.credit_flush_interval_s,
            expiry_interval_s=settings.credit_expiry_check_s if sweeps_expiry else 0,
        )
        self.limiter: AccountLimits = (
            SlicedLimiter(shards, settings.rate_limit_rps, settings.concurrency_limit)
            if shards is not None
            else Limiter(settings.rate_limit_rps, settings.concurrency_limit, replicas=settings.share_replicas)
        )
        self.notices = CreditNotices(None, self.meter)  # its channel opens with Redis, at start-up
        self.auth = AuthServices(
            settings,
            api_key_secret=settings.api_key_secret_bytes,
            unfunded=unfunded,
            access=access,
            announce_account=self.notices.credited,  # a first API key may create an account: say so everywhere
            **auth_options,
        )
        self.auth.revocations.listeners.append(self.meter.suspend)  # a suspension stops its leases at once
        self.notices.listeners.append(self.auth.no_accounts)  # a credited or created key has an account now
        self.recall = CreditRecall(self.meter, settings.credit_recall_wait_s)

    async def start(self, pool_size: int = 10) -> Connections:
        """Open the stores and start what runs on them; the connections (a store not configured: None)."""
        self.conn = await Connections.open(self.settings.database_url, self.settings.redis_url, pool_size=pool_size)
        await self.auth.start(self.conn)
        if self.conn.db is not None:
            self.meter.start(self.conn.db)
        if self.conn.redis is not None:
            self.notices.channel = Channel(self.conn.redis, CREDITED)
            self.notices.start()
            self.recall.start(Channel(self.conn.redis, RECALL))
        return self.conn

    def first_stop_steps(self) -> list[Step]:
        """Stop listening for credits and recalls: before the process's own parts stop."""
        return [("credit notices", self.notices.stop), ("credit recall", self.recall.stop)]

    def last_stop_steps(self) -> list[Step]:
        """Settle usage and give back leases and slices, then close auth and the stores: after the
        process's own parts, which may still bill while they stop."""
        limiter = self.limiter
        return [
            ("meter", self.meter.stop),
            # the slices go back to the shards now, not when the shards forget them
            *([("account slices", limiter.close)] if isinstance(limiter, SlicedLimiter) else []),
            ("auth", self.auth.stop),
            ("stores", self.conn.close),
        ]
