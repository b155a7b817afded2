// Prints every PromQL expression of the Grafana dashboards and the Prometheus rules, one JSON
// object per line ({kind: panel|record|alert, name, source, expr}), ready to evaluate against a
// live Prometheus: dashboard variables become what "All" would mean (`$var` → `.*`,
// `$__rate_interval` → `1m`). Templating queries are not panel data and are left out.
// Usage: node tests/deploy/promql_queries.mjs REPO_ROOT
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, relative, resolve } from "node:path";

const root = process.argv[2] && resolve(process.argv[2]);
if (!root) {
  console.error("usage: node tests/deploy/promql_queries.mjs REPO_ROOT");
  process.exit(2);
}
const require = createRequire(join(root, "tools", "package.json"));
const YAML = require("yaml");

const emit = (kind, name, source, expr) =>
  console.log(JSON.stringify({ kind, name, source: relative(root, source), expr }));

// `$__rate_interval` first: the generic `$var` rule would otherwise eat it.
const substitute = (expr) =>
  expr.replaceAll("$__rate_interval", "1m").replace(/\$\{?\w+\}?/g, ".*");

// Rows hold their panels in `panels` when collapsed; every level is walked.
function* panelsOf(panels) {
  for (const panel of panels ?? []) {
    yield panel;
    yield* panelsOf(panel.panels);
  }
}

const dashboards = join(root, "deploy", "grafana", "dashboards");
for (const file of readdirSync(dashboards).filter((name) => name.endsWith(".json")).sort()) {
  const path = join(dashboards, file);
  const dashboard = JSON.parse(readFileSync(path, "utf8"));
  for (const panel of panelsOf(dashboard.panels)) {
    for (const target of panel.targets ?? []) {
      if (target.expr) emit("panel", `${panel.title} [${target.refId}]`, path, substitute(target.expr));
    }
  }
}

const rules = join(root, "deploy", "prometheus", "specd-rules.yml");
for (const group of YAML.parse(readFileSync(rules, "utf8")).groups) {
  for (const rule of group.rules) {
    if (rule.record) emit("record", rule.record, rules, rule.expr.trim());
    else emit("alert", rule.alert, rules, rule.expr.trim());
  }
}
