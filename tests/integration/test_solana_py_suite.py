"""Issue 39: solana-py's own integration suite (the tests of its sdist, ``ops/install-foreign-clients``
unpacks them into ``build/foreign``), unchanged, through a whole stack of the gateway: every call goes
to the gateway (``/?api-key=``, ``/ws?api-key=``) but the airdrops, which the gateway denies and which go
to the devnode itself (``tests/foreign/solana_py/airdrop_plugin.py``). What cannot pass is listed below
with why; anything else that fails is a defect.

The stack is the package's (tests/integration/conftest.py), which keeps every block: the suite reads blocks 2
to 10. Its account, this module's own, has its rate limit raised (``gateway account limits``): the suite confirms
in tight loops and solana-py does not retry a 429 (docs/api.md, Compatibility)."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.integration.service import (
    Customer,
    RunningService,
    funded_customer,
)

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "build" / "foreign" / f"solana-{importlib.metadata.version('solana')}"
PLUGIN_DIR = ROOT / "tests" / "foreign" / "solana_py"
#: Tests of the suite that cannot pass through this gateway, and why (pytest's junit names).
KNOWN_FAILURES = {
    "tests.integration.test_async_http_client::test_get_supply": "getSupply is denied (-32601; docs/api.md)",
    "tests.integration.test_async_http_client::test_get_token_largest_accounts": "getTokenLargestAccounts is "
    "denied (-32601; docs/api.md)",
    "tests.integration.test_async_http_client::test_get_largest_accounts": "getLargestAccounts is not a "
    "method of the interface (-32601)",
    "tests.integration.test_spl_memo::test_send_memo_in_transaction": "reads the memo program's log line by "
    "position; the devnode's logs differ (fails against the devnode directly too)",
    "tests.integration.test_websockets::test_vote_subscribe": "the devnode has no voters",
}
#: Left out of the run: it sleeps 60 s for performance samples to exist (getRecentPerformanceSamples is
#: served: forwarded as every node read is, tests/rpc).
NOT_RUN = ["tests/integration/test_recent_performance_samples.py"]
#: Left out of the run too: it waits for a vote's log line, which never comes (the devnode has no voters),
#: until the run's 120 s timeout fails it; it failed so in every run, and took the suite from 15 s to 135.
DESELECTED = ["tests/integration/test_websockets.py::test_logs_subscribe_all_with_votes_receives_vote_log"]
SUITE_TIMEOUT_S = 900


@pytest.fixture(scope="module")
def stack(service: RunningService) -> tuple[RunningService, Customer]:
    customer = funded_customer(service)
    limits = [str(Path(sys.executable).with_name("gateway")), "account", "limits", str(customer.wallet.pubkey())]
    limits += ["--rate", "1000", "--concurrency", "256", "--reason", "solana-py's suite"]
    subprocess.run(limits, env=service.env, check=True, capture_output=True, timeout=120)
    return service, customer


def test_solana_pys_own_suite(stack: tuple[RunningService, Customer], tmp_path: Path) -> None:
    assert (SUITE / "tests" / "conftest.py").exists(), "solana-py's suite is missing: run ./ops/install-foreign-clients"
    service, customer = stack
    rpc = f"{service.url}/?api-key={customer.api_key}"
    env = {
        **os.environ,
        "SOLANA_VALIDATOR_EXTERNAL": "1",
        "SOLANA_VALIDATOR_EXTERNAL_RPC_URL": rpc,
        "SOLANA_VALIDATOR_EXTERNAL_WS_URL": f"{service.url.replace('http', 'ws', 1)}/ws?api-key={customer.api_key}",
        "SOLANA_PY_AIRDROP_URL": service.node_url,
        "PYTHONPATH": str(PLUGIN_DIR),
    }
    report = tmp_path / "junit.xml"
    command = [sys.executable, "-m", "pytest", "tests/integration", "-o", "addopts=", "-p", "airdrop_plugin"]
    command += ["-p", "no:cacheprovider", "-q", "--timeout", "120", f"--junitxml={report}"]
    command += [f"--ignore={path}" for path in NOT_RUN] + [f"--deselect={test}" for test in DESELECTED]
    run = subprocess.run(command, cwd=SUITE, env=env, capture_output=True, text=True, timeout=SUITE_TIMEOUT_S)
    cases = ET.parse(report).getroot().iter("testcase")
    outcomes = {f"{case.get('classname')}::{case.get('name')}": case for case in cases}
    failed = {
        name for name, case in outcomes.items() if case.find("failure") is not None or case.find("error") is not None
    }
    skipped = {name for name, case in outcomes.items() if case.find("skipped") is not None}
    summary = run.stdout[-3000:]
    assert failed - KNOWN_FAILURES.keys() == set(), f"defects (not known failures):\n{summary}"
    assert KNOWN_FAILURES.keys() - failed == set(), f"known failures that now pass: update KNOWN_FAILURES\n{summary}"
    # The suite's own two skips (getInflationReward, blockSubscribe); all the rest passed (66 of the 73 run).
    assert len(skipped) == 2 and len(outcomes) - len(failed) - len(skipped) >= 66, summary
