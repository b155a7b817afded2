#!/usr/bin/env bash
# Opt-in peer for tests/bench/llama_cpp_side_by_side.sh (not part of scripts/setup.sh): fetches the
# llama.cpp that the pinned llama-cpp-python sdist vendors, builds only llama-bench and
# llama-quantize (Release, CPU only, GGML_NATIVE=ON, static, no HTTPS/server/examples/tests) and a
# Python venv for tests/bench/specd_to_gguf.py (numpy and the vendored gguf-py).
#   bash scripts/setup_llama_cpp.sh
# Everything lands in .cache/llama.cpp/ (git-ignored): dl/ (the sdist), src/ (unpacked), build/,
# bin/ (llama-bench, llama-quantize), venv/, models/ (converted checkpoints, filled by the bench).
# Idempotent: each step is skipped when its result for this version is already there. Needs
# python3 (venv, pip), cmake, ninja, a C++17 compiler and PyPI; about 5 minutes on 2 cores.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version=0.3.36                        # llama-cpp-python; pins the vendored llama.cpp
numpy_version=2.2.6                   # vendored gguf-py asks numpy >= 2.2.6
tqdm_version=4.67.1
pyyaml_version=6.0.2
requests_version=2.32.3
root="$repo/.cache/llama.cpp"
src="$root/src/llama_cpp_python-$version"
llama="$src/vendor/llama.cpp"
jobs="${SPECD_LLAMA_JOBS:-$(nproc)}"
mkdir -p "$root/dl" "$root/src" "$root/bin" "$root/models"

say() { echo "setup_llama_cpp: $*"; }

# 1. the sdist, from PyPI by pip itself: no dependencies, the package itself from source only (pip
#    still prepares its metadata, so scikit-build-core comes as a wheel; `--no-binary :all:` would
#    build every build backend from source, recursively, for minutes)
sdist="$root/dl/llama_cpp_python-$version.tar.gz"
if [[ ! -s "$sdist" ]]; then
  say "downloading llama-cpp-python==$version (sdist)"
  python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python --dest "$root/dl" \
    "llama-cpp-python==$version"
fi
if [[ ! -f "$llama/CMakeLists.txt" ]]; then
  say "unpacking $(basename "$sdist")"
  rm -rf "$src"
  tar -xzf "$sdist" -C "$root/src"
fi
[[ -f "$llama/src/llama-model.cpp" ]] || { say "no vendor/llama.cpp in $sdist" >&2; exit 1; }

# 2. llama-bench and llama-quantize
stamp="$root/bin/.built-$version"
if [[ ! -f "$stamp" || ! -x "$root/bin/llama-bench" || ! -x "$root/bin/llama-quantize" ]]; then
  say "building llama-bench and llama-quantize ($jobs jobs)"
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  cmake -S "$llama" -B "$root/build" "${generator[@]}" \
    -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=ON \
    -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_OPENCL=OFF -DGGML_RPC=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_COMMON=ON \
    >"$root/build-configure.log" 2>&1 || { tail -30 "$root/build-configure.log" >&2; exit 1; }
  nice -n 19 cmake --build "$root/build" --parallel "$jobs" --target llama-bench llama-quantize \
    >"$root/build.log" 2>&1 || { tail -30 "$root/build.log" >&2; exit 1; }
  for exe in llama-bench llama-quantize; do
    install -m 755 "$root/build/bin/$exe" "$root/bin/$exe"
  done
  touch "$stamp"
fi

# 3. the converter's venv: numpy and gguf-py from the same llama.cpp (safetensors are read directly)
venv="$root/venv"
vstamp="$venv/.ready-$version"
if [[ ! -f "$vstamp" ]]; then
  say "creating $venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "numpy==$numpy_version" "tqdm==$tqdm_version" \
    "pyyaml==$pyyaml_version" "requests==$requests_version"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "$llama/gguf-py"
  "$venv/bin/python" -c 'import gguf, numpy; gguf.MODEL_ARCH.QWEN35'
  touch "$vstamp"
fi

say "ready: $root/bin/llama-bench, $root/bin/llama-quantize, $venv/bin/python"
