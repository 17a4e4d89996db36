// CSV export of the usage history and the ledger: the gateway streams the file (GET /account/usage.csv,
// /account/ledger.csv, paged by key on the server, formula cells guarded there); the page reads it as it
// comes, counting rows, and offers it as a download. `cell` is the same guard, kept for the page's own
// use and held equal to the server's by tests (a text cell that a spreadsheet would run as a formula,
// = + - @ at its start, is prefixed with ').

import * as api from "./api.js";

const MORE = "# "; // the last line of a file stopped short: its bound, the database, a revoked key (docs/api.md)

export function cell(value, text) {
  let v = value === null || value === undefined ? "" : String(value);
  if (text && /^[=+\-@\t\r]/.test(v)) v = `'${v}`;
  return /[",\r\n]/.test(v) ? `"${v.replaceAll('"', '""')}"` : v;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Every row of `which` as the server streams it, as CSV text; `progress(rows)` as chunks arrive. */
export async function exportCsv(session, which, progress) {
  let response;
  for (let tries = 0; ; tries += 1) {
    try {
      response = await api.exportStream(session, which);
      break;
    } catch (err) {
      if (err.status !== 429 || tries >= 5) throw err;
      await sleep(1000); // the account reads' per-address limit, or two exports already running (docs/api.md)
    }
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const parts = [];
  let lines = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    const text = decoder.decode(value, { stream: true });
    parts.push(text);
    for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) lines += 1;
    progress(Math.max(0, lines - 1));
  }
  parts.push(decoder.decode());
  let text = parts.join("");
  const body = text.endsWith("\r\n") ? text.slice(0, -2) : text;
  const last = body.lastIndexOf("\n") + 1;
  const truncated = body.startsWith(MORE, last);
  if (truncated) text = text.slice(0, last);
  return { text, rows: Math.max(0, lines - 1 - (truncated ? 1 : 0)), truncated };
}

/** Offer `text` as a file download (a blob URL on a link, clicked). */
export function download(text, filename) {
  const url = URL.createObjectURL(new Blob([text], { type: "text/csv;charset=utf-8" }));
  const link = document.createElement("a");
  link.href = url;
  link.download = filename;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
