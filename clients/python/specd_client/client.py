"""The client of specd's public gRPC API: GenerationService (generation.proto) and, on a trainer,
TrainerService (`client.jobs`)."""
from __future__ import annotations

from collections.abc import Iterator
import os
from typing import TYPE_CHECKING, Any

from specd.v1 import generation_pb2, generation_pb2_grpc, types_pb2

from .connection import CallOptions, PathLike, open_channel
from .errors import raising_specd_errors, stream_messages
from .generation_types import (
    Completion,
    ModelInfo,
    Prompt,
    Sampling,
    Speculation,
    prompt_message,
    speculation_message,
)
from .jobs import Jobs

if TYPE_CHECKING:
    from typing_extensions import Unpack


class Client:
    """A connection to a specd server (`specd serve`), with the options specctl has:

        with Client("localhost:50051", api_key="...") as client:
            print(client.generate("def fibonacci(n):", max_new_tokens=32, temperature=0).text)

    api_key: sent as `authorization: Bearer` metadata; default $SPECD_API_KEY, if set.
    tls_ca: connect over TLS, trusting servers whose certificate these PEM roots sign; with
    tls_cert and tls_key, present that certificate (mutual TLS); tls_server_name: the name the
    server's certificate must carry (default: the host of the address).
    timeout: seconds per call; default 30 s, and no deadline for streams.
    A failed call raises SpecdError with the gRPC status code and message."""

    def __init__(
        self,
        address: str = "localhost:50051",
        *,
        api_key: str | None = None,
        tls_ca: PathLike | None = None,
        tls_cert: PathLike | None = None,
        tls_key: PathLike | None = None,
        tls_server_name: str | None = None,
        timeout: float | None = None,
    ) -> None:
        self._channel = open_channel(address, tls_ca, tls_cert, tls_key, tls_server_name)
        self._options = CallOptions(
            api_key=api_key if api_key is not None else os.environ.get("SPECD_API_KEY"),
            timeout=timeout,
        )
        self._stub = generation_pb2_grpc.GenerationServiceStub(self._channel)
        self.jobs = Jobs(self._channel, self._options)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @raising_specd_errors
    def generate(
        self,
        prompt: Prompt,
        *,
        request_id: str = "",
        enable_thinking: bool | None = None,
        speculation: Speculation | None = None,
        return_prompt_token_ids: bool = False,
        **sampling: Unpack[Sampling],
    ) -> Completion:
        """Generates a whole completion. prompt: text (tokenized as is), token ids, or a
        conversation ([{"role": "user", "content": "Hi"}], rendered with the chat template;
        enable_thinking only applies to one). Sampling keywords (temperature, max_new_tokens,
        stop, seed, ...) are SamplingParams' fields; unset ones take the server's defaults."""
        request = generation_pb2.GenerateRequest(
            **_request_fields(
                prompt, request_id, enable_thinking, speculation, return_prompt_token_ids, sampling
            )
        )
        return Completion.from_proto(self._stub.Generate(request, **self._options.unary()))

    def stream(
        self,
        prompt: Prompt,
        *,
        request_id: str = "",
        enable_thinking: bool | None = None,
        speculation: Speculation | None = None,
        return_prompt_token_ids: bool = False,
        **sampling: Unpack[Sampling],
    ) -> Iterator[Completion]:
        """Generates a completion as it is decoded, with the arguments of generate: each
        Completion holds what is new since the previous one (see Completion); their token_ids and
        text add up to generate's. Leaving the loop early aborts the request."""
        request = generation_pb2.GenerateStreamRequest(
            **_request_fields(
                prompt, request_id, enable_thinking, speculation, return_prompt_token_ids, sampling
            )
        )
        messages = self._stub.GenerateStream(request, **self._options.stream())
        for message in stream_messages(messages):
            yield Completion.from_proto(message)

    @raising_specd_errors
    def abort(self, request_id: str, reason: str = "") -> bool:
        """Stops an in-flight request from any connection; False if it was unknown or finished."""
        request = generation_pb2.AbortRequest(request_id=request_id, reason=reason)
        return self._stub.Abort(request, **self._options.unary()).aborted

    @raising_specd_errors
    def model_info(self) -> ModelInfo:
        response = self._stub.GetModelInfo(
            generation_pb2.GetModelInfoRequest(), **self._options.unary()
        )
        return ModelInfo.from_proto(response)


def _request_fields(
    prompt: Prompt,
    request_id: str,
    enable_thinking: bool | None,
    speculation: Speculation | None,
    return_prompt_token_ids: bool,
    sampling: Sampling,
) -> dict[str, Any]:
    """The fields GenerateRequest and GenerateStreamRequest share (all of them)."""
    return {
        "request_id": request_id,
        "prompt": prompt_message(prompt, enable_thinking),
        "sampling": types_pb2.SamplingParams(**sampling),
        "speculation": speculation_message(speculation),
        "return_prompt_token_ids": return_prompt_token_ids,
    }
