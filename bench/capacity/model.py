"""The capacity model of ``docs/scaling.md``: from the measured cost of each operation and what one
request makes each component do, the processes and cores a deployment needs. Pure arithmetic.

How the work per request is counted (the gateway's own constants, docs/architecture.md "How metering works" and
"Where state lives"). An account's calls are spread by HAProxy (``leastconn``) over every ingress
replica, so an account at ``λ`` requests/s is ``μ = λ / R`` calls/s on each of the ``R`` replicas
(``μ = λ`` when the balancer keeps an account on one replica: ``affinity``). Arrivals are taken as
Poisson. Per account and replica:

- slices (``gateway/limits/slices.py``): a call that finds no slice asks the shard on the call path,
  and a slice unused for ``0.25 s`` (seen by the next 0.1 s tick) is given back in another exchange:
  ``2 · e^(-μ · 0.3)`` exchanges per call (renewals and refills of a busy slice are left out: they
  matter only above about 4 calls/s on one replica);
- credit leases (``gateway/credits/meter.py``): usage is settled once a flush interval ``F`` when there
  was a call in it, ``(1 - e^(-μF)) / F`` settles/s of ``μF / (1 - e^(-μF))`` rows each (costed
  between the measured settles of 2 and 10 rows); a lease idle for 5 s is released at the next
  flush, so a call after a longer gap takes a new lease on the call path and its lease is released
  later: ``μ · e^(-μ (5 + F/2))`` leases/s and as many releases; a lease in steady use is replaced every
  ``LEASE_CALLS / 2`` calls (prefetched at half of a 20-call lease) and the old one released.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

#: What the whole metered path costs a replica per call at one hot account (docs/performance.md:
#: ``python -m bench.metered``, metered API key, 64 connections, replica CPU µs/req): slices and
#: leases then serve thousands of calls each, so their cost per call is in the figures below instead.
REPLICA_CALL_US = 251.0
SLICE_GIVE_BACK_S = 0.3  # 0.25 s idle, seen by the next 0.1 s tick
LEASE_IDLE_S = 5.0  # Meter.idle_release_s
LEASE_CALLS = 20  # Meter: a lease is 20 calls' worth at least (2 s of the account's spending above 10/s)


@dataclass(frozen=True)
class Costs:
    """CPU µs per operation, measured (``python -m bench.capacity``): the server's and the caller's."""

    exchange_us: float  # the shard actor's, per exchange
    exchange_caller_us: float  # the replica's, per exchange
    lease_us: float  # PostgreSQL's, per lease grant
    lease_caller_us: float
    settle_us: float  # PostgreSQL's, per settle of 2 usage rows
    settle_caller_us: float
    settle10_us: float  # PostgreSQL's, per settle of 10 usage rows
    settle10_caller_us: float
    release_us: float  # PostgreSQL's, per settle releasing a lease
    release_caller_us: float
    claim_us: float  # Redis's, per nonce claim
    lookup_us: float  # Redis's, per session token lookup


@dataclass(frozen=True)
class Workload:
    rps: float = 100_000
    accounts: int = 50_000
    signed_share: float = 0.10  # requests signed per request (each claims a nonce); an assumption
    session_share: float = 0.10  # requests with a session token (each a GETEX); an assumption
    cached_share: float = 0.0  # answered from the response cache, never reaching a node
    node_rps: float = 5_000  # what one upstream node serves: an assumption, not measured here
    flush_s: float = 1.0  # credit_flush_interval_s
    affinity: bool = False  # the balancer keeps each account on one replica
    utilisation: float = 0.7  # the share of a core each process is run at

    @property
    def per_account(self) -> float:
        return self.rps / self.accounts


@dataclass(frozen=True)
class Plan:
    replicas: int
    per_pair: float  # calls/s of one account on one replica
    exchanges_per_call: float
    exchanges: float  # per second
    shards: int
    leases: float
    settles: float
    rows_per_settle: float
    releases: float
    postgres_us: float  # PostgreSQL CPU per request
    postgres_cores: float
    claims: float
    lookups: float
    redis_cores: float
    upstream_rps: float
    nodes: int
    replica_call_us: float


def exchanges_per_call(per_pair: float) -> float:
    return 2 * math.exp(-per_pair * SLICE_GIVE_BACK_S)


def rows_per_settle(per_pair: float, flush_s: float) -> float:
    """Calls in a flush interval that has at least one (a settle is sent only then)."""
    expected = per_pair * flush_s
    return expected / -math.expm1(-expected) if expected > 0 else 1.0


def settle_cost(two: float, ten: float, rows: float) -> float:
    """A settle's cost at ``rows`` usage rows: linear between the two measured (2 and 10 rows)."""
    return max(0.0, two + (ten - two) * (rows - 2) / 8)


def ledger_rates(per_pair: float, pairs: float, flush_s: float) -> tuple[float, float, float]:
    """(lease grants, settles of usage, releases) a second over ``pairs`` account-replica pairs."""
    after_idle = per_pair * math.exp(-per_pair * (LEASE_IDLE_S + flush_s / 2))
    replaced = max(0.0, per_pair - after_idle) / (LEASE_CALLS / 2)
    leases = pairs * (after_idle + replaced)
    settles = pairs * (1 - math.exp(-per_pair * flush_s)) / flush_s
    return leases, settles, leases


def plan_for(w: Workload, c: Costs, replicas: int) -> Plan:
    """The plan if the ingress runs ``replicas`` replicas (which sets how thinly accounts are spread)."""
    spread = 1 if w.affinity else replicas
    per_pair, pairs = w.per_account / spread, w.accounts * spread
    per_call = exchanges_per_call(per_pair)
    exchanges = w.rps * per_call
    leases, settles, releases = ledger_rates(per_pair, pairs, w.flush_s)
    rows = rows_per_settle(per_pair, w.flush_s)
    settle_us = settle_cost(c.settle_us, c.settle10_us, rows)
    settle_caller_us = settle_cost(c.settle_caller_us, c.settle10_caller_us, rows)
    ledger_caller_us = (
        leases * c.lease_caller_us + settles * settle_caller_us + releases * c.release_caller_us
    ) / w.rps
    call_us = REPLICA_CALL_US + per_call * c.exchange_caller_us + ledger_caller_us
    postgres_us = (leases * c.lease_us + settles * settle_us + releases * c.release_us) / w.rps
    claims, lookups = w.rps * w.signed_share, w.rps * w.session_share
    upstream = w.rps * (1 - w.cached_share)
    return Plan(
        replicas=math.ceil(w.rps * call_us / 1e6 / w.utilisation),
        per_pair=per_pair,
        exchanges_per_call=per_call,
        exchanges=exchanges,
        shards=math.ceil(exchanges * c.exchange_us / 1e6 / w.utilisation),
        leases=leases,
        settles=settles,
        rows_per_settle=rows,
        releases=releases,
        postgres_us=postgres_us,
        postgres_cores=w.rps * postgres_us / 1e6 / w.utilisation,
        claims=claims,
        lookups=lookups,
        redis_cores=(claims * c.claim_us + lookups * c.lookup_us) / 1e6 / w.utilisation,
        upstream_rps=upstream,
        nodes=math.ceil(upstream / w.node_rps),
        replica_call_us=call_us,
    )


def plan(w: Workload, c: Costs) -> Plan:
    """The plan whose replica count is the one it needs: more replicas spread each account thinner,
    which costs each call more, so the count is found by iterating to a fixed point."""
    replicas = math.ceil(w.rps * REPLICA_CALL_US / 1e6 / w.utilisation)
    for _ in range(50):
        p = plan_for(w, c, replicas)
        if p.replicas == replicas:
            return p
        replicas = p.replicas
    return p


def per_unit(w: Workload, c: Costs) -> list[tuple[str, float]]:
    """Requests/s of this workload one unit of each component carries when it is fully busy (a core
    of a replica, of a shard actor, of PostgreSQL; one single-threaded Redis; one node), fewest first."""
    p = plan(w, c)
    redis_us = w.signed_share * c.claim_us + w.session_share * c.lookup_us
    out = [
        ("ingress replica (a core)", 1e6 / p.replica_call_us),
        ("account-shard actor (a core)", 1e6 / (c.exchange_us * p.exchanges_per_call)),
        ("PostgreSQL (a core)", 1e6 / p.postgres_us),
        ("Redis (one instance: one thread)", 1e6 / redis_us if redis_us else math.inf),
        ("upstream node (assumed)", w.node_rps / (1 - w.cached_share) if w.cached_share < 1 else math.inf),
    ]
    return sorted(out, key=lambda item: item[1])


def variants(w: Workload) -> list[tuple[str, Workload]]:
    """The workload as measured against the levers docs/scaling.md discusses."""
    return [
        ("as built (leastconn, 1 s flush)", w),
        ("5 s flush", replace(w, flush_s=5.0)),
        ("account affinity at the balancer", replace(w, affinity=True)),
        ("affinity and 5 s flush", replace(w, affinity=True, flush_s=5.0)),
    ]


def report(w: Workload, c: Costs) -> str:
    lines = [
        f"Model: {w.rps:,.0f} requests/s over {w.accounts:,} active accounts ({w.per_account:g}/s each), "
        f"{w.signed_share:.0%} signed, {w.session_share:.0%} session tokens, processes at "
        f"{w.utilisation:.0%} of a core, nodes at {w.node_rps:,.0f} requests/s (assumed)",
        "",
        "| variant | replicas | calls/s per account·replica | exchanges/call | shard actors | leases/s | "
        "settles/s (rows each) | releases/s | PostgreSQL cores | Redis cores | replica µs/call |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, variant in variants(w):
        p = plan(variant, c)
        lines.append(
            f"| {name} | {p.replicas} | {p.per_pair:.3f} | {p.exchanges_per_call:.2f} | {p.shards} | "
            f"{p.leases:,.0f} | {p.settles:,.0f} ({p.rows_per_settle:.1f}) | {p.releases:,.0f} | "
            f"{p.postgres_cores:.1f} | {p.redis_cores:.2f} | {p.replica_call_us:,.0f} |"
        )
    p = plan(w, c)
    lines += ["", f"Upstream: {p.upstream_rps:,.0f} requests/s to the nodes: {p.nodes} nodes at the assumed rate."]
    for name, variant in (variants(w)[0], variants(w)[-1]):
        lines += ["", f"Requests/s one unit carries, {name} (fewest first):"]
        lines += [f"  {unit}: {carried:,.0f}" for unit, carried in per_unit(variant, c)]
    return "\n".join(lines)
