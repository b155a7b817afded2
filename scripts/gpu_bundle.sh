#!/usr/bin/env bash
# Packs the Debian libraries that the engine-only build needs into .cache/gpu-bundle/, for a GPU
# machine that has CUDA and a CUDA LibTorch but none of these development files (see
# ../shared/GPU.md). The folder travels with the working tree (the device tool's `carry`), and
# scripts/gpu_check.sh builds against it. Debian 12 binaries run on newer glibc/libstdc++.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bundle="$root/.cache/gpu-bundle"
packages=(
  libabsl-dev libabsl20220623 nlohmann-json3-dev libcli11-dev
  libpcre2-dev libpcre2-8-0 libutf8proc-dev libutf8proc2
  libgoogle-perftools-dev libtcmalloc-minimal4 libyaml-cpp-dev libyaml-cpp0.7
  libpng-dev libpng16-16 zlib1g-dev libssl-dev libssl3
  libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian
)

rm -rf "$bundle"
mkdir -p "$bundle/debs" "$bundle/root"
(cd "$bundle/debs" && apt-get download -qq "${packages[@]}" 2>/dev/null)
for deb in "$bundle"/debs/*.deb; do dpkg-deb -x "$deb" "$bundle/root"; done
rm -rf "$bundle/debs"
# What the build never reads, within the device tool's 64 MiB carry: documentation, and OpenSSL's
# static libraries (it links libcrypto.so).
rm -rf "$bundle/root/usr/share/doc" "$bundle/root/usr/share/man"
rm -f "$bundle/root/usr/lib/x86_64-linux-gnu/"{libcrypto,libssl}.a
# pkg-config files name prefix=/usr; make them relative to where they now lie.
while IFS= read -r pc; do
  up="$(realpath --relative-to="$(dirname "$pc")" "$bundle/root/usr")"
  sed -i "s|^prefix=/usr\$|prefix=\${pcfiledir}/$up|" "$pc"
done < <(find "$bundle/root" -name '*.pc')
echo "gpu-bundle: $(du -sh "$bundle" | cut -f1) in ${bundle#$root/}"
