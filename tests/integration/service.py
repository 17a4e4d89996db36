"""The whole service, started as an operator starts it (``gateway up`` in a subprocess), and talking to it.

Real embedded PostgreSQL and Redis, the devnode in its own process, a local Ray, the Serve app, all
under a temporary data dir and on free ports (a developer's running ``make up`` is left alone).
Running it in a subprocess also keeps Ray out of the pytest process, which hosts LiteSVM in other
tests (LiteSVM leaves the x87 FPU state dirty, which crashes Ray's C++ in the same process).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import psutil
from solana.rpc.async_api import AsyncClient
from solders.keypair import Keypair

from gateway.runtime.cluster import SERVE_APP_NAME
from gateway.runtime.ports import free_port
from gateway_client import WalletSigner
from tests.chain import airdrop, mint_usdc, read_keypair, transfer_usdc
from tests.support import TEST_IP_LIMITS

#: The title Ray gives an ingress replica's process (the app's Service deployment runs as ``ServeReplica`` too).
INGRESS_REPLICA = f"ServeReplica:{SERVE_APP_NAME}:Ingress"


@dataclass
class RunningService:
    home: Path
    url: str
    node_url: str
    process: subprocess.Popen[bytes]
    log: Path
    env: dict[str, str]  # what it was started with: other commands of the same stack use it too

    def descendants(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []


def service_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "RAY_"))}
    env.update(
        GATEWAY_HOME=str(home),
        GATEWAY_PORT=str(free_port()),
        GATEWAY_DEVNODE_RPC_PORT=str(free_port()),
        GATEWAY_DEVNODE_WS_PORT=str(free_port()),
        GATEWAY_DEVNODE_GRPC_PORT=str(free_port()),
        GATEWAY_GRPC_PORT=str(free_port()),
        GATEWAY_METRICS_EXPORT_PORT=str(free_port()),
        GATEWAY_DEVNODE_SLOT_MS="100",
        GATEWAY_DEVNODE_FEED="false",
        GATEWAY_DEPOSIT_POLL_S="0.5",
        GATEWAY_DEVNODE_RETENTION_SLOTS="50",  # 5 s of blocks, so a purged getBlock can be tested
        GATEWAY_IP_LIMITS=orjson.dumps(TEST_IP_LIMITS).decode(),
    )
    env.update(extra)  # a test's own values win over these
    return env


def stale_ray_tmpdir() -> Path:
    """A Ray temp dir (``RAY_TMPDIR``) whose last-cluster file names a cluster that is gone, as ``ray start``
    leaves it after that cluster ended without ``ray stop`` (issue 9, tests/integration/test_ray_start.py).
    Short, under /tmp: Ray's Unix socket paths under it have a length limit."""
    root = Path(tempfile.mkdtemp(prefix="gwray-"))
    (root / "ray").mkdir()
    (root / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{free_port()}\n")  # nothing listens there
    return root


def start_service(
    home: Path, env: dict[str, str], timeout_s: float = 180.0, new_session: bool = False
) -> RunningService:
    """``gateway up``; ``new_session`` gives it (and what it starts) a process group of its own."""
    log = home / "gateway-up.log"
    home.mkdir(parents=True, exist_ok=True)
    offset = log.stat().st_size if log.exists() else 0  # a restart appends to the same log
    gateway = Path(sys.executable).with_name("gateway")
    with log.open("ab") as out:
        process = subprocess.Popen(
            [str(gateway), "up"], env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=new_session
        )
    url = f"http://127.0.0.1:{env['GATEWAY_PORT']}"
    deadline = time.monotonic() + timeout_s
    while b"Ready." not in log.read_bytes()[offset:]:
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"gateway up did not start:\n{log.read_text()[-4000:]}")
        time.sleep(0.25)
    return RunningService(home, url, f"http://127.0.0.1:{env['GATEWAY_DEVNODE_RPC_PORT']}", process, log, env)


def stop_service(service: RunningService, timeout_s: float = 90.0) -> tuple[int, list[psutil.Process]]:
    """SIGTERM, as an operator or a process manager would; returns the exit code and any survivors."""
    children = service.descendants()
    service.process.send_signal(signal.SIGTERM)
    code = service.process.wait(timeout=timeout_s)
    _, alive = psutil.wait_procs(children, timeout=15)
    return code, alive


def health(url: str) -> int:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


@dataclass
class Customer:
    wallet: Keypair
    api_key: str

    @property
    def headers(self) -> dict[str, str]:
        return {"X-Api-Key": self.api_key}


def create_api_key(url: str, wallet: Keypair) -> str:
    """``POST /account/api-key`` under wallet-signature auth, as docs/api.md (Authentication) shows it."""
    body = b"{}"
    headers = WalletSigner(bytes(wallet)).headers("POST", "/account/api-key", body)
    request = urllib.request.Request(
        f"{url}/account/api-key", data=body, headers={**headers, "Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        return str(orjson.loads(resp.read())["api_key"])


Answer = tuple[int, Any, dict[str, str]]


def fetch(url: str, body: bytes | None, headers: dict[str, str]) -> Answer:
    """GET (``body`` None) or POST, JSON answer; header names lower-cased (they are case-insensitive)."""
    request = urllib.request.Request(url, data=body, headers={**headers, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, orjson.loads(resp.read()), {k.lower(): v for k, v in resp.headers.items()}
    except urllib.error.HTTPError as exc:
        return exc.code, orjson.loads(exc.read()), {k.lower(): v for k, v in exc.headers.items()}


def post_json(url: str, body: object, headers: dict[str, str]) -> Answer:
    return fetch(url, orjson.dumps(body), headers)


def deposit_usdc(service: RunningService, wallet: Keypair, base_units: int) -> str:
    """Mint test USDC to ``wallet`` on the devnode and send it to the deposit address; returns the signature."""

    async def run() -> str:
        authority = read_keypair(service.home / "devnode" / "usdc-mint-authority.json")
        deposit_wallet = read_keypair(service.home / "keys" / "deposit-wallet.json").pubkey()
        await airdrop(service.node_url, wallet.pubkey())
        await airdrop(service.node_url, authority.pubkey())
        async with AsyncClient(service.node_url) as node:
            await mint_usdc(node, authority, wallet, wallet.pubkey(), base_units)
            return str(await transfer_usdc(node, wallet, deposit_wallet, base_units))

    return asyncio.run(run())


def confirm_deposit(service: RunningService, signature: str, headers: dict[str, str]) -> dict[str, Any]:
    """``POST /account/confirm-deposit``, retried while the transfer is not finalized yet."""
    deadline = time.monotonic() + 30
    while True:
        status, doc, _ = post_json(f"{service.url}/account/confirm-deposit", {"signature": signature}, headers)
        if status == 200 or time.monotonic() > deadline:
            assert status == 200 and isinstance(doc, dict), doc
            return doc
        time.sleep(0.3)


def funded_customer(service: RunningService, usdc_base_units: int = 1_000_000) -> Customer:
    """A new wallet with an API key and credits bought with a real on-chain deposit (1 USDC unless told)."""
    wallet = Keypair()
    customer = Customer(wallet, create_api_key(service.url, wallet))
    confirm_deposit(service, deposit_usdc(service, wallet, usdc_base_units), customer.headers)
    return customer


REPO = Path(__file__).resolve().parents[2]


def run_example(name: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``examples/<name>`` run as a user runs it, with ``env``; it must exit 0 (its output in the message)."""
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / name)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done
