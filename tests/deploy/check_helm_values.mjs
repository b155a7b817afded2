#!/usr/bin/env node
// Checks a Helm chart's values without helm:
//   1. every `.Values.a.b` path the templates name exists in values.yaml (or, for an alternative
//      the defaults leave out, in values.schema.json);
//   2. every key of values.yaml is named by a template (itself, a parent the template renders
//      whole with toYaml, or a child), apart from the DOCUMENTATION_ONLY keys below;
//   3. every key whose parent the schema describes key by key carries a comment;
//   4. values.yaml, and each VALUES file merged over it the way Helm merges (null deletes a key),
//      validate against values.schema.json (Ajv, JSON Schema draft-07 as Helm uses it).
// Usage: node tests/deploy/check_helm_values.mjs CHART_DIR [VALUES_FILE...]
//
// Limit of check 1/2: references are found textually as `.Values.x.y` inside template actions
// (so `$.Values.x`, `.root.Values.x` count). A path reached relatively (`with .Values.a` then
// `.b`, `range`, `index .Values "a"`, or a variable holding `.Values.a`) is seen as a use of
// `.Values.a` alone, which counts every key under `a` as used; the chart therefore names full
// paths wherever it can.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const require = createRequire(path.join(repoRoot, "tools", "package.json"));
const YAML = require("yaml");
const Ajv = require("ajv");

// Keys that only document (read by no template); none today.
const DOCUMENTATION_ONLY = new Set([]);

const args = process.argv.slice(2);
if (args.length < 1) {
  console.error("usage: check_helm_values.mjs CHART_DIR [VALUES_FILE...]");
  process.exit(2);
}
const chartDir = path.resolve(args[0]);
const errors = [];
const fail = (message) => errors.push(message);

const valuesPath = path.join(chartDir, "values.yaml");
const valuesDoc = YAML.parseDocument(fs.readFileSync(valuesPath, "utf8"));
if (valuesDoc.errors.length) {
  for (const e of valuesDoc.errors) fail(`${valuesPath}: ${e.message}`);
}
const values = valuesDoc.toJS() ?? {};
const schema = JSON.parse(fs.readFileSync(path.join(chartDir, "values.schema.json"), "utf8"));

// --- 1. references in the templates ------------------------------------------------------------
const templatesDir = path.join(chartDir, "templates");
const references = new Map(); // "a.b.c" -> first "file:line"
for (const name of fs.readdirSync(templatesDir).sort()) {
  if (!/\.(tpl|ya?ml|txt)$/.test(name)) continue;
  const text = fs.readFileSync(path.join(templatesDir, name), "utf8");
  for (const action of text.matchAll(/\{\{(.*?)\}\}/gs)) {
    const code = action[1].replace(/\/\*.*?\*\//gs, "");
    for (const ref of code.matchAll(/\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)/g)) {
      const keyPath = ref[1].slice(1);
      const line = text.slice(0, action.index).split("\n").length;
      if (!references.has(keyPath)) references.set(keyPath, `${name}:${line}`);
    }
  }
}
if (references.size === 0) fail(`${templatesDir}: no .Values references found`);

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
// A path counts as existing when values.yaml has it or the schema declares it (an alternative
// such as models.volume.hostPath that the defaults leave out).
const inValues = (keyPath) => {
  let node = values;
  for (const key of keyPath.split(".")) {
    if (!isObject(node) || !(key in node)) return false;
    node = node[key];
  }
  return true;
};
const inSchema = (keyPath) => {
  let node = schema;
  for (const key of keyPath.split(".")) {
    node = node?.properties?.[key];
    if (!node) return false;
  }
  return true;
};
for (const [keyPath, where] of references) {
  if (!inValues(keyPath) && !inSchema(keyPath)) {
    fail(`${where}: .Values.${keyPath} is in neither values.yaml nor values.schema.json`);
  }
}

// --- 2. unused keys ----------------------------------------------------------------------------
function* keyPaths(node, prefix) {
  for (const [key, child] of Object.entries(node)) {
    const keyPath = prefix ? `${prefix}.${key}` : key;
    yield keyPath;
    if (isObject(child)) yield* keyPaths(child, keyPath);
  }
}
const refList = [...references.keys()];
const related = (a, b) => a === b || a.startsWith(`${b}.`) || b.startsWith(`${a}.`);
for (const keyPath of keyPaths(values, "")) {
  if (DOCUMENTATION_ONLY.has(keyPath)) continue;
  if (!refList.some((ref) => related(keyPath, ref))) {
    fail(`values.yaml: ${keyPath} is used by no template (unused value)`);
  }
}

// --- 3. comments ------------------------------------------------------------------------------
// The schema node that describes key by key the map at keyPath, or null (a free-form map).
function schemaFor(keyPath) {
  let node = schema;
  for (const key of keyPath ? keyPath.split(".") : []) {
    node = node?.properties?.[key];
  }
  return node?.properties ? node : null;
}
function checkComments(map, prefix, inheritedComment) {
  if (!YAML.isMap(map) || !schemaFor(prefix)) return;
  map.items.forEach((pair, index) => {
    const key = String(pair.key?.value ?? pair.key);
    const keyPath = prefix ? `${prefix}.${key}` : key;
    const comment =
      pair.key?.commentBefore ||
      pair.key?.comment ||
      pair.value?.comment ||
      (index === 0 ? map.commentBefore || inheritedComment : null);
    if (!comment) fail(`values.yaml: ${keyPath} has no comment`);
    if (YAML.isMap(pair.value)) checkComments(pair.value, keyPath, null);
  });
}
checkComments(valuesDoc.contents, "", valuesDoc.commentBefore);

// --- 4. the schema -----------------------------------------------------------------------------
const ajv = new Ajv({ allErrors: true, strict: true });
const validate = ajv.compile(schema);
const check = (label, data) => {
  if (!validate(data)) {
    for (const e of validate.errors) {
      fail(`${label}: ${e.instancePath || "(root)"} ${e.message} ${JSON.stringify(e.params)}`);
    }
  }
};
check("values.yaml", values);

// Helm's coalescing: maps merge recursively, a null in the override deletes the key, anything
// else replaces.
function merge(base, override) {
  const out = { ...base };
  for (const [key, value] of Object.entries(override)) {
    if (value === null) delete out[key];
    else if (isObject(value) && isObject(out[key])) out[key] = merge(out[key], value);
    else out[key] = value;
  }
  return out;
}
for (const file of args.slice(1)) {
  const doc = YAML.parseDocument(fs.readFileSync(file, "utf8"));
  if (doc.errors.length) {
    for (const e of doc.errors) fail(`${file}: ${e.message}`);
    continue;
  }
  check(`${file} over values.yaml`, merge(values, doc.toJS() ?? {}));
}

if (errors.length) {
  for (const e of errors) console.error(`check_helm_values: ${e}`);
  console.error(`check_helm_values: ${errors.length} problem(s) in ${args[0]}`);
  process.exit(1);
}
console.log(
  `check_helm_values: ${args[0]}: ${references.size} value paths referenced, all keys used, ` +
    `documented and valid against values.schema.json (${args.length - 1} extra values file(s))`,
);
