"""``gateway upstreams ...``: the pool of nodes while the gateway runs (docs/operations.md, The pool of nodes).

``list`` shows every node by name (never its URLs) with what the ``upstream-health`` actor knows of it;
``add``, ``remove``, ``restore``, ``cordon`` and ``uncordon`` change the pool in PostgreSQL
(:mod:`gateway.upstreams.store`), each with an ``operator_actions`` row; the actor reads the change within
half a second and every replica follows at its next report (a quarter of a second). A node added is
probed first: one of another cluster (its genesis hash) is refused, named. Its secrets are named on the
command line by reference (``env:NAME``, ``file:/PATH``), never given there: ``ps`` shows a command line
and a shell keeps it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import asyncpg
import typer
from rich.markup import escape
from rich.table import Table

from gateway.app.settings import Settings
from gateway.cli.ops import ConfigOption, JsonOption, OperatorOption, ReasonOption, fail, load, out, run_db, who
from gateway.core.upstreams import Role, Tier, UpstreamNode, may_hold_key
from gateway.node.health import HealthSettings, cluster_of
from gateway.runtime.devnode_proc import recorded_followers
from gateway.runtime.inspect import ray_report, recorded_ray_address
from gateway.storage.operator import OperatorRefusal
from gateway.upstreams import store
from gateway.upstreams.health_actor import UPSTREAM_HEALTH

upstreams_app = typer.Typer(no_args_is_help=True, help="The pool of nodes: list, add, remove, cordon, uncordon.")
NameArg = Annotated[str, typer.Argument(help="The node's name in the pool.")]


def register(app: typer.Typer) -> None:
    app.add_typer(upstreams_app, name="upstreams")


@upstreams_app.command("list")
def list_nodes(config: ConfigOption = None, json_out: JsonOption = False) -> None:
    """Every node of the pool (tier, roles, slot, lag, error rate, p50/p99, state and why), from the running
    gateway's upstream-health actor; the pool as configured when the cluster does not answer."""
    settings = load(config)
    live = _live(settings)
    nodes: list[dict[str, Any]]
    if live is None:
        changes = run_db(settings, store.read_changes)
        nodes = [
            {"name": n.name, "tier": n.tier.value, "roles": [r.value for r in n.roles],
             "state": "cordoned" if n.name in changes.cordoned else "unknown (the gateway does not answer)"}
            for n in changes.apply(configured(settings))
        ]  # fmt: skip
    else:
        nodes = live
    if json_out:
        print(json.dumps({"nodes": nodes}, indent=2))
        return
    table = Table(title="upstream nodes", title_justify="left")
    for column in ("name", "tier", "roles", "state", "slot", "lag", "errors", "p50 / p99 ms", "why"):
        table.add_column(column)
    for n in nodes:
        rate = n.get("error_rate")
        table.add_row(
            escape(str(n["name"])),
            str(n["tier"]),
            ",".join(n["roles"]),
            str(n["state"]),
            str(n.get("slot") or "-"),
            str(n.get("lag") if n.get("lag") is not None else "-"),
            "-" if rate is None else f"{rate:.1%} of {n.get('calls', 0)}",
            f"{n.get('p50_ms') or '-'} / {n.get('p99_ms') or '-'}",
            escape(str(n.get("reason") or "")),
        )
    out.print(table)


def _live(settings: Settings) -> list[dict[str, Any]] | None:
    address = recorded_ray_address(settings.resolved_home)
    if address is None:
        return None
    try:
        report = ray_report(address, [UPSTREAM_HEALTH], 15.0)
    except Exception:
        return None
    nodes = report["actors"].get(UPSTREAM_HEALTH, {}).get("status", {}).get("nodes")
    return list(nodes) if isinstance(nodes, list) else None


HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
#: How a secret is named on the command line: never itself (``ps`` shows a command line, a shell keeps it).
REFERENCE_HELP = "env:NAME (an environment variable) or file:/PATH (a file), read where the node is used"


@upstreams_app.command()
def add(
    name: NameArg,
    rpc_url: Annotated[
        str,
        typer.Option(
            help=f"Its JSON-RPC URL: http(s)://host[:port] when nothing in it is secret, else {REFERENCE_HELP}."
        ),
    ],
    reason: ReasonOption,
    ws_url: Annotated[
        str | None, typer.Option(help="Its PubSub URL (ws:// or wss://), or a reference as --rpc-url.")
    ] = None,
    grpc_url: Annotated[str | None, typer.Option(help="Its Yellowstone geyser endpoint, or a reference.")] = None,
    grpc_token: Annotated[
        str | None, typer.Option(help=f"The x-token of its geyser endpoint: {REFERENCE_HELP}.")
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option(help="A header sent with every request, NAME=env:VARIABLE or NAME=file:/PATH (repeat)."),
    ] = None,
    tier: Annotated[
        Tier, typer.Option(help="primary, or fallback (serves only while no primary does).")
    ] = Tier.PRIMARY,
    role: Annotated[
        list[Role] | None, typer.Option(help="A role it serves (repeat); default: all its URLs allow.")
    ] = None,
    operator: OperatorOption = None,
    config: ConfigOption = None,
) -> None:
    """Add a node to the running pool; it serves once its probes are good (and it is of the pool's cluster).
    Its secrets (a URL holding a key, the headers, the x-token) are given by reference, never as values: the
    pool's owner reads them from its own environment or file, and upstream_changes holds only the names."""
    settings = load(config)
    entry: dict[str, Any] = {"name": name, "tier": tier, "roles": tuple(role or ())}
    try:
        for field, text in (("rpc_url", rpc_url), ("ws_url", ws_url), ("grpc_url", grpc_url)):
            if text is not None:
                entry[field] = _url_or_reference(field, text)
        if grpc_token is not None:
            entry["grpc_token"] = _reference(grpc_token, "--grpc-token")
        headers: dict[str, Any] = {}
        for text in header or []:
            key, sep, value = text.partition("=")
            if not sep or not HEADER_NAME.fullmatch(key.strip()):
                raise ValueError(
                    "a header is NAME=env:VARIABLE or NAME=file:/PATH (its value is never on a command line)"
                )
            headers[key.strip()] = _reference(value.strip(), f"--header {key.strip()}")
        entry["headers"] = headers
        node = UpstreamNode.model_validate(entry)
    except ValueError as exc:
        raise fail(f"refused: {_first_error(exc)}") from None

    async def work(pool: asyncpg.Pool) -> None:
        async with pool.acquire() as conn:
            changes = await store.read_changes(conn)
            current = changes.apply(configured(settings))
            foreign = await cluster_of([*current, node], HealthSettings.from_settings(settings))
            if node.name in foreign:
                raise OperatorRefusal(foreign[node.name])
            await store.add(conn, node, configured(settings), reason, who(operator))

    run_db(settings, work)
    out.print(f"added {escape(node.name)} ({node.tier.value}; {', '.join(r.value for r in node.roles)})")


def _reference(text: str, what: str) -> dict[str, str]:
    """``env:NAME`` or ``file:/PATH`` as a node entry's reference; ValueError (never repeating ``text``,
    which may be the secret itself) for anything else."""
    kind, sep, where = text.partition(":")
    if sep and kind in ("env", "file") and where:
        return {kind: os.path.abspath(where) if kind == "file" else where}
    raise ValueError(
        f"{what} takes env:NAME or file:/PATH, never the secret itself (a command line is seen by ps and kept "
        "in shell history)"
    )


def _url_or_reference(field: str, text: str) -> str | dict[str, str]:
    """A URL given on the command line: a reference, or a value with nothing secret in it (no user, path or
    query, where keys go)."""
    if text.startswith(("env:", "file:")):
        return _reference(text, f"--{field.replace('_', '-')}")
    if may_hold_key(text):
        raise ValueError(
            f"--{field.replace('_', '-')}: a URL with a user, path or query may hold a key, and a command line is "
            "seen by ps and kept in shell history: put the URL in an environment variable or a file and give "
            "env:NAME or file:/PATH"
        )
    return text


@upstreams_app.command()
def remove(name: NameArg, reason: ReasonOption, operator: OperatorOption = None, config: ConfigOption = None) -> None:
    """Take a node out of the pool (its calls move to the others within a second)."""
    _change(config, lambda conn, s: store.remove(conn, name, configured(s), reason, who(operator)), f"removed {name}")


@upstreams_app.command()
def restore(name: NameArg, reason: ReasonOption, operator: OperatorOption = None, config: ConfigOption = None) -> None:
    """Bring back a configured node that was removed."""
    _change(config, lambda conn, s: store.restore(conn, name, configured(s), reason, who(operator)), f"restored {name}")


@upstreams_app.command()
def cordon(name: NameArg, reason: ReasonOption, operator: OperatorOption = None, config: ConfigOption = None) -> None:
    """Keep a node in the pool, probed, but serving nothing."""
    _change(config, lambda conn, s: store.cordon(conn, name, configured(s), reason, who(operator)), f"cordoned {name}")


@upstreams_app.command()
def uncordon(name: NameArg, reason: ReasonOption, operator: OperatorOption = None, config: ConfigOption = None) -> None:
    """Let a cordoned node serve again (once its probes are good)."""
    _change(
        config,
        lambda conn, s: store.cordon(conn, name, configured(s), reason, who(operator), on=False),
        f"uncordoned {name}",
    )


Change = Callable[[asyncpg.Connection, Settings], Awaitable[None]]


def _change(config: Path | None, change: Change, done: str) -> None:
    settings = load(config)

    async def work(pool: asyncpg.Pool) -> None:
        async with pool.acquire() as conn:
            await change(conn, settings)

    run_db(settings, work)
    out.print(escape(done))


def configured(settings: Settings) -> list[UpstreamNode]:
    """The pool as started: the settings', or the followers ``gateway up --nodes N`` started (on free ports)."""
    if settings.embedded_chain and settings.devnode_nodes > 1:
        recorded = recorded_followers(settings.resolved_home)
        if recorded is not None:
            return recorded
    return settings.pool_nodes()


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        return "; ".join(str(e.get("msg")) for e in errors())
    return str(exc)
