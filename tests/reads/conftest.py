"""The sending tests' fixtures (tests/sending/conftest.py): a gateway in this process in front of the
session's devnode, a paying caller, a funded payer, and a gateway behind a relay that can fail on
purpose. Reads with added value need real fee-paying transactions on the chain."""

from __future__ import annotations

from tests.sending.conftest import (
    FailingRelay,
    caller,
    caller_at,
    charged,
    gateway,
    payer,
    relay,
    relayed_caller,
)

__all__ = ["FailingRelay", "caller", "caller_at", "charged", "gateway", "payer", "relay", "relayed_caller"]
