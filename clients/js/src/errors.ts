// One error class per documented gateway refusal (docs/api.md, Errors), built from an HTTP answer or a
// /ws close. The tree is the Python client's (gateway.client.errors), so both read alike:
//
// GatewayError                 any refusal: status, code, message, requestId, data
// ├── InvalidRequest           400
// ├── AuthFailed               401; /ws close 4001, or 1008 (session token invalid or expired)
// ├── PaymentRequired          402 -32002: `terms` holds the deposit terms
// │   └── InsufficientCredits  402 -32010; /ws close 4002
// ├── Forbidden                403 (ACCESS_DENIED, SPEND_CAP_REACHED, ACCOUNT_SUSPENDED, ...)
// │   └── NonceReused          403 NONCE_REUSED
// ├── NotFound                 404
// ├── RateLimited              429; /ws close 4003; `retryAfter` seconds
// ├── BackendUnavailable       502 / 503 / 504; `retryAfter` when given
// │   └── ConnectionLost       a stream that could not connect again (status 0), or a network failure
// └── RpcError                 a JSON-RPC error inside HTTP 200, or answering on the socket

/** The 402's deposit terms (docs/api.md, Errors): where to send USDC and how credits arrive. */
export interface DepositTerms {
  deposit_address?: string;
  usdc_mint?: string;
  minimum_deposit_usdc?: string;
  network?: string;
  instructions?: string;
  payTo?: string;
  extra?: { feePayer?: string; [key: string]: unknown };
  /** -32010 only: credits the call needed, and what the account had. */
  required?: number;
  available?: number;
  [key: string]: unknown;
}

export class GatewayError extends Error {
  /** The HTTP status (0: no answer); for a /ws refusal, the status of the same refusal over HTTP. */
  readonly status: number;
  /** The error's constant (`AUTH_FAILED`), its JSON-RPC code (-32002), or a /ws close code. */
  readonly code: string | number | null;
  readonly requestId: string | null;
  data: unknown;
  /** The HTTP body's `rpcCode`, where the refusal has one. */
  readonly rpcCode: number | null;

  constructor(status: number, code: string | number | null, message: string, requestId: string | null = null, data: unknown = null, rpcCode: number | null = null) {
    super(message);
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.requestId = requestId;
    this.data = data;
    this.rpcCode = rpcCode;
  }
}

export class InvalidRequest extends GatewayError {}
export class AuthFailed extends GatewayError {}

export class PaymentRequired extends GatewayError {
  /** How to pay: the deposit address, the USDC mint, the minimum, instructions (the 402's `data`). */
  get terms(): DepositTerms {
    return this.data && typeof this.data === "object" ? (this.data as DepositTerms) : {};
  }
}

export class InsufficientCredits extends PaymentRequired {}
export class Forbidden extends GatewayError {}
export class NonceReused extends Forbidden {}
export class NotFound extends GatewayError {}

export class RateLimited extends GatewayError {
  retryAfter = 1;
}

export class BackendUnavailable extends GatewayError {
  retryAfter: number | null = null;
}

export class ConnectionLost extends BackendUnavailable {}
export class RpcError extends GatewayError {}

function seconds(value: string | null | undefined): number | null {
  if (value == null || value === "") return null;
  const n = Number(value);
  return Number.isFinite(n) ? n : null;
}

/**
 * The error an HTTP answer carries, or null for a success. `body` is the parsed JSON (or the text when
 * it was not JSON); both error shapes are read: `{error: {code: "CONST", message, requestId, data, rpcCode}}`
 * and the JSON-RPC `{jsonrpc, id, error: {code, message, data}}`.
 */
export function errorFromAnswer(status: number, headers: Headers, body: unknown): GatewayError | null {
  const error = body && typeof body === "object" && !Array.isArray(body) ? (body as { error?: unknown }).error : undefined;
  const fields = error && typeof error === "object" ? (error as Record<string, unknown>) : null;
  if (status === 200) {
    return fields ? new RpcError(200, (fields.code as number) ?? null, String(fields.message ?? ""), headers.get("x-request-id"), fields.data ?? null) : null;
  }
  if (status > 200 && status < 300) return null;
  if (!fields) return new GatewayError(status, null, typeof body === "string" ? body.slice(0, 300) : JSON.stringify(body ?? null).slice(0, 300), headers.get("x-request-id"));
  const code = (fields.code as string | number | undefined) ?? null;
  const message = String(fields.message ?? "");
  const requestId = (fields.requestId as string | undefined) ?? headers.get("x-request-id");
  const data = fields.data ?? null;
  const rpcCode = typeof fields.rpcCode === "number" ? fields.rpcCode : null;
  const args = [status, code, message, requestId, data, rpcCode] as const;
  const retryAfter = seconds(headers.get("retry-after"));
  if (status === 402) return code === -32010 || code === "INSUFFICIENT_CREDITS" ? new InsufficientCredits(...args) : new PaymentRequired(...args);
  if (status === 429) {
    const e = new RateLimited(...args);
    e.retryAfter = retryAfter ?? 1;
    return e;
  }
  if (status === 502 || status === 503 || status === 504) {
    const e = new BackendUnavailable(...args);
    e.retryAfter = retryAfter;
    return e;
  }
  if (status === 403) return code === "NONCE_REUSED" ? new NonceReused(...args) : new Forbidden(...args);
  if (status === 400) return new InvalidRequest(...args);
  if (status === 401) return new AuthFailed(...args);
  if (status === 404) return new NotFound(...args);
  return new GatewayError(...args);
}

/** The error a /ws close code stands for, or null for one after which connecting again may help. */
export function errorFromClose(code: number | null, reason: string): GatewayError | null {
  const message = reason || `closed ${code}`;
  if (code === 4001 || code === 1008) return new AuthFailed(401, code, message);
  if (code === 4002) return new InsufficientCredits(402, code, message);
  if (code === 4003) return new RateLimited(429, code, message);
  if (code === 4004) return new Forbidden(403, code, message);
  if (code === 4005) return new Forbidden(403, code, message);
  return null;
}
