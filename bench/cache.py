"""What the response cache saves: metered ``getTransaction`` (finalized) through a gateway with the
cache, the same gateway without it, and plain uvicorn forwarding (b), in one run, one upstream.

    python -m bench.cache [--duration 5] [--connections 64,1] [--rounds 2] [--client auto]

The upstream is the constant one (``bench/const_upstream.py``), which answers ``getTransaction``
with a finalized transfer: on the cached gateway every call after the first is answered by the
replica's cache, on the other gateway and the forwarder every call goes to the upstream. Each
gateway is one :class:`gateway.app.replica.GatewayApp` served by uvicorn in a process of its own (no Ray: the
app a Serve replica runs, without Serve's proxy in front, so the difference is the cache's alone), on
one embedded PostgreSQL and Redis, called with the API key of a funded account (auth, limits, credits
and headers on every call). Targets run interleaved over ``--rounds``, every other round reversed;
the table keeps each target's best round. Its server column is the CPU of the target's own process
per request.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import orjson

from bench.gateway_overhead import measure
from bench.loadgen import BACKENDS, DEFAULT_HEADERS
from bench.metered import best_of, create_api_key, fund_account, start_reference
from bench.report import Row, format_ratios, format_table
from gateway.base.keys import service_key_addresses
from gateway.runtime.ports import free_port

SIGNATURE = "5VERv8NMvzbJMEkV8xnrLkEaWRtSz9CosKDYjCJjBRnbJLgp8uirBgmQpjKhoR4tjF3ZpRzrFmBV6UjKdiSZkQUW"
BODY = orjson.dumps(
    {"jsonrpc": "2.0", "id": 1, "method": "getTransaction", "params": [SIGNATURE, {"commitment": "finalized"}]}
)
RATIOS = [
    ("metered-cached", "metered-uncached"),
    ("metered-cached", "forwarder"),
    ("metered-uncached", "forwarder"),
]


def serve(args: argparse.Namespace) -> None:
    """A gateway process (the ``serve`` subcommand): one GatewayApp on uvicorn, until SIGTERM."""
    import uvicorn

    from bench._proc import uvicorn_config
    from gateway.app.replica import GatewayApp
    from gateway.app.settings import Settings
    from gateway.transports.http import build_http_app

    settings = Settings(
        **service_key_addresses(Path(args.home)),  # standing in for gateway up
        home=Path(args.home),
        database_url=args.database_url,
        redis_url=args.redis_url,
        upstream_rpc_url=args.upstream,
        rate_limit_rps=1_000_000,  # measure the cache, not the limiter refusing calls
        concurrency_limit=100_000,
        response_cache=args.cache,
        api_key_secret=args.api_key_secret,
    )
    uvicorn.Server(uvicorn_config(build_http_app(GatewayApp(settings)), "127.0.0.1", args.port, lifespan="on")).run()


def start_gateway(
    home: Path, upstream: str, database_url: str, redis_url: str, secret: str, cache: bool
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    command = [sys.executable, "-m", "bench.cache", "serve", "--port", str(port), "--home", str(home)]
    command += ["--upstream", upstream, "--database-url", database_url, "--redis-url", redis_url]
    command += ["--api-key-secret", secret]
    command += ["--cache"] if cache else []
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:  # /health is 200 once the upstream has answered the gateway's probe
        try:
            urllib.request.urlopen(f"{url}/health", timeout=1).read()
            return proc, url
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def run(duration_s: float, connections: list[int], rounds: int, client: str) -> list[list[Row]]:
    from gateway.runtime.embedded import EmbeddedPostgres, EmbeddedRedis
    from gateway.storage.migrate import migrate_url

    home = Path(tempfile.mkdtemp(prefix="gw-bench-cache-"))
    pg, redis = EmbeddedPostgres(home), EmbeddedRedis(home)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        database_url, redis_url = pg.start(), redis.start()
        asyncio.run(migrate_url(database_url))
        upstream_proc, upstream_url = start_reference("bench.const_upstream")
        forwarder_proc, forwarder_url = start_reference("bench.forwarder", "--upstream", upstream_url)
        procs += [upstream_proc, forwarder_proc]
        key_secret = os.urandom(32).hex()  # both gateways must hash API keys alike
        cached_proc, cached_url = start_gateway(
            home / "cached", upstream_url, database_url, redis_url, key_secret, True
        )
        uncached_proc, uncached_url = start_gateway(
            home / "uncached", upstream_url, database_url, redis_url, key_secret, False
        )
        procs += [cached_proc, uncached_proc]
        secret = os.urandom(32)
        key = create_api_key(cached_url, secret)  # one account, one key: both gateways share the database
        from gateway_client import WalletSigner

        fund_account(database_url, WalletSigner(secret).pubkey, 100_000_000)  # 10M credits
        headers = {**DEFAULT_HEADERS, "X-Api-Key": key}
        targets = {
            "forwarder": forwarder_url,
            "metered-uncached": f"{uncached_url}/",
            "metered-cached": f"{cached_url}/",
        }
        pids = {
            "forwarder": [forwarder_proc.pid],
            "metered-uncached": [uncached_proc.pid],
            "metered-cached": [cached_proc.pid],
        }
        by_round: list[list[Row]] = []
        for round_no in range(rounds):
            order = list(targets.items()) if round_no % 2 == 0 else list(targets.items())[::-1]
            print(f"round {round_no + 1} of {rounds}", flush=True)
            by_round.append(
                asyncio.run(
                    measure(
                        dict(order),
                        connections=connections,
                        duration_s=duration_s,
                        body=BODY,
                        headers=headers,
                        backend=client,
                        cpu_pids=pids,
                    )
                )
            )
        return by_round
    finally:
        for proc in reversed(procs):
            proc.terminate()
            proc.wait(timeout=10)
        redis.stop()
        pg.stop()
        shutil.rmtree(home, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cache", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    serving = sub.add_parser("serve", help="(internal) one gateway process")
    serving.add_argument("--port", type=int, required=True)
    serving.add_argument("--home", required=True)
    serving.add_argument("--upstream", required=True)
    serving.add_argument("--database-url", required=True)
    serving.add_argument("--redis-url", required=True)
    serving.add_argument("--api-key-secret", required=True)
    serving.add_argument("--cache", action="store_true")
    parser.add_argument("--duration", type=float, default=5.0, help="measured seconds per run (default 5)")
    parser.add_argument("--connections", default="64,1", help="comma-separated (default 64,1)")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds (default 2)")
    parser.add_argument("--client", choices=BACKENDS, default="auto", help="load generator (default auto: wrk)")
    args = parser.parse_args(argv)
    if args.command == "serve":
        serve(args)
        return
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # unwind through run()'s finally
    connections = [int(c) for c in args.connections.split(",")]
    rows = best_of(run(args.duration, connections, args.rounds, args.client))
    print()
    print(format_table(rows, baseline="forwarder"))
    print()
    print(format_ratios(rows, RATIOS))


if __name__ == "__main__":
    main()
