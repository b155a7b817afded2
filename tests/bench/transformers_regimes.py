"""Hugging Face transformers on the regimes of `specd bench spec` (short 64 → 128, medium
2048 → 256, long 8192 → 256 prompt → new tokens): the baseline users would otherwise run, on the
same shape as a specd checkpoint, in the same run as specd (scripts/gpu_check.sh).

    python3 tests/bench/transformers_regimes.py MODEL_DIR [--regimes short medium long]
        [--device cuda] [--dtype bfloat16] [--scale 1.0] [--seed 0]

MODEL_DIR is a specd target checkpoint; its config.json gives the shape. The weights are random
(transformers cannot read every specd checkpoint: a W4A16 one needs compressed-tensors), which
costs transformers nothing in time: greedy decoding of random prompts with the same number of
tokens. Prints one line per regime: prefill and total milliseconds, decode tokens/s.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
import transformers

# prompt → new tokens of each regime, as specd's common/engine/regime.cc defines them.
REGIMES = {"short": (64, 128), "medium": (2048, 256), "long": (8192, 256)}


def build(model_dir: str, device: str, dtype: torch.dtype) -> torch.nn.Module:
    """The model's shape from its config.json, random weights made on the device."""
    config = transformers.AutoConfig.from_pretrained(model_dir).get_text_config()
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the shape is what counts; the weights are random
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = transformers.AutoModelForCausalLM.from_config(config)
    finally:
        torch.set_default_dtype(previous)
    return model.eval()


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed_generate(model, prompt: torch.Tensor, new_tokens: int, device: str) -> float:
    """Milliseconds of a greedy generate() of exactly new_tokens tokens."""
    synchronize(device)
    start = time.perf_counter()
    with torch.inference_mode():
        output = model.generate(prompt, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                do_sample=False)
    synchronize(device)
    elapsed = (time.perf_counter() - start) * 1000
    assert output.shape[1] == prompt.shape[1] + new_tokens, output.shape
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model_dir")
    parser.add_argument("--regimes", nargs="+", choices=REGIMES, default=list(REGIMES))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply the regimes' token counts (e.g. 0.05 on a CPU)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    model = build(args.model_dir, args.device, getattr(torch, args.dtype))
    vocab = model.config.vocab_size
    random = torch.Generator().manual_seed(args.seed)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, {args.device}, "
          f"{args.dtype}, {sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters")
    # One short call first: kernels load and the allocator warms up outside the timings.
    timed_generate(model, torch.randint(0, vocab, (1, 8), generator=random).to(args.device), 2,
                   args.device)
    for name in args.regimes:
        prompt_tokens, new_tokens = (max(1, round(n * args.scale)) for n in REGIMES[name])
        prompt = torch.randint(0, vocab, (1, prompt_tokens), generator=random).to(args.device)
        prefill_ms = timed_generate(model, prompt, 1, args.device)
        total_ms = timed_generate(model, prompt, new_tokens, args.device)
        decode_rate = (new_tokens - 1) / max(total_ms - prefill_ms, 1e-9) * 1000
        print(f"{name:<6} {prompt_tokens} → {new_tokens} tokens  transformers  prefill "
              f"{prefill_ms:.1f} ms  total {total_ms:.1f} ms  decode {decode_rate:.1f} tok/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
