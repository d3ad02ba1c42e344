// Hearth live page: a home's device twins, live over WS /v1/subscribe (resuming with `after` when the
// connection comes back), and controls that send commands to the command API and follow their status.
// A `snapshot` for a device this connection has already heard of means a rebuild swapped in new views:
// the page then replaces its device list with theirs (GET /v1/devices), while changes keep coming.
//
// URL parameters: token (the single-use link token `hearth up` prints, or a home token, or an admin token
// with home), home, api (the command API's base URL; default: this host, port 8000).
//
// Tokens: the page takes `token` out of the address bar at once (history.replaceState), trades it once
// for a short-lived page token (POST /v1/session), and renews that before it ends while the page is open
// (then moves the websocket to the new token, resuming with `after`). The page token is kept in this tab's
// sessionStorage, so a reload goes on with it; no long-lived token stays in the URL or the history.
//
// A card is drawn from its device's type (GET /v1/device-types, device_types.js): it leads with the keys
// and controls the type declares as primary (card_lead.js), then lists its other keys with their labels
// and units, then its schedule and suggested program, charts of its readings and its runtime.
//
// The session and the websocket are in live_socket.js, sending and following a command in
// command_sender.js; the panels in their own files (index.html loads them all before this one).
"use strict";

const params = new URLSearchParams(location.search);
const given = params.get("token") || "";
const homeParam = params.get("home");
const commandApi = (params.get("api") || `${location.protocol}//${location.hostname}:8000`).replace(/\/$/, "");
if (given) {
  params.delete("token");
  const query = params.toString();
  history.replaceState(history.state, "", `${location.pathname}${query ? `?${query}` : ""}${location.hash}`);
}
const SESSION_KEY = "hearth.pageToken";
let token = ""; // the page token
const auth = () => ({ Authorization: `Bearer ${token}` });

const TERMINAL = new Set(["converged", "failed", "rejected", "expired", "superseded"]);
const PROGRESS = ["sending", "pending", "accepted", "dispatched", "acknowledged"];
const FATAL_CLOSES = new Set([4400, 4401, 4403]); // retrying would not help
const RENEW_RETRY_MS = 10000; // a renewal that failed for the network is tried again this much later

const devices = new Map(); // device_id -> {twin, ui, commands: [], alerts: []}
const commands = new Map(); // command_id -> a command entry (also in its device's list)

const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value);
  }
  node.append(...children.filter((c) => c !== null && c !== undefined));
  return node;
}

function show(value) {
  if (value === null || value === undefined) return "—";
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

function ago(iso) {
  if (!iso) return "never";
  const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  return new Date(iso).toLocaleString();
}

function notice(text) {
  $("notice").textContent = text;
  $("notice").hidden = !text;
}

// ------------------------------------------------------------------------------------------ devices

function deviceEntry(twin) {
  let d = devices.get(twin.device_id);
  if (!d) {
    d = { twin, commands: [], alerts: [] };
    d.ui = buildCard(d);
    devices.set(twin.device_id, d);
    watchCharts(d);
    schedulePoller?.soon(); // its schedule, if it has one
    suggestionPoller?.soon(); // its suggested program, if one is open
    runtimePoller?.soon(); // its runtime chart, if the batch reported it
    const after = [...devices.keys()].sort().find((id) => id > twin.device_id);
    $("devices").insertBefore(d.ui.card, after ? devices.get(after).ui.card : null);
    $("empty").hidden = true;
    if (!homeParam) $("home").textContent = twin.home_id;
  }
  return d;
}

function removeDevice(id) {
  devices.get(id).ui.card.remove();
  devices.delete(id);
  $("empty").hidden = devices.size > 0;
}

async function listDevices(home) {
  const twins = [];
  let after = "";
  do {
    const query = new URLSearchParams({ home_id: home, limit: "1000", after });
    const response = await fetch(`/v1/devices?${query}`, { headers: auth() });
    if (!response.ok) throw new Error(`GET /v1/devices answered ${response.status}`);
    const page = await response.json();
    twins.push(...page.items);
    after = page.next_after || "";
  } while (after);
  return twins;
}

// After a swap: the rebuilt views' device list replaces the page's. Devices the websocket has spoken of
// since the swap's snapshot (`touched`) keep what it said: it is as new as the list, or newer.
const touched = new Set();
let replacing = false;
let replaceAgain = false;

async function replaceDevices(home) {
  if (replacing) {
    replaceAgain = true; // a swap's snapshots come one per changed twin: one more pass covers them all
    return;
  }
  replacing = true;
  try {
    do {
      replaceAgain = false;
      const twins = await listDevices(home);
      for (const twin of twins) {
        const d = deviceEntry(twin);
        if (!touched.has(twin.device_id) && twin.version >= d.twin.version) {
          d.twin = twin;
          renderTwin(d);
        }
      }
      const listed = new Set(twins.map((twin) => twin.device_id));
      for (const id of [...devices.keys()]) if (!listed.has(id) && !touched.has(id)) removeDevice(id);
    } while (replaceAgain);
    touched.clear();
  } catch (error) {
    notice(`The views were rebuilt but the new device list could not be read: ${error.message}`);
  } finally {
    replacing = false;
  }
}

function buildCard(d) {
  const { device_id: id, type } = d.twin;
  const ui = {
    name: el("h2"),
    badge: el("span", { class: "badge" }),
    meta: el("p", { class: "meta" }),
    lead: buildLead(d),
    rows: el("tbody"),
    commands: el("ul", { class: "commands" }),
    alerts: el("ul", { class: "alerts" }),
    trends: el("div", { class: "trends" }),
    quarantine: el("p", { class: "quarantine", hidden: "" }),
    schedule: el("section", { class: "schedule", hidden: "" }),
    suggestion: el("section", { class: "suggestion", hidden: "" }),
    runtime: el("section", { class: "runtime", hidden: "" }),
  };
  ui.others = el("table", { class: "state" },
    el("thead", {}, el("tr", {}, el("th"), el("th", {}, "now"), el("th", {}, "asked"))), ui.rows);
  ui.card = el(
    "article",
    { class: "device", dataset: { deviceId: id, type } },
    el("header", {}, ui.name, el("span", { class: "type" }, typeLabel(type)), ui.badge),
    ui.quarantine,
    ui.lead.node,
    ui.commands,
    ui.alerts,
    el("div", { class: "programs" }, ui.schedule, ui.suggestion),
    ui.trends,
    ui.runtime,
    ui.others,
    controls(d),
    adminControls(d, ui),
    ui.meta,
  );
  return ui;
}

// The keys a card lists after its lead: the type's declared keys in their order, then any other the
// device reported, without those the lead shows.
function otherKeys(twin, lead) {
  const declared = Object.keys(deviceTypes.get(twin.type)?.state || {});
  const present = new Set([...Object.keys(twin.reported), ...Object.keys(twin.desired)]);
  const known = declared.filter((key) => present.has(key));
  const unknown = [...present].filter((key) => !declared.includes(key)).sort();
  return [...known, ...unknown].filter((key) => !lead.keys.has(key));
}

function renderTwin(d) {
  const { twin, ui } = d;
  const online = twin.connectivity?.online;
  ui.name.textContent = twin.name;
  ui.badge.textContent = online ? "online" : "offline";
  ui.badge.className = `badge ${online ? "online" : "offline"}`;
  ui.meta.replaceChildren(
    `${twin.device_id} · v${twin.version}${twin.firmware_version ? ` · firmware ${twin.firmware_version}` : ""} · last seen `,
    el("span", { class: "last-seen", dataset: { at: twin.connectivity?.last_seen || "" } }, ago(twin.connectivity?.last_seen)),
  );
  ui.lead.render(twin);
  const keys = otherKeys(twin, ui.lead);
  ui.others.hidden = !keys.length;
  ui.rows.replaceChildren(
    ...keys.map((key) =>
      el(
        "tr",
        { class: key in twin.delta ? "delta" : "", dataset: { key } },
        el("th", {}, keyLabel(twin.type, key)),
        el("td", { class: "reported" }, keyText(twin.type, key, twin.reported[key])),
        el("td", { class: "desired" }, key in twin.desired ? keyText(twin.type, key, twin.desired[key]) : ""),
      ),
    ),
  );
  renderQuarantine(d);
}

function renderCommands(d) {
  d.ui.commands.replaceChildren(
    ...d.commands.slice(0, 5).map((c) =>
      el(
        "li",
        { class: "command", dataset: { commandId: c.id || "", status: c.status } },
        el("span", { class: "what" }, commandPhrase(d.twin.type, c)),
        commandSteps(c),
        el("span", { class: `status s-${c.status}` }, c.status),
        c.reason ? el("span", { class: "reason" }, c.reason) : null,
      ),
    ),
  );
}

function renderAlerts(d) {
  d.ui.alerts.replaceChildren(
    ...d.alerts.slice(-3).map((a) =>
      el("li", { class: "alert" }, `⚠ ${keyLabel(d.twin.type, a.metric)} ${keyText(d.twin.type, a.metric, a.value)} ` +
        `(score ${Number(a.score).toFixed(1)}) ${ago(a.occurred_at)}`),
    ),
  );
}

function onEvent(event) {
  if (event.type.startsWith("command.")) {
    schedulePoller?.soon(); // a person's command may hold a schedule
    automationPoller?.soon(); // a run's commands move on
  }
  if (event.type.startsWith("command.") && commands.has(event.correlation_id)) {
    const status = event.type.slice("command.".length);
    advance(commands.get(event.correlation_id), status === "requested" ? "pending" : status, event.payload?.reason);
  } else if (event.type === "device.state_reported" && devices.has(event.device_id)) {
    chartsOnReport(devices.get(event.device_id), event);
  } else if (event.type === "anomaly.detected") {
    const d = devices.get(event.device_id);
    d.alerts.push({ ...event.payload, occurred_at: event.occurred_at });
    renderAlerts(d);
  }
}

async function loadAlerts(home) {
  const response = await fetch(`/v1/alerts?home_id=${encodeURIComponent(home)}`, { headers: auth() }).catch(() => null);
  if (!response?.ok) {
    $("alerts-status").textContent = response?.status === 404 ? "Alerts are not available here yet." : "";
    return;
  }
  const body = await response.json();
  for (const alert of body.items ?? body) {
    const d = devices.get(alert.device_id);
    if (d && !d.alerts.some((a) => a.event_id === alert.event_id)) {
      d.alerts.push(alert);
      renderAlerts(d);
    }
  }
}

async function start() {
  const presented = given || sessionStorage.getItem(SESSION_KEY) || "";
  if (!presented) {
    notice("Open this page with the link `hearth up` prints (or: hearth token create --home <home> --link).");
    return;
  }
  try {
    await openSession(presented);
  } catch (error) {
    sessionStorage.removeItem(SESSION_KEY);
    $("conn").textContent = "closed";
    $("conn").className = "conn down";
    notice(`This page link cannot be used (${error.message}): make another with hearth token create --home <home> --link.`);
    return;
  }
  await loadDeviceTypes().catch((error) => notice(`The device types could not be read, so no controls: ${error.message}`));
  connect();
  if (pageSession.home) {
    watchSchedules(pageSession.home);
    watchSuggestions(pageSession.home);
    watchAutomations(pageSession.home);
    watchRuntime(pageSession.home);
  }
  if (pageSession.admin) watchCampaigns();
}

if (homeParam) $("home").textContent = homeParam;
start();
setInterval(() => {
  for (const span of document.querySelectorAll(".last-seen")) span.textContent = ago(span.dataset.at);
}, 1000);
