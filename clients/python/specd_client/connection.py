"""What every call of a Client shares: the channel (plain text, TLS or mutual TLS), the API key as
`authorization: Bearer` metadata, and the deadlines, with the defaults specctl has."""
from __future__ import annotations

from dataclasses import dataclass
import os
from pathlib import Path
from typing import Any, Union

import grpc

PathLike = Union[str, "os.PathLike[str]"]

# Seconds a unary call may take when the client sets no timeout; streams then have no deadline.
DEFAULT_TIMEOUT = 30.0


def open_channel(
    address: str,
    tls_ca: PathLike | None,
    tls_cert: PathLike | None,
    tls_key: PathLike | None,
    tls_server_name: str | None,
) -> grpc.Channel:
    """TLS when tls_ca is given (with tls_cert and tls_key: mutual); plain text otherwise."""
    if tls_ca is None:
        if tls_cert is not None or tls_key is not None or tls_server_name is not None:
            raise ValueError("tls_cert, tls_key and tls_server_name need tls_ca")
        return grpc.insecure_channel(address)
    if (tls_cert is None) != (tls_key is None):
        raise ValueError("give tls_cert and tls_key together")
    credentials = grpc.ssl_channel_credentials(
        root_certificates=Path(tls_ca).read_bytes(),
        private_key=Path(tls_key).read_bytes() if tls_key is not None else None,
        certificate_chain=Path(tls_cert).read_bytes() if tls_cert is not None else None,
    )
    # A server reached by address (a pod IP) is checked against the name its certificate carries.
    options = [("grpc.ssl_target_name_override", tls_server_name)] if tls_server_name else []
    return grpc.secure_channel(address, credentials, options=options)


@dataclass(frozen=True)
class CallOptions:
    api_key: str | None
    timeout: float | None  # None: DEFAULT_TIMEOUT for unary calls, no deadline for streams

    def unary(self) -> dict[str, Any]:
        return self._options(self.timeout if self.timeout is not None else DEFAULT_TIMEOUT)

    def stream(self) -> dict[str, Any]:
        return self._options(self.timeout)

    def _options(self, timeout: float | None) -> dict[str, Any]:
        metadata = (("authorization", f"Bearer {self.api_key}"),) if self.api_key else None
        return {"metadata": metadata, "timeout": timeout}
