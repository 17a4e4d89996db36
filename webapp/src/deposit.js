// The deposit card: a Solana Pay transfer request for USDC (its QR code names the USDC mint and the amount,
// so a phone wallet cannot pay it in SOL), and confirming a sent transfer by its signature.

import qrcode from "qrcode-generator";
import { h, s, num } from "./dom.js";

const USDC_DECIMALS = 6;

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

/** The card's content for `account` (GET /account/info); `onConfirm(signature)` confirms a transfer. */
export function depositCard(account, pubkey, onConfirm) {
  const f = account.funding || {};
  const minimum = Number(f.minimum_deposit_usdc || "0.01");
  const perUsdc = Number(f.credits_per_usdc || 0);
  const amount = h("input", { id: "deposit-amount", type: "text", inputmode: "decimal", value: "5", autocomplete: "off", "aria-describedby": "deposit-credits" });
  const credits = h("p", { id: "deposit-credits", class: "small" });
  const request = h("div", { id: "deposit-request" });
  const update = () => {
    const units = baseUnits(amount.value);
    if (units === null || Number(units) < minimum * 10 ** USDC_DECIMALS) {
      credits.textContent = `Type an amount of at least ${f.minimum_deposit_usdc || "0.01"} USDC, up to 6 decimals.`;
      request.replaceChildren();
      return;
    }
    const text = amount.value.trim();
    credits.textContent = `${text} USDC buys ${num(Math.floor((Number(units) * perUsdc) / 10 ** USDC_DECIMALS))} credits, valid ${f.credit_expiry_days || 90} days.`;
    const url = transferRequest(account.deposit_address, text, f.usdc_mint, pubkey);
    request.replaceChildren(
      qrSvg(url, `QR code: a Solana Pay request for ${text} USDC to ${account.deposit_address}`),
      h("p", { class: "small" }, h("a", { href: url, id: "deposit-link" }, "Open in a wallet app"), " · ",
        h("code", { class: "addr small", id: "deposit-url" }, url)));
  };
  amount.addEventListener("input", update);
  update();

  const signature = h("input", { id: "deposit-signature", type: "text", autocomplete: "off", spellcheck: "false" });
  const confirm = h("form", { class: "row", onsubmit: (event) => { event.preventDefault(); onConfirm(signature.value.trim()); } },
    h("label", { for: "deposit-signature", class: "sr-only" }, "Transfer signature"),
    signature,
    h("button", { type: "submit", id: "confirm-deposit" }, "Confirm deposit"));
  signature.setAttribute("placeholder", "transfer signature");

  return [
    h("p", {}, "Scan with the wallet you signed in with, or open the request in it. The request names the USDC mint, so it cannot be paid in SOL."),
    h("p", { class: "warn small" }, `Credits go to the wallet that signs the transfer: send from ${pubkey.slice(0, 4)}…${pubkey.slice(-4)}, on ${f.network_description || f.network || "the service's network"}.`),
    h("div", { class: "field" }, h("label", { for: "deposit-amount" }, "Amount (USDC)"), amount, credits),
    request,
    h("p", { class: "small muted" }, `${sentence(f.crediting || "credits arrive once the transfer is finalized")}. To credit a sent transfer at once, paste its signature:`),
    confirm,
  ];
}

function sentence(text) {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
