"""Python client of specd's gRPC API. The generated stubs are importable too, as the protos'
package names them: `from specd.v1 import generation_pb2, generation_pb2_grpc`."""
from .client import Client
from .errors import SpecdError
from .generation_types import (
    Acceptance,
    Candidate,
    Completion,
    Message,
    ModelInfo,
    Prompt,
    RegimeThresholds,
    Sampling,
    Speculation,
    Timing,
    TokenLogprob,
    Usage,
)
from .job_types import Job, JobProgress, LogLine, Submission

__all__ = [
    "Acceptance",
    "Candidate",
    "Client",
    "Completion",
    "Job",
    "JobProgress",
    "LogLine",
    "Message",
    "ModelInfo",
    "Prompt",
    "RegimeThresholds",
    "Sampling",
    "SpecdError",
    "Speculation",
    "Submission",
    "Timing",
    "TokenLogprob",
    "Usage",
]
