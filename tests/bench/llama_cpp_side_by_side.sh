#!/usr/bin/env bash
# Decode and prefill speed of one specd checkpoint in specd and in llama.cpp (its peer on the CPU),
# the two run alternately in the same session, with the ratios specd / llama.cpp per round and their
# medians. llama.cpp gets the same model converted once (tests/bench/specd_to_gguf.py: INT4
# dequantized, then llama-quantize to LLAMA_QTYPE) and cached in .cache/llama.cpp/models/.
#   tests/bench/llama_cpp_side_by_side.sh MODEL_DIR [BUILD_DIR] [-- SPECD_BENCH_DECODE_ARGS...]
#   e.g. tests/bench/llama_cpp_side_by_side.sh /tmp/llm4b -- --int4-activations int8 --lm-head int8
# Environment: ROUNDS (2), THREADS (2), PROMPT_LEN (512), TOKENS (32), LLAMA_QTYPE (Q4_0),
# SPECD_LLAMA_KEEP_F16=1 keeps the unquantized GGUF, SPECD_LLAMA_CPP_DIR (.cache/llama.cpp).
# Shapes: specd's `bench decode` prefills PROMPT_LEN random ids, then times TOKENS decode steps;
# llama-bench's pp PROMPT_LEN from an empty context and tg TOKENS at depth PROMPT_LEN (-d), one
# repetition each after its warmup.
# Needs the target specd built in BUILD_DIR (default: build). The peer, llama-bench, llama-quantize
# and the converter's venv, comes from `bash scripts/setup_llama_cpp.sh` (opt-in); without it this
# prints specd's side alone.
set -euo pipefail

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[[ $# -ge 1 && "$1" != "-h" && "$1" != "--help" ]] || usage

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
model="$(cd "$1" && pwd)"
shift
build="$repo/build"
if [[ $# -gt 0 && "$1" != "--" ]]; then
  build="$(cd "$1" && pwd)"
  shift
fi
[[ $# -gt 0 && "$1" == "--" ]] && shift
specd_args=("$@")

rounds="${ROUNDS:-2}"
threads="${THREADS:-2}"
prompt_len="${PROMPT_LEN:-512}"
tokens="${TOKENS:-32}"
qtype="${LLAMA_QTYPE:-Q4_0}"
specd="$build/cli/specd/specd"
peer_root="${SPECD_LLAMA_CPP_DIR:-$repo/.cache/llama.cpp}"
llama_bench="$peer_root/bin/llama-bench"
llama_quantize="$peer_root/bin/llama-quantize"
peer_python="$peer_root/venv/bin/python"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

[[ -x "$specd" ]] || { echo "no $specd; build the target specd first" >&2; exit 1; }
[[ -f "$model/config.json" ]] || { echo "$model has no config.json" >&2; exit 1; }

peer=0
if [[ -x "$llama_bench" && -x "$llama_quantize" && -x "$peer_python" ]]; then peer=1; fi

gguf=""
if ((peer)); then
  # one conversion per checkpoint: keyed by its path and its files' sizes and times
  key="$( (echo "$model"; cd "$model" && stat -c '%n %s %Y' config.json ./*.safetensors) |
    sha256sum | cut -c1-12)"
  dir="$peer_root/models/$(basename "$model")-$key"
  gguf="$dir/model-${qtype,,}.gguf"
  if [[ ! -s "$gguf" ]]; then
    mkdir -p "$dir"
    echo "converting $model for llama.cpp into $dir (once)"
    if [[ ! -s "$dir/model-f16.gguf" ]]; then
      "$peer_python" "$repo/tests/bench/specd_to_gguf.py" "$model" "$dir/model-f16.gguf" \
        >"$dir/convert.log" 2>&1 || { cat "$dir/convert.log" >&2; exit 1; }
    fi
    "$llama_quantize" "$dir/model-f16.gguf" "$gguf.part" "$qtype" "$threads" \
      >"$dir/quantize.log" 2>&1 || { tail -20 "$dir/quantize.log" >&2; exit 1; }
    mv "$gguf.part" "$gguf"
    [[ "${SPECD_LLAMA_KEEP_F16:-0}" == 1 ]] || rm -f "$dir/model-f16.gguf"
  fi
fi

# specd: "prefill  N tokens in X ms: Y tokens/s", "decode  X ms/token over N tokens: Y tokens/s"
run_specd() {
  local out="$work/specd.$1.txt"
  "$specd" bench decode --model "$model" --prompt-len "$prompt_len" --tokens "$tokens" \
    --threads "$threads" ${specd_args[@]+"${specd_args[@]}"} >"$out"
  [[ "$1" == 1 ]] && sed -n '/^model/p;/^threads/p' "$out"
  specd_prefill[$1]="$(sed -nE 's/^prefill .*: ([0-9.]+) tokens\/s$/\1/p' "$out")"
  specd_decode[$1]="$(sed -nE 's/^decode .*: ([0-9.]+) tokens\/s$/\1/p' "$out")"
  [[ -n "${specd_prefill[$1]}" && -n "${specd_decode[$1]}" ]] ||
    { echo "unexpected specd output:" >&2; cat "$out" >&2; exit 1; }
}

# llama-bench JSON: one object per test, avg_ts in tokens/s
json_ts() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[0]["avg_ts"])' "$1"; }
run_llama() {
  "$llama_bench" -m "$gguf" -p "$prompt_len" -n 0 -t "$threads" -r 1 -o json \
    >"$work/pp.$1.json" 2>"$work/pp.$1.err" || { cat "$work/pp.$1.err" >&2; exit 1; }
  "$llama_bench" -m "$gguf" -p 0 -n "$tokens" -d "$prompt_len" -t "$threads" -r 1 -o json \
    >"$work/tg.$1.json" 2>"$work/tg.$1.err" || { cat "$work/tg.$1.err" >&2; exit 1; }
  llama_prefill[$1]="$(json_ts "$work/pp.$1.json")"
  llama_decode[$1]="$(json_ts "$work/tg.$1.json")"
}

declare -a specd_prefill specd_decode llama_prefill llama_decode
shape="prompt $prompt_len, $tokens decode steps, $threads threads, $rounds rounds"
echo "shape: $shape${specd_args[*]+, specd ${specd_args[*]}}"
if ((peer)); then
  "$peer_python" - "$gguf" <<'EOF'
import sys, collections, gguf
r = gguf.GGUFReader(sys.argv[1])
types = {t.name: t.tensor_type.name for t in r.tensors}
count = collections.Counter(types.values())
head = types.get("output.weight", "tied to token_embd")
print(f"llama.cpp: {sys.argv[1]} ({sum(int(t.n_bytes) for t in r.tensors) / 2**30:.2f} GiB): "
      f"token_embd {types['token_embd.weight']}, output {head}; "
      + ", ".join(f"{n} {k}" for k, n in count.most_common()))
EOF
fi
for ((r = 1; r <= rounds; r++)); do
  # ABBA: odd rounds start with specd, even rounds with llama.cpp
  if ((peer && r % 2 == 0)); then run_llama "$r"; fi
  run_specd "$r"
  if ((peer && r % 2 == 1)); then run_llama "$r"; fi
  line="round $r: specd prefill ${specd_prefill[$r]}, decode ${specd_decode[$r]} tokens/s"
  if ((peer)); then
    line+="$(printf '; llama.cpp pp %.1f, tg %.2f tokens/s' \
      "${llama_prefill[$r]}" "${llama_decode[$r]}")"
  fi
  echo "$line"
done

for ((r = 1; r <= rounds; r++)); do
  echo "$r ${specd_prefill[$r]} ${specd_decode[$r]} ${llama_prefill[$r]:--} ${llama_decode[$r]:--}"
done >"$work/rounds.txt"
python3 - "$work/rounds.txt" <<'EOF'
import statistics, sys
rows = [[line.split()[0]] + [None if x == "-" else float(x) for x in line.split()[1:]]
        for line in open(sys.argv[1])]
med = statistics.median
print()
if rows[0][3] is None:
    print(f"{'round':<8}{'specd prefill':>16}{'specd decode':>16}   (tokens/s)")
    for r, sp, sd, _, _ in rows:
        print(f"{r:<8}{sp:>16.1f}{sd:>16.2f}")
    print(f"{'median':<8}{med(r[1] for r in rows):>16.1f}{med(r[2] for r in rows):>16.2f}")
    sys.exit(0)
head = ("round", "prefill specd", "llama.cpp", "ratio", "decode specd", "llama.cpp", "ratio")
print(f"{head[0]:<8}" + "".join(f"{h:>14}" for h in head[1:]) + "   (tokens/s)")
for r, sp, sd, lp, ld in rows:
    print(f"{r:<8}{sp:>14.1f}{lp:>14.1f}{sp / lp:>13.2f}x{sd:>14.2f}{ld:>14.2f}{sd / ld:>13.2f}x")
print(f"{'median':<8}{med(r[1] for r in rows):>14.1f}{med(r[3] for r in rows):>14.1f}"
      f"{med(r[1] / r[3] for r in rows):>13.2f}x{med(r[2] for r in rows):>14.2f}"
      f"{med(r[4] for r in rows):>14.2f}{med(r[2] / r[4] for r in rows):>13.2f}x")
print("ratio: specd / llama.cpp, per round and the median of the rounds (above 1: specd faster)")
EOF
if ((!peer)); then
  echo "llama.cpp: not set up (no $llama_bench); for the peer run: bash scripts/setup_llama_cpp.sh"
fi
