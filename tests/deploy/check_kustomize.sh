#!/usr/bin/env bash
# Offline checks of the deploy files (no cluster, no container engine):
#   - every kustomization (deploy/k8s base, models, overlays; deploy/grafana; deploy/prometheus)
#     renders with `kubectl kustomize`, and its objects pass tests/deploy/validate_k8s.mjs;
#   - deploy/ and helm/specd pass yamllint (tests/deploy/yamllint.yml);
#   - deploy/docker/Dockerfile passes `dockerfile-utils lint`.
# Usage: tests/deploy/check_kustomize.sh [ROOT]   (ROOT: the repository; default: this checkout)
# KUBECTL names the kubectl binaries to render with, space-separated (default: kubectl); the
# manifests are kept readable by kustomize v2.0.3 (Debian 12's kubectl) and v5, so give both:
#   KUBECTL="/usr/bin/kubectl /path/to/kubectl-1.20" tests/deploy/check_kustomize.sh
set -euo pipefail

root="$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/../..}" && pwd)"
cd "$root"
read -ra kubectls <<< "${KUBECTL:-kubectl}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

failures=0
fail() {
  echo "check_kustomize: FAIL: $*" >&2
  failures=$((failures + 1))
}

kustomizations=(deploy/k8s/base deploy/k8s/models deploy/k8s/overlays/*/ deploy/grafana deploy/prometheus)
for kubectl in "${kubectls[@]}"; do
  echo "check_kustomize: rendering with $kubectl"
  for dir in "${kustomizations[@]}"; do
    dir="${dir%/}"
    out="$work/${dir//\//_}.yaml"
    if ! "$kubectl" kustomize "$dir" > "$out" 2> "$out.err"; then
      cat "$out.err" >&2
      fail "$kubectl kustomize $dir"
      continue
    fi
    # kustomize v5 flags `bases`, `patchesStrategicMerge` and `patchesJson6902`, the only forms
    # v2.0.3 reads.
    grep -v -e "'bases' is deprecated" -e "'patchesStrategicMerge' is deprecated" \
      -e "'patchesJson6902' is deprecated" "$out.err" >&2 || true
    node tests/deploy/validate_k8s.mjs "$out" || fail "objects of $dir ($kubectl)"
  done
done

if command -v yamllint > /dev/null; then
  lint_paths=(deploy)
  [[ -d helm/specd ]] && lint_paths+=(helm/specd)
  yamllint -c tests/deploy/yamllint.yml "${lint_paths[@]}" || fail "yamllint ${lint_paths[*]}"
else
  fail "yamllint not found (scripts/setup.sh installs it)"
fi

# dockerfile-utils exits 0 whatever it finds: any output is a finding.
lint="$(tools/node_modules/.bin/dockerfile-utils lint deploy/docker/Dockerfile 2>&1)" || true
if [[ -n "$lint" ]]; then
  echo "$lint" >&2
  fail "dockerfile-utils lint deploy/docker/Dockerfile"
fi

if ((failures)); then
  echo "check_kustomize: $failures failure(s)" >&2
  exit 1
fi
echo "check_kustomize: all deploy checks passed"
