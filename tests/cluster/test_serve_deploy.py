"""The repository's Serve config deployed as Ray Serve services are: ``serve deploy ops/serve/gateway.yaml``.

A local Ray is started with cluster.yaml's head command (its dashboard on: ``serve deploy`` talks to it), in an
environment carrying what the config file says each node's ``ray start`` gives the gateway (the service keys'
addresses, the API-key and edge secrets, the stores' and the node's URLs). Before it, as an operator would: the
embedded PostgreSQL and Redis (gateway/runtime/embedded.py), the devnode (``gateway devnode``), the service keys and
``gateway migrate``. Only the file's host and port are changed (free ports on loopback). Then, all through the
deployed app: a funded customer's paid call, a ``sendAndConfirm`` of a real signed transfer, and its webhook event
delivered to a local receiver; every actor of actors/service.py up once, with two ingress replicas. A redeploy with
a setting changed replaces every replica and finds the actors (none restarted, the shards' epochs the same). Then
``serve shutdown``: the app is gone and the actors live on, as docs/operations.md says, until ``gateway actors stop``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from solders.keypair import Keypair

from actors.service import service_actor_names
from gateway.app.settings import Settings
from gateway.base.keys import service_key_addresses
from gateway.runtime.cluster import SERVE_APP_NAME
from gateway.runtime.devnode_proc import rpc_ready
from gateway.runtime.embedded import EmbeddedPostgres, EmbeddedRedis
from gateway.runtime.ports import free_port
from tests.cluster.nodes import HEAD_IP, Node, kill, node_env, on_this_machine, processes_naming, start_commands
from tests.faults.load import Load, Receiver, create_webhook, new_customer, wait_deliveries
from tests.integration.service import RunningService, fetch

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]
SERVE_CONFIG = REPO / "ops" / "serve" / "gateway.yaml"


@dataclass
class Deployed:
    service: RunningService  # url: the deployed app; node_url: the devnode; env: the operator's commands'
    dashboard: str
    config: dict[str, Any]
    config_file: Path
    head: Node


def run(args: list[str], env: dict[str, str], timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
    assert done.returncode == 0, f"{' '.join(args)}: {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def wait_for(what: str, check: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s:g} s"
        time.sleep(0.5)


def health(url: str) -> int:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def replica_pids(head: Node, deployment: str) -> set[int]:
    """The node's processes of the app's live replicas of ``deployment`` (titled ``ServeReplica:<app>:<name>``)."""
    marker = f"ServeReplica:{SERVE_APP_NAME}:{deployment}"
    found = set()
    for proc in head.processes():
        with contextlib.suppress(psutil.Error):
            if proc.status() != psutil.STATUS_ZOMBIE and any(marker in part for part in proc.cmdline()):
                found.add(proc.pid)
    return found


def status_parts(env: dict[str, str]) -> dict[str, dict[str, Any]]:
    """``gateway status --json`` as an operator runs it against this cluster (``RAY_ADDRESS``)."""
    done = subprocess.run(
        [str(BIN / "gateway"), "status", "--json"], env=env, capture_output=True, text=True, timeout=180, check=False
    )
    assert done.stdout.strip(), done.stderr
    return {part["name"]: part for part in json.loads(done.stdout)["parts"]}


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployed]:
    home = tmp_path_factory.mktemp("serve-deploy-home")
    root = Path(tempfile.mkdtemp(prefix="gwd-"))  # short: Ray's and HAProxy's socket paths have a limit
    head = Node(
        "head",
        HEAD_IP,
        root / "head",
        [
            f"--dashboard-port={(dashboard_port := free_port())}",
            f"--dashboard-agent-listen-port={free_port()}",
            f"--ray-client-server-port={free_port()}",
        ],
    )
    gcs_port, edge_secret, token_file = free_port(), secrets.token_hex(16), root / "auth_token"
    token_file.write_text(secrets.token_hex(32))
    token_file.chmod(0o600)
    pg, redis = EmbeddedPostgres(home), EmbeddedRedis(home)
    devnode: subprocess.Popen[bytes] | None = None
    try:
        database_url, redis_url = pg.start(), redis.start()
        # the chain, as `gateway devnode` runs it (a cluster's nodes are outside it)
        rpc_port, ws_port, grpc_port = free_port(), free_port(), free_port()
        chain_env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "RAY_"))}
        chain_env.update(
            GATEWAY_HOME=str(home),
            GATEWAY_DEVNODE_RPC_PORT=str(rpc_port),
            GATEWAY_DEVNODE_WS_PORT=str(ws_port),
            GATEWAY_DEVNODE_GRPC_PORT=str(grpc_port),
            GATEWAY_DEVNODE_SLOT_MS="100",
            GATEWAY_DEVNODE_RETENTION_SLOTS="3000",
        )
        with (home / "devnode.log").open("ab") as out:
            devnode = subprocess.Popen(
                [str(BIN / "gateway"), "devnode", "--no-feed"], env=chain_env, stdout=out, stderr=subprocess.STDOUT
            )
        node_url = f"http://127.0.0.1:{rpc_port}"
        wait_for("the devnode", lambda: rpc_ready(node_url), 60)

        # what the operator gives every node (the config file's header lists it): keys made once, elsewhere
        gateway_env = {
            **service_key_addresses(home),
            "api_key_secret": secrets.token_hex(32),
            "database_url": database_url,
            "redis_url": redis_url,
            "upstream_rpc_url": node_url,
            "upstream_ws_url": f"ws://127.0.0.1:{ws_port}",
            "upstream_grpc_url": f"http://127.0.0.1:{grpc_port}",
            "block_engine_url": f"{node_url}/api/v1",
            "network": "devnode",
            "webhook_allow_private": "true",  # the receiver is on loopback
            "home": str(home),
            "grpc_port": str(free_port()),
            "deposit_poll_s": "0.5",
        }
        env = {**chain_env, **{f"GATEWAY_{k.upper()}": v for k, v in gateway_env.items()}}
        migrated = run([str(BIN / "gateway"), "migrate"], env)
        assert "applied:" in migrated.stdout + migrated.stderr

        (command,) = [c for c in start_commands("head") if "ray start" in c]
        ray_env = {**node_env(head, edge_secret, token_file), **env, "GATEWAY_EDGE_SECRET": edge_secret}
        head.root.mkdir(parents=True)
        run(["bash", "-c", str(on_this_machine(command, head, gcs_port))], ray_env)

        config = yaml.safe_load(SERVE_CONFIG.read_text())
        port = free_port()
        config["http_options"] = {"host": "127.0.0.1", "port": port}
        config["applications"][0]["runtime_env"]["env_vars"].update(GATEWAY_HOST="127.0.0.1", GATEWAY_PORT=str(port))
        written = root / "gateway.yaml"
        written.write_text(yaml.safe_dump(config))
        # `ray start --head` runs the dashboard on 127.0.0.1 (its default --dashboard-host), a few seconds on
        dashboard = f"http://127.0.0.1:{dashboard_port}"
        wait_for("Ray's dashboard", lambda: listening(dashboard_port), 60)
        operator_env = {  # the operator's commands read the app's settings too (gateway status: the actors' names)
            **env,
            **config["applications"][0]["runtime_env"]["env_vars"],
            "RAY_ADDRESS": f"{HEAD_IP}:{gcs_port}",
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": str(token_file),
        }
        run([str(BIN / "serve"), "deploy", str(written), "--address", dashboard], operator_env)
        url = f"http://127.0.0.1:{port}"
        wait_for("the deployed app's /health", lambda: health(url) == 200, 240)
        service = RunningService(home, url, node_url, devnode, home / "devnode.log", operator_env)
        yield Deployed(service, dashboard, config, written, head)
    finally:
        head.kill()
        kill(processes_naming(root))
        kill(processes_naming(f"--address={HEAD_IP}:{gcs_port}"))
        if devnode is not None:
            devnode.terminate()
            devnode.wait(timeout=30)
        redis.stop()
        pg.stop()
        shutil.rmtree(root, ignore_errors=True)


async def test_serve_deploy_of_the_config_file_is_the_whole_service(deployed: Deployed) -> None:
    service = deployed.service
    app = deployed.config["applications"][0]
    counts = Settings(**{k.removeprefix("GATEWAY_").lower(): v for k, v in app["runtime_env"]["env_vars"].items()})
    names = service_actor_names(counts.model_dump(mode="json"))
    parts = await asyncio.to_thread(status_parts, service.env)
    deployments = parts["Serve"]["data"]["deployments"]
    assert {name: d["replicas"] for name, d in deployments.items()} == {
        "Service": {"RUNNING": 1},
        "Ingress": {"RUNNING": 2},  # two replicas, one set of actors
    }, deployments
    assert {name: parts[f"actor {name}"]["state"] for name in names} == dict.fromkeys(names, "up"), parts

    # a paid call, from a customer funded by a real USDC deposit confirmed through the app
    payer = await new_customer(service, "payer", 1_000_000)
    status, answer, headers = await asyncio.to_thread(
        fetch, f"{service.url}/", b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}', {"X-Api-Key": payer.api_key}
    )
    assert status == 200 and isinstance(answer["result"], int), answer
    assert 0 < int(headers["x-credits-remaining"]) < 1_000_000, headers

    # a sendAndConfirm of a signed transfer to an address a webhook watches, and its event delivered
    receiver = Receiver()
    hook = await receiver.start()
    try:
        sink = Keypair().pubkey()
        await create_webhook(service.url, payer, {"url": hook, "filter_type": "account", "filter_value": str(sink)})
        await asyncio.sleep(6)  # the webhook watcher follows a new webhook within about 5 s (docs/api.md)
        load = Load(service, [], payer, sink)
        await load.start()
        try:
            sent = await load.send_once()
        finally:
            await load.close()
        assert sent is not None and sent.status == 200 and sent.outcome == "confirmed", sent
        assert sent.signature is not None
        await wait_deliveries(receiver, {("transaction", sent.signature)}, timeout_s=60)
        assert receiver.ids.get(("transaction", sent.signature)), receiver.ids
    finally:
        await receiver.stop()

    # a redeploy (a new setting: Serve replaces every replica) finds the actors: none restarted, same state
    epochs = {name: parts[f"actor {name}"]["data"]["status"]["epoch"] for name in names if "shard" in name}
    old = {name: replica_pids(deployed.head, name) for name in ("Service", "Ingress")}
    changed = json.loads(json.dumps(deployed.config))
    changed["applications"][0]["runtime_env"]["env_vars"]["GATEWAY_ACCESS_LOG"] = "true"
    written = deployed.config_file.with_name("redeployed.yaml")
    written.write_text(yaml.safe_dump(changed))
    await asyncio.to_thread(
        run, [str(BIN / "serve"), "deploy", str(written), "--address", deployed.dashboard], service.env
    )

    def replaced() -> bool:
        now = {name: replica_pids(deployed.head, name) for name in old}
        return all(now[name] and not now[name] & old[name] for name in old) and health(service.url) == 200

    await asyncio.to_thread(wait_for, "the redeployed replicas", replaced, 180)
    again = await asyncio.to_thread(status_parts, service.env)
    assert {name: again[f"actor {name}"]["data"]["restarts"] for name in names} == dict.fromkeys(names, 0)
    assert {name: again[f"actor {name}"]["data"]["status"]["epoch"] for name in epochs} == epochs
    status, _, _ = await asyncio.to_thread(
        fetch, f"{service.url}/", b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}', {"X-Api-Key": payer.api_key}
    )
    assert status == 200

    # serve shutdown: the app goes; the detached actors stay (docs/operations.md) until gateway actors stop
    await asyncio.to_thread(run, [str(BIN / "serve"), "shutdown", "--address", deployed.dashboard, "-y"], service.env)
    assert await asyncio.to_thread(health, service.url) == 0  # nothing listens
    after = await asyncio.to_thread(status_parts, service.env)
    assert after["Serve"]["state"] == "down", after["Serve"]
    assert {name: after[f"actor {name}"]["state"] for name in names} == dict.fromkeys(names, "up")
    await asyncio.to_thread(run, [str(BIN / "gateway"), "actors", "stop"], service.env)
    stopped = await asyncio.to_thread(status_parts, service.env)
    assert {name: stopped[f"actor {name}"]["data"]["state"] for name in names} == dict.fromkeys(names, "MISSING")
