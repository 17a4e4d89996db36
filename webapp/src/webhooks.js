// The webhooks card: the account's webhooks with their status and deliveries, a webhook's recent deliveries
// with the receiver's answers, and creating, rotating the secret of, replaying, pausing, resuming and deleting
// them (docs/api.md, Webhooks). A URL and a receiver's answer are shown as text, never as markup.
//
// Reads go with the session token. Changes go under `ui.writeAuth()`: an owner session's token, or else a
// wallet signature per change. An ordinary session the account's access rules refuse (403 ACCESS_DENIED)
// cannot read the list: the card says so and reads it once under a wallet signature when asked, then keeps
// that copy up to date with the changes made here, so the 5 s poll never asks the wallet for anything.

import * as api from "./api.js";
import { h, fill, num, when, table } from "./dom.js";

const TYPES = [
  ["lifecycle", "Account events (lifecycle)"],
  ["my_account", "Transactions of my wallet"],
  ["account", "Transactions of an address"],
  ["program", "Transactions of a program"],
  ["signal", "Signals"],
];
const DELIVERIES_SHOWN = 20;

function refused(err) {
  return err instanceof api.ApiError && err.status === 403 && err.code === "ACCESS_DENIED";
}

/**
 * The card's state and drawing. `ui` gives: session(), readAuth(), writeAuth() and signedAuth() (promises of an
 * api auth function), notify(text, kind), explain(err), copyButton(text, label), and lifecycleEvents(): the
 * lifecycle events a webhook may name, as GET /pricing serves them (`webhooks.lifecycle_events`; null until it
 * has answered), so the page holds no list of its own.
 */
export function webhooksCard(ui) {
  const state = {
    list: null, secret: null, creating: false, confirmDelete: null, drawn: false, open: null, deliveries: null,
    denied: false, // the session's reads are refused by the access rules
    signed: null, // {list, at}: the list as last read under a wallet signature (while denied), with changes since
    signedDeliveries: null, // {id, deliveries, at}: one webhook's deliveries read under a wallet signature
    deliveriesDenied: false, // the session's reads of deliveries are refused by the access rules
  };

  async function refresh() {
    const session = ui.session();
    if (!session) return;
    let list = null;
    let denied = false;
    try {
      list = await api.webhooks.list(ui.readAuth());
    } catch (err) {
      if (refused(err)) denied = true;
      else if (err.status !== 402 && err.status !== 404) throw err; // 402: no account yet
    }
    if (ui.session() !== session) return;
    if (denied) {
      list = state.signed ? state.signed.list : null;
    } else {
      state.signed = null; // readable again (the rules changed): the live list from now on
    }
    let deliveries = null;
    let deliveriesDenied = denied; // the rules may allow the list and not the deliveries
    const open = list && (list.webhooks || []).some((w) => w.id === state.open) ? state.open : null;
    if (open !== null && !denied) {
      try {
        deliveries = await api.webhooks.deliveries(ui.readAuth(), open, DELIVERIES_SHOWN);
        state.signedDeliveries = null; // readable: live from now on
      } catch (err) {
        if (refused(err)) deliveriesDenied = true;
        else if (err.status !== 404) throw err; // deleted meanwhile
      }
    }
    if (open !== null && deliveriesDenied) {
      deliveries = state.signedDeliveries && state.signedDeliveries.id === open ? state.signedDeliveries.deliveries : null;
    }
    state.deliveriesDenied = deliveriesDenied;
    const changed = JSON.stringify([list, deliveries, denied]) !== JSON.stringify([state.list, state.deliveries, state.denied]) || !state.drawn;
    state.denied = denied;
    state.list = list;
    state.open = deliveries ? open : null;
    state.deliveries = deliveries;
    if (changed && !state.creating) render();
  }

  /** The list read once under a wallet signature (one prompt), for a session the rules keep from reading it. */
  async function readSigned() {
    try {
      const auth = await ui.signedAuth("read your webhooks");
      state.signed = { list: await api.webhooks.list(auth), at: new Date().toISOString() };
      state.list = state.signed.list;
      ui.notify("");
      render();
    } catch (err) {
      ui.notify(`The webhooks could not be read: ${ui.explain(err)}`, "error");
    }
  }

  /** A change made here, applied to the signed copy (there is no live list to show it). */
  function patchSigned(change) {
    if (!state.denied || !state.signed) return;
    const list = { ...state.signed.list, webhooks: change([...(state.signed.list.webhooks || [])]) };
    state.signed = { ...state.signed, list };
    state.list = list;
  }

  function setStatus(id, status, reason) {
    patchSigned((hooks) => hooks.map((w) => (w.id === id ? { ...w, status, paused_reason: reason } : w)));
  }
  /** One change: `job(auth)` under ui.writeAuth(), then `patch(answer)` for a signed copy, `label(answer)` said. */
  async function act(what, label, job, patch = () => {}) {
    try {
      const answer = await job(await ui.writeAuth(what));
      patch(answer);
      ui.notify(label(answer));
      render();
      await refresh();
    } catch (err) {
      ui.notify(`${ui.explain(err)}`, "error");
    }
  }

  function render() {
    state.drawn = true;
    const parts = [];
    if (state.secret) {
      parts.push(h("div", { class: "warn" },
        h("p", {}, `Signing secret of webhook ${state.secret.id}, shown only this once: your receiver checks each delivery's X-Webhook-Signature with it.`),
        h("div", { class: "keyrow" },
          h("input", { id: "webhook-secret", class: "key", readonly: true, value: state.secret.secret, "aria-label": "Webhook signing secret" }),
          ui.copyButton(state.secret.secret, "Copy secret")),
        h("button", { type: "button", onclick: () => { state.secret = null; render(); } }, "I have saved it")));
    }
    if (state.denied) {
      parts.push(h("div", { class: "warn", id: "webhooks-refused" },
        h("p", {}, "Your access rules do not let this session read webhooks, so this card does not refresh on its own. "
          + "Your wallet can sign a read of them now; each change you make here is signed by your wallet too."),
        state.signed && h("p", { class: "small muted" }, `As read under your wallet's signature at ${when(state.signed.at)}, with your changes here since.`),
        h("button", { type: "button", id: "read-webhooks", onclick: readSigned }, state.signed ? "Read again (wallet signs)" : "Show webhooks (wallet signs)")));
    }
    if (!state.list) {
      if (!state.denied) parts.push(h("p", { class: "muted" }, "Open an account first (create an API key): then add webhooks here."));
      fill("webhooks", parts);
      return;
    }
    const hooks = state.list.webhooks || [];
    parts.push(hooks.length
      ? table("Your webhooks, newest first", ["Id", "Events", "URL", "Status", "Deliveries", "Last delivery", ""],
        hooks.map((w) => [
          String(w.id),
          describe(w),
          h("span", { class: "url" }, w.url),
          w.status === "paused" ? [h("strong", {}, "paused"), h("br"), h("span", { class: "small" }, w.paused_reason || "")] : w.status,
          `${num(w.deliveries.delivered)} delivered, ${num(w.deliveries.pending)} pending, ${num(w.deliveries.dead)} failed`,
          w.last_delivery ? lastDelivery(w.last_delivery) : "none yet",
          actions(w),
        ]), [])
      : h("p", {}, "No webhook yet."));
    if (state.open !== null && state.deliveries) parts.push(deliveriesPanel(state.open, state.deliveries.entries || []));
    parts.push(h("p", { class: "small muted" }, `${hooks.length} of ${state.list.max_webhooks} webhooks; transaction and signal deliveries cost credits (see Pricing).`));
    parts.push(state.creating ? form() : h("button", { type: "button", id: "add-webhook", onclick: () => { state.creating = true; render(); } }, "Add a webhook"));
    fill("webhooks", parts);
  }

  function describe(w) {
    if (w.filter_type === "lifecycle") return `lifecycle: ${w.lifecycle_events.join(", ")}`;
    if (w.filter_type === "signal") return `signals: ${w.signal_events.join(", ")}`;
    return `${w.filter_type}: ${w.filter_value}`;
  }

  function lastDelivery(d) {
    const answer = d.http_status ? `HTTP ${d.http_status}` : d.error || "";
    return [`${d.event_type}: ${d.status}`, answer && ` (${answer})`, h("br"), h("span", { class: "small" }, when(d.created_at))];
  }

  function deliveriesPanel(id, entries) {
    const title = `Recent deliveries of webhook ${id}`;
    return h("section", { id: "webhook-deliveries", "aria-label": title },
      h("h3", {}, title),
      entries.length
        ? table(`${title}, newest first`, ["Event", "Status", "Receiver's answer"],
          entries.map((d) => [
            [d.event_type, h("br"), h("span", { class: "small url" }, d.event_id), h("br"), h("span", { class: "small" }, when(d.created_at))],
            [h("strong", {}, d.status), h("br"), h("span", { class: "small" }, attemptsOf(d))],
            answerOf(d),
          ]))
        : h("p", {}, "No delivery yet."),
      h("p", { class: "small muted" }, `The newest ${DELIVERIES_SHOWN} events; the answer shown is the receiver's last one (its first 512 bytes).`
        + (state.deliveriesDenied && state.signedDeliveries ? ` Read under your wallet's signature at ${when(state.signedDeliveries.at)}; not refreshed on its own.` : "")));
  }

  function answerOf(d) {
    if (d.http_status === null || d.http_status === undefined) return d.error || (d.attempts ? "no answer" : "not sent yet");
    return [h("strong", {}, `HTTP ${d.http_status}`), d.response_excerpt ? [h("br"), h("code", { class: "url" }, d.response_excerpt)] : null];
  }

  function attemptsOf(d) {
    let made = d.attempts === 1 ? "1 attempt" : `${num(d.attempts)} attempts`;
    if (d.last_attempt_at && !d.delivered_at) made += `, the last ${when(d.last_attempt_at)}`;
    if (d.delivered_at) return `${made}; delivered ${when(d.delivered_at)}`;
    if (d.next_attempt_at) return `${made}; next ${when(d.next_attempt_at)}`;
    if (d.status === "pending") return `${made}; waits for a resume`;
    return made;
  }

  async function toggleDeliveries(id) {
    state.open = state.open === id ? null : id;
    state.deliveries = null;
    if (state.open === null) {
      render();
      return;
    }
    // Where the rules refuse the session the deliveries, one read under the wallet's signature, shown until closed.
    const readSigned = async () => {
      const auth = await ui.signedAuth("read this webhook's deliveries");
      const deliveries = await api.webhooks.deliveries(auth, id, DELIVERIES_SHOWN);
      state.signedDeliveries = { id, deliveries, at: new Date().toISOString() };
      state.open = id;
    };
    try {
      if (state.denied || state.deliveriesDenied) await readSigned();
      await refresh();
      if (state.deliveriesDenied && !(state.signedDeliveries && state.signedDeliveries.id === id)) {
        await readSigned(); // refused just now: the rules allow the list, not the deliveries
        await refresh();
      }
    } catch (err) {
      state.open = null;
      ui.notify(`The deliveries could not be read: ${ui.explain(err)}`, "error");
      render();
    }
  }

  function actions(w) {
    if (state.confirmDelete === w.id) {
      return h("div", { class: "row" },
        h("button", { type: "button", class: "danger", onclick: () => { state.confirmDelete = null; act("delete a webhook", (a) => `Webhook ${a.id} deleted.`, (auth) => api.webhooks.remove(auth, w.id), () => patchSigned((hooks) => hooks.filter((x) => x.id !== w.id))); } }, `Delete ${w.id}`),
        h("button", { type: "button", onclick: () => { state.confirmDelete = null; render(); } }, "Keep"));
    }
    return h("div", { class: "row" },
      h("button", { type: "button", "aria-expanded": state.open === w.id ? "true" : "false", "aria-controls": "webhook-deliveries", onclick: () => toggleDeliveries(w.id) }, state.open === w.id ? "Hide deliveries" : "Deliveries"),
      w.status === "paused"
        ? h("button", { type: "button", onclick: () => act("resume a webhook", (a) => `Webhook ${a.id} resumed.`, (auth) => api.webhooks.post(auth, w.id, "resume"), () => setStatus(w.id, "active", null)) }, "Resume")
        : h("button", { type: "button", onclick: () => act("pause a webhook", (a) => `Webhook ${a.id} paused: its deliveries wait until you resume it.`, (auth) => api.webhooks.post(auth, w.id, "pause"), () => setStatus(w.id, "paused", "paused by its owner")) }, "Pause"),
      h("button", { type: "button", onclick: () => act("replay a webhook's failed deliveries", (a) => `Webhook ${a.id}: ${num(a.replayed)} failed deliveries queued again.`, (auth) => api.webhooks.post(auth, w.id, "replay")) }, "Replay failed"),
      h("button", { type: "button", onclick: () => act("give a webhook a new secret", () => "New secret shown above.", async (auth) => { state.secret = { id: w.id, ...(await api.webhooks.post(auth, w.id, "rotate-secret")) }; return {}; }) }, "New secret"),
      h("button", { type: "button", "aria-label": `Delete webhook ${w.id}`, onclick: () => { state.confirmDelete = w.id; render(); } }, "Delete"));
  }

  function form() {
    const type = h("select", { id: "webhook-type" }, TYPES.map(([value, label]) => h("option", { value }, label)));
    const extra = h("div", {});
    const drawExtra = () => {
      const t = type.value;
      if (t === "account" || t === "program") {
        extra.replaceChildren(h("div", { class: "field" }, h("label", { for: "webhook-value" }, t === "account" ? "Address" : "Program id"),
          h("input", { id: "webhook-value", type: "text", spellcheck: "false", autocomplete: "off" })));
      } else if (t === "lifecycle") {
        const events = ui.lifecycleEvents();
        extra.replaceChildren(events
          ? h("fieldset", { class: "field" }, h("legend", {}, "Events"),
            events.map((e) => h("label", { class: "check" }, h("input", { type: "checkbox", name: "lifecycle", value: e, checked: true }), ` ${e}`)))
          : h("p", { class: "small muted" }, "The events are listed once the pricing has loaded: choose this again in a moment."));
      } else if (t === "signal") {
        extra.replaceChildren(h("div", { class: "field" }, h("label", { for: "webhook-signals" }, "Signal kinds (comma separated; empty: all)"),
          h("input", { id: "webhook-signals", type: "text", spellcheck: "false", autocomplete: "off" })));
      } else {
        extra.replaceChildren(h("p", { class: "small muted" }, "Transactions that touch your own wallet's address."));
      }
    };
    type.addEventListener("change", drawExtra);
    drawExtra();
    const url = h("input", { id: "webhook-url", type: "url", required: true, spellcheck: "false", autocomplete: "off", placeholder: "https://hooks.example.com/solana" });
    return h("form", { id: "webhook-form", onsubmit: (event) => { event.preventDefault(); create(url.value.trim(), type.value); } },
      h("div", { class: "field" }, h("label", { for: "webhook-url" }, "Receiver URL"), url),
      h("div", { class: "field" }, h("label", { for: "webhook-type" }, "What it receives"), type),
      extra,
      h("div", { class: "row" },
        h("button", { type: "submit", class: "primary", id: "create-webhook" }, "Create webhook"),
        h("button", { type: "button", onclick: () => { state.creating = false; render(); } }, "Cancel")));
  }

  async function create(url, filterType) {
    const body = { url, filter_type: filterType };
    if (filterType === "account" || filterType === "program") body.filter_value = document.getElementById("webhook-value").value.trim();
    if (filterType === "lifecycle") body.lifecycle_events = [...document.querySelectorAll("input[name=lifecycle]:checked")].map((i) => i.value);
    if (filterType === "signal") {
      body.signal_events = document.getElementById("webhook-signals").value.split(",").map((v) => v.trim()).filter(Boolean);
    }
    try {
      const created = await api.webhooks.create(await ui.writeAuth("create a webhook"), body);
      state.creating = false;
      state.secret = { id: created.id, secret: created.secret };
      const { secret: _shownOnce, ...listed } = created; // the signed copy keeps no secret
      patchSigned((hooks) => [listed, ...hooks]);
      ui.notify(`Webhook ${created.id} created.`);
      await refresh();
      render();
    } catch (err) {
      ui.notify(`The webhook was not created: ${ui.explain(err)}`, "error");
    }
  }

  function reset() {
    state.list = null;
    state.secret = null;
    state.creating = false;
    state.confirmDelete = null;
    state.drawn = false;
    state.open = null;
    state.deliveries = null;
    state.denied = false;
    state.signed = null;
    state.signedDeliveries = null;
    state.deliveriesDenied = false;
  }

  return { refresh, render, reset };
}
