// Hearth live page, admin pages only: the firmware campaigns, newest first, each with its status and,
// per wave, its devices' jobs as a bar (succeeded, failed, in progress, queued) that moves as the
// campaign driver records its steps. From the query API's GET /v1/campaigns (the campaigns topic folded
// by each query-API process: see campaign_views.py), read every 2 s. Loaded before app.js (el, ago).
"use strict";

const CAMPAIGNS_EVERY_MS = 2000;

// How a job's states are grouped into the bar's parts (JOB_STATES in hearth_shared.campaign_events).
const JOB_PARTS = [
  ["succeeded", "ok", ["succeeded"]],
  ["failed", "bad", ["failed", "timed_out"]],
  ["rolled back", "warn", ["rolled_back"]],
  ["in progress", "busy", ["sent", "in_progress"]],
  ["queued", "idle", ["queued"]],
];

function watchCampaigns() {
  makePoller(loadCampaigns, CAMPAIGNS_EVERY_MS).start();
}

async function loadCampaigns() {
  const { campaigns } = await readJson("/v1/campaigns?limit=5", "GET campaigns");
  $("campaigns").hidden = campaigns.length === 0;
  $("campaign-list").replaceChildren(...campaigns.map(campaignItem));
}

function jobParts(jobs) {
  return JOB_PARTS.map(([label, cls, states]) => [label, cls, states.reduce((n, s) => n + (jobs[s] || 0), 0)]);
}

function campaignItem(c) {
  const wave = c.current_wave >= 0 ? `wave ${c.current_wave + 1} of ${c.waves.length}` : "starting";
  return el("li", { class: "campaign", dataset: { campaignId: c.campaign_id, status: c.status } },
    el("header", {},
      el("strong", {}, `${c.device_type} firmware ${c.version}`),
      el("span", { class: `status s-${c.status}` }, c.status),
      el("span", { class: "muted" }, `${c.status === "running" ? wave : `ended ${ago(c.ended_at)}`} · started ${ago(c.started_at)}`)),
    c.abort ? el("p", { class: "reason" }, `aborted: ${c.abort.reason}`) : null,
    el("ol", { class: "waves" }, ...c.waves.map(waveItem)));
}

function waveItem(w) {
  const parts = jobParts(w.jobs);
  const counts = Object.fromEntries(parts.map(([, cls, n]) => [cls, String(n)]));
  return el("li", { class: "wave", dataset: { wave: String(w.wave), state: w.state, ...counts } },
    el("span", { class: "label" }, `wave ${w.wave + 1} · ${w.percent} % · ${w.size} devices · ${w.state}`),
    countBar(parts, w.size));
}
