"""notebooks/signals.ipynb, executed as a data scientist runs it: a Jupyter kernel of its own, the
gateway's URL and an API key from the environment, against a gateway with signals (the feed devnode,
the classifier and the gateway of tests/client/conftest.py). The live window is kept short."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from gateway.storage.signals import SignalLog
from tests.client.conftest import api_key, chain, settings, signal_gateway, signal_log
from tests.support import RunningGateway

__all__ = ["api_key", "chain", "settings", "signal_gateway", "signal_log"]

pytestmark = pytest.mark.integration

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "signals.ipynb"


def test_the_committed_notebook_has_no_outputs() -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(cell.outputs == [] and cell.execution_count is None for cell in code)


async def test_the_notebook_runs_against_the_gateway(
    signal_gateway: RunningGateway, api_key: str, signal_log: SignalLog, tmp_path: Path
) -> None:
    await until_logged(signal_log, {"newPair", "largeSwap"})  # the recent snapshot has something to plot
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    env = {
        **os.environ,
        "GATEWAY_URL": signal_gateway.url,
        "GATEWAY_API_KEY": api_key,
        "GATEWAY_HOME": str(tmp_path),  # never a developer's own key
        "SIGNALS_LIVE_SECONDS": "3",
        "SIGNALS_LIVE_MAX_EVENTS": "40",
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",  # figures as outputs, as in Jupyter
    }
    client = NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": NOTEBOOK.parent}}
    )
    executed = await client.async_execute(env=env)  # a failing cell raises CellExecutionError

    texts = [text_of(cell) for cell in executed.cells if cell.cell_type == "code"]
    live = next(re.search(r"live: (\d+) events over (\d+) connection", t) for t in texts if "live: " in t)
    assert live is not None and int(live.group(1)) > 0 and live.group(2) == "1", texts
    assert re.search(r"\d+ recent events", "".join(texts))
    figures = {section: has_figure(executed, section) for section in ("Launches", "graduation", "Large swaps")}
    assert figures["Launches"] and figures["Large swaps"], figures
    graduations = texts_after(executed, "graduation")
    assert figures["graduation"] or "nothing to plot yet" in graduations


async def until_logged(log: SignalLog, kinds: set[str]) -> None:
    async with asyncio.timeout(60):  # a bound on a hang, not a measurement
        while True:
            if kinds <= {e.event["kind"] for e in (await log.recent(1000)).events}:
                return
            await asyncio.sleep(0.2)


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
