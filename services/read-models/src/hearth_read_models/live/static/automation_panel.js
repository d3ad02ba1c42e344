// Hearth live page: the home's automations, each with whether it is on (or suspended, and why), what
// triggers it, and its latest runs: the trigger fact, whether the conditions held, and each action with
// its status (a command's status from the commands view, a notification's delivery). From the query
// API's GET /v1/automations?home_id= and GET /v1/automations/{id}/runs, read every few seconds and soon
// after any command fact (a run's commands move on). Loaded before app.js (el, ago).
"use strict";

const AUTOMATIONS_EVERY_MS = 3000;
const RUNS_SHOWN = 3;
let automationPoller = null;

function watchAutomations(home) {
  automationPoller = makePoller(() => loadAutomations(home), AUTOMATIONS_EVERY_MS);
  automationPoller.start();
}

async function loadAutomations(home) {
  const panel = $("automations");
  const { automations } = await readJson(`/v1/automations?home_id=${encodeURIComponent(home)}`, "GET automations");
  const runs = await Promise.all(automations.map((a) =>
    readJson(`/v1/automations/${a.automation_id}/runs?limit=${RUNS_SHOWN}`, "GET runs").catch(() => ({ runs: [] }))));
  panel.hidden = automations.length === 0;
  $("automation-list").replaceChildren(...automations.map((a, i) => automationItem(a, runs[i].runs)));
}

function triggerText(trigger) {
  const given = (v) => v !== null && v !== undefined;
  if (trigger.fact) return `on ${trigger.fact}${trigger.device_id ? ` of ${trigger.device_id}` : ""}`;
  const days = trigger.time?.days || [];
  if (trigger.time) return `at ${trigger.time.at} ${days.length && days.length < 7 ? `on ${days.join(", ")}` : "every day"}`;
  const s = trigger.state || {};
  const tests = [["=", s.equals], ["≠", s.not_equals], [">", s.above], ["<", s.below]].filter(([, v]) => given(v));
  const held = given(s.for_s) ? ` for ${s.for_s} s` : "";
  return `when ${s.device_id} ${s.key} ${tests.map(([op, v]) => `${op} ${show(v)}`).join(" ")}${held}`;
}

function automationItem(a, runs) {
  const state = a.suspended ? "suspended" : a.enabled ? "on" : "off";
  return el("li", { class: "automation", dataset: { automationId: a.automation_id, state } },
    el("header", {},
      el("strong", {}, a.name),
      el("span", { class: `badge ${state === "on" ? "online" : "offline"}` }, state),
      el("span", { class: "muted" }, `${triggerText(a.trigger)} · ${a.mode}`)),
    a.suspended ? el("p", { class: "reason" }, `suspended: ${a.suspended}`) : null,
    runs.length
      ? el("ul", { class: "runs" }, ...runs.map(runItem))
      : el("p", { class: "muted" }, "no runs yet"));
}

function runItem(run) {
  const held = run.conditions.every(Boolean);
  const outcome = run.fired ? "fired" : held ? `not fired (${run.admission})` : "conditions not met";
  return el("li", { class: "run", dataset: { runId: run.run_id, fired: String(run.fired) } },
    el("span", { class: "when" }, ago(run.trigger.occurred_at)),
    el("span", { class: "what" }, `${run.trigger.type} of ${run.trigger.device_id} · ${outcome}`),
    ...run.actions.map((action) =>
      el("span", { class: "action", dataset: { kind: action.kind, status: action.status },
        title: action.skipped ? `skipped: ${show(action.skipped)}` : "" },
        action.kind === "command" ? `${action.name} → ${action.device_id} ` : "notify ",
        el("span", { class: `status s-${action.status}` }, action.status))));
}
