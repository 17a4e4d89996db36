"""``gateway fund``: test credits in one command, on the embedded devnode only.

What a new user would otherwise do by hand: make a wallet, get SOL, mint test USDC with the devnode's
mint authority, send it to the deposit address, confirm the deposit, create an API key. Run again, it
deposits only when asked (``--usdc``) or when the wallet has no credits yet: otherwise it only gives
the key again. The wallet and the key's file are where :mod:`gateway_client.dev_wallet` says, the
rule the examples and the notebook follow too. It talks to
the running gateway over its public API (the deposit address comes from a 402 answer, the deposit is
confirmed through ``POST /account/confirm-deposit``) and to the devnode over its RPC, as a user's
own script would. Refused against any other chain: real USDC is never minted.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

from solana.rpc.async_api import AsyncClient
from solana.rpc.commitment import Finalized
from solana.rpc.models import TxOpts
from solders.instruction import Instruction
from solders.keypair import Keypair
from solders.message import Message
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.transaction import VersionedTransaction
from spl.token.constants import TOKEN_PROGRAM_ID
from spl.token.instructions import (
    create_idempotent_associated_token_account,
    get_associated_token_address,
    mint_to_checked,
    transfer_checked,
)
from spl.token.models import MintToCheckedParams, TransferCheckedParams

from gateway.app.settings import Settings
from gateway.base.keys import load_keypair, load_or_create_keypair
from gateway_client import AuthFailed, GatewayClient, PaymentRequired, WalletSigner, api_key_path, dev_wallet_path
from gateway_client.dev_wallet import save_api_key, saved_api_key

USDC_DECIMALS = 6
AIRDROP_LAMPORTS = 2_000_000_000
MINT_AUTHORITY_FILE = "devnode/usdc-mint-authority.json"
#: What a wallet without credits gets when no amount is asked for.
DEFAULT_USDC = "10"


class FundError(Exception):
    """Why test credits cannot be made here; the message tells the user what to do."""


@dataclass(frozen=True)
class Funded:
    wallet_path: Path
    pubkey: str
    api_key: str
    key_path: Path
    deposit_signature: str | None  # None: nothing deposited (the wallet had credits, none were asked for)
    credits_added: int  # by this command's confirmation; 0 when the deposit watcher credited it first
    balance: int
    by_watcher: bool = False  # the deposit watcher credited the deposit before this command confirmed it


def gateway_url(settings: Settings) -> str:
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
    return f"http://{host}:{settings.port}"


def usdc_base_units(amount: str) -> int:
    """``"10"`` or ``"0.25"`` USDC as base units, exactly (no float); at least the 0.01 minimum."""
    try:
        value = Decimal(amount)
    except InvalidOperation as exc:
        raise FundError(f"not an amount of USDC: {amount!r}") from exc
    base_units = value * 10**USDC_DECIMALS
    if base_units != base_units.to_integral_value() or base_units < 10_000:
        raise FundError("the amount must be at least 0.01 USDC, with at most 6 decimals")
    return int(base_units)


def to_deposit(asked: int | None, balance: int) -> int | None:
    """Base units to deposit: what was asked for; if nothing was, the default for a wallet without
    credits (a new one, or one that spent them all), else none (None)."""
    if asked is not None:
        return asked
    return usdc_base_units(DEFAULT_USDC) if balance <= 0 else None


async def fund(settings: Settings, base_units: int | None, wallet_path: Path | None = None) -> Funded:
    """The wallet's API key and balance, after minting and depositing ``base_units`` of test USDC; with
    ``base_units`` None, :data:`DEFAULT_USDC` only if the wallet has no credits yet (:func:`to_deposit`)."""
    if not settings.embedded_chain:
        raise FundError(
            "gateway fund mints test USDC on the embedded devnode only; this gateway's nodes are configured "
            "(upstreams or upstream_rpc_url). Send real USDC to the deposit address instead (GET /account/info)."
        )
    home = settings.resolved_home
    authority_file = home / MINT_AUTHORITY_FILE
    if not authority_file.exists():
        raise FundError(f"no devnode data in {home}: start the gateway first (make up), with the same GATEWAY_HOME")
    wallet_path = wallet_path or dev_wallet_path(home)  # $GATEWAY_WALLET, else <home>/wallets/dev-wallet.json
    wallet = load_or_create_keypair(wallet_path)
    url = gateway_url(settings)
    node_url = f"http://127.0.0.1:{settings.devnode_rpc_port}"
    key_path = api_key_path(wallet_path)
    async with GatewayClient(url, signer=WalletSigner(bytes(wallet)), max_retries=0) as gw:
        api_key = await _api_key(gw, url, wallet_path)  # a new key makes the account
    async with GatewayClient(url, api_key=api_key, max_retries=0) as keyed:
        balance = int((await keyed.account_info())["balance"])
    amount = to_deposit(base_units, balance)
    if amount is None:
        return Funded(wallet_path, str(wallet.pubkey()), api_key, key_path, None, 0, balance)
    deposit_address = await _deposit_address(url)
    async with AsyncClient(node_url) as node:
        authority = load_keypair(authority_file)
        mint = Pubkey.from_string(settings.usdc_mint)  # the devnode's test USDC has the mainnet address
        signature = await _deposit(node, wallet, authority, mint, deposit_address, amount)
    async with GatewayClient(url, api_key=api_key, max_retries=0) as keyed:
        confirmed = await keyed.confirm_deposit(str(signature))  # finalized already: credited now
        info = await keyed.account_info()
    by_watcher = bool(confirmed["already_processed"])  # the watcher may be first
    added = 0 if by_watcher else int(confirmed["credits_added"])
    return Funded(
        wallet_path, str(wallet.pubkey()), api_key, key_path, str(signature), added, int(info["balance"]), by_watcher
    )


async def _deposit_address(url: str) -> Pubkey:
    """From the 402 a caller without credentials gets: the public way to learn where to pay."""
    async with GatewayClient(url, max_retries=0) as anonymous:
        try:
            await anonymous.rpc("getSlot")
        except PaymentRequired as exc:
            return Pubkey.from_string(str(exc.terms["deposit_address"]))
    raise FundError("the gateway answered a call without credentials: is this the gateway's URL?")


async def _api_key(gw: GatewayClient, url: str, wallet_path: Path) -> str:
    """The key saved beside the wallet if it still works, else a new one (saved, private from the start)."""
    saved = saved_api_key(wallet_path)
    if saved is not None:
        async with GatewayClient(url, api_key=saved, max_retries=0) as keyed:
            try:
                await keyed.account_info()
                return saved
            except AuthFailed:
                pass  # rotated since: make a new one
    key = await gw.create_api_key()
    save_api_key(key, wallet_path)
    return key


async def _deposit(
    node: AsyncClient, wallet: Keypair, authority: Keypair, usdc: Pubkey, deposit_address: Pubkey, base_units: int
) -> Signature:
    """SOL for fees, test USDC minted to the wallet, then a TransferChecked to the deposit address."""
    for who in (wallet.pubkey(), authority.pubkey()):
        await _airdrop(node, who)
    mine = get_associated_token_address(wallet.pubkey(), usdc)
    mint = mint_to_checked(
        MintToCheckedParams(
            program_id=TOKEN_PROGRAM_ID,
            mint=usdc,
            dest=mine,
            mint_authority=authority.pubkey(),
            amount=base_units,
            decimals=USDC_DECIMALS,
        )
    )
    create_mine = create_idempotent_associated_token_account(wallet.pubkey(), wallet.pubkey(), usdc)
    await _send(node, [create_mine, mint], wallet, authority)
    theirs = get_associated_token_address(deposit_address, usdc)
    send = transfer_checked(
        TransferCheckedParams(
            program_id=TOKEN_PROGRAM_ID,
            source=mine,
            mint=usdc,
            dest=theirs,
            owner=wallet.pubkey(),
            amount=base_units,
            decimals=USDC_DECIMALS,
        )
    )
    create_theirs = create_idempotent_associated_token_account(wallet.pubkey(), deposit_address, usdc)
    return await _send(node, [create_theirs, send], wallet)


async def _airdrop(node: AsyncClient, who: Pubkey) -> None:
    balance = (await node.get_balance(who)).value
    if balance >= AIRDROP_LAMPORTS // 2:
        return
    signature = (await node.request_airdrop(who, AIRDROP_LAMPORTS)).value
    await node.confirm_transaction(signature, Finalized, sleep_seconds=0.2)


async def _send(node: AsyncClient, instructions: list[Instruction], payer: Keypair, *signers: Keypair) -> Signature:
    blockhash = (await node.get_latest_blockhash()).value.blockhash
    message = Message.new_with_blockhash(instructions, payer.pubkey(), blockhash)
    tx = VersionedTransaction(message, [payer, *signers])
    signature = (await node.send_transaction(tx, opts=TxOpts(preflight_commitment=Finalized))).value
    await node.confirm_transaction(signature, Finalized, sleep_seconds=0.2)
    return signature


def run(settings: Settings, usdc: str | None, wallet_path: Path | None) -> Funded:
    """``usdc`` None: deposit only if the wallet has no credits yet (see :func:`to_deposit`)."""
    return asyncio.run(fund(settings, None if usdc is None else usdc_base_units(usdc), wallet_path))
