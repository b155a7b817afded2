"""A drafter head over a pruned vocabulary (issue 20) on the served loop: the pipeline's DFlash
drafter with its whole head and pruned to the K tokens its training data has most often
(`specd drafter prune-vocab`), for a few K, on each prompt family, greedy, full blocks.

Every configuration is a `specd serve --role all` of its own; each round runs every family under
every configuration in turn, starting with another one each round. Prints per family: τ (tokens per
verify step), the drafter's time per drafted step, tokens/s and the ratio to the whole head; and
checks that every configuration gives the same text (verification keeps the full head).

    .cache/python/bin/python tests/bench/pruned_vocabulary.py PIPELINE_DIR \\
        [--keep 16 32 64] [--new-tokens 128] [--rounds 3]

PIPELINE_DIR is what `specd pipeline` wrote: its qad/best target, drafter-gptq, the packed data the
drafter was trained on (data/teacher-chat, data/qad-chat) and tokenizer.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from speculation_by_family import SPECD, Server, family_prompts


def run(server: Server, prompt: str, new_tokens: int):
    """One greedy request: (tokens/s, τ, draft ms per drafted step, text)."""
    start = time.perf_counter()
    completion = server.client.generate(
        [{"role": "user", "content": prompt}], enable_thinking=False,
        max_new_tokens=new_tokens, ignore_eos=True, temperature=0,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    acceptance = completion.acceptance
    steps = acceptance.num_drafts + acceptance.num_target_only_steps
    tokens = completion.usage.completion_tokens
    draft_ms = completion.timing.draft_time.total_seconds() * 1000 / max(1, acceptance.num_drafts)
    return tokens / seconds, (tokens - 1) / steps if steps else 1.0, draft_ms, completion.text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pipeline", type=Path)
    parser.add_argument("--keep", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    drafter = args.pipeline / "drafter-gptq"
    data = [args.pipeline / "data/teacher-chat", args.pipeline / "data/qad-chat"]
    prompts = family_prompts()
    servers: dict[str, Server] = {}
    with tempfile.TemporaryDirectory() as scratch:
        drafters = {"whole head": drafter}
        for keep in args.keep:
            out = Path(scratch) / f"keep-{keep}"
            command = [str(SPECD), "drafter", "prune-vocab", "--drafter", str(drafter),
                       "--keep", str(keep), "--out", str(out)]  # fmt: skip
            for packed in data:
                command += ["--data", str(packed)]
            subprocess.run(command, check=True)
            drafters[f"K = {keep}"] = out
        runs = collections.defaultdict(list)  # (family, configuration) → [(tokens/s, τ, ms)]
        texts: dict[tuple[str, str], set[str]] = collections.defaultdict(set)
        try:
            for name, path in drafters.items():
                servers[name] = Server(args.pipeline, str(path), guard=False, max_running=1)
                run(servers[name], prompts["repetitive"], 8)  # pages the weights in
            names = list(servers)
            for round_index in range(args.rounds):
                shift = round_index % len(names)
                for family, prompt in prompts.items():
                    for name in names[shift:] + names[:shift]:
                        *numbers, text = run(servers[name], prompt, args.new_tokens)
                        runs[family, name].append(numbers)
                        texts[family, name].add(text)
        finally:
            for server in servers.values():
                server.close()

    print(f"greedy, {args.new_tokens} new tokens, full blocks, {args.rounds} rounds, medians")
    print("| family | drafter head | τ | draft ms/step | tokens/s | × whole head |")
    print("|---|---|---|---|---|---|")
    same = True
    for family in prompts:
        base = statistics.median(r[0] for r in runs[family, "whole head"])
        for name in servers:
            speed, tau, draft_ms = (statistics.median(r[i] for r in runs[family, name]) for i in range(3))
            print(f"| {family} | {name} | {tau:.2f} | {draft_ms:.2f} | {speed:.0f} | {speed / base:.2f} |")
            if texts[family, name] != texts[family, "whole head"]:
                print(f"{family}: {name} gave other text than the whole head", file=sys.stderr)
                same = False
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
