// The per-day, per-class spend chart: inline SVG drawn from the totals the gateway keeps (GET
// /account/usage/daily), however many calls the account made.

import { h, s, num, table } from "./dom.js";

const COLORS = ["#2563eb", "#d97706", "#059669", "#9333ea", "#dc2626", "#0891b2", "#4b5563", "#be185d"];

/** [{day, byClass: Map, total}] oldest first, from the totals' days (GET /account/usage/daily). */
export function spendByDay(totals) {
  return ((totals && totals.days) || []).map((d) => {
    const byClass = new Map(Object.entries(d.classes || {}).map(([name, c]) => [name, Number(c.credits) || 0]));
    return { day: d.day, byClass, total: Number(d.credits) || 0 };
  });
}

export function spendChart(totals) {
  const days = spendByDay(totals);
  const methods = (totals && totals.methods) || [];
  if (!methods.length) return h("p", { class: "muted" }, "No calls yet: spending shows here once you use your key.");
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
      const every = Math.ceil(days.length / 7); // at most 7 day labels: readable at 375 px
      const tick = (days.length - 1 - i) % every === 0
        ? s("text", { x: x + bar / 2, y: height - 10, class: "tick", "text-anchor": "middle" }, d.day.slice(5)) : null;
      return [parts, tick];
    }),
  );
  const legend = h("ul", { class: "legend" }, names.map((n) =>
    h("li", {}, h("span", { class: `swatch c${names.indexOf(n) % COLORS.length}`, "aria-hidden": "true" }), n)));
  return h("div", {}, svg, legend, perMethod(methods),
    h("p", { class: "muted small" }, `Every call of the last ${days.length} days (UTC), by method class, from the totals the gateway keeps as it settles usage.`));
}

/** Calls, refunds and credits per method, most credits first (the server's order). */
function perMethod(methods) {
  return table("Calls, refunds and credits per method", ["Method", "Calls", "Refunded", "Credits"],
    methods.map((m) => [m.method, num(m.calls), num(m.refunds), num(m.credits)]), [1, 2, 3]);
}
