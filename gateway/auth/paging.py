"""Paging of the account listings: newest first, by cursor or (bounded) offset. Pure.

``limit`` default 50, at most 1000; ``cursor`` (the ``next_cursor`` of the previous page, opaque)
pages by key, at the same cost however deep; ``offset`` (default 0, at most 10,000, not with a
cursor) is kept for docs/api.md's clients. Anything else is 400 INVALID_REQUEST rather than silently
clamped, so a client never mistakes a short page for the end; ``next_cursor`` is null on the last page.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gateway.core.errors import invalid_request

DEFAULT_LIMIT = 50
MAX_LIMIT = 1000
#: Deeper pages go by cursor: an offset makes the database walk every row before the page.
MAX_OFFSET = 10_000
_UINT = re.compile(r"[0-9]{1,19}")


@dataclass(frozen=True, slots=True)
class Page:
    offset: int
    limit: int
    before_id: int | None = None  # from the cursor: rows with a smaller id


def query_uint(query: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    """A whole-number query parameter within [low, high] (``default`` when absent); else 400 INVALID_REQUEST."""
    raw = query.get(name)
    if raw is None:
        return default
    if not _UINT.fullmatch(raw) or not low <= int(raw) <= high:
        raise invalid_request(f"{name} must be an integer from {low} to {high}")
    return int(raw)


def parse_page(query: Mapping[str, str]) -> Page:
    """``limit`` (default 50, max 1000), and ``cursor`` or ``offset`` (default 0, max 10,000); bad
    values are 400 INVALID_REQUEST."""
    limit = query_uint(query, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    if "cursor" in query:
        if "offset" in query:
            raise invalid_request("give either cursor or offset, not both")
        return Page(0, limit, query_uint(query, "cursor", 0, 1, 2**63 - 1))
    offset = query_uint(query, "offset", 0, 0, MAX_OFFSET)
    return Page(offset, limit)


def page_document(entries: list[dict[str, Any]], last_id: int | None, page: Page) -> dict[str, Any]:
    """``{entries, next_cursor}``: the cursor of the next page, or null when this one is the last."""
    full = len(entries) == page.limit and last_id is not None
    return {"entries": entries, "next_cursor": str(last_id) if full else None}
