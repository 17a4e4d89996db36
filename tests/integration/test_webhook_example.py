"""Webhooks tried locally, as the README says: the stack ``gateway up`` starts on the embedded devnode
accepts a loopback receiver without any setting (and says so in its report and ``/capabilities``), and
``examples/webhook_receiver.py`` receives a signed ``api_key.rotated`` delivery and verifies it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from solders.keypair import Keypair

from tests.integration.service import RunningService, confirm_deposit, create_api_key, deposit_usdc, fetch, run_example

pytestmark = pytest.mark.integration


def test_the_devnode_stack_says_it_accepts_local_receivers(service: RunningService) -> None:
    assert "GATEWAY_WEBHOOK_ALLOW_PRIVATE" not in service.env  # the embedded devnode's default
    assert "local receivers accepted" in service.log.read_text()  # gateway up's report
    _, capabilities, _ = fetch(f"{service.url}/capabilities", None, {})
    assert capabilities["service_profile"]["services"]["webhook_private_targets"] is True


def test_the_webhook_example_receives_and_verifies_a_delivery(service: RunningService, tmp_path: Path) -> None:
    # a wallet of its own, with credits (a webhook needs a positive balance): the example rotates its key
    keypair = Keypair()
    key = create_api_key(service.url, keypair)
    confirm_deposit(service, deposit_usdc(service, keypair, 10_000), {"X-Api-Key": key})
    wallet = tmp_path / "wallet.json"
    wallet.write_text(json.dumps(list(bytes(keypair))))
    wallet.with_suffix(".api-key").write_text(key + "\n")  # as gateway fund saves it
    env = {**service.env, "GATEWAY_URL": service.url, "GATEWAY_WALLET": str(wallet), "WEBHOOK_WAIT_S": "60"}
    env.pop("GATEWAY_API_KEY", None)
    done = run_example("webhook_receiver.py", env)
    for line in ("posts api_key.rotated to http://127.0.0.1:", "received api_key.rotated evt_", "signature verified"):
        assert line in done.stdout, done.stdout
    assert '"replaced_previous": true' in done.stdout and "deleted" in done.stdout, done.stdout
    saved = wallet.with_suffix(".api-key").read_text().strip()
    assert saved != key and saved.startswith("srpc_live_")  # the new key, where gateway fund keeps it
    status, _, _ = fetch(f"{service.url}/account/info", None, {"X-Api-Key": saved})
    assert status == 200
