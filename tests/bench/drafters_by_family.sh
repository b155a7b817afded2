#!/usr/bin/env bash
# Speculation by prompt family (issue 20): target-only, the DFlash drafter, the suffix drafter and
# both combined, on the same prompts in one run, alternating drafters prompt by prompt so that a
# noisy machine slows them alike. Prints τ, decode tokens/s (the median of the rounds) and the
# ratio to target-only, per family:
#   tests/bench/drafters_by_family.sh PIPELINE_DIR [NEW_TOKENS] [ROUNDS]
# PIPELINE_DIR is what `specd pipeline` wrote (its qad/best target, drafter-gptq and tokenizer).
# Families: repetitive filler (the competition's latency prompts repeat one sentence), code and
# prose (text of the pinned corpus: a module's head, a docstring), and a long context (1500 bytes
# of it, as many tokens for the pipeline's byte-level models). Concurrency 1, greedy.
set -euo pipefail
pipeline="$1" new_tokens="${2:-128}" rounds="${3:-3}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
specd="${SPECD:-$root/build/cli/specd/specd}"
corpus="$root/.cache/corpus/networkx-3.6.1/networkx"

turn() { printf '<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n' "$1"; }
declare -A prompts
prompts[repetitive]="$(turn "Continue the following text.

$(for _ in 1 2 3 4 5 6 7 8; do printf 'The quick brown fox jumps over the lazy dog. '; done)")"
prompts[code]="$(turn "Continue this document from where it stops.

$(sed -n 1,14p "$corpus/algorithms/cycles.py")")"
prompts[prose]="$(turn "Continue the following text.

$(sed -n '/^def simple_cycles/,/^    Parameters/p' "$corpus/algorithms/cycles.py" | sed -n 2,22p)")"
prompts[long]="$(turn "Continue this document from where it stops.

$(head -c 1500 "$corpus/algorithms/shortest_paths/weighted.py")")"

drafters=(none "$pipeline/drafter-gptq" suffix "suffix+$pipeline/drafter-gptq")
names=(target-only dflash suffix suffix+dflash)
results="$(mktemp)"
trap 'rm -f "$results"' EXIT
for family in repetitive code prose long; do
  for ((round = 0; round < rounds; ++round)); do
    for i in "${!drafters[@]}"; do
      args=()
      [[ "${drafters[$i]}" == none ]] || args=(--drafter "${drafters[$i]}")
      "$specd" generate --model "$pipeline/qad/best" --tokenizer "$pipeline/tokenizer/tokenizer.json" \
        --prompt "${prompts[$family]}" --max-new-tokens "$new_tokens" --ignore-eos --format json \
        "${args[@]}" | python3 -c 'import json, sys
r = json.load(sys.stdin)
print(sys.argv[1], sys.argv[2], r.get("tau", 1), r["timings"]["tokens_per_s"])' "$family" "${names[$i]}" >>"$results"
    done
  done
done
python3 - "$results" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    family, name, tau, speed = line.split()
    runs[family, name].append((float(tau), float(speed)))
print("| family | drafter | τ | tokens/s | × target-only |")
print("|---|---|---|---|---|")
for family in ("repetitive", "code", "prose", "long"):
    plain = statistics.median(s for _, s in runs[family, "target-only"])
    for name in ("target-only", "dflash", "suffix", "suffix+dflash"):
        tau = runs[family, name][0][0]
        speed = statistics.median(s for _, s in runs[family, name])
        print(f"| {family} | {name} | {tau:.2f} | {speed:.0f} | {speed / plain:.2f} |")
PY
