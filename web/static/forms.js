// Forms generated from a JSON Schema: strings, numbers, integers,
// booleans, enums, arrays of strings and nested objects. Anything else is
// edited as JSON.
import {h} from "./util.js";

let counter = 0;

// schemaForm returns {el, value()} for schema; value() throws an Error
// with a message naming the field when a value cannot be read.
export function schemaForm(schema, initial) {
  return field(schema || {}, "", "", true, initial);
}

function field(schema, name, path, required, initial) {
  const id = "f" + (++counter);
  const title = schema.title || name;
  const help = schema.description ? h("div", {class: "muted", id: id + "-help"}, schema.description) : null;
  const lbl = (el) => h("div", {class: "field"}, h("label", {for: id}, title + (required ? " *" : "")), el, help);
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
  if (schema.enum) {
    const sel = h("select", {id, name: path, "aria-describedby": help ? id + "-help" : null},
      required ? null : h("option", {value: ""}, "—"),
      schema.enum.map((v, i) => h("option", {value: String(i), selected: initial === v || (initial === undefined && schema.default === v)}, String(v))));
    return {el: lbl(sel), value: () => sel.value === "" ? undefined : schema.enum[Number(sel.value)]};
  }
  if (type === "object" || (!type && schema.properties)) {
    const props = schema.properties || {};
    const req = new Set(schema.required || []);
    const kids = Object.entries(props).map(([k, s]) => [k, field(s, k, path ? path + "." + k : k, req.has(k), initial ? initial[k] : undefined)]);
    if (kids.length === 0 && schema.additionalProperties !== false && path !== "") {
      return jsonField();
    }
    const inner = kids.map(([, f]) => f.el);
    const el = path === "" ? h("div", {}, inner) : h("fieldset", {}, h("legend", {}, title + (required ? " *" : "")), help, inner);
    return {el, value: () => {
      const out = {};
      for (const [k, f] of kids) {
        const v = f.value();
        if (v !== undefined) out[k] = v;
      }
      return out;
    }};
  }
  if (type === "boolean") {
    const box = h("input", {type: "checkbox", id, name: path, checked: initial ?? schema.default ?? false});
    return {el: h("div", {class: "field"}, h("label", {class: "inline", for: id}, box, title)), value: () => box.checked};
  }
  if (type === "number" || type === "integer") {
    const inp = h("input", {type: "number", id, name: path, step: type === "integer" ? "1" : "any", min: schema.minimum, max: schema.maximum, value: initial ?? schema.default ?? "", required});
    return {el: lbl(inp), value: () => {
      if (inp.value === "") return undefined;
      const n = Number(inp.value);
      if (!Number.isFinite(n) || (type === "integer" && !Number.isInteger(n))) throw new Error(title + ": not a valid " + type);
      return n;
    }};
  }
  if (type === "array" && schema.items && (schema.items.type === "string" || schema.items.enum)) {
    const ta = h("textarea", {id, name: path, rows: 3, value: (initial || schema.default || []).join("\n")});
    const el = h("div", {class: "field"}, h("label", {for: id}, title + " (one per line)" + (required ? " *" : "")), ta, help);
    return {el, value: () => {
      const lines = ta.value.split("\n").map((s) => s.trim()).filter((s) => s !== "");
      return lines.length || required ? lines : undefined;
    }};
  }
  if (type === "string") {
    const long = (schema.maxLength || 0) > 200 || schema.format === "textarea";
    const inp = long ? h("textarea", {id, name: path, rows: 3, value: initial ?? schema.default ?? ""})
      : h("input", {type: schema.format === "uri" ? "url" : "text", id, name: path, value: initial ?? schema.default ?? "", maxLength: schema.maxLength, required});
    return {el: lbl(inp), value: () => inp.value === "" && !required ? undefined : inp.value};
  }
  return jsonField();

  function jsonField() {
    const ta = h("textarea", {id, name: path, rows: 3, value: initial === undefined ? "" : JSON.stringify(initial, null, 2)});
    const el = h("div", {class: "field"}, h("label", {for: id}, title + " (JSON)" + (required ? " *" : "")), ta, help);
    return {el, value: () => {
      if (ta.value.trim() === "") return undefined;
      try { return JSON.parse(ta.value); } catch (e) { throw new Error(title + ": " + e.message); }
    }};
  }
}
