// GatewayClient: the gateway's HTTP routes with one credential (docs/api.md, Authentication), its
// typed errors, the credit and rate-limit headers of the last answer, the signals stream and a
// @solana/kit transport. Standard web APIs only (fetch, WebSocket, TextEncoder, AbortSignal): the same
// module runs in a page and in Node 20+.

import type { RpcTransport } from "@solana/kit";
import { parseJsonWithBigInts, stringifyJsonWithBigInts } from "./json.js";

import { AuthFailed, BackendUnavailable, ConnectionLost, GatewayError, RateLimited, errorFromAnswer } from "./errors.js";
import { SignalStream, type RecentSignals, type SignalFilter, type StreamOptions } from "./signals.js";
import { SIGN_IN, fromKitSigner, isKitSigner, signedHeaders, base58, type KitMessageSigner, type MessageSigner, type WalletAccountLike, type WalletLike } from "./signing.js";

export const VERSION = "0.3.0";

/** A session: its bearer token, the wallet it belongs to, and whether it is an owner session (Sign-In With Solana). */
export interface Session {
  token: string;
  pubkey: string;
  owner: boolean;
}

/** The credit and rate-limit headers of the last authenticated answer (docs/api.md, Response headers). */
export interface Meter {
  creditsRemaining: number | null;
  creditsLow: boolean;
  rateLimit: { limit: number | null; remaining: number | null; reset: number | null };
  retryAfter: number | null;
  requestId: string | null;
  cache: string | null;
  upstream: string | null;
}

/** `sendAndConfirm`'s result (docs/api.md, Sending): `unknown` stays held until the chain proves the outcome. */
export interface SendOutcome {
  signature: string;
  status: "confirmed" | "failed" | "unknown";
  confirmed: boolean;
  slot: number | null;
  confirmations: number | null;
  landing_time_ms: number | null;
  legs_attempted: string[];
  retry_count: number;
  charged_credits: number;
  error: unknown;
}

/** `getSendStatus`'s answer: `retry_safe` only when the transaction can never land (`expired`, `refused`). */
export interface SendStatus {
  signature: string;
  status: "pending" | "confirmed" | "failed" | "expired" | "refused";
  retry_safe: boolean;
  held_credits: number;
  charged_credits: number;
  slot: number | null;
  error: unknown;
  legs_attempted: string[];
  retry_count: number;
  sent_at: string | null;
  settled_at: string | null;
}

export interface GatewayClientOptions {
  /** The gateway's base URL (`http://127.0.0.1:8000`); "" in a page the gateway itself serves. */
  url: string;
  /** `X-Api-Key` on every call, and the `auth.<key>` subprotocol on /ws. */
  apiKey?: string | null;
  /** A Kit `KeyPairSigner` (signs each request) or `fromWallet(wallet, account)` (sessions and keys only). */
  signer?: MessageSigner | KitMessageSigner | null;
  /** Calls carry a session token rather than a signature each. Default: only for a signer that prompts (a wallet). */
  useSession?: boolean;
  /** A session to start from (a page's saved one); `onSession` is told of every new or ended session. */
  session?: Session | null;
  onSession?: (session: Session | null) => void;
  /** Retries of a 429 (after `Retry-After`) or a 502/503 (backoff) for reads; a send is never repeated. Default 2. */
  retries?: number;
  /** The gateway's clock minus this one's, in seconds (signatures must be within 60 s). */
  clockSkewS?: number;
  fetch?: typeof fetch;
  WebSocket?: typeof WebSocket;
}

export interface RequestOptions {
  body?: unknown;
  /** Send a credential (default true); "signature": the wallet's signature whatever the client's mode (key and rules routes). */
  auth?: boolean | "signature";
  signal?: AbortSignal;
  /** Retry a 429/502/503 (default: for GET only). */
  retry?: boolean;
  headers?: Record<string, string>;
}

type SignInFeature = { signIn(...inputs: Record<string, unknown>[]): Promise<readonly { account?: WalletAccountLike; signedMessage: Uint8Array; signature: Uint8Array }[]> };

const SENDS = /^(send|simulateBundle$)/; // sendTransaction, sendAndConfirmTransaction, sendBundle, ...

function number(value: string | null): number | null {
  if (value === null || value === "") return null;
  const n = Number(value);
  return Number.isFinite(n) ? n : null;
}

function readMeter(headers: Headers): Meter {
  return {
    creditsRemaining: number(headers.get("x-credits-remaining")),
    creditsLow: headers.get("x-credits-low") === "true",
    rateLimit: { limit: number(headers.get("x-ratelimit-limit")), remaining: number(headers.get("x-ratelimit-remaining")), reset: number(headers.get("x-ratelimit-reset")) },
    retryAfter: number(headers.get("retry-after")),
    requestId: headers.get("x-request-id"),
    cache: headers.get("x-cache"),
    upstream: headers.get("x-upstream"),
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export class GatewayClient {
  readonly url: string;
  apiKey: string | null;
  readonly signer: MessageSigner | null;
  readonly useSession: boolean;
  retries: number;
  clockSkewS: number;
  /** The headers of the last answer that had them: `X-Credits-Remaining`, the rate limit, the request id. */
  meter: Meter | null = null;
  readonly webSocket: typeof WebSocket;
  private currentSession: Session | null;
  private readonly onSession: ((session: Session | null) => void) | undefined;
  private readonly fetchImpl: typeof fetch;
  private opening: Promise<Session> | null = null;

  constructor(options: GatewayClientOptions) {
    this.url = options.url.replace(/\/+$/, "");
    this.apiKey = options.apiKey ?? null;
    const signer = options.signer ?? null;
    this.signer = signer && isKitSigner(signer) ? fromKitSigner(signer) : (signer as MessageSigner | null);
    this.useSession = options.useSession ?? Boolean(this.signer && !this.signer.perRequest);
    this.currentSession = options.session ?? null;
    this.onSession = options.onSession;
    this.retries = options.retries ?? 2;
    this.clockSkewS = options.clockSkewS ?? 0;
    this.fetchImpl = options.fetch ?? ((...args: Parameters<typeof fetch>) => globalThis.fetch(...args));
    this.webSocket = options.WebSocket ?? globalThis.WebSocket;
  }

  /** The session calls use (null before the first, or after a logout). */
  get session(): Session | null {
    return this.currentSession;
  }

  private setSession(session: Session | null): void {
    this.currentSession = session;
    this.onSession?.(session);
  }

  // -- HTTP ---------------------------------------------------------------------------------------

  /**
   * One call of a gateway route: the answer's JSON, or the typed error. A session token refused 401 is
   * renewed once (a new challenge signed) and the call made again.
   */
  async request<T = unknown>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const response = await this.fetchChecked(method, path, options);
    const text = await response.text();
    return (text ? JSON.parse(text) : null) as T;
  }

  /** As `request`, the answer's `Response` itself (a CSV export's stream), after the error check. */
  async fetchChecked(method: string, path: string, options: RequestOptions = {}): Promise<Response> {
    const body = options.body === undefined ? undefined : typeof options.body === "string" ? options.body : JSON.stringify(options.body);
    const retry = options.retry ?? method.toUpperCase() === "GET";
    let renewed = false;
    for (let attempt = 0; ; attempt++) {
      const { headers, bearer } = await this.credentials(method, path, body, options.auth ?? true);
      const response = await this.rawFetch(method, path, body, { ...(options.headers ?? {}), ...headers }, options.signal);
      if (response.ok) return response;
      const text = await response.text();
      let parsed: unknown = text;
      try {
        parsed = text ? JSON.parse(text) : null;
      } catch {
        parsed = text;
      }
      const error = errorFromAnswer(response.status, response.headers, parsed) ?? new GatewayError(response.status, null, text.slice(0, 300));
      if (error instanceof AuthFailed && bearer && !renewed && this.signer) {
        renewed = true; // an expired, logged-out or ended session: sign a new challenge once
        this.setSession(null);
        continue;
      }
      if (retry && attempt < this.retries && (error instanceof RateLimited || (error instanceof BackendUnavailable && error.status !== 504))) {
        const waitS = error instanceof RateLimited ? error.retryAfter : error.retryAfter ?? 0.5 * 2 ** attempt;
        await sleep(Math.min(waitS, 30) * 1000);
        continue;
      }
      throw error;
    }
  }

  private async rawFetch(method: string, path: string, body: string | undefined, headers: Record<string, string>, signal?: AbortSignal): Promise<Response> {
    const init: RequestInit = { method, headers: { ...headers }, cache: "no-store", credentials: "omit", signal };
    if (body !== undefined) {
      init.body = body;
      (init.headers as Record<string, string>)["Content-Type"] = "application/json";
    }
    let response: Response;
    try {
      response = await this.fetchImpl(this.url + path, init);
    } catch (err) {
      if ((err as Error)?.name === "AbortError" || (err as Error)?.name === "TimeoutError") throw err;
      throw new ConnectionLost(0, "NETWORK", `the gateway did not answer (${(err as Error)?.message ?? err})`);
    }
    if (response.headers.has("x-credits-remaining") || response.headers.has("x-ratelimit-limit")) this.meter = readMeter(response.headers);
    return response;
  }

  /** The headers of one request's credential, and whether it was a session token. */
  private async credentials(method: string, path: string, body: string | undefined, auth: boolean | "signature"): Promise<{ headers: Record<string, string>; bearer: boolean }> {
    if (auth === false) return { headers: {}, bearer: false };
    if (auth === "signature") return { headers: await this.signatureHeaders(method, path, body), bearer: false };
    if (this.apiKey) return { headers: { "X-Api-Key": this.apiKey }, bearer: false };
    if (this.signer && !this.useSession) return { headers: await this.signatureHeaders(method, path, body), bearer: false };
    if (this.currentSession || this.signer) {
      const session = this.currentSession ?? (await this.openSession());
      return { headers: { Authorization: `Bearer ${session.token}` }, bearer: true };
    }
    return { headers: {}, bearer: false }; // no credential: the gateway answers 402 with its terms
  }

  /** The four `X-` headers of a per-request wallet signature over this request. */
  signatureHeaders(method: string, path: string, body?: string): Promise<Record<string, string>> {
    if (!this.signer) throw new AuthFailed(0, "NO_SIGNER", "this call needs the wallet's signature: give the client a signer");
    return signedHeaders(this.signer, method.toUpperCase(), path, body ?? "", this.clockSkewS);
  }

  // -- JSON-RPC -----------------------------------------------------------------------------------

  /** One JSON-RPC call (`POST /`): its result, an `RpcError` for a JSON-RPC error, or the typed HTTP error. */
  async rpc<T = unknown>(method: string, params: unknown[] = [], options: { signal?: AbortSignal } = {}): Promise<T> {
    const payload = { jsonrpc: "2.0", id: 1, method, params };
    const answer = await this.request<{ result?: T; error?: unknown }>("POST", "/", { body: stringifyJsonWithBigInts(payload), retry: !SENDS.test(method), signal: options.signal });
    const error = errorFromAnswer(200, new Headers(), answer);
    if (error) throw error;
    return answer.result as T;
  }

  /**
   * `sendAndConfirm` a signed transaction (its wire bytes in base64): raced to confirmation, its outcome
   * (docs/api.md, Sending). Never retried, whatever the failure: after a lost answer or a timeout, ask
   * `sendStatus` before sending anything anew, since the transaction may have been broadcast.
   */
  sendAndConfirm(transaction: string, options: { skipPreflight?: boolean; signal?: AbortSignal } = {}): Promise<SendOutcome> {
    const config = { encoding: "base64", skipPreflight: options.skipPreflight ?? true };
    return this.rpc<SendOutcome>("sendAndConfirm", [transaction, config], { signal: options.signal });
  }

  /** `getSendStatus`: what became of a `sendAndConfirm` and whether sending again is safe; null for a signature this account never sent so. */
  sendStatus(signature: string, options: { signal?: AbortSignal } = {}): Promise<SendStatus | null> {
    return this.rpc<SendStatus | null>("getSendStatus", [signature], options);
  }

  /**
   * A @solana/kit `RpcTransport`: `createSolanaRpcFromTransport(client.transport())` speaks to the gateway
   * with this client's credential on every call (a per-request signature with a `KeyPairSigner`). A
   * refusal is thrown as the typed error (`PaymentRequired` with its `terms`, ...); a JSON-RPC error in a
   * 200 is Kit's to read, as from any node.
   */
  transport(): RpcTransport {
    return (async ({ payload, signal }: { payload: unknown; signal?: AbortSignal }) => {
      const method = payload && typeof payload === "object" && "method" in payload ? String((payload as { method: unknown }).method) : "";
      const response = await this.fetchChecked("POST", "/", { body: stringifyJsonWithBigInts(payload), retry: !SENDS.test(method), signal });
      return parseJsonWithBigInts(await response.text());
    }) as RpcTransport;
  }

  // -- sessions and keys --------------------------------------------------------------------------

  /** A session from the plain challenge signed by the signer (docs/api.md, Session token); calls then carry it. */
  openSession(): Promise<Session> {
    // concurrent calls share one challenge: a wallet prompts once
    this.opening ??= this.newSession().finally(() => {
      this.opening = null;
    });
    return this.opening;
  }

  private async newSession(): Promise<Session> {
    const signer = this.signer;
    if (!signer) throw new AuthFailed(0, "NO_SIGNER", "a session needs a signer");
    const { challenge } = await this.request<{ challenge: string }>("POST", "/auth/challenge", { body: { pubkey: signer.address }, auth: false });
    const signature = await signer.signMessage(new TextEncoder().encode(challenge)); // the hex as UTF-8 text
    const answer = await this.request<{ token: string; owner?: boolean }>("POST", "/auth/verify", { body: { pubkey: signer.address, challenge, signature: base58(signature) }, auth: false });
    const session = { token: answer.token, pubkey: signer.address, owner: Boolean(answer.owner) };
    this.setSession(session);
    return session;
  }

  /**
   * Sign-In With Solana (`solana:signIn`): the gateway's sign-in input handed unchanged to the wallet,
   * which shows the site it names; the answer is an owner session (docs/api.md, Owner session). Calls
   * then carry it. The wallet's account is the one it signed with, or `address` when given.
   */
  async signIn(wallet: WalletLike, address?: string): Promise<Session> {
    const feature = wallet.features[SIGN_IN] as SignInFeature | undefined;
    if (!feature) throw new Error(`${wallet.name} does not offer ${SIGN_IN}`);
    const pubkey = address ?? this.signer?.address ?? wallet.accounts[0]?.address;
    if (!pubkey) throw new Error(`${wallet.name} gave no account`);
    const { sign_in: input } = await this.request<{ sign_in: Record<string, unknown> }>("POST", "/auth/challenge", { body: { pubkey }, auth: false });
    const [output] = await feature.signIn(input);
    if (!output?.signedMessage || !output.signature) throw new Error(`${wallet.name} gave no signed sign-in message`);
    const signedBy = output.account?.address ?? pubkey;
    const message = new TextDecoder().decode(output.signedMessage);
    const answer = await this.request<{ token: string; owner?: boolean }>("POST", "/auth/verify", { body: { pubkey: signedBy, message, signature: base58(output.signature) }, auth: false });
    const session = { token: answer.token, pubkey: signedBy, owner: Boolean(answer.owner) };
    this.setSession(session);
    return session;
  }

  /** `POST /auth/logout` with the session's token: the token is refused from then on. */
  async logout(): Promise<void> {
    const session = this.currentSession;
    if (!session) return;
    try {
      await this.request("POST", "/auth/logout", { body: {}, headers: { Authorization: `Bearer ${session.token}` }, auth: false });
    } finally {
      this.setSession(null);
    }
  }

  /**
   * `POST /account/api-key` under the wallet's signature (a wallet prompts once): a new key, shown once;
   * the account's previous key is revoked. The client uses the new key from then on.
   */
  async createApiKey(): Promise<{ ok: boolean; api_key: string; message?: string }> {
    const answer = await this.request<{ ok: boolean; api_key: string; message?: string }>("POST", "/account/api-key", { body: "{}", auth: "signature" });
    if (this.apiKey !== null || !this.signer || this.signer.perRequest) this.apiKey = answer.api_key;
    return answer;
  }

  // -- routes -------------------------------------------------------------------------------------

  health(): Promise<Record<string, unknown>> {
    return this.request("GET", "/health", { auth: false });
  }

  pricing(): Promise<Record<string, unknown>> {
    return this.request("GET", "/pricing", { auth: false });
  }

  /** `GET /account/info`: balance, batches, the account's state. */
  accountInfo(): Promise<Record<string, unknown>> {
    return this.request("GET", "/account/info");
  }

  /** `GET /signals/recent`: public and free, newest first. */
  recentSignals(query: { limit?: number; kind?: string; sinceSlot?: number; before?: string; signal?: AbortSignal } = {}): Promise<RecentSignals> {
    const params = new URLSearchParams();
    if (query.limit !== undefined) params.set("limit", String(query.limit));
    if (query.kind !== undefined) params.set("kind", query.kind);
    if (query.sinceSlot !== undefined) params.set("since_slot", String(query.sinceSlot));
    if (query.before !== undefined) params.set("before", query.before);
    const q = params.toString();
    return this.request("GET", `/signals/recent${q ? `?${q}` : ""}`, { auth: false, signal: query.signal });
  }

  /**
   * The signals stream (`subscribeSignal` on /ws), each event once across reconnects:
   * `for await (const event of client.signals({kinds: ["newPair"]})) ...`. Needs the API key (/ws is
   * authenticated by its `auth.<key>` subprotocol entry). `sinceSlot`: first the stored events after it.
   */
  signals(filter: SignalFilter = {}, options: { sinceSlot?: number } & Partial<StreamOptions> = {}): SignalStream {
    const { sinceSlot, ...rest } = options;
    return new SignalStream(this, filter, sinceSlot ?? null, rest);
  }
}
