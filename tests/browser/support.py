"""Calling the page's script (js/page.mjs) from a test."""

from __future__ import annotations

from typing import Any

from playwright.async_api import Page


async def run(page: Page, function: str, *args: Any) -> dict[str, Any]:
    """``window.gateway[function](...args)`` in ``page``: ``{ok, value}`` or the error the page saw."""
    result: dict[str, Any] = await page.evaluate(f"(args) => window.gateway.{function}(...args)", list(args))
    return result
