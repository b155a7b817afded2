"""Speculation by prompt family on the served loop (issue 20): target-only, DFlash, suffix and
suffix + DFlash, each with and without the speculation guard, at concurrency 1 and 16.

Every configuration is a `specd serve --role all` of its own, all started at once and idle but
for the one being measured; each round runs every configuration once per family and concurrency,
in turn, starting with another one each round, so a noisy machine slows them alike. Prints, per
family and concurrency, medians over rounds of: tokens/s (completion tokens over wall time, all
clients together, prefill included), tokens per verify step (τ including the guard's target-only
steps), the decode speed (a request's tokens after its first over the time from its first to its
last, averaged over the clients: what speculation changes; with long prompts at 16 clients most
of the wall time is prefill), and each speed's ratio to target-only's in the same round.

    .cache/python/bin/python tests/bench/speculation_by_family.py PIPELINE_DIR \\
        [--new-tokens 128] [--rounds 3] [--concurrency 1 16] [--families F...] [--configs C...]

PIPELINE_DIR is what `specd pipeline` wrote (its qad/best target, drafter-gptq and tokenizer).
Families: repetitive filler (the competition's latency prompts repeat one sentence), code and
prose (text of the pinned corpus: a module's head, a docstring) and a long context (1500 bytes
of a module, as many tokens for the pipeline's byte-level models). Greedy, so every
configuration gives the same text; the script checks that it does.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import contextlib
import dataclasses
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from specd_client import Client, SpecdError

ROOT = Path(__file__).resolve().parents[2]
SPECD = Path(os.environ.get("SPECD", ROOT / "build/cli/specd/specd"))
CORPUS = ROOT / ".cache/corpus/networkx-3.6.1/networkx"


def family_prompts() -> dict[str, str]:
    cycles = (CORPUS / "algorithms/cycles.py").read_text().splitlines()
    docstring_start = next(i for i, line in enumerate(cycles) if line.startswith("def simple_cycles"))
    weighted = (CORPUS / "algorithms/shortest_paths/weighted.py").read_bytes()[:1500].decode()
    return {
        "repetitive": "Continue the following text.\n\n"
        + "The quick brown fox jumps over the lazy dog. " * 8,
        "code": "Continue this document from where it stops.\n\n" + "\n".join(cycles[:14]),
        "prose": "Continue the following text.\n\n"
        + "\n".join(cycles[docstring_start + 1 : docstring_start + 22]),
        "long": "Continue this document from where it stops.\n\n" + weighted,
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Server:
    """One `specd serve --role all`, stopped on exit."""

    def __init__(self, pipeline: Path, drafter: str | None, guard: bool, max_running: int):
        self.port = free_port()
        command = [
            str(SPECD), "serve", "--role", "all", "--model", str(pipeline / "qad/best"),
            "--tokenizer", str(pipeline / "tokenizer/tokenizer.json"), "--port", str(self.port),
            "--max-running", str(max_running), "--max-waiting", str(4 * max_running),
        ]  # fmt: skip
        if drafter is not None:
            command += ["--drafter", drafter]
        if not guard:
            command.append("--no-speculation-guard")
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.client = Client(f"127.0.0.1:{self.port}", timeout=600)
        for _ in range(600):
            if self.process.poll() is not None:
                raise RuntimeError(f"{command} exited: {self.process.stderr.read().decode()}")
            with contextlib.suppress(SpecdError):
                self.client.model_info()
                return
            time.sleep(0.1)
        raise RuntimeError(f"{command} did not come up")

    def close(self) -> None:
        self.client.close()
        self.process.terminate()
        self.process.wait()


@dataclasses.dataclass(frozen=True)
class Cell:
    """One configuration's requests at once, measured."""

    speed: float  # completion tokens over wall time
    per_step: float  # tokens per verify step, the first token aside
    decode_speed: float  # a request's tokens after its first over its decode time, averaged

    @classmethod
    def of(cls, seconds: float, completions: list) -> Cell:
        tokens = sum(c.usage.completion_tokens for c in completions)
        steps = sum(
            c.acceptance.num_drafts + c.acceptance.num_target_only_steps for c in completions
        )
        decode = [
            (c.usage.completion_tokens - 1) / c.timing.decode_time.total_seconds()
            for c in completions
        ]
        return cls(
            speed=tokens / seconds,
            per_step=(tokens - len(completions)) / steps if steps else 1.0,
            decode_speed=statistics.fmean(decode),
        )


def medians(cells: list[Cell], plain: list[Cell], field: str) -> tuple[float, float]:
    """`field`'s median over rounds, and that of its ratio to target-only's in the same round."""
    values = [getattr(cell, field) for cell in cells]
    ratios = [value / getattr(cell, field) for value, cell in zip(values, plain)]
    return statistics.median(values), statistics.median(ratios)


def run_cell(server: Server, prompt: str, new_tokens: int, clients: int):
    """`clients` requests at once; (wall seconds, completions)."""

    def one(_):
        return server.client.generate(
            [{"role": "user", "content": prompt}], enable_thinking=False,
            max_new_tokens=new_tokens, ignore_eos=True, temperature=0,
        )  # fmt: skip

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        completions = list(pool.map(one, range(clients)))
    return time.perf_counter() - start, completions


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pipeline", type=Path)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--families", nargs="+", help="those to run (default: every family)")
    parser.add_argument(
        "--configs", nargs="+", help="those to run beside target-only, e.g. 'suffix guarded'"
    )
    args = parser.parse_args()

    drafter = str(args.pipeline / "drafter-gptq")
    configs = {"target-only": (None, False)}
    for name, spec in (("dflash", drafter), ("suffix", "suffix"), ("suffix+dflash", f"suffix+{drafter}")):
        configs[name] = (spec, False)
        configs[f"{name} guarded"] = (spec, True)
    prompts = family_prompts()
    for chosen, known, what in ((args.families, prompts, "family"), (args.configs, configs, "config")):
        unknown = set(chosen or []) - set(known)
        if unknown:
            parser.error(f"unknown {what}: {', '.join(sorted(unknown))}; known: {', '.join(known)}")
    if args.families:
        prompts = {family: prompts[family] for family in args.families}
    if args.configs:
        configs = {name: configs[name] for name in ["target-only", *args.configs]}
    servers: dict[str, Server] = {}
    try:
        for name, (spec, guard) in configs.items():
            servers[name] = Server(args.pipeline, spec, guard, max(args.concurrency))
        # (family, clients, config) → [Cell], and each one's texts.
        runs = collections.defaultdict(list)
        texts: dict[tuple[str, str], set[str]] = collections.defaultdict(set)
        for server in servers.values():  # pages the weights in
            run_cell(server, next(iter(prompts.values())), 8, 1)
        names = list(servers)
        for round_index in range(args.rounds):
            # Each round starts with another configuration, so none always follows the same one.
            shift = round_index % len(names)
            for family, prompt in prompts.items():
                for clients in args.concurrency:
                    for name in names[shift:] + names[:shift]:
                        seconds, completions = run_cell(
                            servers[name], prompt, args.new_tokens, clients
                        )
                        runs[family, clients, name].append(Cell.of(seconds, completions))
                        texts[family, name].update(c.text for c in completions)
    finally:
        for server in servers.values():
            server.close()

    print(f"{args.new_tokens} new tokens, {args.rounds} rounds, medians")
    print("| family | clients | configuration | tokens/s | tokens/step | × target-only "
          "| decode tokens/s per request | × target-only |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    same = True
    for family in prompts:
        reference = texts[family, "target-only"]
        for clients in args.concurrency:
            plain = runs[family, clients, "target-only"]
            for name in configs:
                cells = runs[family, clients, name]
                speed, speed_ratio = medians(cells, plain, "speed")
                per_step, _ = medians(cells, plain, "per_step")
                decode, decode_ratio = medians(cells, plain, "decode_speed")
                print(
                    f"| {family} | {clients} | {name} | {speed:.0f} | {per_step:.2f} "
                    f"| {speed_ratio:.2f} | {decode:.1f} | {decode_ratio:.2f} |"
                )
        for name in configs:
            if texts[family, name] != reference:
                print(f"{family}: {name} gave other text than target-only", file=sys.stderr)
                same = False
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
