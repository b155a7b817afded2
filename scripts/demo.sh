#!/usr/bin/env bash
# The main job for now (./specd.sh demo): what specd can already do end to end. It reads the three
# reference checkpoints beside the checkout (dense, W4A16, DFlash drafter) and takes a Qwen chat
# turn through the tokenizer and back, decodes with the dense target alone, then decodes
# speculatively: with the fixture's (random-weight, so rarely right) DFlash drafter and with the
# oracle drafter (the target's own continuation, τ = block size), each giving the target's ids.
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
echo "== specd generate --drafter oracle (the ceiling: every draft accepted)"
"$specd" generate --model "$fixtures/qwen35-tiny-a-w4a16" --drafter oracle --block-size 8 \
  --ids 5,17,42,99,7,256,3,18 --max-new-tokens 24 --ignore-eos --format json
echo "== the same target alone"
"$specd" generate --model "$fixtures/qwen35-tiny-a-w4a16" --ids 5,17,42,99,7,256,3,18 \
  --max-new-tokens 24 --ignore-eos --format json
