"""Real signed transactions for tests, sent with solana-py / solders to any JSON-RPC URL
(the devnode directly, or the gateway in front of it).
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

from solana.rpc.async_api import AsyncClient
from solana.rpc.commitment import Confirmed
from solana.rpc.models import TxOpts
from solders.instruction import Instruction
from solders.keypair import Keypair
from solders.message import Message, MessageV0
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.system_program import TransferParams, transfer
from solders.transaction import Transaction, VersionedTransaction
from solders.transaction_status import TransactionConfirmationStatus, TransactionStatus
from spl.token.constants import TOKEN_PROGRAM_ID
from spl.token.instructions import (
    create_idempotent_associated_token_account,
    get_associated_token_address,
    mint_to_checked,
    transfer_checked,
)
from spl.token.models import MintToCheckedParams, TransferCheckedParams

USDC_MINT = Pubkey.from_string("EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v")
USDC_DECIMALS = 6
LANDED = (TransactionConfirmationStatus.Confirmed, TransactionConfirmationStatus.Finalized)


def read_keypair(path: Path) -> Keypair:
    return Keypair.from_bytes(bytes(json.loads(path.read_text())))


async def airdrop(node_url: str, to: Pubkey, lamports: int = 2_000_000_000) -> None:
    """Fund a wallet on the devnode itself (the gateway denies requestAirdrop)."""
    async with AsyncClient(node_url) as node:
        sig = (await node.request_airdrop(to, lamports)).value
        await wait_confirmed(node, sig)


async def submit(
    client: AsyncClient,
    payer: Keypair,
    instructions: list[Instruction],
    *signers: Keypair,
    v0: bool = False,
    skip_preflight: bool = False,
) -> Signature:
    """Sign (``payer`` pays the fee) and send a legacy transaction, or a version-0 one with ``v0``; no waiting."""
    blockhash = (await client.get_latest_blockhash()).value.blockhash
    tx: Transaction | VersionedTransaction
    if v0:
        tx = VersionedTransaction(MessageV0.try_compile(payer.pubkey(), instructions, [], blockhash), [payer, *signers])
    else:
        tx = Transaction(
            [payer, *signers], Message.new_with_blockhash(instructions, payer.pubkey(), blockhash), blockhash
        )
    opts = TxOpts(skip_preflight=skip_preflight, preflight_commitment=Confirmed)
    return (await client.send_raw_transaction(bytes(tx), opts)).value


async def send(
    client: AsyncClient,
    payer: Keypair,
    instructions: list[Instruction],
    *signers: Keypair,
    v0: bool = False,
    finalized: bool = False,
) -> Signature:
    """:func:`submit`, then wait until the transaction is confirmed (or ``finalized``) and check it succeeded."""
    sig = await submit(client, payer, instructions, *signers, v0=v0)
    await wait_confirmed(client, sig, finalized=finalized)
    return sig


async def wait_landed(
    client: AsyncClient, sig: Signature, *, finalized: bool = False, timeout_s: float = 20.0
) -> TransactionStatus:
    """Poll until ``sig`` is confirmed (or ``finalized``); its status, whether the transaction failed or not."""
    wanted = (TransactionConfirmationStatus.Finalized,) if finalized else LANDED
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        status = (await client.get_signature_statuses([sig])).value[0]
        if status is not None and status.confirmation_status in wanted:
            return status
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{sig} not {'finalized' if finalized else 'confirmed'} within {timeout_s} s")
        await asyncio.sleep(0.1)


async def wait_confirmed(
    client: AsyncClient, sig: Signature, timeout_s: float = 20.0, *, finalized: bool = False
) -> None:
    """Wait until ``sig`` is confirmed (or ``finalized``); AssertionError if the transaction failed."""
    status = await wait_landed(client, sig, finalized=finalized, timeout_s=timeout_s)
    if status.err is not None:
        raise AssertionError(f"{sig} failed: {status.err}")


async def send_sol(client: AsyncClient, payer: Keypair, to: Pubkey, lamports: int) -> Signature:
    return await send(
        client, payer, [transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=to, lamports=lamports))]
    )


def usdc_account(owner: Pubkey) -> Pubkey:
    return get_associated_token_address(owner, USDC_MINT)


async def mint_usdc(client: AsyncClient, authority: Keypair, payer: Keypair, owner: Pubkey, amount: int) -> Signature:
    """Create ``owner``'s USDC account if needed and MintTo it (signed by the devnode's mint authority)."""
    dest = usdc_account(owner)
    return await send(
        client,
        payer,
        [
            create_idempotent_associated_token_account(payer.pubkey(), owner, USDC_MINT),
            mint_to_checked(
                MintToCheckedParams(
                    program_id=TOKEN_PROGRAM_ID,
                    mint=USDC_MINT,
                    dest=dest,
                    mint_authority=authority.pubkey(),
                    amount=amount,
                    decimals=USDC_DECIMALS,
                )
            ),
        ],
        authority,
    )


def transfer_usdc_instruction(owner: Pubkey, to_owner: Pubkey, amount: int) -> Instruction:
    """TransferChecked of ``amount`` base units from ``owner``'s USDC account to ``to_owner``'s (which must exist)."""
    return transfer_checked(
        TransferCheckedParams(
            program_id=TOKEN_PROGRAM_ID,
            source=usdc_account(owner),
            mint=USDC_MINT,
            dest=usdc_account(to_owner),
            owner=owner,
            amount=amount,
            decimals=USDC_DECIMALS,
        )
    )


async def transfer_usdc(client: AsyncClient, owner: Keypair, to_owner: Pubkey, amount: int) -> Signature:
    """TransferChecked from ``owner``'s USDC account to ``to_owner``'s (created if missing, paid by ``owner``)."""
    return await send(
        client,
        owner,
        [
            create_idempotent_associated_token_account(owner.pubkey(), to_owner, USDC_MINT),
            transfer_usdc_instruction(owner.pubkey(), to_owner, amount),
        ],
    )


async def signed_transfer(node_url: str, payer: Keypair, to: Pubkey, lamports: int) -> str:
    """A signed SOL transfer on a fresh blockhash, base64, not sent: for a client to send itself."""
    async with AsyncClient(node_url) as client:
        blockhash = (await client.get_latest_blockhash()).value.blockhash
    ix = transfer(TransferParams(from_pubkey=payer.pubkey(), to_pubkey=to, lamports=lamports))
    message = Message.new_with_blockhash([ix], payer.pubkey(), blockhash)
    return base64.b64encode(bytes(Transaction([payer], message, blockhash))).decode()
