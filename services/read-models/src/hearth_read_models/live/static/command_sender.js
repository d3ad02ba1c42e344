// Hearth live page: a command sent from a card's controls (POST to the command API) and followed to a
// terminal status: the websocket's command events move it on (app.js's onEvent calls advance), and a poll
// of GET /v1/commands/{id} covers a dropped connection. Statuses only move forward. Loaded before app.js
// (uses its devices, commands, auth, commandApi and device_view.js's renderCommands at run time).
"use strict";

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
