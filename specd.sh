#!/usr/bin/env bash
# One entry point for people and CI: set up, build, test, run the main job.
# Each command does set-up and build as needed, so it works on a fresh Debian 12 machine (as root).
set -euo pipefail
shopt -s inherit_errexit  # a failed build inside $(build) must stop the script, not run ctest
root="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$root"
# ccache hits across clones in other folders (CI builds a fresh clone): hash paths relative to here.
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1

usage() {
  cat <<'USAGE'
usage: ./specd.sh COMMAND [ARGS]
  demo             set up, build, and run the main job on the embedded default
  test [--asan] [CTEST ARGS]
                   set up, build, and run every test (unit, integration, gpu, bench);
                   --asan builds and tests with AddressSanitizer + UBSan in build-asan/
  build [--asan]   set up and build (Release in build/, or build-asan/)
  setup            install Debian packages and node tools, fetch the tokenizer (idempotent)
  specd ARGS       run the built `specd` command line
USAGE
}

build() {
  local dir=build extra=()
  if [[ "${1:-}" == --asan ]]; then
    dir=build-asan extra=(-DSPECD_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo)
  fi
  bash scripts/setup.sh >&2
  if [[ ! -f "$dir/build.ninja" ]]; then
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${extra[@]}" >&2
  fi
  cmake --build "$dir" -j "$(nproc)" >&2
  echo "$dir"
}

command="${1:-}"
shift || true
case "$command" in
  setup) bash scripts/setup.sh ;;
  build) build "$@" >/dev/null ;;
  test)
    flavour=()
    if [[ "${1:-}" == --asan ]]; then flavour=(--asan); shift; fi
    dir="$(build "${flavour[@]}")"
    ctest --test-dir "$dir" --output-on-failure -j "$(nproc)" "$@"
    ;;
  demo)
    dir="$(build)"
    exec bash scripts/demo.sh "$dir/cli/specd/specd"
    ;;
  specd)
    dir="$(build)"
    exec "$dir/cli/specd/specd" "$@"
    ;;
  ""|-h|--help|help) usage ;;
  *) usage >&2; exit 2 ;;
esac
