// @solana/kit, unchanged, against the gateway: the API key in the URL (kit sends no custom header).
// Env: GATEWAY_URL (http://host:port), API_KEY, PAYER_SECRET (JSON array of the 64-byte keypair, funded).
// Prints one JSON line per step; exits non-zero at the first failure.
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

const url = process.env.GATEWAY_URL;
const key = encodeURIComponent(process.env.API_KEY);
const rpc = createSolanaRpc(`${url}/?api-key=${key}`);
const rpcSubscriptions = createSolanaRpcSubscriptions(`${url.replace(/^http/, "ws")}/ws?api-key=${key}`);
const step = (name, value) => console.log(JSON.stringify({ step: name, value }, (_, v) => (typeof v === "bigint" ? v.toString() : v)));

const slot = await rpc.getSlot().send();
step("getSlot", slot);
step("getVersion", await rpc.getVersion().send());
step("getEpochInfo", await rpc.getEpochInfo().send());
const payer = await createKeyPairSignerFromBytes(new Uint8Array(JSON.parse(process.env.PAYER_SECRET)));
const { value: before } = await rpc.getBalance(payer.address).send();
step("getBalance", before);

const abort = new AbortController();
const timer = setTimeout(() => abort.abort(), 20_000);
const slots = await rpcSubscriptions.slotNotifications().subscribe({ abortSignal: abort.signal });
for await (const note of slots) {
  step("slotNotifications", note.slot);
  break;
}
clearTimeout(timer);
abort.abort();

const recipient = await generateKeyPairSigner();
const amount = lamports(1_000_000n);
const { value: latestBlockhash } = await rpc.getLatestBlockhash().send();
const message = pipe(
  createTransactionMessage({ version: 0 }),
  (m) => setTransactionMessageFeePayerSigner(payer, m),
  (m) => setTransactionMessageLifetimeUsingBlockhash(latestBlockhash, m),
  (m) => appendTransactionMessageInstruction(getTransferSolInstruction({ source: payer, destination: recipient.address, amount }), m),
);
const signed = await signTransactionMessageWithSigners(message);
const sendAndConfirm = sendAndConfirmTransactionFactory({ rpc, rpcSubscriptions });
await sendAndConfirm(signed, { commitment: "confirmed" });
step("sendAndConfirmTransaction", getSignatureFromTransaction(signed));
const { value: received } = await rpc.getBalance(recipient.address, { commitment: "confirmed" }).send();
if (received !== 1_000_000n) throw new Error(`recipient holds ${received} lamports, expected 1000000`);
step("transferLanded", received);
process.exit(0); // the subscriptions' sockets would keep the process alive
