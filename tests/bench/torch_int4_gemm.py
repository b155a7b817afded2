"""PyTorch's own W4A16 kernel (torch._weight_int4pack_mm, tinygemm) on the Qwen3.5-4B linear
shapes: the peer of specd's W4A16Gemm in tests/gpu/w4a16_gemm_gpu_bench.cc, measured the same
way in the same run (scripts/gpu_check.sh): bf16 activations, group 128, each call on another
copy of its operands spread over 1 GiB so that the weights come from HBM as in a decode step,
the median of 25 event-timed batches of 20 back-to-back calls.

    python3 tests/bench/torch_int4_gemm.py      (needs a CUDA device)
"""

from __future__ import annotations

import statistics
import sys

import torch

# name, in (K), out (N), layers of the 4B body that have it: as in w4a16_gemm_gpu_bench.cc.
SHAPES = [
    ("attn.q_proj", 2560, 8192, 8), ("attn.k_proj", 2560, 1024, 8),
    ("attn.v_proj", 2560, 1024, 8), ("attn.o_proj", 4096, 2560, 8),
    ("gdn.in_proj_qkv", 2560, 8192, 24), ("gdn.in_proj_z", 2560, 4096, 24),
    ("gdn.out_proj", 4096, 2560, 24), ("mlp.gate_proj", 2560, 9216, 32),
    ("mlp.up_proj", 2560, 9216, 32), ("mlp.down_proj", 9216, 2560, 32),
]
ROWS = [1, 2, 4, 8, 16]
GROUP = 128
INNER_K_TILES = 8
ARENA_BYTES = 1 << 30


def operand_copies(n: int, k: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Packed weights and scales-and-zeros of one shape, as many copies as fill the arena."""
    nibbles = torch.randint(0, 16, (n, k), dtype=torch.uint8, device="cuda")
    packed = torch._convert_weight_to_int4pack((nibbles[:, ::2] << 4) | nibbles[:, 1::2],
                                               INNER_K_TILES)
    scales_and_zeros = torch.rand(k // GROUP, n, 2, dtype=torch.bfloat16, device="cuda") * 0.02
    per_copy = packed.numel() * packed.element_size() + scales_and_zeros.numel() * 2
    return [(packed.clone(), scales_and_zeros.clone())
            for _ in range(max(2, ARENA_BYTES // per_copy))]


def median_micros(call) -> float:
    """Median µs of one call over 25 event-timed batches of 20, after a warm-up batch."""
    samples = []
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for sample in range(26):
        start.record()
        for i in range(20):
            call(sample * 20 + i)
        stop.record()
        stop.synchronize()
        if sample > 0:
            samples.append(start.elapsed_time(stop) * 1000 / 20)
    return statistics.median(samples)


def main() -> int:
    if not torch.cuda.is_available():
        print("torch_int4_gemm: no CUDA device", file=sys.stderr)
        return 1
    print(f"torch._weight_int4pack_mm (tinygemm) on {torch.cuda.get_device_name()}, torch "
          f"{torch.__version__}; group {GROUP}, operands cycled over 1 GiB")
    print(f"{'shape':<16} {'N':>5} {'K':>5} " + " ".join(f"{f'M {m} us':>9}" for m in ROWS))
    body = [0.0] * len(ROWS)
    for name, k, n, layers in SHAPES:
        copies = operand_copies(n, k)
        times = []
        for r, m in enumerate(ROWS):
            x = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
            micros = median_micros(lambda i: torch._weight_int4pack_mm(
                x, copies[i % len(copies)][0], GROUP, copies[i % len(copies)][1]))
            times.append(micros)
            body[r] += layers * micros
        print(f"{name:<16} {n:>5} {k:>5} " + " ".join(f"{t:>9.2f}" for t in times))
        del copies
        torch.cuda.empty_cache()
    print("4B body linears, back-to-back launches: " +
          "  ".join(f"M {m}: {t / 1000:.3f} ms" for m, t in zip(ROWS, body)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
