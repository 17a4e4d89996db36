"""Cluster methods: slots and leaders, epochs, identity, version, health, inflation, performance
samples, vote accounts and cluster nodes, for this node as a single-validator cluster."""

from __future__ import annotations

from typing import Any

from devnode.chain.constants import IDENTITY, VOTE_ACCOUNT
from devnode.errors import invalid_params
from devnode.rpc.base import TOTAL_STAKE, MethodGroup
from devnode.rpc.params import arg, as_uint, config, required

CORE_VERSION = "2.3.0-devnode"
FEATURE_SET = 3_294_202_862


def socket_address(host: str, port: int) -> str:
    """`host:port` as Agave prints a socket address (an IPv6 host in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class ClusterMethods(MethodGroup):
    """Handlers that describe the node and its one-validator cluster: slots, leaders, epochs, versions."""

    _leader_schedule: tuple[int, dict[str, list[int]]] | None

    # ------------------------------------------------------------ cluster

    def m_getSlot(self, params: list[Any]) -> Any:
        return self.chain.slot

    def m_getSlotLeader(self, params: list[Any]) -> Any:
        return str(IDENTITY.pubkey())

    def m_getSlotLeaders(self, params: list[Any]) -> Any:
        as_uint(required(params, 0, "start_slot"), "start_slot")
        limit = as_uint(required(params, 1, "limit"), "limit")
        if limit > 5000:
            raise invalid_params("Invalid limit; max 5000")
        return [str(IDENTITY.pubkey())] * limit

    def m_getLeaderSchedule(self, params: list[Any]) -> Any:
        raw = arg(params, 0)
        cfg = raw if isinstance(raw, dict) else config(params, 1)
        slot = raw if isinstance(raw, int) else self.chain.slot
        epoch = int(self.chain.epoch_schedule.get_epoch(slot))
        if epoch > self.chain.epoch + 1:
            return None
        identity = str(IDENTITY.pubkey())
        if cfg.get("identity") not in (None, identity):
            return {}
        if self._leader_schedule is None or self._leader_schedule[0] != epoch:
            n = int(self.chain.epoch_schedule.get_slots_in_epoch(epoch))
            self._leader_schedule = (epoch, {identity: list(range(n))})
        return self._leader_schedule[1]

    def m_getEpochInfo(self, params: list[Any]) -> Any:
        epoch, index = self.chain.epoch_schedule.get_epoch_and_slot_index(self.chain.slot)
        return {
            "absoluteSlot": self.chain.slot,
            "blockHeight": self.chain.block_height,
            "epoch": epoch,
            "slotIndex": index,
            "slotsInEpoch": self.chain.epoch_schedule.get_slots_in_epoch(epoch),
            "transactionCount": self.chain.transaction_count,
        }

    def m_getEpochSchedule(self, params: list[Any]) -> Any:
        es = self.chain.epoch_schedule
        return {
            "firstNormalEpoch": es.first_normal_epoch,
            "firstNormalSlot": es.first_normal_slot,
            "leaderScheduleSlotOffset": es.leader_schedule_slot_offset,
            "slotsPerEpoch": es.slots_per_epoch,
            "warmup": es.warmup,
        }

    def m_getGenesisHash(self, params: list[Any]) -> Any:
        return str(self.chain.genesis_hash)

    def m_getHealth(self, params: list[Any]) -> Any:
        return "ok"

    def m_getHighestSnapshotSlot(self, params: list[Any]) -> Any:
        return {"full": self.chain.first_available_block, "incremental": None}

    def m_getIdentity(self, params: list[Any]) -> Any:
        return {"identity": str(IDENTITY.pubkey())}

    def m_getInflationGovernor(self, params: list[Any]) -> Any:
        return {"foundation": 0.0, "foundationTerm": 0.0, "initial": 0.08, "taper": 0.15, "terminal": 0.015}

    def m_getInflationRate(self, params: list[Any]) -> Any:
        return {"epoch": self.chain.epoch, "foundation": 0.0, "total": 0.08, "validator": 0.08}

    def m_getMaxRetransmitSlot(self, params: list[Any]) -> Any:
        return self.chain.slot

    def m_getMaxShredInsertSlot(self, params: list[Any]) -> Any:
        return self.chain.slot

    def m_getRecentPerformanceSamples(self, params: list[Any]) -> Any:
        limit = as_uint(arg(params, 0, 720) or 720, "limit")
        if limit > 720:
            raise invalid_params("Invalid limit; max 720")
        per_sample = max(1, 60_000 // max(1, self.info.slot_ms))
        blocks = list(self.chain.blocks.values())
        samples: list[dict[str, int]] = []
        while blocks and len(samples) < limit:
            chunk, blocks = blocks[-per_sample:], blocks[:-per_sample]
            n = sum(len(b.signatures) for b in chunk)
            samples.append(
                {
                    "numNonVoteTransactions": n,
                    "numSlots": len(chunk),
                    "numTransactions": n,
                    "samplePeriodSecs": 60,
                    "slot": chunk[-1].slot,
                }
            )
        return samples

    def m_getStakeMinimumDelegation(self, params: list[Any]) -> Any:
        return self._ctx(1)

    def m_getVersion(self, params: list[Any]) -> Any:
        return {"feature-set": FEATURE_SET, "solana-core": CORE_VERSION}

    def m_getVoteAccounts(self, params: list[Any]) -> Any:
        epoch = self.chain.epoch
        return {
            "current": [
                {
                    "activatedStake": TOTAL_STAKE,
                    "commission": 0,
                    "epochCredits": [[epoch, self.chain.slot, 0]],
                    "epochVoteAccount": True,
                    "lastVote": max(self.chain.slot - 1, 0),
                    "nodePubkey": str(IDENTITY.pubkey()),
                    "rootSlot": self.chain.root,
                    "votePubkey": str(VOTE_ACCOUNT),
                }
            ],
            "delinquent": [],
        }

    def m_getClusterNodes(self, params: list[Any]) -> Any:
        info = self.info
        return [
            {
                "featureSet": FEATURE_SET,
                "gossip": socket_address(info.host, 8001),
                "pubkey": str(IDENTITY.pubkey()),
                "pubsub": socket_address(info.host, info.ws_port),
                "rpc": socket_address(info.host, info.rpc_port),
                "serveRepair": None,
                "shredVersion": 1,
                "tpu": None,
                "tpuForwards": None,
                "tpuForwardsQuic": None,
                "tpuQuic": None if info.tpu_quic_port is None else socket_address(info.host, info.tpu_quic_port),
                "tpuVote": None,
                "tvu": None,
                "version": CORE_VERSION,
            }
        ]
