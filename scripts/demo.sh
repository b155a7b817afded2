#!/usr/bin/env bash
# The main job (./specd.sh demo): serve a trained pair. The pipeline's output — an INT4 QAD target
# and its GPTQ INT4 DFlash drafter, trained here from the pinned corpus (`specd pipeline`) — answers a
# chat turn speculatively and alone, with the same text, and then once more served: `specd serve
# --role all` (the embedded default) asked with `specctl`; the `smoke` preset is trained first
# when no pipeline output exists (SPECD_PIPELINE names another, e.g. a `tiny` one). Before that
# it shows the pieces on the reference checkpoints beside the checkout (dense, W4A16, DFlash
# drafter): the Qwen tokenizer and chat turn, target-only decoding, and speculative decoding with
# the fixture's random-weight drafter and with the oracle drafter (τ = block size).
set -euo pipefail
specd="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fixtures="$root/../shared/fixtures"
tokenizer="$root/.cache/tokenizer/qwen3/tokenizer.json"

for checkpoint in qwen35-tiny-a qwen35-tiny-a-w4a16 dflash-tiny-a; do
  echo "== specd inspect $checkpoint"
  "$specd" inspect "$fixtures/$checkpoint"
  echo
done

prompt=$'<|im_start|>user\nWhat makes speculative decoding lossless?<|im_end|>\n<|im_start|>assistant\n'
echo "== specd tokenize (a ChatML turn)"
ids="$("$specd" tokenize --tokenizer "$tokenizer" --text "$prompt" --format text)"
echo "$ids"
echo
echo "== specd detokenize (the same ids back)"
"$specd" detokenize --tokenizer "$tokenizer" --ids "${ids// /,}"

echo
echo "== specd generate (target-only greedy decoding of the dense fixture, 24 new tokens)"
"$specd" generate --model "$fixtures/qwen35-tiny-a" --ids 5,17,42,99,7,256,3,18 --max-new-tokens 24 \
  --ignore-eos --format json

echo
echo "== specd generate --drafter (the W4A16 fixture verifying its DFlash drafter: the same ids, with tau)"
"$specd" generate --model "$fixtures/qwen35-tiny-a-w4a16" --drafter "$fixtures/dflash-tiny-a" \
  --ids 5,17,42,99,7,256,3,18 --max-new-tokens 24 --ignore-eos --format json
echo "== specd generate --drafter oracle (the ceiling: every draft accepted; unguarded, as the oracle's"
echo "   drafts cost target forwards and the speculation guard would stop drafting)"
"$specd" generate --model "$fixtures/qwen35-tiny-a-w4a16" --drafter oracle --block-size 8 \
  --no-speculation-guard --ids 5,17,42,99,7,256,3,18 --max-new-tokens 24 --ignore-eos --format json
echo "== the same target alone"
"$specd" generate --model "$fixtures/qwen35-tiny-a-w4a16" --ids 5,17,42,99,7,256,3,18 \
  --max-new-tokens 24 --ignore-eos --format json

pipeline="${SPECD_PIPELINE:-$root/.cache/pipeline-smoke}"
if [[ ! -f "$pipeline/report.json" ]]; then
  echo
  echo "== specd pipeline --preset smoke (no trained pair in $pipeline yet: a few minutes)"
  "$specd" pipeline --preset smoke --out "$pipeline" >/dev/null
fi
echo
echo "== the trained pair ($pipeline/report.md)"
cat "$pipeline/report.json"
# What the pair is worth, measured by the pipeline on its held-out prompts (decode tokens per
# second with and without the drafter, timed in alternation). A pair that loses is not served.
read -r speedup tau < <(python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
print("%.2f %.2f" % (r["speedup"], r["tau_gptq"]))' "$pipeline/report.json")
drafter_flags=(--drafter "$pipeline/drafter-gptq")
if awk -v speedup="$speedup" 'BEGIN { exit !(speedup >= 1) }'; then
  echo "== the pair decodes ${speedup}x as fast as its target alone on held-out prompts (tau $tau)"
else
  echo "== the pair decodes ${speedup}x as fast as its target alone (tau $tau): serving the target alone"
  drafter_flags=()
fi
turn=$'<|im_start|>user\nContinue this Python code:\nimport os\n\ndef main():<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n'
echo "== specd generate: the INT4 QAD target verifying its INT4 GPTQ drafter"
"$specd" generate --model "$pipeline/qad/best" --drafter "$pipeline/drafter-gptq" --prompt "$turn" \
  --max-new-tokens 96 --format json
echo "== the same target alone (the same text, slower)"
"$specd" generate --model "$pipeline/qad/best" --prompt "$turn" --max-new-tokens 96 --format json

# The same pair served: the embedded default (verifier, drafter and orchestrator in one process),
# asked through the gRPC API with specctl. The text is the one above.
specctl="$(dirname "$specd")/../specctl/specctl"
log="$(mktemp)"
"$specd" serve --role all --model "$pipeline/qad/best" "${drafter_flags[@]}" \
  --host 127.0.0.1 --port 0 --metrics-port 0 2>"$log" &
server=$!
trap 'kill "$server" 2>/dev/null || true; rm -f "$log"' EXIT
until grep -q "specd serve: all serving" "$log"; do
  kill -0 "$server" 2>/dev/null || { cat "$log"; exit 1; }
  sleep 0.2
done
address="$(grep -o ' on [0-9.]*:[0-9]*' "$log" | head -1 | cut -c5-)"
echo
echo "== specd serve --role all on $address; specctl generate --stream"
"$specctl" --addr "$address" health
"$specctl" --addr "$address" generate "$turn" --max-new-tokens 96 --temperature 0 --stream
kill -TERM "$server"
wait "$server"
