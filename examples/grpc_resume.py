"""The Yellowstone gRPC stream through the Python client's GeyserStream: slot updates, each once, and the
slot it would resume from. After a lost connection or UNAVAILABLE (a gRPC server restarted, no node
for a moment) it subscribes again by itself with from_slot = the last slot it delivered and drops what
the replay repeats, so the loop below never sees a gap or a repeat. 1 credit per stream, then 60 a minute.

export GATEWAY_API_KEY=$(.venv/bin/gateway fund)      # on the embedded devnode; or your own key
.venv/bin/python examples/grpc_resume.py              # GATEWAY_GRPC: host:port, default 127.0.0.1:10000
"""

from __future__ import annotations

import asyncio
import os

from gateway_client import require_dev_api_key
from gateway_client.geyser import GeyserStream, pb2

GRPC = os.environ.get("GATEWAY_GRPC", f"127.0.0.1:{os.environ.get('GATEWAY_GRPC_PORT', '10000')}")
API_KEY = require_dev_api_key()  # $GATEWAY_API_KEY, else the key gateway fund saved beside the wallet
UPDATES = int(os.environ.get("GRPC_UPDATES", "8"))


async def main() -> None:
    request = pb2.SubscribeRequest(slots={"slots": pb2.SubscribeRequestFilterSlots()}, commitment=pb2.PROCESSED)
    async with GeyserStream(GRPC, API_KEY, request) as stream:  # behind TLS: credentials=grpc.ssl_channel_credentials()
        seen = 0
        async for update in stream:
            if update.WhichOneof("update_oneof") == "slot":
                print(f"slot {update.slot.slot} {pb2.SlotStatus.Name(update.slot.status)}")
                seen += 1
                if seen == UPDATES:
                    break
        print(f"resumable from slot {stream.last_slot} (connections: {stream.connects})")


if __name__ == "__main__":
    asyncio.run(main())
