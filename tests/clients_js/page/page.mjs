// A web app on another origin than the gateway's, bundled by esbuild from the installed package and Kit
// (tests/clients_js): what the Chromium test calls, at window.app. Each function resolves to
// {ok, value} or {ok: false, name, message, status, code}.
import { createKeyPairSignerFromPrivateKeyBytes, createSolanaRpcFromTransport } from "@solana/kit";
import { GatewayClient } from "solana-credit-gateway-client";

function failure(err) {
  return { ok: false, name: err?.name, message: String(err?.message ?? err), status: err?.status ?? null, code: err?.code ?? null };
}

window.app = {
  /** The first `count` signal events of `kinds` over /ws, authenticated by the key's auth.<key> subprotocol. */
  async signals(url, apiKey, kinds, count) {
    try {
      const stream = new GatewayClient({ url, apiKey }).signals({ kinds });
      const events = [];
      for await (const event of stream) {
        events.push(event);
        if (events.length >= count) break;
      }
      return { ok: true, value: { events, subscription: stream.subscription, connects: stream.connects } };
    } catch (err) {
      return failure(err);
    }
  },
  /** Calls signed in the page by a Kit KeyPairSigner: the client's rpc, Kit's RPC through the transport, an account route. */
  async signedCalls(url, seed) {
    try {
      const signer = await createKeyPairSignerFromPrivateKeyBytes(new Uint8Array(seed));
      const client = new GatewayClient({ url, signer });
      const slot = await client.rpc("getSlot");
      const rpc = createSolanaRpcFromTransport(client.transport());
      const { value: lamports } = await rpc.getBalance(signer.address).send();
      const info = await client.accountInfo();
      return { ok: true, value: { slot, lamports: String(lamports), pubkey: info.pubkey, address: signer.address, meter: client.meter, session: client.session } };
    } catch (err) {
      return failure(err);
    }
  },
};
