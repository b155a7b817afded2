"""The one exception the client raises for a failed call: the server's gRPC status, kept whole."""
from __future__ import annotations

from collections.abc import Callable, Iterator
import functools
from typing import ParamSpec, TypeVar

import grpc

P = ParamSpec("P")
T = TypeVar("T")


class SpecdError(Exception):
    """A call ended with a gRPC status other than OK; protos/specd/v1/*.proto say what each code
    means (e.g. UNAUTHENTICATED: the API key is missing or wrong)."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


def _from_rpc_error(error: grpc.RpcError) -> SpecdError:
    # What a call raises is also a grpc.Call, which carries the status.
    return SpecdError(error.code(), error.details() or "")


def raising_specd_errors(call: Callable[P, T]) -> Callable[P, T]:
    """Wraps a method that makes one unary call: grpc.RpcError becomes SpecdError."""

    @functools.wraps(call)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return call(*args, **kwargs)
        except grpc.RpcError as error:
            raise _from_rpc_error(error) from error

    return wrapped


def stream_messages(stream: Iterator[T]) -> Iterator[T]:
    """Yields the messages of a server stream (a grpc call); a status other than OK ends it with
    SpecdError. Leaving the loop early cancels the call, so the server stops the work now rather
    than when the call is garbage-collected."""
    try:
        yield from stream
    except grpc.RpcError as error:
        raise _from_rpc_error(error) from error
    finally:
        stream.cancel()  # type: ignore[attr-defined]  # nothing once the call has ended
