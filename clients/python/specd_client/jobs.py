"""Training jobs of a trainer (`specd serve --role trainer`): TrainerService in trainer.proto."""
from __future__ import annotations

import builtins
from collections.abc import Iterable, Iterator, Mapping
import secrets

import grpc
from specd.v1 import trainer_pb2, trainer_pb2_grpc

from .connection import CallOptions
from .enum_names import full_name
from .errors import raising_specd_errors, stream_messages
from .job_types import Job, LogLine, Submission


class Jobs:
    """`client.jobs`: submit, get, list, cancel and follow jobs. Types and states are named as
    specctl names them: "pack", "drafter-stage1", "pipeline"; "running", "succeeded"."""

    def __init__(self, channel: grpc.Channel, options: CallOptions) -> None:
        self._stub = trainer_pb2_grpc.TrainerServiceStub(channel)
        self._options = options

    @raising_specd_errors
    def submit(
        self,
        type: str,
        config_yaml: str,
        *,
        submission_id: str | None = None,
        output_dir: str = "",
        labels: Mapping[str, str] | None = None,
    ) -> Submission:
        """Submits a job running `specd train TYPE` on config_yaml (the text of its YAML config).
        submission_id is the idempotency key: submitting again with it returns the same job
        (default: a random one). output_dir: on the trainer; default a new directory under its
        work root."""
        request = trainer_pb2.SubmitJobRequest(
            submission_id=submission_id or f"python-{secrets.token_hex(8)}",
            type=full_name(trainer_pb2.JobType, type),
            config_yaml=config_yaml,
            output_dir=output_dir,
            labels=labels or {},
        )
        response = self._stub.SubmitJob(request, **self._options.unary())
        return Submission(Job.from_proto(response.job), response.created)

    @raising_specd_errors
    def get(self, job_id: str) -> Job:
        request = trainer_pb2.GetJobRequest(job_id=job_id)
        return Job.from_proto(self._stub.GetJob(request, **self._options.unary()).job)

    @raising_specd_errors
    def list(self, *, states: Iterable[str] = (), types: Iterable[str] = ()) -> builtins.list[Job]:
        """Every job in one of `states` and of one of `types` (empty: any), newest first."""
        request = trainer_pb2.ListJobsRequest(
            states=[full_name(trainer_pb2.JobState, state) for state in states],
            types=[full_name(trainer_pb2.JobType, job_type) for job_type in types],
        )
        jobs = []
        while True:
            page = self._stub.ListJobs(request, **self._options.unary())
            jobs += [Job.from_proto(job) for job in page.jobs]
            if not page.next_page_token:
                return jobs
            request.page_token = page.next_page_token

    @raising_specd_errors
    def cancel(self, job_id: str, reason: str = "") -> Job:
        """Cancels a job; returns it "cancelling" (its process is being stopped) or "cancelled"."""
        request = trainer_pb2.CancelJobRequest(job_id=job_id, reason=reason)
        return Job.from_proto(self._stub.CancelJob(request, **self._options.unary()).job)

    def logs(
        self,
        job_id: str,
        *,
        follow: bool = False,
        tail: int | None = None,
        from_line: int | None = None,
    ) -> Iterator[LogLine]:
        """The job's log lines, from the first (or `tail` lines before the end, or from_line on).
        Without follow the lines end at the log's current end; with follow, once the job has
        ended and its log is sent (no deadline unless the client has a timeout)."""
        if tail is not None and from_line is not None:
            raise ValueError("give tail or from_line, not both")
        request = trainer_pb2.StreamLogsRequest(
            job_id=job_id, follow=follow, tail_lines=tail, from_line=from_line
        )
        options = self._options.stream() if follow else self._options.unary()
        for response in stream_messages(self._stub.StreamLogs(request, **options)):
            yield from (LogLine(line.line_number, line.text) for line in response.lines)
