"""Rejection sampling against sample and match on the served loop (issue 20): at temperature 1,
the pipeline's DFlash pair drafts each family's prompt under both acceptance rules, the same seeds
for both, and a target-only server decodes the same requests.

Both rules run on one `specd serve --role all` (a request names its rule in
speculation.draft_acceptance), with full blocks so that τ is the rules' alone (--guard: with the
speculation guard choosing them, for the speeds users get); each round runs every family under every
configuration in turn, starting with another one each round. Prints per family: tokens per
verify step τ (the median over rounds of all seeds together), tokens/s (completion tokens over
wall time) and the ratio to target-only.

    .cache/python/bin/python tests/bench/rejection_sampling.py PIPELINE_DIR \\
        [--new-tokens 128] [--seeds 4] [--rounds 3] [--temperature 1] [--guard]

PIPELINE_DIR is what `specd pipeline` wrote (its qad/best target, drafter-gptq and tokenizer).
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import time
from pathlib import Path

from speculation_by_family import Server, family_prompts

RULES = ("match", "rejection-sampling")


def run(server: Server, prompt: str, rule: str | None, seeds: int, new_tokens: int,
        temperature: float):
    """Seeds 0 … seeds − 1, one request after another: (tokens/s, tokens per verify step)."""
    tokens = steps = 0
    seconds = 0.0
    for seed in range(seeds):
        start = time.perf_counter()
        completion = server.client.generate(
            [{"role": "user", "content": prompt}], enable_thinking=False,
            max_new_tokens=new_tokens, ignore_eos=True, temperature=temperature, seed=seed,
            speculation={"draft_acceptance": rule} if rule else None,
        )  # fmt: skip
        seconds += time.perf_counter() - start
        tokens += completion.usage.completion_tokens
        steps += completion.acceptance.num_drafts + completion.acceptance.num_target_only_steps
    return tokens / seconds, (tokens - seeds) / steps if steps else 1.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pipeline", type=Path)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--guard", action="store_true")
    args = parser.parse_args()

    prompts = family_prompts()
    plain = Server(args.pipeline, None, guard=False, max_running=1)
    paired = Server(args.pipeline, str(args.pipeline / "drafter-gptq"), args.guard, max_running=1)
    runs = collections.defaultdict(list)  # (family, configuration) → [(tokens/s, τ)]
    try:
        for server in (plain, paired):  # pages the weights in
            run(server, prompts["repetitive"], None, 1, 8, args.temperature)
        configurations = [("target-only", plain, None)] + [(rule, paired, rule) for rule in RULES]
        for round_index in range(args.rounds):
            # Each round starts with another configuration, so none always follows the same one.
            shift = round_index % len(configurations)
            order = configurations[shift:] + configurations[:shift]
            for family, prompt in prompts.items():
                for name, server, rule in order:
                    cell = run(server, prompt, rule, args.seeds, args.new_tokens, args.temperature)
                    runs[family, name].append(cell)
    finally:
        plain.close()
        paired.close()

    print(f"temperature {args.temperature}, {args.new_tokens} new tokens × {args.seeds} seeds, "
          f"{args.rounds} rounds, {'guarded' if args.guard else 'full'} blocks, medians")
    print("| family | acceptance | τ (tokens/step) | tokens/s | × target-only |")
    print("|---|---|---|---|---|")
    for family in prompts:
        base = statistics.median(s for s, _ in runs[family, "target-only"])
        for name in ("target-only", *RULES):
            speed = statistics.median(s for s, _ in runs[family, name])
            tau = statistics.median(t for _, t in runs[family, name])
            print(f"| {family} | {name} | {tau:.2f} | {speed:.0f} | {speed / base:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
