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
    loadTrends(d);
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
    rows: el("tbody"),
    commands: el("ul", { class: "commands" }),
    alerts: el("ul", { class: "alerts" }),
    trends: el("div", { class: "trends" }),
  };
  ui.card = el(
    "article",
    { class: "device", dataset: { deviceId: id } },
    el("header", {}, ui.name, el("span", { class: "type" }, type), ui.badge),
    ui.meta,
    el("table", { class: "state" }, el("thead", {}, el("tr", {}, el("th"), el("th", {}, "reported"), el("th", {}, "desired"))), ui.rows),
    controls(d),
    ui.trends,
    ui.commands,
    ui.alerts,
  );
  return ui;
}

// Controls come from the device's type as GET /v1/device-types describes it (state keys, commands and
// their params as JSON schema): a command without params is a button, one with params a small form
// (the first form of a command that has several); this page names no device type of its own.
const deviceTypes = new Map(); // type name -> its schema

async function loadDeviceTypes() {
  const response = await fetch("/v1/device-types", { headers: auth() });
  if (!response.ok) throw new Error(`GET /v1/device-types answered ${response.status}`);
  for (const schema of (await response.json()).items) deviceTypes.set(schema.type, schema);
}

function paramInput(twin, name, schema, required) {
  const key = schema["x-state-key"] || name;
  const current = twin.desired[key] ?? twin.reported[key];
  if (schema.enum) {
    const input = el("select", { name }, ...(required ? [] : [el("option", { value: "" }, "")]),
      ...schema.enum.map((v) => el("option", { value: v }, v)));
    input.value = current ?? (required ? schema.enum[0] : "");
    return input;
  }
  const attrs = { type: schema.type === "string" ? "text" : "number", name };
  for (const [attr, field] of [["min", "minimum"], ["max", "maximum"], ["step", "multipleOf"]]) {
    if (schema[field] !== undefined) attrs[attr] = schema[field];
  }
  if (schema.type !== "string" && attrs.step === undefined) attrs.step = schema.type === "integer" ? 1 : "any";
  if (current !== undefined && current !== null) attrs.value = current;
  else if (required && schema.minimum !== undefined) attrs.value = schema.minimum;
  if (!required) attrs.placeholder = "optional";
  return el("input", attrs);
}

function commandControl(d, name, command) {
  const id = d.twin.device_id;
  const form = (command.params.oneOf || [command.params])[0];
  const names = Object.keys(form.properties || {});
  if (!names.length) {
    return el("button", { class: `command-${name}`, onclick: () => send(id, name, {}) }, command.label);
  }
  const required = new Set(form.required || []);
  const inputs = names.map((p) => [p, form.properties[p], paramInput(d.twin, p, form.properties[p], required.has(p))]);
  const submit = (event) => {
    event.preventDefault();
    const params = {};
    for (const [p, schema, input] of inputs) {
      if (input.value === "") continue; // an optional param left out
      params[p] = schema.type === "number" || schema.type === "integer" ? Number(input.value) : input.value;
    }
    send(id, name, params);
  };
  // A param's caption: its name without the unit it ends in (brightness_pct -> "brightness %").
  const units = { degC: "°C", pct: "%" };
  const caption = (p, schema) => {
    const unit = schema["x-unit"];
    if (!unit) return p.replaceAll("_", " ");
    return `${p.replace(/_[a-z]+$/, "").replaceAll("_", " ")} ${units[unit] || unit}`;
  };
  return el("form", { class: `command-${name}`, onsubmit: submit },
    ...inputs.map(([p, schema, input]) => el("label", {}, `${caption(p, schema)} `, input)),
    el("button", { type: "submit" }, command.label));
}

function controls(d) {
  const schema = deviceTypes.get(d.twin.type);
  const shown = Object.entries(schema?.commands || {}).filter(([, command]) => !command.admin);
  if (!shown.length) return el("div", { class: "controls muted" }, "no controls for this type");
  return el("div", { class: "controls" }, ...shown.map(([name, command]) => commandControl(d, name, command)));
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
  const keys = [...new Set([...Object.keys(twin.reported), ...Object.keys(twin.desired)])].sort();
  ui.rows.replaceChildren(
    ...keys.map((key) =>
      el(
        "tr",
        { class: key in twin.delta ? "delta" : "", dataset: { key } },
        el("th", {}, key),
        el("td", { class: "reported" }, show(twin.reported[key])),
        el("td", { class: "desired" }, key in twin.desired ? show(twin.desired[key]) : ""),
      ),
    ),
  );
}

const STEPS = ["pending", "accepted", "dispatched", "acknowledged", "converged"];

function commandSteps(c) {
  // Each status a command goes through, those it reached marked; a command that ended otherwise shows
  // how it ended in place of the rest.
  const reached = c.reached ?? -1;
  const ended = TERMINAL.has(c.status) && c.status !== "converged";
  const done = (i) => i <= reached;
  return el("span", { class: "steps" },
    ...STEPS.map((step, i) => el("span", { class: `step${done(i) ? " done" : ""}`, title: step }, "")),
    ended ? el("span", { class: "step end" }, "") : null);
}

function renderCommands(d) {
  d.ui.commands.replaceChildren(
    ...d.commands.slice(0, 5).map((c) =>
      el(
        "li",
        { class: "command", dataset: { commandId: c.id || "", status: c.status } },
        el("span", { class: "what" }, `${c.name} ${Object.values(c.params).join(" ")}`),
        commandSteps(c),
        el("span", { class: `status s-${c.status}` }, c.status),
        c.reason ? el("span", { class: "reason" }, c.reason) : null,
      ),
    ),
  );
}

// Trends: the device's 15-minute rollups of the last 24 hours (what the streaming job writes), one small
// chart per figure its type rolls up (GET /v1/device-types says which), refreshed every minute.
const TREND_HOURS = 24;

async function loadTrends(d) {
  const schema = deviceTypes.get(d.twin.type);
  if (!schema?.rollups?.length) return;
  const since = new Date(Date.now() - TREND_HOURS * 3600 * 1000).toISOString();
  const query = new URLSearchParams({ window: "15m", since, limit: "1000" });
  const response = await fetch(`/v1/devices/${encodeURIComponent(d.twin.device_id)}/rollups?${query}`, { headers: auth() })
    .catch(() => null);
  if (response?.ok) {
    const windows = (await response.json()).items;
    const series = schema.rollups.map((figure) => [figure, windows.flatMap((w) => {
      const value = w.value.metrics?.[figure]?.mean ?? w.value[figure];
      return typeof value === "number" && w.value.readings ? [[Date.parse(w.window_start), value]] : [];
    })]);
    d.ui.trends.replaceChildren(...series.filter(([, points]) => points.length).map(([figure, points]) => trendChart(figure, points)));
  }
  setTimeout(() => devices.get(d.twin.device_id) === d && loadTrends(d), 60000);
}

function trendChart(figure, points) {
  const W = 300, H = 44, end = Date.now(), start = end - TREND_HOURS * 3600 * 1000;
  const values = points.map(([, v]) => v);
  const low = Math.min(...values), high = Math.max(...values), span = high - low || 1;
  const x = (t) => ((t - start) / (end - start)) * W;
  const y = (v) => H - 3 - ((v - low) / span) * (H - 6);
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("class", "trend");
  const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
  line.setAttribute("points", points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(" "));
  svg.append(line);
  const last = values[values.length - 1];
  return el("figure", { class: "trend", dataset: { figure, points: String(points.length) } },
    el("figcaption", {}, `${figure.replaceAll("_", " ")} · 24 h · ${show(Math.round(last * 10) / 10)} (${show(Math.round(low * 10) / 10)} to ${show(Math.round(high * 10) / 10)})`), svg);
}

function renderAlerts(d) {
  d.ui.alerts.replaceChildren(
    ...d.alerts.slice(-3).map((a) =>
      el("li", { class: "alert" }, `⚠ ${a.metric} ${show(a.value)} (score ${Number(a.score).toFixed(1)}) ${ago(a.occurred_at)}`),
    ),
  );
}

// ----------------------------------------------------------------------------------------- commands

function rank(status) {
  return TERMINAL.has(status) || status === "error" ? 99 : PROGRESS.indexOf(status);
}

function advance(c, status, reason) {
  if (rank(status) <= rank(c.status)) return; // statuses never move back (events and polls may race)
  c.status = status;
  if (STEPS.includes(status)) c.reached = STEPS.indexOf(status);
  if (reason) c.reason = reason;
  const d = devices.get(c.deviceId);
  if (d) renderCommands(d);
}

function detailText(detail) {
  if (Array.isArray(detail)) return detail.map((e) => e.msg || JSON.stringify(e)).join("; ");
  return typeof detail === "string" ? detail : "";
}

async function send(deviceId, name, params) {
  const d = devices.get(deviceId);
  const c = { id: null, deviceId, name, params, status: "sending", reason: "" };
  d.commands.unshift(c);
  renderCommands(d);
  try {
    const response = await fetch(`${commandApi}/v1/devices/${encodeURIComponent(deviceId)}/commands`, {
      method: "POST",
      headers: { ...auth(), "Content-Type": "application/json" },
      body: JSON.stringify({ name, params }),
    });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) {
      advance(c, "error", `${response.status}: ${detailText(body.detail) || response.statusText}`);
      return;
    }
    c.id = body.command_id;
    commands.set(c.id, c);
    renderCommands(d);
    advance(c, body.status);
    follow(c);
  } catch (error) {
    advance(c, "error", `command API unreachable (${commandApi}): ${error.message}`);
  }
}

async function follow(c) {
  // The websocket's command events move the status; polling the query API covers a dropped connection.
  for (let i = 0; i < 120 && rank(c.status) < 99; i++) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const response = await fetch(`/v1/commands/${c.id}`, { headers: auth() }).catch(() => null);
    if (response?.ok) {
      const view = await response.json();
      advance(c, view.status, view.reason || "");
    }
  }
}

function onEvent(event) {
  if (event.type.startsWith("command.") && commands.has(event.correlation_id)) {
    const status = event.type.slice("command.".length);
    advance(commands.get(event.correlation_id), status === "requested" ? "pending" : status, event.payload?.reason);
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

// ------------------------------------------------------------------------------------------ session

let renewTimer = null;

async function openSession(presented) {
  const response = await fetch("/v1/session", { method: "POST", headers: { Authorization: `Bearer ${presented}` } });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = new Error(detailText(body.detail) || `POST /v1/session answered ${response.status}`);
    error.status = response.status;
    throw error;
  }
  token = body.token;
  sessionStorage.setItem(SESSION_KEY, token);
  clearTimeout(renewTimer);
  renewTimer = setTimeout(renew, body.renew_after_s * 1000);
}

async function renew() {
  try {
    await openSession(token);
  } catch (error) {
    if (error.status === 401) {
      sessionStorage.removeItem(SESSION_KEY);
      notice(`This page's session ended (${error.message}): open a new link (hearth token create --home <home> --link).`);
    } else {
      renewTimer = setTimeout(renew, RENEW_RETRY_MS);
    }
    return;
  }
  const old = socket;
  connect(); // the open websocket holds the old token, which ends: carry on with the new one
  if (old) old.close(1000, "renewed");
}

// ---------------------------------------------------------------------------------------- websocket

let retries = 0;
let socket = null; // the current websocket; a replaced one's late messages and close are ignored

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const me = new WebSocket(`${scheme}://${location.host}/v1/subscribe?token=${encodeURIComponent(token)}`);
  socket = me;
  let alertsLoaded = false;
  const heard = new Set(); // devices this connection has sent a snapshot or a change of
  me.onopen = () => {
    if (socket !== me) return;
    const request = { action: "subscribe" };
    if (homeParam) request.home_id = homeParam;
    if (devices.size) request.after = Object.fromEntries([...devices].map(([id, d]) => [id, d.twin.version]));
    me.send(JSON.stringify(request));
    retries = 0;
    $("conn").textContent = "live";
    $("conn").className = "conn live";
    notice("");
  };
  me.onmessage = (message) => {
    if (socket !== me) return;
    const m = JSON.parse(message.data);
    if (m.type === "snapshot" || m.type === "change") {
      const swapped = m.type === "snapshot" && heard.has(m.device_id);
      heard.add(m.device_id);
      touched.add(m.device_id);
      const d = deviceEntry(m.twin);
      d.twin = m.twin;
      renderTwin(d);
      if (m.event) onEvent(m.event);
      if (swapped) {
        if (!replacing) touched.clear(); // what came before this swap is in the rebuilt views
        touched.add(m.device_id);
        replaceDevices(homeParam || m.twin.home_id);
      }
      if (!alertsLoaded) {
        alertsLoaded = true;
        loadAlerts(m.twin.home_id);
      }
    } else if (m.type === "heartbeat") {
      $("beat").textContent = `heartbeat ${new Date(m.at).toLocaleTimeString()}`;
    } else if (m.type === "error") {
      notice(`${m.reason}: ${m.message}`);
    }
  };
  me.onclose = (event) => {
    if (socket !== me) return;
    const fatal = FATAL_CLOSES.has(event.code);
    $("conn").textContent = fatal ? `closed (${event.code})` : "reconnecting…";
    $("conn").className = "conn down";
    if (event.reason) notice(event.reason);
    if (fatal) clearTimeout(renewTimer);
    else setTimeout(() => socket === me && connect(), Math.min(10000, 500 * 2 ** retries++));
  };
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
}

if (homeParam) $("home").textContent = homeParam;
start();
setInterval(() => {
  for (const span of document.querySelectorAll(".last-seen")) span.textContent = ago(span.dataset.at);
}, 1000);
