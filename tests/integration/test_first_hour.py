"""Issue 22 end to end, as a new user with only the README: `gateway fund`, then each runnable
example in examples/, against the running stack (so the examples cannot rot)."""

from __future__ import annotations

import asyncio
import base64
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from solders.keypair import Keypair

from gateway_client import GatewayClient, WalletSigner
from tests.integration.service import RunningService, fetch, run_example

pytestmark = pytest.mark.integration

GATEWAY = Path(sys.executable).with_name("gateway")
#: What `gateway fund` prints when the deposit watcher credited the deposit before the command confirmed it.
BY_WATCHER = "credited by the gateway's deposit watcher"


def gateway_fund(service: RunningService, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(GATEWAY), "fund", *args],
        env={**service.env, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def funded(service: RunningService) -> tuple[str, Path]:
    """The README's second command: a funded API key, and the wallet file it made."""
    started = time.monotonic()
    done = gateway_fund(service, "--usdc", "0.5")
    print(f"gateway fund took {time.monotonic() - started:.1f} s")  # the first hour's one command
    assert done.returncode == 0, done.stderr
    key = done.stdout.strip().splitlines()[-1]
    assert key.startswith("srpc_live_"), done.stdout
    assert "balance  50000 credits" in done.stderr, done.stderr
    return key, service.home / "wallets" / "dev-wallet.json"


def test_gateway_fund_gives_a_key_that_pays(service: RunningService, funded: tuple[str, Path]) -> None:
    key, wallet = funded
    assert wallet.exists() and wallet.with_suffix(".api-key").read_text().strip() == key
    status, answer, headers = fetch(
        f"{service.url}/", b'{"jsonrpc":"2.0","id":1,"method":"getSlot"}', {"X-Api-Key": key}
    )
    assert status == 200 and isinstance(answer["result"], int), answer
    assert int(headers["x-credits-remaining"]) < 50_000

    again = gateway_fund(service, "--usdc", "0.01")  # a second run reuses the wallet and its key
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip().splitlines()[-1] == key
    assert "+1000 credits" in again.stderr or BY_WATCHER in again.stderr, again.stderr
    assert "+0 credits" not in again.stderr, again.stderr


def test_gateway_fund_run_again_only_prints_the_key(
    service: RunningService, funded: tuple[str, Path], tmp_path: Path
) -> None:
    key, _ = funded
    before = balance_of(service, key)
    plain = gateway_fund(service)  # no --usdc: the wallet has credits, so nothing is deposited
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.strip().splitlines()[-1] == key
    assert "deposit  none" in plain.stderr and ": +" not in plain.stderr, plain.stderr
    assert balance_of(service, key) <= before

    other = tmp_path / "elsewhere" / "wallet.json"  # GATEWAY_WALLET names the wallet, for fund as for the examples
    new = gateway_fund(service, GATEWAY_WALLET=str(other))  # no credits yet: the default 10 USDC
    assert new.returncode == 0, new.stderr
    new_key = new.stdout.strip().splitlines()[-1]
    assert new_key != key and other.with_suffix(".api-key").read_text().strip() == new_key
    assert "+1000000 credits" in new.stderr or BY_WATCHER in new.stderr, new.stderr
    assert "+0 credits" not in new.stderr, new.stderr
    assert balance_of(service, new_key) >= 1_000_000 - 10


def balance_of(service: RunningService, key: str) -> int:
    status, info, _ = fetch(f"{service.url}/account/info", None, {"X-Api-Key": key})
    assert status == 200, info
    return int(info["balance"])


def test_gateway_fund_refuses_a_real_chain_and_bad_amounts(service: RunningService) -> None:
    real = gateway_fund(service, GATEWAY_UPSTREAM_RPC_URL="https://api.mainnet-beta.solana.com")
    assert real.returncode == 2 and "embedded devnode only" in real.stderr, real.stderr
    for amount in ("0.001", "abc", "1.0000001"):
        bad = gateway_fund(service, "--usdc", amount)
        assert bad.returncode == 2 and "USDC" in bad.stderr, bad.stderr


@pytest.mark.parametrize(
    ("example", "expected"),
    [
        ("api_key.py", ["(X-Api-Key header)", "(?api-key= in the URL)"]),
        ("session_token.py", ["session for", "lamports", "logout: ok"]),
        ("signed_requests.py", ["signed by"]),
        ("errors.py", ["402 -32010 insufficient credits", "deposit to", "InsufficientCredits"]),
        ("send_and_confirm.py", ["confirmed in slot", "charged 10 credits", "getSendStatus: confirmed"]),
        ("bundle.py", ["bundle ", "landed in slot"]),
        ("priority_fee.py", ["micro-lamports per CU (medium)", "getPriorityFeeEstimate High:"]),
        ("transaction_history.py", ["transactions; latest: ", "lamport fee"]),
        ("bulk.py", ["2 balances: ", "1 free errors", "transactions found"]),
        ("signals.py", ["recent: ", "live: ", "subscription sig_sub_1"]),  # no feed on this stack: few events
        ("websocket.py", ["slot ", "wallet balance now "]),
        ("grpc_stream.py", ["GetSlot: ", "slot ", "pong 1: the new filters are live", "transaction "]),
        ("mcp_client.py", ["MCP 2025-06-18 with solana-credit-gateway", "tools: rpc, getBalance", "getSlot: slot "]),
        ("x402_pay.py", ["x402 terms: 10000 base units", "settled ", ": 5000 credits", "paid call: slot "]),
        (
            "access_rules.py",
            [
                "getSlot from https://app.example.com: 200 result",
                "getSlot from https://elsewhere.example: 403 -32030",
                "getBlockHeight (not in the rules): 403 -32030",
                "spend cap: 1000 a day",
                "rules and cap lifted",
            ],
        ),
    ],
)
def test_each_example_runs(
    service: RunningService, funded: tuple[str, Path], example: str, expected: list[str], tmp_path: Path
) -> None:
    """As a user runs them after `gateway fund`: the wallet and its key found in the data dir, which is
    not ./.gateway (service.env's GATEWAY_HOME is a temporary one, and the working directory has none)."""
    env = {**service.env, "GATEWAY_URL": service.url}
    assert "GATEWAY_WALLET" not in env and "GATEWAY_API_KEY" not in env and env["GATEWAY_HOME"] == str(service.home)
    env["SIGNALS_SECONDS"] = "3"  # examples/signals.py's live window
    done = run_example(example, env, cwd=tmp_path)
    for line in expected:
        assert line in done.stdout, done.stdout


def test_messages_say_what_this_deployment_is_and_what_to_do(service: RunningService, funded: tuple[str, Path]) -> None:
    key, _ = funded
    rpc = b'{"jsonrpc":"2.0","id":3,"method":"getSlot"}'
    _, info, _ = fetch(f"{service.url}/account/info", None, {"X-Api-Key": key})
    funding = info["funding"]
    assert funding["network"] == "devnode" and "test chain" in funding["network_description"]
    assert "seconds" in funding["crediting"] and "30 seconds" not in funding["crediting"]
    assert "0.01" in funding["below_minimum"] and funding["minimum_deposit_usdc"] == "0.01"

    status, answer, headers = fetch(f"{service.url}/", rpc, {})  # no credentials
    assert status == 402 and answer["id"] == 3
    data = answer["error"]["data"]
    assert data["network"] == "devnode" and data["deposit_address"] == info["deposit_address"]
    assert "gateway fund" in data["instructions"] and "/account/confirm-deposit" in data["instructions"]
    assert "/x402/settle" in data["instructions"]  # x402 clients are told where to settle
    terms = orjson.loads(base64.b64decode(headers["payment-required"]))
    assert terms["accepts"][0]["network"] == "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1"  # devnet, for x402 SDKs

    broke = WalletSigner(bytes(Keypair()))
    empty_key = asyncio.run(_new_key(service.url, broke))
    status, answer, _ = fetch(f"{service.url}/", rpc, {"X-Api-Key": empty_key})
    assert status == 402 and answer["error"]["code"] == -32010
    assert answer["error"]["data"]["deposit_address"] == info["deposit_address"]
    assert broke.pubkey in answer["error"]["data"]["instructions"]

    status, answer, _ = fetch(f"{service.url}/", rpc, {"Authorization": f"Bearer {key}"})
    assert status == 401 and "X-Api-Key" in answer["error"]["message"], answer

    _, health, _ = fetch(f"{service.url}/health", None, {})
    assert health["service_profile"]["services"]["send"] is True
    _, pricing, _ = fetch(f"{service.url}/pricing", None, {})
    assert pricing["classes"]["SEND_AND_CONFIRM"]["not_available"] == []
    assert (pricing["send_and_confirm"]["landing_credits"], pricing["send_and_confirm"]["base_fee_credits"]) == (10, 2)
    assert pricing["classes"]["READ_CHEAP"]["not_available"] == []


async def _new_key(url: str, signer: WalletSigner) -> str:
    async with GatewayClient(url, signer=signer) as gw:
        return await gw.create_api_key()
