// solana-credit-gateway-client: the Solana credit gateway's client for browsers and Node (README.md).
// No Node-only API anywhere: fetch, WebSocket, TextEncoder and @noble/hashes.
export { GatewayClient, VERSION, type GatewayClientOptions, type Meter, type RequestOptions, type SendOutcome, type SendStatus, type Session } from "./client.js";
export * from "./errors.js";
export {
  SignalStream,
  KINDS,
  DEFAULT_STREAM_OPTIONS,
  RECONNECT_CODES,
  eventKey,
  filterMatches,
  filterParams,
  websocketUrl,
  type RecentSignals,
  type SignalEvent,
  type SignalFilter,
  type SignalKind,
  type StreamOptions,
} from "./signals.js";
export {
  base58,
  bodyHash,
  fromKitSigner,
  fromWallet,
  signedHeaders,
  signingMessage,
  SIGNING_TAG,
  SIGN_IN,
  SIGN_MESSAGE,
  type KitMessageSigner,
  type MessageSigner,
  type WalletAccountLike,
  type WalletLike,
} from "./signing.js";
export * from "./webhooks.js";
