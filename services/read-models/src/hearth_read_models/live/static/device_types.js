// Hearth live page: the device types as GET /v1/device-types declares them, and how the page writes what
// they declare: a key's or param's label ("Temperature"), a value with its unit's symbol ("16.8 °C") or
// its words ("Heating"), a command as a person reads it ("Set target · 21 °C"). Every word the page
// shows about a device comes from here, so the page names no type, key or unit of its own: a new type
// needs nothing in it. Loaded before app.js (whose auth it calls at run time).
"use strict";

const deviceTypes = new Map(); // type name -> its schema
let adminCommands = {}; // the admin commands every type takes (drawn on admin pages only)

async function loadDeviceTypes() {
  const response = await fetch("/v1/device-types", { headers: auth() });
  if (!response.ok) throw new Error(`GET /v1/device-types answered ${response.status}`);
  const body = await response.json();
  for (const schema of body.items) deviceTypes.set(schema.type, schema);
  adminCommands = body.admin_commands || {};
}

function keySchema(type, key) {
  return deviceTypes.get(type)?.state?.[key] || {};
}

function keyLabel(type, key) {
  return keySchema(type, key).title || key.replaceAll("_", " ");
}

function typeLabel(type) {
  return deviceTypes.get(type)?.label || type;
}

// A command's params by name over all its forms (a target may be one value, or a low/high pair).
function paramSchemas(command) {
  const forms = command ? command.params.oneOf || [command.params] : [];
  return Object.assign({}, ...forms.map((form) => form.properties || {}));
}

function declaredCommand(type, name) {
  return deviceTypes.get(type)?.commands?.[name] || adminCommands[name];
}

// A number as precise as its step says (0.5 -> one decimal), else to a tenth; whole numbers as they are.
function rounded(schema, value) {
  if (Number.isInteger(value)) return value;
  const decimals = Math.max(0, -Math.floor(Math.log10(schema.multipleOf || 0.1)));
  return Number(value.toFixed(decimals));
}

// A value as a person reads it, by its schema: a number with its unit's symbol, a text value by its words.
function valueText(schema, value) {
  if (value === null || value === undefined || value === "") return "—";
  if (typeof value === "number") {
    const unit = schema["x-unit-symbol"];
    return unit ? `${rounded(schema, value)} ${unit}` : String(rounded(schema, value));
  }
  if (typeof value === "string") return schema["x-labels"]?.[value] ?? value;
  if (typeof value === "boolean") return value ? "yes" : "no";
  return JSON.stringify(value);
}

function keyText(type, key, value) {
  return valueText(keySchema(type, key), value);
}

// A command as a person reads it: its label, then its params' values ("Set target · 21 °C"), each with
// its label when it has several ("Turn on · Brightness 60 %, Colour temperature 3000 K").
function commandPhrase(type, command) {
  const declared = declaredCommand(type, command.name);
  const params = Object.entries(command.params || {});
  const label = declared?.label || command.name;
  if (!params.length) return label;
  const schemas = paramSchemas(declared);
  const shown = params.map(([name, value]) => {
    const text = valueText(schemas[name] || {}, value);
    return params.length === 1 ? text : `${schemas[name]?.title || name} ${text}`;
  });
  return `${label} · ${shown.join(", ")}`;
}
