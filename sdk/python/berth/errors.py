"""
berth's errors as Python exceptions. Every failure the API answers is a catalogue code
(docs/errors.md) with a message and a hint; the SDK keeps the code as it came, so a caller
branches on ``err.code``, never on the prose.
"""

from __future__ import annotations

import json


class BerthError(Exception):
    """An API failure: ``code`` (e.g. ``SESSION_NOT_FOUND``), ``message``, HTTP ``status`` and the API's ``hint``."""

    def __init__(self, code: str, message: str, status: int | None = None, hint: str | None = None):
        super().__init__(f"{code}: {message}" + (f" ({hint})" if hint else ""))
        self.code = code
        self.message = message
        self.status = status
        self.hint = hint


class BerthConnectionError(BerthError):
    """No berth host answers at the URL (or the connection broke mid-stream): ``HOST_UNREACHABLE``."""

    def __init__(self, message: str):
        super().__init__(
            "HOST_UNREACHABLE",
            message,
            None,
            "Start the host: berth up (or set BERTH_URL to where it runs).",
        )


class SandboxRestartedError(BerthError):
    """The sandbox a command ran in ended before the command did; ``reason`` says why (e.g. ``WorkerLost``)."""

    def __init__(self, message: str, reason: str | None):
        super().__init__("SANDBOX_RESTARTED", message)
        self.reason = reason


def error_from_response(status: int, body: bytes) -> BerthError:
    """The error an API answer carries (``{"error": {"code", "message", "hint"}}``)."""
    try:
        error = json.loads(body.decode("utf-8")).get("error") or {}
    except (ValueError, AttributeError):
        # Not berth's JSON: a page a proxy in front of it wrote.
        error = {}
    code = error.get("code") if isinstance(error, dict) else None
    if not code and 502 <= status <= 504:
        # A balancer in front of berth answers 502-504 itself when no host behind it answers.
        return BerthConnectionError(f"No berth host answers behind the load balancer (HTTP {status})")
    return BerthError(
        code or "INTERNAL",
        error.get("message") or f"API answered {status}",
        status,
        error.get("hint"),
    )


def error_from_exec_line(line: dict) -> BerthError:
    """The error an exec stream's terminal ``{"type": "error"}`` line carries."""
    code = str(line.get("code") or "INTERNAL")
    message = str(line.get("message") or "the command failed")
    if code == "SANDBOX_RESTARTED":
        return SandboxRestartedError(message, line.get("reason"))
    return BerthError(code, message)
