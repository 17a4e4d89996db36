// The gateway's HTTP routes as the page uses them (docs/api.md), and the session it keeps. Requests, typed
// errors and the per-request signature are the TypeScript client's (clients/js, bundled from its sources
// by build.mjs): the page has no copy of its own.
//
// The session token lives in sessionStorage, not a cookie: a cookie would be sent by the browser on
// requests other sites make to the gateway (a cross-site request could spend with it), sessionStorage is
// read only by scripts of this origin and sent only where this page puts it in an Authorization header;
// it is also cleared when the tab closes. The API key is never stored: it is shown once and forgotten.

import { GatewayClient, GatewayError, base58 as toBase58, signedHeaders as clientSignedHeaders } from "solana-credit-gateway-client";

const SESSION = "gateway.session";

/** The client's GatewayError: status, code (the error's constant or JSON-RPC code), message. */
export const ApiError = GatewayError;

// The page's own origin, each request's credential given by the caller; no retries (csv.js waits out its 429s).
const gateway = new GatewayClient({ url: "", retries: 0 });

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

function call(method, path, { body, headers = {} } = {}) {
  return gateway.request(method, path, { body, headers, auth: false });
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
export function exportStream(session, which) {
  const path = which === "history" ? "/account/usage.csv" : "/account/ledger.csv";
  return gateway.fetchChecked("GET", path, { headers: bearer(session), auth: false });
}

/**
 * The interface's per-request wallet signature: the four X- headers over
 * `ledger-svc:v2:{METHOD}:{PATH}:{TIMESTAMP}:{NONCE}:{BODY_HASH}`, signed by `signMessage` (the wallet's).
 * `skewS` is the server's clock minus ours (from /health), so a wrong local clock is not refused.
 */
export function signedHeaders(method, path, body, pubkey, signMessage, skewS = 0) {
  return clientSignedHeaders({ address: pubkey, signMessage }, method, path, body, skewS);
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

export const base58 = { encode: toBase58 };
