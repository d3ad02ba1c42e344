// Hearth live page: every command of a device's type as a form, and a command's progress through its
// statuses. GET /v1/device-types describes each command's params as JSON schema (device_types.js): a
// command without params is a button, one with params a small form of labelled inputs (the first form
// of a command that has several). The card leads with its type's primary controls (card_lead.js); these
// forms follow under "More controls", for what those do not cover (a low/high pair, a transition time).
// Loaded before app.js (whose helpers el, send, TERMINAL these call at run time).
"use strict";

function paramInput(twin, name, schema, required) {
  const key = schema["x-state-key"] || name;
  const current = twin.desired[key] ?? twin.reported[key];
  if (schema.enum) {
    const input = el("select", { name }, ...(required ? [] : [el("option", { value: "" }, "")]),
      ...schema.enum.map((v) => el("option", { value: v }, valueText(schema, v))));
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
  // A param's caption: its label and its unit's symbol ("Brightness %"), as its type declares them.
  const caption = (p, schema) => [schema.title || p, schema["x-unit-symbol"]].filter(Boolean).join(" ");
  return el("form", { class: `command-${name}`, onsubmit: submit },
    ...inputs.map(([p, schema, input]) => el("label", {}, `${caption(p, schema)} `, input)),
    el("button", { type: "submit" }, command.label));
}

function controls(d) {
  const schema = deviceTypes.get(d.twin.type);
  const shown = Object.entries(schema?.commands || {}).filter(([, command]) => !command.admin);
  if (!shown.length) return el("div", { class: "controls muted" }, "no controls for this type");
  return el("details", { class: "more" }, el("summary", {}, "More controls"),
    el("div", { class: "controls" }, ...shown.map(([name, command]) => commandControl(d, name, command))));
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
