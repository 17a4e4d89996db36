"""``python -m tests.faults [--operations N] [--seed S] [--only NAME]``: the fault suite (``make faults``).

One ``gateway up`` stack for the whole run (tests/integration/service.py). For each fault of
:data:`tests.faults.inject.FAULTS`, one at a time: the load runs, the fault is injected, the time until
the part is back and paid calls answer again is measured (printed, bounded only by a generous limit),
the load stops, and the checks run: ``gateway audit`` exits 0, no send hold stays pending and each
agrees with the chain, the sink's lamports equal the confirmed transfers, every event the receiver
should get arrived (none under two event ids), no dead delivery, every answered call billed. Then a
seeded randomized run (deposits, calls, sends, credit expiries, crashes at random points) ends with the
same checks. Exit 1 when any check found something.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair

from tests.faults.inject import FAULTS, Fault, Restarted, stop_restarted
from tests.faults.load import (
    Call,
    Customer,
    Load,
    Receiver,
    chain_outcomes,
    check_billing,
    check_deliveries,
    check_sends_match_chain,
    cli_json,
    create_webhook,
    deposit,
    gateway_cli,
    new_customer,
    probe,
    wait_deliveries,
    wait_sends_settled,
)
from tests.integration.service import RunningService, service_env, start_service, stop_service

RECOVERY_LIMIT_S = 300.0  # a bound against hanging, not a target
LOAD_BEFORE_S = 3.0
LOAD_AFTER_S = 3.0
USDC = 1_000_000  # base units: 100,000 credits


@dataclass
class Row:
    fault: str
    down_s: float = 0.0  # the injection itself: a restart's stop and start, the node's 10 s
    recovery_s: float | None = None  # from the part being back to the killed part running and paid calls answering
    calls: int = 0
    failed: int = 0
    unbilled: int = 0
    problems: list[str] = field(default_factory=list)
    unbilled_allowed: bool = False  # a killed process lost its unsettled usage (docs/architecture.md, metering)

    @property
    def failed_checks(self) -> bool:
        return bool(self.problems) or (self.unbilled > 0 and not self.unbilled_allowed)


@dataclass
class Suite:
    service: RunningService
    restarted: Restarted
    receiver: Receiver
    load: Load
    payer: Customer
    other: Customer
    expected: set[tuple[str, str]] = field(default_factory=set)  # (event type, signature) the receiver must get
    landed: dict[str, bool | None] = field(default_factory=dict)  # send signature → chain outcome, when known

    async def db(self) -> asyncpg.Connection:
        return await asyncpg.connect(f"postgresql://postgres:@/gateway?host={self.service.home / 'postgres'}")

    async def wait_recovered(self, back: Callable[[], bool]) -> float | None:
        started = time.monotonic()
        while not (back() and await probe(self.load, self.payer) and await probe(self.load, self.other)):
            if time.monotonic() - started > RECOVERY_LIMIT_S:
                return None
            await asyncio.sleep(0.2)
        return time.monotonic() - started

    async def check(self, row: Row, calls: list[Call]) -> None:
        """The checks after a fault (or the randomized run): each finding becomes one of ``row.problems``."""
        row.calls = len(calls)
        row.failed = sum(1 for c in calls if not c.answered)
        await wait_sends_settled(self.service)
        sends = [c for c in calls if c.kind == "send" and c.signature]
        known = await chain_outcomes(self.service.node_url, [c.signature for c in sends if c.signature])
        self.landed.update({s: o for s, o in known.items() if o is not None or s not in self.landed})
        conn = await self.db()
        try:
            confirmed = {
                r["signature"]
                for r in await conn.fetch(
                    "SELECT signature FROM sends WHERE status = 'confirmed' AND signature = ANY($1::text[])",
                    [c.signature for c in sends],
                )
            }
            for c in sends:
                if c.signature in confirmed or known.get(c.signature or ""):
                    self.expected.add(("transaction", c.signature or ""))
            row.problems += await check_sends_match_chain(conn, {s: known[s] for s in known if known[s] is not None})
            row.problems += await self.sink_matches(conn)
            await wait_deliveries(self.receiver, self.expected)
            lost, twice = check_deliveries(self.receiver, self.expected)
            row.problems += [f"webhook event lost: {e}" for e in lost] + [f"delivered twice: {e}" for e in twice]
            dead = await cli_json(self.service, "webhooks", "dead")
            row.problems += [f"dead delivery job {d['id']}: {d.get('last_error')}" for d in dead]
            audit = await asyncio.to_thread(gateway_cli, self.service, "audit", "--json")
            if audit.returncode != 0:
                row.problems.append(
                    f"gateway audit exited {audit.returncode}: {audit.stdout[-1500:]}{audit.stderr[-500:]}"
                )
            await asyncio.sleep(2)  # the replicas' usage reaches the ledger within a flush (about 1 s)
            billing = await check_billing(conn, calls, self.landed)
            row.unbilled = billing.unbilled
            if billing.unbilled_detail:
                print(f"  unbilled ({row.fault}): {billing.unbilled_detail}", flush=True)
        finally:
            await conn.close()

    async def sink_matches(self, conn: asyncpg.Connection) -> list[str]:
        """The sink's lamports (kept across node restarts) equal the transfers the ledger says confirmed."""
        every = [c for c in self.load.calls if c.kind == "send" and c.signature]
        amounts = {c.signature: c.lamports for c in every}
        rows = await conn.fetch(
            "SELECT signature FROM sends WHERE status = 'confirmed' AND signature = ANY($1::text[])", list(amounts)
        )
        expected = sum(amounts[r["signature"]] for r in rows)
        async with AsyncClient(self.service.node_url) as node:
            actual = (await node.get_balance(self.load.sink)).value
        if actual != expected:
            await self.why(conn, actual - expected)
            return [f"sink holds {actual} lamports, the ledger's confirmed sends {expected}"]
        return []

    async def why(self, conn: asyncpg.Connection, missing: int) -> None:
        """Print the sends behind a sink mismatch of ``missing`` lamports (each send's amount is distinct):
        the one of that amount, and every send whose ledger row and the chain's word disagree (sends
        before a node restart are unknown to the chain: None there is not a disagreement)."""
        every = [c for c in self.load.calls if c.kind == "send" and c.signature]
        chain = await chain_outcomes(self.service.node_url, [c.signature for c in every if c.signature])
        rows = {
            r["signature"]: dict(r)
            for r in await conn.fetch(
                "SELECT signature, status, settled_by, slot, hold_slot, created_at, settled_at FROM sends"
                " WHERE signature = ANY($1::text[])",
                [c.signature for c in every],
            )
        }
        for c in every:
            row, landed = rows.get(c.signature or ""), chain.get(c.signature or "")
            confirmed = row is not None and row["status"] == "confirmed"
            if c.lamports == abs(missing) or (landed is not None and landed != confirmed):
                what = f"{c.lamports} lamports, answered {c.status} {c.outcome}"
                print(f"  send {c.phase}: {c.signature} ({what}): chain {landed}, ledger {row}", flush=True)
        async with AsyncClient(self.service.node_url) as node:  # the node's own account of the sink
            slot = (await node.get_slot()).value
            history = (await node.get_signatures_for_address(self.load.sink, limit=1000)).value
        listed = {str(entry.signature) for entry in history}
        for c in every:
            if c.lamports == abs(missing):
                print(f"  the node (slot {slot}) lists it in the sink's history: {c.signature in listed}", flush=True)
        if not any(c.lamports == abs(missing) for c in every):
            print(f"  no send of {abs(missing)} lamports was made by the load", flush=True)

    async def fault(self, fault: Fault) -> Row:
        row = Row(fault.name, unbilled_allowed=fault.loses_unsettled_usage)
        self.load.phase = fault.name
        self.load.running.set()
        await asyncio.sleep(LOAD_BEFORE_S)
        started = time.monotonic()
        back = await fault.inject(self.service, self.restarted)
        row.down_s = time.monotonic() - started
        row.recovery_s = await self.wait_recovered(back)
        if row.recovery_s is None:
            row.problems.append(f"not recovered within {RECOVERY_LIMIT_S:g} s")
        await asyncio.sleep(LOAD_AFTER_S)
        await self.load.pause()
        await self.check(row, self.load.of(fault.name))
        return row

    async def randomized(self, operations: int, seed: int) -> Row:
        """``operations`` metered operations chosen by ``seed`` (the sequence, not the timing, is reproducible)."""
        rng = random.Random(seed)
        row = Row(f"randomized seed={seed} ops={operations}")
        self.load.phase = row.fault
        kills = [f for f in FAULTS if f.name.startswith("kill") or f.name in ("postgres restart", "redis restart")]
        crashes: list[asyncio.Task[float | None]] = []
        tally: dict[str, int] = {}
        started = time.monotonic()
        for _ in range(operations):
            op = rng.choices(["calls", "send", "deposit", "expire", "crash"], weights=[40, 25, 10, 10, 15])[0]
            tally[op] = tally.get(op, 0) + 1
            try:
                if op == "calls":
                    for n in range(rng.randint(5, 30)):
                        who = self.payer if rng.random() < 0.5 else self.other
                        self.load.calls.append(await self.load.read_once(who, ("getSlot", "getBalance")[n % 2]))
                elif op == "send":
                    call = await self.load.send_once()
                    if call is not None:
                        self.load.calls.append(call)
                elif op == "deposit":
                    who = self.payer if rng.random() < 0.5 else self.other
                    sig = await asyncio.wait_for(deposit(self.service, who, rng.randint(10_000, 200_000)), 120)
                    if who is self.other:  # its lifecycle webhook: one deposit.credited per deposit
                        self.expected.add(("deposit.credited", sig))
                elif op == "expire":
                    await self.expire_one(self.other)
                else:
                    fault = rng.choice(kills)
                    row.unbilled_allowed |= fault.loses_unsettled_usage
                    delay = rng.uniform(0.0, 1.5)
                    print(f"  crash: {fault.name} in {delay:.1f} s", flush=True)
                    crashes.append(asyncio.create_task(self.crash_later(fault, delay)))
                    if fault.name.endswith("restart"):  # one store restart at a time
                        await crashes[-1]
            except Exception as exc:  # an operation hit by a crash: its money is still checked below
                tally[f"{op} failed"] = tally.get(f"{op} failed", 0) + 1
                print(f"  {op} failed: {type(exc).__name__}: {exc}"[:300], flush=True)
        for task in crashes:
            await task
        row.recovery_s = await self.wait_recovered(lambda: True)
        row.down_s = time.monotonic() - started
        print(f"  operations: {tally}", flush=True)
        await self.check(row, self.load.of(row.fault))
        return row

    async def crash_later(self, fault: Fault, delay: float) -> float | None:
        await asyncio.sleep(delay)
        back = await fault.inject(self.service, self.restarted)
        return await self.wait_recovered(back)

    async def expire_one(self, customer: Customer) -> None:
        """Move one of the account's credit batches to its expiry now (the clock, moved forward for one batch);
        the replicas' expiry pass (every credit_expiry_check_s, 2 s here) expires it."""
        conn = await self.db()
        try:
            await conn.execute(
                """UPDATE credit_batches SET expires_at = now() WHERE id = (
                     SELECT id FROM credit_batches WHERE pubkey = $1 AND remaining > 0 AND expires_at > now()
                     ORDER BY id LIMIT 1)""",
                str(customer.wallet.pubkey()),
            )
        finally:
            await conn.close()


def table(rows: list[Row]) -> str:
    lines = [
        "| fault | down s | recovery s | calls | calls failed during | calls unbilled | problems |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        recovery = "-" if r.recovery_s is None else f"{r.recovery_s:.1f}"
        problems = "; ".join(r.problems) if r.problems else "none"
        lines.append(
            f"| {r.fault} | {r.down_s:.1f} | {recovery} | {r.calls} | {r.failed} | {r.unbilled} | {problems[:400]} |"
        )
    return "\n".join(lines)


async def run(service: RunningService, restarted: Restarted, args: argparse.Namespace) -> list[Row]:
    receiver = Receiver()
    hook_url = await receiver.start()
    try:
        payer, other = await asyncio.gather(new_customer(service, "payer", USDC), new_customer(service, "other", USDC))
        sink = Keypair().pubkey()
        await create_webhook(service.url, payer, {"url": hook_url, "filter_type": "account", "filter_value": str(sink)})
        await create_webhook(
            service.url, other, {"url": hook_url, "filter_type": "lifecycle", "lifecycle_events": ["deposit.credited"]}
        )
        await asyncio.sleep(6)  # the watcher picks a new webhook up within about 5 s (docs/api.md, Payloads)
        load = Load(service, [payer, other], payer, sink)
        await load.start()
        suite = Suite(service, restarted, receiver, load, payer, other)
        rows: list[Row] = []
        try:
            baseline = Fault("none (baseline)", _nothing)
            chosen = [f for f in FAULTS if not args.only or any(o in f.name for o in args.only)]
            for fault in [baseline, *chosen]:
                print(f"fault: {fault.name}", flush=True)
                rows.append(await suite.fault(fault))
                print(table(rows[-1:]).splitlines()[-1], flush=True)
            if args.operations > 0:
                print(f"randomized: seed {args.seed}, {args.operations} operations", flush=True)
                rows.append(await suite.randomized(args.operations, args.seed))
                print(table(rows[-1:]).splitlines()[-1], flush=True)
            print(f"webhook posts received: {receiver.posts}, events expected: {len(suite.expected)}", flush=True)
        finally:
            await load.close()
        return rows
    finally:
        await receiver.stop()


async def _nothing(service: RunningService, restarted: Restarted) -> Callable[[], bool]:
    return lambda: True


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.faults", description=__doc__)
    parser.add_argument("--operations", type=int, default=40, help="randomized run's operations (0: none)")
    parser.add_argument("--seed", type=int, default=29, help="randomized run's seed")
    parser.add_argument("--only", action="append", help="only the faults whose name has this (repeatable)")
    parser.add_argument("--tmp", default=tempfile.gettempdir(), help="where the stack's data dir is made")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="gateway-faults-", dir=args.tmp))
    env = service_env(
        home,
        GATEWAY_WEBHOOK_ALLOW_PRIVATE="true",
        GATEWAY_CREDIT_EXPIRY_CHECK_S="2",
        # 10 min of blocks (the integration stacks keep 5 s): a send whose racer was killed is settled by the
        # reconciler from the chain, which needs the blocks since its hold (gateway/sending/reconcile.py);
        # one in flight when the node restarts has none: released unproven after 60 s, not 10 min
        GATEWAY_DEVNODE_RETENTION_SLOTS="6000",
        GATEWAY_SEND_UNPROVEN_RELEASE_S="60",
    )
    began = time.monotonic()
    print(f"starting gateway up in {home}", flush=True)
    service = start_service(home, env, timeout_s=420.0)
    print(f"ready in {time.monotonic() - began:.0f} s", flush=True)
    restarted = Restarted()
    try:
        rows = asyncio.run(run(service, restarted, args))
    finally:
        code, survivors = stop_service(service)
        stop_restarted(restarted)
        print(f"gateway up stopped: exit {code}, survivors {survivors}", flush=True)
    print(table(rows))
    print(f"total {time.monotonic() - began:.0f} s")
    return 1 if any(r.failed_checks for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
