"""specd's gRPC API as its own Python client (clients/python, installed by scripts/setup.sh into
.cache/python) sees it (tests/interop/python_client_test.cc runs this).

Usage: python_client.py generation ADDRESS API_KEY
       python_client.py jobs ADDRESS API_KEY PACK_CONFIG TLS_CA TLS_CERT TLS_KEY SERVER_NAME
The first drives `specd serve --role all` (with the Qwen3 tokenizer), the second a trainer that
takes only clients with a certificate TLS_CA signs, its own naming SERVER_NAME only. Prints one
line per check; exits non-zero on the first that fails.
"""
import os
import sys
import time

import grpc
from specd_client import Client, SpecdError

from checks import check


def refused(call):
    """The SpecdError `call` raises; None if it succeeds."""
    try:
        call()
    except SpecdError as error:
        return error
    return None


def generation(address, api_key):
    client = Client(address, api_key=api_key)
    info = client.model_info()
    check("model info describes the served model",
          info.model_name == "specd" and info.vocab_size == 151936
          and info.drafter_block_size > 1 and info.default_sampling_params["temperature"] == 1.0,
          info)

    # Greedy throughout: the random model samples ids past the tokenizer's vocabulary, which the
    # server refuses to detokenize.
    greedy = {"temperature": 0, "max_new_tokens": 12, "ignore_eos": True}
    whole = client.generate("def fibonacci(n):", **greedy)
    check("generate returns ids, text and usage",
          whole.finish_reason == "length" and len(whole.token_ids) == 12
          and whole.usage.completion_tokens == 12 and whole.usage.prompt_tokens > 0
          and whole.regime == "short" and whole.timing is not None, whole)
    chunks = list(client.stream("def fibonacci(n):", **greedy))
    check("a greedy stream adds up to generate",
          [i for c in chunks for i in c.token_ids] == whole.token_ids
          and "".join(c.text for c in chunks) == whole.text and chunks[-1].usage == whole.usage,
          ([c.token_ids for c in chunks], whole.token_ids))
    check("only its last message finishes",
          [c.finish_reason for c in chunks] == [None] * (len(chunks) - 1) + ["length"],
          [c.finish_reason for c in chunks])
    check("drafted steps are counted",
          whole.acceptance.num_drafts > 0 and sum(whole.acceptance_lengths) <= 12
          and len(whole.acceptance_lengths) == whole.acceptance.num_drafts, whole.acceptance)

    chat = client.generate([{"role": "user", "content": "Name three colours."}],
                           enable_thinking=False, **greedy)
    ids = client.generate([1, 2, 3], return_prompt_token_ids=True, **greedy)
    check("a conversation and token ids are prompts too",
          len(chat.token_ids) == 12 and chat.usage.prompt_tokens > 4
          and ids.prompt_token_ids == [1, 2, 3], (chat, ids))

    longest = info.max_context_length - 3
    stream = client.stream([1, 2, 3], request_id="python-abort", temperature=0,
                           max_new_tokens=longest, ignore_eos=True)
    first = next(stream)
    aborted = client.abort("python-abort", reason="enough")
    rest = list(stream)
    check("abort stops a request in flight",
          aborted and first.request_id == "python-abort" and rest[-1].finish_reason == "abort"
          and rest[-1].usage.completion_tokens < longest, (aborted, rest[-1:]))
    check("aborting it again finds nothing", client.abort("python-abort") is False)

    error = refused(lambda: client.generate([info.vocab_size]))
    check("a bad argument raises INVALID_ARGUMENT naming it",
          error is not None and error.code == grpc.StatusCode.INVALID_ARGUMENT
          and error.message.startswith("prompt"), error)
    error = refused(Client(address, api_key="wrong").model_info)
    check("a wrong key raises UNAUTHENTICATED",
          error is not None and error.code == grpc.StatusCode.UNAUTHENTICATED, error)
    os.environ.pop("SPECD_API_KEY", None)
    error = refused(Client(address).model_info)
    os.environ["SPECD_API_KEY"] = api_key
    check("the key defaults to SPECD_API_KEY",
          error is not None and error.code == grpc.StatusCode.UNAUTHENTICATED
          and Client(address).model_info() == info, error)


def wait_until_terminal(client, job_id, seconds=120):
    deadline = time.monotonic() + seconds
    while not (job := client.jobs.get(job_id)).terminal and time.monotonic() < deadline:
        time.sleep(0.2)
    return job


def jobs(address, api_key, pack_config, tls_ca, tls_cert, tls_key, tls_server_name):
    certified = {"tls_ca": tls_ca, "tls_cert": tls_cert, "tls_key": tls_key}
    error = refused(Client(address, api_key=api_key, **certified).jobs.list)
    check("a trainer reached by address is checked against its name",
          error is not None and error.code == grpc.StatusCode.UNAVAILABLE, error)
    certified["tls_server_name"] = tls_server_name
    error = refused(Client(address, api_key=api_key, tls_ca=tls_ca,
                           tls_server_name=tls_server_name).jobs.list)
    check("without a client certificate the trainer refuses",
          error is not None and error.code == grpc.StatusCode.UNAVAILABLE, error)
    error = refused(Client(address, api_key="wrong", **certified).jobs.list)
    check("a wrong key raises UNAUTHENTICATED",
          error is not None and error.code == grpc.StatusCode.UNAUTHENTICATED, error)

    client = Client(address, api_key=api_key, **certified)
    with open(pack_config) as file:
        config = file.read()
    submitted = client.jobs.submit("pack", config, submission_id="pack-1", labels={"by": "python"})
    pack = submitted.job
    check("a submitted job is created",
          submitted.created and pack.type == "pack" and pack.labels == {"by": "python"}
          and pack.state in ("queued", "running"), submitted)
    again = client.jobs.submit("pack", config, submission_id="pack-1", labels={"by": "python"})
    check("submitting it again returns the same job",
          not again.created and again.job.job_id == pack.job_id, again)
    error = refused(lambda: client.jobs.submit("pack", config + "lr_sched: cosine\n"))
    check("a config the stage rejects raises INVALID_ARGUMENT",
          error is not None and error.code == grpc.StatusCode.INVALID_ARGUMENT
          and "lr_sched" in error.message, error)

    # The trainer runs one job at a time: this one waits behind the pack job, or runs.
    pipeline = client.jobs.submit("pipeline", "preset: smoke\n").job
    cancelled = client.jobs.cancel(pipeline.job_id, reason="enough")
    check("a cancelled job stops", cancelled.state in ("cancelling", "cancelled"), cancelled)
    listed = [job.job_id for job in client.jobs.list()]
    packs = [job.job_id for job in client.jobs.list(types=["pack"])]
    check("jobs are listed newest first, filtered by type",
          listed == [pipeline.job_id, pack.job_id] and packs == [pack.job_id], (listed, packs))

    lines = list(client.jobs.logs(pack.job_id, follow=True))
    check("a followed log ends when its job does",
          [line.line_number for line in lines] == list(range(len(lines)))
          and "ended (exit status 0)" in lines[-1].text, lines[-3:])
    check("its tail is its last lines", list(client.jobs.logs(pack.job_id, tail=1)) == lines[-1:])
    pack = client.jobs.get(pack.job_id)
    check("the job succeeded",
          pack.state == "succeeded" and pack.terminal and pack.exit_code == 0
          and pack.end_time is not None, pack)
    error = refused(lambda: client.jobs.cancel(pack.job_id))
    check("a finished job cannot be cancelled",
          error is not None and error.code == grpc.StatusCode.FAILED_PRECONDITION, error)
    pipeline = wait_until_terminal(client, pipeline.job_id)
    check("the cancelled job ends cancelled", pipeline.state == "cancelled", pipeline)
    error = refused(lambda: client.jobs.get("no-such-job"))
    check("an unknown job is NOT_FOUND",
          error is not None and error.code == grpc.StatusCode.NOT_FOUND, error)


if __name__ == "__main__":
    {"generation": generation, "jobs": jobs}[sys.argv[1]](*sys.argv[2:])
