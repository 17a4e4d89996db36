// The Wallet Standard's Sign-In With Solana text, by the reference implementation, for
// tests/auth/test_sign_in.py: reads a JSON array of SolanaSignInInput objects on stdin and prints a JSON
// array with, for each, the text createSignInMessageText writes and what parseSignInMessageText reads back.
import { createSignInMessageText, parseSignInMessageText } from "@solana/wallet-standard-util";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const inputs = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const out = inputs.map((input) => {
  const text = createSignInMessageText(input);
  return { text, parsed: parseSignInMessageText(text) };
});
process.stdout.write(JSON.stringify(out));
