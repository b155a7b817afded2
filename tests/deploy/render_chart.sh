#!/bin/sh
# Renders the Helm chart helm/specd to stdout as `helm template` does:
#   tests/deploy/render_chart.sh ROOT KUBE_VERSION [--set K=V | -f FILE | --api-versions G/V]...
# with `helm` where it is installed, else with tests/deploy/helm_render, built offline from
# Debian's Go packages (golang-go, golang-github-masterminds-sprig-dev,
# golang-k8s-sigs-yaml-dev) into $TMPDIR. Exit status 77 (CTest's skip code) when neither exists.
set -eu

root=${1:?usage: render_chart.sh ROOT KUBE_VERSION [HELM ARGS]}
kube=${2:?usage: render_chart.sh ROOT KUBE_VERSION [HELM ARGS]}
shift 2
cd "$root"
chart=helm/specd

if command -v helm >/dev/null 2>&1; then
  exec helm template specd "$chart" --namespace specd --kube-version "$kube" "$@"
fi

gopath=/usr/share/gocode
if ! command -v go >/dev/null 2>&1 ||
  [ ! -d "$gopath/src/github.com/Masterminds/sprig" ] || [ ! -d "$gopath/src/sigs.k8s.io/yaml" ]; then
  echo "helm not found, nor Go with sprig and sigs.k8s.io/yaml: cannot render the chart" >&2
  exit 77
fi
# One build per source change, shared by every render (go build itself caches little without
# a module cache).
build=${TMPDIR:-/tmp}/specd-helm-render-$(id -u)
mkdir -p "$build"
binary=$build/helm_render-$(cksum <tests/deploy/helm_render/main.go | cut -d' ' -f1)
if [ ! -x "$binary" ]; then
  GOCACHE=$(go env GOCACHE 2>/dev/null || true)
  case $GOCACHE in "" | off) GOCACHE=$build/go-cache ;; esac
  GO111MODULE=off GOPATH=$gopath GOFLAGS='' GOCACHE=$GOCACHE \
    go build -o "$binary.$$" ./tests/deploy/helm_render
  # Renders may run side by side (ctest -j): each builds its own file, and the rename is atomic.
  mv "$binary.$$" "$binary"
fi
# helm_render spells helm's flags with one dash.
for arg; do
  shift
  case $arg in --*) set -- "$@" "-${arg#--}" ;; *) set -- "$@" "$arg" ;; esac
done
exec "$binary" -chart "$chart" -release specd -namespace specd -kube-version "$kube" "$@"
