"""lm-eval scoring a task through specd's HTTP API (tests/interop/openai_test.cc runs this).

Usage: lm_eval_client.py BASE_URL API_KEY MODEL
Runs the task in lm_eval/ with lm-eval's `local-chat-completions` model as a user would (the key
in OPENAI_API_KEY, the chat template applied by the server), then asks specd the same questions
with the openai client: the replies lm-eval recorded must be specd's, and its score their
exact-match rate. Prints one line per check; exits non-zero on the first that fails.
"""
import os
import string
import sys
from pathlib import Path

import lm_eval
import openai
from lm_eval.tasks import TaskManager

from checks import check

TASK = "specd_tiny_qa"


def exact_match(reply, answer):
    """The task's metric: exact match, ignoring case and punctuation."""
    drop = str.maketrans("", "", string.punctuation)
    return reply.lower().translate(drop) == answer.lower().translate(drop)


def main() -> int:
    base_url, api_key, model = sys.argv[1:4]
    task_dir = Path(__file__).resolve().parent / "lm_eval"
    os.chdir(task_dir)  # the task names its data file relative to here
    os.environ["OPENAI_API_KEY"] = api_key
    evaluated = lm_eval.simple_evaluate(
        model="local-chat-completions",
        model_args={"base_url": f"{base_url}/chat/completions", "model": model,
                    "num_concurrent": 1, "max_retries": 1},
        tasks=[TASK], task_manager=TaskManager(include_path=str(task_dir)),
        apply_chat_template=True, log_samples=True)
    score = evaluated["results"][TASK]["exact_match,none"]
    samples = sorted(evaluated["samples"][TASK], key=lambda sample: sample["doc_id"])
    check("lm-eval scores every question", len(samples) == 8 and 0 <= score <= 1,
          (len(samples), score))

    client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
    replies = [client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": sample["doc"]["question"]}],
        max_tokens=16, temperature=0, stop=["\n"]).choices[0].message.content
        for sample in samples]
    recorded = [sample["resps"][0][0] for sample in samples]
    check("the replies it scored are specd's", recorded == replies, (recorded, replies))
    matches = [exact_match(reply, sample["doc"]["answer"])
               for reply, sample in zip(replies, samples)]
    check("its score is their exact-match rate", score == sum(matches) / len(matches),
          (score, matches))
    return 0


if __name__ == "__main__":
    sys.exit(main())
