"""The devnode's local block engine, in the shape of Jito's: bundles of 1 to 5 signed transactions
that tip one of the tip accounts, run in order and all-or-nothing within one slot.

`engine` holds the queue and runs bundles at each slot; `tips` the tip accounts, tip detection and
the tip floor; `rpc` the JSON-RPC methods; `http` the routes under `{rpc}/api/v1`."""

from devnode.block_engine.engine import BlockEngine
from devnode.block_engine.http import BASE_PATH, BlockEngineRoutes

__all__ = ["BASE_PATH", "BlockEngine", "BlockEngineRoutes"]
