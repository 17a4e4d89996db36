"""Signals: the recent snapshot (public, free), then a few live events from ``client.signals(...)``.

The stream reconnects by itself after a network loss or a gateway restart, fills the gap from
/signals/recent and never yields an event twice. 5 credits per connection, 1 per event.

export GATEWAY_API_KEY=$(.venv/bin/gateway fund)      # on the embedded devnode; or your own key
.venv/bin/python examples/signals.py                  # SIGNALS_SECONDS=15 SIGNALS_EVENTS=5 by default
"""

from __future__ import annotations

import asyncio
import os

from gateway_client import GatewayClient, InsufficientCredits, SignalEvent, require_dev_api_key

URL = os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000")
API_KEY = require_dev_api_key()  # $GATEWAY_API_KEY, else the key gateway fund saved beside the wallet
SECONDS = float(os.environ.get("SIGNALS_SECONDS", "15"))
EVENTS = int(os.environ.get("SIGNALS_EVENTS", "5"))


def describe(event: SignalEvent) -> str:
    what = f"{event['kind']} slot {event['slot']} mint {event['mint']}"
    if event["kind"] == "newPair":
        return f"{what} ({event['curve_type']} curve, quote {event['quote_asset']})"
    if event.get("sol_amount") is not None:
        return f"{what} ({event.get('side') or 'migration'} of {event['sol_amount'] / 1e9:.3f} SOL)"
    return what


async def main() -> None:
    async with GatewayClient(URL, api_key=API_KEY) as client:
        recent = await client.recent_signals(limit=100)  # newest first
        print(f"recent: {len(recent['events'])} events, next_since_slot {recent['next_since_slot']}")
        for event in recent["events"][:3]:
            print(f"  {describe(event)}")

        seen = 0
        stream = client.signals(kinds=["newPair", "graduation", "largeSwap"])
        try:
            async with stream, asyncio.timeout(SECONDS):
                async for event in stream:
                    seen += 1
                    print(f"live {describe(event)}")
                    if seen >= EVENTS:
                        break
        except TimeoutError:
            pass  # a quiet chain: fewer events than asked for in the window
        except InsufficientCredits as exc:
            print(f"out of credits: {exc.message}")
        print(f"live: {seen} events in at most {SECONDS:g} s, subscription {stream.subscription}")


if __name__ == "__main__":
    asyncio.run(main())
