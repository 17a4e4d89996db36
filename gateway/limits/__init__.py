"""Per-account rate and concurrency limits and per-address limits (docs/architecture.md, "Limits").

``rules`` holds the pure buckets and counters; ``shards`` the shard book an account-shard actor keeps
(pure); ``shard_actor`` that actor's plain class; ``slices`` a replica's client of the shards (the
slices of an account's limits it holds); ``addresses`` the per-client-address stage of unauthenticated
routes.
"""
