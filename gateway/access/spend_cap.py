"""The daily spend cap's rules (docs/api.md, "Spend cap"): which caps an account may set.

The cap is enforced below this package, where each charge is decided, and those pieces stay there:
the layers contract (pyproject.toml) puts ``gateway.storage``, ``gateway.credits`` and ``gateway.auth``
below ``gateway.access``, so they cannot import from here.

- what a charge may still take today (``room``) and today's spending: :mod:`gateway.storage.ledger.cap`,
  read from the account's locked row inside every lease, hold and delivery transaction;
- the refusal, 403 ``SPEND_CAP_REACHED``: :func:`gateway.credits.errors.spend_cap_reached`, raised by
  the metering stages of every transport;
- the cap as shown (``remaining_today``, ``resets_at``): :func:`gateway.auth.account_views.spend_cap_document`,
  part of ``GET /account/info``.

Setting the cap (this module's rule, then :mod:`gateway.access.store`) asks every process to give back
its leases of the account, which were granted under the old cap.
"""

from __future__ import annotations

from typing import Any

from gateway.core.errors import invalid_request

#: The largest cap accepted: more credits than any balance can hold.
MAX_CAP = 10**15


def requested_cap(document: Any) -> int | None:
    """The cap a ``POST /account/spend-cap`` body asks for (None: no cap); 400 INVALID_REQUEST otherwise."""
    if not isinstance(document, dict) or set(document) - {"daily_credits"}:
        raise invalid_request("body must be {daily_credits: <credits a UTC day, 1 or more> | null}")
    cap = document.get("daily_credits")
    if cap is None:
        return None
    if not isinstance(cap, int) or isinstance(cap, bool) or not 1 <= cap <= MAX_CAP:
        raise invalid_request(f"daily_credits must be a whole number of credits, 1 to {MAX_CAP}, or null")
    return cap
