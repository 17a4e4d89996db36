"""Helpers shared by the test suites: a GatewayApp served by uvicorn in this process."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from gateway.app.replica import GatewayApp
from gateway.app.settings import Settings
from gateway.base.keys import ServiceKeyAddresses, service_key_addresses
from gateway.base.stopping import await_chain
from gateway.limits.settings import DEFAULT_IP_LIMITS
from gateway.pubsub.ws import UVICORN_WS_OPTIONS
from gateway.runtime.ports import free_port
from gateway.transports.http import build_http_app

#: Per-address limits high enough for suites that create many accounts and sessions from 127.0.0.1;
#: the limits themselves are tested with their defaults (tests/limits/test_addresses.py).
TEST_IP_LIMITS = {group: {"rps": 10_000, "burst": 100_000} for group in DEFAULT_IP_LIMITS}


def service_key_settings(home: Path) -> ServiceKeyAddresses:
    """What ``gateway up`` hands every process it starts: the service keys' addresses, their files
    created in ``home`` if missing (the test stands in for gateway up: a serving process never creates one)."""
    return service_key_addresses(home)


@dataclass
class RunningGateway:
    app: GatewayApp
    url: str


@asynccontextmanager
async def serve_gateway(
    settings: Settings, *, wait_ready: bool = True, port: int | None = None, **auth_options: Any
) -> AsyncIterator[RunningGateway]:
    """Serve one GatewayApp on a free loopback port, or ``port`` (no Ray): the same app a Serve replica runs.

    ``auth_options`` go to :class:`gateway.auth.services.AuthServices` (short lifetimes, hooks).
    Returns once the node has answered (with ``wait_ready``) or once the server listens.
    """
    port = free_port() if port is None else port
    gw = GatewayApp(settings, **auth_options)
    config = uvicorn.Config(
        build_http_app(gw),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
        forwarded_allow_ips="",  # as the stack runs it: the gateway decides which forwarded address to believe
        **UVICORN_WS_OPTIONS,  # type: ignore[arg-type]
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not (server.started and (gw.ready or not wait_ready)):
        if task.done():
            task.result()
        await asyncio.sleep(0.02)
    try:
        yield RunningGateway(gw, f"http://127.0.0.1:{port}")
    finally:
        server.should_exit = True
        await stopped(task)
        if gw.stop_troubles:
            troubles = f"steps of the gateway's stop went wrong: {gw.stop_troubles}"
            warnings.warn(troubles, GatewayStopWarning, stacklevel=2)


async def stopped(server: asyncio.Task[None], within_s: float = 60.0) -> None:
    """Wait for a gateway's server task to end. One that has not within ``within_s`` is cancelled and
    reported as a warning with every task's await chain (pytest's warnings summary: a stop that hangs
    once in many runs gets found, and does not hold up the run); one that ignores that too fails."""
    done, _ = await asyncio.wait({server}, timeout=within_s)
    if done:
        server.result()
        return
    stacks = "\n".join(f"{task!r}\n{await_chain(task)}" for task in asyncio.all_tasks())
    server.cancel()
    done, _ = await asyncio.wait({server}, timeout=10.0)
    message = f"the gateway did not stop within {within_s:g} s; its tasks then:\n{stacks}"
    if not done:
        raise AssertionError(message + "\n(and it did not end when cancelled)")
    warnings.warn(message, GatewayStopWarning, stacklevel=2)


class GatewayStopWarning(UserWarning):
    """A gateway's stop overran (:func:`stopped`) or a step of it failed (:mod:`gateway.base.stopping`)."""
