// Hearth live page: administration on a device's card. A quarantined device (its twin's `quarantine`:
// {reason, since}, set by device.quarantined and cleared by device.released, which reach the page as
// websocket changes like any fact) is marked with its reason and its ordinary controls (the lead's and
// the forms') are disabled: the device would reject them with `quarantined`. An admin page also gets the
// admin controls, which a quarantine leaves on: quarantine or release (the command API's POST/DELETE
// /v1/devices/{id}/quarantine) and the admin commands every type takes (GET /v1/device-types'
// admin_commands). Loaded before app.js, whose helpers (el, send, commandApi, auth, detailText, ago)
// these call at run time.
"use strict";

function adminControls(d, ui) {
  // ui: the card being built (d.ui is set once it is)
  if (!pageSession.admin) return null;
  const admin = Object.entries(adminCommands);
  ui.quarantineForm = el("form", { class: "quarantine-form", onsubmit: (event) => {
    event.preventDefault();
    setQuarantine(d, "POST", { reason: ui.quarantineReason.value || "quarantined from the live page" });
  } }, ui.quarantineReason = el("input", { name: "reason", placeholder: "reason", maxlength: "500" }),
  el("button", { type: "submit", class: "danger" }, "Quarantine"));
  ui.releaseButton = el("button", { class: "release", onclick: () => setQuarantine(d, "DELETE") }, "Release");
  ui.adminStatus = el("span", { class: "admin-status muted" });
  return el("div", { class: "admin-controls" }, el("span", { class: "muted" }, "admin"),
    ui.quarantineForm, ui.releaseButton, ...admin.map(([name, command]) => commandControl(d, name, command)),
    ui.adminStatus);
}

async function setQuarantine(d, method, body) {
  const id = d.twin.device_id;
  d.ui.adminStatus.textContent = method === "POST" ? "quarantining…" : "releasing…";
  try {
    const response = await fetch(`${commandApi}/v1/devices/${encodeURIComponent(id)}/quarantine`, {
      method,
      headers: { ...auth(), "Content-Type": "application/json" },
      body: body ? JSON.stringify(body) : undefined,
    });
    const answer = await response.json().catch(() => ({}));
    // The twin says when it is done (a websocket change); until then, what the command API answered.
    d.ui.adminStatus.textContent = response.ok ? "" : `${response.status}: ${detailText(answer.detail)}`;
  } catch (error) {
    d.ui.adminStatus.textContent = `command API unreachable (${commandApi}): ${error.message}`;
  }
}

function renderQuarantine(d) {
  const { twin, ui } = d;
  const q = twin.quarantine;
  ui.card.classList.toggle("quarantined", Boolean(q));
  ui.quarantine.hidden = !q;
  ui.quarantine.replaceChildren(...(q ? [
    el("strong", {}, "Quarantined"), ` · ${q.reason} · since `,
    el("time", { datetime: q.since, title: new Date(q.since).toLocaleString() }, ago(q.since)),
    " · commands are refused",
  ] : []));
  const why = q ? `quarantined: ${q.reason}` : "";
  for (const input of ui.card.querySelectorAll(".lead button, .lead input, .lead select, .controls button, .controls input, .controls select")) {
    input.disabled = Boolean(q);
    input.title = why;
  }
  if (ui.quarantineForm) {
    ui.quarantineForm.hidden = Boolean(q);
    ui.releaseButton.hidden = !q;
  }
}
