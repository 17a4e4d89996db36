"""The devnode through the real clients: solana-py's AsyncClient / SolanaWsClient and solders."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import base58
import pytest
from solana.rpc.async_api import AsyncClient
from solana.rpc.core import RPCException
from solana.rpc.models import TokenAccountOpts, TxOpts
from solana.rpc.websocket_api import SolanaWsClient
from solders.account import Account
from solders.compute_budget import set_compute_unit_price
from solders.hash import Hash
from solders.instruction import AccountMeta, Instruction
from solders.keypair import Keypair
from solders.message import MessageV0
from solders.pubkey import Pubkey
from solders.rpc.config import RpcTransactionLogsFilterMentions
from solders.rpc.responses import (
    AccountNotification,
    LogsNotification,
    SignatureNotification,
    SlotNotification,
)
from solders.signature import Signature
from solders.system_program import ID as SYSTEM_PROGRAM_ID
from solders.system_program import TransferParams, transfer
from solders.token.associated import get_associated_token_address
from solders.transaction import VersionedTransaction

from devnode.chain.constants import USDC_MINT
from devnode.injected import InjectedTransaction
from devnode.node import Devnode
from devnode.sol_usd_pool import POOL_USDC_UNITS
from devnode.tokens import ATA_PROGRAM_ID, TOKEN_PROGRAM_ID
from tests.devnode.helpers import read_keypair, start_node, wait_for, wait_landed

# ---------------------------------------------------------------- helpers


async def raw_rpc(node: Devnode, payload: Any, *, body: bytes | None = None) -> Any:
    async with aiohttp.ClientSession() as session:
        data = body if body is not None else None
        kwargs: dict[str, Any] = {"data": data} if body is not None else {"json": payload}
        async with session.post(node.rpc_url, **kwargs) as resp:
            assert resp.status == 200
            return await resp.json()


async def call(node: Devnode, method: str, params: list[Any] | None = None) -> Any:
    return await raw_rpc(node, {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or []})


async def signed(client: AsyncClient, payer: Keypair, ixs: list[Instruction], *extra: Keypair) -> VersionedTransaction:
    blockhash = (await client.get_latest_blockhash()).value.blockhash
    return VersionedTransaction(MessageV0.try_compile(payer.pubkey(), ixs, [], blockhash), [payer, *extra])


def parsed_info(account: Any) -> Any:
    """`data.parsed.info` of a jsonParsed account (solders types it as a union)."""
    return account.data.parsed["info"]


def b58(tx: VersionedTransaction) -> str:
    return base58.b58encode(bytes(tx)).decode()


def sol_transfer(src: Keypair, dst: Pubkey, lamports: int) -> Instruction:
    return transfer(TransferParams(from_pubkey=src.pubkey(), to_pubkey=dst, lamports=lamports))


def create_ata(payer: Pubkey, owner: Pubkey, mint: Pubkey) -> Instruction:
    ata = get_associated_token_address(owner, mint)
    metas = [
        AccountMeta(payer, True, True),
        AccountMeta(ata, False, True),
        AccountMeta(owner, False, False),
        AccountMeta(mint, False, False),
        AccountMeta(SYSTEM_PROGRAM_ID, False, False),
        AccountMeta(TOKEN_PROGRAM_ID, False, False),
    ]
    return Instruction(ATA_PROGRAM_ID, bytes([1]), metas)  # CreateIdempotent


def mint_to(mint: Pubkey, dest: Pubkey, authority: Pubkey, amount: int) -> Instruction:
    metas = [AccountMeta(mint, False, True), AccountMeta(dest, False, True), AccountMeta(authority, True, False)]
    return Instruction(TOKEN_PROGRAM_ID, bytes([7]) + amount.to_bytes(8, "little"), metas)


def transfer_checked(src: Pubkey, mint: Pubkey, dst: Pubkey, owner: Pubkey, amount: int, decimals: int) -> Instruction:
    metas = [
        AccountMeta(src, False, True),
        AccountMeta(mint, False, False),
        AccountMeta(dst, False, True),
        AccountMeta(owner, True, False),
    ]
    return Instruction(TOKEN_PROGRAM_ID, bytes([12]) + amount.to_bytes(8, "little") + bytes([decimals]), metas)


# ---------------------------------------------------------------- transactions


async def test_sol_transfer_lands(client: AsyncClient, funded: Keypair) -> None:
    receiver = Keypair().pubkey()
    tx = await signed(client, funded, [sol_transfer(funded, receiver, 123_456_789)])
    sig = (await client.send_transaction(tx)).value
    await wait_landed(client, sig, "confirmed")

    assert (await client.get_balance(receiver)).value == 123_456_789
    status = (await client.get_signature_statuses([sig], search_transaction_history=True)).value[0]
    assert status is not None and status.err is None

    got = (await client.get_transaction(sig, max_supported_transaction_version=0)).value
    assert got is not None
    meta = got.transaction.meta
    assert meta is not None and meta.err is None and meta.fee == 5_000
    assert meta.pre_balances[0] - meta.post_balances[0] == 123_456_789 + 5_000
    assert meta.post_balances[1] == 123_456_789
    assert any("success" in line for line in meta.log_messages or [])

    with pytest.raises(RPCException):  # a v0 transaction needs maxSupportedTransactionVersion, as on mainnet
        await client.get_transaction(sig)

    parsed = (await client.get_transaction(sig, "jsonParsed", max_supported_transaction_version=0)).value
    assert parsed is not None
    ix: Any = parsed.transaction.transaction.message.instructions[0]  # type: ignore[union-attr]
    assert ix.parsed["type"] == "transfer" and ix.parsed["info"]["lamports"] == 123_456_789

    sigs = (await client.get_signatures_for_address(receiver)).value
    assert [s.signature for s in sigs] == [sig]

    async def finalized() -> bool:
        value = (await client.get_signature_statuses([sig])).value[0]
        return value is not None and str(value.confirmation_status).endswith("Finalized")

    await wait_for(finalized)
    block = (await client.get_block(got.slot, max_supported_transaction_version=0)).value
    assert sig in [t.transaction.signatures[0] for t in block.transactions]  # type: ignore[union-attr]


async def test_failed_transaction_lands_with_fee(node: Devnode, client: AsyncClient, funded: Keypair) -> None:
    before = (await client.get_balance(funded.pubkey())).value
    tx = await signed(client, funded, [sol_transfer(funded, Keypair().pubkey(), 10**15)])

    with pytest.raises(RPCException) as excinfo:  # preflight catches it
        await client.send_transaction(tx)
    assert "custom program error: 0x1" in str(excinfo.value)

    sig = (await client.send_transaction(tx, TxOpts(skip_preflight=True))).value
    await wait_landed(client, sig)
    got = (await call(node, "getTransaction", [str(sig), {"maxSupportedTransactionVersion": 0}]))["result"]
    assert got["meta"]["err"] == {"InstructionError": [0, {"Custom": 1}]}
    assert got["meta"]["status"] == {"Err": {"InstructionError": [0, {"Custom": 1}]}}
    assert (await client.get_balance(funded.pubkey())).value == before - 5_000


async def test_usdc_mint_then_transfer(node: Devnode, client: AsyncClient, funded: Keypair) -> None:
    authority = read_keypair(node.config.data_dir / "usdc-mint-authority.json")
    alice, bob = funded.pubkey(), Keypair().pubkey()
    ata_a, ata_b = get_associated_token_address(alice, USDC_MINT), get_associated_token_address(bob, USDC_MINT)

    tx = await signed(
        client,
        funded,
        [create_ata(alice, alice, USDC_MINT), mint_to(USDC_MINT, ata_a, authority.pubkey(), 5_000_000)],
        authority,
    )
    await wait_landed(client, (await client.send_transaction(tx)).value)

    tx = await signed(
        client,
        funded,
        [create_ata(alice, bob, USDC_MINT), transfer_checked(ata_a, USDC_MINT, ata_b, alice, 1_250_000, 6)],
    )
    sig = (await client.send_transaction(tx)).value
    await wait_landed(client, sig)

    balance = (await client.get_token_account_balance(ata_b)).value
    assert balance.amount == "1250000" and balance.decimals == 6 and balance.ui_amount_string == "1.25"
    assert (await client.get_token_supply(USDC_MINT)).value.amount == str(5_000_000 + POOL_USDC_UNITS)  # + the pool's

    by_mint = (await client.get_token_accounts_by_owner(bob, TokenAccountOpts(mint=USDC_MINT))).value
    assert [a.pubkey for a in by_mint] == [ata_b]
    assert len(by_mint[0].account.data) == 165

    parsed = (
        await client.get_token_accounts_by_owner_json_parsed(bob, TokenAccountOpts(program_id=TOKEN_PROGRAM_ID))
    ).value
    info = parsed_info(parsed[0].account)
    assert info["mint"] == str(USDC_MINT) and info["owner"] == str(bob)
    assert info["tokenAmount"]["uiAmountString"] == "1.25"

    got = (await client.get_transaction(sig, max_supported_transaction_version=0)).value
    assert got is not None and got.transaction.meta is not None
    post = {str(b.owner): b.ui_token_amount.amount for b in got.transaction.meta.post_token_balances or []}
    assert post == {str(alice): "3750000", str(bob): "1250000"}

    raw = await call(
        node, "getTransaction", [str(sig), {"encoding": "jsonParsed", "maxSupportedTransactionVersion": 0}]
    )
    ixs = raw["result"]["transaction"]["message"]["instructions"]
    assert ixs[0]["program"] == "spl-associated-token-account" and ixs[0]["parsed"]["type"] == "createIdempotent"
    assert ixs[1]["parsed"]["type"] == "transferChecked"
    assert ixs[1]["parsed"]["info"]["tokenAmount"]["amount"] == "1250000"


async def test_expired_blockhash_is_rejected(node: Devnode, client: AsyncClient, funded: Keypair) -> None:
    tx = await signed(client, funded, [sol_transfer(funded, Keypair().pubkey(), 1_000_000)])
    for _ in range(152):  # drive the slot clock by hand: 150 blocks later the hash has expired
        node.chain.tick()
    assert not (await call(node, "isBlockhashValid", [str(tx.message.recent_blockhash)]))["result"]["value"]
    for malformed in ("not-a-hash", "1" * 60, 7):
        assert (await call(node, "isBlockhashValid", [malformed]))["error"]["code"] == -32602, malformed
    for skip in (False, True):
        resp = await call(node, "sendTransaction", [b58(tx), {"skipPreflight": skip}])
        err = resp["error"]
        assert err["code"] == -32002 and err["message"] == "Transaction simulation failed: Blockhash not found"
        assert err["data"]["err"] == "BlockhashNotFound" and err["data"]["accounts"] is None
    with pytest.raises(RPCException):
        await client.send_transaction(tx)
    unknown = VersionedTransaction(MessageV0.try_compile(funded.pubkey(), [], [], Hash.new_unique()), [funded])
    assert (await call(node, "sendTransaction", [b58(unknown)]))["error"]["code"] == -32002


async def test_bad_signature_is_rejected(node: Devnode, client: AsyncClient, funded: Keypair) -> None:
    tx = await signed(client, funded, [sol_transfer(funded, Keypair().pubkey(), 1_000_000)])
    forged = VersionedTransaction.populate(tx.message, [Keypair().sign_message(b"not it")])
    resp = await call(node, "sendTransaction", [b58(forged), {"skipPreflight": True}])
    assert resp["error"]["code"] == -32003


async def test_simulate_and_encodings(node: Devnode, client: AsyncClient, funded: Keypair) -> None:
    receiver = Keypair().pubkey()
    tx = await signed(client, funded, [sol_transfer(funded, receiver, 5_000_000)])
    sim = (await client.simulate_transaction(tx, sig_verify=True, accounts_addresses=[receiver])).value
    assert sim.err is None and sim.units_consumed == 150 and sim.accounts is not None
    assert sim.accounts[0] is not None and sim.accounts[0].lamports == 5_000_000
    assert (await client.get_balance(receiver)).value == 0  # nothing committed

    raw = b58(tx)
    assert (await call(node, "sendTransaction", [raw]))["result"] == str(tx.signatures[0])  # base58 by default
    await wait_landed(client, tx.signatures[0], "confirmed")
    got = await call(node, "getTransaction", [str(tx.signatures[0]), {"maxSupportedTransactionVersion": 0}])
    slot = got["result"]["slot"]
    assert got["result"]["version"] == 0 and got["result"]["meta"]["loadedAddresses"] == {
        "readonly": [],
        "writable": [],
    }

    err = (await call(node, "getBlock", [slot]))["error"]
    assert err["code"] == -32015 and '"maxSupportedTransactionVersion": 0' in err["message"]
    for encoding in ("base64", "base58"):
        block = await call(node, "getBlock", [slot, {"encoding": encoding, "maxSupportedTransactionVersion": 0}])
        assert block["result"]["transactions"][0]["transaction"][1] == encoding
    sigs_only = await call(node, "getBlock", [slot, {"transactionDetails": "signatures", "rewards": False}])
    assert sigs_only["result"]["signatures"] == [str(tx.signatures[0])] and "rewards" not in sigs_only["result"]
    none = await call(node, "getBlock", [slot, {"transactionDetails": "none"}])
    assert "transactions" not in none["result"] and "signatures" not in none["result"]

    dup = await call(node, "sendTransaction", [raw])
    assert dup["error"]["code"] == -32002 and dup["error"]["data"]["err"] == "AlreadyProcessed"


# ---------------------------------------------------------------- blocks and errors


async def test_purged_block_is_cleaned_up(tmp_path: Path) -> None:
    node = await start_node(tmp_path / "devnode", retention_slots=5)
    try:
        for _ in range(10):
            node.chain.tick()
        first = (await call(node, "getFirstAvailableBlock"))["result"]
        assert first > 1
        err = (await call(node, "getBlock", [1]))["error"]
        later = (await call(node, "getFirstAvailableBlock"))["result"]  # the node's own slots tick meanwhile
        assert err["code"] == -32004 and "cleaned up" in err["message"]
        said = err["message"].removeprefix("Block 1 cleaned up, does not exist on node. First available block: ")
        assert said.isdigit() and first <= int(said) <= later, (err, first, later)
        future = (await call(node, "getBlock", [10**9]))["error"]
        assert future == {"code": -32004, "message": f"Block not available for slot {10**9}"}
        ok = (await call(node, "getBlock", [first]))["result"]
        assert ok["parentSlot"] == first - 1 and ok["transactions"] == [] and ok["rewards"] == []
        blocks = (await call(node, "getBlocks", [0]))["result"]
        assert blocks[0] >= first and blocks == list(range(blocks[0], blocks[0] + len(blocks)))
    finally:
        await node.stop()


async def test_protocol_errors(node: Devnode) -> None:
    assert (await call(node, "noSuchMethod"))["error"] == {"code": -32601, "message": "Method not found"}
    assert (await raw_rpc(node, None, body=b'{"jsonrpc": "2.0", "id": 1, "method"'))["error"]["code"] == -32700
    assert (await raw_rpc(node, {"id": 1, "method": "getSlot"}))["error"]["code"] == -32600
    assert (await call(node, "getBalance", ["not-a-key"]))["error"]["code"] == -32602
    batch = await raw_rpc(
        node,
        [
            {"jsonrpc": "2.0", "id": 1, "method": "getHealth"},
            {"jsonrpc": "2.0", "id": 2, "method": "getVersion"},
            {"jsonrpc": "2.0", "id": 3, "method": "nope"},
        ],
    )
    assert batch[0]["result"] == "ok" and batch[1]["result"]["solana-core"].endswith("-devnode")
    assert batch[2]["error"]["code"] == -32601


async def test_misc_methods_parse_with_solders(client: AsyncClient) -> None:
    assert await client.is_connected()
    assert (await client.get_epoch_info()).value.slots_in_epoch == 432_000
    assert (await client.get_version()).value.solana_core.endswith("-devnode")
    assert (await client.get_identity()).value.identity is not None
    assert len((await client.get_cluster_nodes()).value) == 1
    assert len((await client.get_vote_accounts()).value.current) == 1
    assert (await client.get_minimum_balance_for_rent_exemption(165)).value == 2_039_280
    assert (await client.get_genesis_hash()).value is not None
    assert (await client.get_slot()).value >= 1
    assert (await client.get_block_height()).value >= 1
    assert (await client.get_epoch_schedule()).value.slots_per_epoch == 432_000
    usdc = (await client.get_account_info_json_parsed(USDC_MINT)).value
    assert usdc is not None and parsed_info(usdc)["decimals"] == 6


# ---------------------------------------------------------------- fees, airdrops, injection


async def test_recent_prioritization_fees(node: Devnode, client: AsyncClient, funded: Keypair) -> None:
    tx = await signed(client, funded, [set_compute_unit_price(7_777), sol_transfer(funded, Keypair().pubkey(), 10**7)])
    sig = (await client.send_transaction(tx)).value
    await wait_landed(client, sig, "confirmed")
    fees = (await client.get_recent_prioritization_fees([funded.pubkey()])).value
    assert any(f.prioritization_fee == 7_777 for f in fees)
    global_fees = (await call(node, "getRecentPrioritizationFees"))["result"]
    assert any(f["prioritizationFee"] == 7_777 for f in global_fees)
    unrelated = (await call(node, "getRecentPrioritizationFees", [[str(Keypair().pubkey())]]))["result"]
    assert all(f["prioritizationFee"] in (0, 7_777) for f in unrelated)


async def test_inject_is_recorded_like_a_landed_transaction(
    node: Devnode, client: AsyncClient, funded: Keypair
) -> None:
    program = Pubkey.new_unique()
    state = Pubkey.new_unique()
    ix = Instruction(
        program, b"\x66\x06\x3d\x12", [AccountMeta(funded.pubkey(), True, True), AccountMeta(state, False, True)]
    )
    tx = VersionedTransaction(MessageV0.try_compile(funded.pubkey(), [ix], [], node.chain.latest_blockhash()), [funded])
    before = (await client.get_balance(funded.pubkey())).value
    logs = [f"Program {program} invoke [1]", "Program log: Instruction: Buy", f"Program {program} success"]
    sig = node.chain.inject(
        InjectedTransaction(
            transaction=tx,
            log_messages=logs,
            inner_instructions=[],
            account_writes=[(state, Account(2_000_000, b"curve-state", program))],
        )
    )
    assert sig == tx.signatures[0]

    got = (await call(node, "getTransaction", [str(sig), {"maxSupportedTransactionVersion": 0}]))["result"]
    assert got["meta"]["logMessages"] == logs and got["meta"]["fee"] == 5_000
    assert got["meta"]["preBalances"] == [before, 0, 1] or got["meta"]["preBalances"][:2] == [before, 0]
    assert got["meta"]["postBalances"][:2] == [before - 5_000, 2_000_000]
    assert (await client.get_balance(funded.pubkey())).value == before - 5_000

    for address in (state, program):
        sigs = (await client.get_signatures_for_address(address)).value
        assert [s.signature for s in sigs] == [sig]
    account = (await client.get_account_info(state)).value
    assert account is not None and account.owner == program and account.data == b"curve-state"


async def test_signatures_for_address_paging(client: AsyncClient) -> None:
    target = Keypair().pubkey()
    sigs: list[Signature] = []
    for i in range(4):
        sigs.append((await client.request_airdrop(target, 10**9 + i)).value)
    await wait_landed(client, sigs[-1])
    newest_first = [s.signature for s in (await client.get_signatures_for_address(target)).value]
    assert newest_first == sigs[::-1]
    page = (await client.get_signatures_for_address(target, before=sigs[2], limit=1)).value
    assert [s.signature for s in page] == [sigs[1]]
    page = (await client.get_signatures_for_address(target, until=sigs[1])).value
    assert [s.signature for s in page] == [sigs[3], sigs[2]]


# ---------------------------------------------------------------- pubsub


async def test_pubsub_slot_logs_signature_account(node: Devnode, client: AsyncClient, funded: Keypair) -> None:
    receiver = Keypair().pubkey()
    async with SolanaWsClient(node.ws_url) as ws:
        slot_sub = await ws.slot_subscribe()
        note = await asyncio.wait_for(ws.recv(), 5)
        assert isinstance(note, SlotNotification) and note.result.slot >= 1
        await ws.unsubscribe(slot_sub)

        await ws.logs_subscribe(filter_=RpcTransactionLogsFilterMentions(receiver))
        await ws.account_subscribe(pubkey=receiver, encoding="base64")
        tx = await signed(client, funded, [sol_transfer(funded, receiver, 42_000_000)])
        await ws.signature_subscribe(signature=tx.signatures[0])  # default commitment: finalized
        await client.send_transaction(tx)

        seen: dict[type, Any] = {}
        while SignatureNotification not in seen:
            n = await asyncio.wait_for(ws.recv(), 5)
            seen.setdefault(type(n), n)
        logs = seen[LogsNotification].result.value
        assert logs.signature == tx.signatures[0] and logs.err is None and logs.logs
        assert seen[AccountNotification].result.value.lamports == 42_000_000
        assert seen[SignatureNotification].result.value.err is None
        status = (await client.get_signature_statuses([tx.signatures[0]])).value[0]
        assert status is not None and str(status.confirmation_status).endswith("Finalized")


async def test_root_and_program_subscribe(node: Devnode, client: AsyncClient, funded: Keypair) -> None:
    authority = read_keypair(node.config.data_dir / "usdc-mint-authority.json")
    owner = funded.pubkey()
    ata = get_associated_token_address(owner, USDC_MINT)
    async with SolanaWsClient(node.ws_url) as ws:
        await ws.root_subscribe()
        await ws.program_subscribe(program_id=TOKEN_PROGRAM_ID, encoding="jsonParsed", filters=[165])
        tx = await signed(
            client,
            funded,
            [create_ata(owner, owner, USDC_MINT), mint_to(USDC_MINT, ata, authority.pubkey(), 9)],
            authority,
        )
        await client.send_transaction(tx)
        kinds: set[str] = set()
        while {"RootNotification", "ProgramNotification"} - kinds:
            n = await asyncio.wait_for(ws.recv(), 5)
            kind = type(n).__name__.removesuffix("JsonParsed")
            kinds.add(kind)
            if kind == "ProgramNotification":
                assert n.result.value.pubkey == ata  # type: ignore[union-attr]


# ---------------------------------------------------------------- persistence


async def test_restart_keeps_balances_and_mint_authority(tmp_path: Path) -> None:
    data_dir = tmp_path / "devnode"
    wallet = Keypair().pubkey()
    node = await start_node(data_dir)
    try:
        async with AsyncClient(node.rpc_url, http2=False) as client:
            sig = (await client.request_airdrop(wallet, 3 * 10**9)).value
            await wait_landed(client, sig)
        slot_before = node.chain.slot
    finally:
        await node.stop()
    authority = read_keypair(data_dir / "usdc-mint-authority.json").pubkey()

    node = await start_node(data_dir)
    try:
        async with AsyncClient(node.rpc_url, http2=False) as client:
            assert (await client.get_balance(wallet)).value == 3 * 10**9
            mint = (await client.get_account_info_json_parsed(USDC_MINT)).value
            assert mint is not None and parsed_info(mint)["mintAuthority"] == str(authority)
            assert (await client.get_slot()).value > slot_before
    finally:
        await node.stop()
    assert read_keypair(data_dir / "usdc-mint-authority.json").pubkey() == authority
