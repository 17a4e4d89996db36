// The packed TypeScript client, installed from its tarball, against the gateway (tests/clients_js).
// Env: GATEWAY_URL; RELAY_URL and RELAY_CONTROL (a relay in front of it the test cuts); SEED (hex of a
// funded wallet's 32-byte secret); WEBHOOK_VECTORS (deliveries signed by the server's own function);
// TRANSFER (a signed transfer, base64, for sendAndConfirm).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createKeyPairSignerFromPrivateKeyBytes, createSolanaRpcFromTransport, generateKeyPairSigner } from "@solana/kit";
import {
  AuthFailed,
  GatewayClient,
  PaymentRequired,
  RpcError,
  VERSION,
  eventKey,
  fromWallet,
  verifyWebhook,
  webhookSignature,
} from "solana-credit-gateway-client";

const url = process.env.GATEWAY_URL;
const seed = Uint8Array.from(Buffer.from(process.env.SEED, "hex"));
const wallet = await createKeyPairSignerFromPrivateKeyBytes(seed);

// The funded wallet's key, made by the client under the wallet's signature.
const keyMaker = new GatewayClient({ url, signer: wallet });
const { api_key: apiKey } = await keyMaker.createApiKey();

test("the package's version is the one it says", () => {
  const installed = JSON.parse(readFileSync(new URL(import.meta.resolve("solana-credit-gateway-client/package.json")), "utf8"));
  assert.equal(VERSION, installed.version);
});

test("an API key: Kit's createSolanaRpc speaks through the transport, and the meter is read", async () => {
  const client = new GatewayClient({ url, apiKey });
  assert.equal(client.apiKey, apiKey);
  const rpc = createSolanaRpcFromTransport(client.transport());
  const slot = await rpc.getSlot().send();
  assert.equal(typeof slot, "bigint");
  assert.ok(slot > 0n);
  const meter = client.meter;
  assert.ok(meter && Number.isInteger(meter.creditsRemaining) && meter.creditsRemaining > 0, JSON.stringify(meter));
  assert.ok(Number.isInteger(meter.rateLimit.limit) && Number.isInteger(meter.rateLimit.remaining) && meter.rateLimit.reset > 0);
  assert.match(meter.requestId, /^[0-9a-f]{32}$/);
  const before = meter.creditsRemaining;
  await client.rpc("getSlot");
  assert.ok(client.meter.creditsRemaining < before, "a paid call is seen in X-Credits-Remaining");
});

test("a KeyPairSigner signs every call: the client's own rpc and Kit's, the account routes", async () => {
  const client = new GatewayClient({ url, signer: wallet });
  assert.equal(client.useSession, false);
  assert.ok((await client.rpc("getSlot")) > 0);
  const rpc = createSolanaRpcFromTransport(client.transport());
  const { value: lamports } = await rpc.getBalance(wallet.address).send();
  assert.equal(typeof lamports, "bigint");
  const info = await client.accountInfo();
  assert.equal(info.pubkey, wallet.address);
  assert.equal(client.session, null, "no session was opened: each call was signed");
  // a replayed signature is refused: the nonce is the client's, new each call
  const headers = await client.signatureHeaders("POST", "/", '{"jsonrpc":"2.0","id":1,"method":"getSlot"}');
  const once = { method: "POST", headers: { ...headers, "content-type": "application/json" }, body: '{"jsonrpc":"2.0","id":1,"method":"getSlot"}' };
  assert.equal((await fetch(`${url}/`, once)).status, 200);
  assert.equal((await fetch(`${url}/`, once)).status, 403);
});

test("a session is opened from a signed challenge and renewed on a 401", async () => {
  const seen = [];
  const client = new GatewayClient({ url, signer: wallet, useSession: true, onSession: (s) => seen.push(s) });
  await client.accountInfo();
  const first = client.session;
  assert.ok(first && first.token && first.pubkey === wallet.address && first.owner === false);
  const out = await fetch(`${url}/auth/logout`, { method: "POST", headers: { Authorization: `Bearer ${first.token}`, "content-type": "application/json" }, body: "{}" });
  assert.equal(out.status, 200, "logged out elsewhere");
  await client.accountInfo(); // 401 with the old token, then a new challenge signed, then served
  assert.ok(client.session && client.session.token !== first.token);
  assert.deepEqual(seen.map((s) => s && s.token), [first.token, null, client.session.token]);
});

/**
 * A Wallet Standard wallet as an extension registers it (the shape only: no registry in Node), holding a
 * Kit key pair and counting its prompts. Its `solana:signIn` writes the message as the Wallet Standard's
 * createSignInMessageText does, from the input it is handed.
 */
function testWallet(keyPair) {
  const account = Object.freeze({ address: keyPair.address, publicKey: new Uint8Array(32), chains: ["solana:localnet"], features: ["solana:signMessage", "solana:signIn"] });
  const sign = async (bytes) => (await keyPair.signMessages([{ content: bytes, signatures: {} }]))[0][keyPair.address];
  const wallet = {
    version: "1.0.0",
    name: "Node Test Wallet",
    accounts: [account],
    prompts: 0,
    features: {
      "solana:signMessage": {
        version: "1.1.0",
        signMessage: async ({ account: asked, message }) => {
          wallet.prompts++;
          assert.equal(asked.address, account.address);
          return [{ signedMessage: message, signature: await sign(message) }];
        },
      },
      "solana:signIn": {
        version: "1.0.0",
        signIn: async (input) => {
          wallet.prompts++;
          assert.equal(input.address, account.address);
          const fields = [["URI", input.uri], ["Version", input.version], ["Chain ID", input.chainId], ["Nonce", input.nonce], ["Issued At", input.issuedAt], ["Expiration Time", input.expirationTime]];
          let text = `${input.domain} wants you to sign in with your Solana account:\n${input.address}`;
          if (input.statement) text += `\n\n${input.statement}`;
          text += "\n\n" + fields.filter(([, v]) => v).map(([k, v]) => `${k}: ${v}`).join("\n");
          const signedMessage = new TextEncoder().encode(text);
          return [{ account, signedMessage, signature: await sign(signedMessage), signatureType: "ed25519" }];
        },
      },
    },
  };
  return wallet;
}

test("a Wallet Standard wallet signs a session, not each call: one prompt for several calls", async () => {
  const standard = testWallet(wallet);
  const client = new GatewayClient({ url, signer: fromWallet(standard, standard.accounts[0]) });
  assert.equal(client.useSession, true);
  await Promise.all([client.accountInfo(), client.rpc("getSlot"), client.rpc("getSlot")]);
  assert.equal(standard.prompts, 1, "concurrent calls share one challenge");
  assert.equal(client.session.owner, false);
});

test("Sign-In With Solana gives an owner session", async () => {
  const standard = testWallet(wallet);
  const client = new GatewayClient({ url });
  const session = await client.signIn(standard);
  assert.deepEqual([session.owner, session.pubkey, standard.prompts], [true, wallet.address, 1]);
  const listed = await client.request("GET", "/account/sessions");
  assert.ok(listed.sessions.some((s) => s.current && s.owner), JSON.stringify(listed));
});

test("a 402 is typed, with the deposit terms; through Kit too", async () => {
  const stranger = await generateKeyPairSigner(); // a valid signature, no account
  const client = new GatewayClient({ url, signer: stranger });
  const refused = await client.rpc("getSlot").then(() => null, (e) => e);
  assert.ok(refused instanceof PaymentRequired, String(refused));
  assert.equal(refused.status, 402);
  assert.equal(refused.code, -32002);
  assert.match(refused.terms.deposit_address, /^[1-9A-HJ-NP-Za-km-z]{32,44}$/);
  assert.match(refused.terms.usdc_mint, /^[1-9A-HJ-NP-Za-km-z]{32,44}$/);
  assert.equal(typeof refused.terms.instructions, "string");
  const anonymous = createSolanaRpcFromTransport(new GatewayClient({ url }).transport());
  const viaKit = await anonymous.getSlot().send().then(() => null, (e) => e);
  assert.ok(viaKit instanceof PaymentRequired && viaKit.terms.minimum_deposit_usdc, String(viaKit));
});

test("sendAndConfirm confirms a signed transfer, once; getSendStatus tells what became of it", async () => {
  const client = new GatewayClient({ url, apiKey });
  const outcome = await client.sendAndConfirm(process.env.TRANSFER);
  assert.equal(outcome.status, "confirmed", JSON.stringify(outcome));
  assert.equal(outcome.confirmed, true);
  assert.equal(outcome.charged_credits, 10);
  assert.ok(outcome.legs_attempted.length >= 1);
  const status = await client.sendStatus(outcome.signature);
  assert.equal(status.status, "confirmed");
  assert.equal(status.retry_safe, false); // it landed: sending it anew would pay twice
  assert.equal(status.charged_credits, 10);
  const never = "1".repeat(64); // a signature this account never sent
  assert.equal(await client.sendStatus(never), null);
});

test("a wrong key is AuthFailed; a JSON-RPC error is an RpcError", async () => {
  const bad = new GatewayClient({ url, apiKey: "srpc_live_" + "A".repeat(43) });
  const refused = await bad.rpc("getSlot").then(() => null, (e) => e);
  assert.ok(refused instanceof AuthFailed && refused.status === 401, String(refused));
  const client = new GatewayClient({ url, apiKey });
  const unknown = await client.rpc("getSlott").then(() => null, (e) => e);
  assert.ok(unknown instanceof RpcError && unknown.code === -32601, String(unknown));
});

test("the signals stream survives a lost connection: gap-filled, each event once, none missed", async () => {
  const client = new GatewayClient({ url: process.env.RELAY_URL, apiKey });
  const kinds = ["newPair", "largeSwap"];
  const stream = client.signals({ kinds }, { firstBackoffMs: 200 });
  const got = [];
  const deadline = Date.now() + 90_000; // a bound on a hang, not a measurement
  let cutAt = null;
  for await (const event of stream) {
    got.push(event);
    if (cutAt === null && got.length >= 5) {
      cutAt = got.length;
      const answer = await fetch(`${process.env.RELAY_CONTROL}/cut?ms=3000`, { method: "POST" });
      assert.equal(answer.status, 200);
    }
    if (cutAt !== null && stream.connects >= 2 && new Set(got.slice(cutAt).map((e) => e.slot)).size >= 4) break;
    assert.ok(Date.now() < deadline, `stuck: ${got.length} events, ${stream.connects} connections`);
  }
  assert.ok(stream.connects >= 2, "the stream connected again");
  assert.ok(stream.gapFilled > 0, "what was stored while the connection was down came from the gap-fill");
  const keys = got.map(eventKey);
  assert.equal(new Set(keys).size, keys.length, "an event yielded twice");
  // Strictly inside the window: exactly the log's events of those kinds (read from the gateway itself).
  const first = got[0].slot;
  const last = got[got.length - 1].slot;
  const reader = new GatewayClient({ url });
  const stored = [];
  let before;
  for (;;) {
    const page = await reader.recentSignals({ limit: 1000, sinceSlot: first, before });
    stored.push(...page.events);
    if (!page.more) break;
    before = page.events[page.events.length - 1].id;
  }
  const inside = (e) => first < e.slot && e.slot < last;
  const wanted = new Set(stored.filter((e) => inside(e) && kinds.includes(e.kind)).map(eventKey));
  const yielded = new Set(got.filter(inside).map(eventKey));
  assert.ok(wanted.size > 0, "an empty window proves nothing");
  assert.deepEqual([...yielded].sort(), [...wanted].sort());
  assert.ok(stored.some((e) => inside(e) && !kinds.includes(e.kind)), "the window had another kind to leave out");
});

test("a refused filter ends the stream with an RpcError", async () => {
  const stream = new GatewayClient({ url, apiKey }).signals({ kinds: "rugPull" });
  const refused = await stream.next().then(() => null, (e) => e);
  assert.ok(refused instanceof RpcError && refused.code === -32602, String(refused));
  assert.deepEqual(await stream.next(), { done: true, value: undefined });
});

test("a bad key on /ws is AuthFailed, close 4001", async () => {
  const stream = new GatewayClient({ url, apiKey: "srpc_live_" + "B".repeat(43) }).signals();
  const refused = await stream.next().then(() => null, (e) => e);
  assert.ok(refused instanceof AuthFailed && refused.code === 4001 && refused.status === 401, String(refused));
  assert.equal(stream.connects, 0);
});

test("webhook deliveries signed by the server's own function verify; anything altered does not", () => {
  const vectors = JSON.parse(process.env.WEBHOOK_VECTORS);
  assert.ok(vectors.length >= 2);
  for (const v of vectors) {
    const body = Buffer.from(v.body_b64, "base64"); // raw bytes, as a Node receiver reads them
    const headers = { "x-webhook-signature": v.signature, "x-webhook-timestamp": String(v.timestamp), "x-webhook-event-id": v.event_id, "x-webhook-id": "42" };
    const now = v.timestamp + 10;
    assert.equal(webhookSignature(v.secret, v.event_id, v.timestamp, body), v.signature);
    assert.ok(verifyWebhook(v.secret, headers, body, { now }));
    assert.ok(verifyWebhook(v.secret, new Headers(headers), body, { now }), "a fetch Headers");
    assert.ok(verifyWebhook(["whsec_old", v.secret], headers, body, { now }), "either secret of a rotation");
    assert.ok(!verifyWebhook("whsec_other", headers, body, { now }));
    const altered = Buffer.from(body);
    altered[altered.length - 2] ^= 1;
    assert.ok(!verifyWebhook(v.secret, headers, altered, { now }));
    assert.ok(!verifyWebhook(v.secret, { ...headers, "x-webhook-event-id": "evt_1_1" }, body, { now }));
    assert.ok(!verifyWebhook(v.secret, headers, body, { now: v.timestamp + 301 }), "an old attempt, replayed");
    const { "x-webhook-signature": _, ...unsigned } = headers;
    assert.ok(!verifyWebhook(v.secret, unsigned, body, { now }));
  }
});
