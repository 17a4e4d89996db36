// Wallets through the Wallet Standard only: whatever registers itself (Phantom, Solflare, Backpack, a test
// wallet) and offers `standard:connect` and `solana:signMessage`. No wallet is named in this code.

import { getWallets } from "@wallet-standard/app";

const CONNECT = "standard:connect";
const DISCONNECT = "standard:disconnect";
const SIGN_MESSAGE = "solana:signMessage";

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

/** A signMessage(bytes) -> signature bytes bound to one wallet account. */
export function signer(wallet, account) {
  return async (message) => {
    const [output] = await wallet.features[SIGN_MESSAGE].signMessage({ account, message });
    return output.signature;
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
