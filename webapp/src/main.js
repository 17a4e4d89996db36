// The account page (docs/dashboard.md): sign-in with a Wallet Standard wallet, then the account's balance,
// credit batches, spending, history and ledger, refreshed on their own; the key created or rotated under
// the wallet's signature; the pricing and the service's health for everyone.
//
// A wallet that offers `solana:signIn` signs in with a Sign In With Solana message naming this gateway: an
// owner session, which the access rules never bind, so the page's changes go with its token. Any other wallet
// signs the plain hex challenge: an ordinary session, which the rules bind like the API key, so every change
// the page makes is then signed by the wallet, request by request (docs/api.md, Authentication).

import * as api from "./api.js";
import * as wallets from "./wallet.js";
import { spendChart } from "./chart.js";
import { depositCard } from "./deposit.js";
import { exportCsv, download } from "./csv.js";
import { webhooksCard } from "./webhooks.js";
import { sessionsCard } from "./sessions.js";
import { h, fill, show, num, when, until, table } from "./dom.js";

const POLL_MS = 5000; // balance, first pages, health
const CHART_EVERY = 2; // polls between chart refreshes (GET /account/usage/daily: the kept totals)
const CHART_DAYS = 14;
const PAGE_ROWS = 20;

const state = {
  session: api.loadSession(),
  skewS: 0,
  pricing: null,
  account: null,
  pages: { history: { cursors: [null], data: null }, ledger: { cursors: [null], data: null } },
  polls: 0,
  timer: null,
  busy: false,
  newKey: null,
  confirmRotate: false,
  depositFor: null, // the session the deposit card was drawn for (drawn once: it holds what is typed)
  depositCard: null, // its {nodes, setAccount}
  access: null, // GET /account/access, or null while unknown (no account, or a gateway without the route)
  editingAccess: false,
  last: {}, // what each part was last drawn from (JSON): unchanged data is not redrawn (focus stays put)
  refreshing: false,
  refreshFailed: false,
};

/** Whether `value` differs from what `part` was last drawn from (and remember it). */
function changed(part, value) {
  const text = JSON.stringify(value);
  if (state.last[part] === text) return false;
  state.last[part] = text;
  return true;
}

/** The wallet signs this one request (a prompt each time): `what` says what for, in the notice. */
async function signedAuth(what) {
  const session = state.session;
  if (!session) throw new Error("signed out");
  const wallet = wallets.findWallet(session.wallet);
  if (!wallet) throw new Error(`${session.wallet} is not available in this browser now`);
  const account = await wallets.connect(wallet, session.pubkey);
  notify(`Asking ${session.wallet} to sign: ${what}…`);
  return api.walletAuth(session.pubkey, wallets.signer(wallet, account), state.skewS);
}

/** A change: an owner session's token is enough; an ordinary session's is not (the rules may bind it). */
async function writeAuth(what) {
  const session = state.session;
  if (!session) throw new Error("signed out");
  return session.owner ? api.bearerAuth(session) : signedAuth(what);
}

const cardUi = {
  session: () => state.session,
  owner: () => Boolean(state.session && state.session.owner),
  readAuth: () => api.bearerAuth(state.session),
  writeAuth,
  signedAuth,
  notify: (text, kind) => notify(text, kind),
  explain: (err) => explain(err),
  copyButton: (text, label) => copyButton(text, label),
  lifecycleEvents: () => (state.pricing && state.pricing.webhooks && state.pricing.webhooks.lifecycle_events) || null,
};
const hooks = webhooksCard(cardUi);
const sessionsUi = sessionsCard({
  ...cardUi,
  signedOutEverywhere: (ended) => {
    leaveAccount();
    notify(`Signed out everywhere: ${ended} session${ended === 1 ? "" : "s"} ended, this page's included.`);
  },
});

function notify(text, kind = "info") {
  const node = document.getElementById("notice");
  node.textContent = text;
  node.className = `notice ${kind}`;
  node.hidden = !text;
}

function explain(err) {
  if (err instanceof api.ApiError) return err.code == null ? `${err.message} (HTTP ${err.status})` : `${err.message} (${err.code})`;
  return String(err && err.message ? err.message : err);
}

// ---------------------------------------------------------------------------------------------- sign-in

function renderWallets() {
  if (state.session) return;
  const list = wallets.signingWallets();
  if (!list.length) {
    fill("wallets", h("p", { class: "muted" },
      "No wallet found. Install or unlock a Solana wallet that supports the Wallet Standard, then reload this page."));
    return;
  }
  fill("wallets", list.map((w) =>
    h("button", { type: "button", class: "wallet", onclick: () => signIn(w) },
      w.icon && h("img", { src: w.icon, alt: "", width: 24, height: 24 }),
      `Sign in with ${w.name}`)));
}

async function signIn(wallet) {
  if (state.busy) return;
  state.busy = true;
  notify(`Waiting for ${wallet.name}…`);
  try {
    const account = await wallets.connect(wallet);
    const { challenge, sign_in: input } = await api.challenge(account.address);
    let verified;
    let note = "";
    if (wallets.canSignIn(wallet) && input && input.domain === location.host) {
      // Sign In With Solana: the wallet shows the user which site they sign in to, and the gateway checks it.
      const signed = await wallets.signInWith(wallet, input);
      if (signed.address && signed.address !== account.address) throw new Error(`${wallet.name} signed in as ${signed.address}, not ${account.address}`);
      verified = await api.verifySignIn(account.address, signed.message, api.base58.encode(signed.signature));
    } else {
      if (wallets.canSignIn(wallet) && input) {
        // a wallet refuses a message naming another host than the page's: say why this is an ordinary session
        note = `This gateway signs sessions in for ${input.domain}, not this page's ${location.host}: signed in with an ordinary session (your wallet signs each change).`;
      }
      const signature = await wallets.signer(wallet, account)(new TextEncoder().encode(challenge));
      verified = await api.verify(account.address, challenge, api.base58.encode(signature));
    }
    state.session = { token: verified.token, pubkey: account.address, wallet: wallet.name, owner: verified.owner === true };
    api.saveSession(state.session);
    notify(note);
    enterAccount();
  } catch (err) {
    notify(`Sign-in failed: ${explain(err)}`, "error");
  } finally {
    state.busy = false;
  }
}

async function signOut(reason) {
  const session = state.session;
  leaveAccount();
  if (session && !reason) {
    try {
      await api.logout(session);
    } catch (err) {
      if (err.status !== 401) notify(`Sign-out: ${explain(err)}`, "error");
    }
    await wallets.disconnect(wallets.findWallet(session.wallet));
  }
  notify(reason || "Signed out.", reason ? "error" : "info");
}

function leaveAccount() {
  api.clearSession();
  state.session = null;
  state.account = null;
  state.newKey = null;
  state.confirmRotate = false;
  state.access = null;
  state.editingAccess = false;
  state.depositFor = null;
  state.last = {};
  hooks.reset();
  sessionsUi.reset();
  state.pages.history = { cursors: [null], data: null };
  state.pages.ledger = { cursors: [null], data: null };
  show("account", false);
  show("signin", true);
  fill("who");
  renderWallets();
}

function enterAccount() {
  show("signin", false);
  show("account", true);
  const { pubkey, wallet, owner } = state.session;
  fill("who",
    h("span", { class: "addr", title: pubkey }, `${wallet} · ${pubkey.slice(0, 4)}…${pubkey.slice(-4)}`),
    h("span", { class: "small muted", id: "session-kind" }, owner ? "owner session" : "ordinary session: changes are signed by your wallet"),
    h("button", { type: "button", onclick: () => signOut() }, "Sign out"));
  renderKey();
  refresh(true);
}

// ------------------------------------------------------------------------------------------ account data

async function refresh(all = false) {
  const session = state.session;
  if (!session || (state.refreshing && !all)) return; // a slow gateway: one poll at a time
  state.refreshing = true;
  try {
    const jobs = [refreshAccount(session), state.editingAccess ? null : refreshAccess(session), hooks.refresh(), sessionsUi.refresh()];
    for (const which of ["history", "ledger"]) {
      if (all || state.pages[which].cursors.length === 1) jobs.push(loadPage(which)); // live on the first page
    }
    if (all || state.polls % CHART_EVERY === 0) jobs.push(refreshChart(session));
    await Promise.all(jobs);
    if (state.refreshFailed) {
      state.refreshFailed = false;
      notify("");
    }
  } catch (err) {
    if (state.session !== session) return;
    if (err.status === 401) {
      signOut("Your session ended (expired or revoked): sign in again.");
    } else {
      state.refreshFailed = true;
      notify(`Could not refresh: ${explain(err)}`, "error");
    }
  } finally {
    state.refreshing = false;
  }
}

async function refreshAccount(session) {
  try {
    state.account = await api.accountInfo(session);
  } catch (err) {
    if (err.code !== "ACCOUNT_NOT_FOUND") throw err;
    state.account = null;
  }
  if (state.session === session && changed("account", state.account)) renderAccount();
}

function renderDeposit() {
  // Drawn once per session (it holds what is typed and a deposit's progress), then told of the account.
  if (state.depositFor === state.session.pubkey) {
    state.depositCard.setAccount(state.account);
    return;
  }
  state.depositFor = state.session.pubkey;
  const onCredited = (r) => {
    notify(`Deposit credited: ${num(r.credits_added)} credits${r.already_processed ? " (already)" : ""}, balance ${num(r.new_balance)}.`);
    refresh(true);
  };
  state.depositCard = depositCard(state.account, state.session, { onConfirm: confirmDeposit, onCredited });
  fill("deposit", state.depositCard.nodes);
}

async function confirmDeposit(signature) {
  const session = state.session;
  if (!session) return;
  if (!/^[1-9A-HJ-NP-Za-km-z]{64,88}$/.test(signature)) {
    notify("That is not a transaction signature (base58, 64 to 88 characters).", "error");
    return;
  }
  notify("Confirming the deposit…");
  try {
    const r = await api.confirmDeposit(session, signature);
    notify(r.already_processed
      ? "This transfer was already credited."
      : `Deposit confirmed: ${num(r.credits_added)} credits added${r.credited_to_caller === false ? " to the wallet that sent it" : ""}.`);
    refresh(true);
  } catch (err) {
    notify(`Not credited: ${explain(err)}`, "error");
  }
}

function renderAccount() {
  renderDeposit();
  const a = state.account;
  if (!a) {
    fill("balance",
      h("p", {}, "This wallet has no account yet."),
      h("p", { class: "muted" }, "Create an API key (below) to open one with a zero balance, then send USDC to the deposit address it shows."));
    fill("batches", h("p", { class: "muted" }, "No credits yet."));
    return;
  }
  const f = a.funding || {};
  fill("balance",
    h("p", { class: "big", id: "balance-value" }, num(a.balance), h("span", { class: "unit" }, " credits")),
    h("dl", { class: "facts" },
      h("dt", {}, "Held for pending sends"), h("dd", {}, num(a.pending_send_credits || 0)),
      h("dt", {}, "Spent, all time"), h("dd", {}, num(a.total_consumed_credits || 0)),
      h("dt", {}, "Status"), h("dd", {}, a.status),
      h("dt", {}, "Deposit address"), h("dd", {}, h("code", { class: "addr" }, a.deposit_address),
        " ", copyButton(a.deposit_address, "Copy address")),
      h("dt", {}, "Rate"), h("dd", {}, `1 ${f.asset || "USDC"} = ${num(f.credits_per_usdc || 0)} credits, minimum ${f.minimum_deposit_usdc || "0.01"}`),
      a.last_deposit && [h("dt", {}, "Last deposit"), h("dd", {}, `${num(a.last_deposit.credits)} credits, ${when(a.last_deposit.timestamp)}`)]),
    h("p", { class: "muted small" }, f.attribution || ""));
  const batches = a.credit_batches || [];
  fill("batches", batches.length
    ? table("Credit batches, soonest expiry first", ["Source", "Granted", "Remaining", "Expires"],
      batches.map((b) => [b.source, num(b.granted), num(b.remaining), `${when(b.expires_at)} (${until(b.expires_at)})`]), [1, 2])
    : h("p", { class: "muted" }, "No live credit batch."));
}

async function loadPage(which) {
  const session = state.session;
  const p = state.pages[which];
  let data;
  try {
    data = await api.page(session, which, PAGE_ROWS, p.cursors[p.cursors.length - 1]);
  } catch (err) {
    if (err.code !== "ACCOUNT_NOT_FOUND") throw err;
    data = { entries: [], next_cursor: null }; // a wallet without an account yet: nothing to list, not a failure
  }
  if (state.session !== session) return;
  p.data = data;
  if (changed(which, [p.cursors.length, data])) renderPage(which);
}

function turn(which, forward) {
  const p = state.pages[which];
  if (forward && p.data && p.data.next_cursor) p.cursors.push(p.data.next_cursor);
  else if (!forward && p.cursors.length > 1) p.cursors.pop();
  else return;
  loadPage(which).catch((err) => notify(`Could not load the ${which}: ${explain(err)}`, "error"));
}

function renderPage(which) {
  const p = state.pages[which];
  const entries = (p.data && p.data.entries) || [];
  const n = p.cursors.length;
  const pager = h("nav", { class: "pager", "aria-label": `${which} pages` },
    h("button", { type: "button", disabled: n === 1, onclick: () => turn(which, false) }, "Newer"),
    h("span", { class: "muted" }, n === 1 ? "Latest (live)" : `Page ${n}`),
    h("button", { type: "button", disabled: !(p.data && p.data.next_cursor), onclick: () => turn(which, true) }, "Older"));
  let body;
  if (!entries.length) {
    body = h("p", { class: "muted" }, which === "history" ? "No calls recorded yet." : "No ledger entry yet.");
  } else if (which === "history") {
    body = table("Usage history, newest first", ["Time", "Method", "Calls", "Credits", "Request"],
      entries.map((e) => [when(e.timestamp), e.method, num(e.calls || 1),
        e.refunded ? "refunded" : num(e.credits), h("code", { class: "small" }, e.request_id || "")]), [2, 3]);
  } else {
    body = table("Ledger, newest first", ["Time", "Type", "Amount", "Balance after", "Description"],
      entries.map((e) => [when(e.timestamp), e.type, (e.amount > 0 ? "+" : "") + num(e.amount), num(e.balance), e.description]), [2, 3]);
  }
  const exporter = h("button", { type: "button", id: `export-${which}`, onclick: () => exportFile(which, exporter) }, "Export CSV");
  fill(which, body, h("div", { class: "pager-row" }, exporter, pager));
}

async function exportFile(which, button) {
  const session = state.session;
  if (!session || button.disabled) return;
  button.disabled = true;
  try {
    const { text, rows, truncated } = await exportCsv(session, which, (n) => { button.textContent = `Exporting… ${num(n)} rows`; });
    const day = new Date().toISOString().slice(0, 10);
    download(text, `${which}-${session.pubkey.slice(0, 8)}-${day}.csv`);
    notify(`${which === "history" ? "Usage history" : "Ledger"}: ${num(rows)} rows exported${truncated ? " (the newest, up to the export's bound; older ones through the API's cursor)" : ""}.`);
  } catch (err) {
    notify(`Export failed: ${explain(err)}`, "error");
  } finally {
    button.disabled = false;
    button.textContent = "Export CSV";
  }
}

async function refreshChart(session) {
  let data;
  try {
    data = await api.usageDaily(session, CHART_DAYS);
  } catch (err) {
    if (err.code !== "ACCOUNT_NOT_FOUND") throw err;
    data = null; // no account yet
  }
  if (state.session !== session || !changed("chart", data)) return;
  fill("chart", data ? spendChart(data) : h("p", { class: "muted" }, "No spending yet."));
}

// --------------------------------------------------------------------------------------- access rules

const RULES = [
  ["origins", "Allowed origins", "https://app.example.com or https://*.example.com"],
  ["addresses", "Allowed client addresses", "203.0.113.7 or 10.0.0.0/8"],
  ["methods", "Allowed methods or classes", "getSlot, READ_CHEAP, SUBSCRIPTION, GRPC"],
];
// The webhook actions a rule-bound key or session may take (gateway/access/rules.py WEBHOOK_ACTIONS).
const WEBHOOK_ACTIONS = ["list", "deliveries", "create", "delete", "pause", "resume", "replay", "rotate-secret"];

async function refreshAccess(session) {
  try {
    state.access = await api.accessRules(session);
  } catch (err) {
    if (err.code !== "ACCOUNT_NOT_FOUND" && err.status !== 404) throw err;
    state.access = null;
  }
  if (state.session === session && !state.editingAccess && changed("access", state.access)) renderAccess();
}

function renderAccess() {
  const a = state.access;
  if (!a) {
    fill("access", h("p", { class: "muted" }, state.account ? "Access rules are not served by this gateway." : "Open an account first (create an API key)."));
    return;
  }
  if (state.editingAccess) {
    const fields = RULES.map(([name, label, example]) =>
      h("div", { class: "field" },
        h("label", { for: `rule-${name}` }, label),
        h("textarea", { id: `rule-${name}`, rows: 3, spellcheck: "false", "aria-describedby": `rule-${name}-help` }, (a[name] || []).join("\n")),
        h("p", { class: "small muted", id: `rule-${name}-help` }, `One per line, e.g. ${example}. Empty: no rule of this kind.`)));
    if ("webhooks" in a) {
      const allowed = new Set(a.webhooks || []);
      fields.push(h("fieldset", { class: "field", id: "rule-webhooks" },
        h("legend", {}, "Webhook actions the key and sessions may take"),
        WEBHOOK_ACTIONS.map((action) => h("label", { class: "check" },
          h("input", { type: "checkbox", name: "rule-webhook", value: action, checked: allowed.has(action) }), ` ${action}`)),
        h("p", { class: "small muted" }, "None checked: while any rule is set, only your wallet or an owner session manages webhooks.")));
    }
    if ("rate" in a) {
      fields.push(h("div", { class: "field" },
        h("label", { for: "rule-rate" }, "Rate limit (requests per second)"),
        h("input", { id: "rule-rate", type: "number", min: 1, step: 1, inputmode: "numeric", value: a.rate ?? "" }),
        h("p", { class: "small muted" }, "Empty: the account's own rate.")));
    }
    fill("access",
      h("form", { id: "access-form", onsubmit: (event) => { event.preventDefault(); saveAccess(); } },
        fields,
        h("div", { class: "row" },
          h("button", { type: "submit", class: "primary", id: "save-access" }, "Sign with wallet and save"),
          h("button", { type: "button", onclick: () => { state.editingAccess = false; renderAccess(); } }, "Cancel"))));
    return;
  }
  const none = RULES.every(([name]) => !(a[name] || []).length) && !a.rate && !(a.webhooks || []).length;
  fill("access",
    h("p", { class: "small muted" }, `They bind your ${(a.binds || []).join(" and ").replace("api_key", "API key").replace("session", "ordinary session tokens")}; a request your wallet signs, or an owner session's, is never refused by them.`),
    none ? h("p", {}, "No rule: your key works from any origin, address and method, and manages webhooks.") :
      h("dl", { class: "facts" },
        RULES.map(([name, label]) => [h("dt", {}, label), h("dd", {}, (a[name] || []).length ? (a[name] || []).join(", ") : "any")]),
        "rate" in a && [h("dt", {}, "Rate limit"), h("dd", {}, a.rate ? `${num(a.rate)} per second` : "the account's")],
        "webhooks" in a && [h("dt", {}, "Webhook actions"), h("dd", {}, (a.webhooks || []).length ? a.webhooks.join(", ") : "none (only your wallet or an owner session)")]),
    h("button", { type: "button", id: "edit-access", onclick: () => { state.editingAccess = true; renderAccess(); } }, "Edit rules"));
}

function lines(id) {
  return document.getElementById(id).value.split(/[\n,]/).map((v) => v.trim()).filter(Boolean);
}

async function saveAccess() {
  const session = state.session;
  if (!session || state.busy) return;
  const rules = Object.fromEntries(RULES.map(([name]) => [name, lines(`rule-${name}`)]));
  if (state.access && "webhooks" in state.access) {
    rules.webhooks = [...document.querySelectorAll("input[name=rule-webhook]:checked")].map((i) => i.value);
  }
  if (state.access && "rate" in state.access) {
    const rate = document.getElementById("rule-rate").value.trim();
    rules.rate = rate ? Number(rate) : null;
  }
  state.busy = true;
  notify(`Asking ${session.wallet} to sign the new rules…`);
  try {
    const wallet = wallets.findWallet(session.wallet);
    if (!wallet) throw new Error(`${session.wallet} is not available in this browser now`);
    const account = await wallets.connect(wallet, session.pubkey);
    state.access = await api.setAccessRules(rules, session.pubkey, wallets.signer(wallet, account), state.skewS);
    state.editingAccess = false;
    notify("Access rules saved: every replica applies them within a second.");
    renderAccess();
  } catch (err) {
    notify(`The rules were not changed: ${explain(err)}`, "error");
  } finally {
    state.busy = false;
  }
}

// ------------------------------------------------------------------------------------------------- key

function renderKey() {
  const parts = [];
  if (state.newKey) {
    parts.push(
      h("p", { class: "warn" }, "Your new API key. It is shown only this once: copy it now."),
      h("div", { class: "keyrow" },
        h("input", { id: "api-key", class: "key", readonly: true, value: state.newKey, "aria-label": "New API key" }),
        copyButton(state.newKey, "Copy key")),
      h("button", { type: "button", onclick: () => { state.newKey = null; notify(""); renderKey(); } }, "I have saved it"));
  } else if (state.confirmRotate) {
    parts.push(
      h("p", { class: "warn" }, "A new key replaces the current one at once, everywhere: apps using the old key stop working."),
      h("div", { class: "row" },
        h("button", { type: "button", class: "primary", id: "confirm-rotate", onclick: rotateKey }, "Sign with wallet and create"),
        h("button", { type: "button", onclick: () => { state.confirmRotate = false; renderKey(); } }, "Cancel")));
  } else {
    parts.push(
      h("p", {}, "One key per account. Only a hash of it is kept: if you lose it, create a new one."),
      h("button", { type: "button", class: "primary", id: "rotate-key", onclick: () => { state.confirmRotate = true; renderKey(); } },
        "Create or rotate API key"));
  }
  const ws = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws`;
  parts.push(
    h("h3", { class: "sub" }, "Where to use it"),
    h("dl", { class: "facts" },
      h("dt", {}, "JSON-RPC"), h("dd", {}, h("code", { class: "addr" }, `${location.origin}/`)),
      h("dt", {}, "WebSocket"), h("dd", {}, h("code", { class: "addr" }, ws)),
      h("dt", {}, "Header"), h("dd", {}, h("code", {}, "X-Api-Key: <key>"), " or ", h("code", {}, "?api-key=<key>"))),
    h("p", { class: "small muted" }, "Prices per method class are under Pricing in force; every call's cost is in the usage history."));
  fill("key", parts);
}

async function rotateKey() {
  const session = state.session;
  if (!session || state.busy) return;
  state.busy = true;
  notify(`Asking ${session.wallet} to sign the key request…`);
  try {
    const wallet = wallets.findWallet(session.wallet);
    if (!wallet) throw new Error(`${session.wallet} is not available in this browser now`);
    const account = await wallets.connect(wallet, session.pubkey);
    const answer = await api.createApiKey(session.pubkey, wallets.signer(wallet, account), state.skewS);
    state.newKey = answer.api_key;
    state.confirmRotate = false;
    notify(answer.message || "New API key created.");
    renderKey();
    refresh(true);
  } catch (err) {
    notify(`The key was not changed: ${explain(err)}`, "error");
  } finally {
    state.busy = false;
  }
}

function copyButton(text, label) {
  const button = h("button", { type: "button", class: "copy" }, label);
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(text);
      button.textContent = "Copied";
    } catch {
      button.textContent = "Select and copy it";
    }
    setTimeout(() => { button.textContent = label; }, 2000);
  });
  return button;
}

// --------------------------------------------------------------------------------------- public parts

async function refreshHealth() {
  try {
    const doc = await api.publicRoutes.health();
    if (typeof doc.timestamp === "number") state.skewS = doc.timestamp - Date.now() / 1000;
    const status = doc.status || "unknown";
    fill("health",
      h("p", {}, h("span", { class: `dot ${status}`, "aria-hidden": "true" }), h("strong", { id: "health-status" }, status),
        doc.paid_traffic_ready === false ? " · paid traffic not ready" : ""),
      h("dl", { class: "facts" },
        doc.solanaSlot !== undefined && [h("dt", {}, "Slot"), h("dd", {}, num(doc.solanaSlot))],
        doc.agave_healthy !== undefined && [h("dt", {}, "Node"), h("dd", {}, doc.agave_healthy ? "healthy" : "unhealthy")],
        doc.fallback_active && [h("dt", {}, "Fallback"), h("dd", {}, "active")],
        doc.nodeVersion && [h("dt", {}, "Node version"), h("dd", {}, doc.nodeVersion)],
        doc.timestamp && [h("dt", {}, "Checked"), h("dd", {}, when(doc.timestamp))]));
  } catch (err) {
    fill("health", h("p", {}, h("span", { class: "dot down", "aria-hidden": "true" }), h("strong", {}, "unreachable"), ` · ${explain(err)}`));
  }
}

async function refreshPricing() {
  try {
    state.pricing = await api.publicRoutes.pricing();
  } catch (err) {
    fill("pricing", h("p", { class: "muted" }, `Pricing unavailable: ${explain(err)}`));
    return;
  }
  const p = state.pricing;
  const classes = Object.entries(p.classes || {}).sort(([, a], [, b]) => a.credits - b.credits);
  fill("pricing",
    h("p", {}, `1 USDC buys ${num(p.credits_per_usdc)} credits; credits expire after ${Math.round(p.credit_expiry_seconds / 86400)} days; minimum deposit ${p.minimum_deposit_usdc} USDC.`),
    table("Credits per call by method class", ["Class", "Credits per call", "Methods"],
      classes.map(([name, c]) => [name, num(c.credits),
        h("details", {}, h("summary", {}, `${(c.methods || []).length} methods`), h("p", { class: "small methods" }, (c.methods || []).join(", ")))]), [1]));
}

// ---------------------------------------------------------------------------------------------- start

function tick() {
  state.polls += 1;
  refreshHealth();
  if (state.polls % 12 === 0) refreshPricing();
  if (state.session) refresh();
}

function start() {
  wallets.onWalletsChanged(renderWallets);
  refreshHealth();
  refreshPricing();
  if (state.session) enterAccount();
  else renderWallets();
  state.timer = setInterval(tick, POLL_MS);
}

start();
