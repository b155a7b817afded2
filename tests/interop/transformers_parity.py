"""specd's forward against transformers' on models transformers built and saved
(tests/interop/transformers_test.cc runs this).

Usage: transformers_parity.py SPECD_BINARY WORK_DIR
For every member of the family (qwen35_family.py): transformers saves it with save_pretrained and
computes logits and hidden states in float32; `specd forward` loads the saved directory and must
give the same on the prefill path, one token at a time after a prefill, and as one verify block on
the warm cache. Prints one line per member; exits non-zero on the first that differs.
"""
import sys
from pathlib import Path

import torch

from checks import check
from qwen35_family import FAMILY, build, forward, relative_difference, save, specd_forward

# Max |Δ| in logits and hidden states as a fraction of transformers' largest |value| (logits reach
# about ±40 here): float32 on both sides, summed in another order. Seen: at most 4e-5.
TOLERANCE = 2e-4
LENGTH, SPLIT = 40, 24


def main() -> int:
    binary, work = sys.argv[1], Path(sys.argv[2])
    for seed, member in enumerate(FAMILY):
        directory = work / f"member-{seed}"
        model = save(build(member, seed), member, directory)
        vocab = model.config.get_text_config().vocab_size
        ids = torch.randint(2, vocab, (LENGTH,), generator=torch.Generator().manual_seed(seed))
        ids = ids.tolist()
        logits, hidden_states = forward(model, ids)

        prefill = specd_forward(binary, directory, ids, work / "prefill.safetensors",
                                "--hidden-states")
        decode = specd_forward(binary, directory, ids, work / "decode.safetensors",
                               "--split", SPLIT)
        block = specd_forward(binary, directory, ids, work / "block.safetensors",
                              "--split", SPLIT, "--block-len", LENGTH - SPLIT)
        differences = {
            "prefill": relative_difference(prefill["logits"], logits),
            "hidden states": relative_difference(prefill["hidden_states"], hidden_states),
            "decode": relative_difference(decode["logits"], logits[SPLIT:]),
            "verify block": relative_difference(block["logits"], logits[SPLIT:]),
        }
        check(f"{member.name}: specd's logits and hidden states are transformers'",
              max(differences.values()) <= TOLERANCE, differences)
    return 0


if __name__ == "__main__":
    sys.exit(main())
