"""PDA derivation: deterministic, and equal to the published mainnet addresses where those are known."""

from __future__ import annotations

from collections.abc import Callable

from solders.keypair import Keypair
from solders.pubkey import Pubkey
from solders.token.associated import get_associated_token_address

from pumpfun import pda
from pumpfun.ids import PUMP_PROGRAM_ID, TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID

MINT = Keypair.from_seed(bytes([1] * 32)).pubkey()
USER = Keypair.from_seed(bytes([2] * 32)).pubkey()


def test_global_pda_is_the_mainnet_address() -> None:
    assert str(pda.global_pda()) == "4wTV1YmiEkRvAtNtsSGPtUrqRYQMe5SKy2uB4Jjaxnjf"


def test_event_authorities_and_amm_global_config_are_the_mainnet_addresses() -> None:
    assert str(pda.event_authority_pda()) == "Ce6TQqeHC9p8KetsN6JsjHK7UTZk7nasjjnr7XxXp9F1"
    assert str(pda.amm_global_config_pda()) == "ADyA8hdefvWN2dbGGWFotbzWxrAvLW83WG6QCVXvJKqw"
    assert str(pda.amm_event_authority_pda()) == "GS4CU59F31iL7aR2Q8zVS8DRrcRnXX1yjQ66TqNVQnaR"


def test_derivation_is_deterministic_and_off_curve() -> None:
    derive: list[Callable[[], Pubkey]] = [
        lambda: pda.bonding_curve_pda(MINT),
        lambda: pda.bonding_curve_v2_pda(MINT),
        lambda: pda.creator_vault_pda(USER),
        lambda: pda.user_volume_accumulator_pda(USER),
        pda.global_volume_accumulator_pda,
        pda.mint_authority_pda,
        pda.fee_config_pda,
        lambda: pda.pool_authority_pda(MINT),
    ]
    results = [f() for f in derive]
    assert results == [f() for f in derive]
    assert len(set(results)) == len(results)
    assert not any(p.is_on_curve() for p in results)


def test_pdas_use_the_documented_seeds() -> None:
    def find(seeds: list[bytes], program: Pubkey) -> Pubkey:
        return Pubkey.find_program_address(seeds, program)[0]

    assert pda.bonding_curve_pda(MINT) == find([b"bonding-curve", bytes(MINT)], PUMP_PROGRAM_ID)
    assert pda.creator_vault_pda(USER) == find([b"creator-vault", bytes(USER)], PUMP_PROGRAM_ID)
    assert pda.user_volume_accumulator_pda(USER) == find([b"user_volume_accumulator", bytes(USER)], PUMP_PROGRAM_ID)
    fee_program = Pubkey.from_string("pfeeUxB6jkeY1Hxd7CsFCAjcbHA9rWtchMGdZ6VojVZ")
    assert pda.fee_config_pda() == find([b"fee_config", bytes(PUMP_PROGRAM_ID)], fee_program)


def test_associated_bonding_curve_is_the_ata_of_the_curve() -> None:
    curve = pda.bonding_curve_pda(MINT)
    assert pda.associated_bonding_curve_pda(MINT) == get_associated_token_address(curve, MINT)
    assert pda.associated_bonding_curve_pda(MINT, TOKEN_2022_PROGRAM_ID) == get_associated_token_address(
        curve, MINT, TOKEN_2022_PROGRAM_ID
    )
    assert pda.associated_token_address(USER, MINT, TOKEN_PROGRAM_ID) == get_associated_token_address(USER, MINT)


def test_pool_pda_encodes_the_index_as_u16() -> None:
    creator = pda.pool_authority_pda(MINT)
    wsol = Pubkey.from_string("So11111111111111111111111111111111111111112")
    pool, bump = pda.pool_pda_and_bump(0, creator, MINT, wsol)
    assert pool == pda.pool_pda(0, creator, MINT, wsol)
    assert pool != pda.pool_pda(1, creator, MINT, wsol)
    assert 0 <= bump <= 255
    assert pda.pool_lp_mint_pda(pool) != pool
