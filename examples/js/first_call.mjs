// A first call with the TypeScript client (clients/js, npm: solana-credit-gateway-client) and @solana/kit:
// the gateway as Kit's RPC, with an API key on every call, and what the call left of the balance.
//   npm install solana-credit-gateway-client @solana/kit
//   GATEWAY_API_KEY=$(.venv/bin/gateway fund) node first_call.mjs
import { createSolanaRpcFromTransport } from "@solana/kit";
import { GatewayClient, PaymentRequired } from "solana-credit-gateway-client";

const client = new GatewayClient({ url: process.env.GATEWAY_URL ?? "http://127.0.0.1:8000", apiKey: process.env.GATEWAY_API_KEY });
const rpc = createSolanaRpcFromTransport(client.transport());
try {
  const slot = await rpc.getSlot().send();
  console.log(`slot ${slot}; ${client.meter.creditsRemaining} credits left`);
  const recent = await client.recentSignals({ limit: 3 });
  for (const event of recent.events) console.log(`signal ${event.kind} at slot ${event.slot}: ${event.mint}`);
} catch (err) {
  if (!(err instanceof PaymentRequired)) throw err;
  console.log(`no credits: send USDC to ${err.terms.deposit_address} (${err.terms.instructions})`);
  process.exitCode = 2;
}
