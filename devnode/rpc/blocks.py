"""Block methods: blocks in full or reduced detail, block lists and ranges, times, heights, commitment
and production, over the blocks the chain still retains."""

from __future__ import annotations

from typing import Any

from devnode.chain.constants import IDENTITY
from devnode.encoding import render_meta, render_transaction, render_tx_with_meta
from devnode.errors import block_cleaned_up, block_not_available, invalid_params
from devnode.records import Block, TxRecord
from devnode.rpc.base import TOTAL_STAKE, MethodGroup
from devnode.rpc.params import arg, as_uint, config, max_version_of, required, sub_config, tx_config

MAX_SLOT_RANGE = 500_000

_ACCOUNTS_ONLY_META = ("err", "fee", "postBalances", "postTokenBalances", "preBalances", "preTokenBalances", "status")


class BlockMethods(MethodGroup):
    """Handlers that read retained blocks: contents, slot lists, times, heights, commitment, production."""

    # ------------------------------------------------------------ blocks

    def _block(self, slot: int) -> Block:
        block = self.chain.blocks.get(slot)
        if block is not None:
            return block
        first = self.chain.first_available_block
        if slot < first:
            raise block_cleaned_up(slot, first)
        raise block_not_available(slot)

    def m_getBlock(self, params: list[Any]) -> Any:
        slot = as_uint(required(params, 0, "slot"), "slot")
        encoding, cfg = tx_config(params, 1, "json")
        details = cfg.get("transactionDetails") or "full"
        if details not in ("full", "signatures", "none", "accounts"):
            raise invalid_params(f"Invalid params: unknown variant `{details}`")
        block = self._block(slot)
        max_version = max_version_of(cfg)
        out: dict[str, Any] = {
            "blockHeight": block.block_height,
            "blockTime": block.block_time,
            "blockhash": str(block.blockhash),
            "parentSlot": block.parent_slot,
            "previousBlockhash": str(block.previous_blockhash),
        }
        records = [self.chain.txs[s] for s in block.signatures if s in self.chain.txs]
        if details == "full":
            out["transactions"] = [render_tx_with_meta(r, encoding, max_version) for r in records]
        elif details == "signatures":
            out["signatures"] = [str(r.signature) for r in records]
        elif details == "accounts":
            out["transactions"] = [self._accounts_only(r, max_version) for r in records]
        if cfg.get("rewards", True):
            out["rewards"] = []
        return out

    @staticmethod
    def _accounts_only(rec: TxRecord, max_version: int | None) -> dict[str, Any]:
        full = render_tx_with_meta(rec, "jsonParsed", max_version)
        meta = render_meta(rec, True)
        out: dict[str, Any] = {
            "meta": {k: meta[k] for k in _ACCOUNTS_ONLY_META},
            "transaction": {
                "accountKeys": render_transaction(rec, "jsonParsed")["message"]["accountKeys"],
                "signatures": [str(s) for s in rec.transaction.signatures],
            },
        }
        if "version" in full:
            out["version"] = full["version"]
        return out

    def _closed_range(self, start: int, end: int) -> list[int]:
        first = self.chain.first_available_block
        return [s for s in range(max(start, first), end + 1) if s in self.chain.blocks]

    def m_getBlocks(self, params: list[Any]) -> Any:
        start = as_uint(required(params, 0, "start_slot"), "start_slot")
        raw_end = arg(params, 1)
        last = self.chain.last_block.slot
        end = last if raw_end is None or isinstance(raw_end, dict) else min(as_uint(raw_end, "end_slot"), last)
        if end - start > MAX_SLOT_RANGE:
            raise invalid_params(f"Slot range too large; max {MAX_SLOT_RANGE}")
        return self._closed_range(start, end)

    def m_getBlocksWithLimit(self, params: list[Any]) -> Any:
        start = as_uint(required(params, 0, "start_slot"), "start_slot")
        limit = as_uint(required(params, 1, "limit"), "limit")
        if limit > MAX_SLOT_RANGE:
            raise invalid_params(f"Limit too large; max {MAX_SLOT_RANGE}")
        end = min(start + limit - 1, self.chain.last_block.slot)
        return self._closed_range(start, end)[:limit]

    def m_getBlockTime(self, params: list[Any]) -> Any:
        return self._block(as_uint(required(params, 0, "slot"), "slot")).block_time

    def m_getBlockHeight(self, params: list[Any]) -> Any:
        return self.chain.block_height

    def m_getBlockCommitment(self, params: list[Any]) -> Any:
        slot = as_uint(required(params, 0, "slot"), "slot")
        commitment = None
        if slot in self.chain.blocks:
            commitment = [0] * 32
            commitment[min(self.chain.slot - slot, 31)] = TOTAL_STAKE
        return {"commitment": commitment, "totalStake": TOTAL_STAKE}

    def m_getBlockProduction(self, params: list[Any]) -> Any:
        cfg = config(params, 0)
        rng = sub_config(cfg, "range")
        epoch_start = self.chain.epoch_schedule.get_first_slot_in_epoch(self.chain.epoch)
        first = as_uint(rng.get("firstSlot", epoch_start), "firstSlot")
        last = as_uint(rng.get("lastSlot", self.chain.slot), "lastSlot")
        count = max(0, min(last, self.chain.slot) - first + 1)
        identity = str(IDENTITY.pubkey())
        by_identity = {} if cfg.get("identity") not in (None, identity) else {identity: [count, count]}
        return self._ctx({"byIdentity": by_identity, "range": {"firstSlot": first, "lastSlot": last}})

    def m_getFirstAvailableBlock(self, params: list[Any]) -> Any:
        return self.chain.first_available_block

    def m_minimumLedgerSlot(self, params: list[Any]) -> Any:
        return self.chain.first_available_block
