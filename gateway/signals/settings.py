"""The signals stream's settings: which programs and wallets the classifier watches, what counts as a
large swap, how often it polls and how many events are kept."""

from __future__ import annotations

from pydantic import Field, field_validator

from gateway.base.config import ServiceSettings
from gateway.signals.rules import DEFAULT_LARGE_SWAP_LAMPORTS, DEFAULT_SIGNAL_PROGRAMS, is_pubkey


class SignalSettings(ServiceSettings):
    """What the signal classifier watches and keeps."""

    signal_programs: list[str] = Field(
        default_factory=lambda: list(DEFAULT_SIGNAL_PROGRAMS),
        min_length=1,
        max_length=64,
        description="Programs the signal classifier watches (base58 ids); events are decoded for pump.fun and "
        "PumpSwap, any other counts for walletActivity. Default: pump.fun (classic and v2 curves) and PumpSwap.",
    )
    signal_large_swap_lamports: int = Field(
        DEFAULT_LARGE_SWAP_LAMPORTS, ge=1, description="A pump.fun trade of at least this many lamports is a largeSwap."
    )
    signal_wallets: list[str] = Field(
        default_factory=list,
        max_length=10_000,
        description="Wallets (base58) whose signed transactions on a watched program are walletActivity signals.",
    )
    signal_retention_events: int = Field(
        10_000, ge=100, le=1_000_000, description="Signal events kept in the Redis log (and per kind)."
    )
    signal_poll_s: float = Field(0.4, gt=0, le=60, description="How often the signal classifier polls the node.")

    @field_validator("signal_programs", "signal_wallets")
    @classmethod
    def _check_pubkeys(cls, value: list[str]) -> list[str]:
        bad = next((key for key in value if not is_pubkey(key)), None)
        if bad is not None:
            raise ValueError(f"{bad!r} is not a base58 public key")
        return list(dict.fromkeys(value))
