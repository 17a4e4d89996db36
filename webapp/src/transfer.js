// The deposit button's transaction, built with @solana/kit: one SPL Token TransferChecked of USDC from the
// signed-in wallet's USDC account to the deposit wallet's, with the gateway's fee payer as fee payer (the
// sponsored path of POST /x402/settle, docs/api.md: the wallet needs no SOL). Its signature slot is left
// empty for the gateway to fill; the wallet signs only as the transfer's authority.

import {
  AccountRole,
  address,
  appendTransactionMessageInstruction,
  compileTransaction,
  createTransactionMessage,
  getAddressEncoder,
  getBase64EncodedWireTransaction,
  getProgramDerivedAddress,
  getTransactionDecoder,
  getTransactionEncoder,
  pipe,
  setTransactionMessageFeePayer,
  setTransactionMessageLifetimeUsingBlockhash,
} from "@solana/kit";

const TOKEN_PROGRAM = address("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA");
const ASSOCIATED_TOKEN_PROGRAM = address("ATokenGPvbdGVxr1b2hvZbsiqW5xWH25efTNsLJA8knL");
const TRANSFER_CHECKED = 12; // the SPL Token instruction's index
export const USDC_DECIMALS = 6;

/** The associated token account of `owner` for `mint`. */
export async function tokenAccount(owner, mint) {
  const encoder = getAddressEncoder();
  const [pda] = await getProgramDerivedAddress({
    programAddress: ASSOCIATED_TOKEN_PROGRAM,
    seeds: [encoder.encode(owner), encoder.encode(TOKEN_PROGRAM), encoder.encode(mint)],
  });
  return pda;
}

/** The unsigned wire transaction (Uint8Array): `units` (bigint) of `terms.asset` from `owner` to `terms.payTo`. */
export async function sponsoredTransfer(terms, owner, units, recent) {
  const mint = address(terms.asset);
  const authority = address(owner);
  const data = new Uint8Array(10);
  data[0] = TRANSFER_CHECKED;
  new DataView(data.buffer).setBigUint64(1, units, true);
  data[9] = USDC_DECIMALS;
  const transfer = {
    programAddress: TOKEN_PROGRAM,
    accounts: [
      { address: await tokenAccount(authority, mint), role: AccountRole.WRITABLE },
      { address: mint, role: AccountRole.READONLY },
      { address: await tokenAccount(address(terms.payTo), mint), role: AccountRole.WRITABLE },
      { address: authority, role: AccountRole.READONLY_SIGNER },
    ],
    data,
  };
  const lifetime = { blockhash: recent.blockhash, lastValidBlockHeight: BigInt(recent.last_valid_block_height) };
  const message = pipe(
    createTransactionMessage({ version: 0 }),
    (m) => setTransactionMessageFeePayer(address(terms.extra.feePayer), m),
    (m) => setTransactionMessageLifetimeUsingBlockhash(lifetime, m),
    (m) => appendTransactionMessageInstruction(transfer, m),
  );
  return new Uint8Array(getTransactionEncoder().encode(compileTransaction(message)));
}

/**
 * What the wallet gave back, checked and in base64 for /x402/settle: the same message we built (a wallet
 * may not change what is paid), signed by `owner`. Throws with a sentence otherwise.
 */
export function signedForSettling(unsigned, signed, owner) {
  const decoder = getTransactionDecoder();
  const ours = decoder.decode(unsigned);
  const theirs = decoder.decode(signed);
  const same = ours.messageBytes.length === theirs.messageBytes.length && ours.messageBytes.every((b, i) => b === theirs.messageBytes[i]);
  if (!same) throw new Error("the wallet changed the transaction it was asked to sign; nothing was sent");
  if (!theirs.signatures[owner]) throw new Error("the wallet returned the transaction without its signature; nothing was sent");
  return getBase64EncodedWireTransaction(theirs);
}
