#!/bin/sh
# Checks the Helm chart helm/specd: usage: tests/deploy/check_helm.sh ROOT (the repository root).
#   1. tests/deploy/check_helm_values.mjs: template references, unused and undocumented values,
#      values.schema.json (always runs);
#   2. renders the chart with the default values and with values that turn every switch
#      (tests/deploy/helm-values-all.yaml and --set variants) and validates every object with
#      tests/deploy/validate_k8s.mjs; one render that must fail (a cross-field check).
# The renderer is `helm` (plus `helm lint`) when installed, else tests/deploy/helm_render built
# offline from Debian's Go packages (golang-go, golang-github-masterminds-sprig-dev,
# golang-k8s-sigs-yaml-dev); with neither, step 2 is skipped and the exit status is 77 (CTest's
# skip code).
set -eu

root=${1:?usage: check_helm.sh ROOT}
cd "$root"
chart=helm/specd
all_values=tests/deploy/helm-values-all.yaml

node tests/deploy/check_helm_values.mjs "$chart" "$all_values"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

gopath=/usr/share/gocode
if command -v helm >/dev/null 2>&1; then
  helm lint "$chart"
  helm lint "$chart" -f "$all_values"
  render() {
    kube=$1
    shift
    helm template specd "$chart" --namespace specd --kube-version "$kube" "$@"
  }
elif command -v go >/dev/null 2>&1 &&
  [ -d "$gopath/src/github.com/Masterminds/sprig" ] && [ -d "$gopath/src/sigs.k8s.io/yaml" ]; then
  echo "helm not found: rendering with tests/deploy/helm_render"
  GOCACHE=$(go env GOCACHE 2>/dev/null || true)
  case $GOCACHE in "" | off) GOCACHE=$tmp/go-cache ;; esac
  GO111MODULE=off GOPATH=$gopath GOFLAGS='' GOCACHE=$GOCACHE \
    go build -o "$tmp/helm_render" ./tests/deploy/helm_render
  render() {
    kube=$1
    shift
    # helm_render spells helm's flags with one dash.
    for arg; do
      shift
      case $arg in --*) set -- "$@" "-${arg#--}" ;; *) set -- "$@" "$arg" ;; esac
    done
    "$tmp/helm_render" -chart "$chart" -release specd -namespace specd -kube-version "$kube" "$@"
  }
else
  echo "helm not found: skipped"
  exit 77
fi

check() {
  name=$1
  shift
  echo "render: $name"
  render "$@" >"$tmp/out.yaml"
  node tests/deploy/validate_k8s.mjs "$tmp/out.yaml"
}

# Kubernetes 1.29: the oldest the chart supports (preStop through /bin/sleep).
check "defaults" 1.29.0
check "every switch on (DRA, KEDA, monitoring, NetworkPolicies, hostPath)" 1.34.0 \
  -f "$all_values" --api-versions resource.k8s.io/v1 \
  --api-versions monitoring.coreos.com/v1 --api-versions keda.sh/v1alpha1
check "target only, trainer on a pre-bound volume" 1.31.0 \
  --set models.drafter= --set trainer.persistence.storageClass=-
check "drafter on the node's GPU" 1.31.0 --set pairs.gpu.devicePlugin.drafter=nodeGPU
check "drafter on a GPU of its own, no trainer, no disruption budgets" 1.31.0 \
  --set pairs.gpu.devicePlugin.drafter=dedicated --set trainer.enabled=false \
  --set orchestrator.podDisruptionBudget.enabled=false --set pairs.podDisruptionBudget.enabled=false

echo "render: regimes out of order (must fail)"
if render 1.31.0 --set serving.regimes.mediumFrom=4096 >"$tmp/out.yaml" 2>"$tmp/err.txt"; then
  echo "check_helm: mediumFrom >= longFrom rendered without an error" >&2
  exit 1
fi
grep -q "mediumFrom must be below" "$tmp/err.txt"
echo "check_helm: $chart OK"
