"""Two ingress replicas behind HAProxy, a clean SIGTERM, and a second start on the same data dir.

Round-robin balancing sends consecutive connections to alternating replicas, so repeating a request
four times reaches both replicas.

However long the restart takes, the nonce check after it is the same: the nonce is signed again with
the current time (inside the window by construction), and the test gives the recorded pair a
lifetime longer than any restart (a restart longer than the product's 180 s would rightly forget it:
its old signature is outside the window by then). What is tested is that the pair survives.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil
import pytest
import redis
from solders.keypair import Keypair

from gateway.auth.store.nonces import nonce_key
from gateway_client import WalletSigner
from tests.integration.service import (
    confirm_deposit,
    create_api_key,
    deposit_usdc,
    fetch,
    service_env,
    start_service,
    stop_service,
)

pytestmark = pytest.mark.integration

BODY = b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}'


def call(url: str, path: str, headers: dict[str, str], body: bytes | None = BODY) -> tuple[int, dict[str, object]]:
    status, doc, _ = fetch(f"{url}{path}", body, headers)
    return status, doc


def error_code(doc: dict[str, object]) -> object:
    error = doc.get("error")
    return error.get("code") if isinstance(error, dict) else None


def test_two_replicas_and_a_restart_keep_every_promise(tmp_path_factory: pytest.TempPathFactory) -> None:
    home: Path = tmp_path_factory.mktemp("restart")
    env = service_env(home, GATEWAY_INGRESS_REPLICAS="2")
    wallet = Keypair()
    signer = WalletSigner(bytes(wallet))

    service = start_service(home, env)
    try:
        old_key = create_api_key(service.url, wallet)
        confirm_deposit(service, deposit_usdc(service, wallet, 100_000), {"X-Api-Key": old_key})
        for _ in range(4):  # both replicas now know (and cache) the key
            assert call(service.url, "/", {"X-Api-Key": old_key})[0] == 200

        signed = signer.headers("POST", "/", BODY)
        first = call(service.url, "/", signed)
        assert first[0] == 200, first
        for _ in range(3):  # the replays reach the other replica too
            status, doc = call(service.url, "/", signed)
            assert (status, error_code(doc)) == (403, "NONCE_REUSED"), doc
        recorded = nonce_key(signer.pubkey, signed["X-Nonce"])
        with redis.Redis(unix_socket_path=str(home / "redis" / "redis.sock")) as store:
            assert store.pexpire(recorded, 3_600_000)  # outlives a slow restart (see the module's docstring)

        new_key = create_api_key(service.url, wallet)  # rotation, served by one of the two replicas
        for _ in range(4):
            status, doc = call(service.url, "/", {"X-Api-Key": old_key})
            assert (status, error_code(doc)) == (401, "AUTH_FAILED"), doc
        assert call(service.url, "/", {"X-Api-Key": new_key})[0] == 200
    finally:
        code, survivors = stop_service(service)
    assert code == 0, service.log.read_text()[-3000:]
    assert survivors == [], survivors

    again = start_service(home, env)
    try:
        status, info = call(again.url, "/account/info", {"X-Api-Key": new_key}, body=None)
        assert status == 200 and info["pubkey"] == str(wallet.pubkey()), info
        assert 0 < info["balance"] < 10_000, info  # the deposit survived; the calls were billed
        resigned = signer.headers("POST", "/", BODY, nonce=signed["X-Nonce"])  # now: inside the window
        for _ in range(2):  # both new replicas
            status, doc = call(again.url, "/", resigned)
            assert (status, error_code(doc)) == (403, "NONCE_REUSED"), doc
        status, doc = call(again.url, "/", signed)  # the old signature itself: refused, by nonce or by window
        assert (status, error_code(doc)) in ((403, "NONCE_REUSED"), (401, "AUTH_FAILED")), doc
        status, doc = call(again.url, "/", {"X-Api-Key": old_key})
        assert (status, error_code(doc)) == (401, "AUTH_FAILED"), doc
    finally:
        code, survivors = stop_service(again)
    assert code == 0 and survivors == []


def test_sigterm_to_the_whole_process_group_stops_promptly(tmp_path_factory: pytest.TempPathFactory) -> None:
    """As systemd stops a unit: SIGTERM to every process of the group at once, Ray's own processes
    included. The stop must not wait on the dead cluster (each of Ray's calls would wait 60 s)."""
    home: Path = tmp_path_factory.mktemp("group-stop")
    service = start_service(home, service_env(home), new_session=True)
    children = service.descendants()
    os.killpg(service.process.pid, signal.SIGTERM)
    try:
        code = service.process.wait(timeout=60)
    finally:
        if service.process.poll() is None:
            os.killpg(service.process.pid, signal.SIGKILL)
    _, survivors = psutil.wait_procs(children, timeout=15)
    log = service.log.read_text()
    assert code == 0 and "Stopped." in log, log[-3000:]
    assert survivors == [], survivors
