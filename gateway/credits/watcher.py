"""Crediting USDC deposits: the watcher that follows the deposit address, and ``POST /account/confirm-deposit``.

Both paths read the same finalized transaction, find the same transfers (:mod:`gateway.credits.deposits`)
and hand them to :func:`gateway.credits.store.credit_deposit`, whose unique constraint on the signature
makes "credited at most once, whichever path sees it first" hold without any coordination here.

The watcher polls ``getSignaturesForAddress`` on the deposit token account (commitment finalized, ``until``
its cursor), processes the new signatures oldest first and moves the cursor (a row in PostgreSQL) past
each one only once it is fully credited, so a crash or restart resumes and at worst re-offers a signature
that is then reported as already processed. Only finalized transactions are credited: a signature that is
not finalized yet stops the pass and is seen again at the next poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import orjson
from solders.pubkey import Pubkey
from solders.signature import Signature
from starlette.routing import Route

from gateway.config import Settings
from gateway.credits.deposits import DepositTransfer, deposit_token_account, scan_deposits
from gateway.credits.model import CreditPolicy, DepositCredit, DepositOutcome, EventHook, no_events
from gateway.credits.store import credit_deposit
from gateway.errors import auth_failed, backend_unavailable, invalid_request, service_unavailable
from gateway.keys import DEPOSIT_WALLET, load_keypair, load_or_create_keypair
from gateway.pipeline import Call, Handler, Reply, Stage, json_reply
from gateway.transports.routing import mount
from gateway.upstream import Upstream, UpstreamTimeout, UpstreamUnavailable

log = logging.getLogger(__name__)

RPC_TIMEOUT_S = 15.0
UNSUPPORTED_TX_VERSION = -32015
NOT_FINALIZED = "transaction not found or not finalized yet; retry in ~30 s"


class ChainError(Exception):
    """The node answered a JSON-RPC error (it was reachable; the request itself failed)."""

    def __init__(self, code: int | None, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


async def rpc_call(upstream: Upstream, method: str, params: list[Any], timeout_s: float = RPC_TIMEOUT_S) -> Any:
    """One JSON-RPC call to the node; its ``result``, or :class:`ChainError` for an error answer."""
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    raw = await upstream.post(body, timeout_s)
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UpstreamUnavailable(f"{method}: node answered something that is not JSON") from exc
    if not isinstance(doc, dict):
        raise UpstreamUnavailable(f"{method}: node answered something that is not a JSON-RPC response")
    error = doc.get("error")
    if error is not None:
        code = error.get("code") if isinstance(error, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        raise ChainError(code if isinstance(code, int) else None, f"{method}: {message or error}")
    return doc.get("result")


async def get_finalized_transaction(
    upstream: Upstream, signature: str, timeout_s: float = RPC_TIMEOUT_S
) -> dict[str, Any] | None:
    """``getTransaction`` (jsonParsed, finalized); a v1 transaction is fetched again with version 1 allowed."""
    cfg: dict[str, Any] = {"encoding": "jsonParsed", "commitment": "finalized", "maxSupportedTransactionVersion": 0}
    try:
        result = await rpc_call(upstream, "getTransaction", [signature, cfg], timeout_s)
    except ChainError as exc:
        if exc.code != UNSUPPORTED_TX_VERSION:
            raise
        result = await rpc_call(
            upstream, "getTransaction", [signature, {**cfg, "maxSupportedTransactionVersion": 1}], timeout_s
        )
    return result if isinstance(result, dict) else None


def deposit_credits(signature: str, slot: int | None, transfers: Sequence[DepositTransfer]) -> list[DepositCredit]:
    """One credit per authority wallet in the transaction, its transfers summed, keyed for exactly-once.

    The usual transaction has one transfer and gets the bare signature as its key. A transaction moving
    USDC in for several authorities gives the second and later ones ``<signature>:<n>`` (order of first
    appearance, the same on both paths), so each is still credited at most once.
    """
    totals: dict[str, int] = {}
    for transfer in transfers:
        totals[transfer.authority] = totals.get(transfer.authority, 0) + transfer.amount_base_units
    return [
        DepositCredit(
            signature=signature if n == 0 else f"{signature}:{n}",
            pubkey=pubkey,
            amount_base_units=amount,
            slot=slot,
        )
        for n, (pubkey, amount) in enumerate(totals.items())
    ]


# --------------------------------------------------------------------------------------------- watcher


@dataclass
class WatcherStats:
    """What the watcher did, for the actor's ``status()`` and for logs."""

    polls: int = 0
    signatures_processed: int = 0
    deposits_credited: int = 0
    credits_added: int = 0
    last_poll_at: float | None = None
    last_error: str | None = None
    skipped: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "polls": self.polls,
            "signatures_processed": self.signatures_processed,
            "deposits_credited": self.deposits_credited,
            "credits_added": self.credits_added,
            "last_poll_at": self.last_poll_at,
            "last_error": self.last_error,
            "skipped": list(self.skipped),
        }


class DepositWatcher:
    """Follows the deposit token account and credits each finalized USDC transfer into it (no Ray here)."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        upstream: Upstream,
        policy: CreditPolicy,
        deposit_ata: str,
        usdc_mint: str,
        *,
        page_limit: int = 1000,
        timeout_s: float = RPC_TIMEOUT_S,
        max_attempts: int = 30,
        events: EventHook = no_events,
    ) -> None:
        self.pool = pool
        self.upstream = upstream
        self.policy = policy
        self.deposit_ata = deposit_ata
        self.usdc_mint = usdc_mint
        self.page_limit = page_limit
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.events = events
        self.stats = WatcherStats()
        self._attempts: dict[str, int] = {}
        self._lock = asyncio.Lock()  # one pass at a time: overlapping passes would move the cursor back

    async def cursor(self) -> str | None:
        """The newest signature fully processed, or None before the first one."""
        value = await self.pool.fetchval(
            "SELECT last_signature FROM deposit_watch_cursor WHERE ata = $1", self.deposit_ata
        )
        return value if isinstance(value, str) else None

    async def _save_cursor(self, signature: str, slot: int | None) -> None:
        await self.pool.execute(
            """INSERT INTO deposit_watch_cursor (ata, last_signature, last_slot, updated_at)
               VALUES ($1, $2, $3, now())
               ON CONFLICT (ata) DO UPDATE
               SET last_signature = EXCLUDED.last_signature, last_slot = EXCLUDED.last_slot, updated_at = now()""",
            self.deposit_ata,
            signature,
            slot,
        )

    async def _new_signatures(self, until: str | None) -> list[dict[str, Any]]:
        """Signatures newer than ``until``, newest first (the node's order), across as many pages as needed."""
        found: list[dict[str, Any]] = []
        before: str | None = None
        while True:
            cfg: dict[str, Any] = {"commitment": "finalized", "limit": self.page_limit}
            if until:
                cfg["until"] = until
            if before:
                cfg["before"] = before
            page = await rpc_call(self.upstream, "getSignaturesForAddress", [self.deposit_ata, cfg], self.timeout_s)
            if not isinstance(page, list):
                raise ChainError(None, "getSignaturesForAddress: expected a list")
            entries = [e for e in page if isinstance(e, dict) and isinstance(e.get("signature"), str)]
            found.extend(entries)
            if len(page) < self.page_limit or not entries:
                return found
            before = entries[-1]["signature"]

    async def run_once(self) -> int:
        """One poll: credit what is new and finalized; return how many signatures were processed."""
        async with self._lock:
            return await self._pass()

    async def _pass(self) -> int:
        self.stats.polls += 1
        self.stats.last_error = None
        self.stats.last_poll_at = time.time()
        entries = await self._new_signatures(await self.cursor())
        processed = 0
        for entry in reversed(entries):  # oldest first
            signature: str = entry["signature"]
            status = entry.get("confirmationStatus")
            if status is not None and status != "finalized":
                break  # later ones are younger still; all are seen again next poll
            if entry.get("err") is None and not await self._process(signature):
                break
            slot = entry.get("slot")
            await self._save_cursor(signature, slot if isinstance(slot, int) else None)
            self._attempts.pop(signature, None)
            processed += 1
        self.stats.signatures_processed += processed
        return processed

    async def _process(self, signature: str) -> bool:
        """Credit one transaction's transfers; False means "not readable yet, stop here and retry later"."""
        try:
            tx = await get_finalized_transaction(self.upstream, signature, self.timeout_s)
        except ChainError as exc:
            return self._give_up(signature, str(exc))
        if tx is None:
            return self._give_up(signature, "getTransaction returned null for a finalized signature")
        scan = scan_deposits(tx, self.deposit_ata, self.usdc_mint)
        slot = tx.get("slot")
        for credit in deposit_credits(signature, slot if isinstance(slot, int) else None, scan.transfers):
            outcome = await credit_deposit(self.pool, credit, self.policy, self.events)
            if outcome.credited:
                self.stats.deposits_credited += 1
                self.stats.credits_added += outcome.credits_added
                log.info(
                    "deposit %s: %d base units from %s, %d credits",
                    credit.signature,
                    credit.amount_base_units,
                    credit.pubkey,
                    outcome.credits_added,
                )
            elif outcome.ignored_reason:
                log.info("deposit %s from %s not credited: %s", credit.signature, credit.pubkey, outcome.ignored_reason)
        return True

    def _give_up(self, signature: str, why: str) -> bool:
        """A signature that stays unreadable must not block every later deposit: skip it after a while.

        It stays creditable through confirm-deposit, and the skip is logged as an error.
        """
        attempts = self._attempts.get(signature, 0) + 1
        self._attempts[signature] = attempts
        self.stats.last_error = f"{signature}: {why}"
        if attempts < self.max_attempts:
            log.warning("deposit %s not readable yet (attempt %d): %s", signature, attempts, why)
            return False
        log.error("skipping deposit signature %s after %d attempts: %s", signature, attempts, why)
        self.stats.skipped = [*self.stats.skipped[-99:], signature]
        return True

    async def run(self, interval_s: float, stop: asyncio.Event | None = None) -> None:
        """Poll every ``interval_s`` until ``stop`` is set (or the task is cancelled), surviving any error."""
        stop = stop or asyncio.Event()
        while not stop.is_set():
            try:
                await self.run_once()
            except asyncio.CancelledError:
                raise
            except (UpstreamUnavailable, UpstreamTimeout, ChainError) as exc:
                self.stats.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("deposit watcher: node not usable: %s", exc)
            except Exception as exc:
                self.stats.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("deposit watcher poll failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval_s)


# ------------------------------------------------------------------------------------ confirm-deposit


@dataclass(frozen=True)
class ConfirmedDeposit:
    """What confirm-deposit did: the summed outcome plus whom it credited (the transfer's authority)."""

    signature: str
    outcome: DepositOutcome
    credited_pubkey: str
    amount_base_units: int
    parts: tuple[tuple[DepositCredit, DepositOutcome], ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": True,
            "credits_added": self.outcome.credits_added,
            "new_balance": self.outcome.new_balance,
            "already_processed": self.outcome.already_processed,
            "signature": self.signature,
            "credited_pubkey": self.credited_pubkey,
            "amount_base_units": self.amount_base_units,
            "bonus_credits": self.outcome.bonus_credits,
        }


def parse_signature(signature: Any) -> str:
    """The signature in canonical base58, or 400 INVALID_REQUEST."""
    if not isinstance(signature, str) or not signature:
        raise invalid_request("signature is required: a base58 transaction signature (64 bytes)")
    try:
        return str(Signature.from_string(signature.strip()))
    except ValueError as exc:
        raise invalid_request("signature is not a base58 transaction signature (64 bytes)") from exc


async def confirm_deposit(
    pool: asyncpg.Pool,
    upstream: Upstream,
    signature: str,
    policy: CreditPolicy,
    deposit_ata: str,
    usdc_mint: str,
    *,
    caller: str | None = None,
    timeout_s: float = RPC_TIMEOUT_S,
    events: EventHook = no_events,
) -> ConfirmedDeposit:
    """Credit the deposit in ``signature`` now instead of waiting for the watcher; 400 for anything else.

    ``caller`` (the authenticated wallet) only chooses whose balance is reported when one transaction
    pays in for several wallets; credit always goes to each transfer's authority (funding attribution).
    """
    sig = parse_signature(signature)
    try:
        statuses = await rpc_call(
            upstream, "getSignatureStatuses", [[sig], {"searchTransactionHistory": True}], timeout_s
        )
        status = _first_status(statuses)
        # The status check keeps a node that ignores `commitment` (the devnode does) from handing out
        # a transaction that is not final yet.
        finalized = status is not None and status.get("confirmationStatus") == "finalized"
        tx = await get_finalized_transaction(upstream, sig, timeout_s) if finalized else None
    except (UpstreamUnavailable, UpstreamTimeout, ChainError) as exc:
        raise backend_unavailable(f"could not read the transaction from the node: {exc}") from exc
    if tx is None:
        raise invalid_request(NOT_FINALIZED)

    scan = scan_deposits(tx, deposit_ata, usdc_mint)
    if not scan.transfers:
        raise invalid_request(scan.reason or "no USDC transfer to the deposit address in this transaction")
    slot = tx.get("slot")
    credits = deposit_credits(sig, slot if isinstance(slot, int) else None, scan.transfers)
    parts = tuple([(credit, await credit_deposit(pool, credit, policy, events)) for credit in credits])

    shown = next((p for p in parts if p[0].pubkey == caller), parts[0])
    if not any(o.credited for _, o in parts):
        ignored = [await _ignored_reason(pool, credit, outcome) for credit, outcome in parts]
        if all(ignored):
            raise invalid_request(f"deposit not credited: {ignored[0]}")
    outcome = DepositOutcome(
        credited=any(o.credited for _, o in parts),
        already_processed=all(o.already_processed for _, o in parts),
        credits_added=sum(o.credits_added for _, o in parts),
        new_balance=shown[1].new_balance,
        ignored_reason=None,
        bonus_credits=sum(o.bonus_credits for _, o in parts),
    )
    return ConfirmedDeposit(
        signature=sig,
        outcome=outcome,
        credited_pubkey=shown[0].pubkey,
        amount_base_units=sum(c.amount_base_units for c in credits),
        parts=parts,
    )


async def _ignored_reason(pool: asyncpg.Pool, credit: DepositCredit, outcome: DepositOutcome) -> str | None:
    """Why this deposit earns nothing, now or when it was first recorded (then the outcome says only "seen")."""
    if outcome.ignored_reason or not outcome.already_processed:
        return outcome.ignored_reason
    row = await pool.fetchrow("SELECT status, reason FROM deposits WHERE signature = $1", credit.signature)
    if row is not None and row["status"] == "ignored":
        return str(row["reason"] or "ignored")
    return None


def _first_status(statuses: Any) -> Mapping[str, Any] | None:
    value = statuses.get("value") if isinstance(statuses, dict) else None
    first = value[0] if isinstance(value, list) and value else None
    return first if isinstance(first, dict) else None


# ----------------------------------------------------------------------------------------- endpoint


@dataclass
class DepositServices:
    """What the deposit paths need from a replica. The pool is looked up per call: it opens at start-up."""

    get_pool: Callable[[], asyncpg.Pool | None]
    upstream: Upstream
    policy: CreditPolicy
    deposit_ata: str
    usdc_mint: str
    events: EventHook = no_events
    #: Told which wallet was credited, so a replica's cached "not enough credits" answer ends at once.
    after_credit: Callable[[str], None] = lambda pubkey: None

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        upstream: Upstream,
        get_pool: Callable[[], asyncpg.Pool | None],
        events: EventHook = no_events,
        after_credit: Callable[[str], None] = lambda pubkey: None,
    ) -> DepositServices:
        return cls(
            after_credit=after_credit,
            get_pool=get_pool,
            upstream=upstream,
            policy=credit_policy(settings),
            deposit_ata=str(deposit_ata_for(settings)),
            usdc_mint=settings.usdc_mint,
            events=events,
        )


def credit_policy(settings: Settings) -> CreditPolicy:
    return CreditPolicy(
        credits_per_usdc=settings.credits_per_usdc,
        credit_expiry_seconds=settings.credit_expiry_seconds,
        referral_bonus_percent=settings.referral_bonus_percent,
    )


def deposit_ata_for(settings: Settings) -> Pubkey:
    """The deposit wallet's USDC token account: the wallet is the public key of ``<home>/keys/deposit-wallet.json``.

    The stack creates the key before anything starts; a replica started some other way (tests,
    ``serve run``) creates it on first use, and if another process wins that race, reads theirs.
    """
    path = settings.resolved_home / DEPOSIT_WALLET
    try:
        wallet = load_or_create_keypair(path).pubkey()
    except FileExistsError:
        wallet = load_keypair(path).pubkey()
    return deposit_token_account(wallet, Pubkey.from_string(settings.usdc_mint))


def caller_pubkey(identity: Any) -> str | None:
    """The authenticated wallet, whatever shape the auth stage gives identities (str or ``.pubkey``)."""
    if isinstance(identity, str):
        return identity
    pubkey = getattr(identity, "pubkey", None)
    return str(pubkey) if pubkey is not None else None


def confirm_deposit_handler(services: DepositServices) -> Handler:
    """The endpoint behind the auth stage: ``{signature}`` in, ``{ok, credits_added, new_balance, ...}`` out."""

    async def handle_confirm(call: Call) -> Reply:
        caller = caller_pubkey(call.identity)
        if caller is None:
            raise auth_failed("confirm-deposit needs an authenticated wallet")
        try:
            body = orjson.loads(call.body) if call.body else None
        except orjson.JSONDecodeError as exc:
            raise invalid_request('body must be JSON: {"signature": "<base58 signature>"}') from exc
        if not isinstance(body, dict) or "signature" not in body:
            raise invalid_request('body must be {"signature": "<base58 signature>"}')
        pool = services.get_pool()
        if pool is None:
            raise service_unavailable("the account database is not available yet", 5)
        confirmed = await confirm_deposit(
            pool,
            services.upstream,
            body["signature"],
            services.policy,
            services.deposit_ata,
            services.usdc_mint,
            caller=caller,
            events=services.events,
        )
        services.after_credit(confirmed.credited_pubkey)
        return json_reply(200, confirmed.to_json(), dict(call.response_headers))

    return handle_confirm


def deposit_routes(services: DepositServices, stages: Sequence[Stage] = ()) -> list[Route]:
    """``POST /account/confirm-deposit`` with ``stages`` (the auth stage) in front of the handler."""
    return [mount("/account/confirm-deposit", "POST", stages, confirm_deposit_handler(services))]
