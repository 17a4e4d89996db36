"""The sending tests' fixtures (a gateway in this process in front of the session's devnode, a paying
caller, a funded payer): reads with added value need real fee-paying transactions on the chain."""

from __future__ import annotations

from tests.sending.conftest import caller, gateway, payer

__all__ = ["caller", "gateway", "payer"]
