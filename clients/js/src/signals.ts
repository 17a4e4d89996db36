// The signals stream of /ws (docs/api.md, Signals; the Python client's SignalStream, over the
// standard `WebSocket` a browser and Node 22 both have):
//
// - it connects authenticated by the API key as the `auth.<key>` entry of `Sec-WebSocket-Protocol` (a
//   browser's WebSocket can send no `Authorization` header, and a credential in a URL ends up in logs and
//   histories), sends `subscribeSignal` with its filter and yields each `signalNotification`'s event;
// - after a close that says nothing about the caller (1000, 1001, 1005, 1006, 1011-1014) or a failed
//   connect, it connects again after a backoff with jitter, subscribes again and fills the gap from
//   `GET /signals/recent` (from a few slots before the last one it saw), skipping every event it yielded
//   already (same signature, kind and mint, among the last `dedupWindow`): each event is seen once;
// - a close for the caller ends it with the typed error: 4001 and 1008 AuthFailed, 4002
//   InsufficientCredits (after a `subscriptionEnded` notice), 4003 RateLimited, 4004/4005 Forbidden;
//   `maxReconnects` failed attempts in a row end it with ConnectionLost.

import { ConnectionLost, GatewayError, InsufficientCredits, RpcError, errorFromClose, BackendUnavailable, RateLimited } from "./errors.js";

export const KINDS = ["newPair", "graduation", "largeSwap", "walletActivity"] as const;
export type SignalKind = (typeof KINDS)[number];

/** A signal event (docs/api.md, Signals); fields the gateway could not establish are null. */
export interface SignalEvent {
  kind: SignalKind | string;
  program: string;
  signature: string;
  slot: number;
  mint: string | null;
  accounts: string[];
  quote_asset: string | null;
  curve_type: string | null;
  complete: boolean | null;
  block_time?: number | null;
  sol_amount?: number | null;
  side?: string | null;
}

/** `subscribeSignal`'s filter: a field left out matches everything; the fields combine with AND. */
export interface SignalFilter {
  kinds?: string | readonly string[];
  mint?: string;
  programs?: string | readonly string[];
}

export interface StreamOptions {
  openTimeoutMs: number;
  subscribeTimeoutMs: number;
  httpTimeoutMs: number;
  /** After a `subscriptionEnded` notice, how long to wait for the close that says why. */
  closeWaitMs: number;
  /** Frames held while the consumer does not read; past it the stream drops the socket and gap-fills later. */
  maxQueue: number;
  maxReconnects: number;
  firstBackoffMs: number;
  maxBackoffMs: number;
  gapMarginSlots: number;
  maxGapFill: number;
  dedupWindow: number;
}

export const DEFAULT_STREAM_OPTIONS: StreamOptions = {
  openTimeoutMs: 10_000,
  subscribeTimeoutMs: 10_000,
  httpTimeoutMs: 15_000,
  closeWaitMs: 2_000,
  maxQueue: 1024,
  maxReconnects: 10,
  firstBackoffMs: 500,
  maxBackoffMs: 30_000,
  gapMarginSlots: 4,
  maxGapFill: 5000,
  dedupWindow: 10_000,
};

/** Close codes after which connecting again may help; any other, not the caller's own, is a protocol error. */
export const RECONNECT_CODES: ReadonlySet<number> = new Set([1000, 1001, 1005, 1006, 1011, 1012, 1013, 1014]);
const RECENT_PAGE = 1000;
const SUBSCRIBE_ID = 1;

export interface RecentSignals {
  events: (SignalEvent & { id: string })[];
  more: boolean;
  next_since_slot: number | null;
  retention_events: number;
}

/** What a stream uses of its client. */
export interface StreamHost {
  readonly url: string;
  readonly apiKey: string | null;
  readonly webSocket: typeof WebSocket;
  recentSignals(query: { limit?: number; kind?: string; sinceSlot?: number; before?: string; signal?: AbortSignal }): Promise<RecentSignals>;
}

function names(value: string | readonly string[] | undefined): string[] | undefined {
  if (value === undefined) return undefined;
  return typeof value === "string" ? [value] : [...value].sort();
}

export function filterParams(filter: SignalFilter): Record<string, unknown>[] {
  const spec: Record<string, unknown> = {};
  const kinds = names(filter.kinds);
  const programs = names(filter.programs);
  if (kinds) spec.kinds = kinds;
  if (filter.mint !== undefined) spec.mint = filter.mint;
  if (programs) spec.programs = programs;
  return [spec];
}

export function filterMatches(filter: SignalFilter, event: Partial<SignalEvent>): boolean {
  const kinds = names(filter.kinds);
  const programs = names(filter.programs);
  if (kinds && !kinds.includes(String(event.kind))) return false;
  if (filter.mint !== undefined && event.mint !== filter.mint) return false;
  return !programs || programs.includes(String(event.program));
}

/** What makes an event itself: its transaction, its kind and its mint (one transaction may create several pairs). */
export function eventKey(event: Partial<SignalEvent>): string {
  return JSON.stringify([event.signature ?? null, event.kind ?? null, event.mint ?? null]);
}

/** `/ws` of a gateway's base URL: `http://h:p` → `ws://h:p/ws`; "" (a page's own origin) → its origin's. */
export function websocketUrl(base: string): string {
  const origin = typeof location !== "undefined" ? location.href : undefined;
  const url = new URL(base || "/", origin);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  url.pathname = url.pathname.replace(/\/+$/, "") + "/ws";
  url.search = "";
  url.hash = "";
  return url.toString();
}

class Retry extends Error {
  constructor(message: string, readonly code: number | null = null) {
    super(message);
  }
}

type Closed = { code: number; reason: string };

/** One socket's frames as they arrive, read one at a time. */
class Connection {
  readonly frames: string[] = [];
  closed: Closed | null = null;
  overflowed = false;
  private wake: (() => void) | null = null;

  constructor(readonly ws: WebSocket, private readonly maxQueue: number) {
    ws.onmessage = (e) => {
      if (this.frames.length >= this.maxQueue) {
        // the consumer is not reading: drop the socket (as the Python client stops reading) and let the
        // gap-fill of the next connection catch up
        this.overflowed = true;
        this.ws.close(1000);
      } else this.frames.push(typeof e.data === "string" ? e.data : "");
      this.notify();
    };
    ws.onclose = (e) => {
      this.closed = { code: e.code, reason: e.reason };
      this.notify();
    };
    ws.onerror = () => {}; // a close event follows, with the code
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }

  /** The next frame; null once the socket closed (see `closed`) or after `timeoutMs`. */
  async next(timeoutMs?: number): Promise<string | null> {
    while (!this.frames.length && !this.closed) {
      const waited = new Promise<boolean>((resolve) => {
        this.wake = () => resolve(true);
        if (timeoutMs !== undefined) setTimeout(() => resolve(false), timeoutMs);
      });
      if (!(await waited)) return null;
    }
    return this.frames.shift() ?? null;
  }

  close(): void {
    if (this.ws.readyState === 0 || this.ws.readyState === 1) this.ws.close(1000);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * An async iterator of signal events that survives disconnects: `for await (const event of stream)`.
 * Close it with `close()` (or leave the loop: `return` closes it). After a typed error the stream is over.
 */
export class SignalStream implements AsyncIterableIterator<SignalEvent> {
  readonly options: StreamOptions;
  readonly url: string;
  /** The current subscription id (`sig_sub_<n>`), null before the first. */
  subscription: string | null = null;
  /** Connections that subscribed: 1, then one more per reconnect. */
  connects = 0;
  /** Events yielded from `GET /signals/recent` rather than the socket. */
  gapFilled = 0;
  private lastSlot: number | null = null; // every event up to it was yielded or is in the backlog
  private readonly seen = new Map<string, true>();
  private readonly backlog: SignalEvent[] = [];
  private conn: Connection | null = null;
  private ended: string | null = null; // a subscriptionEnded notice's reason
  private closedByCaller = false;
  private failed = false;
  private attempt = 0;

  constructor(private readonly host: StreamHost, readonly filter: SignalFilter = {}, private readonly sinceSlot: number | null = null, options: Partial<StreamOptions> = {}) {
    this.options = { ...DEFAULT_STREAM_OPTIONS, ...options };
    this.url = websocketUrl(host.url);
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  async return(): Promise<IteratorResult<SignalEvent>> {
    this.close();
    return { done: true, value: undefined };
  }

  /** Close the connection; iterating then stops. */
  close(): void {
    this.closedByCaller = true;
    const conn = this.conn;
    this.conn = null;
    conn?.close();
  }

  async next(): Promise<IteratorResult<SignalEvent>> {
    for (;;) {
      if (this.closedByCaller || this.failed) return { done: true, value: undefined };
      const queued = this.backlog.shift();
      if (queued) return { done: false, value: queued };
      const conn = this.conn;
      if (!conn) {
        await this.open();
        continue;
      }
      const frame = await conn.next();
      if (frame !== null) {
        const event = this.onFrame(frame);
        if (event) return { done: false, value: event };
        if (this.ended !== null) {
          await this.awaitClose(conn); // the close usually says why
          if (!conn.closed) conn.close();
          this.onLost(conn);
        }
        continue;
      }
      this.onLost(conn);
    }
  }

  // -- frames -------------------------------------------------------------------------------------

  private onFrame(frame: string): SignalEvent | null {
    let message: { method?: string; params?: { subscription?: unknown; result?: unknown; reason?: unknown } };
    try {
      message = JSON.parse(frame);
    } catch {
      return null;
    }
    const params = message && typeof message === "object" ? message.params : undefined;
    if (!params || typeof params !== "object" || params.subscription !== this.subscription) return null;
    if (message.method === "subscriptionEnded") this.ended = String(params.reason || "ended by the gateway");
    else if (message.method === "signalNotification") {
      const event = params.result as SignalEvent | undefined;
      if (event && typeof event === "object" && this.admit(event)) return event;
    }
    return null;
  }

  private admit(event: SignalEvent): boolean {
    if (!filterMatches(this.filter, event)) return false;
    const key = eventKey(event);
    if (this.seen.has(key)) return false;
    this.seen.set(key, true);
    if (this.seen.size > this.options.dedupWindow) this.seen.delete(this.seen.keys().next().value as string);
    this.advance(event.slot);
    return true;
  }

  private advance(slot: unknown): void {
    if (typeof slot === "number" && (this.lastSlot === null || slot > this.lastSlot)) this.lastSlot = slot;
  }

  private async awaitClose(conn: Connection): Promise<void> {
    const until = Date.now() + this.options.closeWaitMs;
    while (!conn.closed && Date.now() < until) await conn.next(until - Date.now());
  }

  /** The connection ended under the stream: raise the close's error, or let the next read reconnect. */
  private onLost(conn: Connection): void {
    if (this.conn === conn) this.conn = null;
    if (this.closedByCaller) return;
    const error = conn.overflowed ? null : this.closeError(conn.closed);
    if (error) {
      this.failed = true;
      throw error;
    }
  }

  private closeError(closed: Closed | null): GatewayError | null {
    const ended = this.ended;
    this.ended = null;
    const code = closed ? closed.code : null;
    const error = errorFromClose(code, closed?.reason ?? "");
    if (error) {
      if (ended !== null) error.data = { subscription: this.subscription, reason: ended };
      return error;
    }
    if (code === null || RECONNECT_CODES.has(code)) return null;
    return new ConnectionLost(0, code, `closed ${code}: ${closed?.reason || "protocol error"}`);
  }

  // -- connecting ---------------------------------------------------------------------------------

  private backoffMs(): number {
    const base = Math.min(this.options.maxBackoffMs, this.options.firstBackoffMs * 2 ** Math.min(this.attempt, 30));
    this.attempt++;
    return base * (0.5 + Math.random() / 2); // half to all of it: the clients of a restart spread out
  }

  private async open(): Promise<void> {
    let failures = 0;
    for (;;) {
      if (failures || this.connects) await sleep(this.backoffMs());
      if (this.closedByCaller) return;
      try {
        await this.tryOnce();
      } catch (err) {
        if (err instanceof Retry) {
          failures++;
          if (failures > this.options.maxReconnects) {
            this.failed = true;
            throw new ConnectionLost(0, err.code, `${this.url}: ${err.message} (${failures} attempts)`);
          }
          continue;
        }
        this.failed = true;
        throw err;
      }
      this.attempt = 0;
      return;
    }
  }

  private async tryOnce(): Promise<void> {
    const conn = await this.connect();
    try {
      this.subscription = await this.subscribe(conn);
      await this.fillGap();
    } catch (err) {
      conn.close();
      throw err;
    }
    if (this.closedByCaller) {
      conn.close();
      return;
    }
    this.conn = conn;
    this.connects++;
  }

  private async connect(): Promise<Connection> {
    if (!this.host.apiKey) {
      throw new GatewayError(0, "NO_API_KEY", "the signals stream authenticates /ws with an API key (the auth.<key> subprotocol): a browser's WebSocket cannot send a session token but in the URL");
    }
    if (typeof this.host.webSocket !== "function") {
      throw new GatewayError(0, "NO_WEBSOCKET", "no WebSocket here: Node 20 has none by default; pass { WebSocket } (from the ws package) to the client");
    }
    let ws: WebSocket;
    try {
      ws = new this.host.webSocket(this.url, [`auth.${this.host.apiKey}`, "solana-rpc"]);
    } catch (err) {
      throw new Retry(`cannot connect: ${(err as Error).message}`);
    }
    const conn = new Connection(ws, this.options.maxQueue);
    const opened = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), this.options.openTimeoutMs);
      ws.onopen = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const onclose = ws.onclose;
      ws.onclose = (e) => {
        onclose?.call(ws, e);
        clearTimeout(timer);
        resolve(false);
      };
    });
    if (!opened) {
      conn.close();
      const code = conn.closed?.code ?? null;
      throw new Retry(code === null ? "no connection in time" : `cannot connect (close ${code})`, code);
    }
    return conn;
  }

  private async subscribe(conn: Connection): Promise<string> {
    conn.ws.send(JSON.stringify({ jsonrpc: "2.0", id: SUBSCRIBE_ID, method: "subscribeSignal", params: filterParams(this.filter) }));
    const until = Date.now() + this.options.subscribeTimeoutMs;
    for (;;) {
      const left = until - Date.now();
      const frame = left > 0 ? await conn.next(left) : null;
      if (frame === null) {
        if (!conn.closed) throw new Retry("no answer to subscribeSignal in time");
        const error = this.closeError(conn.closed);
        if (error) throw error;
        throw new Retry(`closed while subscribing (${conn.closed.code})`, conn.closed.code);
      }
      let answer: { id?: unknown; result?: unknown; error?: { code?: number; message?: string; data?: unknown } };
      try {
        answer = JSON.parse(frame);
      } catch {
        continue;
      }
      if (!answer || answer.id !== SUBSCRIBE_ID) continue;
      if (answer.error) {
        const { code = null, message = "", data = null } = answer.error;
        if (code === -32010) throw new InsufficientCredits(402, code, message, null, data);
        throw new RpcError(200, code, message, null, data);
      }
      return String(answer.result);
    }
  }

  /** Queue what the log stored while the stream was away (the first time: learn where the log is). */
  private async fillGap(): Promise<void> {
    const since = this.connects === 0 ? this.sinceSlot : this.lastSlot === null ? 0 : Math.max(0, this.lastSlot - this.options.gapMarginSlots);
    let events: SignalEvent[] = [];
    let covered: number | null = null;
    try {
      if (since === null) {
        this.advance((await this.recent({ limit: 1 })).next_since_slot);
        return;
      }
      [events, covered] = await this.storedAfter(since);
    } catch (err) {
      if (err instanceof BackendUnavailable || err instanceof RateLimited) throw new Retry(`GET /signals/recent: ${err.message}`, err.status);
      if (err instanceof GatewayError) throw err;
      throw new Retry(`GET /signals/recent: ${(err as Error).message}`);
    }
    for (const event of events) {
      if (this.admit(event)) {
        this.backlog.push(event);
        this.gapFilled++;
      }
    }
    this.advance(covered);
  }

  private recent(query: { limit: number; kind?: string; sinceSlot?: number; before?: string }): Promise<RecentSignals> {
    return this.host.recentSignals({ ...query, signal: AbortSignal.timeout(this.options.httpTimeoutMs) });
  }

  /** The stored events after slot `since`, oldest first (at most the newest `maxGapFill`), and the first page's `next_since_slot`. */
  private async storedAfter(since: number): Promise<[SignalEvent[], number | null]> {
    const kinds = names(this.filter.kinds);
    const kind = kinds && kinds.length === 1 ? kinds[0] : undefined; // one kind: the log filters it itself
    const newestFirst: (SignalEvent & { id?: string })[] = [];
    let covered: number | null = null;
    let before: string | undefined;
    for (;;) {
      const limit = Math.min(RECENT_PAGE, this.options.maxGapFill - newestFirst.length);
      const answer = await this.recent({ limit, kind, sinceSlot: since, before });
      const page = (answer.events || []).filter((e) => e && typeof e === "object");
      if (before === undefined) covered = answer.next_since_slot;
      newestFirst.push(...page);
      if (!answer.more || !page.length || newestFirst.length >= this.options.maxGapFill) break;
      before = page[page.length - 1].id;
      if (typeof before !== "string") break;
    }
    // as the socket delivers them: without the log's id
    return [newestFirst.reverse().map(({ id: _id, ...event }) => event as SignalEvent), covered];
  }
}
