// CSV export of the usage history and the ledger, made in the page from the routes' own pages (cursor
// paging, 1,000 rows a request), newest first. A text cell that a spreadsheet would run as a formula
// (= + - @ at its start) is prefixed with ' so that opening the file runs nothing.

import * as api from "./api.js";

const ROWS_PER_PAGE = 1000;
const MAX_PAGES = 100; // 100,000 rows: beyond that the file says where it stopped
const PACE_MS = 150; // under the account reads' per-address limit (docs/api.md, Limits)

export const COLUMNS = {
  history: [["timestamp", false], ["method", true], ["calls", false], ["credits", false], ["refunded", false], ["request_id", true]],
  ledger: [["timestamp", false], ["type", true], ["amount", false], ["balance", false], ["description", true], ["signature", true]],
};

export function cell(value, text) {
  let v = value === null || value === undefined ? "" : String(value);
  if (text && /^[=+\-@\t\r]/.test(v)) v = `'${v}`;
  return /[",\r\n]/.test(v) ? `"${v.replaceAll('"', '""')}"` : v;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Every row of `which` (at most MAX_PAGES pages) as CSV text; `progress(rows)` after each page. */
export async function exportCsv(session, which, progress) {
  const columns = COLUMNS[which];
  const lines = [columns.map(([name]) => name).join(",")];
  let cursor = null;
  let pages = 0;
  let rows = 0;
  let truncated = false;
  for (;;) {
    let data;
    try {
      data = await api.page(session, which, ROWS_PER_PAGE, cursor);
    } catch (err) {
      if (err.status === 429) {
        await sleep(1000);
        continue;
      }
      throw err;
    }
    for (const entry of data.entries || []) {
      lines.push(columns.map(([name, text]) => cell(entry[name], text)).join(","));
    }
    rows += (data.entries || []).length;
    pages += 1;
    progress(rows);
    cursor = data.next_cursor;
    if (!cursor) break;
    if (pages >= MAX_PAGES) {
      truncated = true;
      break;
    }
    await sleep(PACE_MS);
  }
  return { text: lines.join("\r\n") + "\r\n", rows, truncated };
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
