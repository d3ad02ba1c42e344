// Hearth live page: what the panels share. The views the websocket does not carry (schedules and
// automations from the home journal, campaigns from the campaigns topic) are read again every few seconds
// by a poller, and at once (`soon`) when a device fact suggests they changed; a failed read is shown in
// the panel and retried at the next turn. Loaded before app.js (whose helpers el, auth and ago these call
// at run time).
"use strict";

// The page's session, as POST /v1/session answered it (app.js fills it): an admin page sees the admin
// controls and the campaign panel; `home` is the home the page shows.
const pageSession = { admin: false, home: "" };

function makePoller(load, everyMs) {
  let timer = null;
  let running = false;
  let again = false;
  async function turn() {
    clearTimeout(timer);
    if (running) {
      again = true; // one more pass once this one ends
      return;
    }
    running = true;
    try {
      await load();
    } catch (error) {
      console.warn(error);
    } finally {
      running = false;
      timer = setTimeout(turn, again ? 0 : everyMs);
      again = false;
    }
  }
  let soonTimer = null;
  return {
    start: turn,
    soon() {
      clearTimeout(soonTimer);
      soonTimer = setTimeout(turn, 400); // facts of one change come together: one read for them
    },
  };
}

async function readJson(path, what) {
  const response = await fetch(path, { headers: auth() });
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    throw new Error(`${what}: ${response.status} ${detailText(body.detail)}`.trim());
  }
  return response.json();
}

// An SVG element with its attributes (the charts draw with these).
function svgNode(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  return node;
}

// A stacked bar of counts: one segment per part, as wide as its share of `total`, with its count.
function countBar(parts, total) {
  return el("div", { class: "bar", title: parts.map(([label, , n]) => `${label} ${n}`).join(", ") },
    ...parts.filter(([, , n]) => n > 0).map(([label, cls, n]) =>
      el("span", { class: `seg ${cls}`, style: `flex-grow: ${n / Math.max(total, 1)}`, dataset: { part: cls } }, `${label} ${n}`)));
}
