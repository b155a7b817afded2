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
  test [--asan|--cuda] [CTEST ARGS]
                   set up, build, and run every test (unit, integration, gpu, bench) against
                   both LibTorch flavours: Debian's (build/) and PyTorch's CUDA build
                   (build-cuda/; gpu tests skip without a device); --asan: AddressSanitizer +
                   UBSan alone (build-asan/), --cuda: the CUDA flavour alone
  build [--asan|--cuda]
                   set up and build (Release in build/, or build-asan/, or build-cuda/)
  setup            install Debian packages and node tools, fetch the tokenizer (idempotent)
  specd ARGS       run the built `specd` command line
USAGE
}

# build [--asan|--cuda]: configures once, builds, prints the build directory.
build() {
  local dir=build extra=()
  bash scripts/setup.sh >&2
  case "${1:-}" in
    --asan) dir=build-asan extra=(-DSPECD_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
    --cuda)
      # PyTorch's LibTorch from the Python environment's torch wheel (set-up installs it); its
      # CMake finds CUDA with the legacy FindCUDA, pointed at set-up's CUDA wheels where the machine
      # has no toolkit, and needs the architectures named where there is no device to probe.
      local torch_cmake
      torch_cmake="$(.cache/python/bin/python -c 'import torch; print(torch.utils.cmake_prefix_path)')"
      dir=build-cuda extra=("-DCMAKE_PREFIX_PATH=$torch_cmake" -DTORCH_CUDA_ARCH_LIST=9.0)
      if ! command -v nvcc >/dev/null; then
        extra+=("-DCUDA_TOOLKIT_ROOT_DIR=$(echo "$root"/.cache/python/lib/python3*/site-packages/nvidia/cu13)")
      fi
      ;;
  esac
  if [[ ! -f "$dir/build.ninja" ]]; then
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${extra[@]}" >&2
  fi
  cmake --build "$dir" -j "$(nproc)" >&2
  echo "$dir"
}

# run_tests [--asan|--cuda] [CTEST ARGS]: builds that flavour and runs its tests.
run_tests() {
  local dir flavour=()
  if [[ "${1:-}" == --asan || "${1:-}" == --cuda ]]; then flavour=("$1"); shift; fi
  dir="$(build "${flavour[@]}")"
  ctest --test-dir "$dir" --output-on-failure -j "$(nproc)" "$@"
}

command="${1:-}"
shift || true
case "$command" in
  setup) bash scripts/setup.sh ;;
  build) build "$@" >/dev/null ;;
  test)
    if [[ "${1:-}" == --asan || "${1:-}" == --cuda ]]; then
      run_tests "$@"
    else
      run_tests "$@"
      run_tests --cuda "$@"
    fi
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
