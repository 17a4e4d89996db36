"""Program-derived addresses of the pump program, its fee program, the mayhem program and PumpSwap.

Every function returns only the address; `find_program_address` picks the canonical bump.
"""

from __future__ import annotations

from solders.pubkey import Pubkey

from pumpfun.ids import (
    ASSOCIATED_TOKEN_PROGRAM_ID,
    FEE_PROGRAM_ID,
    MAYHEM_PROGRAM_ID,
    MPL_TOKEN_METADATA_PROGRAM_ID,
    PUMP_AMM_PROGRAM_ID,
    PUMP_PROGRAM_ID,
    TOKEN_2022_PROGRAM_ID,
    TOKEN_PROGRAM_ID,
)

__all__ = [
    "amm_event_authority_pda",
    "amm_global_config_pda",
    "associated_bonding_curve_pda",
    "associated_token_address",
    "bonding_curve_pda",
    "bonding_curve_v2_pda",
    "creator_vault_pda",
    "event_authority_pda",
    "fee_config_pda",
    "global_pda",
    "global_volume_accumulator_pda",
    "mayhem_global_params_pda",
    "mayhem_sol_vault_pda",
    "mayhem_state_pda",
    "mayhem_token_vault_pda",
    "metaplex_metadata_pda",
    "mint_authority_pda",
    "pool_authority_pda",
    "pool_lp_mint_pda",
    "pool_pda",
    "pool_pda_and_bump",
    "sharing_config_pda",
    "user_volume_accumulator_pda",
]


def _pda(seeds: list[bytes], program: Pubkey) -> Pubkey:
    return Pubkey.find_program_address(seeds, program)[0]


def associated_token_address(owner: Pubkey, mint: Pubkey, token_program: Pubkey = TOKEN_PROGRAM_ID) -> Pubkey:
    """The associated token account: seeds `[owner, token_program, mint]` on the ATA program."""
    return _pda([bytes(owner), bytes(token_program), bytes(mint)], ASSOCIATED_TOKEN_PROGRAM_ID)


# --- pump program -----------------------------------------------------------------------------------


def global_pda() -> Pubkey:
    """`["global"]`: 4wTV1YmiEkRvAtNtsSGPtUrqRYQMe5SKy2uB4Jjaxnjf on mainnet."""
    return _pda([b"global"], PUMP_PROGRAM_ID)


def bonding_curve_pda(mint: Pubkey) -> Pubkey:
    return _pda([b"bonding-curve", bytes(mint)], PUMP_PROGRAM_ID)


def bonding_curve_v2_pda(mint: Pubkey) -> Pubkey:
    """`["bonding-curve-v2", mint]`: the seed string is unverified (third-party code excerpts)."""
    return _pda([b"bonding-curve-v2", bytes(mint)], PUMP_PROGRAM_ID)


def associated_bonding_curve_pda(mint: Pubkey, token_program: Pubkey = TOKEN_PROGRAM_ID) -> Pubkey:
    """The bonding curve's token account for `mint`: ATA(owner=bonding_curve, mint, token_program)."""
    return associated_token_address(bonding_curve_pda(mint), mint, token_program)


def creator_vault_pda(creator: Pubkey) -> Pubkey:
    return _pda([b"creator-vault", bytes(creator)], PUMP_PROGRAM_ID)


def event_authority_pda(program: Pubkey = PUMP_PROGRAM_ID) -> Pubkey:
    """`["__event_authority"]`, the signer account of Anchor `emit_cpi!` self-CPIs, on `program`."""
    return _pda([b"__event_authority"], program)


def global_volume_accumulator_pda() -> Pubkey:
    return _pda([b"global_volume_accumulator"], PUMP_PROGRAM_ID)


def user_volume_accumulator_pda(user: Pubkey) -> Pubkey:
    return _pda([b"user_volume_accumulator", bytes(user)], PUMP_PROGRAM_ID)


def mint_authority_pda() -> Pubkey:
    return _pda([b"mint-authority"], PUMP_PROGRAM_ID)


def pool_authority_pda(mint: Pubkey) -> Pubkey:
    """`["pool-authority", mint]`: the creator of a canonical (graduated) PumpSwap pool."""
    return _pda([b"pool-authority", bytes(mint)], PUMP_PROGRAM_ID)


def metaplex_metadata_pda(mint: Pubkey) -> Pubkey:
    """Metaplex metadata of a classic `create` coin: `["metadata", mpl_program, mint]` on the Metaplex program."""
    return _pda([b"metadata", bytes(MPL_TOKEN_METADATA_PROGRAM_ID), bytes(mint)], MPL_TOKEN_METADATA_PROGRAM_ID)


# --- fee program ------------------------------------------------------------------------------------


def fee_config_pda() -> Pubkey:
    """`["fee_config", <pump program id bytes>]` on the fee program."""
    return _pda([b"fee_config", bytes(PUMP_PROGRAM_ID)], FEE_PROGRAM_ID)


def sharing_config_pda(mint: Pubkey) -> Pubkey:
    return _pda([b"sharing-config", bytes(mint)], FEE_PROGRAM_ID)


# --- mayhem program (create_v2 accounts 10-14) -------------------------------------------------------


def mayhem_global_params_pda() -> Pubkey:
    return _pda([b"global-params"], MAYHEM_PROGRAM_ID)


def mayhem_sol_vault_pda() -> Pubkey:
    return _pda([b"sol-vault"], MAYHEM_PROGRAM_ID)


def mayhem_state_pda(mint: Pubkey) -> Pubkey:
    return _pda([b"mayhem-state", bytes(mint)], MAYHEM_PROGRAM_ID)


def mayhem_token_vault_pda(mint: Pubkey) -> Pubkey:
    """ATA of the mayhem sol vault for `mint`, on Token-2022."""
    return associated_token_address(mayhem_sol_vault_pda(), mint, TOKEN_2022_PROGRAM_ID)


# --- PumpSwap (AMM) ---------------------------------------------------------------------------------


def amm_global_config_pda() -> Pubkey:
    """`["global_config"]` on PumpSwap: ADyA8hdefvWN2dbGGWFotbzWxrAvLW83WG6QCVXvJKqw."""
    return _pda([b"global_config"], PUMP_AMM_PROGRAM_ID)


def amm_event_authority_pda() -> Pubkey:
    return event_authority_pda(PUMP_AMM_PROGRAM_ID)


def pool_pda(index: int, creator: Pubkey, base_mint: Pubkey, quote_mint: Pubkey) -> Pubkey:
    """`["pool", index (u16 LE), creator, base_mint, quote_mint]` on PumpSwap."""
    return _pda(
        [b"pool", index.to_bytes(2, "little"), bytes(creator), bytes(base_mint), bytes(quote_mint)],
        PUMP_AMM_PROGRAM_ID,
    )


def pool_lp_mint_pda(pool: Pubkey) -> Pubkey:
    return _pda([b"pool_lp_mint", bytes(pool)], PUMP_AMM_PROGRAM_ID)


def pool_pda_and_bump(index: int, creator: Pubkey, base_mint: Pubkey, quote_mint: Pubkey) -> tuple[Pubkey, int]:
    """`pool_pda` with its bump (stored in `Pool.pool_bump`)."""
    return Pubkey.find_program_address(
        [b"pool", index.to_bytes(2, "little"), bytes(creator), bytes(base_mint), bytes(quote_mint)],
        PUMP_AMM_PROGRAM_ID,
    )
