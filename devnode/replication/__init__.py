"""Several nodes of one chain: a devnode follows another as an RPC node follows a validator.

The leader keeps a replication log of its chain (`log.ReplicationLog`: the events of the last `window` slots
and a base before them) and serves it at `GET /replication` on its RPC server (`route.ReplicationRoute`, a
WebSocket of orjson frames, `frames`). A follower (`follower.Follower`) holds its own copy of the chain,
loaded from the base and kept up by applying the events, `lag_slots` behind if asked, and answers from it
(`rpc.FollowerDispatcher`), forwarding to the leader only what only the leader does (sending, airdrops).

Protocol, in short: the follower connects with where it is (`genesis`, `log`, `seq`, or nothing). The
leader sends a hello (genesis, log id, window, open slot); then the events from `seq` when its log is that
log and still holds `seq`, else a base and every logged event; then ``live``; then each event as it happens.
A follower of another genesis is refused. See each module for the details and the bounds.
"""

from devnode.replication.follower import Follower, FollowError
from devnode.replication.log import DEFAULT_WINDOW, ReplicationLog
from devnode.replication.route import ReplicationRoute

__all__ = ["DEFAULT_WINDOW", "FollowError", "Follower", "ReplicationLog", "ReplicationRoute"]
