"""``gateway status``: every part of the running stack, its health and its lags; exit 1 when a part is down.

Parts: PostgreSQL, Redis, the node (its slot), Ray (its nodes), Serve (the app's replicas), each named
actor (``ALIVE``; ``RESTARTING`` is shown as a warning, ``DEAD`` or missing is down), and the lags: the
deposit watcher's cursor and the signal classifier's against the node's slot, the webhook queue's depth
and its oldest waiting job, the send holds not settled; and the exposure: every listening socket of the
stack's processes, a warning for one beyond loopback on a local Ray, and the metrics URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any

import asyncpg
import redis.asyncio as aioredis
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gateway.app.settings import Settings
from gateway.cli.ops import ConfigOption, load
from gateway.cli.stores import StoreNotFound, chain_node, database_url, redis_url
from gateway.node.http import HttpUpstream, rpc_call
from gateway.runtime.inspect import RAY_ADDRESS_FILE, UNREAD, ray_report, recorded_ray_address
from gateway.signals.store import SignalLog
from gateway.storage.operator import queue_figures
from gateway.upstreams.health_actor import UPSTREAM_HEALTH

UP, WARN, DOWN = "up", "warn", "down"
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


@dataclass
class Part:
    name: str
    state: str  # up, warn, down
    detail: str
    data: dict[str, Any] = field(default_factory=dict)


def status(
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON for machines instead of a table.")] = False,
    ray_timeout: Annotated[float, typer.Option(help="Seconds to give the Ray cluster.")] = 30.0,
    config: ConfigOption = None,
) -> None:
    """Every part of the running stack (data dir as `gateway up`), its health and lags; exit 1 if one is down."""
    settings = load(config)
    with err.status("PostgreSQL, Redis, the node…", spinner="dots") if not json_out else _nothing():
        parts = asyncio.run(_stores(settings))
    # Ray's driver prints the cluster's events (a node marked dead) on stdout: --json's stdout is the document.
    with (
        err.status("joining the Ray cluster (a few seconds)…") if not json_out else _nothing(),
        contextlib.redirect_stdout(sys.stderr) if json_out else _nothing(),
    ):
        parts += _ray_parts(settings, ray_timeout)
    parts += _lags(settings, parts)
    parts.append(_exposure(settings))
    down = [p.name for p in parts if p.state == DOWN]
    if json_out:
        doc = {"ok": not down, "down": down, "home": str(settings.resolved_home), "parts": [asdict(p) for p in parts]}
        print(json.dumps(doc, indent=2, default=str))
    else:
        table = Table(title=f"gateway status ({settings.resolved_home})", title_justify="left")
        for column in ("part", "state", "detail"):
            table.add_column(column)
        colour = {UP: "green", WARN: "yellow", DOWN: "red"}
        for p in parts:
            table.add_row(escape(p.name), f"[{colour[p.state]}]{p.state}[/]", escape(p.detail))
        out.print(table)
        out.print("[green]all parts up[/green]" if not down else f"[red]down: {', '.join(down)}[/red]")
    if down:
        raise typer.Exit(1)


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


async def _stores(settings: Settings) -> list[Part]:
    return list(await asyncio.gather(_postgres(settings), _redis(settings), _node(settings)))


async def _postgres(settings: Settings) -> Part:
    try:
        conn = await asyncpg.connect(database_url(settings), timeout=5)
    except StoreNotFound as exc:
        return Part("PostgreSQL", DOWN, str(exc))
    except Exception as exc:
        return Part("PostgreSQL", DOWN, f"{type(exc).__name__}: {exc}")
    try:
        version = await conn.fetchval("SHOW server_version")
        figures = await queue_figures(conn)
    finally:
        await conn.close()
    return Part("PostgreSQL", UP, f"server {version}, {figures['accounts']} accounts", figures)


async def _redis(settings: Settings) -> Part:
    try:
        client = aioredis.Redis.from_url(redis_url(settings), socket_timeout=5, socket_connect_timeout=5)
    except StoreNotFound as exc:
        return Part("Redis", DOWN, str(exc))
    try:
        await client.ping()
        cursor = await SignalLog(client).cursor()
        memory = await client.info("memory")
        return Part("Redis", UP, f"used memory {memory.get('used_memory_human', '?')}", {"signal_cursor": cursor})
    except Exception as exc:
        return Part("Redis", DOWN, f"{type(exc).__name__}: {exc}")
    finally:
        await client.aclose()


async def _node(settings: Settings) -> Part:
    """The chain's slot, from the embedded devnode or the pool's first node: named, never its URL (which may
    hold a provider's key)."""
    node = chain_node(settings)
    client = HttpUpstream(node.rpc_url, connections=1, ca_file=settings.upstream_ca_file, headers=node.headers)
    try:
        slot = int(await rpc_call(client, "getSlot", [{"commitment": "confirmed"}], 5.0))
    except Exception as exc:
        return Part("node", DOWN, f"{node.name}: {type(exc).__name__}: {exc}")
    finally:
        await client.close()
    return Part("node", UP, f"{node.name} at slot {slot}", {"slot": slot})


def _upstreams(report: dict[str, Any]) -> list[Part]:
    """Each node of the pool as the upstream-health actor judges it: up in service, warn out of service
    (cordoned, behind, failing...), down when no node serves at all."""
    nodes = report.get(UPSTREAM_HEALTH, {}).get("status", {}).get("nodes") or []
    serving = any(n["state"] == "in service" for n in nodes)
    parts = []
    for n in nodes:
        state = UP if n["state"] == "in service" else WARN if serving else DOWN
        figures = [f"{n['tier']}", ",".join(n["roles"]), n["state"] + (f": {n['reason']}" if n["reason"] else "")]
        if n.get("slot") is not None:
            figures.append(f"slot {n['slot']}, lag {n['lag']}")
        if n.get("error_rate") is not None:
            figures.append(f"errors {n['error_rate']:.1%} of {n['calls']}, p50 {n['p50_ms']} ms, p99 {n['p99_ms']} ms")
        parts.append(Part(f"upstream {n['name']}", state, "; ".join(figures), n))
    return parts


def _actor_names(settings: Settings) -> list[str]:
    from actors.service import service_actor_names  # the actor classes' imports: only when asked

    names = service_actor_names(settings.model_dump(mode="json"))
    grpc_on = settings.grpc_servers > 0 and (settings.embedded_chain or settings.geyser_node() is not None)
    return [n for n in names if grpc_on or not n.startswith("grpc-stream-")]


def cluster_address(settings: Settings) -> str | None:
    """The Ray cluster of the running service: the one ``gateway up`` recorded under the data dir, else
    ``RAY_ADDRESS`` (an app deployed with ``serve deploy`` or KubeRay records none)."""
    recorded = recorded_ray_address(settings.resolved_home)
    if recorded is not None:
        return recorded
    return settings.ray_address if settings.ray_address not in (None, "", "local") else None


def _ray_parts(settings: Settings, timeout_s: float) -> list[Part]:
    address = cluster_address(settings)
    names = _actor_names(settings)
    if address is None:
        why = (
            f"no cluster recorded in {settings.resolved_home / RAY_ADDRESS_FILE} and no RAY_ADDRESS: is `gateway up` "
            "running?"
        )
        return [Part("Ray", DOWN, why), Part("Serve", DOWN, "Ray is down"), Part("actors", DOWN, "Ray is down")]
    try:
        report = ray_report(address, names, timeout_s)
    except Exception as exc:
        why = f"{address}: {type(exc).__name__}: {exc}"
        return [Part("Ray", DOWN, why), Part("Serve", DOWN, "Ray is down"), Part("actors", DOWN, "Ray is down")]
    nodes = report["nodes"]
    alive = [n for n in nodes if n["alive"]]
    parts = [
        Part("Ray", UP if alive else DOWN, f"{address}: {len(alive)} of {len(nodes)} nodes alive", {"nodes": nodes})
    ]
    serve = report["serve"]
    if "error" in serve:
        parts.append(Part("Serve", DOWN, serve["error"], serve))
    else:
        running = sum(d["replicas"].get("RUNNING", 0) for d in serve["deployments"].values())
        replicas = "; ".join(
            f"{name} {d['status']} "
            + ", ".join(f"{k} {v}" for k, v in d["replicas"].items())
            + (" (" + ", ".join(f"{n} on {node}" for node, n in d["nodes"].items()) + ")" if len(nodes) > 1 else "")
            for name, d in serve["deployments"].items()
        )
        ok = serve["status"] == "RUNNING" and running > 0
        parts.append(Part("Serve", UP if ok else DOWN, f"app {serve['status']}: {replicas}", serve))
    parts += _upstreams(report["actors"])
    for name, actor in report["actors"].items():
        if actor["state"] == UNREAD:  # the read was cut short: not known to be down
            parts.append(Part(f"actor {name}", WARN, actor["reason"], actor))
            continue
        state = {"ALIVE": UP, "RESTARTING": WARN}.get(actor["state"], DOWN)
        detail = actor["state"].lower() + (f", {actor['restarts']} restarts" if actor["restarts"] else "")
        if len(nodes) > 1 and actor.get("node"):
            detail += f", on {actor['node']}"
        if "status_error" in actor:
            state, detail = WARN, f"{detail}; status() failed: {actor['status_error']}"
        elif actor.get("status", {}).get("running") is False:
            state, detail = WARN, f"{detail}; its loop is not running"
        parts.append(Part(f"actor {name}", state, detail, actor))
    return parts


def _exposure(settings: Settings) -> Part:
    """What the stack's processes listen on (gateway.runtime.exposure), and the metrics URL. On a local Ray a
    listener beyond loopback is flagged, unless it is the gateway's own port on the GATEWAY_HOST set."""
    from gateway.runtime.exposure import is_loopback, listeners, stack_processes

    found = listeners(stack_processes(settings.resolved_home))
    metrics = f"http://127.0.0.1:{settings.metrics_export_port}/metrics"
    local = not settings.ray_address or settings.ray_address == "local"
    chosen = {settings.port, settings.grpc_port} if not is_loopback(settings.host) else set()
    flagged = [str(item) for item in found if local and not item.loopback and item.port not in chosen]
    data = {
        "listeners": [{"address": i.address, "port": i.port, "pid": i.pid, "process": i.process} for i in found],
        "not_loopback": flagged,
        "metrics": metrics if local else None,
    }
    if not found:
        return Part("exposure", WARN, "no process of this data dir's `gateway up` found listening", data)
    shown = ", ".join(sorted({f"{i.address}:{i.port}" for i in found if not i.loopback})) or "loopback only"
    detail = f"{len(found)} listening sockets: {shown}" + (f"; metrics {metrics}" if local else "")
    if flagged:
        return Part("exposure", WARN, f"{detail}; NOT on loopback: {', '.join(flagged)}", data)
    return Part("exposure", UP, detail, data)


def _lags(settings: Settings, parts: list[Part]) -> list[Part]:
    by_name = {p.name: p for p in parts}
    slot = by_name["node"].data.get("slot")
    db = by_name["PostgreSQL"].data
    lags: list[Part] = []
    if db:
        cursor = db.get("deposit_cursor_slot")
        behind = "" if slot is None or cursor is None else f", {slot - cursor} slots behind the node"
        age = db.get("deposit_cursor_age_s")
        moved = "" if age is None else f", moved {age:.0f} s ago"
        detail = "no deposit seen yet" if cursor is None else f"last deposit at slot {cursor}{behind}{moved}"
        lags.append(Part("lag deposits", UP, detail + " (it moves only at a deposit)", {"cursor_slot": cursor}))
        oldest = db.get("webhook_oldest_s")
        lags.append(
            Part(
                "lag webhooks",
                UP,
                f"{db['webhook_queue']} waiting or in flight"
                + ("" if oldest is None else f", oldest {oldest:.0f} s old")
                + f"; {db['webhook_dead']} dead",
                {k: db[k] for k in ("webhook_queue", "webhook_oldest_s", "webhook_dead")},
            )
        )
        oldest_send = db.get("sends_oldest_s")
        lags.append(
            Part(
                "lag sends",
                UP,
                f"{db['sends_pending']} holds pending ({db['sends_held']} credits)"
                + ("" if oldest_send is None else f", oldest {oldest_send:.0f} s old"),
                {k: db[k] for k in ("sends_pending", "sends_held", "sends_oldest_s")},
            )
        )
    signal_cursor = by_name["Redis"].data.get("signal_cursor")
    if "signal_cursor" in by_name["Redis"].data:
        slots_behind = None if slot is None or signal_cursor is None else slot - int(signal_cursor)
        said = "no slot classified yet" if signal_cursor is None else f"classified up to slot {signal_cursor}"
        if slots_behind is not None:
            said += f", {slots_behind} slots behind the node"
        lags.append(Part("lag signals", UP, said, {"cursor_slot": signal_cursor, "behind": slots_behind}))
    return lags
