"""The replica's app without Ray: the paired ingress's ASGI app (``bench/unmetered.py``: the gateway's
metered ``/`` with ``/unmetered`` in front) on plain uvicorn, as ``bench.forwarder`` runs (b').

    python -m bench.app_uvicorn --port 8897 --settings settings.json [--ray-address ADDRESS]

``--ray-address`` joins the process to that Ray cluster first, as a driver (``app-uvicorn-ray``): Ray's core
worker in the process, with none of Serve's code on the request path. Between it and ``app-uvicorn`` is what
being a Ray process costs the same app; between it and the replica at its own port, Serve's request path.

``bench.metered`` starts it with the stack's resolved settings (its PostgreSQL, Redis, keys and upstream),
the replica's GC tuning and uvicorn's WebSocket options, so that ``app-uvicorn`` and ``app-uvicorn-metered``
differ from (a) and ``metered-apikey`` only in what Ray and Serve add to the process (their threads, Serve's
request path, the metrics hand-over) and the HAProxy hop, and from (b') only in the gateway's own layers.
Two differences are the settings': no Ray here, so a call's credit and rate slices are this process's own
(``account_shards = 0``, as a single-process gateway runs) and sends race in process (``send_racers = 0``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson

from bench._proc import require_loopback_host, uvicorn_config


def main() -> None:
    import uvicorn

    from bench.paired import paired_app
    from gateway.app.replica import GatewayApp
    from gateway.app.settings import Settings
    from gateway.base.process_gc import tune_gc
    from gateway.pubsub.ws import UVICORN_WS_OPTIONS
    from gateway.transports.http import build_http_app

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--settings", type=Path, required=True, help="the stack's resolved settings, as JSON")
    parser.add_argument("--ray-address", help="join this Ray cluster as a driver first (Ray's core worker in process)")
    args = parser.parse_args()
    require_loopback_host(args.host)
    given = orjson.loads(args.settings.read_bytes())
    settings = Settings.model_validate({**given, "account_shards": 0, "send_racers": 0, "port": args.port})
    tune_gc(settings.gc_young_threshold)  # as an ingress replica does
    if args.ray_address:
        import ray

        ray.init(address=args.ray_address, namespace="bench-app-uvicorn", log_to_driver=False, configure_logging=False)
    gw = GatewayApp(settings)
    app = paired_app(gw, build_http_app(gw))  # bench/unmetered.py's, without Serve
    uvicorn.Server(uvicorn_config(app, args.host, args.port, lifespan="on", **UVICORN_WS_OPTIONS)).run()


if __name__ == "__main__":
    main()
