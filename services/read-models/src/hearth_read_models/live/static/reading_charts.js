// Hearth live page: a chart per reading a device's type rolls up (its schema's keys with `telemetry`:
// a temperature, a battery), over the last 24 hours, from the first reading on. Two sources, one line:
// - recent readings: the device's latest state reports from its history (GET /v1/devices/{id}/events,
//   type device.state_reported, the last RECENT_FACTS facts by version: a range the views' primary key
//   reads directly, however long the history), each report holding the keys that changed;
// - the 15-minute rollups the streaming job writes (GET /v1/devices/{id}/rollups), for the time before
//   the oldest of those readings: a window's mean at its middle.
// So a chart draws from a device's first report, before any rollup window exists (the streaming job
// starts after the stack, and a lone window draws no line), and keeps its 24 hours once the readings
// fetched cover less. The twin's reported value now ends the line (the value holds until it changes).
// A reading never reported says "no readings yet" instead of an empty box. Read when the card appears,
// every minute, and soon after a state report while the chart has nothing. Loaded before app.js (el,
// auth, devices; device_types.js's helpers).
"use strict";

const CHART_HOURS = 24;
const CHART_EVERY_MS = 60000;
const CHART_MIN_MS = 1000; // a chart of a first reading and now spans at least this
const RECENT_FACTS = 1000;

function chartedKeys(type) {
  return Object.entries(deviceTypes.get(type)?.state || {}).filter(([, key]) => key.telemetry).map(([name]) => name);
}

function watchCharts(d) {
  const turn = async () => {
    if (devices.get(d.twin.device_id) !== d) return; // the device left the page
    clearTimeout(d.chartTimer);
    await loadCharts(d).catch((error) => console.warn(error));
    d.chartTimer = setTimeout(turn, CHART_EVERY_MS);
  };
  d.chartsSoon = () => {
    clearTimeout(d.chartTimer);
    d.chartTimer = setTimeout(turn, 400);
  };
  turn();
}

// A state report on the websocket: a chart that had nothing to draw is read again.
function chartsOnReport(d, event) {
  const empty = d.ui.trends.querySelector('figure.trend[data-points="0"]');
  if (empty && event.type === "device.state_reported") d.chartsSoon?.();
}

async function loadCharts(d) {
  const keys = chartedKeys(d.twin.type);
  if (!keys.length) return;
  const since = Date.now() - CHART_HOURS * 3600 * 1000;
  const [recent, windows] = await Promise.all([recentReadings(d.twin), rollupWindows(d.twin.device_id, since)]);
  const from = recent.length ? recent[0].t : Infinity; // rollups only before the oldest reading fetched
  d.ui.trends.replaceChildren(...keys.map((key) => {
    const points = [
      ...windows.filter((w) => w.end <= from && typeof w.value.metrics?.[key]?.mean === "number")
        .map((w) => [w.middle, w.value.metrics[key].mean]),
      ...recent.filter((r) => typeof r.reported[key] === "number").map((r) => [r.t, r.reported[key]]),
    ].filter(([t]) => t >= since);
    const now = d.twin.reported[key];
    if (typeof now === "number" && points.length) points.push([Date.now(), now]);
    else if (typeof now === "number") points.push([since, now], [Date.now(), now]); // unchanged all day
    return readingChart(d.twin.type, key, points);
  }));
}

async function recentReadings(twin) {
  const query = new URLSearchParams({
    type: "device.state_reported", after_version: String(Math.max(0, twin.version - RECENT_FACTS)), limit: String(RECENT_FACTS),
  });
  const response = await fetch(`/v1/devices/${encodeURIComponent(twin.device_id)}/events?${query}`, { headers: auth() });
  if (!response.ok) throw new Error(`GET events answered ${response.status}`);
  return (await response.json()).items
    .map((fact) => ({ t: Date.parse(fact.occurred_at), reported: fact.payload?.reported || {} }))
    .sort((a, b) => a.t - b.t);
}

async function rollupWindows(deviceId, since) {
  const query = new URLSearchParams({ window: "15m", since: new Date(since).toISOString(), limit: "1000" });
  const response = await fetch(`/v1/devices/${encodeURIComponent(deviceId)}/rollups?${query}`, { headers: auth() });
  if (!response.ok) throw new Error(`GET rollups answered ${response.status}`);
  return (await response.json()).items.filter((w) => w.value.readings).map((w) => {
    const start = Date.parse(w.window_start), end = Date.parse(w.value.window_end || w.window_start) || start;
    return { end, middle: (start + end) / 2, value: w.value };
  });
}

// The chart spans from its first point to now (at most CHART_HOURS): a device
// heard from for a minute gets a line across the box, not a dot at its right edge; a value that held
// is a line through the middle.
function readingChart(type, key, points) {
  const end = Date.now();
  const start = points.length ? Math.min(points[0][0], end - CHART_MIN_MS) : end - CHART_HOURS * 3600 * 1000;
  const caption = el("figcaption", {}, `${keyLabel(type, key)} · ${spanText(start, end)}`);
  const figure = el("figure", { class: "trend", dataset: { figure: key, points: String(points.length) } }, caption);
  if (!points.length) {
    figure.append(el("p", { class: "no-readings muted" }, "no readings yet"));
    return figure;
  }
  const W = 300, H = 44;
  const values = points.map(([, v]) => v);
  const low = Math.min(...values), high = Math.max(...values);
  const x = (t) => ((t - start) / (end - start)) * W;
  const y = (v) => (high === low ? H / 2 : H - 3 - ((v - low) / (high - low)) * (H - 6));
  const svg = svgNode("svg", { viewBox: `0 0 ${W} ${H}`, class: "trend" });
  svg.append(svgNode("polyline", { points: points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(" ") }));
  const [lastT, last] = points[points.length - 1];
  svg.append(svgNode("circle", { cx: x(lastT).toFixed(1), cy: y(last).toFixed(1), r: 2.5 }));
  const range = high === low ? "" : ` (${keyText(type, key, low)} to ${keyText(type, key, high)})`;
  caption.append(` · ${keyText(type, key, last)}${range}`);
  figure.append(svg);
  return figure;
}

// "24 h", "3 h", or for less than two hours the time it starts at ("since 14:05").
function spanText(start, end) {
  const hours = (end - start) / 3600000;
  if (hours >= 2) return `${Math.round(hours)} h`;
  return `since ${new Date(start).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", hourCycle: "h23" })}`;
}
