#!/usr/bin/env bash
# Runs on a CUDA machine (the device tool): builds the engine alone against the carried
# .cache/gpu-bundle (scripts/gpu_bundle.sh) and, when present, the CUDA LibTorch of the local
# PyTorch; runs the gpu-labelled tests, the op table's backend checks (CUDA's among them) and the
# W4A16 GEMM benchmark; prints a short table and the benchmark's table last. Full logs go to $OUT (or logs/).
#   device run: bash scripts/gpu_check.sh      (carry: .cache/gpu-bundle)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
logs="${OUT:-$root/build-gpu/logs}"
mkdir -p "$logs"
bundle="$root/.cache/gpu-bundle/root"
prefix="$bundle/usr"
if python3 -c 'import torch' 2>/dev/null; then
  prefix="$prefix;$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')"
fi

step() {  # step NAME COMMAND...: runs COMMAND with its output in $logs/NAME.log, records pass/fail
  local name="$1"; shift
  local start=$SECONDS
  if "$@" >"$logs/$name.log" 2>&1; then status=ok; else status=FAILED; fi
  results+=("$(printf '%-12s %-7s %4ss' "$name" "$status" $((SECONDS - start)))")
}
results=()
export PKG_CONFIG_PATH="$bundle/usr/lib/x86_64-linux-gnu/pkgconfig:$bundle/usr/share/pkgconfig"
arch="${CUDA_ARCH:-90}"
# TORCH_CUDA_ARCH_LIST spares torch's CMake its GPU probe, which CMake 3.25 cannot compile for
# CUDA 13 (seen building this against PyPI's torch 2.11 without a device).
step configure cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPECD_ENGINE_ONLY=ON \
  "-DCMAKE_PREFIX_PATH=$prefix" \
  "-DCMAKE_CUDA_ARCHITECTURES=$arch" "-DTORCH_CUDA_ARCH_LIST=${arch%?}.${arch: -1}"
# Only what the check runs: the gpu-labelled tests, the op table's backend checks, the benchmark.
step build cmake --build build-gpu -j "$(nproc)" --target kernels_cuda_test model_on_cuda_test \
  specd_model_ops_test w4a16_gemm_gpu_bench
step gpu-tests ctest --test-dir build-gpu -L gpu --output-on-failure
step backend-ops ctest --test-dir build-gpu -R '^BackendOpsTest[.]' --output-on-failure
step w4a16-bench build-gpu/tests/gpu/w4a16_gemm_gpu_bench
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$logs/device.txt" 2>&1

echo "== specd gpu check ($(cat "$logs/device.txt")) =="
printf '%s\n' "${results[@]}"
grep -hE 'tests passed|Skipped|Failed' "$logs/gpu-tests.log" "$logs/backend-ops.log" || true
echo "== W4A16 GEMM vs cuBLAS ($logs/w4a16-bench.log) =="
cat "$logs/w4a16-bench.log"
