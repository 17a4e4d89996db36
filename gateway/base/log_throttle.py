"""A warning that can repeat with every call, logged at most once per ``every_s`` with how many were left out.

While the node is down every forwarded call fails the same way: thousands of identical warnings a
second per replica, each one written and, on a Ray cluster, shipped to the driver by Ray's log monitor,
at the moment the machine is busiest with retries. The metrics count every failure
(``gateway_upstream_request_duration_seconds`` by outcome); the log needs one line per kind now and then.

Hand-written: :mod:`logging` has no rate limit, and a filter on the handler would drop records after
they were formatted. Kinds are the call sites' own constants, so the table stays as small as the code.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class LogThrottle:
    def __init__(
        self, logger: logging.Logger, every_s: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.logger = logger
        self.every_s = every_s
        self.clock = clock
        self._last: dict[str, float] = {}  # when each kind was last logged
        self._left: dict[str, int] = {}  # how many of each kind were left out since

    def warning(self, kind: str, message: str, *args: object) -> None:
        """Log ``message % args`` if no warning of ``kind`` was logged in the last ``every_s``, with the
        count of those left out meanwhile; else count it."""
        now = self.clock()
        last = self._last.get(kind)
        if last is not None and now - last < self.every_s:
            self._left[kind] = self._left.get(kind, 0) + 1
            return
        self._last[kind] = now
        left = self._left.pop(kind, 0)
        if left:
            message += " (and %d more like it in the last %.0f s, not logged)"
            args = (*args, left, now - last if last is not None else 0.0)
        self.logger.warning(message, *args, stacklevel=2)  # the record names the caller
