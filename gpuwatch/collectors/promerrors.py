"""Failures of the requests to Prometheus: which are transient (retried), and one line for the
user about each (no I/O)."""

from __future__ import annotations

import orjson
import requests
from prometheus_api_client.exceptions import PrometheusApiClientException
from urllib3.exceptions import HTTPError as TransportError
from urllib3.exceptions import ReadTimeoutError

from gpuwatch.collectors.promjson import MatrixError

_TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})


class StatusError(Exception):
    """A non-200 answer: its status and Prometheus's error text."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"HTTP status {status}" + (f": {text}" if text else ""))
        self.status = status


class PartialError(Exception):
    """A successful answer that says it is partial: retried like a transient failure."""

    def __init__(self, warnings: tuple[str, ...]) -> None:
        super().__init__(f"partial answer: {'; '.join(warnings)}")
        self.warnings = warnings


FAILURES = (
    PartialError,
    requests.exceptions.RequestException,
    TransportError,
    StatusError,
    MatrixError,
    PrometheusApiClientException,
)


def transient(exc: Exception) -> bool:
    if isinstance(exc, PartialError):
        return True
    if isinstance(exc, StatusError):
        return exc.status in _TRANSIENT_STATUS
    if isinstance(exc, PrometheusApiClientException):
        return any(f"HTTP Status Code {code}" in str(exc) for code in _TRANSIENT_STATUS)
    return isinstance(
        exc, requests.exceptions.ConnectionError | requests.exceptions.Timeout | TransportError
    )


def describe(exc: Exception) -> str:
    if isinstance(exc, requests.exceptions.ConnectionError):
        return "connection refused" if "Connection refused" in str(exc) else "cannot connect"
    if isinstance(exc, requests.exceptions.Timeout | ReadTimeoutError):
        return "timed out"
    if isinstance(exc, TransportError):
        return "connection broken while reading the answer"
    return str(exc).split(" (b'", maxsplit=1)[0][:200]


def error_text(body: bytes) -> str:
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body[:200].decode(errors="replace").strip()
    return str(answer.get("error", "")) if isinstance(answer, dict) else ""
