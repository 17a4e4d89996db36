"""The ``account-shard-N`` actors: each owns its accounts' rate buckets and concurrency budgets and grants
replicas slices of them (gateway/limits/shard_actor.py, docs/architecture.md#where-state-lives-and-why)."""

from __future__ import annotations

import warnings
from typing import Any

from actors.supervision import start_singleton, stop_actors
from gateway.limits.shard_actor import AccountShard
from gateway.limits.shards import shard_name


def account_shard_names(count: int) -> list[str]:
    """The account-shard actors; an account's is ``shard_of(pubkey, count)`` (gateway/limits/shards.py)."""
    return [shard_name(n) for n in range(count)]


class RestartingAccountShard(AccountShard):
    """The shard as Ray runs it: told whether Ray is restarting it, so that a restarted one's buckets
    fill from its start (slices of the previous incarnation may still be in use: gateway/limits/shards.py)."""

    def __init__(self, index: int) -> None:
        import ray

        with warnings.catch_warnings():  # Ray 2.60's property reads its own deprecated actor_id: not ours to fix
            warnings.simplefilter("ignore", DeprecationWarning)
            restarted = bool(ray.get_runtime_context().was_current_actor_reconstructed)
        super().__init__(index, restarted=restarted)


def start_account_shards(count: int) -> list[Any]:
    """The account-shard actors: each named and restarted after a crash like a singleton."""
    return [
        start_singleton(name, RestartingAccountShard, n, member=n) for n, name in enumerate(account_shard_names(count))
    ]


def stop_account_shards(count: int) -> None:
    stop_actors(account_shard_names(count))
