// Hearth live page: a device's open suggested program (`hearth analytics learn` learns it from the
// household's own changes at the device), beside its current program, with what it was learned from and
// Accept and Reject: the command API's POST /v1/devices/{id}/schedule/suggestions/{id}/accept|reject,
// since nothing changes a schedule without one. From the query API's GET
// /v1/homes/{home}/schedule/suggestions (the open ones), read every ten seconds (the learner runs far
// less often) and at once after a decision; an accepted program then shows in the schedule
// (schedule_view.js) as soon as the home journal's fold has it. Loaded before app.js (el, devices,
// commandApi, auth, detailText; readJson and makePoller from page_poller.js, programList from
// schedule_view.js).
"use strict";

const SUGGESTIONS_EVERY_MS = 10000;
let suggestionPoller = null;

function watchSuggestions(home) {
  suggestionPoller = makePoller(() => loadSuggestions(home), SUGGESTIONS_EVERY_MS);
  suggestionPoller.start();
}

async function loadSuggestions(home) {
  const body = await readJson(`/v1/homes/${encodeURIComponent(home)}/schedule/suggestions`, "GET suggestions");
  const byDevice = new Map(body.suggestions.map((s) => [s.device_id, s]));
  for (const d of devices.values()) renderSuggestion(d, byDevice.get(d.twin.device_id));
}

function renderSuggestion(d, suggestion) {
  const box = d.ui.suggestion;
  box.hidden = !suggestion;
  if (!suggestion) {
    box.replaceChildren();
    delete box.dataset.suggestionId;
    return;
  }
  if (box.dataset.suggestionId === suggestion.suggestion_id) return; // as drawn (keeps a decision's status)
  box.dataset.suggestionId = suggestion.suggestion_id;
  const { weeks, changes, regularity, entries = [] } = suggestion.evidence;
  const titles = entries.map((e) => `seen in ${e.weeks_seen} weeks, ${e.changes} changes, within ±${Math.round(e.spread_min)} min`);
  const status = el("span", { class: "decision muted" });
  box.replaceChildren(
    el("h3", {}, "Suggested program"),
    el("p", { class: "evidence muted" },
      `Learned from ${changes} changes you made over ${weeks} weeks (${Math.round(regularity * 100)} % regular)`),
    programList(d, suggestion.program, titles),
    el("p", { class: "decide" },
      el("button", { class: "accept", onclick: () => decideSuggestion(d, suggestion, "accept", status) }, "Accept"), " ",
      el("button", { class: "reject quiet", onclick: () => decideSuggestion(d, suggestion, "reject", status) }, "Reject"), " ",
      status));
}

async function decideSuggestion(d, suggestion, decision, status) {
  const path = `/v1/devices/${encodeURIComponent(d.twin.device_id)}/schedule/suggestions/` +
    `${encodeURIComponent(suggestion.suggestion_id)}/${decision}`;
  status.textContent = decision === "accept" ? "accepting…" : "rejecting…";
  try {
    const response = await fetch(`${commandApi}${path}`, { method: "POST", headers: auth() });
    const body = await response.json().catch(() => ({}));
    status.textContent = response.ok ? `${decision}ed` : `${response.status}: ${detailText(body.detail)}`;
  } catch (error) {
    status.textContent = `command API unreachable (${commandApi}): ${error.message}`;
  }
  suggestionPoller?.soon();
  schedulePoller?.soon();
}
