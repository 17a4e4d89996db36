"""Program ids, well-known accounts and the published fee-recipient lists of pump.fun and PumpSwap.

Sources: pump-fun/pump-public-docs (`idl/pump.json`, `idl/pump_amm.json`, `docs/*.md`). The eight
buyback fee recipients are listed only truncated in some of its pages (`5YxQFdt3…`); the full
addresses below come from a public copy of `docs/FEE_RECIPIENTS.md`.
"""

from __future__ import annotations

from typing import Final

from solders.pubkey import Pubkey

__all__ = [
    "ASSOCIATED_TOKEN_PROGRAM_ID",
    "BUYBACK_FEE_RECIPIENTS",
    "COMPUTE_BUDGET_PROGRAM_ID",
    "FEE_PROGRAM_ID",
    "FEE_RECIPIENTS",
    "MAYHEM_PROGRAM_ID",
    "MPL_TOKEN_METADATA_PROGRAM_ID",
    "PUMP_AMM_PROGRAM_ID",
    "PUMP_PROGRAM_ID",
    "RENT_SYSVAR_ID",
    "RESERVED_FEE_RECIPIENTS",
    "SYSTEM_PROGRAM_ID",
    "TOKEN_2022_PROGRAM_ID",
    "TOKEN_PROGRAM_ID",
    "USDC_MINT",
    "WSOL_MINT",
]

PUMP_PROGRAM_ID: Final = Pubkey.from_string("6EF8rrecthR5Dkzon8Nwu78hRvfCKubJ14M5uBEwF6P")
PUMP_AMM_PROGRAM_ID: Final = Pubkey.from_string("pAMMBay6oceH9fJKBRHGP5D4bD4sWpmSwMn52FMfXEA")
FEE_PROGRAM_ID: Final = Pubkey.from_string("pfeeUxB6jkeY1Hxd7CsFCAjcbHA9rWtchMGdZ6VojVZ")
MAYHEM_PROGRAM_ID: Final = Pubkey.from_string("MAyhSmzXzV1pTf7LsNkrNwkWKTo4ougAJ1PPg47MD4e")

SYSTEM_PROGRAM_ID: Final = Pubkey.from_string("11111111111111111111111111111111")
TOKEN_PROGRAM_ID: Final = Pubkey.from_string("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA")
TOKEN_2022_PROGRAM_ID: Final = Pubkey.from_string("TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb")
ASSOCIATED_TOKEN_PROGRAM_ID: Final = Pubkey.from_string("ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL")
MPL_TOKEN_METADATA_PROGRAM_ID: Final = Pubkey.from_string("metaqbxxUerdq28cj1RbAWkYQm3ybzjb6a8bt518x1s")
COMPUTE_BUDGET_PROGRAM_ID: Final = Pubkey.from_string("ComputeBudget111111111111111111111111111111")
RENT_SYSVAR_ID: Final = Pubkey.from_string("SysvarRent111111111111111111111111111111111")

WSOL_MINT: Final = Pubkey.from_string("So11111111111111111111111111111111111111112")
USDC_MINT: Final = Pubkey.from_string("EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v")

#: The eight normal (non-mayhem) protocol fee recipients; `Global.fee_recipient` is the first.
FEE_RECIPIENTS: Final[tuple[Pubkey, ...]] = tuple(
    Pubkey.from_string(s)
    for s in (
        "62qc2CNXwrYqQScmEdiZFFAnJR262PxWEuNQtxfafNgV",
        "7VtfL8fvgNfhz17qKRMjzQEXgbdpnHHHQRh54R9jP2RJ",
        "7hTckgnGnLQR6sdH7YkqFTAA7VwTfYFaZ6EhEsU3saCX",
        "9rPYyANsfQZw3DnDmKE3YCQF5E8oD89UXoHn9JFEhJUz",
        "AVmoTthdrX6tKt4nDjco2D775W2YK3sDhxPcMmzUAmTY",
        "CebN5WGQ4jvEPvsVU4EoHEpgzq1VV7AbicfhtW4xC9iM",
        "FWsW1xNtWscwNmKv6wVsU1iTzRN6wmmk3MjxRP5tT7hz",
        "G5UZAVbAf46s7cKWoyKu8kYTip9DGTpbLZ2qa9Aq69dP",
    )
)

#: The eight fee recipients reserved for mayhem-mode coins.
RESERVED_FEE_RECIPIENTS: Final[tuple[Pubkey, ...]] = tuple(
    Pubkey.from_string(s)
    for s in (
        "GesfTA3X2arioaHp8bbKdjG9vJtskViWACZoYvxp4twS",
        "4budycTjhs9fD6xw62VBducVTNgMgJJ5BgtKq7mAZwn6",
        "8SBKzEQU4nLSzcwF4a74F2iaUDQyTfjGndn6qUWBnrpR",
        "4UQeTP1T39KZ9Sfxzo3WR5skgsaP6NZa87BAkuazLEKH",
        "8sNeir4QsLsJdYpc9RZacohhK1Y5FLU3nC5LXgYB4aa6",
        "Fh9HmeLNUMVCvejxCtCL2DbYaRyBFVJ5xrWkLnMH6fdk",
        "463MEnMeGyJekNZFQSTUABBEbLnvMTALbT6ZmsxAbAdq",
        "6AUH3WEHucYZyC61hqpqYUWVto5qA5hjHuNQ32GNnNxA",
    )
)

#: The eight buyback fee recipients; every legacy buy/sell appends one (writable) after `bonding_curve_v2`.
BUYBACK_FEE_RECIPIENTS: Final[tuple[Pubkey, ...]] = tuple(
    Pubkey.from_string(s)
    for s in (
        "5YxQFdt3Tr9zJLvkFccqXVUwhdTWJQc1fFg2YPbxvxeD",
        "9M4giFFMxmFGXtc3feFzRai56WbBqehoSeRE5GK7gf7",
        "GXPFM2caqTtQYC2cJ5yJRi9VDkpsYZXzYdwYpGnLmtDL",
        "3BpXnfJaUTiwXnJNe7Ej1rcbzqTTQUvLShZaWazebsVR",
        "5cjcW9wExnJJiqgLjq7DEG75Pm6JBgE1hNv4B2vHXUW6",
        "EHAAiTxcdDwQ3U4bU6YcMsQGaekdzLS3B5SmYo46kJtL",
        "5eHhjP8JaYkz83CWwvGU2uMUXefd3AazWGx4gpcuEEYD",
        "A7hAgCzFw14fejgCp387JUJRMNyz4j89JKnhtKU8piqW",
    )
)
