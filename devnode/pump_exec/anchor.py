"""How an Anchor program (pump is one) reports an error: the `AnchorError` log line, then the code as the
instruction's custom error.

Source: coral-xyz/anchor `lang/src/error.rs` (`AnchorError::log`): `AnchorError caused by account: <name>. ...`
for an account that failed its checks (followed, when two keys were compared, by `Left:` / `Right:` and the keys),
`AnchorError occurred. ...` otherwise (the program's own `require!`s also name the source file and line, which
the devnode does not know, so it uses this form). Names and messages come from `pumpfun.errors`.
"""

from __future__ import annotations

from solders.pubkey import Pubkey

from devnode.pump_exec.context import Failed, custom
from pumpfun.errors import error_message, error_name

__all__ = ["anchor_failure"]


def anchor_failure(code: int, account: str | None = None, compared: tuple[Pubkey, Pubkey] | None = None) -> Failed:
    """The failure of error `code`, raised by the checks of `account` if given (`compared`: the actual key, then the
    expected one)."""
    origin = f"caused by account: {account}" if account is not None else "occurred"
    lines = [
        f"Program log: AnchorError {origin}. Error Code: {error_name(code)}. Error Number: {code}. "
        f"Error Message: {error_message(code)}.",
    ]
    if compared is not None:
        left, right = compared
        lines += ["Program log: Left:", f"Program log: {left}", "Program log: Right:", f"Program log: {right}"]
    return Failed(custom(code), lines)
