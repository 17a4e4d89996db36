"""Two Ray nodes on this machine, started with the commands ``cluster.yaml`` gives the cluster launcher.

The head runs ``head_start_ray_commands`` and the worker ``worker_start_ray_commands``, read from the file,
each through ``bash -c`` as the launcher runs them over SSH. What has to differ on one machine is changed in
:func:`on_this_machine` and :func:`node_env`, and nowhere else:

- ``ray stop`` is left out: it ends every Ray of this user on the machine, not only this cluster's;
- ``~/gateway`` and ``$HOME/gateway`` (where the launcher's ``file_mounts`` put the repository) are this
  checkout, so ``.venv/bin/ray`` is the virtual environment under test;
- the GCS port 6379 is a free port, and ``$RAY_HEAD_IP`` is the head's address;
- ``--autoscaling-config`` is left out: the launcher writes that file;
- each node gets its own address (``--node-ip-address``: 127.0.0.2 and 127.0.0.3, both on ``lo``, as all of
  127/8 is on Linux; Ray takes 127.0.0.1 for the machine's own address), its own ``--temp-dir``, and free
  ports for what Ray binds at a fixed port per machine (the dashboard, its agent, the Ray client server);
- the environment carries what the file says each machine's profile exports (``GATEWAY_EDGE_SECRET``), and
  Ray's token from a file of this cluster's (``RAY_AUTH_TOKEN_PATH``) in place of ``~/.ray/auth_token``
  (which ``file_mounts`` copies to every machine), leaving this user's own alone;
- the ports Serve fixes per machine (HAProxy's stats and metrics ports, the fallback proxy's) are free ports
  per node, and both nodes' HAProxies listen on the service port with ``SO_REUSEPORT``: two machines would
  each have the port to themselves; HAProxy's files are under the cluster's directory (Serve keeps them
  apart per node already), so that a run leaves nothing in ``/tmp/haproxy-serve``.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import yaml

from gateway.runtime import serve_runtime
from gateway.runtime.ports import free_port

REPO = Path(__file__).resolve().parents[2]
CLUSTER_YAML = REPO / "cluster.yaml"
# Not 127.0.0.1: Ray replaces that address with the machine's own.
HEAD_IP = "127.0.0.2"
WORKER_IP = "127.0.0.3"
LAUNCHER_PORT = "6379"  # the GCS port cluster.yaml gives `ray start --head`


def start_commands(role: str) -> list[str]:
    """``cluster.yaml``'s ``<role>_start_ray_commands`` (``head`` or ``worker``), as written."""
    config = yaml.safe_load(CLUSTER_YAML.read_text())
    return [str(command) for command in config[f"{role}_start_ray_commands"]]


@dataclass
class Node:
    role: str  # "head" or "worker"
    ip: str
    root: Path  # under it: Ray's temp dir of this node
    extra_flags: list[str] = field(default_factory=list)
    haproxy_stats_port: int = field(default_factory=free_port)

    @property
    def temp_dir(self) -> Path:
        return self.root / "ray"

    def haproxy_servers(self) -> dict[str, str]:
        """What this node's HAProxy thinks of the gateway's replicas: server name -> UP, DOWN, MAINT...
        (its stats page, as CSV)."""
        url = f"http://127.0.0.1:{self.haproxy_stats_port}/stats;csv"
        with urllib.request.urlopen(url, timeout=5) as resp:
            rows = list(csv.reader(io.StringIO(resp.read().decode())))
        header = [name.lstrip("# ") for name in rows[0]]
        servers = [dict(zip(header, row, strict=False)) for row in rows[1:] if row]
        return {s["svname"]: s["status"] for s in servers if s["svname"].startswith("SERVE_REPLICA")}

    def processes(self) -> list[psutil.Process]:
        """Every process of this node: what names its directory (the raylet, the GCS, the log monitor) and
        everything under those (the workers, whose command lines Ray rewrites to ``ray::…``, and the
        HAProxy their manager runs)."""
        return processes_naming(self.root)

    def kill(self) -> list[str]:
        """SIGKILL every process of the node at once, as a machine losing power would; returns their names."""
        return kill(self.processes())


def processes_naming(marker: Path | str) -> list[psutil.Process]:
    """The processes whose command line names ``marker`` (a path, an address), and all their descendants."""
    found: dict[int, psutil.Process] = {}
    for proc in serve_runtime.processes_naming(str(marker)):
        found[proc.pid] = proc
        with contextlib.suppress(psutil.Error):
            for child in proc.children(recursive=True):
                found[child.pid] = child
    return list(found.values())


def kill(victims: list[psutil.Process]) -> list[str]:
    names = []
    for proc in victims:
        with contextlib.suppress(psutil.Error):
            names.append(proc.name())
            proc.send_signal(signal.SIGKILL)
    psutil.wait_procs(victims, timeout=10)
    return names


def on_this_machine(command: str, node: Node, gcs_port: int) -> str | None:
    """``command`` of ``cluster.yaml`` as it runs on ``node`` of this machine; None: not run here."""
    if command.strip() == "ray stop":
        return None
    command = command.replace("~/gateway", str(REPO)).replace("$HOME/gateway", str(REPO))
    command = command.replace(f"--port={LAUNCHER_PORT}", f"--port={gcs_port}")
    command = command.replace(f":{LAUNCHER_PORT}", f":{gcs_port}")
    command = re.sub(r"\s--autoscaling-config=\S+", "", command)
    if "ray start" not in command:
        return command
    flags = [f"--node-ip-address={node.ip}", f"--temp-dir={node.temp_dir}", *node.extra_flags]
    return f"{command} {' '.join(flags)}"


def node_env(node: Node, edge_secret: str, token_file: Path) -> dict[str, str]:
    """The environment ``ray start`` sees on ``node``: this user's, without the gateway's or Ray's settings
    of whoever runs the test, plus what differs per machine (the module says why)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATEWAY_", "RAY_"))}
    files = node.root.parent / "hp"
    env.update(
        RAY_HEAD_IP=HEAD_IP,
        GATEWAY_EDGE_SECRET=edge_secret,
        RAY_AUTH_TOKEN_PATH=str(token_file),
        # Serve keeps each node's HAProxy files in a directory named by its node id under these: here under
        # the cluster's directory (removed with it), not /tmp/haproxy-serve. Short: a socket path's limit.
        RAY_SERVE_HAPROXY_CONFIG_FILE_LOC=f"{files}/haproxy.cfg",
        RAY_SERVE_HAPROXY_SOCKET_PATH=f"{files}/admin.sock",
        RAY_SERVE_HAPROXY_SERVER_STATE_BASE=str(files),
        RAY_SERVE_HAPROXY_SERVER_STATE_FILE=f"{files}/server-state",
        RAY_SERVE_HAPROXY_STATS_PORT=str(node.haproxy_stats_port),
        RAY_SERVE_HAPROXY_METRICS_PORT=str(free_port()),
        RAY_SERVE_FALLBACK_PROXY_HTTP_PORT=str(free_port()),
        RAY_SERVE_FALLBACK_PROXY_GRPC_PORT=str(free_port()),
        SERVE_SOCKET_REUSE_PORT_ENABLED="1",
    )
    return env


@dataclass
class Cluster:
    head: Node
    worker: Node
    gcs_port: int
    edge_secret: str
    log: Path

    @property
    def address(self) -> str:
        return f"{HEAD_IP}:{self.gcs_port}"

    @property
    def nodes(self) -> tuple[Node, Node]:
        return self.head, self.worker

    @property
    def token_file(self) -> Path:
        return self.head.root.parent / "auth_token"

    def driver_env(self) -> dict[str, str]:
        """What a driver joining this cluster at its explicit address needs (Ray enables token auth by
        itself only for ``auto``)."""
        return {"RAY_ADDRESS": self.address, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(self.token_file)}

    def start_node(self, node: Node) -> None:
        """Run the node's commands of ``cluster.yaml`` in order, as the launcher does; one that fails stops it."""
        env = node_env(node, self.edge_secret, self.token_file)
        node.root.mkdir(parents=True, exist_ok=True)
        for written in start_commands(node.role):
            command = on_this_machine(written, node, self.gcs_port)
            if command is None:
                continue
            with self.log.open("ab") as out:
                out.write(f"\n$ {command}\n".encode())
                out.flush()
                done = subprocess.run(
                    ["bash", "-c", command], env=env, stdout=out, stderr=subprocess.STDOUT, timeout=120, check=False
                )
            if done.returncode != 0:
                raise RuntimeError(
                    f"{node.role}: {command!r} exited {done.returncode}:\n{self.log.read_text()[-3000:]}"
                )

    def stop(self) -> None:
        """End both nodes' processes (``ray stop`` would end every Ray of the user), and any left naming the
        cluster's directory (a HAProxy whose manager died first), then the files."""
        for node in reversed(self.nodes):
            node.kill()
        kill(processes_naming(self.head.root.parent))
        kill(processes_naming(f"--address={self.address}"))  # the Ray client server names only the GCS
        shutil.rmtree(self.head.root.parent, ignore_errors=True)


def make_cluster(log: Path) -> Cluster:
    """The two nodes' places and ports (nothing started). Short paths under /tmp: Ray's and HAProxy's
    Unix socket paths under them have a length limit."""
    root = Path(tempfile.mkdtemp(prefix="gwc-"))
    head = Node(
        "head",
        HEAD_IP,
        root / "head",
        [
            f"--dashboard-port={free_port()}",
            f"--dashboard-agent-listen-port={free_port()}",
            f"--ray-client-server-port={free_port()}",
        ],
    )
    worker = Node("worker", WORKER_IP, root / "worker", [f"--dashboard-agent-listen-port={free_port()}"])
    cluster = Cluster(head, worker, free_port(), secrets.token_hex(16), log)
    cluster.token_file.write_text(secrets.token_hex(32))  # as `ray get-auth-token --generate` makes one
    cluster.token_file.chmod(0o600)
    return cluster
