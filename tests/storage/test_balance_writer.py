"""An account's balance is set in one module: gateway/storage/ledger/moves.py (debit, refund, grant,
expire). Every other credit writer (deposits, expiry, leases, sends, webhook charges, the operator's
commands) calls it, so the conservation of gateway/storage/ledger holds by that module's steps alone.
This reads the source: a new ``UPDATE accounts SET ... balance = ...`` anywhere else fails it."""

from __future__ import annotations

import re
from pathlib import Path

import gateway

ROOT = Path(gateway.__file__).parent
#: An UPDATE of ``accounts`` whose SET list assigns ``balance`` (within one statement's text).
SETS_BALANCE = re.compile(r"UPDATE\s+accounts\b[^;\"']{0,400}?\bSET\b[^;\"']{0,400}?(?<![\w.])balance\s*=", re.S)
WRITER = ROOT / "storage" / "ledger" / "moves.py"


def writers() -> set[Path]:
    return {path for path in ROOT.rglob("*.py") if SETS_BALANCE.search(path.read_text())}


def test_only_the_moves_module_sets_a_balance() -> None:
    assert writers() == {WRITER}


def test_the_pattern_finds_a_balance_set_as_the_ledger_writes_it() -> None:
    """The check above cannot pass by matching nothing."""
    assert SETS_BALANCE.search('"UPDATE accounts SET balance = $2 WHERE pubkey = $1"')
    assert SETS_BALANCE.search('"""UPDATE accounts SET status = $3,\n   balance = $2 WHERE pubkey = $1"""')
    assert not SETS_BALANCE.search('"UPDATE accounts SET low_balance_notified = true WHERE pubkey = $1"')
    assert not SETS_BALANCE.search('"UPDATE accounts SET status = $2 WHERE pubkey = $1"')
