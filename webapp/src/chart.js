// The per-day, per-class spend chart: inline SVG drawn from the usage history the page has loaded.

import { h, s, num, table } from "./dom.js";

const COLORS = ["#2563eb", "#d97706", "#059669", "#9333ea", "#dc2626", "#0891b2", "#4b5563", "#be185d"];

/** method -> class, from /pricing's classes ({name: {methods: [...]}}). */
export function classOf(pricing) {
  const map = new Map();
  for (const [name, info] of Object.entries((pricing && pricing.classes) || {})) {
    for (const method of info.methods || []) map.set(method, name);
  }
  return map;
}

/** [{day, byClass: Map, total}] oldest first, from history entries. */
export function spendByDay(entries, classes) {
  const days = new Map();
  for (const e of entries) {
    const day = String(e.timestamp).slice(0, 10);
    const cls = classes.get(e.method) || "other";
    if (!days.has(day)) days.set(day, new Map());
    const byClass = days.get(day);
    byClass.set(cls, (byClass.get(cls) || 0) + (Number(e.credits) || 0));
  }
  return [...days.entries()]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([day, byClass]) => ({ day, byClass, total: [...byClass.values()].reduce((a, b) => a + b, 0) }));
}

export function spendChart(entries, classes, complete) {
  const days = spendByDay(entries, classes).slice(-14);
  if (!days.length) return h("p", { class: "muted" }, "No calls yet: spending shows here once you use your key.");
  const names = [...new Set(days.flatMap((d) => [...d.byClass.keys()]))].sort();
  const color = (name) => COLORS[names.indexOf(name) % COLORS.length];
  const width = 640, height = 220, left = 56, bottom = 28, top = 10;
  const max = Math.max(1, ...days.map((d) => d.total));
  const slot = (width - left) / days.length;
  const bar = Math.max(4, Math.min(48, slot * 0.6));
  const y = (v) => top + (height - top - bottom) * (1 - v / max);
  const label = days.map((d) => `${d.day}: ${num(d.total)} credits`).join("; ");
  const svg = s(
    "svg",
    { viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img", "aria-label": `Credits spent per day. ${label}` },
    s("line", { x1: left, x2: width, y1: y(0), y2: y(0), class: "axis" }),
    s("text", { x: left - 6, y: y(max) + 4, class: "tick", "text-anchor": "end" }, num(max)),
    s("text", { x: left - 6, y: y(0) + 4, class: "tick", "text-anchor": "end" }, "0"),
    days.map((d, i) => {
      const x = left + slot * i + (slot - bar) / 2;
      let base = 0;
      const parts = names
        .filter((n) => d.byClass.get(n))
        .map((n) => {
          const v = d.byClass.get(n);
          const rect = s("rect", { x, width: bar, y: y(base + v), height: Math.max(1, y(base) - y(base + v)), fill: color(n) },
            s("title", {}, `${d.day} ${n}: ${num(v)} credits`));
          base += v;
          return rect;
        });
      return [parts, s("text", { x: x + bar / 2, y: height - 10, class: "tick", "text-anchor": "middle" }, d.day.slice(5))];
    }),
  );
  const legend = h("ul", { class: "legend" }, names.map((n) =>
    h("li", {}, h("span", { class: `swatch c${names.indexOf(n) % COLORS.length}`, "aria-hidden": "true" }), n)));
  const scope = complete ? "all calls kept in your history" : `your latest ${num(entries.length)} history rows`;
  return h("div", {}, svg, legend, perMethod(entries),
    h("p", { class: "muted small" }, `From ${scope}, by method class, days in UTC.`));
}

/** Calls, refunds and credits per method, most credits first. */
function perMethod(entries) {
  const methods = new Map();
  for (const e of entries) {
    const m = methods.get(e.method) || { calls: 0, refunded: 0, credits: 0 };
    const calls = Number(e.calls) || 1;
    m.calls += calls;
    if (e.refunded) m.refunded += calls;
    m.credits += Number(e.credits) || 0;
    methods.set(e.method, m);
  }
  const rows = [...methods.entries()].sort(([, a], [, b]) => b.credits - a.credits || b.calls - a.calls);
  return table("Calls, refunds and credits per method", ["Method", "Calls", "Refunded", "Credits"],
    rows.map(([name, m]) => [name, num(m.calls), num(m.refunded), num(m.credits)]), [1, 2, 3]);
}
