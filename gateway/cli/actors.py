"""``gateway actors stop``: end every named actor of the service (actors/service.py) on its Ray cluster.

``gateway up``'s stop does it itself. An app deployed otherwise (``serve deploy``, ``serve run``, KubeRay)
leaves them running on ``serve shutdown``, on purpose: they are detached, so a redeploy finds them with their
state (gateway/runtime/service_deployment.py). This ends them, each asked to shut down first.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from gateway.cli.ops import ConfigOption, load
from gateway.cli.status import cluster_address

actors_app = typer.Typer(no_args_is_help=True, help="The service's named actors on its Ray cluster.")
err = Console(stderr=True, soft_wrap=True)


@actors_app.command("stop")
def stop(
    config: ConfigOption = None,
    ray_timeout: Annotated[float, typer.Option(help="Seconds to give the Ray cluster.")] = 60.0,
) -> None:
    """End every actor of the service (after `serve shutdown`, or to restart them with new settings)."""
    from gateway.runtime.inspect import stop_service_actors

    settings = load(config)
    address = cluster_address(settings)
    if address is None:
        err.print("[red]no Ray cluster: set RAY_ADDRESS (or run it where `gateway up` records its cluster)[/red]")
        raise typer.Exit(2)
    with err.status(f"joining {address} and stopping the actors…"):
        stopped = stop_service_actors(address, ray_timeout)
    err.print(f"stopped {len(stopped)} actor(s): {', '.join(stopped) or 'none running'}")


def register(app: typer.Typer) -> None:
    app.add_typer(actors_app, name="actors")
