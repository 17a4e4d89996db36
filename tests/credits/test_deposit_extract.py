"""extract_deposits / scan_deposits on hand-built jsonParsed getTransaction results (no chain, no database)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from solders.keypair import Keypair
from solders.pubkey import Pubkey
from spl.token.instructions import get_associated_token_address

from gateway.app.settings import Settings
from gateway.base.config import ConfigError
from gateway.core.deposits import (
    REASON_FAILED,
    REASON_MALFORMED,
    REASON_NO_TRANSFER,
    REASON_WRONG_MINT,
    TOKEN_2022_PROGRAM_ID,
    TOKEN_PROGRAM_ID,
    DepositTransfer,
    deposit_token_account,
    extract_deposits,
    scan_deposits,
)
from gateway.credits.chain_reads import deposit_ata_for, deposit_credits

USDC = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v"
OTHER_MINT = str(Keypair().pubkey())
WALLET = Keypair().pubkey()
ATA = str(deposit_token_account(WALLET, Pubkey.from_string(USDC)))
PAYER = str(Keypair().pubkey())
SOURCE = str(Keypair().pubkey())
SYSTEM = "11111111111111111111111111111111"


def transfer_ix(
    amount: int, dest: str = ATA, authority: str = PAYER, program: str = TOKEN_PROGRAM_ID
) -> dict[str, Any]:
    return {
        "program": "spl-token",
        "programId": program,
        "parsed": {
            "type": "transfer",
            "info": {"source": SOURCE, "destination": dest, "authority": authority, "amount": str(amount)},
        },
        "stackHeight": None,
    }


def transfer_checked_ix(
    amount: int, dest: str = ATA, authority: str = PAYER, mint: str = USDC, program: str = TOKEN_PROGRAM_ID
) -> dict[str, Any]:
    return {
        "program": "spl-token",
        "programId": program,
        "parsed": {
            "type": "transferChecked",
            "info": {
                "source": SOURCE,
                "destination": dest,
                "authority": authority,
                "mint": mint,
                "tokenAmount": {
                    "amount": str(amount),
                    "decimals": 6,
                    "uiAmount": amount / 1e6,
                    "uiAmountString": str(amount / 1e6),
                },
            },
        },
        "stackHeight": None,
    }


def sol_transfer_ix(lamports: int, dest: str = str(WALLET)) -> dict[str, Any]:
    return {
        "program": "system",
        "programId": SYSTEM,
        "parsed": {"type": "transfer", "info": {"source": PAYER, "destination": dest, "lamports": lamports}},
        "stackHeight": None,
    }


def tx(
    instructions: list[dict[str, Any]],
    inner: list[dict[str, Any]] | None = None,
    err: Any = None,
    balances: list[dict[str, Any]] | None = None,
    keys: list[str] | None = None,
) -> dict[str, Any]:
    account_keys = keys or [PAYER, SOURCE, ATA, USDC, TOKEN_PROGRAM_ID]
    return {
        "slot": 42,
        "blockTime": 1_700_000_000,
        "version": 0,
        "meta": {
            "err": err,
            "status": {"Ok": None} if err is None else {"Err": err},
            "fee": 5000,
            "innerInstructions": inner or [],
            "preTokenBalances": balances or [],
            "postTokenBalances": balances or [],
            "logMessages": [],
        },
        "transaction": {
            "signatures": ["x"],
            "message": {
                "accountKeys": [
                    {"pubkey": k, "signer": i == 0, "writable": True, "source": "transaction"}
                    for i, k in enumerate(account_keys)
                ],
                "instructions": instructions,
                "recentBlockhash": "11111111111111111111111111111111",
            },
        },
    }


def balance(index: int, mint: str) -> dict[str, Any]:
    return {
        "accountIndex": index,
        "mint": mint,
        "owner": str(WALLET),
        "programId": TOKEN_PROGRAM_ID,
        "uiTokenAmount": {"amount": "0", "decimals": 6, "uiAmount": 0.0, "uiAmountString": "0"},
    }


def test_ata_matches_spl_derivation() -> None:
    assert deposit_token_account(WALLET, Pubkey.from_string(USDC)) == get_associated_token_address(
        WALLET, Pubkey.from_string(USDC)
    )


def test_transfer_checked_credited_to_authority() -> None:
    [d] = extract_deposits(tx([transfer_checked_ix(1_500_000)]), ATA, USDC)
    assert (d.authority, d.amount_base_units, d.kind, d.location) == (PAYER, 1_500_000, "transferChecked", "0")
    assert d.source == SOURCE


def test_plain_transfer_into_usdc_ata() -> None:
    [d] = extract_deposits(tx([transfer_ix(20_000)], balances=[balance(2, USDC)]), ATA, USDC)
    assert (d.authority, d.amount_base_units, d.kind) == (PAYER, 20_000, "transfer")


def test_plain_transfer_rejected_when_balances_show_other_mint() -> None:
    scan = scan_deposits(tx([transfer_ix(20_000)], balances=[balance(2, OTHER_MINT)]), ATA, USDC)
    assert scan.transfers == [] and scan.reason == REASON_WRONG_MINT


def test_inner_instruction_found() -> None:
    program = str(Keypair().pubkey())
    outer = {"programId": program, "accounts": [PAYER], "data": "3Bxs4", "stackHeight": None}
    inner = [{"index": 1, "instructions": [sol_transfer_ix(5), transfer_checked_ix(77_000)]}]
    found = extract_deposits(tx([sol_transfer_ix(1), outer], inner=inner), ATA, USDC)
    assert [(d.location, d.amount_base_units) for d in found] == [("1.1", 77_000)]


def test_top_and_inner_in_order() -> None:
    inner = [{"index": 0, "instructions": [transfer_ix(30_000)]}]
    found = extract_deposits(tx([transfer_checked_ix(10_000), transfer_checked_ix(20_000)], inner=inner), ATA, USDC)
    assert [(d.location, d.amount_base_units) for d in found] == [("0", 10_000), ("0.0", 30_000), ("1", 20_000)]


def test_wrong_mint_transfer_checked() -> None:
    scan = scan_deposits(tx([transfer_checked_ix(1_000_000, mint=OTHER_MINT)]), ATA, USDC)
    assert scan.transfers == [] and scan.reason == REASON_WRONG_MINT


def test_other_destination_ignored() -> None:
    scan = scan_deposits(tx([transfer_checked_ix(1_000_000, dest=str(Keypair().pubkey()))]), ATA, USDC)
    assert scan.transfers == [] and scan.reason == REASON_NO_TRANSFER


def test_failed_transaction_gives_nothing() -> None:
    failed = tx([transfer_checked_ix(1_000_000)], err={"InstructionError": [0, {"Custom": 1}]})
    scan = scan_deposits(failed, ATA, USDC)
    assert scan.transfers == [] and scan.reason == REASON_FAILED


def test_sol_transfer_gives_nothing() -> None:
    scan = scan_deposits(tx([sol_transfer_ix(10**9), sol_transfer_ix(10**9, dest=ATA)]), ATA, USDC)
    assert scan.transfers == [] and scan.reason == REASON_NO_TRANSFER


def test_token_2022_transfer_checked_counts_if_usdc() -> None:
    [d] = extract_deposits(tx([transfer_checked_ix(12_345, program=TOKEN_2022_PROGRAM_ID)]), ATA, USDC)
    assert d.program_id == TOKEN_2022_PROGRAM_ID


def test_multisig_authority() -> None:
    ix = transfer_ix(50_000)
    info = ix["parsed"]["info"]
    multisig = info.pop("authority")
    info["multisigAuthority"] = multisig
    info["signers"] = [str(Keypair().pubkey())]
    [d] = extract_deposits(tx([ix]), ATA, USDC)
    assert d.authority == multisig


def test_other_instruction_types_and_unparsed_ignored() -> None:
    mint_to = {
        "program": "spl-token",
        "programId": TOKEN_PROGRAM_ID,
        "parsed": {"type": "mintTo", "info": {"account": ATA, "amount": "999", "mint": USDC, "mintAuthority": PAYER}},
    }
    unparsed = {"programId": TOKEN_PROGRAM_ID, "accounts": [SOURCE, ATA, PAYER], "data": "3DdGGhkhJbjm"}
    assert extract_deposits(tx([mint_to, unparsed]), ATA, USDC) == []


def test_json_encoding_keys_with_loaded_addresses() -> None:
    """Balance records index into static keys + loaded addresses when keys are plain strings."""
    t = tx([transfer_ix(20_000)], balances=[balance(3, OTHER_MINT)], keys=[PAYER, SOURCE, USDC])
    t["transaction"]["message"]["accountKeys"] = [PAYER, SOURCE, USDC]
    t["meta"]["loadedAddresses"] = {"writable": [ATA], "readonly": []}
    assert scan_deposits(t, ATA, USDC).reason == REASON_WRONG_MINT


def test_malformed_inputs() -> None:
    assert scan_deposits(None, ATA, USDC).reason == REASON_MALFORMED
    assert scan_deposits({"meta": None}, ATA, USDC).reason == REASON_MALFORMED
    bad_amount = transfer_ix(1)
    bad_amount["parsed"]["info"]["amount"] = "-5"
    assert extract_deposits(tx([bad_amount]), ATA, USDC) == []


def test_deposit_credits_sum_per_authority() -> None:
    other = str(Keypair().pubkey())
    found = extract_deposits(
        tx([transfer_checked_ix(10_000), transfer_checked_ix(20_000, authority=other), transfer_ix(5_000)]), ATA, USDC
    )
    credits = deposit_credits("SIG", 7, found)
    assert [(c.signature, c.pubkey, c.amount_base_units, c.slot) for c in credits] == [
        ("SIG", PAYER, 15_000, 7),
        ("SIG:1", other, 20_000, 7),
    ]


def test_deposit_ata_from_the_configured_address(tmp_path: Path) -> None:
    """The deposit wallet is the configured address; without one, a ConfigError naming the setting
    (and no key created: a serving process never creates one)."""
    wallet = Keypair().pubkey()
    ata = deposit_ata_for(Settings(home=tmp_path, deposit_address=str(wallet)))
    assert ata == get_associated_token_address(wallet, Pubkey.from_string(USDC))
    with pytest.raises(ConfigError, match="GATEWAY_DEPOSIT_ADDRESS"):
        deposit_ata_for(Settings(home=tmp_path))
    assert not (tmp_path / "keys").exists()


def test_credits_for_an_authority_that_cannot_sign_are_refused() -> None:
    """A multisig account or a program address moved the tokens: no one could sign for its credits."""
    wallet = str(Keypair().pubkey())
    pda, _ = Pubkey.find_program_address([b"vault"], Pubkey.from_string(TOKEN_PROGRAM_ID))
    base = {"authority": wallet, "amount_base_units": 50_000, "source": "s", "kind": "transfer"}
    common = {"program_id": TOKEN_PROGRAM_ID, "location": "0"}
    assert DepositTransfer(**base, **common).unsignable() is None  # type: ignore[arg-type]
    multisig = DepositTransfer(**base, **common, multisig=True)  # type: ignore[arg-type]
    assert "multisig" in (multisig.unsignable() or "")
    program = DepositTransfer(**{**base, "authority": str(pda)}, **common)  # type: ignore[arg-type]
    assert "program address" in (program.unsignable() or "")
    credits = deposit_credits("sig", 5, [multisig, program])
    assert [c.refusal is not None for c in credits] == [True, True]
