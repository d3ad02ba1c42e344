// Hearth live page: the runtime report (issue 22 point 4) as charts, in a panel for the home and under
// each device's card that has one: heating (and cooling) minutes per day of the home as bars, heating
// degree-days as a line on their own scale. From the query API's GET /v1/homes/{home}/runtime, which
// serves what the Spark batch `hearth analytics runtime` last published; read at start, when a device
// appears, and every ten minutes (the batch runs far less often). Loaded before app.js (el, $, devices,
// auth; readJson, makePoller and svgNode from page_poller.js).
"use strict";

const RUNTIME_DAYS = 14;
const RUNTIME_EVERY_MS = 600000;
let runtimePoller = null;

function watchRuntime(home) {
  runtimePoller = makePoller(() => loadRuntime(home), RUNTIME_EVERY_MS);
  runtimePoller.start();
}

async function loadRuntime(home) {
  const to = new Date();
  const from = new Date(to.getTime() - (RUNTIME_DAYS - 1) * 86400000);
  const query = new URLSearchParams({ from: from.toISOString().slice(0, 10), to: to.toISOString().slice(0, 10) });
  const body = await readJson(`/v1/homes/${encodeURIComponent(home)}/runtime?${query}`, "GET runtime");
  const slots = daySlots(body.from, body.to);
  const panel = $("runtime");
  panel.hidden = !body.days.length;
  $("runtime-chart").replaceChildren(...(body.days.length ? [runtimeChart(slots, body.days, "home")] : []));
  const byDevice = new Map();
  for (const item of body.items) {
    if (!byDevice.has(item.device_id)) byDevice.set(item.device_id, []);
    byDevice.get(item.device_id).push(item);
  }
  for (const d of devices.values()) {
    const days = byDevice.get(d.twin.device_id) || [];
    d.ui.runtime.hidden = !days.length;
    d.ui.runtime.replaceChildren(...(days.length ? [runtimeChart(slots, days, "device")] : []));
  }
}

function daySlots(from, to) {
  // every local date from `from` to `to` (YYYY-MM-DD, both included), as the API names days
  const slots = [];
  for (let t = Date.parse(`${from}T00:00:00Z`); t <= Date.parse(`${to}T00:00:00Z`); t += 86400000) {
    slots.push(new Date(t).toISOString().slice(0, 10));
  }
  return slots;
}

function runtimeChart(slots, days, scope) {
  // bars: heating minutes (cooling on top); line: degree-days, scaled to its own maximum
  const W = 300, H = 80, top = 6, slot = W / slots.length;
  const byDay = new Map(days.map((day) => [day.day, day]));
  const minutes = (day) => (day?.heating_min ?? 0) + (day?.cooling_min ?? 0);
  const most = Math.max(60, ...days.map(minutes));
  const mostHdd = Math.max(1, ...days.map((day) => day.hdd ?? 0));
  const y = (value, scale) => H - (value / scale) * (H - top);
  // stretched to the box's width (the line keeps its stroke: vector-effect in style.css)
  const svg = svgNode("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", class: "runtime-chart" });
  const points = [];
  slots.forEach((name, i) => {
    const day = byDay.get(name);
    if (!day) return;
    const x = i * slot + slot * 0.15, width = slot * 0.7;
    const heating = svgNode("rect", { class: "heating", x, width, y: y(day.heating_min, most), height: H - y(day.heating_min, most) });
    heating.dataset.day = name;
    heating.dataset.minutes = String(day.heating_min);
    const title = svgNode("title", {});
    title.textContent = `${name}: heating ${Math.round(day.heating_min)} min, cooling ${Math.round(day.cooling_min)} min, ` +
      `${day.hdd ?? "—"} degree-days, ${day.manual_changes} manual changes` +
      `${day.hold_min ? `, held ${Math.round(day.hold_min)} min` : ""}${day.away_min ? `, away ${Math.round(day.away_min / 60)} h` : ""}`;
    heating.append(title);
    svg.append(heating);
    if (day.cooling_min) {
      svg.append(svgNode("rect", { class: "cooling", x, width, y: y(minutes(day), most), height: y(day.heating_min, most) - y(minutes(day), most) }));
    }
    if (day.hdd !== null && day.hdd !== undefined) points.push([i * slot + slot / 2, y(day.hdd, mostHdd), day.hdd]);
  });
  const line = svgNode("polyline", { class: "hdd", points: points.map(([x, py]) => `${x.toFixed(1)},${py.toFixed(1)}`).join(" ") });
  line.dataset.points = String(points.length);
  svg.append(line);
  const heatingH = days.reduce((sum, day) => sum + day.heating_min, 0) / 60;
  const hdd = days.reduce((sum, day) => sum + (day.hdd ?? 0), 0);
  const changes = days.reduce((sum, day) => sum + day.manual_changes, 0);
  const caption = `Runtime · ${slots.length} days · heating ${heatingH.toFixed(1)} h · ${Math.round(hdd)} degree-days (base 18 °C) · ` +
    `${changes} manual changes`;
  return el("figure", { class: "runtime", dataset: { scope, days: String(days.length) } },
    el("figcaption", {}, caption), svg,
    el("p", { class: "axis muted" }, el("span", {}, slots[0].slice(5)), el("span", {}, slots[slots.length - 1].slice(5))),
    el("p", { class: "legend muted" }, el("span", { class: "key heating" }, ""), " heating min/day ",
      el("span", { class: "key hdd" }, ""), ` degree-days (peak ${mostHdd.toFixed(1)})`));
}
