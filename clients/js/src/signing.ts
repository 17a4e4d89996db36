// The per-request wallet signature (docs/api.md, Authentication) and the signers that make it.
//
// A signer is anything that signs bytes with an Ed25519 key: a Kit `KeyPairSigner` (signs locally, so it
// can sign every request), or a Wallet Standard wallet's account (the wallet asks its user on every
// signature, so the client uses it for sessions and keys only, never per call).

import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex, randomBytes } from "@noble/hashes/utils.js";

export const SIGNING_TAG = "ledger-svc:v2";
const utf8 = new TextEncoder();

/** What the client signs with: an address (base58 public key) and a function signing raw bytes. */
export interface MessageSigner {
  readonly address: string;
  signMessage(message: Uint8Array): Promise<Uint8Array>;
  /** False for a wallet that prompts its user: the client opens a session instead of signing each call. */
  readonly perRequest: boolean;
}

/** The part of a Kit `KeyPairSigner` (`generateKeyPairSigner`, `createKeyPairSignerFromBytes`) used here. */
export interface KitMessageSigner {
  readonly address: string;
  signMessages(messages: readonly { content: Uint8Array; signatures: Readonly<Record<string, Uint8Array>> }[]): Promise<readonly Readonly<Record<string, Uint8Array>>[]>;
}

/** A Kit `KeyPairSigner` (or any Kit message signer): signs locally, so every request may be signed. */
export function fromKitSigner(signer: KitMessageSigner): MessageSigner {
  return {
    address: String(signer.address),
    perRequest: true,
    async signMessage(message) {
      const [signatures] = await signer.signMessages([Object.freeze({ content: message, signatures: Object.freeze({}) })]);
      const signature = signatures?.[String(signer.address)];
      if (!signature) throw new Error(`the signer gave no signature for ${signer.address}`);
      return signature;
    },
  };
}

/** The Wallet Standard's shapes used here (`@wallet-standard/base`), kept structural: no dependency. */
export interface WalletAccountLike {
  readonly address: string;
  readonly publicKey?: Uint8Array;
  readonly features?: readonly string[];
}
export interface WalletLike {
  readonly name: string;
  readonly accounts: readonly WalletAccountLike[];
  readonly features: Readonly<Record<string, unknown>>;
}

export const SIGN_MESSAGE = "solana:signMessage";
export const SIGN_IN = "solana:signIn";
export const CONNECT = "standard:connect";

type SignMessageFeature = { signMessage(...inputs: { account: WalletAccountLike; message: Uint8Array }[]): Promise<readonly { signedMessage: Uint8Array; signature: Uint8Array }[]> };

/** A Wallet Standard wallet's account (`solana:signMessage`): every signature is a prompt, so sessions and keys only. */
export function fromWallet(wallet: WalletLike, account: WalletAccountLike): MessageSigner {
  const feature = wallet.features[SIGN_MESSAGE] as SignMessageFeature | undefined;
  if (!feature) throw new Error(`${wallet.name} does not offer ${SIGN_MESSAGE}`);
  return {
    address: account.address,
    perRequest: false,
    async signMessage(message) {
      const [output] = await feature.signMessage({ account, message });
      if (!output || !output.signature) throw new Error(`${wallet.name} gave no signature`);
      return output.signature;
    },
  };
}

export function isKitSigner(value: unknown): value is KitMessageSigner {
  return Boolean(value && typeof value === "object" && "signMessages" in value && "address" in value);
}

/** Lowercase SHA-256 hex of the body; the empty string for GET, whatever its body. */
export function bodyHash(method: string, body: string | Uint8Array): string {
  if (method.toUpperCase() === "GET") return "";
  return bytesToHex(sha256(typeof body === "string" ? utf8.encode(body) : body));
}

/** `ledger-svc:v2:{METHOD}:{PATH}:{TIMESTAMP}:{NONCE}:{BODY_HASH}`; the path without its query string. */
export function signingMessage(method: string, path: string, timestamp: number | string, nonce: string, body: string | Uint8Array): string {
  const upper = method.toUpperCase();
  return `${SIGNING_TAG}:${upper}:${path.split("?")[0]}:${timestamp}:${nonce}:${bodyHash(upper, body)}`;
}

/**
 * The four headers of a signed request. `skewS`: the gateway's clock minus this one's, in seconds (a
 * timestamp more than 60 s off is refused, and a browser's clock can be wrong).
 */
export async function signedHeaders(signer: Pick<MessageSigner, "address" | "signMessage">, method: string, path: string, body: string | Uint8Array = "", skewS = 0): Promise<Record<string, string>> {
  const timestamp = String(Math.floor(Date.now() / 1000 + skewS));
  const nonce = bytesToHex(randomBytes(16));
  const signature = await signer.signMessage(utf8.encode(signingMessage(method, path, timestamp, nonce, body)));
  return { "X-Pubkey": signer.address, "X-Signature": base58(signature), "X-Timestamp": timestamp, "X-Nonce": nonce };
}

const ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

/** Base58 (Bitcoin alphabet) of bytes: signatures and keys as the gateway reads them. */
export function base58(bytes: Uint8Array): string {
  let zeros = 0;
  while (zeros < bytes.length && bytes[zeros] === 0) zeros++;
  const digits: number[] = [];
  for (let i = zeros; i < bytes.length; i++) {
    let carry = bytes[i];
    for (let j = 0; j < digits.length; j++) {
      carry += digits[j] << 8;
      digits[j] = carry % 58;
      carry = (carry / 58) | 0;
    }
    while (carry) {
      digits.push(carry % 58);
      carry = (carry / 58) | 0;
    }
  }
  let out = "1".repeat(zeros);
  for (let i = digits.length - 1; i >= 0; i--) out += ALPHABET[digits[i]];
  return out;
}
