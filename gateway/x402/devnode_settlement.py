"""What sponsored x402 settlement needs on the embedded devnode, made at start-up (``gateway up`` only).

A sponsored payment (``POST /x402/settle``) is one TransferChecked whose fee the service's fee payer
(``keys/fee-payer.json``) pays, into the deposit wallet's USDC account, which it does not create. On a
fresh devnode the fee payer has no SOL and that account does not exist, so the stack airdrops SOL to the
fee payer (through the devnode's own RPC: the gateway denies requestAirdrop) and has it create the
account. The devnode keeps both across restarts; on a real network the operator funds the fee payer
and the first deposit (or the operator) creates the account (docs/api.md, x402).
"""

from __future__ import annotations

import base64
import logging
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from solders.hash import Hash
from solders.message import Message
from solders.pubkey import Pubkey
from solders.transaction import Transaction
from spl.token.instructions import create_idempotent_associated_token_account

from gateway.base.keys import DEPOSIT_WALLET, FEE_PAYER, load_or_create_keypair
from gateway.core.deposits import deposit_token_account

log = logging.getLogger(__name__)

#: What the fee payer is topped up to when it holds less than half: 1 test SOL, ~100,000 sponsored fees.
FEE_PAYER_LAMPORTS = 1_000_000_000
WAIT_S = 10.0


def prepare_sponsored_settlement(rpc_url: str, home: Path, usdc_mint: str) -> str:
    """Fund the fee payer and create the deposit account if needed; what was done, for the start-up report.

    A failure is reported, not raised: the gateway still starts, and sponsored settlements answer 503
    (the fee payer has no SOL) or 502 (no deposit account) until this is done by hand."""
    fee_payer = load_or_create_keypair(home / FEE_PAYER)
    deposit = load_or_create_keypair(home / DEPOSIT_WALLET).pubkey()
    ata = deposit_token_account(deposit, Pubkey.from_string(usdc_mint))
    try:
        if _rpc(rpc_url, "getBalance", [str(fee_payer.pubkey())])["value"] < FEE_PAYER_LAMPORTS // 2:
            _rpc(rpc_url, "requestAirdrop", [str(fee_payer.pubkey()), FEE_PAYER_LAMPORTS])
            _wait(lambda: _rpc(rpc_url, "getBalance", [str(fee_payer.pubkey())])["value"] > 0)
        if _rpc(rpc_url, "getAccountInfo", [str(ata), {"encoding": "base64"}])["value"] is None:
            blockhash = Hash.from_string(_rpc(rpc_url, "getLatestBlockhash", [])["value"]["blockhash"])
            create = create_idempotent_associated_token_account(
                fee_payer.pubkey(), deposit, Pubkey.from_string(usdc_mint)
            )
            tx = Transaction(
                [fee_payer], Message.new_with_blockhash([create], fee_payer.pubkey(), blockhash), blockhash
            )
            _rpc(rpc_url, "sendTransaction", [base64.b64encode(bytes(tx)).decode(), {"encoding": "base64"}])
            _wait(lambda: _rpc(rpc_url, "getAccountInfo", [str(ata), {"encoding": "base64"}])["value"] is not None)
    except (OSError, ValueError, KeyError, TypeError, TimeoutError) as exc:
        log.warning("could not prepare sponsored x402 settlement on the devnode: %s", exc)
        return f"sponsored settlement not ready: {exc} (fund {fee_payer.pubkey()} with SOL)"
    return f"fee payer {fee_payer.pubkey()} funded, deposit account {ata} ready (sponsored x402 payments)"


def _rpc(url: str, method: str, params: list[Any]) -> Any:
    body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=WAIT_S) as resp:
        answer = orjson.loads(resp.read())
    if "error" in answer:
        raise ValueError(f"{method}: {answer['error'].get('message')}")
    return answer["result"]


def _wait(done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the devnode did not apply it within {WAIT_S:g} s")
        time.sleep(0.1)
