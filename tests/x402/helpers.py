"""Payment transactions built with solders, and the calls the x402 tests make over and over."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Sequence
from dataclasses import dataclass

import aiohttp
import orjson
from solana.rpc.async_api import AsyncClient
from solders.hash import Hash
from solders.instruction import Instruction
from solders.keypair import Keypair
from solders.message import Message, MessageV0, to_bytes_versioned
from solders.pubkey import Pubkey
from solders.signature import Signature
from solders.transaction import VersionedTransaction
from spl.token.constants import TOKEN_PROGRAM_ID
from spl.token.instructions import get_associated_token_address, transfer_checked
from spl.token.models import TransferCheckedParams

from gateway.app.replica import GatewayApp
from gateway_client import GatewayClient, InvalidRequest, WalletSigner
from tests.auth.helpers import Answer, request
from tests.chain import USDC_DECIMALS, USDC_MINT, usdc_account
from tests.sending.conftest import FailingRelay

SETTLE = "/x402/settle"


def pay(owner: Pubkey, to_wallet: Pubkey, amount: int, *, mint: Pubkey = USDC_MINT) -> Instruction:
    """TransferChecked of ``amount`` base units from ``owner``'s account of ``mint`` to ``to_wallet``'s."""
    return transfer_checked(
        TransferCheckedParams(
            program_id=TOKEN_PROGRAM_ID,
            source=get_associated_token_address(owner, mint),
            mint=mint,
            dest=get_associated_token_address(to_wallet, mint),
            owner=owner,
            amount=amount,
            decimals=USDC_DECIMALS,
        )
    )


def build(
    fee_payer: Pubkey,
    instructions: Sequence[Instruction],
    blockhash: Hash,
    signers: Sequence[Keypair],
    *,
    legacy: bool = False,
) -> bytes:
    """The transaction, signed by ``signers``; a required signer not among them keeps an empty slot."""
    message: Message | MessageV0
    if legacy:
        message = Message.new_with_blockhash(list(instructions), fee_payer, blockhash)
    else:
        message = MessageV0.try_compile(fee_payer, list(instructions), [], blockhash)
    payload = to_bytes_versioned(message)
    by_key = {keypair.pubkey(): keypair for keypair in signers}
    required = message.account_keys[: message.header.num_required_signatures]
    signatures = [by_key[key].sign_message(payload) if key in by_key else Signature.default() for key in required]
    return bytes(VersionedTransaction.populate(message, signatures))


def body(raw: bytes) -> bytes:
    return orjson.dumps({"transaction": base64.b64encode(raw).decode()})


@dataclass
class Settle:
    """A gateway in this process, in front of a relay to the session devnode (which counts broadcasts)."""

    url: str
    app: GatewayApp
    relay: FailingRelay
    node: AsyncClient  # the devnode itself
    http: aiohttp.ClientSession
    usdc_authority: Keypair

    @property
    def fee_payer(self) -> Pubkey:
        assert self.app.x402_settle.fee_payer is not None
        return self.app.x402_settle.fee_payer.pubkey()

    @property
    def deposit_wallet(self) -> Pubkey:
        assert self.app.x402_settle.rules is not None
        return Pubkey.from_string(self.app.x402_settle.rules.deposit_wallet)

    @property
    def broadcasts(self) -> int:
        return self.relay.count('"sendTransaction"')

    async def blockhash(self) -> Hash:
        return (await self.node.get_latest_blockhash()).value.blockhash

    async def settle(self, payload: bytes, headers: dict[str, str] | None = None) -> Answer:
        return await request(self.http, "POST", self.url + SETTLE, body=payload, headers=headers)

    async def lamports(self, who: Pubkey) -> int:
        return (await self.node.get_balance(who)).value

    async def usdc(self, owner: Pubkey) -> int:
        found = (await self.node.get_token_account_balance(usdc_account(owner))).value
        return int(found.amount)


def reason(answer: Answer) -> str | None:
    data = answer.json["error"].get("data") if isinstance(answer.json, dict) else None
    return data.get("reason") if isinstance(data, dict) else None


async def confirm_when_final(url: str, wallet: Keypair, signature: str, timeout_s: float = 20.0) -> dict[str, object]:
    """``POST /account/confirm-deposit`` signed by ``wallet``, again until the transfer is finalized."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    async with GatewayClient(url, signer=WalletSigner(bytes(wallet)), max_retries=0) as gw:
        while True:
            try:
                return await gw.confirm_deposit(signature)
            except InvalidRequest as exc:
                if "not finalized" not in str(exc) or asyncio.get_running_loop().time() > deadline:
                    raise
            await asyncio.sleep(0.2)
