"""Tips: the block engine's tip accounts, how much a transaction tips, and the tip floor.

The tip accounts are mainnet's (getTipAccounts of Jito's block engine), so a bundle built for
mainnet runs here unchanged. A tip is a top-level System transfer to one of them (lookup tables are
not followed: Jito says not to put tip accounts in them). The engine creates the tip accounts,
rent-exempt and owned by the tip payment program as on mainnet, so a first small tip does not fail
for rent. The tip floor is computed from the tips of landed bundles in whole lamports; SOL appears
only in the rendered answer, as Jito's is in SOL.
"""

from __future__ import annotations

import datetime
from collections import deque
from typing import Any

from solders.pubkey import Pubkey
from solders.system_program import ID as SYSTEM_PROGRAM_ID
from solders.transaction import VersionedTransaction

# The same list as gateway/sending/bundles.py TIP_ACCOUNTS, duplicated: the devnode never imports the gateway.
TIP_ACCOUNTS: tuple[Pubkey, ...] = tuple(
    Pubkey.from_string(a)
    for a in (
        "96gYZGLnJYVFmbjzopPSU6QiEV5fGqZNyN9nmNhvrZU5",
        "HFqU5x63VTqvQss8hp11i4wVV8bD44PvwucfZ2bU7gRe",
        "Cw8CFyM9FkoMi7K7Crf6HNQqf4uEMzpKw6QNghXLvLkY",
        "ADaUMid9yfUytqMBgopwjb2DTLSokTSzL1zt6iGPaS49",
        "DfXygSm4jCyNCybVYYK6DwvWqjKee8pbDmJGcLWNDXjh",
        "ADuUkR4vqLUMWXxW9gh6D6L8pMSawimctcNZ5pGwDcEt",
        "DttWaMuVvTiduZRnguLF7jNxTgiMBZ1hyAumKUiL2KRL",
        "3AVi9Tg9Uo68tJfuvoKvqKNWKkC5wPdSSdeBnizKZ6jT",
    )
)
TIP_PAYMENT_PROGRAM = Pubkey.from_string("T1pyyaTNZsKv2WcRAB8oVnk93mLJw2XzjtVYqCsaHqt")  # owns them on mainnet
MIN_TIP_LAMPORTS = 1_000
LAMPORTS_PER_SOL = 1_000_000_000
TIP_WINDOW = 1_000  # landed tips the floor is computed from
EMA_WEIGHT = 10  # the EMA moves a tenth of the way to each new median
PERCENTILES = (25, 50, 75, 95, 99)

_TIP_SET = frozenset(TIP_ACCOUNTS)
_SYSTEM_TRANSFER = (2).to_bytes(4, "little")


def tip_of(tx: VersionedTransaction) -> int:
    """Lamports the transaction's top-level System transfers send to the tip accounts."""
    keys = tx.message.account_keys
    total = 0
    for ix in tx.message.instructions:
        data = bytes(ix.data)
        if keys[ix.program_id_index] != SYSTEM_PROGRAM_ID or len(data) != 12 or data[:4] != _SYSTEM_TRANSFER:
            continue
        accounts = bytes(ix.accounts)
        if len(accounts) >= 2 and accounts[1] < len(keys) and keys[accounts[1]] in _TIP_SET:
            total += int.from_bytes(data[4:], "little")
    return total


class TipFloor:
    """Percentiles of the last `TIP_WINDOW` landed tips and an EMA of their median, in lamports."""

    def __init__(self) -> None:
        self._tips: deque[int] = deque(maxlen=TIP_WINDOW)
        self._ema_median: int | None = None

    def add(self, lamports: int) -> None:
        self._tips.append(lamports)
        median = self.percentile(50)
        if self._ema_median is None:
            self._ema_median = median
        else:
            self._ema_median = (self._ema_median * (EMA_WEIGHT - 1) + median + EMA_WEIGHT // 2) // EMA_WEIGHT

    def percentile(self, p: int) -> int:
        """Nearest rank; the minimum tip while nothing has landed."""
        if not self._tips:
            return MIN_TIP_LAMPORTS
        ordered = sorted(self._tips)
        return ordered[max(0, (p * len(ordered) + 99) // 100 - 1)]

    def render(self, now: datetime.datetime) -> list[dict[str, Any]]:
        """The `GET /api/v1/bundles/tip_floor` answer: one object, values in SOL."""
        out: dict[str, Any] = {"time": now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
        for p in PERCENTILES:
            out[f"landed_tips_{p}th_percentile"] = self.percentile(p) / LAMPORTS_PER_SOL
        ema = self._ema_median if self._ema_median is not None else MIN_TIP_LAMPORTS
        out["ema_landed_tips_50th_percentile"] = ema / LAMPORTS_PER_SOL
        return [out]
