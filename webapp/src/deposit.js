// The deposit card: a button that has the signed-in wallet sign a USDC transfer of the amount typed, settled
// by the gateway's sponsored POST /x402/settle (the gateway pays the fee: the wallet needs no SOL and no
// credits) and followed until confirm-deposit credits it; a Solana Pay transfer request for USDC (its QR code
// names the USDC mint and the amount, so a phone wallet cannot pay it in SOL); and confirming a sent transfer
// by its signature.

import qrcode from "qrcode-generator";
import { h, s, num } from "./dom.js";
import { connect, findWallet } from "./wallet.js";

const USDC_DECIMALS = 6;

const SIGN_TRANSACTION = "solana:signTransaction";
const FINALIZE_POLL_MS = 2000; // confirm-deposit allows 1/s per address
const FINALIZE_WAIT_MS = 180_000; // mainnet finalizes in about 15 s; the deposit watcher credits it anyway
// The Wallet Standard's chain names of the CAIP-2 networks the terms name.
const CHAINS = {
  "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp": "solana:mainnet",
  "solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1": "solana:devnet",
  "solana:4uhcVJyU9pJkvQyS88uRDiswHXSCkY3z": "solana:testnet",
};

class PayError extends Error {
  constructor(status, code, message, reason) {
    super(message);
    this.status = status;
    this.code = code;
    this.reason = reason;
  }
}

async function request(method, path, body, headers = {}) {
  const init = { method, headers: { ...headers }, cache: "no-store", credentials: "omit" };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json";
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    throw new PayError(0, "NETWORK", `the gateway did not answer (${err.message})`);
  }
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  return { status: response.status, data };
}

function failure({ status, data }) {
  const error = data && typeof data.error === "object" && data.error ? data.error : {};
  const reason = error.data && typeof error.data === "object" ? error.data.reason : undefined;
  return new PayError(status, error.code || `HTTP_${status}`, error.message || `HTTP ${status}`, reason);
}

/** The x402 terms of a call without credentials (the 402's body carries them, as PAYMENT-REQUIRED does). */
export async function paymentTerms() {
  const answer = await request("POST", "/", { jsonrpc: "2.0", id: 1, method: "getSlot" });
  const accepts = answer.status === 402 && answer.data && Array.isArray(answer.data.accepts) ? answer.data.accepts : [];
  const terms = accepts.find((a) => a && a.scheme === "exact");
  if (!terms) throw new PayError(answer.status, "NO_TERMS", "the gateway gave no payment terms");
  return terms;
}

/**
 * The deposit button's work: terms and a recent blockhash from the gateway, the transfer signed by the wallet
 * (`solana:signTransaction`), settled by POST /x402/settle, then confirm-deposit until it is credited.
 * `progress(text)` is told each step; resolves to confirm-deposit's answer.
 */
export async function payWithWallet(session, units, progress) {
  const wallet = findWallet(session.wallet);
  if (!wallet) throw new PayError(0, "NO_WALLET", `${session.wallet} is not available in this browser now`);
  if (!(SIGN_TRANSACTION in wallet.features)) {
    throw new PayError(0, "NO_SIGN_TRANSACTION", `${wallet.name} cannot sign transactions here: pay with the request below instead`);
  }
  progress("Reading the payment terms…");
  const terms = await paymentTerms();
  if (!terms.extra || !terms.extra.feePayer) throw new PayError(503, "NO_FEE_PAYER", "this gateway does not pay the fee of deposits: pay with the request below instead");
  const recentAnswer = await request("GET", "/x402/blockhash");
  if (recentAnswer.status !== 200) throw failure(recentAnswer);
  // @solana/kit is loaded only now (a chunk of its own), so the page itself stays small.
  const { signedForSettling, sponsoredTransfer } = await import("./transfer.js");
  const unsigned = await sponsoredTransfer(terms, session.pubkey, units, recentAnswer.data);

  progress(`Waiting for ${wallet.name} to sign the transfer of ${usdc(units)} USDC…`);
  const account = await connect(wallet, session.pubkey);
  const chain = CHAINS[terms.network];
  const input = { account, transaction: unsigned };
  if (chain && (account.chains || []).includes(chain)) input.chain = chain;
  const [output] = await wallet.features[SIGN_TRANSACTION].signTransaction(input);
  const transaction = signedForSettling(unsigned, output.signedTransaction, session.pubkey);

  progress("Sending the transfer (the gateway pays its fee)…");
  const settled = await request("POST", "/x402/settle", { transaction });
  if (settled.status !== 200) throw failure(settled);
  const signature = settled.data.transaction;

  const started = Date.now();
  for (;;) {
    progress(`Sent (${signature.slice(0, 8)}…): waiting for the network to finalize it, then the credits…`);
    const confirmed = await request("POST", "/account/confirm-deposit", { signature }, { Authorization: `Bearer ${session.token}` });
    if (confirmed.status === 200) return { ...confirmed.data, signature };
    const err = failure(confirmed);
    const waiting = confirmed.status === 400 && /not finalized/.test(err.message);
    if (!(waiting || confirmed.status === 429) || Date.now() - started > FINALIZE_WAIT_MS) {
      err.signature = signature;
      throw err;
    }
    await new Promise((resolve) => setTimeout(resolve, FINALIZE_POLL_MS));
  }
}

/** A sentence for a failed payment: what went wrong and whether anything moved. */
export function payFailure(err, units) {
  if (err.reason === "preflight_rejected" && /insufficient funds|0x1\b/i.test(err.message)) {
    return `Not sent: this wallet does not hold ${usdc(units)} USDC (the network refused the transfer, nothing moved).`;
  }
  if (err.reason === "preflight_rejected" && /AccountNotFound|could not find account|invalid account data/i.test(err.message)) {
    return "Not sent: this wallet has no USDC account yet (it has never held USDC); nothing moved.";
  }
  if (err.signature) return `Sent (${err.signature}), not credited yet: ${err.message}. The deposit watcher credits it once it is finalized.`;
  const rejected = /reject|denied|declined|cancel/i.test(err.message) && !err.code;
  if (rejected) return "Not sent: the wallet declined to sign.";
  return `Not sent: ${err.message}${err.code ? ` (${err.code})` : ""}.`;
}

function usdc(units) {
  const whole = units / 10n ** BigInt(USDC_DECIMALS);
  const fraction = (units % 10n ** BigInt(USDC_DECIMALS)).toString().padStart(USDC_DECIMALS, "0").replace(/0+$/, "");
  return fraction ? `${whole}.${fraction}` : `${whole}`;
}

/** "2.5" -> 2_500_000 base units, or null when not a positive amount with at most 6 decimals. */
export function baseUnits(text) {
  const match = /^\s*(\d{1,12})(?:\.(\d{1,6}))?\s*$/.exec(text);
  if (!match) return null;
  const units = BigInt(match[1]) * 10n ** BigInt(USDC_DECIMALS) + BigInt((match[2] || "").padEnd(USDC_DECIMALS, "0"));
  return units > 0n ? units : null;
}

/** The Solana Pay transfer request URL (solana:<recipient>?amount=...&spl-token=<mint>). */
export function transferRequest(recipient, amount, mint, pubkey) {
  const query = new URLSearchParams({
    amount,
    "spl-token": mint,
    label: "Solana credit gateway",
    message: `Credits for ${pubkey}`,
  });
  return `solana:${recipient}?${query}`;
}

/** The QR code of `text` as inline SVG: one path of dark modules on a white quiet zone. */
export function qrSvg(text, label) {
  const qr = qrcode(0, "M");
  qr.addData(text);
  qr.make();
  const n = qr.getModuleCount();
  const quiet = 4;
  let d = "";
  for (let row = 0; row < n; row += 1) {
    for (let col = 0; col < n; col += 1) {
      if (qr.isDark(row, col)) d += `M${col + quiet} ${row + quiet}h1v1h-1z`;
    }
  }
  const size = n + 2 * quiet;
  return s("svg", { viewBox: `0 0 ${size} ${size}`, class: "qr", role: "img", "aria-label": label, "shape-rendering": "crispEdges" },
    s("rect", { width: size, height: size, fill: "#fff" }),
    s("path", { d, fill: "#000" }));
}

/**
 * The card for `account` (GET /account/info, or null before the wallet has an account: the addresses then come
 * from the payment terms): `{nodes, setAccount}`. It is drawn once per session and told of a new account
 * with `setAccount`, so a deposit in progress keeps its progress line when the deposit opens the account.
 * `onConfirm(signature)` confirms a transfer; `onCredited(answer)` follows a deposit the button made.
 */
export function depositCard(account, session, { onConfirm, onCredited }) {
  const pubkey = session.pubkey;
  let f = {};
  const where = { address: null, mint: null };
  const amount = h("input", { id: "deposit-amount", type: "text", inputmode: "decimal", value: "5", autocomplete: "off", "aria-describedby": "deposit-credits" });
  const credits = h("p", { id: "deposit-credits", class: "small" });
  const request = h("div", { id: "deposit-request" });
  const warn = h("p", { class: "warn small" });
  const crediting = h("p", { class: "small muted" });
  const minimumText = () => f.minimum_deposit_usdc || "0.01";
  const valid = () => {
    const units = baseUnits(amount.value);
    return units !== null && Number(units) >= Number(minimumText()) * 10 ** USDC_DECIMALS ? units : null;
  };
  const update = () => {
    const network = f.network_description || f.network;
    warn.textContent = `Credits go to the wallet that signs the transfer: send from ${pubkey.slice(0, 4)}…${pubkey.slice(-4)}${network ? `, on ${network}` : ""}.`;
    crediting.textContent = `${sentence(f.crediting || "credits arrive once the transfer is finalized")}. To credit a sent transfer at once, paste its signature:`;
    const units = valid();
    if (units === null) {
      credits.textContent = `Type an amount of at least ${minimumText()} USDC, up to 6 decimals.`;
      request.replaceChildren();
      return;
    }
    const text = amount.value.trim();
    const perUsdc = Number(f.credits_per_usdc || 0);
    credits.textContent = perUsdc
      ? `${text} USDC buys ${num(Math.floor((Number(units) * perUsdc) / 10 ** USDC_DECIMALS))} credits, valid ${f.credit_expiry_days || 90} days.`
      : "";
    if (!where.address || !where.mint) {
      request.replaceChildren();
      return;
    }
    const url = transferRequest(where.address, text, where.mint, pubkey);
    request.replaceChildren(
      qrSvg(url, `QR code: a Solana Pay request for ${text} USDC to ${where.address}`),
      h("p", { class: "small" }, h("a", { href: url, id: "deposit-link" }, "Open in a wallet app"), " · ",
        h("code", { class: "addr small", id: "deposit-url" }, url)));
  };
  const setAccount = (a) => {
    if (!a || !a.funding || !a.funding.usdc_mint) return;
    const drawn = JSON.stringify([f, where]);
    f = a.funding;
    where.address = a.deposit_address;
    where.mint = f.usdc_mint;
    if (JSON.stringify([f, where]) !== drawn) update();
  };
  amount.addEventListener("input", update);
  setAccount(account);
  update();
  if (!where.address) {
    paymentTerms().then((terms) => {
      if (where.address) return;
      where.address = terms.payTo;
      where.mint = terms.asset;
      update();
    }).catch(() => {}); // the button says what is wrong when pressed
  }

  const progress = h("p", { id: "deposit-progress", class: "small", role: "status", "aria-live": "polite" });
  const pay = h("button", { type: "button", class: "primary", id: "deposit-pay" }, `Pay with ${session.wallet}`);
  pay.addEventListener("click", async () => {
    const units = valid();
    if (units === null) {
      progress.className = "small warn";
      progress.textContent = `Type an amount of at least ${minimumText()} USDC first.`;
      return;
    }
    pay.disabled = true;
    amount.disabled = true;
    progress.className = "small";
    try {
      const answer = await payWithWallet(session, units, (text) => { progress.textContent = text; });
      progress.textContent = answer.already_processed
        ? "Credited (the deposit watcher had credited it already)."
        : `Credited: ${num(answer.credits_added)} credits added.`;
      onCredited(answer);
    } catch (err) {
      progress.className = "small warn";
      progress.textContent = payFailure(err, units);
    } finally {
      pay.disabled = false;
      amount.disabled = false;
    }
  });

  const signature = h("input", { id: "deposit-signature", type: "text", autocomplete: "off", spellcheck: "false" });
  const confirm = h("form", { class: "row", onsubmit: (event) => { event.preventDefault(); onConfirm(signature.value.trim()); } },
    h("label", { for: "deposit-signature", class: "sr-only" }, "Transfer signature"),
    signature,
    h("button", { type: "submit", id: "confirm-deposit" }, "Confirm deposit"));
  signature.setAttribute("placeholder", "transfer signature");

  const nodes = [
    h("div", { class: "field" }, h("label", { for: "deposit-amount" }, "Amount (USDC)"), amount, credits),
    h("p", {}, `Pay from ${session.wallet}: it signs a USDC transfer of that amount, and the gateway sends it and pays its fee, so the wallet needs USDC but no SOL. The credits show here once the network has finalized it.`),
    h("p", { class: "row" }, pay),
    progress,
    h("p", {}, "Or scan with the wallet you signed in with, or open the request in it. The request names the USDC mint, so it cannot be paid in SOL."),
    warn,
    request,
    crediting,
    confirm,
  ];
  return { nodes, setAccount };
}

function sentence(text) {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
