#!/bin/sh
# Checks the Helm chart helm/specd: usage: tests/deploy/check_helm.sh ROOT (the repository root).
#   1. tests/deploy/check_helm_values.mjs: template references, unused and undocumented values,
#      values.schema.json (always runs);
#   2. renders the chart with the default values and with values that turn every switch
#      (tests/deploy/helm-values-all.yaml and --set variants) and validates every object with
#      tests/deploy/validate_k8s.mjs; renders that must fail (cross-field checks).
# tests/deploy/render_chart.sh renders (helm, plus `helm lint`, where installed; else
# tests/deploy/helm_render); where it cannot, step 2 is skipped and the exit status is 77
# (CTest's skip code).
set -eu

root=${1:?usage: check_helm.sh ROOT}
cd "$root"
chart=helm/specd
all_values=tests/deploy/helm-values-all.yaml

node tests/deploy/check_helm_values.mjs "$chart" "$all_values"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if command -v helm >/dev/null 2>&1; then
  helm lint "$chart"
  helm lint "$chart" -f "$all_values"
fi
render() {
  sh tests/deploy/render_chart.sh . "$@"
}
# Skipped (77) where the chart cannot be rendered; the values check above has run.
status=0
render 1.29.0 >/dev/null || status=$?
[ "$status" -eq 77 ] && exit 77
[ "$status" -eq 0 ] || exit "$status"

check() {
  name=$1
  shift
  echo "render: $name"
  render "$@" >"$tmp/out.yaml"
  node tests/deploy/validate_k8s.mjs "$tmp/out.yaml"
}

# Kubernetes 1.29: the oldest the chart supports (preStop through /bin/sleep).
check "defaults" 1.29.0
check "every switch on (DRA, KEDA, monitoring, NetworkPolicies, hostPath, API key, mTLS)" 1.34.0 \
  -f "$all_values" --api-versions resource.k8s.io/v1 \
  --api-versions monitoring.coreos.com/v1 --api-versions keda.sh/v1alpha1
check "target only, trainer on a pre-bound volume, no HTTP API" 1.31.0 \
  --set models.drafter= --set trainer.persistence.storageClass=- \
  --set orchestrator.http.enabled=false
check "drafter on the node's GPU, TLS with the Secret's own ca.crt" 1.31.0 \
  --set pairs.gpu.devicePlugin.drafter=nodeGPU --set tls.secretName=specd-tls
check "the suffix drafter alone" 1.31.0 --set models.drafter=suffix
check "the suffix drafter combined with the DFlash drafter" 1.31.0 \
  --set models.drafter=suffix+qwen35-4b-dflash
check "drafter on a GPU of its own, no trainer, no disruption budgets" 1.31.0 \
  --set pairs.gpu.devicePlugin.drafter=dedicated --set trainer.enabled=false \
  --set orchestrator.podDisruptionBudget.enabled=false --set pairs.podDisruptionBudget.enabled=false

echo "render: regimes out of order (must fail)"
if render 1.31.0 --set serving.regimes.mediumFrom=4096 >"$tmp/out.yaml" 2>"$tmp/err.txt"; then
  echo "check_helm: mediumFrom >= longFrom rendered without an error" >&2
  exit 1
fi
grep -q "mediumFrom must be below" "$tmp/err.txt"
echo "render: mutual TLS without a certificate (must fail)"
if render 1.31.0 --set tls.mutual=true >"$tmp/out.yaml" 2>"$tmp/err.txt"; then
  echo "check_helm: tls.mutual without tls.secretName rendered without an error" >&2
  exit 1
fi
grep -q "need tls.secretName" "$tmp/err.txt"
echo "check_helm: $chart OK"
