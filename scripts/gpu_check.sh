#!/usr/bin/env bash
# Runs on a CUDA machine (the device tool): builds the engine alone against the carried
# .cache/gpu-bundle (scripts/gpu_bundle.sh) and, when present, the CUDA LibTorch of the local
# PyTorch; runs the gpu-labelled tests, the op table's backend checks (CUDA's among them), the W4A16
# GEMM benchmark beside PyTorch's INT4 kernel, a Qwen3.5-4B-shaped INT4 decode step and speculative
# decoding at a forced tau on the three regimes (each with and without CUDA graphs), and
# transformers on the same shape; prints a short table and the benchmarks' numbers last. Full logs go to $OUT (or build-gpu/logs/).
#   here:       bash scripts/gpu_bundle.sh && cp -rL ../shared .cache/shared
#   device run: bash scripts/gpu_check.sh      (carry: .cache/gpu-bundle, .cache/shared)
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
# The fixtures the gpu tests read: ../shared beside the checkout, or the copy carried in .cache.
shared="$root/../shared"
[[ -d "$shared/fixtures" ]] || shared="$root/.cache/shared"
export PKG_CONFIG_PATH="$bundle/usr/lib/x86_64-linux-gnu/pkgconfig:$bundle/usr/share/pkgconfig"
arch="${CUDA_ARCH:-90}"
# TORCH_CUDA_ARCH_LIST spares torch's CMake its GPU probe, which CMake 3.25 cannot compile for
# CUDA 13 (seen building this against PyPI's torch 2.11 without a device).
step configure cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPECD_ENGINE_ONLY=ON \
  "-DCMAKE_PREFIX_PATH=$prefix" "-DSPECD_SHARED_DIR=$shared" \
  "-DCMAKE_CUDA_ARCHITECTURES=$arch" "-DTORCH_CUDA_ARCH_LIST=${arch%?}.${arch: -1}"
# Only what the check runs: the gpu-labelled tests, the op table's backend checks, the benchmark.
step build cmake --build build-gpu -j "$(nproc)" --target kernels_cuda_test model_on_cuda_test \
  specd_model_ops_test w4a16_gemm_gpu_bench specd
step gpu-tests ctest --test-dir build-gpu -L gpu --output-on-failure
step backend-ops ctest --test-dir build-gpu -R '^BackendOpsTest[.]' --output-on-failure
step w4a16-bench build-gpu/tests/gpu/w4a16_gemm_gpu_bench
# The Qwen3.5-4B-shaped INT4 decode step: random weights, RTN onto the W4A16 grid, on the device.
specd=build-gpu/cli/specd/specd
step init-4b timeout 240 "$specd" bench init-model --preset qwen35-4b --dtype bf16 --quantize rtn \
  --group-size 128 --out build-gpu/qwen35-4b-w4a16
step decode-4b timeout 120 "$specd" bench decode --model build-gpu/qwen35-4b-w4a16 --device cuda \
  --prompt-len 512 --tokens 64 --block 16 --batch 16
# The same steps replayed as CUDA graphs: what launching a step's kernels one by one costs.
step decode-4b-graphs timeout 120 "$specd" bench decode --model build-gpu/qwen35-4b-w4a16 \
  --device cuda --cuda-graphs --prompt-len 512 --tokens 64 --block 16
# PyTorch's own W4A16 kernel on the same shapes, measured as the W4A16 GEMM benchmark measures.
step torch-int4 timeout 120 python3 tests/bench/torch_int4_gemm.py
# Speculative decoding with a 5-layer DFlash drafter of the target's width (random weights, so its
# acceptance is forced to tau 6: it drafts in full, the target's own tokens replace its first 5),
# on the three regimes; then transformers on the same shape, the short regime (12.3 s in GPU.md).
step drafter-5l timeout 120 "$specd" drafter init --target build-gpu/qwen35-4b-w4a16 --layers 5 \
  --block-size 16 --out build-gpu/drafter-5l
step spec-4b timeout 300 "$specd" bench spec --model build-gpu/qwen35-4b-w4a16 --device cuda \
  --drafter build-gpu/drafter-5l --force-tau 6 --repeats 1
step spec-4b-graphs timeout 300 "$specd" bench spec --model build-gpu/qwen35-4b-w4a16 \
  --device cuda --cuda-graphs --drafter build-gpu/drafter-5l --force-tau 6 --repeats 1
step hf-4b timeout 120 python3 tests/bench/transformers_regimes.py build-gpu/qwen35-4b-w4a16 \
  --regimes short
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$logs/device.txt" 2>&1

echo "== specd gpu check ($(cat "$logs/device.txt")) =="
printf '%s\n' "${results[@]}"
grep -hE 'tests passed|Skipped|Failed' "$logs/gpu-tests.log" "$logs/backend-ops.log" || true
echo "== Qwen3.5-4B-shaped W4A16 on the device ($logs/decode-4b.log) =="
grep -E '^(prefill|decode|verify block|batched decode|batched verify) ' "$logs/decode-4b.log" || true
echo "== The same steps as CUDA graphs ($logs/decode-4b-graphs.log) =="
grep -E '^(decode|verify block) ' "$logs/decode-4b-graphs.log" || true
echo "== Speculative, acceptance forced to tau 6, and transformers ($logs/spec-4b.log, hf-4b.log) =="
grep -vE '^(model|drafter) ' "$logs/spec-4b.log" || true
echo "-- with --cuda-graphs ($logs/spec-4b-graphs.log)"
grep -vE '^(model|drafter) ' "$logs/spec-4b-graphs.log" || true
grep -E '^(transformers|short|medium|long) ' "$logs/hf-4b.log" || true
echo "== W4A16 GEMM vs cuBLAS ($logs/w4a16-bench.log) and PyTorch's INT4 ($logs/torch-int4.log) =="
cat "$logs/w4a16-bench.log"
cat "$logs/torch-int4.log"
