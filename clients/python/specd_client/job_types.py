"""Training jobs as typed Python values: the fields of protos/specd/v1/trainer.proto under the same
names, with job types and states as specctl spells them ("drafter-stage1", "running")."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from google.protobuf.message import Message as ProtoMessage
from specd.v1 import trainer_pb2

from .enum_names import short_name

# A job never leaves these states.
TERMINAL_STATES = frozenset({"succeeded", "failed", "cancelled"})


def _time(message: ProtoMessage, field: str) -> datetime | None:
    if not message.HasField(field):
        return None
    return getattr(message, field).ToDatetime(tzinfo=timezone.utc)


@dataclass(frozen=True)
class JobProgress:
    step: int
    total_steps: int  # 0: not known yet
    loss: float | None
    validation_loss: float | None
    tokens_per_second: float
    stage: str | None  # for a pipeline, the stage now running; otherwise the job's own type
    update_time: datetime | None
    estimated_time_remaining: timedelta | None

    @classmethod
    def from_proto(cls, m: trainer_pb2.JobProgress) -> JobProgress:
        return cls(
            step=m.step,
            total_steps=m.total_steps,
            loss=m.loss if m.HasField("loss") else None,
            validation_loss=m.validation_loss if m.HasField("validation_loss") else None,
            tokens_per_second=m.tokens_per_second,
            stage=short_name(trainer_pb2.JobType, m.stage),
            update_time=_time(m, "update_time"),
            estimated_time_remaining=m.estimated_time_remaining.ToTimedelta()
            if m.HasField("estimated_time_remaining")
            else None,
        )


@dataclass(frozen=True)
class Job:
    job_id: str
    submission_id: str
    type: str  # "pack", "pretrain", ..., "pipeline"
    state: str  # "queued", "running", "succeeded", "failed", "cancelling" or "cancelled"
    config_yaml: str
    output_dir: str
    labels: dict[str, str]
    progress: JobProgress
    failure_reason: str  # with state "failed": one line; the log has the details
    exit_code: int | None  # negative: killed by that signal
    attempt: int
    last_checkpoint: str
    create_time: datetime | None
    start_time: datetime | None
    end_time: datetime | None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @classmethod
    def from_proto(cls, m: trainer_pb2.Job) -> Job:
        return cls(
            job_id=m.job_id,
            submission_id=m.submission_id,
            type=short_name(trainer_pb2.JobType, m.type) or "unspecified",
            state=short_name(trainer_pb2.JobState, m.state) or "unspecified",
            config_yaml=m.config_yaml,
            output_dir=m.output_dir,
            labels=dict(m.labels),
            progress=JobProgress.from_proto(m.progress),
            failure_reason=m.failure_reason,
            exit_code=m.exit_code if m.HasField("exit_code") else None,
            attempt=m.attempt,
            last_checkpoint=m.last_checkpoint,
            create_time=_time(m, "create_time"),
            start_time=_time(m, "start_time"),
            end_time=_time(m, "end_time"),
        )


@dataclass(frozen=True)
class Submission:
    job: Job
    created: bool  # False: the submission_id matched an existing job, which this is


@dataclass(frozen=True)
class LogLine:
    line_number: int  # 0-based, consecutive across a stream
    text: str
