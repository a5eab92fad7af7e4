"""The Kubernetes source's errors, and the words that describe a failed request."""

from __future__ import annotations

import json

import urllib3
from kubernetes.client.exceptions import ApiException


class KubeError(Exception):
    """A Kubernetes API problem, phrased for one line on stderr."""


class KubeConfigError(KubeError):
    """No usable client configuration (kubeconfig or in-cluster service account)."""


class KubeStatusError(KubeError):
    """An API answer a retry cannot change (401, 403, 404, ...): ``status`` is its HTTP
    status, ``what`` the resource that was asked for."""

    def __init__(self, text: str, status: int, what: str) -> None:
        super().__init__(text)
        self.status = status
        self.what = what


class Expired(Exception):
    """A continue token the server no longer accepts (410): the list restarts."""


class Failure(Exception):
    """One failed attempt that may be retried; ``text`` says why, ``unreachable`` how."""

    def __init__(self, text: str, unreachable: bool) -> None:
        super().__init__(text)
        self.text = text
        self.unreachable = unreachable


def failure_reason(exc: BaseException) -> str:
    """The root cause of a connection error in a few words (``Connection refused``)."""
    chain: list[BaseException] = []
    todo: list[BaseException] = [exc]
    while todo:
        current = todo.pop(0)
        if any(current is seen for seen in chain):
            continue
        chain.append(current)
        nested = (getattr(current, "reason", None), current.__cause__, current.__context__)
        todo.extend(e for e in nested if isinstance(e, BaseException))
    for current in chain:
        if isinstance(current, OSError) and current.strerror:
            return str(current.strerror)
    if any(isinstance(e, TimeoutError | urllib3.exceptions.TimeoutError) for e in chain):
        return "timed out"
    text = str(chain[-1]).split(">: ", 1)[-1]  # drop urllib3's "<connection object at ...>: "
    return " ".join(text.split()) or type(chain[-1]).__name__


def status_text(exc: ApiException) -> str:
    message = ""
    try:
        body = json.loads(exc.body) if exc.body else {}
        if isinstance(body, dict):
            message = str(body.get("message") or "")
    except (ValueError, TypeError):
        pass
    text = f"HTTP {exc.status} {exc.reason or ''}".strip()
    return f"{text} ({' '.join(message.split())[:200]})" if message else text
