"""specd's HTTP API as the `openai` client sees it (tests/interop/openai_test.cc runs this).

Usage: openai_client.py BASE_URL API_KEY MODEL
Prints one line per check; exits non-zero on the first that fails.
"""
import sys

import openai

from checks import check

base_url, api_key, model = sys.argv[1:4]
client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
greedy = {"temperature": 0, "max_tokens": 12, "extra_body": {"ignore_eos": True}}


models = [m.id for m in client.models.list()]
check("models lists the served model", models == [model], models)

whole = client.completions.create(model=model, prompt="def fibonacci(n):", **greedy)
check("a completion has its text and usage",
      whole.choices[0].finish_reason == "length" and whole.usage.completion_tokens == 12,
      whole)
streamed = "".join(chunk.choices[0].text for chunk in client.completions.create(
    model=model, prompt="def fibonacci(n):", stream=True, **greedy))
check("a completion streamed adds up to the whole", streamed == whole.choices[0].text,
      (streamed, whole.choices[0].text))

messages = [{"role": "user", "content": "Name three colours."}]
chat = client.chat.completions.create(model=model, messages=messages, seed=7, **greedy)
check("a chat reply is the assistant's", chat.choices[0].message.role == "assistant", chat)
text, usage, roles = "", None, []
for chunk in client.chat.completions.create(model=model, messages=messages, seed=7, stream=True,
                                            stream_options={"include_usage": True}, **greedy):
    if chunk.usage is not None:
        usage = chunk.usage
    for choice in chunk.choices:
        text += choice.delta.content or ""
        roles.append(choice.delta.role)
check("a chat stream adds up to the whole reply", text == chat.choices[0].message.content,
      (text, chat.choices[0].message.content))
check("its first delta carries the role", roles[0] == "assistant" and set(roles[1:]) <= {None},
      roles)
check("its last chunk carries the usage", usage == chat.usage, (usage, chat.usage))

try:
    client.completions.create(model=model, prompt="x", n=2)
    check("n > 1 is refused", False, "it was served")
except openai.BadRequestError as error:
    check("n > 1 is refused", error.status_code == 400 and error.body["param"] == "n", error.body)
try:
    client.completions.create(model="gpt-4o", prompt="x")
    check("another model is not found", False, "it was served")
except openai.NotFoundError:
    check("another model is not found", True)
try:
    openai.OpenAI(base_url=base_url, api_key="wrong", max_retries=0).models.list()
    check("a wrong key is refused", False, "it was served")
except openai.AuthenticationError:
    check("a wrong key is refused", True)
