// Checking a webhook delivery's signature on the receiving side (docs/api.md, Deliveries), as
// gateway.client.webhooks.verify_webhook does: `X-Webhook-Signature: sha256=<hex>`, HMAC-SHA256 keyed with
// the webhook's secret (its UTF-8 text, `whsec_` included) over `{event_id}.{timestamp}.{body}`, the body's
// raw bytes. Pure JavaScript (no node:crypto), so a Node receiver and a worker alike can use it.

import { hmac } from "@noble/hashes/hmac.js";
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex } from "@noble/hashes/utils.js";

export const SIGNATURE_HEADER = "X-Webhook-Signature";
export const TIMESTAMP_HEADER = "X-Webhook-Timestamp";
export const EVENT_ID_HEADER = "X-Webhook-Event-Id";
export const WEBHOOK_ID_HEADER = "X-Webhook-Id";
/** How old (or how far ahead) an attempt's timestamp may be, in seconds. */
export const DEFAULT_TOLERANCE_S = 300;

const utf8 = new TextEncoder();

/** Headers as a receiver has them: a fetch `Headers`, Node's `req.headers` (values string or string[]), or a plain object. */
export type HeadersLike = Headers | Readonly<Record<string, string | readonly string[] | undefined>>;

function header(headers: HeadersLike, name: string): string | null {
  if (typeof (headers as Headers).get === "function") return (headers as Headers).get(name)?.trim() ?? null;
  const wanted = name.toLowerCase();
  for (const [key, value] of Object.entries(headers as Record<string, string | readonly string[] | undefined>)) {
    if (key.toLowerCase() !== wanted || value === undefined) continue;
    return (typeof value === "string" ? value : value[0] ?? "").trim();
  }
  return null;
}

function bytes(body: string | Uint8Array): Uint8Array {
  return typeof body === "string" ? utf8.encode(body) : body;
}

/** The `X-Webhook-Signature` value of a delivery: `sha256=<hex>`. */
export function webhookSignature(secret: string, eventId: string, timestamp: number | string, body: string | Uint8Array): string {
  const head = utf8.encode(`${eventId}.${timestamp}.`);
  const raw = bytes(body);
  const signed = new Uint8Array(head.length + raw.length);
  signed.set(head);
  signed.set(raw, head.length);
  return "sha256=" + bytesToHex(hmac(sha256, utf8.encode(secret), signed));
}

function sameText(a: string, b: string): boolean {
  // every byte compared whatever differs first: the time taken says nothing of the expected value (its
  // length, "sha256=" and 64 hex digits, is no secret)
  const x = utf8.encode(a);
  const y = utf8.encode(b);
  if (x.length !== y.length) return false;
  let diff = 0;
  for (let i = 0; i < x.length; i++) diff |= x[i] ^ y[i];
  return diff === 0;
}

/**
 * Whether `body` (the raw bytes received, before any JSON parsing: in Node, the request's Buffer) with
 * these `headers` was signed by the gateway with `secret` (or one of several: pass both during a
 * rotation) within `toleranceS` of `now` (Unix seconds; default the clock). False for a missing or
 * malformed header.
 */
export function verifyWebhook(
  secret: string | readonly string[],
  headers: HeadersLike,
  body: string | Uint8Array,
  { toleranceS = DEFAULT_TOLERANCE_S, now }: { toleranceS?: number; now?: number } = {},
): boolean {
  const signature = header(headers, SIGNATURE_HEADER);
  const timestamp = header(headers, TIMESTAMP_HEADER);
  const eventId = header(headers, EVENT_ID_HEADER);
  if (signature === null || timestamp === null || eventId === null || !/^[0-9]+$/.test(timestamp)) return false;
  if (Math.abs((now ?? Date.now() / 1000) - Number(timestamp)) > toleranceS) return false; // an old attempt, replayed
  const secrets = typeof secret === "string" ? [secret] : secret;
  return secrets.some((s) => sameText(webhookSignature(s, eventId, timestamp, body), signature));
}
