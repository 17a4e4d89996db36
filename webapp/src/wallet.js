// Wallets through the Wallet Standard only: whatever registers itself (Phantom, Solflare, Backpack, a test
// wallet) and offers `standard:connect` and `solana:signMessage`; `solana:signIn` (Sign In With Solana) is
// used where the wallet offers it. No wallet is named in this code.

import { getWallets } from "@wallet-standard/app";
import { fromWallet } from "solana-credit-gateway-client";

const CONNECT = "standard:connect";
const DISCONNECT = "standard:disconnect";
const SIGN_MESSAGE = "solana:signMessage";
const SIGN_IN = "solana:signIn";

const registry = getWallets();

/** The wallets that can sign us in, now. */
export function signingWallets() {
  return registry.get().filter((w) => CONNECT in w.features && SIGN_MESSAGE in w.features);
}

/** Call `listener` whenever a wallet registers or leaves; returns the unsubscribe function. */
export function onWalletsChanged(listener) {
  const offRegister = registry.on("register", listener);
  const offUnregister = registry.on("unregister", listener);
  return () => {
    offRegister();
    offUnregister();
  };
}

export function findWallet(name) {
  return signingWallets().find((w) => w.name === name) || null;
}

/** Connect and pick the account: the one with `address` when given, else the wallet's first. */
export async function connect(wallet, address) {
  const { accounts } = await wallet.features[CONNECT].connect();
  const all = accounts.length ? accounts : wallet.accounts;
  const account = address ? all.find((a) => a.address === address) : all[0];
  if (!account) throw new Error(address ? `${wallet.name} does not hold ${address}` : `${wallet.name} gave no account`);
  return account;
}

/** A signMessage(bytes) -> signature bytes bound to one wallet account (the client's wallet signer). */
export function signer(wallet, account) {
  const signing = fromWallet(wallet, account);
  return (message) => signing.signMessage(message);
}

/** Whether the wallet offers Sign In With Solana (a message naming the site, which the wallet shows and checks). */
export function canSignIn(wallet) {
  return Boolean(wallet && SIGN_IN in wallet.features);
}

/**
 * `solana:signIn` with the gateway's SolanaSignInInput passed unchanged: {address, message (the UTF-8 text of
 * the bytes the wallet signed), signature (bytes)}. The wallet builds the message itself from the input.
 */
export async function signInWith(wallet, input) {
  const [output] = await wallet.features[SIGN_IN].signIn(input);
  if (!output || !output.signedMessage || !output.signature) throw new Error(`${wallet.name} gave no signed sign-in message`);
  return {
    address: output.account && output.account.address,
    message: new TextDecoder().decode(output.signedMessage),
    signature: output.signature,
  };
}

export async function disconnect(wallet) {
  if (wallet && DISCONNECT in wallet.features) {
    try {
      await wallet.features[DISCONNECT].disconnect();
    } catch {
      // the session is what signs out; a wallet that will not disconnect changes nothing here
    }
  }
}
