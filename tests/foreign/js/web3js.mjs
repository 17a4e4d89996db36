// @solana/web3.js 1.x, unchanged, against the gateway: `Connection` with the API key in both URLs (its
// `wsEndpoint` too), reads, `onSlotChange`, and `confirmTransaction` (signatureSubscribe over /ws) after a
// SOL transfer. Env: GATEWAY_URL, API_KEY, PAYER_SECRET (JSON array of a funded 64-byte keypair).
// Prints one JSON line per step; exits non-zero at the first failure.
import { Connection, Keypair, LAMPORTS_PER_SOL, SystemProgram, Transaction } from "@solana/web3.js";

const url = process.env.GATEWAY_URL;
const key = encodeURIComponent(process.env.API_KEY);
const connection = new Connection(`${url}/?api-key=${key}`, {
  commitment: "confirmed",
  wsEndpoint: `${url.replace(/^http/, "ws")}/ws?api-key=${key}`,
});
const step = (name, value) => console.log(JSON.stringify({ step: name, value }));

step("getSlot", await connection.getSlot());
step("getVersion", await connection.getVersion());
const payer = Keypair.fromSecretKey(new Uint8Array(JSON.parse(process.env.PAYER_SECRET)));
step("getBalance", await connection.getBalance(payer.publicKey));

const slot = await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error("no slot notification within 20 s")), 20_000);
  const id = connection.onSlotChange((info) => {
    clearTimeout(timer);
    connection.removeSlotChangeListener(id).then(() => resolve(info.slot), reject);
  });
});
step("onSlotChange", slot);

const recipient = Keypair.generate();
const { blockhash, lastValidBlockHeight } = await connection.getLatestBlockhash();
const transaction = new Transaction({ feePayer: payer.publicKey, blockhash, lastValidBlockHeight }).add(
  SystemProgram.transfer({ fromPubkey: payer.publicKey, toPubkey: recipient.publicKey, lamports: LAMPORTS_PER_SOL / 1000 }),
);
transaction.sign(payer);
const signature = await connection.sendRawTransaction(transaction.serialize());
const confirmed = await connection.confirmTransaction({ signature, blockhash, lastValidBlockHeight }, "confirmed");
if (confirmed.value.err !== null) throw new Error(`the transfer failed: ${JSON.stringify(confirmed.value.err)}`);
step("confirmTransaction", signature);
const received = await connection.getBalance(recipient.publicKey);
if (received !== LAMPORTS_PER_SOL / 1000) throw new Error(`recipient holds ${received} lamports, expected 1000000`);
step("transferLanded", received);
process.exit(0);
