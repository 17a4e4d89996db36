"""MCP logging (``logging/setLevel`` and ``notifications/message``) for the stateless ``/mcp``.

The transport keeps no session, so the level a caller sets is kept per account (the authenticated
caller's public key) on the replica that answered, in a bounded LRU: a replica that has not seen the
caller's ``logging/setLevel`` sends it nothing. A caller that never set a level gets no log
notifications, and its answers stay single JSON objects (docs/api.md, MCP).
"""

from __future__ import annotations

from collections import OrderedDict

#: MCP's severities, least severe first (RFC 5424's names).
LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
_RANK = {name: rank for rank, name in enumerate(LEVELS)}
#: Callers whose level one replica remembers; the least recently used is forgotten past it.
MAX_CALLERS = 10_000


class LogLevels:
    """Each caller's threshold, most recently set last."""

    def __init__(self, capacity: int = MAX_CALLERS) -> None:
        self._capacity = capacity
        self._levels: OrderedDict[str, int] = OrderedDict()

    def set(self, caller: str, level: str) -> None:
        self._levels[caller] = _RANK[level]
        self._levels.move_to_end(caller)
        while len(self._levels) > self._capacity:
            self._levels.popitem(last=False)

    def is_set(self, caller: str) -> bool:
        return caller in self._levels

    def wants(self, caller: str, level: str) -> bool:
        """Whether ``caller`` asked for messages of ``level`` (False when it set no level here)."""
        threshold = self._levels.get(caller)
        return threshold is not None and _RANK[level] >= threshold
