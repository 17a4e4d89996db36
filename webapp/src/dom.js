// DOM building without markup: every string becomes a text node (textContent), never HTML, so a memo,
// a description or a URL that holds markup is shown as the characters it is (docs/dashboard.md).

/**
 * h("td", {class: "num"}, "12") -> <td class="num">12</td>. Props: `class`, `on<event>` handlers, and
 * attributes (set with setAttribute; `false`/`null` leaves one out). Children: nodes or strings (as text).
 * @param {string} tag
 * @param {Record<string, any>} [props]
 * @param {...(Node|string|number|null|undefined|false|Array<any>)} children
 * @returns {HTMLElement}
 */
export function h(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  setProps(node, props);
  append(node, children);
  return node;
}

const SVG_NS = "http://www.w3.org/2000/svg";

/** The same for SVG elements. */
export function s(tag, props = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  setProps(node, props);
  append(node, children);
  return node;
}

function setProps(node, props) {
  for (const [name, value] of Object.entries(props)) {
    if (value === false || value === null || value === undefined) continue;
    if (name.startsWith("on") && typeof value === "function") {
      node.addEventListener(name.slice(2), value);
    } else {
      node.setAttribute(name, value === true ? "" : String(value));
    }
  }
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace what `id` holds with `children`. */
export function fill(id, ...children) {
  const node = document.getElementById(id);
  node.replaceChildren();
  append(node, children);
  return node;
}

export function show(id, visible) {
  document.getElementById(id).hidden = !visible;
}

const numbers = new Intl.NumberFormat("en-US");

export function num(n) {
  return numbers.format(n);
}

/** "2026-11-25 15:04 UTC" from ISO 8601 or Unix seconds. */
export function when(value) {
  const date = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  if (Number.isNaN(date.getTime())) return String(value);
  return date.toISOString().slice(0, 16).replace("T", " ") + " UTC";
}

/** "in 3 days", "in 5 hours", "expired". */
export function until(value) {
  const ms = (typeof value === "number" ? value * 1000 : Date.parse(value)) - Date.now();
  if (Number.isNaN(ms)) return "";
  if (ms <= 0) return "expired";
  const hours = ms / 3_600_000;
  if (hours < 1) return `in ${Math.ceil(ms / 60_000)} min`;
  if (hours < 48) return `in ${Math.round(hours)} hours`;
  return `in ${Math.round(hours / 24)} days`;
}

/** A table from rows of cells; `numeric` names the columns aligned right. */
export function table(caption, headings, rows, numeric = []) {
  return h(
    "div",
    { class: "table-wrap", tabindex: "0", role: "region", "aria-label": caption },
    h(
      "table",
      {},
      h("caption", { class: "sr-only" }, caption),
      h("thead", {}, h("tr", {}, headings.map((t, i) => h("th", { scope: "col", class: numeric.includes(i) && "num" }, t)))),
      h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((c, i) => h("td", { class: numeric.includes(i) && "num" }, c))))),
    ),
  );
}
