"""What the x402 SDK's Solana client needs of solana-py < 0.40, given to it in the tests only.

``x402==2.25.0`` (``x402/mechanisms/svm``) imports ``solana.rpc.api.Client`` (the synchronous client,
removed in solana 0.41, which the gateway uses) and ``solana.rpc.types.TxOpts`` (moved to
``solana.rpc.models``). Its client scheme calls two methods of that client: ``get_account_info`` (the
mint's owner and decimals) and ``get_latest_blockhash``. This module stands in for them with
blocking JSON-RPC calls parsed by solders' own response types, so the SDK builds its payment exactly as
it would against solana-py 0.39. The product never imports it: the SDK is a test dependency only.

The SDK's calls block, and the tests' devnode answers on the test's own event loop: run the SDK's
``create_payment_payload`` in a thread (``asyncio.to_thread``).
"""

from __future__ import annotations

import sys
import types
import urllib.request
from typing import Any

import orjson
import pytest
import solana.rpc
import solana.rpc.models
import solana.rpc.types
from solders.pubkey import Pubkey
from solders.rpc.responses import GetAccountInfoResp, GetLatestBlockhashResp


class Client:
    """``solana.rpc.api.Client`` as far as the SDK uses it."""

    def __init__(self, endpoint: str, *args: Any, **kwargs: Any) -> None:
        self.endpoint = endpoint

    def _call(self, method: str, params: list[Any]) -> str:
        body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        req = urllib.request.Request(self.endpoint, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return str(resp.read().decode())

    def get_account_info(self, pubkey: Pubkey, *args: Any, **kwargs: Any) -> GetAccountInfoResp:
        raw = self._call("getAccountInfo", [str(pubkey), {"encoding": "base64"}])
        answer = GetAccountInfoResp.from_json(raw)
        assert isinstance(answer, GetAccountInfoResp), answer  # else the node answered an error
        return answer

    def get_latest_blockhash(self, *args: Any, **kwargs: Any) -> GetLatestBlockhashResp:
        answer = GetLatestBlockhashResp.from_json(self._call("getLatestBlockhash", []))
        assert isinstance(answer, GetLatestBlockhashResp), answer
        return answer


def install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``solana.rpc.api`` and ``solana.rpc.types.TxOpts`` importable for the SDK."""
    api = types.ModuleType("solana.rpc.api")
    api.Client = Client  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "solana.rpc.api", api)
    monkeypatch.setattr(solana.rpc, "api", api, raising=False)
    monkeypatch.setattr(solana.rpc.types, "TxOpts", solana.rpc.models.TxOpts, raising=False)
