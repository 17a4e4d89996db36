"""Operator commands: ``gateway account ...``, ``gateway audit``, ``gateway webhooks ...``, ``gateway sends ...``.

They talk to the running stack's PostgreSQL (:mod:`gateway.cli.stores`) through
:mod:`gateway.storage.operator` and the webhook store. Every change is written with the operator's name
(``--operator``, default ``$USER``) and a reason: a change of credits as a ledger entry, the others as an
``operator_actions`` row. A refusal prints why and exits 1; nothing is written then.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar

import asyncpg
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from gateway.app.settings import Settings, load_settings
from gateway.base.config import ConfigError
from gateway.cli.stores import StoreNotFound, announce_limits, announce_status, default_operator, pool
from gateway.storage import operator as ops
from gateway.storage.errors import StoreUnavailable
from gateway.storage.stream_limits import StreamOverrides

T = TypeVar("T")

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

ConfigOption = Annotated[Path | None, typer.Option("--config", "-c", help="TOML settings file (also: GATEWAY_CONFIG).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for machines instead of tables.")]
PubkeyArg = Annotated[str, typer.Argument(help="The account's public key (base58).")]
CreditsArg = Annotated[str, typer.Argument(help="Whole credits, a positive integer.")]
ReasonOption = Annotated[str, typer.Option("--reason", help="Why (kept with the change).")]
OperatorOption = Annotated[str | None, typer.Option("--operator", help="Who makes the change (default: $USER).")]
#: Commands whose amount may be typed negative: refused with a message of ours, not click's "no such option".
AMOUNT = {"ignore_unknown_options": True}

account_app = typer.Typer(no_args_is_help=True, help="Look at and correct one account.")
webhooks_app = typer.Typer(no_args_is_help=True, help="Webhook deliveries: dead jobs and their replay.")
sends_app = typer.Typer(no_args_is_help=True, help="sendAndConfirm holds.")


def register(app: typer.Typer) -> None:
    app.add_typer(account_app, name="account")
    app.add_typer(webhooks_app, name="webhooks")
    app.add_typer(sends_app, name="sends")
    app.command()(audit)


def load(config: Path | None) -> Settings:
    try:
        return load_settings(config)
    except ConfigError as exc:
        err.print(f"[red]{escape(str(exc))}[/red]")
        raise typer.Exit(2) from exc


def fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f"[red]{escape(message)}[/red]")
    return typer.Exit(code)


def run_db(settings: Settings, work: Callable[[asyncpg.Pool], Awaitable[T]]) -> T:
    """Run ``work`` on a pool of the stack's PostgreSQL; a refusal or an unreachable store exits 1."""

    async def go() -> T:
        async with pool(settings) as p:
            return await work(p)

    try:
        return _run(go())
    except ops.OperatorRefusal as exc:
        raise fail(f"refused: {exc}") from exc
    except StoreNotFound as exc:
        raise fail(str(exc)) from exc
    except (OSError, StoreUnavailable, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError) as exc:
        raise fail(f"PostgreSQL: {type(exc).__name__}: {exc}") from exc


def _run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def who(operator: str | None) -> str:
    return operator if operator is not None else default_operator()


def whole_credits(text: str) -> int:
    """A positive integer of credits, else exit 1 saying so."""
    value = text.strip()
    if not re.fullmatch(r"[0-9]+", value) or int(value) <= 0:
        raise fail(f"refused: credits must be a positive whole number (integer credits only), not {text!r}")
    return int(value)


def _json(value: Any) -> str:
    def plain(v: Any) -> Any:
        if isinstance(v, datetime):
            return v.astimezone(UTC).isoformat().replace("+00:00", "Z")
        return str(v)

    return json.dumps(value, default=plain, indent=2)


def _when(value: datetime | None) -> str:
    return "" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 172800:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


# -- account -----------------------------------------------------------------------------------------


@account_app.command("show")
def account_show(
    pubkey: PubkeyArg,
    entries: Annotated[int, typer.Option(help="Recent ledger entries and operator actions shown.")] = 20,
    json_out: JsonOption = False,
    config: ConfigOption = None,
) -> None:
    """Balance, batches with expiry, leases, holds, recent ledger entries, limits, suspended or not."""
    settings = load(config)
    view = run_db(settings, lambda p: ops.account_view(p, pubkey, entries))
    if view is None:
        raise fail(f"no account {pubkey}")
    if json_out:
        data = {k: getattr(view, k) for k in view.__dataclass_fields__} | {"available": view.available}
        data["limits"] = _limits(settings, _overrides_of(view))
        data["streams"] = view.streams.as_dict()
        print(_json(data))
        return
    status = "[red]SUSPENDED[/red]" if view.status == ops.SUSPENDED else "[green]active[/green]"
    out.print(f"[bold]{view.pubkey}[/bold]  {status}  created {_when(view.created_at)}")
    out.print(
        f"balance {view.balance}  held {view.held}  available {view.available}  "
        f"consumed {view.total_consumed}  low-balance notice {'sent' if view.low_balance_notified else 'armed'}"
    )
    out.print(f"limits  {_limits_line(_limits(settings, _overrides_of(view)))}")
    _table("credit batches", ["id", "source", "granted", "remaining", "expires", ""], view.batches, _batch_row)
    _table(
        "live leases (unsettled)",
        ["id", "replica", "granted", "used", "unsettled", "expires"],
        view.leases,
        lambda r: [r["id"], r["replica_id"], r["granted"], r["used"], r["unsettled"], _when(r["expires_at"])],
    )
    _table(
        "pending send holds",
        ["signature", "held", "age"],
        view.sends,
        lambda r: [r["signature"], r["held"], _age(r["age_s"])],
    )
    _table(
        "recent ledger entries",
        ["id", "when", "type", "amount", "balance", "description", "ref"],
        view.ledger,
        lambda r: [
            r["id"],
            _when(r["created_at"]),
            r["type"],
            r["amount"],
            r["balance_after"],
            r["description"],
            r["ref"] or "",
        ],
    )
    _table(
        "operator actions",
        ["id", "when", "action", "operator", "reason", "detail"],
        view.actions,
        lambda r: [r["id"], _when(r["created_at"]), r["action"], r["operator"], r["reason"], r["detail"]],
    )


def _batch_row(r: dict[str, Any]) -> list[Any]:
    return [
        r["id"],
        r["source"],
        r["granted"],
        r["remaining"],
        _when(r["expires_at"]),
        "expired (next expiry pass)" if r["expired"] else "",
    ]


def _table(
    title: str, columns: list[str], rows: list[dict[str, Any]], cells: Callable[[dict[str, Any]], list[Any]]
) -> None:
    if not rows:
        out.print(f"{title}: none")
        return
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(escape(str(c)) for c in cells(row)))
    out.print(table)


#: Each limit ``gateway account limits`` shows and sets: (its name in the output, the settings' field).
LIMITS = {
    "rate_limit_rps": "rate_limit_rps",
    "concurrency_limit": "concurrency_limit",
    "grpc_max_streams": "grpc_max_streams_per_account",
    "grpc_max_opens_per_minute": "grpc_max_stream_opens_per_minute",
    "grpc_max_streams_per_address": "grpc_max_streams_per_address",
}
OPTIONS = {  # the option that sets each
    "rate_limit_rps": "--rate",
    "concurrency_limit": "--concurrency",
    "grpc_max_streams": "--streams",
    "grpc_max_opens_per_minute": "--stream-opens",
    "grpc_max_streams_per_address": "--address-streams",
}
_SOURCES = {  # the JSON's "<x>_source" keys (rate_source, concurrency_source kept as they were)
    "rate_limit_rps": "rate_source",
    "concurrency_limit": "concurrency_source",
    "grpc_max_streams": "grpc_max_streams_source",
    "grpc_max_opens_per_minute": "grpc_max_opens_per_minute_source",
    "grpc_max_streams_per_address": "grpc_max_streams_per_address_source",
}


def _overrides_of(view: ops.AccountView) -> ops.Overrides:
    return ops.Overrides(view.rate_limit_rps, view.concurrency_limit, view.streams)


def _limits(settings: Settings, overrides: ops.Overrides) -> dict[str, Any]:
    """Each limit in force (the override, else the settings' default) and which it is."""
    shown: dict[str, Any] = {}
    for name, value in overrides.as_dict().items():
        shown[name] = value if value is not None else getattr(settings, LIMITS[name])
        shown[_SOURCES[name]] = "override" if value is not None else "default"
    return shown


def _limits_line(limits: dict[str, Any]) -> str:
    def one(name: str) -> str:
        return f"{limits[name]} ({limits[_SOURCES[name]]})"

    return (
        f"rate {one('rate_limit_rps').replace(' (', ' req/s (', 1)}, concurrency {one('concurrency_limit')}; "
        f"gRPC streams {one('grpc_max_streams')} open, {one('grpc_max_opens_per_minute')} opens a minute, "
        f"{one('grpc_max_streams_per_address')} from one address"
    )


@account_app.command("credit", context_settings=AMOUNT)
def account_credit(
    pubkey: PubkeyArg,
    credits: CreditsArg,
    reason: ReasonOption,
    expires_days: Annotated[
        int | None, typer.Option("--expires-days", help="The batch's lifetime (default: credit_expiry_seconds).")
    ] = None,
    operator: OperatorOption = None,
    config: ConfigOption = None,
) -> None:
    """Grant new credits: a batch of their own and an `adjustment` ledger entry."""
    settings = load(config)
    amount = whole_credits(credits)
    if expires_days is not None and expires_days <= 0:
        raise fail(f"refused: --expires-days must be at least 1, not {expires_days}")
    expires_s = settings.credit_expiry_seconds if expires_days is None else expires_days * 86_400
    change = run_db(settings, lambda p: ops.credit_account(p, pubkey, amount, reason, who(operator), expires_s))
    out.print(f"credited {amount} credits to {pubkey}: balance {change.balance} (action {change.action_id})")


@account_app.command("debit", context_settings=AMOUNT)
def account_debit(
    pubkey: PubkeyArg,
    credits: CreditsArg,
    reason: ReasonOption,
    operator: OperatorOption = None,
    config: ConfigOption = None,
) -> None:
    """Take credits the account can spend (balance less holds): a `debit` ledger entry."""
    settings = load(config)
    amount = whole_credits(credits)
    change = run_db(settings, lambda p: ops.debit_account(p, pubkey, amount, reason, who(operator)))
    out.print(f"debited {amount} credits from {pubkey}: balance {change.balance} (action {change.action_id})")


@account_app.command("suspend")
def account_suspend(
    pubkey: PubkeyArg, reason: ReasonOption, operator: OperatorOption = None, config: ConfigOption = None
) -> None:
    """Suspend the account: its calls are refused 403 ACCOUNT_SUSPENDED and its open connections end (1008)."""
    _set_status(pubkey, ops.SUSPENDED, reason, operator, config)


@account_app.command("resume")
def account_resume(
    pubkey: PubkeyArg, reason: ReasonOption, operator: OperatorOption = None, config: ConfigOption = None
) -> None:
    """Make a suspended account active again."""
    _set_status(pubkey, ops.ACTIVE, reason, operator, config)


def _set_status(pubkey: str, status: str, reason: str, operator: str | None, config: Path | None) -> None:
    settings = load(config)
    changed = run_db(settings, lambda p: ops.set_status(p, pubkey, status, reason, who(operator)))
    out.print(f"{pubkey} is {status}" + ("" if changed else " already (nothing written)"))
    try:  # told again even when unchanged: a replica that missed it hears it now
        _run(announce_status(settings, pubkey, status == ops.SUSPENDED))
    except (OSError, StoreNotFound, StoreUnavailable, TimeoutError) as exc:
        err.print(f"[yellow]could not tell the replicas at once ({escape(str(exc))}); they see it within 30 s[/yellow]")


@account_app.command("limits")
def account_limits(
    pubkey: PubkeyArg,
    rate: Annotated[int | None, typer.Option("--rate", help="Requests per second (override).")] = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", help="Calls in flight (override).")] = None,
    streams: Annotated[
        int | None, typer.Option("--streams", help="gRPC Subscribe streams open at once over the service (override).")
    ] = None,
    stream_opens: Annotated[
        int | None, typer.Option("--stream-opens", help="gRPC Subscribe streams opened a minute (override).")
    ] = None,
    address_streams: Annotated[
        int | None,
        typer.Option(
            "--address-streams",
            help="gRPC streams open from one client address, for this account's streams (override).",
        ),
    ] = None,
    reset: Annotated[bool, typer.Option("--reset", help="Back to the settings' defaults.")] = False,
    reason: Annotated[str | None, typer.Option("--reason", help="Why (required for a change).")] = None,
    operator: OperatorOption = None,
    json_out: JsonOption = False,
    config: ConfigOption = None,
) -> None:
    """Show the account's limits, or set its overrides (--rate, --concurrency; the gRPC stream's --streams,
    --stream-opens, --address-streams) or drop them all (--reset). A change of rate or concurrency, tighter or
    looser, reaches every replica at once: each gives back its leases of the account and reads the new limits
    with the next one (without Redis: at its next lease, within lease_ttl_s). The stream limits are read at
    every stream open, on every gRPC server process; streams already open stay open."""
    settings = load(config)
    given = {
        "rate_limit_rps": rate,
        "concurrency_limit": concurrency,
        "grpc_max_streams": streams,
        "grpc_max_opens_per_minute": stream_opens,
        "grpc_max_streams_per_address": address_streams,
    }
    changes = {name: value for name, value in given.items() if value is not None}
    for name, value in changes.items():
        if value <= 0:
            raise fail(f"refused: {OPTIONS[name]} must be a positive integer, not {value}")
    if reset and changes:
        raise fail("refused: --reset or new limits (--rate, --concurrency, --streams, ...), not both", 2)
    if not reset and not changes:
        view = run_db(settings, lambda p: ops.account_view(p, pubkey, 0))
        if view is None:
            raise fail(f"refused: no account {pubkey}")
        limits = _limits(settings, _overrides_of(view))
        if json_out:
            print(json.dumps({"pubkey": pubkey, **limits}, indent=2))
            return
        out.print(_limits_line(limits))
        return
    if reason is None:
        raise fail("refused: a reason is required (--reason)")

    async def change(p: asyncpg.Pool) -> tuple[ops.Overrides, ops.Overrides]:
        wanted = ops.Overrides()
        if not reset:  # an option not given keeps its override
            view = await ops.account_view(p, pubkey, 0)
            if view is None:
                raise ops.OperatorRefusal(f"no account {pubkey}")
            now = _overrides_of(view).as_dict() | changes
            wanted = ops.Overrides(
                now["rate_limit_rps"],
                now["concurrency_limit"],
                StreamOverrides(
                    now["grpc_max_streams"], now["grpc_max_opens_per_minute"], now["grpc_max_streams_per_address"]
                ),
            )
        return await ops.set_limits(p, pubkey, wanted, reason, who(operator))

    before, after = run_db(settings, change)
    shown = _limits(settings, after)
    try:  # the replicas take them at once (their leases of the account given back), tighter or looser
        _run(announce_limits(settings, pubkey))
        when = "every replica applies them at the account's next call, every gRPC server at its next stream open"
    except (OSError, StoreNotFound, StoreUnavailable, TimeoutError) as exc:
        err.print(f"[yellow]could not tell the replicas at once ({escape(str(exc))})[/yellow]")
        when = (
            f"each replica applies them at its next credit lease, within lease_ttl_s = {settings.lease_ttl_s:g} s; "
            "every gRPC server at the account's next stream open"
        )
    if json_out:
        document = {"pubkey": pubkey, **shown, "overrides_before": before.as_dict(), "overrides_after": after.as_dict()}
        print(json.dumps(document, indent=2))
        return
    out.print(f"{pubkey}: {_limits_line(shown)}; overrides were {_overrides(before)}, now {_overrides(after)} ({when})")


def _overrides(overrides: ops.Overrides) -> str:
    """The overrides set: none, else rate and concurrency, and the stream's three when any of them is set."""
    values = overrides.as_dict()
    if all(value is None for value in values.values()):
        return "none"
    named = {name: option.removeprefix("--").replace("-", " ") for name, option in OPTIONS.items()}
    shown = list(values)[: 2 if overrides.streams.none else None]
    return ", ".join(f"{named[k]} {'default' if values[k] is None else values[k]}" for k in shown)


# -- audit -------------------------------------------------------------------------------------------


def audit(json_out: JsonOption = False, config: ConfigOption = None) -> None:
    """The conservation check over every account, and that the ledger and the operators' actions are append-only
    (their triggers in place); exit 1 on any mismatch or missing trigger."""
    settings = load(config)

    async def check(p: asyncpg.Pool) -> tuple[int, list[dict[str, Any]], list[str]]:
        gaps = await ops.history_guard_gaps(p)  # ledger_entries and operator_actions are append-only
        total = await ops.account_count(p)
        bad: list[dict[str, Any]] = []
        seen = 0
        columns = (TextColumn("auditing"), BarColumn(), MofNCompleteColumn())
        with Progress(*columns, console=err, transient=True, disable=json_out) as progress:
            task = progress.add_task("accounts", total=total)
            async for pubkey, c in ops.audit_accounts(p):
                seen += 1
                progress.advance(task)
                if not c.ok:
                    bad.append({"pubkey": pubkey, **{k: getattr(c, k) for k in c.__dataclass_fields__}})
        return seen, bad, gaps

    seen, bad, gaps = run_db(settings, check)
    if json_out:
        print(_json({"accounts": seen, "mismatches": bad, "append_only_gaps": gaps, "ok": not bad and not gaps}))
    elif not bad:
        out.print(f"[green]conservation holds[/green] for all {seen} accounts")
    else:
        cols = [
            "pubkey",
            "granted",
            "consumed",
            "expired",
            "balance",
            "ledger_sum",
            "batch_remaining",
            "total_consumed",
        ]
        table = Table(title=f"{len(bad)} of {seen} accounts do not balance", title_justify="left")
        for c in cols:
            table.add_column(c)
        for row in bad:
            table.add_row(*(str(row[c]) for c in cols))
        out.print(table)
        out.print(
            "granted = consumed + expired + balance; balance = ledger sum = batch remainders; consumed = total_consumed"
        )
    if not json_out:
        for gap in gaps:
            out.print(f"[red]not append-only:[/red] {escape(gap)}")
        if not gaps:
            out.print("[green]append-only[/green]: ledger_entries and operator_actions refuse UPDATE and DELETE")
    if bad or gaps:
        raise typer.Exit(1)


# -- webhooks and sends ------------------------------------------------------------------------------


@webhooks_app.command("dead")
def webhooks_dead(
    account: Annotated[str | None, typer.Option("--account", help="Only this account's.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many, newest first.")] = 100,
    json_out: JsonOption = False,
    config: ConfigOption = None,
) -> None:
    """Dead delivery jobs (every attempt failed) of webhooks not deleted."""
    from gateway.webhooks.store import subscriptions as webhooks

    settings = load(config)
    rows = run_db(settings, lambda p: webhooks.dead_jobs(p, account, limit))
    if json_out:
        print(_json(rows))
        return
    _table(
        "dead delivery jobs",
        ["job", "webhook", "account", "event", "attempts", "last", "charged", "created", "url"],
        rows,
        lambda r: [
            r["id"],
            f"{r['webhook_id']} ({r['webhook_status']})",
            r["pubkey"],
            r["event_type"],
            r["attempts"],
            f"{r['last_status'] or ''} {r['last_error'] or ''}".strip(),
            r["charged"],
            _when(r["created_at"]),
            r["url"],
        ],
    )


@webhooks_app.command("replay")
def webhooks_replay(
    job_id: Annotated[int, typer.Argument(help="The dead job's id (gateway webhooks dead).")],
    reason: ReasonOption,
    operator: OperatorOption = None,
    config: ConfigOption = None,
) -> None:
    """Put one dead job back to pending, as POST /webhooks/{id}/replay does for a webhook's dead jobs."""
    from gateway.webhooks.store import subscriptions as webhooks

    settings = load(config)
    done = run_db(settings, lambda p: webhooks.replay_dead_job(p, job_id, reason, who(operator)))
    if done["price"] > 0 and done["charged"] == 0:
        charge = f"it will be charged {done['price']} credits again before its first attempt (its charge was refunded)"
    elif done["charged"] > 0:
        charge = "its charge was kept (an attempt reached the receiver): not charged again"
    else:
        charge = "a free delivery"
    paused = (
        " (the webhook is paused: it goes out once its owner resumes it)" if done["webhook_status"] == "paused" else ""
    )
    out.print(f"job {job_id} of webhook {done['webhook_id']} is pending again{paused}; {charge}")


@sends_app.command("pending")
def sends_pending(
    limit: Annotated[int, typer.Option(help="At most this many, oldest first.")] = 200,
    json_out: JsonOption = False,
    config: ConfigOption = None,
) -> None:
    """sendAndConfirm holds not settled yet, oldest first, with their age."""
    settings = load(config)
    rows = run_db(settings, lambda p: ops.pending_sends(p, limit))
    if json_out:
        print(_json(rows))
        return
    _table(
        "pending send holds",
        ["signature", "account", "held", "age", "retries", "created"],
        rows,
        lambda r: [r["signature"], r["pubkey"], r["held"], _age(r["age_s"]), r["retry_count"], _when(r["created_at"])],
    )
