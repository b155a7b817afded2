#!/usr/bin/env node
// Validates rendered Kubernetes manifests (kustomize or Helm output) offline:
//   node tests/deploy/validate_k8s.mjs FILE.yaml... (or - for stdin)
// Each object must have a known apiVersion/kind, pass its schema (kubernetes-models for the
// built-in groups, @kubernetes-models/prometheus-operator for monitoring.coreos.com,
// @kubernetes-models/keda for keda.sh), carry no field its type does not declare, and be the
// only object of its kind, name and namespace. Exit status 1 on any failure, listing each.
//
// Unknown fields: the models' validate() accepts them, yet they are the typo class that slips
// through review (`readinesProbe`, `volumeMount`) and that the API server drops or rejects
// only at apply time. The declared fields of every type are read from the models' own .d.ts
// interfaces (the OpenAPI schemas they are generated from), so the check follows the installed
// API version instead of a hand-kept list.
import { readFileSync, existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

// The tools live in <repo>/tools/node_modules whatever the working directory.
const modulesDir = resolve(dirname(fileURLToPath(import.meta.url)), "../../tools/node_modules");
const require = createRequire(join(modulesDir, "noop.js"));
const YAML = require("yaml");

// API group -> the package that models it. The core group ("") lives in kubernetes-models/v1.
const GROUP_PACKAGES = {
  "monitoring.coreos.com": "@kubernetes-models/prometheus-operator",
  "keda.sh": "@kubernetes-models/keda",
};
const BUILT_IN_PACKAGE = "kubernetes-models";

function modelPath(apiVersion, kind) {
  const slash = apiVersion.lastIndexOf("/");
  const group = slash < 0 ? "" : apiVersion.slice(0, slash);
  const version = apiVersion.slice(slash + 1);
  const pkg = GROUP_PACKAGES[group] ?? BUILT_IN_PACKAGE;
  // Only real kinds: a path segment must not climb out of the package.
  if (!/^[A-Za-z0-9.-]*$/.test(group) || !/^\w+$/.test(version) || !/^\w+$/.test(kind)) return null;
  const base = join(modulesDir, pkg, group === "" ? version : join(group, version), kind);
  return existsSync(`${base}.js`) && existsSync(`${base}.d.ts`) ? base : null;
}

// ---- Declared fields, from the .d.ts interfaces --------------------------------------------
// A type is {kind: "object", fields: Map<name, type>} | {kind: "map", of} | {kind: "array", of}
// | {kind: "leaf"} (strings, numbers, unions, aliases such as IntOrString and Quantity).
const LEAF = { kind: "leaf" };
const parsedFiles = new Map();

function stripComments(text) {
  return text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
}

// The text from `open` (an opening bracket) to its matching close, brackets of every kind counted.
function balanced(text, open) {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    const c = text[i];
    if (c === "{" || c === "<" || c === "(" || c === "[") depth++;
    else if (c === "}" || c === ">" || c === ")" || c === "]") {
      if (c === ">" && text[i - 1] === "=") continue;  // `=>` in a function type
      if (--depth === 0) return i;
    }
  }
  throw new Error("unbalanced brackets");
}

// Members of an interface or inline object body: `"name"?: TYPE;` with nested brackets.
function parseMembers(body, imports, file) {
  const fields = new Map();
  let i = 0;
  while (i < body.length) {
    const m = /"([^"]+)"\??\s*:\s*/y;
    m.lastIndex = i;
    const found = m.exec(body);
    if (!found) {
      i++;
      continue;
    }
    let j = m.lastIndex;
    let end = j;
    for (; end < body.length && body[end] !== ";"; end++) {
      if ("{<([".includes(body[end])) end = balanced(body, end);
    }
    fields.set(found[1], () => parseType(body.slice(j, end).trim(), imports, file));
    i = end + 1;
  }
  return { kind: "object", fields };
}

function parseType(expr, imports, file) {
  const array = /^Array<([\s\S]*)>$/.exec(expr);
  if (array) return { kind: "array", of: parseType(array[1].trim(), imports, file) };
  if (expr.startsWith("{") && balanced(expr, 0) === expr.length - 1) {
    const inner = expr.slice(1, -1).trim();
    const map = /^\[key: string\]:\s*([\s\S]*?);?$/.exec(inner);
    if (map) return { kind: "map", of: parseType(map[1].trim(), imports, file) };
    return parseMembers(inner, imports, file);
  }
  if (/^\w+$/.test(expr) && imports.has(expr)) return typeFromFile(imports.get(expr));
  return LEAF;
}

function resolveImport(spec, fromFile) {
  if (spec.startsWith(".")) return resolve(dirname(fromFile), spec.replace(/\.js$/, ".d.ts"));
  return join(modulesDir, `${spec}.d.ts`);
}

// The first interface declared in a .d.ts file, or LEAF when the file declares a type alias.
function typeFromFile(file) {
  if (parsedFiles.has(file)) return parsedFiles.get(file);
  parsedFiles.set(file, LEAF);  // a self-reference (JSONSchemaProps) stops here
  if (!existsSync(file)) return LEAF;
  const text = stripComments(readFileSync(file, "utf8"));
  const imports = new Map();
  for (const m of text.matchAll(/^import\s*\{([^}]*)\}\s*from\s*"([^"]+)";/gm)) {
    for (const name of m[1].split(",").map((s) => s.trim()).filter(Boolean)) {
      imports.set(name, resolveImport(m[2], file));
    }
  }
  const decl = /export interface \w+(?: extends [\w, ]+)? \{/.exec(text);
  let type = LEAF;
  if (decl) {
    const open = decl.index + decl[0].length - 1;
    type = parseMembers(text.slice(open + 1, balanced(text, open)), imports, file);
  }
  parsedFiles.set(file, type);
  return type;
}

function unknownFields(value, type, path, out) {
  if (value === null || typeof value !== "object") return;
  if (type.kind === "array" && Array.isArray(value)) {
    value.forEach((v, i) => unknownFields(v, type.of, `${path}[${i}]`, out));
  } else if (type.kind === "map" && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) unknownFields(v, type.of, `${path}.${k}`, out);
  } else if (type.kind === "object" && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) {
      const field = type.fields.get(k);
      if (field === undefined) out.push(`unknown field ${path ? `${path}.` : ""}${k}`);
      else unknownFields(v, field(), path ? `${path}.${k}` : k, out);
    }
  }
}

// ---- Documents ------------------------------------------------------------------------------
function readSources(args) {
  if (args.length === 0) {
    console.error("usage: validate_k8s.mjs FILE.yaml... (- reads stdin)");
    process.exit(2);
  }
  return args.map((a) => ({ name: a === "-" ? "<stdin>" : a, text: readFileSync(a === "-" ? 0 : a, "utf8") }));
}

const failures = [];
const seen = new Map();
let count = 0;
for (const { name: source, text } of readSources(process.argv.slice(2))) {
  for (const doc of YAML.parseAllDocuments(text)) {
    if (doc.errors.length) {
      failures.push(`${source}: YAML: ${doc.errors.map((e) => e.message).join("; ")}`);
      continue;
    }
    const obj = doc.toJS();
    if (obj === null || obj === undefined) continue;  // an empty document (`---` at the end)
    count++;
    const { apiVersion, kind } = obj;
    const name = obj.metadata?.name;
    const label = `${source}: ${kind ?? "?"}/${name ?? "?"}`;
    if (typeof apiVersion !== "string" || typeof kind !== "string") {
      failures.push(`${label}: no apiVersion or kind`);
      continue;
    }
    const key = `${kind}/${obj.metadata?.namespace ?? ""}/${name}`;
    if (seen.has(key)) failures.push(`${label}: duplicate of an object in ${seen.get(key)}`);
    else seen.set(key, source);

    const path = modelPath(apiVersion, kind);
    if (path === null) {
      failures.push(`${label}: unknown apiVersion/kind ${apiVersion} ${kind}`);
      continue;
    }
    const Model = (await import(pathToFileURL(`${path}.js`)))[kind];
    if (typeof Model !== "function" || Model.apiVersion !== apiVersion || Model.kind !== kind) {
      failures.push(`${label}: unknown apiVersion/kind ${apiVersion} ${kind}`);
      continue;
    }
    try {
      new Model(obj).validate();
    } catch (error) {
      failures.push(`${label}: ${error.message}`);
    }
    const unknown = [];
    unknownFields(obj, typeFromFile(`${path}.d.ts`), "", unknown);
    for (const u of unknown) failures.push(`${label}: ${u}`);
  }
}

if (failures.length) {
  for (const f of failures) console.error(f);
  console.error(`validate_k8s: ${failures.length} problem(s) in ${count} object(s)`);
  process.exit(1);
}
console.log(`validate_k8s: ${count} object(s) valid in ${process.argv.slice(2).join(" ")}`);
