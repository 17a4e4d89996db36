// The gateway's HTTP routes as the page uses them (docs/api.md), and the session it keeps.
//
// The session token lives in sessionStorage, not a cookie: a cookie would be sent by the browser on
// requests other sites make to the gateway (a cross-site request could spend with it), sessionStorage is
// read only by scripts of this origin and sent only where this page puts it in an Authorization header;
// it is also cleared when the tab closes. The API key is never stored: it is shown once and forgotten.

import bs58 from "bs58";
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex, randomBytes } from "@noble/hashes/utils.js";

const SESSION = "gateway.session";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** {token, pubkey, wallet, owner} or null; `owner`: a Sign In With Solana session (docs/api.md, Authentication). */
export function loadSession() {
  try {
    const saved = JSON.parse(sessionStorage.getItem(SESSION) || "null");
    return saved && typeof saved.token === "string" && typeof saved.pubkey === "string" ? saved : null;
  } catch {
    return null;
  }
}

export function saveSession(session) {
  sessionStorage.setItem(SESSION, JSON.stringify(session));
}

export function clearSession() {
  sessionStorage.removeItem(SESSION);
}

async function call(method, path, { body, headers = {} } = {}) {
  const init = { method, headers: { ...headers }, cache: "no-store", credentials: "omit" };
  if (body !== undefined) {
    init.body = body;
    init.headers["Content-Type"] = "application/json";
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    throw new ApiError(0, "NETWORK", `the gateway did not answer (${err.message})`);
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = data && typeof data.error === "object" && data.error ? data.error : {};
    throw new ApiError(response.status, error.code || `HTTP_${response.status}`, error.message || text.slice(0, 200));
  }
  return data;
}

function bearer(session) {
  return { Authorization: `Bearer ${session.token}` };
}

export const publicRoutes = {
  health: () => call("GET", "/health").catch((err) => {
    if (err.status === 503) return { status: "starting" };
    throw err;
  }),
  pricing: () => call("GET", "/pricing"),
};

export function challenge(pubkey) {
  return call("POST", "/auth/challenge", { body: JSON.stringify({ pubkey }) });
}

export function verify(pubkey, challengeText, signature) {
  return call("POST", "/auth/verify", { body: JSON.stringify({ pubkey, challenge: challengeText, signature }) });
}

/** /auth/verify with the Sign In With Solana message the wallet signed (its text) and its base58 signature. */
export function verifySignIn(pubkey, message, signature) {
  return call("POST", "/auth/verify", { body: JSON.stringify({ pubkey, message, signature }) });
}

/**
 * How one request is authorised: a function (method, path, body) -> its headers. `bearerAuth` sends the
 * session token; `walletAuth` has the wallet sign that very request (the per-request signature).
 */
export function bearerAuth(session) {
  return async () => bearer(session);
}

export function walletAuth(pubkey, signMessage, skewS) {
  return (method, path, body) => signedHeaders(method, path, body ?? "", pubkey, signMessage, skewS);
}

async function authorised(auth, method, path, body) {
  return call(method, path, { body, headers: await auth(method, path, body) });
}

export function logout(session) {
  return call("POST", "/auth/logout", { body: "{}", headers: bearer(session) });
}

export function accountInfo(session) {
  return call("GET", "/account/info", { headers: bearer(session) });
}

/** One page of /account/history or /account/ledger: {entries, next_cursor}. */
export function page(session, which, limit, cursor) {
  const query = new URLSearchParams({ limit: String(limit) });
  if (cursor) query.set("cursor", cursor);
  return call("GET", `/account/${which}?${query}`, { headers: bearer(session) });
}

/** GET /account/usage/daily: the kept totals per UTC day, method class and method (beyond the interface). */
export function usageDaily(session, days) {
  return call("GET", `/account/usage/daily?days=${days}`, { headers: bearer(session) });
}

/** GET /account/usage.csv or /account/ledger.csv: the streamed response (its body read by the caller). */
export async function exportStream(session, which) {
  const path = which === "history" ? "/account/usage.csv" : "/account/ledger.csv";
  let response;
  try {
    response = await fetch(path, { headers: bearer(session), cache: "no-store", credentials: "omit" });
  } catch (err) {
    throw new ApiError(0, "NETWORK", `the gateway did not answer (${err.message})`);
  }
  if (!response.ok) {
    const text = await response.text();
    let error = {};
    try {
      error = JSON.parse(text).error || {};
    } catch {
      error = {};
    }
    throw new ApiError(response.status, error.code || `HTTP_${response.status}`, error.message || text.slice(0, 200));
  }
  return response;
}

/**
 * The interface's per-request wallet signature: the four X- headers over
 * `ledger-svc:v2:{METHOD}:{PATH}:{TIMESTAMP}:{NONCE}:{BODY_HASH}`, signed by `signMessage` (the wallet's).
 * `skewS` is the server's clock minus ours (from /health), so a wrong local clock is not refused.
 */
export async function signedHeaders(method, path, body, pubkey, signMessage, skewS = 0) {
  const timestamp = String(Math.floor(Date.now() / 1000 + skewS));
  const nonce = bytesToHex(randomBytes(16));
  const bodyHash = method === "GET" ? "" : bytesToHex(sha256(new TextEncoder().encode(body)));
  const message = `ledger-svc:v2:${method}:${path.split("?")[0]}:${timestamp}:${nonce}:${bodyHash}`; // the query is not signed
  const signature = await signMessage(new TextEncoder().encode(message));
  return { "X-Pubkey": pubkey, "X-Signature": bs58.encode(signature), "X-Timestamp": timestamp, "X-Nonce": nonce };
}

/** POST /account/api-key under the wallet's signature: {ok, api_key, message}. */
export async function createApiKey(pubkey, signMessage, skewS) {
  const body = "{}";
  const headers = await signedHeaders("POST", "/account/api-key", body, pubkey, signMessage, skewS);
  return call("POST", "/account/api-key", { body, headers });
}

/** GET /account/access: {origins, addresses, methods, rate?, binds} (docs/api.md, Access rules). */
export function accessRules(session) {
  return call("GET", "/account/access", { headers: bearer(session) });
}

/** POST /account/access under the wallet's signature: the whole set replaced. */
export async function setAccessRules(rules, pubkey, signMessage, skewS) {
  const body = JSON.stringify(rules);
  const headers = await signedHeaders("POST", "/account/access", body, pubkey, signMessage, skewS);
  return call("POST", "/account/access", { body, headers });
}

/** POST /account/confirm-deposit: {ok, credits_added, new_balance, already_processed, ...}. */
export function confirmDeposit(session, signature) {
  return call("POST", "/account/confirm-deposit", { body: JSON.stringify({ signature }), headers: bearer(session) });
}

/** /webhooks (docs/api.md, Webhooks): every route takes any credential, so each call is given its `auth`. */
export const webhooks = {
  list: (auth) => authorised(auth, "GET", "/webhooks"),
  create: (auth, body) => authorised(auth, "POST", "/webhooks", JSON.stringify(body)),
  remove: (auth, id) => authorised(auth, "DELETE", `/webhooks/${encodeURIComponent(id)}`),
  post: (auth, id, action) => authorised(auth, "POST", `/webhooks/${encodeURIComponent(id)}/${action}`, "{}"),
  deliveries: (auth, id, limit) => authorised(auth, "GET", `/webhooks/${encodeURIComponent(id)}/deliveries?limit=${limit}`),
};

/** /account/sessions: listed with any credential; ended under a wallet signature or an owner session. */
export const sessions = {
  list: (session) => call("GET", "/account/sessions", { headers: bearer(session) }),
  endAll: (auth) => authorised(auth, "DELETE", "/account/sessions"),
  end: (auth, id) => authorised(auth, "DELETE", `/account/sessions/${encodeURIComponent(id)}`),
};

export const base58 = bs58;
