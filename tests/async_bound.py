"""A bound in asyncio on every coroutine test, shorter than pytest-timeout's.

pytest-timeout fails a hung test from a signal handler: the exception leaves the event loop's ``select``,
and the test's coroutine is abandoned on the session's loop with everything it holds still running (a
server, its streams' seats at Redis, its sockets), so the tests after it fail for the hung one. A test
bounded in asyncio instead is cancelled where it waits: its ``async with`` blocks unwind, and the failure
names the await that hung. pytest-timeout stays behind it for a hang the unwinding itself cannot leave.

The bound is ``FRACTION`` of the test's own pytest-timeout (its ``timeout`` mark, else the ini's), so a test
that asks for more time gets it here too. Fixtures are not bounded: a fixture's hang is pytest-timeout's.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from pytest_asyncio.plugin import Coroutine

#: Of the test's pytest-timeout: the rest is the unwinding's.
FRACTION = 0.9


def bound_s(item: pytest.Item) -> float | None:
    """The test's bound in seconds, or None when pytest-timeout does not bound it either."""
    mark = item.get_closest_marker("timeout")
    if mark is not None and (mark.args or "timeout" in mark.kwargs):
        timeout = mark.args[0] if mark.args else mark.kwargs["timeout"]
    else:
        timeout = item.config.getini("timeout")
    seconds = float(timeout or 0)
    return seconds * FRACTION if seconds > 0 else None


def bounded(test: Callable[..., Awaitable[Any]], seconds: float) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(test)
    async def run(*args: Any, **kwargs: Any) -> Any:
        try:
            async with asyncio.timeout(seconds):
                return await test(*args, **kwargs)
        except TimeoutError as exc:
            # The cause keeps the stack of the await that was cancelled; the message says it was this bound.
            raise pytest.fail.Exception(f"the test ran past its bound in asyncio ({seconds:g} s)") from exc

    return run


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if type(item) is Coroutine:  # not its subclasses (hypothesis runs its own coroutine)
            seconds = bound_s(item)
            if seconds is not None:
                item.obj = bounded(item.obj, seconds)
