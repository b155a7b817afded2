#!/usr/bin/env bash
# Checks deploy/prometheus with promtool: the scrape config, the rules and their unit tests.
# Usage: tests/deploy/check_prometheus.sh REPO_ROOT
set -euo pipefail

root=${1:?usage: $0 REPO_ROOT}
dir="$root/deploy/prometheus"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# Debian's promtool is built without Kubernetes service discovery and rejects
# kubernetes_sd_configs as an unknown field. There, check a copy whose SD blocks are empty
# static_configs: everything else (relabelling, rule_files, globals) is still checked.
printf 'scrape_configs:\n  - job_name: probe\n    kubernetes_sd_configs: [{role: pod}]\n' \
  >"$scratch/probe.yml"
if promtool check config "$scratch/probe.yml" >/dev/null 2>&1; then
  promtool check config "$dir/prometheus.yml"
else
  echo "promtool lacks Kubernetes SD: checking prometheus.yml with kubernetes_sd_configs stubbed"
  cp "$dir/specd-rules.yml" "$scratch/"
  awk 'skip { match($0, /^ */); if (RLENGTH > indent || /^ *(#|$)/) next; skip = 0 }
       /^ *kubernetes_sd_configs:/ {
         match($0, /^ */); indent = RLENGTH; skip = 1
         print substr($0, 1, indent) "static_configs: [{targets: []}]"; next
       }
       { print }' "$dir/prometheus.yml" >"$scratch/prometheus.yml"
  promtool check config "$scratch/prometheus.yml"
fi
promtool check rules "$dir/specd-rules.yml"
(cd "$dir" && promtool test rules specd-rules.test.yml)
