"""`python -m bench`: measure the const upstream, the plain forwarder and (optionally) the gateway.

    python -m bench [--duration 8] [--connections 64,1] [--gateway-url http://127.0.0.1:8000/]
                    [--upstream-port 8899] [--backend python|wrk|auto] [--header 'K: V'] [--json out.json]

With `--gateway-url`, start the gateway with the printed const upstream URL as its upstream
(fix that URL in advance with `--upstream-port`); the harness waits for the gateway to answer 2xx.
"""

from __future__ import annotations

import argparse
import asyncio

import uvloop

from bench.gateway_overhead import run_overhead
from bench.loadgen import BACKENDS, DEFAULT_BODY, DEFAULT_HEADERS


def _connections(text: str) -> list[int]:
    values = [int(part) for part in text.split(",") if part.strip()]
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError("expected a comma-separated list of positive integers")
    return values


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=8.0, help="measured seconds per run (default 8)")
    parser.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds before each run (default 1)")
    parser.add_argument("--connections", type=_connections, default=[64, 1], help="e.g. 64,1 (default)")
    parser.add_argument("--max-requests", type=int, default=1_000_000, help="cap on requests per run")
    parser.add_argument("--gateway-url", default=None, help="loopback URL of a running gateway to measure")
    parser.add_argument("--wait-gateway", type=float, default=120.0, help="seconds to wait for the gateway")
    parser.add_argument("--upstream-port", type=int, default=None, help="fixed port for the const upstream")
    parser.add_argument("--forwarder-port", type=int, default=None, help="fixed port for the forwarder")
    parser.add_argument(
        "--backend", choices=BACKENDS, default="auto", help="load client: auto = wrk if installed and headers static"
    )
    parser.add_argument("--body", default=DEFAULT_BODY.decode(), help="request body (default getSlot)")
    parser.add_argument("--header", action="append", default=[], help="extra request header 'Name: value'")
    parser.add_argument("--json", dest="json_path", default=None, help="also write the results as JSON here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    headers = dict(DEFAULT_HEADERS)
    for item in args.header:
        name, sep, value = item.partition(":")
        if not sep:
            raise SystemExit(f"--header expects 'Name: value', got {item!r}")
        headers[name.strip()] = value.strip()
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(
            run_overhead(
                gateway_url=args.gateway_url,
                connections=args.connections,
                duration_s=args.duration,
                warmup_s=args.warmup,
                max_requests=args.max_requests,
                upstream_port=args.upstream_port,
                forwarder_port=args.forwarder_port,
                body=args.body.encode(),
                headers=headers,
                backend=args.backend,
                wait_gateway_s=args.wait_gateway,
                json_path=args.json_path,
            )
        )


if __name__ == "__main__":
    main()
