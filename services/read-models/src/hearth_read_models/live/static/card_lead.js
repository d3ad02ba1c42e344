// Hearth live page: what a card leads with, as the device's type declares it (its schema's `card`, from
// hearth_shared/domain/device_card.py): the primary keys, large, with their labels and units, and the
// primary controls, each bound to one key and one command. The kinds: a stepper (− value +, one step of
// the param each), a choice (the param's values), a slider (sent once let go) and a toggle (one button
// naming the command it sends, or a switch showing the key). A control shows where its key is going
// (desired, else reported) and sends through send() (command_sender.js). Loaded before app.js (el, send;
// device_types.js's helpers).
"use strict";

// Where a key is going: what a command asked for, else what the device reports.
const wanted = (twin, key) => twin.desired[key] ?? twin.reported[key];

function buildLead(d) {
  const { type } = d.twin;
  const schema = deviceTypes.get(type);
  const card = schema?.card || { primary: [], controls: [] };
  const readings = card.primary.map((key) => {
    const value = el("span", { class: "value" });
    const going = el("span", { class: "going", hidden: "" });
    const node = el("div", { class: "reading", dataset: { key } }, el("span", { class: "label" }, keyLabel(type, key)), value, going);
    return { render: (twin) => renderReading(twin, key, node, value, going), node };
  });
  const makers = { stepper: stepperControl, choice: choiceControl, slider: sliderControl, toggle: toggleControl };
  const controls = card.controls.map((control) => makers[control.kind](d, schema, control));
  const parts = [...readings, ...controls];
  return {
    keys: new Set([...card.primary, ...card.controls.map((control) => control.key)]),
    node: el("section", { class: "lead" },
      el("div", { class: "readings" }, ...readings.map((r) => r.node)),
      el("div", { class: "primary-controls" }, ...controls.map((c) => c.node))),
    render: (twin) => parts.forEach((part) => part.render(twin)),
  };
}

// A primary key: what the device reports, and where a command is taking it ("→ Unlocked") until it is there.
function renderReading(twin, key, node, value, going) {
  const reported = twin.reported[key];
  const asked = key in twin.delta ? twin.desired[key] : undefined;
  value.textContent = keyText(twin.type, key, reported);
  node.dataset.reported = reported ?? "";
  node.classList.toggle("pending", asked !== undefined);
  going.hidden = asked === undefined;
  going.textContent = asked === undefined ? "" : `→ ${keyText(twin.type, key, asked)}`;
}

function controlLabel(d, control) {
  return el("span", { class: "label" }, keyLabel(d.twin.type, control.key));
}

function paramOf(schema, control) {
  return paramSchemas(schema.commands[control.command])[control.param];
}

function stepperControl(d, schema, control) {
  const param = paramOf(schema, control);
  const label = keyLabel(d.twin.type, control.key);
  const value = el("output", { class: "value" });
  let shown = null;
  const step = (sign) => {
    const from = shown ?? param.minimum;
    const next = rounded(param, Math.min(param.maximum, Math.max(param.minimum, from + sign * param.multipleOf)));
    shown = next;
    value.textContent = keyText(d.twin.type, control.key, next);
    send(d.twin.device_id, control.command, { [control.param]: next });
  };
  const node = el("div", { class: "control stepper", dataset: { key: control.key } }, controlLabel(d, control),
    el("button", { class: "down", "aria-label": `${label} down`, onclick: () => step(-1) }, "−"),
    value,
    el("button", { class: "up", "aria-label": `${label} up`, onclick: () => step(1) }, "+"));
  return {
    node,
    render(twin) {
      shown = wanted(twin, control.key) ?? null;
      value.textContent = keyText(twin.type, control.key, shown);
      node.dataset.reported = twin.reported[control.key] ?? "";
      node.classList.toggle("pending", control.key in twin.delta);
    },
  };
}

function choiceControl(d, schema, control) {
  const param = paramOf(schema, control);
  const select = el("select", { name: control.param, onchange: () => send(d.twin.device_id, control.command, { [control.param]: select.value }) },
    ...param.enum.map((v) => el("option", { value: v }, valueText(param, v))));
  const node = el("label", { class: "control choice", dataset: { key: control.key } }, controlLabel(d, control), select);
  return {
    node,
    render(twin) {
      if (document.activeElement !== select) select.value = wanted(twin, control.key) ?? "";
    },
  };
}

function sliderControl(d, schema, control) {
  const param = paramOf(schema, control);
  const step = param.multipleOf ?? (param.type === "integer" ? 1 : "any");
  const input = el("input", { type: "range", name: control.param, min: param.minimum, max: param.maximum, step });
  const output = el("output", { class: "value" });
  let moving = false; // a person's hand on it: a twin's change does not move it back
  input.addEventListener("input", () => {
    moving = true;
    output.textContent = keyText(d.twin.type, control.key, Number(input.value));
  });
  input.addEventListener("change", () => {
    moving = false;
    send(d.twin.device_id, control.command, { [control.param]: Number(input.value) });
  });
  const node = el("label", { class: "control slider", dataset: { key: control.key } }, controlLabel(d, control), input, output);
  return {
    node,
    render(twin) {
      const value = wanted(twin, control.key);
      node.dataset.reported = twin.reported[control.key] ?? "";
      if (moving) return;
      output.textContent = keyText(twin.type, control.key, value);
      if (typeof value === "number") input.value = value;
    },
  };
}

function toggleControl(d, schema, control) {
  let next = control.command;
  const button = el("button", { class: control.switch ? "switch" : "toggle", onclick: () => send(d.twin.device_id, next, {}) });
  const node = control.switch
    ? el("label", { class: "control switch", dataset: { key: control.key } }, controlLabel(d, control), button)
    : el("div", { class: "control toggle", dataset: { key: control.key } }, button);
  if (control.switch) button.setAttribute("role", "switch");
  return {
    node,
    render(twin) {
      const at = wanted(twin, control.key);
      const on = at === control.on_value;
      next = on ? control.off_command : control.command;
      button.dataset.command = next;
      if (control.switch) {
        button.setAttribute("aria-checked", String(on));
        button.textContent = keyText(twin.type, control.key, at);
      } else {
        button.textContent = schema.commands[next].label;
      }
    },
  };
}
