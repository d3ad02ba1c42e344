// Hearth live page: how a device is drawn from its type. GET /v1/device-types describes every type (state
// keys, commands and their params as JSON schema, the figures its rollups carry); this file turns that
// into a card's controls and trend charts, and draws a command's progress through its statuses, so the
// page names no device type of its own. Loaded before app.js, which uses these functions (and whose
// helpers el, show, auth, devices and TERMINAL these call at run time).
"use strict";

// Controls come from the device's type as GET /v1/device-types describes it (state keys, commands and
// their params as JSON schema): a command without params is a button, one with params a small form
// (the first form of a command that has several); this page names no device type of its own.
const deviceTypes = new Map(); // type name -> its schema
let adminCommands = {}; // the admin commands every type takes (drawn on admin pages only)

async function loadDeviceTypes() {
  const response = await fetch("/v1/device-types", { headers: auth() });
  if (!response.ok) throw new Error(`GET /v1/device-types answered ${response.status}`);
  const body = await response.json();
  for (const schema of body.items) deviceTypes.set(schema.type, schema);
  adminCommands = body.admin_commands || {};
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
