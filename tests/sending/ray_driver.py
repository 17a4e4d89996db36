"""A Ray driver serving a gateway whose races run in send-racer actors: run by test_racer_actors.py as
``python -m tests.sending.ray_driver '<settings json>'``, in a process of its own (the in-process
devnode breaks Ray in the test process: tests/credits/test_deposit_chain.py says why).

Prints the gateway's URL, then obeys stdin: ``kill`` kills the racer (Ray restarts it), ``done`` stops.
"""

from __future__ import annotations

import asyncio
import json
import sys

import ray
import uvicorn

from actors.cluster import NAMESPACE
from actors.send_racers import ray_racers, start_send_racers, stop_send_racers
from gateway.app.replica import GatewayApp
from gateway.app.settings import Settings
from gateway.runtime.ports import free_port
from gateway.sending.racers import send_racer_names
from gateway.transports.http import build_http_app


async def serve(settings: Settings) -> None:
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            build_http_app(GatewayApp(settings, racers=ray_racers(settings))), port=port, log_level="warning"
        )
    )
    task = asyncio.create_task(server.serve())
    for _ in range(600):
        if server.started:
            break
        await asyncio.sleep(0.05)
    print(f"http://127.0.0.1:{port}", flush=True)
    while (line := (await asyncio.to_thread(sys.stdin.readline)).strip()) != "done":
        if line == "kill":
            ray.kill(ray.get_actor(send_racer_names(1)[0], namespace=NAMESPACE), no_restart=False)
            print("killed", flush=True)
    server.should_exit = True
    await task


def main() -> None:
    settings = Settings.model_validate(json.loads(sys.argv[1]))
    ray.init(namespace=NAMESPACE, include_dashboard=False, _node_ip_address="127.0.0.1", num_cpus=1)
    try:
        start_send_racers(settings.model_dump(mode="json"), settings.send_racers)
        asyncio.run(serve(settings))
    finally:
        stop_send_racers(settings.send_racers)
        ray.shutdown()


if __name__ == "__main__":
    main()
