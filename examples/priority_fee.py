"""Priority fees: suggestPriorityFee (5 credits), and getPriorityFeeEstimate (1 credit) in the shape
that clients of the well-known getPriorityFeeEstimate API already send.

export GATEWAY_API_KEY=$(.venv/bin/gateway fund)      # on the embedded devnode; or your own key
.venv/bin/python examples/priority_fee.py
"""

from __future__ import annotations

import asyncio
import os

from gateway_client import GatewayClient, require_dev_api_key

URL = os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000")
API_KEY = require_dev_api_key()  # $GATEWAY_API_KEY, else the key gateway fund saved beside the wallet
USDC_MINT = "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v"  # any accounts your transaction writes


async def main() -> None:
    async with GatewayClient(URL, api_key=API_KEY) as gateway:
        fee = await gateway.rpc("suggestPriorityFee", [{"urgency": "medium"}])
        levels = fee["all_levels"]
        print(f"suggested {fee['suggested_fee_microlamports']} micro-lamports per CU ({fee['urgency']})")
        print(
            f"levels low {levels['low']}, medium {levels['medium']}, high {levels['high']}, "
            f"veryHigh {levels['veryHigh']} over {levels['sample_count']} slots ({levels['basis']})"
        )
        options = {"priorityLevel": "High", "includeAllPriorityFeeLevels": True}
        estimate = await gateway.rpc("getPriorityFeeEstimate", [{"accountKeys": [USDC_MINT], "options": options}])
        print(f"getPriorityFeeEstimate High: {estimate['priorityFeeEstimate']} micro-lamports per CU")
        print(f"all levels: {estimate['priorityFeeLevels']}")


if __name__ == "__main__":
    asyncio.run(main())
