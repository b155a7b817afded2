"""What the generation calls take and return, as typed Python values: the fields of
protos/specd/v1/generation.proto and types.proto under the same names."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypedDict, Union, cast

from google.protobuf.message import Message as ProtoMessage
from specd.v1 import generation_pb2, types_pb2

from .enum_names import full_name, short_name


class Sampling(TypedDict, total=False):
    """SamplingParams (types.proto); a field left out takes the server's default."""

    temperature: float
    top_p: float
    top_k: int
    min_p: float
    repetition_penalty: float
    presence_penalty: float
    frequency_penalty: float
    seed: int
    max_new_tokens: int
    min_new_tokens: int
    stop: list[str]
    stop_token_ids: list[int]
    ignore_eos: bool
    include_stop_str_in_output: bool
    skip_special_tokens: bool
    logprobs: bool
    top_logprobs: int


class Speculation(TypedDict, total=False):
    """SpeculationParams (generation.proto): changes speed, never the output's distribution."""

    block_size: int
    draft_window: int
    min_draft_confidence: float
    draft_acceptance: str  # "match" or "rejection-sampling"


def speculation_message(speculation: Speculation | None) -> generation_pb2.SpeculationParams:
    fields: dict[str, Any] = dict(speculation or {})
    if "draft_acceptance" in fields:
        fields["draft_acceptance"] = full_name(
            generation_pb2.DraftAcceptance, fields["draft_acceptance"]
        )
    return generation_pb2.SpeculationParams(**fields)


def speculation_fields(message: generation_pb2.SpeculationParams) -> Speculation:
    fields = fields_set(message)
    if "draft_acceptance" in fields:
        fields["draft_acceptance"] = short_name(
            generation_pb2.DraftAcceptance, fields["draft_acceptance"]
        )
    return cast(Speculation, fields)


class _ChatTurn(TypedDict):
    role: str  # "system", "user", "assistant" or "tool"
    content: str


class Message(_ChatTurn, total=False):
    """One turn of a conversation (ChatMessage)."""

    reasoning_content: str


# Text (tokenized as is), token ids, or a conversation (rendered with the chat template).
Prompt = Union[str, Sequence[int], Sequence[Message]]


def prompt_message(prompt: Prompt, enable_thinking: bool | None) -> generation_pb2.Prompt:
    if isinstance(prompt, str):
        message = generation_pb2.Prompt(text=prompt)
    elif all(isinstance(item, int) for item in prompt):
        ids = cast(Sequence[int], prompt)
        message = generation_pb2.Prompt(token_ids=generation_pb2.TokenIds(ids=ids))
    else:
        turns = [generation_pb2.ChatMessage(**turn) for turn in cast(Sequence[Message], prompt)]
        message = generation_pb2.Prompt(chat=generation_pb2.ChatInput(messages=turns))
    if enable_thinking is not None:
        if not message.HasField("chat"):
            raise ValueError("enable_thinking applies to a conversation, not to text or token ids")
        message.chat.enable_thinking = enable_thinking
    return message


def fields_set(message: ProtoMessage) -> dict[str, Any]:
    """The fields a message has set, by name (repeated ones as lists)."""
    return {
        field.name: list(value) if field.is_repeated else value
        for field, value in message.ListFields()
    }


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int


@dataclass(frozen=True)
class Acceptance:
    """AcceptanceStats: speculative decoding's statistics, as vLLM's spec-decode metrics define
    them."""

    num_drafts: int
    num_draft_tokens: int
    num_accepted_tokens: int
    accepted_per_position: list[int]
    mean_acceptance_length: float
    num_target_only_steps: int


@dataclass(frozen=True)
class Candidate:
    token_id: int
    logprob: float


@dataclass(frozen=True)
class TokenLogprob:
    token_id: int
    logprob: float
    top_logprobs: list[Candidate]


@dataclass(frozen=True)
class Timing:
    """RequestTiming: where the request's time went, as the server measured it."""

    queue_time: timedelta
    time_to_first_token: timedelta
    decode_time: timedelta
    draft_time: timedelta
    verify_time: timedelta


@dataclass(frozen=True)
class Completion:
    """A GenerateResponse, or one GenerateStreamResponse: there token_ids, text, logprobs and
    acceptance_lengths are new since the previous message, usage and acceptance are totals so
    far, and finish_reason is None on every message but the last."""

    request_id: str
    token_ids: list[int]
    text: str
    finish_reason: str | None  # "stop", "length" or "abort"
    # With finish_reason "stop": the token id or the stop string that ended generation.
    stop_token_id: int | None
    stop_string: str | None
    usage: Usage
    acceptance: Acceptance
    acceptance_lengths: list[int]
    regime: str | None  # the input-length regime: "short", "medium" or "long"
    seed: int
    logprobs: list[TokenLogprob]
    prompt_token_ids: list[int]
    timing: Timing | None

    @classmethod
    def from_proto(
        cls, m: generation_pb2.GenerateResponse | generation_pb2.GenerateStreamResponse
    ) -> Completion:
        stop = m.stop_match.WhichOneof("stop")
        return cls(
            request_id=m.request_id,
            token_ids=list(m.token_ids),
            text=m.text,
            finish_reason=short_name(types_pb2.FinishReason, m.finish_reason),
            stop_token_id=m.stop_match.token_id if stop == "token_id" else None,
            stop_string=m.stop_match.stop_string if stop == "stop_string" else None,
            usage=Usage(m.usage.prompt_tokens, m.usage.completion_tokens),
            acceptance=Acceptance(
                num_drafts=m.acceptance.num_drafts,
                num_draft_tokens=m.acceptance.num_draft_tokens,
                num_accepted_tokens=m.acceptance.num_accepted_tokens,
                accepted_per_position=list(m.acceptance.accepted_per_position),
                mean_acceptance_length=m.acceptance.mean_acceptance_length,
                num_target_only_steps=m.acceptance.num_target_only_steps,
            ),
            acceptance_lengths=list(m.acceptance_lengths),
            regime=short_name(types_pb2.InputLengthRegime, m.regime),
            seed=m.seed,
            logprobs=[
                TokenLogprob(
                    token_id=p.token_id,
                    logprob=p.logprob,
                    top_logprobs=[Candidate(c.token_id, c.logprob) for c in p.top_logprobs],
                )
                for p in m.logprobs
            ],
            prompt_token_ids=list(m.prompt_token_ids),
            timing=Timing(
                queue_time=m.timing.queue_time.ToTimedelta(),
                time_to_first_token=m.timing.time_to_first_token.ToTimedelta(),
                decode_time=m.timing.decode_time.ToTimedelta(),
                draft_time=m.timing.draft_time.ToTimedelta(),
                verify_time=m.timing.verify_time.ToTimedelta(),
            )
            if m.HasField("timing")
            else None,
        )


@dataclass(frozen=True)
class RegimeThresholds:
    """The longest prompts (tokens) of the "short" and the "medium" input-length regimes."""

    short_max_tokens: int
    medium_max_tokens: int


@dataclass(frozen=True)
class ModelInfo:
    """GetModelInfoResponse: the served model, its limits and the defaults of unset parameters."""

    model_name: str
    target_model: str
    drafter_model: str
    target_quantization: str
    drafter_quantization: str
    vocab_size: int
    max_context_length: int
    eos_token_ids: list[int]
    drafter_block_size: int
    default_draft_window: int
    regime_thresholds: RegimeThresholds
    default_sampling_params: Sampling
    default_speculation_params: Speculation
    max_stop_strings: int
    max_top_logprobs: int
    server_version: str

    @classmethod
    def from_proto(cls, m: generation_pb2.GetModelInfoResponse) -> ModelInfo:
        return cls(
            model_name=m.model_name,
            target_model=m.target_model,
            drafter_model=m.drafter_model,
            target_quantization=m.target_quantization,
            drafter_quantization=m.drafter_quantization,
            vocab_size=m.vocab_size,
            max_context_length=m.max_context_length,
            eos_token_ids=list(m.eos_token_ids),
            drafter_block_size=m.drafter_block_size,
            default_draft_window=m.default_draft_window,
            regime_thresholds=RegimeThresholds(
                m.regime_thresholds.short_max_tokens, m.regime_thresholds.medium_max_tokens
            ),
            default_sampling_params=cast(Sampling, fields_set(m.default_sampling_params)),
            default_speculation_params=speculation_fields(m.default_speculation_params),
            max_stop_strings=m.max_stop_strings,
            max_top_logprobs=m.max_top_logprobs,
            server_version=m.server_version,
        )
