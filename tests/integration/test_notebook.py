"""The notebooks, executed as a data scientist runs them: a Jupyter kernel of their own, the gateway's
URL and an API key from the environment, against a gateway with signals (the feed devnode, the
classifier and the gateway of tests/client/conftest.py). The live window is kept short.

What the figures draw is checked, not only that a figure was drawn: a probe cell appended to the
executed copy prints, as JSON, the named data the notebook plots (`lifetimes`, `per_minute`,
`spend_by_class`, `calls_per_method`, `balance`, ...), and the tests compare it with the gateway's
own answers."""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from devnode.node import Devnode
from gateway.signals.store import SignalLog
from gateway_client import GatewayClient, RpcError
from gateway_client.account import read_history, read_ledger
from tests.client.conftest import api_key, chain, settings, signal_gateway, signal_log
from tests.support import RunningGateway

__all__ = ["api_key", "chain", "settings", "signal_gateway", "signal_log"]

pytestmark = pytest.mark.integration

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
SIGNALS = NOTEBOOKS / "signals.ipynb"
USAGE = NOTEBOOKS / "usage.ipynb"

#: Appended to the executed copy of signals.ipynb: the data behind its figures, and its pairing of
#: graduations with launches on a log that holds one mint's launch twice (a chain started again).
SIGNALS_PROBE = """
import json as _json

_t = lambda s: pd.Timestamp(s, unit="s", tz="UTC")
_repeated = pd.DataFrame(
    [
        {"kind": "newPair", "mint": "A", "slot": 10, "time": _t(1000)},
        {"kind": "graduation", "mint": "A", "slot": 127, "time": _t(1050)},
        {"kind": "newPair", "mint": "A", "slot": 3000, "time": _t(2000)},
        {"kind": "graduation", "mint": "A", "slot": 3760, "time": _t(2300)},
        {"kind": "graduation", "mint": "B", "slot": 50, "time": _t(1020)},
        {"kind": "newPair", "mint": "B", "slot": 60, "time": _t(1030)},
    ]
)
_per_minute = globals().get("per_minute")
_row = lambda e: [e["kind"], e["slot"], e["signature"], e["mint"], e["block_time"], e["sol_amount"]]
print("FIGURES " + _json.dumps({
    "lifetimes": lifetimes[["seconds", "slots"]].to_dict("list"),
    "graduations": len(graduated),
    "launches_plotted": 0 if launches.empty else int(_per_minute.to_numpy().sum()),
    "launches": len(launches),
    "swaps_plotted": len(swaps),
    "kinds": {k: int(v) for k, v in frame["kind"].value_counts().items()},
    "recent": [_row(e) for e in recent_events],
    "live": [_row(e) for e in live_events],
    "repeated": graduation_lifetimes(_repeated)[["mint", "seconds", "slots"]].to_dict("list"),
}, default=int))
"""

#: Appended to the executed copy of usage.ipynb: the data behind its figures.
USAGE_PROBE = """
import json as _json

print("FIGURES " + _json.dumps({
    "history_rows": len(history),
    "calls_per_method": calls_per_method.to_dict("index"),
    "spend_by_class": {k: int(v) for k, v in spend_by_class.sum().items()},
    "spend_check": {k: int(v) for k, v in spend_check.items()},
    "balance": [int(b) for b in balance["balance"]],
    "deposits": len(deposits),
    "info_balance": info["balance"],
    "latency": None if latency is None else len(latency),
}, default=int))
"""


def test_the_committed_notebooks_have_no_outputs() -> None:
    for path in (SIGNALS, USAGE):
        notebook = nbformat.read(path, as_version=4)
        nbformat.validate(notebook)
        code = [cell for cell in notebook.cells if cell.cell_type == "code"]
        assert code and all(cell.outputs == [] and cell.execution_count is None for cell in code), path


async def test_the_signals_notebook_plots_what_the_gateway_logged(
    signal_gateway: RunningGateway, api_key: str, signal_log: SignalLog, tmp_path: Path
) -> None:
    await until_logged(signal_log, {"newPair", "largeSwap"})  # the recent snapshot has something to plot
    env = {
        "GATEWAY_URL": signal_gateway.url,
        "GATEWAY_API_KEY": api_key,
        "GATEWAY_HOME": str(tmp_path),  # never a developer's own key
        "SIGNALS_LIVE_SECONDS": "3",
        "SIGNALS_LIVE_MAX_EVENTS": "40",
    }
    executed, figures = await execute(SIGNALS, env, SIGNALS_PROBE)

    texts = [text_of(cell) for cell in executed.cells if cell.cell_type == "code"]
    live = next(re.search(r"live: (\d+) events over (\d+) connection", t) for t in texts if "live: " in t)
    assert live is not None and int(live.group(1)) > 0 and live.group(2) == "1", texts
    assert re.search(r"\d+ recent events", "".join(texts))
    drawn = {section: has_figure(executed, section) for section in ("Launches", "graduation", "Large swaps")}
    assert drawn["Launches"] and drawn["Large swaps"], drawn
    assert drawn["graduation"] or "nothing to plot yet" in texts_after(executed, "graduation")

    # The frame is the recent snapshot and the live window, each event once; the figures count it.
    events = {
        (kind, sig, mint): (slot, time, sol) for kind, slot, sig, mint, time, sol in figures["recent"] + figures["live"]
    }
    kinds = Counter(kind for kind, _, _ in events)
    assert figures["kinds"] == dict(kinds)
    launches = sum(1 for (kind, _, _), (_, time, _) in events.items() if kind == "newPair" and time is not None)
    assert figures["launches_plotted"] == figures["launches"] == launches > 0
    assert figures["graduations"] == kinds["graduation"]
    swaps = sum(1 for (kind, _, _), (_, _, sol) in events.items() if kind == "largeSwap" and sol is not None)
    assert figures["swaps_plotted"] == swaps > 0
    # No lifetime is negative, and each graduation with its launch in the frame has one.
    assert all(s >= 0 for s in figures["lifetimes"]["seconds"]), figures["lifetimes"]
    assert all(s >= 0 for s in figures["lifetimes"]["slots"]), figures["lifetimes"]
    launched = {mint: slot for (kind, _, mint), (slot, _, _) in events.items() if kind == "newPair"}
    paired = [
        m for (kind, _, m), (slot, _, _) in events.items() if kind == "graduation" and launched.get(m, slot + 1) <= slot
    ]
    assert len(figures["lifetimes"]["seconds"]) == len(paired)
    # A mint launched twice: each graduation is paired with the latest launch before it, none with a later one.
    assert figures["repeated"] == {"mint": ["A", "A"], "seconds": [50.0, 300.0], "slots": [117, 760]}
    # The snapshot holds what GET /signals/recent holds, kind by kind, over the slots it covers whole.
    snapshot = figures["recent"]
    low, high = min(e[1] for e in snapshot), max(e[1] for e in snapshot)
    for kind in ("newPair", "graduation"):
        served = await recent_between(signal_gateway.url, kind, low, high)
        assert sorted(e[2] for e in snapshot if e[0] == kind and low < e[1]) == sorted(served), kind


async def test_the_usage_notebook_plots_the_accounts_records(
    signal_gateway: RunningGateway, api_key: str, chain: Devnode, tmp_path: Path
) -> None:
    """A new account (one deposit of 10,000 credits) makes 8 calls, one of them refunded; the notebook's
    spend, calls, refunds and balance are those of the ledger and the history."""
    async with GatewayClient(signal_gateway.url, api_key=api_key) as client:
        for _ in range(3):
            await client.rpc("getSlot")
        for _ in range(2):
            await client.rpc("getBalance", ["11111111111111111111111111111111"])
        await client.rpc("getLatestBlockhash")
        config = {"maxSupportedTransactionVersion": 0, "transactionDetails": "none", "rewards": False}
        await client.rpc("getBlock", [chain.chain.last_block.slot - 1, config])
        purged = chain.chain.first_available_block
        del chain.chain.blocks[purged]  # retention passed over the node's oldest block
        with pytest.raises(RpcError, match="cleaned up"):  # the node's own failure: refunded
            await client.rpc("getBlock", [purged, config])
        history, ledger = await until_settled(client, calls=8)
    spent = 3 + 2 + 1 + 25  # READ_CHEAP 1 each, READ_HEAVY 25, the refunded getBlock 0
    debits = -sum(e["amount"] for e in ledger if e["type"] == "debit")
    refunds = sum(e["amount"] for e in ledger if e["type"] == "refund")
    assert (debits, refunds) == (spent + 25, 25)

    env = {
        "GATEWAY_URL": signal_gateway.url,
        "GATEWAY_API_KEY": api_key,
        "GATEWAY_HOME": str(tmp_path),  # never a developer's own key
        "USAGE_HOURS": "1",
    }
    executed, figures = await execute(USAGE, env, USAGE_PROBE)

    for section in ("Spend by method class", "Calls and refunds", "Balance over time"):
        assert has_figure(executed, section), section
    assert "the history carries no latency" in texts_after(executed, "Latency")
    assert figures["latency"] is None
    # Calls: one per history row, refunds as the history marks them.
    assert figures["history_rows"] == len(history) == 8
    assert figures["calls_per_method"] == {
        "getSlot": {"calls": 3, "refunded": 0, "credits": 3},
        "getBalance": {"calls": 2, "refunded": 0, "credits": 2},
        "getLatestBlockhash": {"calls": 1, "refunded": 0, "credits": 1},
        "getBlock": {"calls": 2, "refunded": 1, "credits": 25},
    }
    # Spend: by class, summing to the ledger's debits less its refunds for the period.
    assert figures["spend_by_class"] == {"READ_CHEAP": 6, "READ_HEAVY": 25}
    assert figures["spend_check"] == {
        "history: credits charged": spent,
        "ledger: debits": debits,
        "ledger: refunds": refunds,
        "ledger: debits less refunds": spent,
    }
    # Balance: every ledger entry, ending where the account is, one deposit marked.
    assert figures["balance"] == [e["balance"] for e in reversed(ledger)]
    assert figures["balance"][0] == 10_000 and figures["balance"][-1] == figures["info_balance"] == 10_000 - spent
    assert figures["deposits"] == 1


async def execute(path: Path, env: dict[str, str], probe: str) -> tuple[Any, dict[str, Any]]:
    """Run the notebook with the probe cell appended; the executed notebook (probe removed) and what the
    probe printed."""
    notebook = nbformat.read(path, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(probe))
    client = NotebookClient(notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": path.parent}})
    env = {**os.environ, **env, "MPLBACKEND": "module://matplotlib_inline.backend_inline"}  # figures as outputs
    executed = await client.async_execute(env=env)  # a failing cell raises CellExecutionError
    printed = text_of(executed.cells.pop())
    found = re.search(r"^FIGURES (.*)$", printed, re.MULTILINE)
    assert found is not None, printed
    return executed, json.loads(found.group(1))


async def until_logged(log: SignalLog, kinds: set[str]) -> None:
    async with asyncio.timeout(60):  # a bound on a hang, not a measurement
        while True:
            if kinds <= {e.event["kind"] for e in (await log.recent(1000)).events}:
                return
            await asyncio.sleep(0.2)


async def until_settled(client: GatewayClient, calls: int) -> tuple[list[Any], list[Any]]:
    """The history and the ledger once every call is in both (calls settle about a second later)."""
    async with asyncio.timeout(30):  # a bound on a hang, not a measurement
        while True:
            history, ledger = await read_history(client), await read_ledger(client)
            charged = sum(e["credits"] for e in history)
            net = -sum(e["amount"] for e in ledger if e["type"] in ("debit", "refund"))
            if len(history) == calls and net == charged:
                return list(history), list(ledger)
            await asyncio.sleep(0.3)


async def recent_between(url: str, kind: str, low: int, high: int) -> list[str]:
    """The signatures of the logged ``kind`` events of slots after ``low`` up to ``high``, page by page."""
    found: list[str] = []
    before: str | None = None
    async with GatewayClient(url) as client:
        while True:
            page = await client.recent_signals(kind=kind, limit=1000, since_slot=low, before=before)
            found += [e["signature"] for e in page["events"] if e["slot"] <= high]
            if not page["more"] or not page["events"]:
                return found
            before = page["events"][-1]["id"]


def text_of(cell: Any) -> str:
    return "".join(out.get("text", "") + str(out.get("data", {}).get("text/plain", "")) for out in cell.outputs)


def section_cell(notebook: Any, heading: str) -> Any:
    """The code cell after the markdown heading that names ``heading``."""
    for before, cell in zip(notebook.cells, notebook.cells[1:], strict=False):
        if (
            before.cell_type == "markdown"
            and before.source.startswith("##")
            and heading in before.source.split("\n")[0]
        ):
            return cell
    raise AssertionError(f"no section {heading!r}")


def has_figure(notebook: Any, heading: str) -> bool:
    return any("image/png" in out.get("data", {}) for out in section_cell(notebook, heading).outputs)


def texts_after(notebook: Any, heading: str) -> str:
    return text_of(section_cell(notebook, heading))
