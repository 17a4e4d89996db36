// What a web page does with @solana/kit against the gateway, bundled by esbuild into one file
// (tests/browser/conftest.py) that a page on another origin loads. Exposed as window.gateway;
// every function returns plain JSON (bigints as strings), or throws what the browser threw.
import {
  appendTransactionMessageInstruction,
  createKeyPairSignerFromBytes,
  createSolanaRpc,
  createSolanaRpcSubscriptions,
  createTransactionMessage,
  generateKeyPairSigner,
  getSignatureFromTransaction,
  lamports,
  pipe,
  sendAndConfirmTransactionFactory,
  setTransactionMessageFeePayerSigner,
  setTransactionMessageLifetimeUsingBlockhash,
  signTransactionMessageWithSigners,
} from "@solana/kit";
import { getTransferSolInstruction } from "@solana-program/system";

const plain = (value) => JSON.parse(JSON.stringify(value, (_, v) => (typeof v === "bigint" ? v.toString() : v)));

// getSlot with the key in the X-Api-Key header: a preflighted call.
async function getSlot(url, apiKey) {
  const rpc = createSolanaRpc(url, { headers: { "x-api-key": apiKey } });
  return plain(await rpc.getSlot().send());
}

// The first slot notification over /ws (the key in the URL: a browser's WebSocket sends no header).
async function firstSlot(wsUrl, timeoutMs = 20000) {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  try {
    const slots = await createSolanaRpcSubscriptions(wsUrl).slotNotifications().subscribe({ abortSignal: abort.signal });
    for await (const note of slots) return plain(note.slot);
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
}

// A transfer signed in the page (WebCrypto's Ed25519), sent and confirmed through the gateway.
async function transfer(url, wsUrl, payerSecret, amount) {
  const rpc = createSolanaRpc(url);
  const rpcSubscriptions = createSolanaRpcSubscriptions(wsUrl);
  const payer = await createKeyPairSignerFromBytes(new Uint8Array(payerSecret));
  const recipient = await generateKeyPairSigner();
  const { value: latestBlockhash } = await rpc.getLatestBlockhash().send();
  const message = pipe(
    createTransactionMessage({ version: 0 }),
    (m) => setTransactionMessageFeePayerSigner(payer, m),
    (m) => setTransactionMessageLifetimeUsingBlockhash(latestBlockhash, m),
    (m) => appendTransactionMessageInstruction(getTransferSolInstruction({ source: payer, destination: recipient.address, amount: lamports(BigInt(amount)) }), m),
  );
  const signed = await signTransactionMessageWithSigners(message);
  await sendAndConfirmTransactionFactory({ rpc, rpcSubscriptions })(signed, { commitment: "confirmed" });
  const { value: received } = await rpc.getBalance(recipient.address, { commitment: "confirmed" }).send();
  return plain({ signature: getSignatureFromTransaction(signed), recipient: recipient.address, received });
}

// A raw fetch: what the page can read of an answer (status, the headers it may read, the body).
async function call(url, init = {}) {
  const response = await fetch(url, init);
  return { status: response.status, headers: Object.fromEntries(response.headers.entries()), body: await response.text() };
}

// kit's error as the page sees it: its message, and the HTTP status when kit read one.
async function outcome(promise) {
  try {
    return { ok: true, value: await promise };
  } catch (error) {
    return { ok: false, name: error.name, message: String(error.message), statusCode: error.context?.statusCode ?? null };
  }
}

window.gateway = {
  getSlot: (url, apiKey) => outcome(getSlot(url, apiKey)),
  firstSlot: (wsUrl, timeoutMs) => outcome(firstSlot(wsUrl, timeoutMs)),
  transfer: (url, wsUrl, payerSecret, amount) => outcome(transfer(url, wsUrl, payerSecret, amount)),
  call: (url, init) => outcome(call(url, init)),
};
