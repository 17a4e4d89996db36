// The sessions card: the account's live sessions (GET /account/sessions: owner or ordinary, created, last
// used, the origin and user agent they were made from, never a token), each one ended on its own, or all of
// them at once ("Sign out everywhere"), under `ui.writeAuth()`: an owner session's token, else a wallet
// signature (docs/api.md, Sessions). The origin and user agent are whatever the client sent: shown as text.

import * as api from "./api.js";
import { h, fill, when, table } from "./dom.js";

/**
 * `ui` gives: session(), owner(), writeAuth(what) (a promise of an api auth function), notify(text, kind),
 * explain(err), signedOutEverywhere(ended) (this page's own session was among those ended).
 */
export function sessionsCard(ui) {
  const state = { doc: null, drawn: false, served: true, confirmAll: false, busy: false };

  async function refresh() {
    const session = ui.session();
    if (!session) return;
    let doc = null;
    let served = true;
    try {
      doc = await api.sessions.list(session);
    } catch (err) {
      if (err.status !== 404) throw err;
      served = false; // a gateway without the route
    }
    if (ui.session() !== session) return;
    const changed = JSON.stringify([doc, served]) !== JSON.stringify([state.doc, state.served]) || !state.drawn;
    state.doc = doc;
    state.served = served;
    if (changed) render();
  }

  function render() {
    state.drawn = true;
    if (!state.served || !state.doc) {
      fill("sessions", h("p", { class: "muted" }, "Sessions are not listed by this gateway."));
      return;
    }
    const list = state.doc.sessions || [];
    const rows = list.map((s) => [
      h("code", { class: "small" }, String(s.id)),
      s.owner ? [h("span", { class: "nowrap" }, "owner"), h("br"), h("span", { class: "small" }, "signed in for this site")] : h("span", { class: "nowrap" }, "ordinary"),
      when(s.created_at),
      s.last_used_at ? when(s.last_used_at) : "not yet",
      h("span", { class: "url" }, s.origin || "none sent"),
      h("span", { class: "small url" }, s.user_agent || "none sent"),
      s.current
        ? h("strong", { class: "nowrap" }, "this one")
        : h("button", { type: "button", "aria-label": `End session ${s.id}`, disabled: state.busy, onclick: () => end(s.id) }, "End"),
    ]);
    const everywhere = ui.owner()
      ? "Ends every session of this account but this page's own owner session."
      : "Ends every session of this account, this page's included: you sign in again after.";
    fill("sessions",
      list.length
        ? table("Live sessions, newest first", ["Session", "Kind", "Created", "Last used", "Origin", "User agent", ""], rows)
        : h("p", {}, "No live session."),
      h("p", { class: "small muted" },
        `${list.length} of at most ${state.doc.max_sessions} live sessions; past that the oldest ordinary one ends. `
        + (ui.owner() ? "Ending one needs nothing more: this is an owner session." : "Ending one is signed by your wallet.")),
      state.confirmAll
        ? h("div", { class: "row" },
          h("p", { class: "warn" }, everywhere),
          h("button", { type: "button", class: "danger", id: "confirm-everywhere", disabled: state.busy, onclick: endAll }, "Sign out everywhere now"),
          h("button", { type: "button", onclick: () => { state.confirmAll = false; render(); } }, "Cancel"))
        : h("button", { type: "button", id: "sign-out-everywhere", onclick: () => { state.confirmAll = true; render(); } }, "Sign out everywhere"));
  }

  async function end(id) {
    if (state.busy) return;
    state.busy = true;
    try {
      const answer = await api.sessions.end(await ui.writeAuth("end a session"), id);
      ui.notify(answer.ended ? `Session ${id} ended: its token is refused and its sockets closed.` : `Session ${id} had already ended.`);
    } catch (err) {
      ui.notify(`The session was not ended: ${ui.explain(err)}`, "error");
    } finally {
      state.busy = false;
    }
    await refresh().catch(() => {});
  }

  async function endAll() {
    if (state.busy) return;
    state.busy = true;
    const owner = ui.owner();
    try {
      const answer = await api.sessions.endAll(await ui.writeAuth("sign out everywhere"));
      state.confirmAll = false;
      if (!owner) {
        ui.signedOutEverywhere(answer.ended); // a wallet signature ended this page's ordinary session too
        return;
      }
      ui.notify(`Signed out everywhere: ${answer.ended} session${answer.ended === 1 ? "" : "s"} ended; this page's owner session stays.`);
    } catch (err) {
      ui.notify(`Nothing was ended: ${ui.explain(err)}`, "error");
    } finally {
      state.busy = false;
    }
    if (ui.session()) {
      render();
      await refresh().catch(() => {});
    }
  }

  function reset() {
    state.doc = null;
    state.drawn = false;
    state.served = true;
    state.confirmAll = false;
    state.busy = false;
  }

  return { refresh, render, reset };
}
