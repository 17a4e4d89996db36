"""A replica's stop, one named step after another, each bounded.

The stop settles money (the meter's usage, its leases, the account slices), so a step before it that
raises or never ends must not keep it from running: Serve kills a replica whose stop outlasts its grace
(``STOP_GRACE_S``), and usage not settled by then is never charged. Each step here gets ``within_s``;
one that fails is logged, one that overruns is logged with the await it is stuck in, cancelled, and the
stop goes on with the next. What went wrong is returned by name, for the caller to report.

Hand-written: ``asyncio.wait_for`` per step would do the bounding, but not name the stuck await,
which is what a stop that hangs once in many runs needs to be found. :func:`cancel_and_wait` is how
the background loops of the stores, the node's clients and the meter are stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

log = logging.getLogger(__name__)

Step = tuple[str, Callable[[], Awaitable[None]]]
#: How long one step of a stop may take. The longest is the meter's (``STOP_ATTEMPTS`` flushes,
#: ``STOP_RETRY_S`` apart, while the database is briefly unreachable: about 5 s and the flushes).
STEP_S = 15.0


async def stop_in_steps(steps: Sequence[Step], within_s: float = STEP_S) -> list[str]:
    """Run ``steps`` in order; the names of those that failed or overran (and were cancelled)."""
    troubled: list[str] = []
    for name, step in steps:
        task = asyncio.ensure_future(step())
        done, _ = await asyncio.wait({task}, timeout=within_s)
        if not done:
            log.error(
                "stopping: %s did not end within %g s; going on without it. It waits in:\n%s",
                name,
                within_s,
                await_chain(task),
            )
            task.cancel()
            await asyncio.wait({task}, timeout=1.0)  # one that ignores its cancellation is left to itself
            troubled.append(name)
        elif not task.cancelled() and task.exception() is not None:
            log.error("stopping: %s failed; going on", name, exc_info=task.exception())
            troubled.append(name)
    return troubled


async def cancel_and_wait(*tasks: asyncio.Future[Any] | None) -> None:
    """Cancel each task, then wait until each has ended (a task that had failed raises its error
    here). The None of a task never started is skipped."""
    started = [task for task in tasks if task is not None]
    for task in started:
        task.cancel()
    for task in started:
        with contextlib.suppress(asyncio.CancelledError):
            await task


def await_chain(task: asyncio.Future[Any]) -> str:
    """Where a task is suspended: each coroutine of its await chain, outermost first, then what the
    innermost waits on. ``Task.print_stack`` shows one frame of a suspended coroutine."""
    lines = []
    awaited: Any = task.get_coro() if isinstance(task, asyncio.Task) else task
    while awaited is not None:
        frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
        if frame is None:
            lines.append(f"  waiting on {awaited!r}"[:300])
            break
        lines.append(f"  {frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
        awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
    return "\n".join(lines)
