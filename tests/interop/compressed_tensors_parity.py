"""W4A16 checkpoints written by `specd quantize`, loaded by transformers with compressed-tensors
(tests/interop/transformers_test.cc runs this).

Usage: compressed_tensors_parity.py SPECD_BINARY WORK_DIR
For each quantization below, a dense model transformers saved (qwen35_family.py) is quantized by
`specd quantize`; transformers loads the result as users do (from_pretrained, which hands the
pack-quantized tensors to compressed-tensors) and must give specd's logits on the same ids, and
logits that differ from the dense model's (it really ran INT4 weights). Prints one line per
quantization; exits non-zero on the first that fails.
"""
import subprocess
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

from checks import check
from qwen35_family import FAMILY, build, forward, relative_difference, save, specd_forward

# Max |Δlogit| as a fraction of transformers' largest |logit|: both sides multiply float32
# activations by the same dequantized weights, (q - zero point) × bf16 scale, summed in another
# order. Seen: at most 1.1e-4 (asymmetric), where the INT4 and the dense model's logits differ
# by 0.9 (random weights on a 4-bit grid).
TOLERANCE = 5e-4
LENGTH = 32

QUANTIZATIONS = [  # (name, member index in FAMILY, specd quantize flags)
    ("symmetric, groups of 16", 1, ["--group-size", "16"]),
    ("asymmetric, groups of 16", 1, ["--group-size", "16", "--asymmetric"]),
    ("symmetric, one scale per row, multimodal layout", 2, ["--group-size", "0"]),
    ("asymmetric, groups of 32, from bf16", 3, ["--group-size", "32", "--asymmetric"]),
]


def main() -> int:
    binary, work = sys.argv[1], Path(sys.argv[2])
    for number, (name, index, flags) in enumerate(QUANTIZATIONS):
        member = FAMILY[index]
        dense_dir, int4_dir = work / f"dense-{number}", work / f"w4a16-{number}"
        dense = save(build(member, index), member, dense_dir)
        quantized = subprocess.run([binary, "quantize", "--model", str(dense_dir), "--method",
                                    "rtn", *flags, "--out", str(int4_dir)],
                                   capture_output=True, text=True)
        check(f"{name}: specd quantize writes it", quantized.returncode == 0, quantized.stderr)

        auto = AutoModelForImageTextToText if member.multimodal else AutoModelForCausalLM
        loaded = auto.from_pretrained(int4_dir, dtype=torch.float32).eval()
        vocab = loaded.config.get_text_config().vocab_size
        ids = torch.randint(2, vocab, (LENGTH,), generator=torch.Generator().manual_seed(index))
        ids = ids.tolist()
        logits, _ = forward(loaded, ids)
        specd = specd_forward(binary, int4_dir, ids, work / "logits.safetensors")["logits"]
        difference = relative_difference(specd, logits)
        from_dense = relative_difference(forward(dense, ids)[0], logits)
        check(f"{name}: transformers loads it and gives specd's logits",
              difference <= TOLERANCE < from_dense,
              {"specd": difference, "the dense model": from_dense})
    return 0


if __name__ == "__main__":
    sys.exit(main())
